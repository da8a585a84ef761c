"""The mechanisms experiment: one pair of workloads under every way of sharing a GPU.

:func:`compare_mechanisms` (also named :func:`mechanisms`) runs the pair (1) on green contexts at each split, (3) on
two plain streams and
(5) one after another, through the core's :func:`~gcexplore.experiments.overlap.sweep` (its modes
``concurrent``, ``streams``, ``sequential``); (4) on plain streams with the critical workload's at
the highest stream priority, through the core's timing engine; and (2) under MPS, each workload in
its own client process of gcexplore's own daemon at the active-thread percentage of its share
(:mod:`.clients`). Its rows are framed by the core's run constructor
(:func:`~gcexplore.experiments.experiment.experiment`): one identity and run id for every
mechanism, and the rows measured so far kept when something fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from ..device.driver import check, driver_module, plan_split
from ..experiments.engine import Slot
from ..experiments.experiment import Experiment, experiment
from ..experiments.overlap import sweep
from ..experiments.runner import MeasurementAborted, MeasurementFailed, MeasurementInterrupted
from ..schema import Options
from .align import align_clients
from .clients import run_clients
from .kind import KIND, MECHANISMS
from .mps import MpsDaemon, MpsUnavailable, mps_refusal
from .pair import build_pair, pair_specs

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["compare_mechanisms", "mechanisms"]

_FROM_SWEEP = {"concurrent": "green", "streams": "streams", "sequential": "sequential"}


def _check_mechanisms(mechs) -> tuple[str, ...]:
    if isinstance(mechs, str):
        mechs = tuple(m.strip() for m in mechs.split(","))
    mechs = tuple(mechs)
    bad = [m for m in mechs if m not in MECHANISMS]
    if bad or not mechs or len(set(mechs)) != len(mechs):
        raise ValueError(f"mechanisms must be distinct names of {', '.join(MECHANISMS)}; got {list(mechs)!r}")
    return mechs


def _check_splits(splits) -> tuple[int, ...]:
    one = isinstance(splits, int) and not isinstance(splits, bool)
    try:
        out = (splits,) if one else tuple(cast(Any, splits))  # a bool or a non-iterable: the TypeError below
    except TypeError:
        raise TypeError(
            f"splits are SM counts of the critical workload's share, e.g. (24, 64, 104); got {splits!r}"
        ) from None
    if not out or not all(isinstance(k, int) and not isinstance(k, bool) and k > 0 for k in out):
        raise ValueError(
            f"splits are positive SM counts of the critical workload's share, e.g. (24, 64, 104); got {splits!r}"
        )
    return out


def _row(
    mechanism,
    layout,
    k,
    rep,
    rnd,
    name,
    critical,
    sms,
    start,
    dur,
    makespan,
    *,
    pct=float("nan"),
    priority=None,
    span=float("nan"),
    clock="events",
) -> dict:
    return {
        "mechanism": mechanism,
        "layout": layout,
        "split_sm_count": int(k),
        "rep": int(rep),
        "round": int(rnd),
        "workload": name,
        "critical": name == critical,
        "sms": int(sms),
        "thread_pct": pct,
        "priority_level": priority,
        "start_ms": start,
        "duration_ms": dur,
        "makespan_ms": makespan,
        "timer_span_ms": span,
        "clock": clock,
    }


def _from_sweep(df, critical: str, sm_count: int) -> list[dict]:
    rows = []
    for r in df.itertuples(index=False):
        mech = _FROM_SWEEP.get(r.mode)
        if mech is None:
            continue
        sms = r.sm_count if mech == "green" else sm_count
        rows.append(
            _row(
                mech,
                r.layout,
                r.split_sm_count,
                r.rep,
                r.round,
                r.workload,
                critical,
                sms,
                r.start_ms,
                r.duration_ms,
                r.makespan_ms,
            )
        )
    return rows


def _priority_range() -> tuple[int, int]:
    """``(least, greatest)`` stream priority of the current context (greatest is the numerically lowest)."""
    least, greatest = check(driver_module().cuCtxGetStreamPriorityRange(), "cuCtxGetStreamPriorityRange")
    return int(least), int(greatest)


def _priority(run: Experiment, wls: dict, critical: str, layouts: list[tuple[str, int]], rows: list[dict]) -> None:
    """Plain streams, the critical workload's at the greatest priority, the other's at the least; each
    repetition's rows appended to ``rows`` as it is measured (kept if a later one fails)."""
    from ..device.driver import use

    eng = run.engine
    assert eng is not None  # experiment() opened it
    with use(run.info.index):
        least, greatest = _priority_range()
        streams = {n: eng.whole.create_stream(priority=greatest if n == critical else least) for n in wls}
    slots = [Slot(w, eng.whole, streams[n]) for n, w in wls.items()]
    level = {n: greatest if n == critical else least for n in wls}
    for _, ((label, k), rnd) in run.rounds([(label, (label, k)) for label, k in layouts]):
        run.enter_round(rnd.index)
        eng.warm(slots, calls=True)
        for i in range(run.options.warmup if rnd.index == 0 else 0):
            eng.run_group(slots)
        for rep in range(rnd.first_rep, rnd.first_rep + rnd.repeats):
            per_slot, makespan = eng.run_group(slots)
            for slot, launches in zip(slots, per_slot):
                ((start, dur),) = launches
                rows.append(
                    _row(
                        "priority",
                        label,
                        k,
                        rep,
                        rnd.index,
                        slot.workload.name,
                        critical,
                        run.info.sm_count,
                        start,
                        dur,
                        makespan,
                        priority=level[slot.workload.name],
                    )
                )


