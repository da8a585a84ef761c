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

__all__ = [
    "DeviceInfo",
    "GreenContextError",
    "Partition",
    "Partitioning",
    "PlannedGroup",
    "SplitPlan",
    "UnsupportedError",
    "__version__",
    "device_count",
    "device_info",
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
