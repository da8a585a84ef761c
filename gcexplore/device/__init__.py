"""The device layer: driver checks and device facts, split planning, partitions (green contexts
with explicit streams), the built-in kernels, and ``use`` (stateless save/restore of the current
context). ``gcexplore.api`` is this layer's public face."""

from .._lazy import face

PUBLIC = {
    "driver": ("DeviceInfo", "GreenContextError", "PlannedGroup", "SplitPlan", "UnsupportedError",
               "device_count", "device_info", "gpu_available", "plan_split", "require_stream", "use"),
    "partitions": ("Partition", "Partitioning", "release_contexts", "split", "whole_device"),
}
__all__, __getattr__, __dir__, WHERE = face(__name__, PUBLIC)