def _green_sm_ids(run: Experiment, layouts, names) -> dict[str, list[int]]:
    out = {}
    for label, k in layouts:
        with run.partitioned([k]) as parts:
            for name, p in zip(names, parts.all):
                out[f"green|{label}|{name}"] = sorted(p.sm_ids())
    assert run.engine is not None  # experiment() opened it
    whole = sorted(run.engine.whole.sm_ids())
    for name in names:
        out[f"streams|*|{name}"] = whole  # every plain stream reaches the whole card, at every split
    return out


def _mps(run: Experiment, specs: dict, names, critical, layouts, timeout_s, rows: list[dict], seen: dict) -> None:
    """Each split's MPS clients; their rows appended to ``rows`` split by split, what they saw to ``seen``."""
    n = run.info.sm_count
    with MpsDaemon() as daemon:
        for label, k in layouts:
            pcts = {name: 100.0 * (k if name == critical else n - k) / n for name in names}
            got = run_clients(
                specs,
                pcts,
                daemon,
                device=run.info.index,
                repeats=run.options.repeats,
                warmup=run.options.warmup,
                timeout_s=timeout_s,
            )
            for name in names:
                if pcts[name] < 90 and len(got[name]["sms"]) >= n:  # the limit did not apply: not an MPS client
                    raise MpsUnavailable(
                        f"the {name} client, limited to {pcts[name]:.0f}% of the threads, reached all {n} "
                        "SMs: it ran outside gcexplore's MPS daemon (did the daemon start?)"
                    )
            for r in align_clients({name: got[name]["stamps"] for name in names}):
                name = r["workload"]
                rows.append(
                    _row(
                        "mps",
                        label,
                        k,
                        r["rep"],
                        0,
                        name,
                        critical,
                        len(got[name]["sms"]),
                        r["start_ms"],
                        r["duration_ms"],
                        r["makespan_ms"],
                        pct=pcts[name],
                        span=r["timer_span_ms"],
                        clock="globaltimer",
                    )
                )
                seen[f"mps|{label}|{name}"] = got[name]["sms"]


