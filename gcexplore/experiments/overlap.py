"""The overlap experiments: :func:`profile_overlap` (workloads on the partitions of one split,
in every mode of :data:`gcexplore.schema.MODES`) and :func:`sweep` (the same over every valid
size of the first partition), and what they share with the tuner and scaling: a mode's
schedule, one layout measured in every mode (:func:`measure_layout`), one result row
(:func:`overlap_row`).

Adding a timing mode: its description in :data:`gcexplore.schema.MODE_DESCRIPTIONS` and its
schedule in :func:`_schedule`.

Keeping data: when a workload raises or the user interrupts (Ctrl-C), the call raises
:class:`~gcexplore.experiments.runner.MeasurementFailed` or ``MeasurementInterrupted`` with every
repetition so far in ``exc.partial`` (:mod:`gcexplore.experiments.runner`); ``sweep(...,
checkpoint=path)`` also keeps each finished layout in a file. ``trace=True`` records every kernel
with CUPTI as well (:mod:`gcexplore.trace.collector`) and returns ``(result, trace)``. Derived
numbers (statistics, speedups, bounds, the best split) live in :mod:`gcexplore.analysis`.
"""

from __future__ import annotations

import math
import time
from typing import cast
from collections.abc import Sequence

from ..device import partitions
from ..device.driver import plan_split
from ..device.partitions import Partitioning
from ..schema import MODES, Options, auto_rounds, new_run_id
from ..trace.collector import traced
from .engine import Engine, Slot, nvtx_range
from .experiment import Experiment, experiment
from .request import as_sizes, check_partitioning, fit_workloads, sweep_sizes
from .runner import Checkpoint, Round, host_add, run_layouts

__all__ = ["measure_layout", "overlap_row", "profile_overlap", "sweep"]


def _schedule(mode: str, wls, placed, whole, part_slots, l2_flush: bool):
    """The groups (slots, chained) one repetition of ``mode`` runs."""
    if mode == "alone":
        # One after another on their own partitions (each its own repetition when flushing L2).
        return [(part_slots, True)] if not l2_flush else [([s], False) for s in part_slots]
    if mode == "concurrent":
        return [(part_slots, False)]
    if mode == "sequential":
        return [([Slot(w, whole, whole.streams[0]) for w in wls], True)]
    if mode == "streams":
        return [([Slot(w, whole, whole.streams[i]) for i, w in enumerate(wls)], False)]
    raise NotImplementedError(f"mode {mode!r} is in gcexplore.schema.MODES but the profiler has no "
                              "schedule for it (gcexplore.experiments.overlap)")


def overlap_row(layout, split_k, mode, rep, slot: Slot, start, dur, makespan, round_index: int = 0) -> dict:
    """One result row: ``slot``'s workload ran ``dur`` ms from ``start`` in repetition ``rep``
    (of round ``round_index``)."""
    wl, p = slot.workload, slot.partition

    def per_sec(amount):
        return math.nan if amount is None or not dur > 0 else float(amount) / (dur * 1e-3)

    return {
        "layout": layout, "split_sm_count": split_k, "mode": mode, "rep": rep, "round": round_index,
        "workload": wl.name, "partition": p.name, "sm_count": p.sm_count,
        "requested_sm_count": p.requested_sm_count, "start_ms": start, "duration_ms": dur,
        "makespan_ms": makespan, "flops": math.nan if wl.flops is None else float(wl.flops),
        "bytes": math.nan if wl.bytes is None else float(wl.bytes),
        "throughput_tflops": per_sec(wl.flops) / 1e12, "bandwidth_gbs": per_sec(wl.bytes) / 1e9,
    }


def _reps(engine: Engine, groups, labels, on_queued=None):
    """``(label, [(per_slot, makespan) per group])`` for each label: one group is pipelined.
    ``on_queued(i)`` runs once label ``i``'s repetition is enqueued (the GPU busy with it)."""
    if len(groups) == 1:
        (gslots, chain), = groups
        for label, per_slot, makespan in engine.run_reps(gslots, labels, chain=chain, on_queued=on_queued):
            yield label, [(per_slot, makespan)]
        return
    for i, label in enumerate(labels):
        if on_queued is not None:
            on_queued(i)
        yield label, [engine.run_group(gslots, chain=chain, label=label) for gslots, chain in groups]


