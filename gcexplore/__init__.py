"""gcexplore: explore and profile CUDA green contexts.

Split a GPU's SMs into partitions, run workloads on them through explicit streams,
measure what overlap buys, and look at it in Jupyter. Importing gcexplore touches
no GPU.
"""

__version__ = "0.1.0"

from .api import (
    DeviceInfo,
    GreenContextError,
    Partition,
    Partitioning,
    PlannedGroup,
    SplitPlan,
    UnsupportedError,
    device_count,
    device_info,
    gpu_available,
    plan_split,
    release_contexts,
    require_stream,
    split,
    use,
    whole_device,
)
from .plot import (
    figure_stamp,
    plot_isolation,
    plot_occupancy,
    plot_scaling,
    plot_sweep,
    plot_throughput,
)
from .profile import (
    MeasurementAborted,
    MeasurementFailed,
    MeasurementInterrupted,
    best_split,
    isolation,
    launch_gap,
    occupancy,
    profile_overlap,
    scaling,
    sm_busy,
    summarize,
    sweep,
)
from .results import load, load_recorded, save, to_chrome_trace
from .widgets import Explorer, SweepExplorer, explore
from .workloads import Workload, builtin, from_cupy, from_kernel, from_torch

__all__ = [
    "DeviceInfo",
    "Explorer",
    "GreenContextError",
    "MeasurementAborted",
    "MeasurementFailed",
    "MeasurementInterrupted",
    "Partition",
    "Partitioning",
    "PlannedGroup",
    "SplitPlan",
    "SweepExplorer",
    "UnsupportedError",
    "Workload",
    "__version__",
    "best_split",
    "builtin",
    "device_count",
    "device_info",
    "explore",
    "from_cupy",
    "from_kernel",
    "from_torch",
    "isolation",
    "launch_gap",
    "load",
    "load_recorded",
    "occupancy",
    "profile_overlap",
    "save",
    "scaling",
    "sm_busy",
    "summarize",
    "sweep",
    "to_chrome_trace",
    "figure_stamp",
    "gpu_available",
    "plan_split",
    "release_contexts",
    "plot_isolation",
    "plot_occupancy",
    "plot_scaling",
    "plot_sweep",
    "plot_throughput",
    "require_stream",
    "split",
    "use",
    "whole_device",
]
