"""The experiments: overlap, sweep, scaling, isolation and occupancy, as tidy DataFrames.

- :func:`profile_overlap`: workloads on the partitions of one split, in every mode of
  :data:`gcexplore.schema.MODES` (``alone``, ``concurrent``, ``sequential``, ``streams``).
- :func:`sweep`: :func:`profile_overlap` over every valid size of the first partition.
- :func:`scaling`: one workload alone on each partition size.
- :func:`isolation`: a latency-critical workload next to a background one, on plain
  streams and on complementary partitions.
- :func:`occupancy`: per-block SM ids and times of built-in kernels run concurrently.

Each is a short function over the same set-up and tear-down (:class:`_Run`): the
options are checked (:class:`gcexplore.schema.Options`), the split and the placement
of the workloads are checked before anything is compiled or allocated, built-in
workloads made from names are closed at the end, and the timing engine
(:mod:`gcexplore.engine`) is closed whatever happens. Derived numbers (statistics,
speedups, bounds, the best split) live in :mod:`gcexplore.analysis`.

Keeping data: when a workload raises or the user interrupts (Ctrl-C), the call raises
:class:`~gcexplore.runner.MeasurementFailed` or ``MeasurementInterrupted`` with every
repetition so far in ``exc.partial`` (:mod:`gcexplore.runner`); ``sweep(...,
checkpoint=path)`` also keeps each finished layout in a file. ``trace=True`` records
every kernel with CUPTI as well (:mod:`gcexplore.tracing`) and returns ``(result, trace)``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence

from ..device import partitions
from .._checks import as_int, as_seconds_like
from ..analysis import best_split, sm_busy, summarize
from ..device.driver import DeviceInfo, device_info, plan_split
from ..device.partitions import Partitioning
from .request import as_sizes, check_partitioning, fit_workloads, scaling_sizes, sweep_sizes
from .engine import Engine, Slot, launch_gap, nvtx_range
from .runner import (Checkpoint, MeasurementAborted, MeasurementFailed, MeasurementInterrupted,
                     run_layouts)
from ..schema import MODES, Options, frame, new_run_id
from ..trace.collector import Collector, traced
from ..workloads.core import Workload, as_workloads, spin, workload_names

__all__ = [
    "MODES",
    "MeasurementAborted",
    "MeasurementFailed",
    "MeasurementInterrupted",
    "best_split",
    "isolation",
    "launch_gap",
    "occupancy",
    "profile_overlap",
    "scaling",
    "sm_busy",
    "summarize",
    "sweep",
]


# ---------------------------------------------------------------------------
# Shared set-up and tear-down
# ---------------------------------------------------------------------------


class _Run:
    """One experiment's device, options, workloads and engine; builds its result frames."""

    def __init__(self, kind: str, info: DeviceInfo, options: Options, wls: list[Workload], run_id: str):
        self.kind, self.info, self.options, self.wls, self.run_id = kind, info, options, wls, run_id
        self.engine: Engine | None = None
        self.trace: Collector | None = None
        self.gap = math.nan
        self.extra: dict = {}
        self._owned: list = []

    def adopt(self, resource):
        """Close ``resource`` (a workload or recorder) when the run ends."""
        self._owned.append(resource)
        return resource

    def frame(self, rows: list[dict]):
        a = self.info.metadata()
        a.update(kind=self.kind, recorded=False, run_id=self.run_id, launch_gap_us=self.gap,
                 **self.options.metadata(self.kind))
        if self.engine is not None:
            a.update(self.engine.metadata())
        a.update(self.extra)
        return frame(rows, self.kind, a)


@contextlib.contextmanager
def _run(kind: str, workloads, device, options: Options, *, check=None, streams: int = 2):
    """Set up an experiment.

    ``check(info, names)`` runs before any workload is built or any GPU memory is
    taken; it may return the run id to use (a resumed sweep's).
    """
    info = device_info(device)
    names = workload_names(workloads)
    run_id = check(info, names) if check is not None else None
    wls, made = as_workloads(workloads, device=info.index)
    run = _Run(kind, info, options, wls, run_id or new_run_id())
    run._owned.extend(made)
    try:
        wrong = [f"{w.name} (device {w.device})" for w in wls if w.device not in (None, info.index)]
        if wrong:
            raise ValueError(f"workload(s) {', '.join(wrong)} hold memory of another device and cannot "
                             f"run on device {info.index} ({info.name}); build them with device={info.index}")
        run.gap = launch_gap(info.index)
        run.trace = run.adopt(Collector().start()) if options.trace else None
        run.engine = Engine(info, streams=max(2, streams, len(wls)), l2_flush=options.l2_flush,
                            graphs=options.graphs, trace=run.trace)
        try:
            yield run
        finally:
            run.engine.close()
    finally:
        for r in reversed(run._owned):
            with contextlib.suppress(Exception):
                r.close()


