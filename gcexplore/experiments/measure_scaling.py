"""The scaling experiment: one workload alone on partitions of each size (and the whole device)."""

from __future__ import annotations

from ..device import partitions
from ..schema import Options, auto_rounds
from ..trace.collector import traced
from .engine import Slot
from .experiment import experiment
from .overlap import overlap_row
from .request import scaling_sizes
from .runner import run_layouts

__all__ = ["scaling"]


def scaling(workload, sm_counts=None, *, repeats: int = 15, warmup: int = 1, rounds: int | None = None, device=0,
            whole_device_too: bool = True, l2_flush: bool = False, graphs: bool = False,
            progress: bool = True, trace: bool = False):
    """Time one workload alone on partitions of each size.

    Parameters
    ----------
    workload : workload or str
        A :class:`~gcexplore.workloads.Workload`, a built-in name, or ``fn(*, stream)``.
    sm_counts : int or sequence of int, optional
        Partition sizes; default every valid size (8, 16, ..., 128 on the H100).
    repeats, warmup, rounds, l2_flush, graphs, trace
        As for :func:`profile_overlap` (the trace's layout is the size, its mode "alone"):
        in each round every size gets a fresh partition, the sizes in a new order.
    device : int, default 0
    whole_device_too : bool, default True
        Also time it on the whole device (primary context; ``requested_sm_count`` NA).
    progress : bool, default True

    Returns
    -------
    pandas.DataFrame
        One row per size x repetition, columns: ``workload`` (str), ``sm_count`` (int,
        granted), ``requested_sm_count`` (Int64), ``rep`` (int, counted on across rounds),
        ``round`` (int), ``duration_ms`` (float, event span), ``flops``, ``bytes`` (float,
        declared, NaN if not), ``throughput_tflops``, ``bandwidth_gbs`` (float),
        ``sm_clock_mhz_before``, ``power_w_before``, ``sm_clock_mhz``, ``power_w`` (float:
        NVML SM clock and power before and after the size's repetitions in that round),
        ``device_name``, ``run_id``.
        ``attrs["kind"] = "scaling"``. :func:`summarize` adds ``speedup`` and
        ``parallel_efficiency``.

    Raises
    ------
    ValueError
        A size the device cannot give (the message lists the valid ones).
    MeasurementFailed, MeasurementInterrupted
        With the rows so far in ``exc.partial``.
    """
    opts = Options(repeats=repeats, warmup=warmup, rounds=auto_rounds(repeats, rounds), l2_flush=l2_flush,
                   graphs=graphs, trace=trace)
    sizes: list[int] = []

    def check(info, names):
        sizes.extend(scaling_sizes(info, sm_counts))

    with experiment("scaling", [workload], device, opts, check=check) as run:
        (wl,) = run.wls

        keep = ("workload", "sm_count", "requested_sm_count", "rep", "round", "duration_ms", "flops", "bytes",
                "throughput_tflops", "bandwidth_gbs")

        def time_on(part, rnd, out):
            engine = run.engine
            assert engine is not None  # experiment() opened it
            slot, size = Slot(wl, part, part.stream), "device" if part is engine.whole else str(part.sm_count)
            slot.run = engine.runner(slot)
            try:
                for _ in range(opts.warmup):
                    engine.run_group([slot], label=(size, "alone", None))
                first, before = len(out), engine.clocks()
                for rep in range(rnd.first_rep, rnd.first_rep + rnd.repeats):
                    (launches,), makespan = engine.run_group([slot], label=(size, "alone", rep))
                    row = overlap_row("", 0, "alone", rep, slot, *launches[0], makespan, rnd.index)
                    out.append({k: row[k] for k in keep})
                engine.stamp(out[first:], before)
            finally:
                engine.drain([part.stream])
                engine.drop_graphs()

        def measure(item, out):
            k, rnd = item
            run.enter_round(rnd.index)
            if k is None:
                assert run.engine is not None  # experiment() opened it
                time_on(run.engine.whole, rnd, out)  # the engine's streams are fresh each round
                return
            with partitions.split([k], device=run.info.index) as parts:
                time_on(parts[0], rnd, out)

        layouts = [(str(k), k) for k in sizes] + ([("device", None)] if whole_device_too else [])
        rows, _ = run_layouts(run.rounds(layouts), measure, build=run.frame, progress=progress,
                              desc=f"scaling {wl.name}")
        return traced(run.frame(rows), run.trace)