def _measure_mode(engine: Engine, groups, layout, split_k, mode, opts: Options, rnd: Round, rows: list[dict],
                  warmup: int) -> tuple[float | None, list[float]]:
    """``warmup`` discarded repetitions, then the round's measured ones, as one pipelined
    stream; NVML is read while the first and the last measured repetition run (not in a gap).
    Returns the first warm-up repetition's makespan (None without one) and the measured ones'."""
    for gslots, _ in groups:
        for s in gslots:
            s.run = engine.runner(s)
    reps = range(rnd.first_rep, rnd.first_rep + rnd.repeats)
    labels = [(layout, mode, None)] * warmup + [(layout, mode, rep) for rep in reps]
    reads = {}

    def on_queued(i):
        if i in (warmup, len(labels) - 1):
            t = time.perf_counter()
            reads[i] = engine.nvml.read()
            host_add("nvml", time.perf_counter() - t)

    first, spans = len(rows), []
    for (_, _, rep), outs in _reps(engine, groups, labels, on_queued):
        spans.append(max(makespan for _, makespan in outs))
        if rep is None:
            continue
        rep_rows = []
        for (gslots, _), (per_slot, makespan) in zip(groups, outs):
            for slot, launches in zip(gslots, per_slot):
                start, dur = launches[0]
                rep_rows.append(overlap_row(layout, split_k, mode, rep, slot, start, dur, makespan, rnd.index))
        rows.extend(rep_rows)
    (clock0, power0), (clock, power) = reads.get(warmup, (math.nan,) * 2), reads.get(len(labels) - 1, (math.nan,) * 2)
    for r in rows[first:]:
        r.update(sm_clock_mhz_before=clock0, power_w_before=power0, sm_clock_mhz=clock, power_w=power)
    return (spans[0] if warmup else None), spans[warmup:]


# How a layout's later rounds warm up (its first round runs the full warm-up repetitions). "auto":
# a 1 us spin on each stream the round made afresh, plus one call of each workload on its new
# partition where the layout's first warm-up repetition ran more than _FIRST_CALL_MARGIN over its
# slowest measured one (a library loading its kernels into each new green context: on an H100 the
# PyTorch matmul's first repetition on a fresh partition ran +2.7% without it, the built-ins +0.0%);
# "touch" / "call": always the one or the other; "full": every round as the first.
_LATER_ROUNDS = "auto"
_FIRST_CALL_MARGIN = 0.005
# What a later mode of a layout's first round runs before its measured repetitions: "auto", one
# repetition of its own schedule where the layout's first warm-up ran more than _FIRST_CALL_MARGIN
# over its slowest measured repetition, else nothing; "rep" / "none", always the one or the other.
# On an H200 (bench/sweep_speed.py, 15 repetitions in 5 rounds, two runs each) the built-in pair's
# first measured repetition of a later mode without it ran a median +0.00% (max +0.72%) over its
# round's median, as with it (max +0.54%), and the sweep took 1.11-1.13x its GPU-busy floor against
# 1.14-1.18x; the PyTorch pair's concurrent one was its round's largest in 12 of 16 layouts without
# it (5.3 by chance), so a layout whose first call costs keeps the repetition.
_LATER_MODES = "auto"


def _later_mode_warmup(opts: Options, found: str = "call") -> int:
    """Warm-up repetitions of a later mode in a layout's first round (``_LATER_MODES``); ``found``: what
    the layout's first mode found ("call": its first warm-up repetition ran slow, "touch": it did not)."""
    if _LATER_MODES == "none" or (_LATER_MODES == "auto" and found != "call"):
        return 0
    return min(opts.warmup, 1)


def _warmup_plan(opts: Options, seen: str | None) -> tuple[str | None, list[int]]:
    """``(how a later round warms its fresh streams, or None; warm-up repetitions per mode)`` of a
    layout visit; ``seen``: what the layout's first round found it needs (None: this is its first)."""
    later = _later_mode_warmup(opts)
    if seen is None or not opts.warmup or _LATER_ROUNDS == "full":
        # the layout's first mode warms its new partitions, streams and kernels; a later mode runs on
        # warm ones (its count here stands until the first mode has said whether the first call costs)
        return None, [opts.warmup if i == 0 else later for i in range(len(opts.modes))]
    # seen before in this run: kernels loaded, clocks up; only the round's partitions and streams are new
    return (seen if _LATER_ROUNDS == "auto" else _LATER_ROUNDS), [0] * len(opts.modes)


