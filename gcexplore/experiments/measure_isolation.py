"""The isolation experiment: a latency-critical workload next to a background one, alone, on
plain streams and on complementary partitions (NVIDIA's green-context sample as a measurement)."""

from __future__ import annotations

import random

from .._checks import as_int, as_seconds_like
from ..device import partitions
from ..device.driver import plan_split
from ..schema import Options, auto_rounds
from ..trace.collector import traced
from ..workloads.builtins import spin
from .engine import Slot, nvtx_range
from .experiment import Experiment, experiment
from .runner import Round, run_layouts

__all__ = ["isolation"]


def _isolation_scenario(run: Experiment, name, groups, pacer, crit, out, within, rnd: Round) -> None:
    engine, opts = run.engine, run.options
    assert engine is not None  # experiment() opened it
    for gslots in groups:
        for s in gslots:
            s.run = engine.runner(s)
    for _ in range(opts.warmup):
        for gslots in groups:
            engine.run_group(gslots)
    inside, total = within.get(name, (0, 0))
    first, before = len(out), engine.clocks()
    for rep in range(rnd.first_rep, rnd.first_rep + rnd.repeats):
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
                    out.append({"scenario": name, "role": role, "workload": slot.workload.name, "rep": rep,
                                "launch": j, "round": rnd.index, "sm_count": slot.partition.sm_count,
                                "duration_ms": dur})
            if name != "alone" and len(gslots) == 2:
                inside += sum(e <= ends[0][-1] for e in ends[1])
                total += len(ends[1])
    engine.stamp(out[first:], before)
    if total:
        within[name] = (inside, total)


def isolation(critical, background, split=16, *, repeats: int = 15, warmup: int = 1, rounds: int | None = None,
              device=0, launches: int = 20, pacer_us: float = 50.0, trace: bool = False):
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
    repeats, warmup, rounds, trace
        As for :func:`profile_overlap` (15, 1, 5 rounds, False; the trace's mode is the
        scenario): each round splits afresh and runs the scenarios in a new order.
    device : int, default 0
    launches : int, default 20
        Critical launches per repetition (1 to 10,000).
    pacer_us : float, default 50
        Length of the pacing spin in the ``alone`` scenario, in (0, 1e6] us.

    Returns
    -------
    pandas.DataFrame
        Columns: ``scenario`` (str), ``role`` (``"critical"`` or ``"background"``),
        ``workload`` (str), ``rep`` (int), ``round`` (int), ``sm_count`` (int: SMs available to it),
        ``duration_ms`` (float: for the critical role one launch's latency from its
        issue to its end event, ``launches`` rows per repetition; for the background
        one launch's event span, ``launches + 1`` rows per repetition), ``sm_clock_mhz_before``,
        ``power_w_before``, ``sm_clock_mhz``, ``power_w`` (NVML, per scenario and round),
        ``device_name``, ``run_id``. ``attrs["kind"] = "isolation"``;
        ``attrs["critical_within_background"]``: per contended scenario, the fraction
        of critical launches that ended before the background's last launch did.
    """
    opts = Options(repeats=repeats, warmup=warmup, rounds=auto_rounds(repeats, rounds), trace=trace)
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

    with experiment("isolation", [critical, background], device, opts, check=check) as run:
        crit, bg = run.wls
        pacer = run.adopt(spin(pacer_us, device=run.info.index, name="pacer"))
        within: dict[str, float] = {}
        counts: dict[str, tuple[int, int]] = {}
        run.extra.update(layout=plans[0].label, launches=launches, pacer_us=pacer_us,
                         critical_within_background=within)

        def measure(item, out):
            _, rnd = item
            run.enter_round(rnd.index)
            with partitions.split(plans[0].requested, device=run.info.index) as parts:
                run_scenarios(parts, rnd, out)

        def run_scenarios(parts, rnd, out):
            assert run.engine is not None  # experiment() opened it
            whole = run.engine.whole
            s0, s1 = whole.streams[0], whole.streams[1]
            rem, p0 = parts.remainder, parts[0]
            scenarios = {
                "alone": [[Slot(bg, whole, s0, launches + 1)],
                          [Slot(pacer, whole, s0, launches), Slot(crit, whole, s1, launches, 0)]],
                "streams": [[Slot(bg, whole, s0, launches + 1), Slot(crit, whole, s1, launches, 0)]],
                "partitioned": [[Slot(bg, rem, rem.stream, launches + 1),
                                 Slot(crit, p0, p0.stream, launches, 0)]],
            }
            order = list(scenarios)
            if opts.rounds > 1:
                random.Random(f"{run.run_id} {rnd.index}").shuffle(order)
            try:
                for name in order:
                    with nvtx_range(f"isolation {name}"):
                        _isolation_scenario(run, name, scenarios[name], pacer, crit, out, counts, rnd)
            finally:
                run.engine.drain([p.stream for p in parts.all])
            within.update({k: i / t for k, (i, t) in counts.items()})

        rows, _ = run_layouts(run.rounds([(plans[0].label, None)]), measure, build=run.frame, desc="isolation")
        return traced(run.frame(rows), run.trace)
