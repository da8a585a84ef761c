"""What the engine reads beside its timings: SM clock and board power through NVML (NaN without
it), and named NVTX ranges for Nsight Systems when the nvtx package is present."""

from __future__ import annotations

import contextlib
import math
from typing import Any

__all__ = ["Nvml", "nvtx_available", "nvtx_module", "nvtx_range"]


class Nvml:
    """SM clock and board power via nvidia-ml-py, or NaN when it is absent."""

    def __init__(self, device_index: int, pci_bus_id: str = ""):
        self.handle = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            try:
                if not pci_bus_id:  # DeviceInfo read it already; a hand-built one may lack it
                    from cuda.core import Device

                    pci_bus_id = Device(device_index).pci_bus_id
                self.handle = pynvml.nvmlDeviceGetHandleByPciBusId_v2(pci_bus_id)
            except Exception:
                self.handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
        except Exception:  # no nvidia-ml-py or no NVML: columns stay NaN
            self.handle = None

    @property
    def available(self) -> bool:
        return self.handle is not None

    def read(self) -> tuple[float, float]:
        if self.handle is None:
            return math.nan, math.nan
        try:
            clock = float(self._nvml.nvmlDeviceGetClockInfo(self.handle, self._nvml.NVML_CLOCK_SM))
            power = float(self._nvml.nvmlDeviceGetPowerUsage(self.handle)) / 1000.0
            return clock, power
        except Exception:
            return math.nan, math.nan


_nvtx_module: Any = False  # False: not looked up yet; None: absent


def nvtx_module():
    """The nvtx package, or None where it is absent (looked up once)."""
    global _nvtx_module
    if _nvtx_module is False:
        try:
            import nvtx

            _nvtx_module = nvtx
        except ImportError:
            _nvtx_module = None
    return _nvtx_module


def nvtx_range(message: str):
    """An NVTX range in the "gcexplore" domain when the nvtx package is present."""
    nvtx = nvtx_module()
    if nvtx is None:
        return contextlib.nullcontext()
    return nvtx.annotate(message, domain="gcexplore")


def nvtx_available() -> bool:
    """True when the nvtx package is present (ranges show in Nsight Systems)."""
    return nvtx_module() is not None