def _first_call_costs(warm_ms: float | None, measured: list[float]) -> bool:
    """Whether a layout's first warm-up repetition ran over its slowest measured one by more than the margin."""
    return warm_ms is not None and bool(measured) and warm_ms > max(measured) * (1 + _FIRST_CALL_MARGIN)


def measure_layout(run: Experiment, parts, rows: list[dict], options: Options | None = None,
                   rnd: Round | None = None) -> None:
    """All modes of one layout in one round; appends one row per mode x rep x workload to ``rows``.

    ``options`` (default: the run's) set the modes and warm-up; ``rnd`` the round and its
    repetitions (default: one round of ``options.repeats``). The tuner passes its own.
    The layout's first round in this run runs the warm-up repetitions; a later round only
    warms what it made afresh (``_LATER_ROUNDS``).
    """
    engine, wls, opts = run.engine, run.wls, run.options if options is None else options
    assert engine is not None  # experiment() opened it
    rnd = rnd or Round(0, opts.repeats, 0)
    seen = run.warmed.get(parts.label) if rnd.index > 0 else None
    fresh, warmups = _warmup_plan(opts, seen)
    # what gpu_time_ms counts: repetitions before a later mode, and in a layout's later rounds
    # (where they warm up with a call of each workload, listed: one repetition of the first mode)
    run.extra["warmup_later_modes"] = _later_mode_warmup(opts)
    run.extra.setdefault("warmup_later_modes_at", [])  # the layouts whose later modes ran it
    run.extra["warmup_later_rounds"] = _warmup_plan(opts, "touch")[1]
    placed = parts.all[:len(wls)]
    part_slots = [Slot(w, p, p.stream) for w, p in zip(wls, placed)]
    try:
        if fresh is not None:
            t = time.perf_counter()
            engine.warm(part_slots, calls=fresh == "call", label=(parts.label, opts.modes[0], None))
            host_add("warm", time.perf_counter() - t)
            if fresh == "call":
                run.extra["warmup_calls"] = sorted({*run.extra.get("warmup_calls", ()), parts.label})
        for i, mode in enumerate(opts.modes):
            groups = _schedule(mode, wls, placed, engine.whole, part_slots, opts.l2_flush)
            with nvtx_range(f"{parts.label} {mode}"):
                warm_ms, measured = _measure_mode(engine, groups, parts.label, parts[0].sm_count, mode, opts, rnd,
                                                  rows, warmups[i])
            if i == 0 and fresh is None:
                found = run.warmed[parts.label] = "call" if _first_call_costs(warm_ms, measured) else "touch"
                warmups[1:] = [_later_mode_warmup(opts, found)] * (len(warmups) - 1)
                if warmups[1:] and warmups[1]:
                    run.extra["warmup_later_modes_at"] = sorted({*run.extra["warmup_later_modes_at"], parts.label})
    finally:
        t = time.perf_counter()
        engine.drain([p.stream for p in placed])
        engine.drop_graphs()
        host_add("drain", time.perf_counter() - t)


