"""Kernel traces of the user's own code: :func:`kernel_trace` over the partitions it uses, the
regions that name its launches, and each partition's TPCs from its ``%smid`` probe (CUPTI reports
a green context's TPC mask only when the context is created while it records)."""

from __future__ import annotations

import contextlib
from collections import Counter

from .collector import Collector

__all__ = ["KernelTrace", "UserCollector", "kernel_trace"]



class UserCollector(Collector):
    """Keeps untagged records, times from the first record of the block."""

    def __init__(self, layout: str, **kw):
        super().__init__(**kw)  # copies=, cupti=
        self.user_layout = layout
        self._origin: int | None = None

    def _row_options(self, raw) -> dict:
        starts = [r["start"] for r in raw if r["start"] > 0]
        if self._origin is None and starts:
            self._origin = min(starts)
        return {"origin_ns": self._origin or 0, "untagged": (self.user_layout, "user", 0)}


class KernelTrace:
    """The trace of a block of the user's code; made by :func:`kernel_trace`.

    Use :meth:`region` to name the workload of the launches inside it; after the
    block, :meth:`frame` is the trace (kind ``"trace"``, mode ``"user"``, times from
    the block's first kernel, whose CUPTI start is ``attrs["origin_ns"]``).
    """

    def __init__(self, collector: UserCollector):
        self._c = collector
        self._reps: Counter = Counter()
        self._frame = None

    def region(self, workload: str):
        """Launches inside this ``with`` block belong to ``workload`` (repetition n of that name)."""
        rep = self._reps[workload]
        self._reps[workload] += 1
        self._c.group((self._c.user_layout, "user", rep))
        return self._c.tag("workload", workload=str(workload))

    def frame(self):
        """The trace (after the ``with`` block has ended)."""
        if self._frame is None:
            raise RuntimeError("the trace is ready when the kernel_trace block has ended")
        return self._frame

    def report(self) -> str:
        return self._c.report()


def _partition_list(partitions) -> list:
    if partitions is None:
        return []
    if hasattr(partitions, "all") and hasattr(partitions, "label"):
        return list(partitions.all)
    if hasattr(partitions, "context") and hasattr(partitions, "sm_count"):
        return [partitions]
    return list(partitions)


def _sync_all(info, partitions) -> None:
    from ..device.driver import check, driver_module, use

    drv = driver_module()
    for p in partitions:
        with use(p):
            check(drv.cuCtxSynchronize(), "cuCtxSynchronize")
    with use(info.index):
        check(drv.cuCtxSynchronize(), "cuCtxSynchronize")


@contextlib.contextmanager
def kernel_trace(partitions=None, *, device=0, copies: bool = True):
    """Trace every kernel launched in a ``with`` block, attributed to its partition.

    Parameters
    ----------
    partitions : Partitioning, Partition or sequence of Partitions, optional
        The partitions the block uses (their kernels are named ``"p0"``,
        ``"remainder"`` ...); kernels of other contexts are named ``"context <id>"``.
    device : int, default 0
    copies : bool, default True
        Also record memcpy and memset.

    Yields
    ------
    KernelTrace
        ``with t.region("matmul"): ...`` names the launches inside; after the block,
        ``t.frame()`` is the trace. Records without a region get the workload
        ``"(untagged)"``. The partitions given and the device are synchronised when
        the block ends; work on other contexts must have finished by then.

    Raises
    ------
    TraceUnavailable
        cupti-python is missing, or another profiler holds CUPTI.

    Examples
    --------
    >>> with gcexplore.split([24]) as parts, gcexplore.kernel_trace(parts) as t:  # doctest: +SKIP
    ...     with t.region("sigmoid"):
    ...         torch.sigmoid(x, out=y)   # on parts[0].torch_stream()
    >>> t.frame()[["workload", "partition", "name", "start_ms", "end_ms"]]  # doctest: +SKIP
    """
    from ..device.driver import device_info
    from ..schema import new_run_id

    info = device_info(device)
    parts = _partition_list(partitions)
    label = getattr(partitions, "label", "") or ""
    tpcs = _probe_tpcs(parts)  # before CUPTI records, so the probe's kernels stay out of the trace
    collector = UserCollector(label, copies=copies)
    collector.start()
    t = KernelTrace(collector)
    try:
        for p in parts:
            collector.watch(p)
        yield t
        _sync_all(info, parts)
        attrs = {**info.metadata(), "run_id": new_run_id(), "recorded": False, "kind": "user"}
        t._frame = collector.frame(attrs)
        t._frame.attrs["origin_ns"] = int(collector._origin or 0)
        t._frame.attrs["partition_tpcs"] = tpcs
    finally:
        collector.close()


#: How :func:`_probe_tpcs` finds a TPC, said next to every TPC map made from it.
PROBED_TPCS = "%smid probe: TPC = SM id // 2 (two SMs a TPC, as the green contexts' CUPTI masks showed on Hopper)"


def _probe_tpcs(parts) -> dict:
    """Each partition's logical TPCs from its ``%smid`` probe. The partitions exist before the
    trace starts, so CUPTI never sees them created and sends no mask of theirs."""
    return {p.name: {"sm_count": int(p.sm_count), "tpcs": sorted({int(s) // 2 for s in p.sm_ids()}),
                     "source": PROBED_TPCS}
            for p in parts if hasattr(p, "sm_ids")}
