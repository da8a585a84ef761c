"""Views: figures and text reports, one file per result kind. They draw what ``analysis``
computed and compute no number themselves."""

from .._lazy import face

PUBLIC = {
    "_style": ("figure_stamp",),
    "overlap": ("plot_sweep", "plot_throughput"),
    "scaling": ("plot_scaling",),
    "occupancy": ("plot_occupancy",),
    "isolation": ("plot_isolation",),
    "timeline": ("plot_sm_usage", "plot_timeline"),
    "tune": ("plot_tune",),
    "pm": ("plot_dram_timeline",),
    "compare": ("plot_compare",),
    "partition_fit": ("plot_partition_fit",),
}
# names this package offered before the families had packages of their own
MOVED = {"plot_predict": "gcexplore.prediction.view", "plot_serving": "gcexplore.serving.view",
         "plot_comm": "gcexplore.comm.view"}
__all__, __getattr__, __dir__, WHERE = face(__name__, PUBLIC, moved=MOVED)