def _partitions(run: _Run, split, given: bool):
    """The split's partitions: the Partitioning given (left open) or a new one (closed after)."""
    if given:
        return contextlib.nullcontext(split)
    return partitions.split(split, device=run.info.index, rounding=run.options.rounding)


# ---------------------------------------------------------------------------
# profile_overlap / sweep
# ---------------------------------------------------------------------------


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
                              "schedule for it (gcexplore.profile._schedule)")


def _overlap_row(layout, split_k, mode, rep, slot: Slot, start, dur, makespan) -> dict:
    wl, p = slot.workload, slot.partition

    def per_sec(amount):
        return math.nan if amount is None or not dur > 0 else float(amount) / (dur * 1e-3)

    return {
        "layout": layout, "split_sm_count": split_k, "mode": mode, "rep": rep,
        "workload": wl.name, "partition": p.name, "sm_count": p.sm_count,
        "requested_sm_count": p.requested_sm_count, "start_ms": start, "duration_ms": dur,
        "makespan_ms": makespan, "flops": math.nan if wl.flops is None else float(wl.flops),
        "bytes": math.nan if wl.bytes is None else float(wl.bytes),
        "throughput_tflops": per_sec(wl.flops) / 1e12, "bandwidth_gbs": per_sec(wl.bytes) / 1e9,
    }


def _measure_mode(engine: Engine, groups, layout, split_k, mode, opts: Options, rows: list[dict]) -> None:
    for gslots, _ in groups:
        for s in gslots:
            s.run = engine.runner(s)
    for _ in range(opts.warmup):
        for gslots, chain in groups:
            engine.run_group(gslots, chain=chain, label=(layout, mode, None))
    first = len(rows)
    clock0, power0 = engine.nvml.read()
    for rep in range(opts.repeats):
        rep_rows = []
        for gslots, chain in groups:
            per_slot, makespan = engine.run_group(gslots, chain=chain, label=(layout, mode, rep))
            for slot, launches in zip(gslots, per_slot):
                start, dur = launches[0]
                rep_rows.append(_overlap_row(layout, split_k, mode, rep, slot, start, dur, makespan))
        rows.extend(rep_rows)
    clock, power = engine.nvml.read()
    for r in rows[first:]:
        r.update(sm_clock_mhz_before=clock0, power_w_before=power0, sm_clock_mhz=clock, power_w=power)


def _measure_layout(run: _Run, parts, rows: list[dict]) -> None:
    """All modes of one layout; appends one row per mode x rep x workload to ``rows``."""
    engine, wls, opts = run.engine, run.wls, run.options
    placed = parts.all[:len(wls)]
    part_slots = [Slot(w, p, p.stream) for w, p in zip(wls, placed)]
    try:
        for mode in opts.modes:
            groups = _schedule(mode, wls, placed, engine.whole, part_slots, opts.l2_flush)
            with nvtx_range(f"{parts.label} {mode}"):
                _measure_mode(engine, groups, parts.label, parts[0].sm_count, mode, opts, rows)
    finally:
        engine.drain([p.stream for p in placed])
        engine.drop_graphs()


