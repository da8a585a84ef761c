"""The communication-SMs family: NCCL collectives on a partition beside compute. ``collectives``
holds the collectives as workloads, ``rank`` what one rank measures, ``launch`` starts the ranks
(``comm_sweep``), ``tune`` recommends the SMs to give communication, ``analysis`` computes bus
bandwidth, steps and attribution, ``view`` draws them, ``cli`` is ``gcexplore comm``. Built on the
core; nothing in the core imports it."""

from .._lazy import face
from .._registry import register_command
from . import kind as _kind  # noqa: F401 (registers the family's result kind)

PUBLIC = {
    "rank": ("CommSpec",),
    "launch": ("CommLaunchError", "comm_sweep"),
    "tune": ("recommend_comm",),
    "analysis": ("bandwidth_table", "comm_answer", "comm_dram", "comm_table", "nccl_attribution", "zero_sm_table"),
    "constants": ("comm_constants",),
    "view": ("plot_comm", "plot_comm_constants"),
}
EXTRA = {
    "analysis": ("PM_TAG", "bus_bw_gbs", "bus_factor", "comm_steps", "pm_step_dram"),
    "collectives": ("COLLECTIVES", "collective", "nccl_versions"),
    "constants": ("COMM_CONSTANTS",),
}
__all__, __getattr__, __dir__, WHERE = face(__name__, PUBLIC, EXTRA)

register_command("comm", f"{__name__}.cli:add_comm")