def profile_overlap(workloads, split, *, repeats: int = 15, warmup: int = 1, rounds: int | None = None,
                    device=0, modes: Sequence[str] = MODES, l2_flush: bool = False, graphs: bool = False,
                    rounding: str = "up", trace: bool = False):
    """Time workloads alone, concurrently on their partitions, one after another, and on plain streams.

    Parameters
    ----------
    workloads : mapping of str to workload, or sequence of workloads
        Workloads (:class:`~gcexplore.workloads.Workload`, built-in names such as
        ``"compute"``, or callables ``fn(*, stream)``). They are placed on the
        partitions in order; the remainder takes the last one when ``split`` names one
        group fewer than there are workloads. Built-ins made from names here are
        closed when the call returns.
    split : int, sequence of int, or Partitioning
        SM counts of the groups (as for :func:`gcexplore.split`), or partitions already
        made on ``device`` (used as they are, not closed).
    repeats, warmup, rounds, modes, l2_flush, graphs, rounding
        See :class:`gcexplore.schema.Options`: measured repetitions per mode over all
        rounds (15), discarded ones in a layout's first round (1 before its first mode, which
        warms its new partitions; at most 1 before each later mode; its later rounds discard
        none: a 1 us spin warms each stream they make afresh, and one call of each workload
        on its new partition where the layout's first warm-up ran slow), rounds
        (default ``min(5, repeats // 3)``, at least 1: 5 rounds of 3; each round splits the
        device afresh, makes fresh streams and measures the layouts in a new order, so the
        variation between runs is measured, not assumed away), which of ``"alone"`` (each workload by itself on
        its partition), ``"concurrent"`` (all at once on their partitions),
        ``"sequential"`` (one after another on the whole device) and ``"streams"`` (all
        at once on plain streams of the whole device); an L2 flush before every
        repetition (``alone`` then runs each workload in its own repetition); CUDA-graph
        launches; how requested counts become valid sizes.
    trace : bool, default False
        Also record every kernel with CUPTI: returns ``(result, trace)`` (:mod:`gcexplore.tracing`).
    device : int, default 0

    Returns
    -------
    pandas.DataFrame
        One row per mode x repetition x workload, columns in this order:

        - ``layout`` (str): granted sizes, e.g. ``"24+108"``.
        - ``split_sm_count`` (int): granted SMs of the first partition.
        - ``mode`` (str): one of :data:`gcexplore.schema.MODES`.
        - ``rep`` (int): repetition, 0-based, after warm-up, counted on across rounds.
        - ``round`` (int): the round, 0-based.
        - ``workload`` (str): workload name.
        - ``partition`` (str): ``"p0"``, ``"p1"``, ..., ``"remainder"``, or ``"device"``.
        - ``sm_count`` (int): SMs the workload ran on (whole device for sequential/streams).
        - ``requested_sm_count`` (Int64): SMs asked for; NA for remainder and device.
        - ``start_ms`` (float): start relative to the repetition's common start event.
        - ``duration_ms`` (float): the workload's own event span.
        - ``makespan_ms`` (float): common start to the last end of the repetition (for
          ``alone`` and ``sequential``: of the whole chain).
        - ``flops``, ``bytes`` (float): declared work per call (NaN if undeclared).
        - ``throughput_tflops`` (float): flops / duration, in 1e12/s (NaN if undeclared).
        - ``bandwidth_gbs`` (float): bytes / duration, in GB/s (NaN if undeclared).
        - ``sm_clock_mhz_before``, ``power_w_before`` (float): NVML SM clock (MHz) and
          board power (W) read while the mode's first measured repetition of the round runs
          (NaN without nvidia-ml-py).
        - ``sm_clock_mhz``, ``power_w`` (float): the same, read while its last
          repetition of the round runs; a clock that fell in between shows throttling.
        - ``device_name``, ``run_id`` (str): the card and this run, so results
          concatenated with others stay apart.

        ``df.attrs`` holds the device and version metadata, ``kind="overlap"``,
        ``run_id``, the options, ``launch_gap_us``, ``gate_us`` and ``max_enqueue_us``
        (host time to enqueue one repetition), ``nvml`` and ``nvtx``.

    Raises
    ------
    ValueError, TypeError
        Bad options or counts, sizes the device cannot give, more workloads than
        partitions, a closed or foreign Partitioning (before anything is measured).
    MeasurementFailed, MeasurementInterrupted
        A workload raised or the user interrupted; ``exc.partial`` holds the rows so far.
    """
    opts = Options(repeats=repeats, warmup=warmup, rounds=auto_rounds(repeats, rounds),
                   modes=cast("tuple[str, ...]", modes),  # Options checks and converts it (check_modes)
                   l2_flush=l2_flush, graphs=graphs, rounding=rounding, trace=trace)
    given = isinstance(split, Partitioning)
    labels = []

    def check(info, names):
        if given:
            check_partitioning(split, info)
        plan = split.plan if given else plan_split(info, split, rounding=opts.rounding)
        fit_workloads(plan, len(names))
        labels.append(plan.label)

    with experiment("overlap", workloads, device, opts, check=check) as run:
        def measure(item, out):
            rnd = item[1]
            run.enter_round(rnd.index)
            with run.partitioned(split) as parts:  # made afresh each round (a Partitioning given is kept)
                measure_layout(run, parts, out, rnd=rnd)

        rows, _ = run_layouts(run.rounds([(labels[0], None)]), measure, build=run.frame)
        return traced(run.frame(rows), run.trace)


