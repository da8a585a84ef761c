"""The split tuner: the best split, or the smallest partition that meets a latency target.

:func:`tune` measures only the concurrent mode, only at the layouts the search in
:mod:`gcexplore.experiments.search` asks for, with only as many repetitions as its decisions need,
over the experiments' shared set-up (:func:`gcexplore.experiments.experiment.experiment`): the same
checks before the GPU is touched, the same timing engine, the same rows as a sweep's
concurrent rows plus the search step. Rows measured before a failure or an interrupt
are kept (``exc.partial``), as in :func:`gcexplore.sweep`.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence

from .._checks import MAX_MS, MAX_SMS, Column, as_int, check_columns
from ..analysis.stats import Floor, quantile, run_floor
from ..device import partitions
from ..device.driver import DeviceInfo, GreenContextError, plan_split
from .request import check_enumeration
from ..schema import Options
from .experiment import experiment
from .overlap import measure_layout
from ..results.io import bare
from ..results.run import run_of
from .runner import Round, run_layouts
from .search import Settings, label, search

# With predictions, a layout predicted slower than the answer by more than the tolerance is first measured
# with this many repetitions (Settings.confirm_repeats); one that turns out close gets more.
CONFIRM_REPEATS = 3

__all__ = ["candidates", "replay_tune", "tune"]


def _sizes(name: str, values) -> list[int]:
    seq = [values] if hasattr(values, "__index__") else list(values)
    return [as_int(f"{name} entry", v) for v in seq]


def candidates(info: DeviceInfo, n_workloads: int, *, others: Sequence[int] | None = None,
               sm_counts=None, rounding: str = "up") -> list[tuple[int, ...]]:
    """Layouts the tuner may choose: each workload's granted SMs, the remainder's last.

    The first workload takes each valid size (or each of ``sm_counts``); the middle
    ones take ``others`` when given, else every combination of valid sizes; the last
    takes what is left, which must be at least one SM.

    Raises
    ------
    ValueError
        Fewer than two workloads, ``others`` of the wrong length, sizes the device
        cannot give (the message lists the valid ones), or no layout at all.
    """
    if n_workloads < 2:
        raise ValueError(f"tune needs at least two workloads (the first searched, the last on the rest), "
                         f"got {n_workloads}")
    valid = info.valid_sm_counts()
    firsts = valid if sm_counts is None else _sizes("sm_counts", sm_counts)
    bad = [k for k in firsts if k not in valid]
    if bad or not firsts:
        raise ValueError(f"cannot tune over first-partition size(s) {bad or firsts} on {info.name} "
                         f"({info.sm_count} SMs); valid sizes are {', '.join(map(str, valid))}")
    if others is not None:
        others = _sizes("others", others)
        if len(others) != n_workloads - 2:
            raise ValueError(f"{n_workloads} workloads need {n_workloads - 2} fixed size(s) in others= for the "
                             f"middle workload(s), got {others}")
    check_enumeration(info, n_workloads, len(firsts), others)
    middles = [tuple(others)] if others is not None else itertools.product(valid, repeat=n_workloads - 2)
    out = []
    for mid in middles:
        for k in firsts:
            try:
                plan = plan_split(info, [k, *mid], rounding=rounding)
            except ValueError:
                continue
            if plan.remainder > 0:
                out.append((*plan.granted, plan.remainder))
    if not out:
        raise ValueError(f"no layout of {n_workloads} workloads leaves a remainder on {info.name} "
                         f"(first sizes {firsts}, others {others})")
    return sorted(set(out))


def _progress(enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(desc="tune", unit="visit")


def _gpu_measure(run, rows: list[dict], visits: list[dict], bar):
    """``measure(layout, n)`` for the search: ``n`` concurrent repetitions on the GPU."""
    done: dict[tuple, int] = {}
    rounds: dict[tuple, int] = {}
    base = run.options
    width = len(run.wls)

    def measure(layout, n):
        first = len(rows)
        try:
            rnd = Round(rounds.get(layout, 0), n, done.get(layout, 0))  # each visit is a round: a fresh split
            run.redraw()  # and fresh inputs for workloads built with setup=
            with partitions.split(list(layout[:-1]), device=run.info.index, rounding=base.rounding) as parts:
                if parts.label != label(layout):
                    raise GreenContextError(f"asked for layout {label(layout)}, the driver gave {parts.label}")
                measure_layout(run, parts, rows, dataclasses.replace(base, repeats=n), rnd=rnd)
        finally:
            new = rows[first:]
            for r in new:  # search order
                r["step"] = len(visits)
            got = len(new) // width
            done[layout] = done.get(layout, 0) + got
            visits.append({"step": len(visits), "layout": label(layout), "reps": got, "round": rounds.get(layout, 0)})
            rounds[layout] = rounds.get(layout, 0) + 1
            if bar is not None:
                bar.set_postfix_str(f"{label(layout)} x{got}")
                bar.update(1)
        return [(new[i * width]["makespan_ms"], tuple(r["duration_ms"] for r in new[i * width:(i + 1) * width]))
                for i in range(got)]

    return measure


#: The numbers of a prediction the tuner's prior reads (every one required: a NaN, an infinity, a negative or an
#: absurd time would move the search's start and the layouts it skips).
PRIOR_NUMBERS = {c: Column("ms", positive=not c.endswith("_low_ms"), high=MAX_MS)  # a low end 0: no bound
                 for c in ("makespan_ms", "makespan_low_ms", "duration_ms", "duration_low_ms")}
PRIOR_NUMBERS["split_sm_count"] = Column("SMs", integer=True, positive=True, high=MAX_SMS)


def _prior(predict, names: list[str], card: str = "") -> dict | None:
    """The search's prior from a :func:`gcexplore.predict` result (a frame of predicted makespans),
    refused when it is for another card than ``card`` (the one measured), or when either card is unknown
    (no ``attrs["device_name"]``; rows without a ``device_name`` column). The tuner takes the
    prediction, not the predictor: the prediction family builds on the core, not the reverse."""
    if predict is None:
        return None
    if not (hasattr(predict, "attrs") and predict.attrs.get("kind") == "prediction"):
        got = predict.attrs.get("kind") if hasattr(predict, "attrs") else type(predict).__name__
        raise ValueError(f"predict= takes a gcexplore.predict(...) result (attrs kind 'prediction'), got {got!r}; "
                         f"for solo profiles pass predict=gcexplore.predict(profiles, {names!r})")
    theirs = str(predict.attrs.get("device_name") or "").strip()
    if not theirs:  # unknown is not "the same card": its low ends could skip layouts by another card's times
        raise ValueError("the prediction says no card (attrs['device_name'] is missing or empty), so the tuner "
                         "cannot check it is for the card it measures: predict from profiles that carry the "
                         "'device_name' column (gcexplore.solo_profile records it), or set "
                         "prediction.attrs['device_name'] to the card the profiles were measured on")
    if not card.strip():
        raise ValueError("the measured rows say no card (their 'device_name' column is missing or empty), so a "
                         f"prediction for the {theirs} cannot be checked against it: replay a sweep that carries "
                         "gcexplore's identity columns ('device_name' among them), or replay it without predict=")
    if theirs != card:  # its low ends would skip layouts by another card's times
        raise ValueError(f"the prediction is for the {theirs}, the tuner measures on the {card}: predict from "
                         f"profiles measured on the {card}, or pass card=gcexplore.prediction.traffic_profile.card_of("
                         f"profiles measured there) to gcexplore.predict to scale these to it")
    got = list(predict.attrs.get("workloads", []))
    if got != names:
        raise ValueError(f"the prediction is for workloads {got}, the tuner runs {names} (same names, same order); "
                         "predict with workloads=[...] naming them, e.g. 'memory_a=memory'")
    check_columns(predict, PRIOR_NUMBERS, "predict= (the prediction)", required=True)
    for lo, mid in (("makespan_low_ms", "makespan_ms"), ("duration_low_ms", "duration_ms")):
        if (bad := predict[lo] > predict[mid] * (1 + 1e-9)).any():
            i = int(bad.to_numpy().nonzero()[0][0])
            raise ValueError(f"predict= (the prediction): column {lo!r} is above {mid!r} at row {i} "
                             f"({predict[lo].iloc[i]!r} > {predict[mid].iloc[i]!r}); valid: a low end at most "
                             "the point")
    if (bad := ~predict["layout"].astype(str).str.fullmatch(r"\d+(\+\d+)+")).any():
        raise ValueError(f"predict= (the prediction): column 'layout' holds {predict['layout'][bad].iloc[0]!r}; "
                         "valid: SM counts joined by '+' ('24+108')")
    prior: dict = {}
    for lab, g in predict.groupby("layout", sort=False):
        first = g[g["workload"] == names[0]].iloc[0]
        prior[tuple(int(x) for x in lab.split("+"))] = {
            "makespan": (float(first["makespan_ms"]), float(first["makespan_low_ms"])),
            "first": (float(first["duration_ms"]), float(first["duration_low_ms"]))}
    return prior


def tune(workloads, *, slo_ms: float | None = None, percentile: float = 50.0, others: Sequence[int] | None = None,
         sm_counts=None, tolerance: float = 0.01, confidence: float = 0.9, repeats: int = 5,
         max_repeats: int = 40, warmup: int = 1, device=0, l2_flush: bool = False, graphs: bool = False,
         rounding: str = "up", progress: bool = True, predict=None):
    """The split with the lowest concurrent makespan, or the smallest first partition meeting a latency target.

    Measures only the concurrent mode, at the layouts the search picks (see
    :mod:`gcexplore.experiments.search` for the rules), adding repetitions until each comparison is
    decided or ``max_repeats`` is reached.

    Parameters
    ----------
    workloads : mapping or sequence
        Two or more workloads (as for :func:`gcexplore.sweep`): the first's partition
        size is searched, the last runs on the remainder; middle ones take ``others``
        or, without it, have their sizes searched too (makespan objective only).
    slo_ms : float, optional
        Latency target of the first workload, in ms: find the smallest first partition
        whose ``percentile`` latency (its event span, the rest running concurrently on
        the remainder) is at most this. Default: minimise the makespan.
    percentile : float, default 50
    others : sequence of int, optional
        Fixed sizes of the middle workloads (needed with ``slo_ms`` for three or more).
    sm_counts : sequence of int, optional
        First-partition sizes to choose from; default every valid size.
    tolerance, confidence, repeats, max_repeats
        See :class:`gcexplore.experiments.search.Settings`: the answer within ``tolerance`` (1%) of
        the best, 90% intervals, rounds of 5 repetitions (each a fresh split), at most 40 per
        layout. A layout measured in one round carries the card's recorded run-to-run floor
        (:func:`gcexplore.analysis.stats.run_floor`, in ``attrs["floor"]``).
    warmup : int, default 1
        Discarded repetitions each time a layout is measured.
    device, l2_flush, graphs, rounding
        As for :func:`gcexplore.sweep`.
    progress : bool, default True
        A progress bar (tqdm.auto) counting measurements.
    predict : DataFrame, optional
        A :func:`gcexplore.predict` result for these workloads (same names, same order; from solo
        profiles, ``gcexplore.predict(profiles, names)``): the search starts at the predicted best
        and skips layouts whose predicted interval cannot beat the answer; the answer is still measured and
        confirmed against its neighbours (those its prediction says can beat it), a neighbour predicted
        slower than the answer by more than ``tolerance`` with 3 repetitions first. It must be
        for the card measured (``attrs["device_name"]``; ``predict(card=...)`` scales profiles
        from another): another card's times would skip layouts by the wrong bounds.

    Returns
    -------
    pandas.DataFrame
        ``attrs["kind"] = "tune"``; one row per measured repetition x workload, with the
        columns of a sweep (``mode`` is ``"concurrent"``) and ``step`` (the search step
        that measured it; ``rep`` counts on across a layout's steps). ``attrs`` adds the
        settings (``objective``, ``slo_ms``, ``percentile``, ``tolerance``, ...),
        ``answer`` (the layout label, None for a target not met), ``met``, ``value_ms``,
        ``best_measured``, ``reason`` (sentences), ``comparisons``, ``unmeasured``
        (layout -> bound and why), ``visits``, ``notes``, ``workloads`` and
        ``candidates``. :func:`gcexplore.analysis.tune_table` summarises it,
        :func:`gcexplore.plot_tune` draws it.

    Raises
    ------
    ValueError, TypeError
        Before measuring: bad settings or sizes, fewer than two workloads, a latency
        target with the middle sizes unfixed, a prediction for another card.
    MeasurementFailed, MeasurementInterrupted
        ``exc.partial`` holds every repetition measured so far.
    """
    settings = Settings(slo_ms=slo_ms, percentile=percentile, tolerance=tolerance, confidence=confidence,
                        repeats=repeats, max_repeats=max_repeats,
                        confirm_repeats=None if predict is None else min(CONFIRM_REPEATS, repeats))
    opts = Options(repeats=repeats, warmup=warmup, modes=("concurrent",), l2_flush=l2_flush, graphs=graphs,
                   rounding=rounding)
    plan: dict = {}

    def check(info, names):
        if slo_ms is not None and len(names) > 2 and others is None:
            raise ValueError(f"a latency target with {len(names)} workloads needs others= (the middle "
                             "workloads' fixed sizes); only the first partition's size is searched")
        plan.update(names=names, cands=candidates(info, len(names), others=others, sm_counts=sm_counts,
                                                  rounding=opts.rounding), prior=_prior(predict, names, info.name),
                    settings=dataclasses.replace(settings, floor=run_floor(device_name=info.name, workloads=names)))

    with experiment("tune", workloads, device, opts, check=check) as run:
        visits: list[dict] = []
        run.extra.update(plan["settings"].metadata(), workloads=plan["names"], visits=visits,
                         candidates=[label(c) for c in plan["cands"]], predicted=plan["prior"] is not None)
        found = {}

        def measure_all(_, out):
            bar = _progress(progress)
            try:
                found["o"] = search(plan["cands"], _gpu_measure(run, out, visits, bar), plan["settings"],
                                    names=plan["names"], prior=plan["prior"])
            finally:
                if bar is not None:
                    bar.close()

        rows, _ = run_layouts([("tune", None)], measure_all, build=run.frame)
        run.extra.update(found["o"].metadata())
        return run.frame(rows)


def _recorded(sweep, names: list[str]) -> dict:
    """layout -> [(makespan_ms, (duration_ms per workload in ``names`` order)), ...] in measured order."""
    conc = bare(sweep[sweep["mode"] == "concurrent"])
    keys = [k for k in ("round", "rep") if k in conc.columns]
    per = bare(run_of(sweep).rep_makespans("concurrent"))
    # plain Python over the rows: a pivot per layout (of a frame whose attrs pandas copies) was most of a replay
    spans = {(str(lay), *k): float(m) for lay, *k, m in zip(per["layout"], *(per[c] for c in keys), per["makespan_ms"])}
    cells: dict[str, dict[tuple, dict[str, float]]] = {}
    for lay, *k, w, d in zip(conc["layout"].astype(str), *(conc[c] for c in keys), conc["workload"].astype(str),
                             conc["duration_ms"].to_numpy(dtype=float)):
        row = cells.setdefault(lay, {}).setdefault(tuple(k), {})
        prev = row.get(w, math.nan)  # the slowest of a workload's rows in a repetition (NaN: no duration)
        row[w] = d if math.isnan(prev) else prev if math.isnan(d) else max(prev, d)
    return {tuple(int(x) for x in lay.split("+")): [(spans.get((lay, *k), math.nan), tuple(r[n] for n in names))
                                                    for k, r in sorted(reps.items())]
            for lay, reps in cells.items()}


def replay_tune(sweep, predict=None, *, tolerance: float = 0.01, repeats: int = 3) -> dict:
    """The tuner's makespan search replayed over a recorded sweep (no GPU), with or without predictions.

    Each layout hands out its recorded concurrent repetitions in measured order, ``repeats`` at a
    visit, at most what the sweep recorded (a close call still undecided then goes to the lower
    median, as at ``max_repeats``); as in :func:`gcexplore.recommend_comm`, a replay of one run adds
    no run-to-run floor. ``predict`` is as for :func:`tune` (a :func:`gcexplore.predict` result
    naming the sweep's workloads in partition order).

    Returns
    -------
    dict
        ``answer`` and ``answer_ms`` (the median of all its recorded repetitions, as the sweep's),
        ``best`` and ``best_ms`` (the sweep's lowest median), ``gap`` (answer_ms / best_ms - 1),
        ``layouts_measured`` of ``layouts``, ``reps_measured``, ``gpu_ms`` (the makespans of the
        repetitions it took) of ``sweep_gpu_ms`` (every concurrent repetition's), ``predicted``.
    """
    conc = sweep[sweep["mode"] == "concurrent"] if "mode" in sweep.columns else sweep.iloc[:0]
    if conc.empty:
        raise ValueError("replay_tune needs a sweep with 'concurrent' rows (gcexplore.sweep(..., "
                         "modes=('concurrent',)))")
    cards = list(dict.fromkeys(conc["device_name"].dropna().astype(str))) if "device_name" in conc.columns else []
    if predict is not None and len(cards) > 1:
        raise ValueError(f"replay_tune: the sweep holds rows of {len(cards)} cards ({', '.join(cards[:3])}); a "
                         "prediction is for one: replay one card's rows (sweep[sweep['device_name'] == ...])")
    card = cards[0] if cards and not conc["device_name"].isna().any() else ""
    order = conc.drop_duplicates("workload").assign(_last=lambda d: d["partition"] == "remainder")
    names = list(order.sort_values(["_last", "partition"], kind="stable")["workload"].astype(str))
    reps = _recorded(sweep, names)
    recorded = min(len(v) for v in reps.values())
    used = dict.fromkeys(reps, 0)

    def measure(layout, n):
        got = reps[layout][used[layout]:used[layout] + n]
        used[layout] += len(got)
        return got

    first = min(repeats, recorded)
    settings = Settings(tolerance=tolerance, repeats=first, max_repeats=recorded,
                        floor=Floor(0.0, 0.0, "replay of one recorded run"),
                        confirm_repeats=None if predict is None else min(CONFIRM_REPEATS, first))
    out = search(list(reps), measure, settings, names=names, prior=_prior(predict, names, card))
    med = {k: quantile([m for m, _ in v], 0.5) for k, v in reps.items()}
    best = min(med, key=lambda k: (med[k], k))
    assert out.answer is not None  # the makespan objective always answers
    answer = tuple(int(x) for x in out.answer.split("+"))
    spent = sum(m for k, v in reps.items() for m, _ in v[:used[k]])
    return {"answer": out.answer, "answer_ms": med[answer], "best": label(best), "best_ms": med[best],
            "gap": med[answer] / med[best] - 1.0, "layouts_measured": sum(1 for v in used.values() if v),
            "layouts": len(reps), "reps_measured": sum(used.values()), "gpu_ms": spent,
            "sweep_gpu_ms": sum(m for v in reps.values() for m, _ in v), "predicted": predict is not None}