def profile_overlap(workloads, split, *, repeats: int = 20, warmup: int = 3, device=0,
                    modes: Sequence[str] = MODES, l2_flush: bool = False, graphs: bool = False,
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
    repeats, warmup, modes, l2_flush, graphs, rounding
        See :class:`gcexplore.schema.Options`: measured repetitions per mode (20),
        discarded ones before them (3), which of ``"alone"`` (each workload by itself on
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
        - ``rep`` (int): repetition, 0-based, after warm-up.
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
          board power (W) read after the warm-up, before the mode's measured
          repetitions (NaN without nvidia-ml-py).
        - ``sm_clock_mhz``, ``power_w`` (float): the same, read after the mode's
          repetitions; a clock that fell in between shows throttling.
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
    opts = Options(repeats=repeats, warmup=warmup, modes=modes, l2_flush=l2_flush, graphs=graphs,
                   rounding=rounding, trace=trace)
    given = isinstance(split, Partitioning)
    labels = []

    def check(info, names):
        if given:
            check_partitioning(split, info)
        plan = split.plan if given else plan_split(info, split, rounding=opts.rounding)
        fit_workloads(plan, len(names))
        labels.append(plan.label)

    with _run("overlap", workloads, device, opts, check=check) as run:
        def measure(_, out):
            with _partitions(run, split, given) as parts:
                _measure_layout(run, parts, out)

        rows, _ = run_layouts([(labels[0], None)], measure, build=run.frame)
        return traced(run.frame(rows), run.trace)


def sweep(workloads, sm_counts=None, *, others: Sequence[int] = (), repeats: int = 20,
          warmup: int = 3, device=0, modes: Sequence[str] = MODES, l2_flush: bool = False,
          graphs: bool = False, rounding: str = "up", checkpoint=None, progress: bool = True,
          trace: bool = False):
    """:func:`profile_overlap` over every valid size of the first partition.

    The first workload gets ``k`` SMs, the last the remainder (middle workloads, if
    any, the fixed sizes in ``others``). Each layout is split once and measured in
    every mode; a progress bar (tqdm.auto) counts layouts.

    Parameters
    ----------
    workloads : mapping or sequence
        At least two workloads (see :func:`profile_overlap`).
    sm_counts : int or sequence of int, optional
        First-partition sizes; default every valid size that leaves a remainder
        (8, 16, ..., 128 on the H100).
    others : sequence of int, default ()
        Fixed sizes of the middle workloads (``len(workloads) - 2`` of them).
    repeats, warmup, device, modes, l2_flush, graphs, rounding, trace
        As for :func:`profile_overlap` (layouts resumed from a checkpoint have no trace).
    checkpoint : str or path, optional
        JSON-lines file: each finished layout's rows are appended (flushed and fsynced)
        as soon as it is measured; rerunning with the same file (and the same
        workloads, modes and options) skips the layouts already in it and returns all
        rows, under the first run's ``run_id``.
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
    opts = Options(repeats=repeats, warmup=warmup, modes=modes, l2_flush=l2_flush, graphs=graphs,
                   rounding=rounding, trace=trace)
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
            done = ckpt.load()  # checks the file before any GPU work
            plan.update(ckpt=ckpt, resumed=[lab for lab, _ in plan["layouts"] if lab in done])
            return ckpt.header["run_id"]  # a resumed sweep keeps its first run's id
        return None

    with _run("sweep", workloads, device, opts, check=check) as run:
        run.extra["resumed_layouts"] = plan.get("resumed", [])

        def measure(counts, out):
            with partitions.split(counts, device=run.info.index, rounding=opts.rounding) as parts:
                _measure_layout(run, parts, out)

        rows, _ = run_layouts(plan["layouts"], measure, build=run.frame, checkpoint=plan.get("ckpt"),
                              progress=progress)
        return traced(run.frame(rows), run.trace)


# ---------------------------------------------------------------------------
# scaling
# ---------------------------------------------------------------------------


def scaling(workload, sm_counts=None, *, repeats: int = 20, warmup: int = 3, device=0,
            whole_device_too: bool = True, l2_flush: bool = False, graphs: bool = False,
            progress: bool = True, trace: bool = False):
    """Time one workload alone on partitions of each size.

    Parameters
    ----------
    workload : workload or str
        A :class:`~gcexplore.workloads.Workload`, a built-in name, or ``fn(*, stream)``.
    sm_counts : int or sequence of int, optional
        Partition sizes; default every valid size (8, 16, ..., 128 on the H100).
    repeats, warmup, l2_flush, graphs, trace
        As for :func:`profile_overlap` (the trace's layout is the size, its mode "alone").
    device : int, default 0
    whole_device_too : bool, default True
        Also time it on the whole device (primary context; ``requested_sm_count`` NA).
    progress : bool, default True

    Returns
    -------
    pandas.DataFrame
        One row per size x repetition, columns: ``workload`` (str), ``sm_count`` (int,
        granted), ``requested_sm_count`` (Int64), ``rep`` (int), ``duration_ms`` (float,
        event span), ``flops``, ``bytes`` (float, declared, NaN if not),
        ``throughput_tflops``, ``bandwidth_gbs`` (float), ``device_name``, ``run_id``.
        ``attrs["kind"] = "scaling"``. :func:`summarize` adds ``speedup`` and
        ``parallel_efficiency``.

    Raises
    ------
    ValueError
        A size the device cannot give (the message lists the valid ones).
    MeasurementFailed, MeasurementInterrupted
        With the rows so far in ``exc.partial``.
    """
    opts = Options(repeats=repeats, warmup=warmup, l2_flush=l2_flush, graphs=graphs, trace=trace)
    sizes: list[int] = []

    def check(info, names):
        sizes.extend(scaling_sizes(info, sm_counts))

    with _run("scaling", [workload], device, opts, check=check) as run:
        engine, (wl,) = run.engine, run.wls

        def time_on(part, out):
            slot, size = Slot(wl, part, part.stream), "device" if part is engine.whole else str(part.sm_count)
            slot.run = engine.runner(slot)
            try:
                for _ in range(opts.warmup):
                    engine.run_group([slot], label=(size, "alone", None))
                for rep in range(opts.repeats):
                    (launches,), makespan = engine.run_group([slot], label=(size, "alone", rep))
                    row = _overlap_row("", 0, "alone", rep, slot, *launches[0], makespan)
                    out.append({k: row[k] for k in ("workload", "sm_count", "requested_sm_count", "rep",
                                                    "duration_ms", "flops", "bytes", "throughput_tflops",
                                                    "bandwidth_gbs")})
            finally:
                engine.drain([part.stream])
                engine.drop_graphs()

        def measure(k, out):
            if k is None:
                time_on(engine.whole, out)
                return
            with partitions.split([k], device=run.info.index) as parts:
                time_on(parts[0], out)

        layouts = [(str(k), k) for k in sizes] + ([("device", None)] if whole_device_too else [])
        rows, _ = run_layouts(layouts, measure, build=run.frame, progress=progress, desc=f"scaling {wl.name}")
        return traced(run.frame(rows), run.trace)


# ---------------------------------------------------------------------------
# isolation
# ---------------------------------------------------------------------------


def _isolation_scenario(run: _Run, name, groups, pacer, crit, out, within) -> None:
    engine, opts = run.engine, run.options
    for gslots in groups:
        for s in gslots:
            s.run = engine.runner(s)
    for _ in range(opts.warmup):
        for gslots in groups:
            engine.run_group(gslots)
    inside = total = 0
    for rep in range(opts.repeats):
        for gslots in groups:
            per_slot, _ = engine.run_group(gslots, label=(run.extra["layout"], name, rep))
            ends = [[st + d for st, d in lst] for lst in per_slot]
            for i, (slot, lst) in enumerate(zip(gslots, per_slot)):
                if slot.workload is pacer:
                    continue
                role = "critical" if slot.workload is crit else "background"
                for j, (_, dur) in enumerate(lst):
                    if slot.paced_by is not None:  # from its issue (the pacing end) to its end
                        dur = ends[i][j] - ends[slot.paced_by][j]
                    out.append({"scenario": name, "role": role, "workload": slot.workload.name,
                                "rep": rep, "sm_count": slot.partition.sm_count, "duration_ms": dur})
            if name != "alone" and len(gslots) == 2:
                inside += sum(e <= ends[0][-1] for e in ends[1])
                total += len(ends[1])
    if total:
        within[name] = inside / total


def isolation(critical, background, split=16, *, repeats: int = 20, warmup: int = 3, device=0,
              launches: int = 20, pacer_us: float = 50.0, trace: bool = False):
    """Latency of a critical workload next to a background one: alone, plain streams, partitions.

    NVIDIA's green-context sample as a measurement. In each repetition the background
    workload runs ``launches + 1`` times back to back on its stream, and the critical
    workload is launched ``launches`` times on its own stream, launch ``j`` issued
    (through an event) the moment background launch ``j`` ends, so it arrives while
    background launch ``j + 1`` is taking the SMs. A critical launch's latency is
    from that moment to its own end event: waiting for free SMs counts. Scenarios
    (:data:`gcexplore.schema.SCENARIOS`):

    - ``"alone"``: each on the whole device without the other (the critical launches
      are paced by a one-block spin of ``pacer_us`` instead of the background);
    - ``"streams"``: both on plain streams of the whole device (no partitions);
    - ``"partitioned"``: the critical workload on its own partition of ``split`` SMs,
      the background on the complementary partition (the remainder).

    Parameters
    ----------
    critical, background : workload or str
        E.g. ``"latency"`` and ``"compute"``; their names must differ.
    split : int, default 16
        SMs of the critical partition.
    repeats, warmup, trace
        As for :func:`profile_overlap` (20, 3, False; the trace's mode is the scenario).
    device : int, default 0
    launches : int, default 20
        Critical launches per repetition (1 to 10,000).
    pacer_us : float, default 50
        Length of the pacing spin in the ``alone`` scenario, in (0, 1e6] us.

    Returns
    -------
    pandas.DataFrame
        Columns: ``scenario`` (str), ``role`` (``"critical"`` or ``"background"``),
        ``workload`` (str), ``rep`` (int), ``sm_count`` (int: SMs available to it),
        ``duration_ms`` (float: for the critical role one launch's latency from its
        issue to its end event, ``launches`` rows per repetition; for the background
        one launch's event span, ``launches + 1`` rows per repetition),
        ``device_name``, ``run_id``. ``attrs["kind"] = "isolation"``;
        ``attrs["critical_within_background"]``: per contended scenario, the fraction
        of critical launches that ended before the background's last launch did.
    """
    opts = Options(repeats=repeats, warmup=warmup, trace=trace)
    launches = as_int("launches", launches, minimum=1, maximum=10_000)
    pacer_us = as_seconds_like("pacer_us", pacer_us, unit="microseconds", maximum=1e6)
    plans = []

    def check(info, names):
        if len(names) == 2 and names[0] == names[1]:
            raise ValueError(f"critical and background need different names, both are {names[0]!r}")
        plan = plan_split(info, split)
        if len(plan.groups) != 1 or plan.remainder == 0:
            raise ValueError(f"isolation needs one critical partition and a remainder for the background; "
                             f"split {plan.requested} gives {plan.label} on {info.name}")
        plans.append(plan)

    with _run("isolation", [critical, background], device, opts, check=check) as run:
        crit, bg = run.wls
        pacer = run.adopt(spin(pacer_us, device=run.info.index, name="pacer"))
        within: dict[str, float] = {}
        run.extra.update(layout=plans[0].label, launches=launches, pacer_us=pacer_us,
                         critical_within_background=within)
        whole = run.engine.whole
        s0, s1 = whole.streams[0], whole.streams[1]

        def measure(parts, out):
            rem, p0 = parts.remainder, parts[0]
            scenarios = {
                "alone": [[Slot(bg, whole, s0, launches + 1)],
                          [Slot(pacer, whole, s0, launches), Slot(crit, whole, s1, launches, 0)]],
                "streams": [[Slot(bg, whole, s0, launches + 1), Slot(crit, whole, s1, launches, 0)]],
                "partitioned": [[Slot(bg, rem, rem.stream, launches + 1),
                                 Slot(crit, p0, p0.stream, launches, 0)]],
            }
            try:
                for name, groups in scenarios.items():
                    with nvtx_range(f"isolation {name}"):
                        _isolation_scenario(run, name, groups, pacer, crit, out, within)
            finally:
                run.engine.drain([p.stream for p in parts.all])

        with partitions.split(plans[0].requested, device=run.info.index) as parts:
            rows, _ = run_layouts([(parts.label, parts)], measure, build=run.frame, desc="isolation")
        return traced(run.frame(rows), run.trace)


# ---------------------------------------------------------------------------
# occupancy
# ---------------------------------------------------------------------------


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

    with _run("occupancy", workloads, device, opts, check=check) as run:
        with _partitions(run, split, given) as parts:
            placed = parts.all[:len(run.wls)]
            recorders = [run.adopt(w.instrumented()) for w in run.wls]
            plain = [Slot(w, p, p.stream) for w, p in zip(run.wls, placed)]
            inst = [Slot(r.workload, p, p.stream) for r, p in zip(recorders, placed)]
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


experiment, measure_layout = _run, _measure_layout  # public for experiments elsewhere (gcexplore.tune)