def sweep(workloads, sm_counts=None, *, others: Sequence[int] = (), repeats: int = 15,
          warmup: int = 1, rounds: int | None = None, device=0, modes: Sequence[str] = MODES, l2_flush: bool = False,
          graphs: bool = False, rounding: str = "up", checkpoint=None, progress: bool = True,
          trace: bool = False):
    """:func:`profile_overlap` over every valid size of the first partition.

    The first workload gets ``k`` SMs, the last the remainder (middle workloads, if
    any, the fixed sizes in ``others``). In each round every layout is split afresh and
    measured in every mode, the layouts in a new shuffled order; a progress bar
    (tqdm.auto) counts layout visits.

    Parameters
    ----------
    workloads : mapping or sequence
        At least two workloads (see :func:`profile_overlap`).
    sm_counts : int or sequence of int, optional
        First-partition sizes; default every valid size that leaves a remainder
        (8, 16, ..., 128 on the H100).
    others : sequence of int, default ()
        Fixed sizes of the middle workloads (``len(workloads) - 2`` of them).
    repeats, warmup, rounds, device, modes, l2_flush, graphs, rounding, trace
        As for :func:`profile_overlap` (layouts resumed from a checkpoint have no trace).
    checkpoint : str or path, optional
        JSON-lines file: each finished layout visit's rows are appended (flushed and
        fsynced) as soon as it is measured; rerunning with the same file (and the same
        workloads, modes and options) skips the visits already in it and returns all
        rows, under the first run's ``run_id`` (so in the same rounds and order).
    progress : bool, default True

    Returns
    -------
    pandas.DataFrame
        The columns of :func:`profile_overlap` (one row per layout x mode x repetition
        x workload), ``attrs["kind"] = "sweep"``, plus ``attrs["resumed_layouts"]``
        (layouts taken from the checkpoint).

    Raises
    ------
    ValueError, TypeError
        Before measuring: fewer than two workloads, sizes the device cannot give (the
        message lists the valid ones), bad options, or a checkpoint from a different run.
    MeasurementFailed, MeasurementInterrupted
        A workload raised or the user interrupted: ``exc.partial`` holds every row
        measured so far (finished layouts are also in the checkpoint).
    """
    opts = Options(repeats=repeats, warmup=warmup, rounds=auto_rounds(repeats, rounds),
                   modes=cast("tuple[str, ...]", modes),  # Options checks and converts it (check_modes)
                   l2_flush=l2_flush, graphs=graphs, rounding=rounding, trace=trace)
    fixed = as_sizes("others", others)  # numbers checked before the driver is asked
    if sm_counts is not None:
        as_sizes("sm_counts", sm_counts)
    plan: dict = {}

    def check(info, names):
        sizes = sweep_sizes(info, len(names), sm_counts, fixed, opts.rounding)
        plan["layouts"] = [(plan_split(info, [k, *fixed], rounding=opts.rounding).label, [k, *fixed])
                           for k in sizes]
        if checkpoint is not None:
            ckpt = Checkpoint(checkpoint, {"kind": "sweep", "device_name": info.name, "workloads": names,
                                           "others": fixed, **opts.metadata("sweep"), "run_id": new_run_id()})
            plan.update(ckpt=ckpt, done=ckpt.load())  # checks the file before any GPU work
            return ckpt.header["run_id"]  # a resumed sweep keeps its first run's id (and order)
        return None

    with experiment("sweep", workloads, device, opts, check=check) as run:
        visits = run.rounds(plan["layouts"])
        run.extra["resumed_layouts"] = [k for k, _ in visits if k in plan.get("done", {})]

        def measure(item, out):
            counts, rnd = item
            run.enter_round(rnd.index)
            t0 = time.perf_counter()
            with partitions.split(counts, device=run.info.index, rounding=opts.rounding) as parts:
                t1 = time.perf_counter()
                measure_layout(run, parts, out, rnd=rnd)
                t2 = time.perf_counter()
            host_add("partitions", t1 - t0 + time.perf_counter() - t2)  # made and closed, each round

        rows, _ = run_layouts(visits, measure, build=run.frame, checkpoint=plan.get("ckpt"), progress=progress)
        return traced(run.frame(rows), run.trace)
