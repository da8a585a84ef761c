"""The occupancy experiment: which SM ran each block of built-in kernels run concurrently on
their partitions, and when (the kernels record ``%smid`` and ``%globaltimer`` per block)."""

from __future__ import annotations

from ..device.driver import plan_split
from ..device.partitions import Partitioning
from ..schema import Options
from ..workloads.workload import Workload
from .engine import Slot
from .experiment import experiment
from .request import check_partitioning, fit_workloads

__all__ = ["occupancy"]


def _require_instrumentable(items) -> None:
    bad = [getattr(w, "name", getattr(w, "__name__", repr(w))) for w in items
           if not (isinstance(w, str) or (isinstance(w, Workload) and w.instrumentable))]
    if bad:
        raise ValueError(f"occupancy needs built-in kernels, which record per block; "
                         f"{', '.join(map(repr, bad))} cannot be instrumented "
                         "(built-ins: compute, memory, copy, spin, latency)")


def occupancy(workloads, split, *, device=0, warmup: int = 1):
    """Which SM ran each block of built-in kernels run concurrently on their partitions, and when.

    Parameters
    ----------
    workloads : mapping or sequence
        Built-in workloads (see :func:`gcexplore.workloads.builtin`), placed as in
        :func:`profile_overlap`.
    split : int, sequence of int, or Partitioning
    device : int, default 0
    warmup : int, default 1
        Uninstrumented concurrent runs first.

    Returns
    -------
    pandas.DataFrame
        One row per block: ``partition`` (str), ``workload`` (str), ``sm_id`` (int,
        ``%smid``), ``block`` (int, block index in its launch), ``start_ns``, ``end_ns``
        (int, ``%globaltimer`` relative to the earliest block start of the run),
        ``device_name``, ``run_id``. ``attrs["kind"] = "occupancy"``,
        ``attrs["layout"]``, ``attrs["partition_sm_counts"]``.

    Raises
    ------
    ValueError
        A workload is not a built-in kernel (only those record per block), or the
        split does not fit the workloads.
    """
    opts = Options(warmup=warmup)
    given = isinstance(split, Partitioning)
    items = workloads.values() if hasattr(workloads, "values") else (
        [workloads] if isinstance(workloads, (Workload, str)) or callable(workloads) else list(workloads))
    _require_instrumentable(items)

    def check(info, names):
        if given:
            check_partitioning(split, info)
        fit_workloads(split.plan if given else plan_split(info, split), len(names))

    with experiment("occupancy", workloads, device, opts, check=check) as run:
        with run.partitioned(split) as parts:
            placed = parts.all[:len(run.wls)]
            recorders = [run.adopt(w.instrumented()) for w in run.wls]
            plain = [Slot(w, p, p.stream) for w, p in zip(run.wls, placed)]
            inst = [Slot(r.workload, p, p.stream) for r, p in zip(recorders, placed)]
            assert run.engine is not None  # experiment() opened it
            for _ in range(opts.warmup):
                run.engine.run_group(plain)
            run.engine.run_group(inst)
            rows = []
            for wl, p, rec in zip(run.wls, placed, recorders):
                r = rec.records(stream=p.stream)
                rows.extend({"partition": p.name, "workload": wl.name, "sm_id": int(r[b, 0]), "block": b,
                             "start_ns": int(r[b, 1]), "end_ns": int(r[b, 2])} for b in range(rec.blocks))
            t0 = min(row["start_ns"] for row in rows)
            for row in rows:
                row["start_ns"] -= t0
                row["end_ns"] -= t0
            run.extra.update(repeats=1, layout=parts.label,
                             partition_sm_counts={p.name: p.sm_count for p in placed})
            return run.frame(rows)
