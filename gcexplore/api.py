"""The API layer's public face: device facts, split planning, partitions with explicit streams,
and ``use`` (stateless save/restore of the current context). Defined in :mod:`gcexplore.device`."""

from .device.driver import (DeviceInfo, GreenContextError, PlannedGroup, SplitPlan, UnsupportedError,
                            device_count, device_info, gpu_available, plan_split, require_stream, use)
from .device.partitions import Partition, Partitioning, release_contexts, split, whole_device

__all__ = ["DeviceInfo", "GreenContextError", "Partition", "Partitioning", "PlannedGroup", "SplitPlan",
           "UnsupportedError", "device_count", "device_info", "gpu_available", "plan_split",
           "release_contexts", "require_stream", "split", "use", "whole_device"]