def compare_mechanisms(
    pair,
    splits: Sequence[int] = (24, 64, 104),
    *,
    mechanisms: Sequence[str] = MECHANISMS,
    critical: str | None = None,
    repeats: int = 30,
    warmup: int = 3,
    rounds: int = 1,
    device: int = 0,
    timeout_s: float = 300.0,
):
    """Run one pair of workloads under green contexts, MPS, plain streams, prioritised streams and one
    after another, at each split.

    Parameters
    ----------
    pair
        Two workloads as another process can rebuild them (:func:`.pair.pair_specs`): built-in recipes
        (``["latency", "memory"]``, ``{"lat": "latency:blocks=8", ...}``), or a factory
        ``"module:function"`` / ``{"factory": ..., "kwargs": {...}}`` returning two workloads (PyTorch,
        CuPy or built-ins), as campaigns take them.
    splits : sequence of int, default (24, 64, 104)
        The critical workload's SMs (green contexts: its partition, rounded as the driver rounds; MPS:
        an active-thread percentage of the same share; the other workload gets the rest).
    mechanisms : sequence of str, default all of :data:`.kind.MECHANISMS`
    critical : str, optional
        The workload whose tail (p99) is asked about; default the first. It gets the split's first
        share and, under ``priority``, the high-priority stream.
    repeats, warmup, rounds : int
        Measured repetitions per mechanism and split, discarded ones before them, rounds (green,
        streams, sequential and priority take rounds; the MPS clients of a split are one round).
    device : int, default 0
    timeout_s : float, default 300
        How long an MPS client may take to report.

    Returns
    -------
    pandas.DataFrame
        Kind ``"mechanisms"`` (columns in :mod:`.kind`), ``attrs["sm_ids"]``: the SM ids each mechanism
        gave each workload (``"mechanism|layout|workload"`` keys; plain streams once for all layouts),
        ``attrs["clocks"]``: what each ``clock`` value means, ``attrs["critical"]``.

    Raises
    ------
    ValueError, TypeError
        A bad pair, split or mechanism, before any GPU work.
    MpsUnavailable
        ``"mps"`` asked for where it cannot run (the message says why); before any GPU work.
    MeasurementFailed, MeasurementInterrupted
        A workload or client failed, or Ctrl-C: ``exc.partial`` holds every row measured so far.
    """
    from .kind import CLOCKS

    specs = pair_specs(pair)
    mechs = _check_mechanisms(mechanisms)
    ks = _check_splits(splits)
    options = Options(repeats=repeats, warmup=warmup, rounds=rounds)
    if "mps" in mechs and (why := mps_refusal()):
        raise MpsUnavailable(why)
    wls = build_pair(specs, device=device)
    try:
        names = list(wls)
        critical = critical or names[0]
        if critical not in wls:
            raise ValueError(f"critical workload {critical!r} is not in the pair {names}")
        names = [critical, *(n for n in names if n != critical)]
        wls = {n: wls[n] for n in names}
        return _measure(wls, specs, names, critical, ks, mechs, options, device, timeout_s, CLOCKS)
    finally:
        for w in wls.values():
            w.close()


def _measure(wls, specs, names, critical, ks, mechs, options, device, timeout_s, clocks):
    rows: list[dict] = []
    with experiment(KIND, wls, device, options) as run:
        plans = [plan_split(run.info, [k]) for k in ks]
        layouts = [(p.label, p.granted[0]) for p in plans]
        run.extra.update(critical=critical, clocks=clocks, mechanisms=list(mechs), splits=[k for _, k in layouts])
        try:
            modes = [m for m, mech in _FROM_SWEEP.items() if mech in mechs]
            if modes:
                df = cast("pd.DataFrame", sweep(  # trace=False: a frame
                    wls,
                    [k for _, k in layouts],
                    modes=modes,
                    repeats=options.repeats,
                    warmup=options.warmup,
                    rounds=options.rounds,
                    device=device,
                    progress=False,
                ))
                rows += _from_sweep(df, critical, run.info.sm_count)
                run.extra["sweep_run_id"] = df.attrs.get("run_id")
            if "priority" in mechs:
                _priority(run, wls, critical, layouts, rows)
            run.extra["sm_ids"] = seen = _green_sm_ids(run, layouts, names)
            if "mps" in mechs:
                _mps(run, specs, names, critical, layouts, timeout_s, rows, seen)
        except BaseException as e:
            if isinstance(e, MeasurementAborted) and "mode" in getattr(e.partial, "columns", ()):
                rows += _from_sweep(e.partial, critical, run.info.sm_count)  # the sweep's rows so far
            if isinstance(e, KeyboardInterrupt):
                raise MeasurementInterrupted(
                    f"mechanisms interrupted; {len(rows)} rows kept in exc.partial", run.frame(rows)
                ) from e
            if isinstance(e, Exception):
                raise MeasurementFailed(
                    f"mechanisms failed ({type(e).__name__}: {e}); {len(rows)} rows kept in exc.partial",
                    run.frame(rows),
                ) from e
            raise
        return run.frame(rows)


#: The same function by the family's name (``gcexplore.mechanisms.mechanisms``; at the top level the name
#: ``gcexplore.mechanisms`` is this package).
mechanisms = compare_mechanisms
