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
    "predict": ("plot_predict",),
    "compare": ("plot_compare",),
    "serving": ("plot_serving",),
    "comm": ("plot_comm",),
    "partition_fit": ("plot_partition_fit",),
}
__all__, __getattr__, __dir__, WHERE = face(__name__, PUBLIC)
