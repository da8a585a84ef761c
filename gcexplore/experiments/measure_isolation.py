"""The isolation experiment: a latency-critical workload next to a background one, alone, on
plain streams and on complementary partitions (NVIDIA's green-context sample as a measurement)."""

from __future__ import annotations

from .._checks import as_int, as_seconds_like
from ..device import partitions
from ..device.driver import plan_split
from ..schema import Options
from ..trace.collector import traced
from ..workloads.builtins import spin
from .engine import Slot, nvtx_range
from .experiment import Experiment, experiment
from .runner import run_layouts

__all__ = ["isolation"]


def _isolation_scenario(run: Experiment, name, groups, pacer, crit, out, within) -> None:
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

    with experiment("isolation", [critical, background], device, opts, check=check) as run:
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
