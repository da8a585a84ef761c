"""The engine's gate: what holds the GPU while the host enqueues a repetition.

- ``flag`` (the default): a kernel on the gate stream spins on a word of host-mapped pinned
  memory until the host writes the repetition's sequence number there, which it does once every
  slot of the repetition is enqueued. The GPU waits exactly as long as the host enqueues, and a
  host stall costs its own length once. The kernel gives up after ``timeout_us`` (a workload that
  waits for the GPU inside its own launch cannot hang the GPU) and records, per repetition, whether
  the flag or the timeout let it go and how long it waited: a repetition let go by the timeout may
  hold host time and is measured again.
- ``timed``: a spin of a fixed length, sized after the host's enqueue times (2 x the last + 20 us,
  shrinking by 0.8 per repetition): the engine's gate before the flag, kept for A/B runs and where
  host-mapped memory cannot be had.

``GCEXPLORE_GATE`` picks one (:func:`gate_kind`); ``Engine(gate=)`` overrides it.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

import numpy as np

from ..device.driver import check

__all__ = ["GATE_KINDS", "FlagGate", "gate_kind", "phase_totals"]

GATE_KINDS = ("flag", "timed")
RING = 64  # repetitions in flight at once are 2; the ring only has to outlast them
_GAVE_UP = 1 << 63  # set in a status word when the timeout, not the flag, let the repetition go


def gate_kind(value: str | None = None) -> str:
    """``value``, or ``GCEXPLORE_GATE`` when None (default ``flag``), checked."""
    v = os.environ.get("GCEXPLORE_GATE", "flag") if value is None else value
    if v not in GATE_KINDS:
        where = "GCEXPLORE_GATE" if value is None else "gate"
        raise ValueError(f"{where} must be one of {', '.join(repr(k) for k in GATE_KINDS)} "
                         f"(flag: the GPU waits for the host's word; timed: a sized spin), got {v!r}")
    return v


def phase_totals() -> dict:
    """The engine's host-side totals per phase, all zero (see ``Engine.metadata()['engine_phases']``)."""
    return {"reps": 0, "queued": 0, "measured_again": 0, "flag_timeouts": 0,
            "gate_idle_s": 0.0, "enqueue_s": 0.0, "wait_s": 0.0, "collect_s": 0.0}


class FlagGate:
    """Host-mapped pinned words and the kernel that waits on them.

    Word 0 holds the last sequence number the host released; ring slot ``k`` (words ``1 + 2k`` and
    ``2 + 2k``) holds what the kernel of sequence ``s`` (``s % RING == k``) saw: ``s`` when the flag
    let it go, ``s | 2**63`` when the timeout did, and how long it waited in ns.
    """

    def __init__(self, kernel, launch, config, timeout_us: float):
        from cuda.bindings import driver

        n = 1 + 2 * RING
        flags = driver.CU_MEMHOSTALLOC_PORTABLE | driver.CU_MEMHOSTALLOC_DEVICEMAP
        self._host = int(check(driver.cuMemHostAlloc(8 * n, flags), "cuMemHostAlloc"))
        try:
            self._dev = int(check(driver.cuMemHostGetDevicePointer(self._host, 0), "cuMemHostGetDevicePointer"))
        except BaseException:
            driver.cuMemFreeHost(self._host)
            raise
        self.words: Any = np.ctypeslib.as_array((ctypes.c_uint64 * n).from_address(self._host))  # None once closed
        self.words[:] = 0
        self.seq = 0
        self.timeout_ns = int(timeout_us * 1000)
        self._kernel, self._launch, self._config = kernel, launch, config

    def launch(self, stream) -> int:
        """Launch the gate of the next repetition on ``stream``; its sequence number."""
        self.seq += 1
        k = 1 + 2 * (self.seq % RING)
        self.words[k] = self.words[k + 1] = 0
        self._launch(stream, self._config, self._kernel, np.uint64(self._dev), np.uint64(self.seq),
                     np.uint64(self.timeout_ns), np.uint64(self._dev + 8 * k))
        return self.seq

    def release(self, seq: int) -> None:
        """Let repetition ``seq``'s gate go (every launch of it is enqueued)."""
        self.words[0] = seq

    def outcome(self, seq: int) -> tuple[bool, float]:
        """``(let go by the flag, seconds waited)`` of repetition ``seq``, once it has ended."""
        k = 1 + 2 * (seq % RING)
        return int(self.words[k]) == seq, int(self.words[k + 1]) * 1e-9

    def close(self) -> None:
        if self._host:
            from cuda.bindings import driver

            self.words = None
            driver.cuMemFreeHost(self._host)
            self._host = 0
