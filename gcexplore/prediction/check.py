"""A prediction against a measurement: per-layout errors, the facts a sentence may state, and the
model's sharing rule and interval fitted on measured pairs (pure pandas/numpy, no GPU).

Over 500 lines for a reason: :func:`plateau_residuals` (issue 45) reads the same prediction against
measurement as the errors above, and the prediction family is being regrouped (issue 43).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import pandas as pd

from ..analysis.overlap import layout_table, makespan_stats
from .model import SHARING, PreparedProfiles, l2_drawn_gbs, predict, predicted_layouts, require_prediction
from .saturation import SATURATION_LOADS, SATURATION_RAMPS, SHARE_RULES
from .terms import TERMS, ModelTerms
from ..analysis.stats import Floor, round_median_ci, run_floor
from ..results.run import run_of

__all__ = ["AGGRESSION_CANDIDATES", "COUNTS", "ERROR_COLUMNS", "L2_CANDIDATES", "LATENCY_CANDIDATES", "MARGIN_RULES",
           "MeasuredSide", "SATURATION_CANDIDATES", "TOTAL_ONSETS", "calibrate_margins", "coverage_table", "fit_model",
           "held_out_coverage",
           "layout_errors", "margins_of", "plateau_residuals", "plateau_sentence", "predict_error", "predict_kwargs",
           "prediction_facts"]

ERROR_COLUMNS = ["layout", "split_sm_count", "predicted_ms", "predicted_low_ms", "predicted_high_ms",
                 "measured_ms", "measured_low_ms", "measured_high_ms", "error", "inside", "inside_strict",
                 "predicted_interference", "measured_interference"]


def _measured_intervals(measured: pd.DataFrame, confidence: float = 0.9,
                        floor: Floor | None = None) -> dict[str, tuple[float, float]]:
    """Per layout: the interval of the run's concurrent makespan with the between-round component
    (:func:`~gcexplore.analysis.stats.round_median_ci`; the card's floor for a single round)."""
    per = run_of(measured).rep_makespans("concurrent")
    floor = floor or run_floor(measured)
    return {cast(str, lay): cast("tuple[float, float]", round_median_ci(g["makespan_ms"], g["round"], confidence,
                                                                         floor=floor)[1:])
            for lay, g in per.groupby("layout", sort=False)}


def predict_error(prediction: pd.DataFrame, measured: pd.DataFrame, *, floor: Floor | None = None) -> pd.DataFrame:
    """Per layout measured in both: the predicted against the measured median concurrent makespan.

    Parameters
    ----------
    prediction : pandas.DataFrame
        :func:`predict`'s result.
    measured : pandas.DataFrame
        A sweep, overlap or tune result with ``concurrent`` rows (one run).
    floor : Floor, optional
        Run-to-run noise of a layout measured in one round (default: the card's recorded
        :func:`~gcexplore.analysis.stats.noise_floor`; ``Floor(0)`` counts only the repetitions).

    Returns
    -------
    pandas.DataFrame
        Columns ``layout``, ``split_sm_count``, ``predicted_ms`` (and ``_low_ms``,
        ``_high_ms``), ``measured_ms`` (median over repetitions) with ``measured_low_ms`` /
        ``measured_high_ms`` (its 90% interval, the round as the unit: where another run would
        land), ``error`` (predicted / measured - 1), ``inside`` (the two intervals meet: the
        prediction agrees with the measurement up to its run-to-run noise), ``inside_strict``
        (the measured median itself within the predicted interval: the stricter count),
        ``predicted_interference`` and ``measured_interference`` (NaN without ``alone``
        rows); sorted by ``split_sm_count``.
    """
    require_prediction(prediction, "predict_error")
    return _error_rows(prediction, MeasuredSide(measured, floor=floor))


class MeasuredSide:
    """What :func:`predict_error` reads of a measured sweep, read once: per layout the median
    concurrent makespan, its interval and the interference (``fit_model`` compares many
    predictions with one sweep)."""

    def __init__(self, measured: pd.DataFrame, *, floor: Floor | None = None):
        if "mode" not in measured.columns or not (measured["mode"] == "concurrent").any():
            raise ValueError("predict_error needs a measured result with 'concurrent' rows (sweep, overlap or tune)")
        self.order = list(dict.fromkeys(measured.loc[measured["mode"] == "concurrent", "workload"].astype(str)))
        self.medians = makespan_stats(measured, "concurrent").set_index("layout")["median_ms"]
        self.interference = pd.Series(dtype=float)
        if (measured["mode"] == "alone").any():
            self.interference = layout_table(measured).set_index("layout")["interference"]
        self.intervals = _measured_intervals(measured, floor=floor)


def _error_rows(prediction: pd.DataFrame, side: MeasuredSide) -> pd.DataFrame:
    require_prediction(prediction, "predict_error")
    names = list(prediction.attrs.get("workloads") or [])
    if names and set(side.order) != set(names):
        raise ValueError(f"predict_error: the prediction is of {', '.join(names)}, the measurement of "
                         f"{', '.join(side.order)}; compare a prediction with a sweep of the same workloads")
    ms, inter, iv = side.medians, side.interference, side.intervals
    lay = predicted_layouts(prediction)
    lay = lay[lay["layout"].isin(ms.index)]
    m = lay["layout"].map(ms).to_numpy(dtype=float)
    mlo = np.array([iv.get(x, (np.nan, np.nan))[0] for x in lay["layout"]], dtype=float)
    mhi = np.array([iv.get(x, (np.nan, np.nan))[1] for x in lay["layout"]], dtype=float)
    out = pd.DataFrame({
        "layout": lay["layout"], "split_sm_count": lay["split_sm_count"], "predicted_ms": lay["makespan_ms"],
        "predicted_low_ms": lay["makespan_low_ms"], "predicted_high_ms": lay["makespan_high_ms"],
        "measured_ms": m, "measured_low_ms": mlo, "measured_high_ms": mhi,
        "error": lay["makespan_ms"].to_numpy() / m - 1.0,
        "inside": (lay["makespan_low_ms"].to_numpy() <= mhi) & (mlo <= lay["makespan_high_ms"].to_numpy()),
        "inside_strict": (lay["makespan_low_ms"].to_numpy() <= m) & (m <= lay["makespan_high_ms"].to_numpy()),
        "predicted_interference": lay["interference"],
        "measured_interference": lay["layout"].map(inter).to_numpy(dtype=float),
    }, columns=ERROR_COLUMNS).reset_index(drop=True)
    if out.empty:
        raise ValueError(f"no layout is both predicted and measured "
                         f"(predicted {list(prediction['layout'].unique())[:4]}"
                         f"..., measured {list(ms.index)[:4]}...)")
    return out


def prediction_facts(prediction: pd.DataFrame, measured: pd.DataFrame) -> dict:
    """Everything a sentence about a prediction against a measured sweep may say.

    Returns
    -------
    dict
        ``layouts`` (compared), ``median_abs_error``, ``max_abs_error`` (fractions),
        ``worst_layout``, ``inside`` (fraction of layouts whose intervals meet the measurement's),
        ``inside_strict`` (fraction of measured medians inside the predicted intervals),
        ``predicted_best`` (layout), ``predicted_best_measured_ms`` (its measured median),
        ``measured_best``, ``measured_best_ms``, ``best_gap`` (predicted best's measured /
        measured best - 1).
    """
    e = predict_error(prediction, measured)
    a = e["error"].abs()
    pb = e.loc[cast(Any, e["predicted_ms"].idxmin())]  # pandas-stubs: idxmin gives a Hashable, not a label
    mb = e.loc[cast(Any, e["measured_ms"].idxmin())]
    return {"layouts": int(len(e)), "median_abs_error": float(a.median()), "max_abs_error": float(a.max()),
            "worst_layout": str(e.loc[cast(Any, a.idxmax()), "layout"]), "inside": float(e["inside"].mean()),
            "inside_strict": float(e["inside_strict"].mean()),
            "predicted_best": str(pb["layout"]), "predicted_best_measured_ms": float(pb["measured_ms"]),
            "measured_best": str(mb["layout"]), "measured_best_ms": float(mb["measured_ms"]),
            "best_gap": float(pb["measured_ms"] / mb["measured_ms"] - 1.0)}


#: Multiples of the highest L2 GB/s any profiled workload drew alone that fit_model tries as the
#: L2's shared bandwidth (None: not modelled).
L2_CANDIDATES = (None, 0.75, 1.0)
#: Loaded-latency factors (``ModelTerms(loaded_latency=...)``) that fit_model tries with the chosen rule.
LATENCY_CANDIDATES = (0.0, 0.5, 1.0, 1.5)
#: Saturation onsets (``ModelTerms(saturation_onset=...)``, None: not modelled) that fit_model tries where
#: a fitted pair's profiles carry a copy probe.
SATURATION_CANDIDATES = (None, 0.5, 0.7, 0.85)
#: And with the ramp by everyone's demand (``saturation_load="total"``, which counts the workload's own
#: too, so it sits higher): also near saturation itself.
TOTAL_ONSETS = (0.95,)
#: Scales of the co-runners' measured aggression (``ModelTerms(saturation_aggression=...)``, None: every
#: co-runner's demand counts in full) that fit_model tries where the profiles carry a large probe.
AGGRESSION_CANDIDATES = (None, 0.5, 1.0, 1.5)


def predict_kwargs(fit: dict) -> dict:
    """The keyword arguments of :func:`~gcexplore.prediction.model.predict` that a :func:`fit_model`
    result (or a shipped ``attrs["fit"]``) sets: ``terms`` (a :class:`~.terms.ModelTerms`; a term the fit
    predates keeps its default) and ``model_error``."""
    unset = ModelTerms()  # a term the fit predates, or records as None where None is no setting, keeps its default
    out: dict = {"terms": ModelTerms(**{k: fit[k] for k in TERMS
                                        if k in fit and (fit[k] is not None or getattr(unset, k) is None)})}
    if "model_error" in fit:
        out["model_error"] = tuple(fit["model_error"])
    return out


def _measured_layouts(measured: pd.DataFrame) -> list[str]:
    conc = measured[measured["mode"] == "concurrent"] if "mode" in measured else measured
    return sorted(conc["layout"].unique(), key=lambda s: tuple(int(x) for x in str(s).split("+")))


def _conformal_bound(per_pair: pd.Series, quantile: float) -> float:
    """The ceil((n + 1) x quantile)-th smallest of n per-pair values (the largest where n is too small)."""
    k = int(np.ceil((len(per_pair) + 1) * quantile))
    return float(np.sort(per_pair.to_numpy())[min(k, len(per_pair)) - 1])


def _margins(e: pd.DataFrame, quantile: float) -> tuple[tuple[float, float], float]:
    """(below, above) margins of :func:`fit_model` from layout errors with a ``_case`` column, and the fraction of
    those layouts the widened interval then holds."""
    # above: how far each measurement's round interval (where another run would land) lies above, per
    # pair (a pair's layouts share the model's error: the pair is the unit), then over the pairs their
    # conformal bound, the ceil((n + 1) x quantile)-th smallest (the largest for fewer than 19 at 0.9);
    # below: every measured median the model's lower bound would cut off (the tuner skips by it)
    gap = cast(pd.Series, np.maximum(e["measured_low_ms"] / e["predicted_high_ms"] - 1, 0))  # a ufunc keeps the Series
    above = _conformal_bound(gap.groupby(e["_case"]).quantile(quantile, interpolation="higher"), quantile)
    below = float(np.max(np.maximum(1 - e["measured_ms"] / e["predicted_low_ms"], 0)))
    err = (min(below, 0.99), min(above, 0.99))
    return err, float(_inside(e, err).mean())


#: How a layout counts as inside the predicted interval: "overlap" (the prediction's interval meets the
#: measurement's round interval: agreement up to the run-to-run noise) or "strict" (the measured median itself
#: within the prediction's interval). :func:`predict_error` gives both (``inside``, ``inside_strict``).
COUNTS = ("overlap", "strict")


def _inside(e: pd.DataFrame, err: tuple[float, float], count: str = "overlap") -> pd.Series:
    lo, hi = e["measured_low_ms"], e["measured_high_ms"]
    if count == "strict":
        lo = hi = e["measured_ms"]
    return (e["predicted_low_ms"] * (1 - err[0]) <= hi) & (lo <= e["predicted_high_ms"] * (1 + err[1]))


def _check_count(count: str) -> None:
    if count not in COUNTS:
        raise ValueError(f"count must be one of {COUNTS} (how a layout counts as inside), got {count!r}")


def coverage_table(errors: pd.DataFrame, by: str | None = None) -> pd.DataFrame:
    """Both counts of the interval over :func:`predict_error` rows (with the margins applied), per value of
    column ``by`` (a run; None: all rows as one): ``layouts``, ``inside`` and ``inside_strict`` (counts),
    ``coverage`` (overlap: the intervals meet) and ``coverage_strict`` (the measured median inside the
    prediction). The one owner of the rates a page states about the interval."""
    need = {"inside", "inside_strict"} | ({by} if by else set())
    if missing := sorted(need - set(errors.columns)):
        raise ValueError(f"coverage_table needs predict_error's rows with the columns {sorted(need)}; "
                         f"missing {missing}")
    key = errors[by] if by else pd.Series("all", index=errors.index)
    g = errors.groupby(key, sort=False)
    out = pd.DataFrame({"layouts": g.size(), "inside": g["inside"].sum().astype(int),
                        "inside_strict": g["inside_strict"].sum().astype(int)})
    out["coverage"] = out["inside"] / out["layouts"]
    out["coverage_strict"] = out["inside_strict"] / out["layouts"]
    return out.rename_axis(by or "rows").reset_index()


def _risk_margins(e: pd.DataFrame, quantile: float, count: str = "overlap") -> tuple[tuple[float, float], float]:
    """MARGIN_RULES' "risk": (below, above) from layout errors of the raw model (``model_error`` 0) with a
    ``_case`` column (the pair: its layouts share the model's error, so the pair is the exchangeable unit).
    below: the conformal bound over the pairs of each pair's largest lower cut (the tuner skips by the low end);
    above: the smallest margin whose fraction of each pair's layouts outside, summed over the n pairs plus 1 (the
    next pair, all outside), is at most (1 - quantile) (n + 1): conformal risk control, so a new exchangeable
    pair's expected fraction of layouts inside is at least ``quantile``. ``count`` (:data:`COUNTS`): "strict" asks
    the measured median itself inside, "overlap" the measured round interval to meet the prediction's."""
    cut = cast(pd.Series, np.maximum(1 - e["measured_ms"] / e["predicted_low_ms"], 0)).groupby(e["_case"]).max()
    n = len(cut)
    below = _conformal_bound(cut, quantile)
    # each layout's margin above that puts it inside (inf where the low end misses it anyway)
    strict = count == "strict"
    lo, hi = (e["measured_ms"],) * 2 if strict else (e["measured_low_ms"], e["measured_high_ms"])
    need = np.where(e["predicted_low_ms"] * (1 - below) <= hi, np.maximum(lo / e["predicted_high_ms"] - 1, 0), np.inf)
    share = 1.0 / e.groupby("_case")["_case"].transform("size").to_numpy()  # a layout's weight in its pair
    order = np.argsort(need, kind="stable")
    outside = n - np.cumsum(share[order])  # pairs' summed outside fraction once margin need[order[j]] is taken
    ok = np.flatnonzero((outside + 1) / (n + 1) <= 1 - quantile + 1e-12)
    above = float(need[order[ok[0]]]) + 1e-9 if len(ok) else np.inf  # + rounding: the layout itself inside
    if not (np.isfinite(above) and above < 1 and below < 1):
        raise ValueError(f"no margin below 1 makes the interval hold {quantile:.0%} of a new pair's layouts on these "
                         f"{n} pairs (below {below:.3f}, above {above:.3f}): the model misses them; calibrate on "
                         f"more pairs or lower quantile (got {quantile})")
    err = (below, float(above))
    return err, float(_inside(e, err, count).mean())


#: How :func:`calibrate_margins` turns measured pairs into the interval's margins: "pairs" (fit_model's: the
#: conformal bound of each pair's ``quantile`` of layouts above, every measured median below) or "risk" (the
#: expected fraction of a new pair's layouts inside at least ``quantile``: :func:`_risk_margins`).
MARGIN_RULES = ("pairs", "risk")


def layout_errors(cases: Sequence[tuple], **kwargs) -> pd.DataFrame:
    """:func:`predict_error` of the raw model (``model_error`` 0) for every case, ``_case`` its index in ``cases``;
    ``kwargs`` are :func:`predict`'s (:func:`predict_kwargs` of a fit; its ``model_error`` is ignored)."""
    kw = {**kwargs, "model_error": 0.0}
    given = kw.get("shared_bandwidth_gbs") is not None
    ready = {id(p): PreparedProfiles(p, bandwidth_given=given) for p, _, _ in cases}  # cases share profiles
    return pd.concat([predict_error(predict(ready[id(p)], w, _measured_layouts(m), **kw), m).assign(_case=i)
                      for i, (p, w, m) in enumerate(cases)], ignore_index=True)


def margins_of(errors: pd.DataFrame, *, quantile: float = 0.9, rule: str = "pairs", count: str = "overlap") -> dict:
    """The margins (below, above) and their coverage from :func:`layout_errors` (raw model, a ``_case`` column);
    ``count`` (:data:`COUNTS`, the "risk" rule only): what ``quantile`` promises, the measured round interval meeting
    the prediction's ("overlap") or the measured median inside it ("strict"). Returns ``model_error``, ``coverage``
    and ``coverage_strict`` (of these layouts, counted each way) and ``pairs``."""
    if rule not in MARGIN_RULES:
        raise ValueError(f"rule must be one of {MARGIN_RULES}, got {rule!r}")
    if not 0 < quantile < 1:
        raise ValueError(f"quantile must be in (0, 1), got {quantile!r}")
    _check_count(count)
    if rule == "pairs" and count != "overlap":
        raise ValueError("the 'pairs' rule counts the overlap only; count='strict' needs rule='risk'")
    err = (_margins(errors, quantile) if rule == "pairs" else _risk_margins(errors, quantile, count))[0]
    return {"model_error": err, "coverage": float(_inside(errors, err).mean()),
            "coverage_strict": float(_inside(errors, err, "strict").mean()), "pairs": int(errors["_case"].nunique())}


def calibrate_margins(cases: Sequence[tuple], *, quantile: float = 0.9, rule: str = "pairs", count: str = "overlap",
                      **kwargs) -> dict:
    """The interval's margins for a model already chosen: ``kwargs`` are :func:`predict`'s (:func:`predict_kwargs`
    of a fit; its ``model_error`` is ignored), ``cases`` as for :func:`fit_model`, ``rule`` of
    :data:`MARGIN_RULES` ("pairs": as :func:`fit_model` calibrates them), ``count`` as for :func:`margins_of`.
    Returns ``model_error`` (below, above), ``coverage`` and ``coverage_strict`` (of these layouts) and ``pairs``."""
    if not cases:
        raise ValueError("calibrate_margins needs at least one (profiles, workloads, measured sweep) case")
    return margins_of(layout_errors(cases, **kwargs), quantile=quantile, rule=rule, count=count)


def held_out_coverage(errors: pd.DataFrame, by: str, *, judged: str | None = None, calibrating: str | None = None,
                      quantile: float = 0.9, rule: str = "risk", count: str = "overlap") -> pd.DataFrame:
    """Coverage that no calibrating pair saw: for each value of column ``by`` (a run, a host), the margins from
    the rows of every other value (:func:`margins_of` with ``count``; only rows where boolean column
    ``calibrating`` holds) and the fraction of that value's layouts (only where boolean column ``judged`` holds)
    inside them, counted both ways.

    Returns
    -------
    pandas.DataFrame
        Per held-out value: ``below``, ``above``, ``calibrated_pairs``, ``layouts``, ``inside`` and
        ``inside_strict`` (counts: the intervals meet; the measured median inside), ``coverage`` and
        ``coverage_strict``; ``attrs["coverage"]`` and ``attrs["coverage_strict"]``: pooled over all of them.
    """
    if by not in errors.columns or "_case" not in errors.columns:
        raise ValueError(f"held_out_coverage needs layout_errors' rows with a '_case' column and a {by!r} column")
    cal = errors[errors[calibrating].astype(bool)] if calibrating else errors
    rows = []
    for unit in dict.fromkeys(errors[by]):
        mine = errors[errors[by] == unit]
        mine = mine[mine[judged].astype(bool)] if judged else mine
        if mine.empty:
            continue
        m = margins_of(cal[cal[by] != unit], quantile=quantile, rule=rule, count=count)
        hit, strict = _inside(mine, m["model_error"]), _inside(mine, m["model_error"], "strict")
        rows.append({by: unit, "below": m["model_error"][0], "above": m["model_error"][1],
                     "calibrated_pairs": m["pairs"], "layouts": len(mine), "inside": int(hit.sum()),
                     "inside_strict": int(strict.sum()), "coverage": float(hit.mean()),
                     "coverage_strict": float(strict.mean())})
    out = pd.DataFrame(rows)
    for col in ("", "_strict"):
        out.attrs[f"coverage{col}"] = (float(out[f"inside{col}"].sum() / out["layouts"].sum()) if len(out)
                                       else float("nan"))
    return out


def fit_model(cases: Sequence[tuple], *, quantile: float = 0.9, aggressions: Sequence = AGGRESSION_CANDIDATES,
              ramps: Sequence[str] = SATURATION_RAMPS) -> dict:
    """The sharing rule, the L2 bandwidth and the interval that the measured pairs demand.

    Parameters
    ----------
    cases : sequence of (profiles, workloads, measured)
        Each: the profiles, the workload names as for :func:`predict`, and a measured
        sweep of that pair (concurrent rows).
    aggressions, ramps : sequence, default :data:`AGGRESSION_CANDIDATES`, :data:`~.saturation.SATURATION_RAMPS`
        The aggression scales and ramps tried (the first of each is also the fit without that term).
    quantile : float, default 0.9
        The coverage the interval is calibrated to: the margin above covers the ``quantile``
        of each pair's layouts (how far each measurement's round interval lies above the
        model's own upper bound), and of the pairs the conformal ``quantile`` (the pair is the
        unit: its layouts share the model's error; with fewer than 19 pairs at 0.9, the largest);
        the margin below covers every measured median under the model's lower bound (the
        tuner skips layouts by the lower end, so it must not cut off a better layout).

    Returns
    -------
    dict
        ``sharing`` (the rule of :data:`SHARING`), ``l2_bandwidth_gbs`` (None, or a
        multiple of :data:`L2_CANDIDATES` of the highest L2 GB/s drawn alone) and
        ``loaded_latency`` (of :data:`LATENCY_CANDIDATES`) and ``saturation_onset`` (of
        :data:`SATURATION_CANDIDATES`, tried where the profiles carry a copy probe) and
        ``saturation_share`` (of :data:`~gcexplore.prediction.saturation.SHARE_RULES`, tried with
        the L2 choice the saturation term took where the profiles carry two probes) and
        ``saturation_load`` (of :data:`~gcexplore.prediction.saturation.SATURATION_LOADS`, tried
        with that L2 choice and share rule) and ``saturation_aggression`` (of :data:`AGGRESSION_CANDIDATES`,
        tried with everything chosen before it where the profiles carry a large probe) and ``saturation_ramp``
        (of ``ramps``, "probed" tried with all that where they carry a low probe) with the lowest
        mean over the pairs of each pair's median |error| (the pair is the unit, as for the
        margins), ``model_error`` (below, above; :func:`predict_kwargs` turns the fit into
        :func:`predict`'s arguments), ``coverage`` (the fraction of these layouts whose measured
        interval meets the calibrated one), ``coverage_strict`` (whose measured median lies in
        it), and that mean (``*median_abs_error``) per rule (no term), per L2 choice, per
        loaded-latency factor, per saturation onset, per share rule, per load, per aggression scale
        and per ramp.
    """
    if not cases:
        raise ValueError("fit_model needs at least one (profiles, workloads, measured sweep) case")
    if not 0 < quantile < 1:
        raise ValueError(f"quantile must be in (0, 1), got {quantile!r}")
    drawn = max((l2_drawn_gbs(p) for p, _, _ in cases), key=lambda v: v if np.isfinite(v) else -1.0)
    l2s = [None] + ([m * drawn for m in L2_CANDIDATES[1:]] if np.isfinite(drawn) else [])
    raw = {}
    # each case's profiles and measured sweep read once, not at each of the grid's terms
    prepared = {id(p): PreparedProfiles(p) for p, _, _ in cases}
    read = [(prepared[id(p)], w, _measured_layouts(m), MeasuredSide(m)) for p, w, m in cases]

    def run(rule, l2, lat, on=None, share="flat", load="others", agg=None, ramp="fitted"):
        terms = ModelTerms(sharing=rule, l2_bandwidth_gbs=l2, loaded_latency=lat, saturation_onset=on,
                           saturation_share=share, saturation_load=load, saturation_aggression=agg,
                           saturation_ramp=ramp)
        parts = [_error_rows(predict(p, w, lays, terms=terms, model_error=0.0), side) for p, w, lays, side in read]
        raw[rule, l2, lat, on, share, load, agg, ramp] = pd.concat([x.assign(_case=i) for i, x in enumerate(parts)],
                                                  ignore_index=True)

    for rule in SHARING:
        for l2 in l2s:
            run(rule, l2, 0.0)
    # the pair is the unit (its layouts share the model's error; the goal is every pair's median): the mean
    # over the pairs of each pair's median |error|, then the pooled mean
    score = lambda: {k: (float(v["error"].abs().groupby(v["_case"]).median().mean()),  # noqa: E731
                         float(v["error"].abs().mean())) for k, v in raw.items()}
    rule = min(raw, key=score().__getitem__)[0]
    for l2 in l2s:  # the loaded latency with the chosen rule (it and the L2 term overlap, so both again)
        for lat in LATENCY_CANDIDATES[1:]:
            run(rule, l2, lat)
    probed = any("probe_ms" in p and np.isfinite(p["probe_ms"].to_numpy(dtype=float)).any() for p, _, _ in cases)
    ons = SATURATION_CANDIDATES[1:] if probed else ()
    two = any("probe_large_ms" in p and np.isfinite(p["probe_large_ms"].to_numpy(dtype=float)).any()
              for p, _, _ in cases)
    shares = SHARE_RULES if two else ("flat",)  # with one probe per workload every rule is "flat"
    for l2 in l2s:  # the saturation term overlaps the L2 term and the loaded latency: all three together
        for k in LATENCY_CANDIDATES:
            for on in ons:
                run(rule, l2, k, on)
    l2 = min((k for k in raw if k[3] is not None), key=score().__getitem__, default=(None, None))[1]
    for share in shares[1:]:  # how the excess follows the SM share, with the chosen L2, again with the others
        for k in LATENCY_CANDIDATES:
            for on in ons:
                run(rule, l2, k, on, share)
    # None only where no onset was fitted, and then ons is empty: run() never sees it
    share = cast(str, min((k for k in raw if k[3] is not None), key=score().__getitem__, default=(None,) * 5)[4])
    for load in SATURATION_LOADS[1:]:  # the ramp by everyone's demand, with the chosen L2 and share rule
        for k in LATENCY_CANDIDATES:
            for on in (*ons, *TOTAL_ONSETS) if ons else ():
                run(rule, l2, k, on, share, load)
    load = cast(str, min((k for k in raw if k[3] is not None), key=score().__getitem__, default=(None,) * 6)[5])
    ons = (*ons, *(TOTAL_ONSETS if load == "total" else ()))
    for agg in aggressions if two else ():  # the co-runners' aggression, with all chosen so far
        for k in LATENCY_CANDIDATES:
            for on in ons:
                if (rule, l2, k, on, share, load, agg, "fitted") not in raw:
                    run(rule, l2, k, on, share, load, agg)
    agg = min((k for k in raw if k[3] is not None), key=score().__getitem__, default=(None,) * 7)[6]
    low = any("probe_low_ms" in p and np.isfinite(p["probe_low_ms"].to_numpy(dtype=float)).any() for p, _, _ in cases)
    for ramp in [r for r in ramps if r != "fitted"] if low else ():  # each workload's own onset, with all the rest
        for k in LATENCY_CANDIDATES:
            for on in ons:
                run(rule, l2, k, on, share, load, agg, ramp)
    raw = {k: v for k, v in raw.items() if k[6] in aggressions and k[7] in ramps or k[3] is None}
    score = score()
    best = min(raw, key=score.__getitem__)
    e = raw[best]
    err, coverage = _margins(e, quantile)
    strict = float(_inside(e, err, "strict").mean())
    off = ("flat", "others", None, "fitted")  # the saturation term's settings where it is not modelled
    return {"sharing": best[0], "l2_bandwidth_gbs": best[1], "loaded_latency": best[2], "saturation_onset": best[3],
            "saturation_share": best[4], "saturation_load": best[5], "saturation_aggression": best[6],
            "saturation_ramp": best[7], "model_error": err, "coverage": coverage, "coverage_strict": strict,
            "median_abs_error": {r: score[(r, None, 0.0, None, *off)][0] for r in SHARING},
            "l2_median_abs_error": {("none" if l2 is None else f"{l2:.0f}"):
                                    score[(best[0], l2, best[2], None, *off)][0] for l2 in l2s},
            "latency_median_abs_error": {lat: score[(best[0], best[1], lat, None, *off)][0]
                                         for lat in LATENCY_CANDIDATES},
            "saturation_median_abs_error": {on: score[key][0] for on in (None, *ons, *TOTAL_ONSETS)
                                            if (key := (*best[:3], on, *(best[4:] if on else off))) in score},
            "share_median_abs_error": ({sh: score[(*best[:4], sh, *off[1:])][0] for sh in shares
                                        if (*best[:4], sh, *off[1:]) in score} if best[3] is not None else {}),
            "load_median_abs_error": ({ld: score[(*best[:5], ld, *off[2:])][0] for ld in SATURATION_LOADS
                                       if (*best[:5], ld, *off[2:]) in score} if best[3] is not None else {}),
            "aggression_median_abs_error": ({("none" if a is None else a): score[(*best[:6], a, "fitted")][0]
                                             for a in aggressions if (*best[:6], a, "fitted") in score}
                                            if best[3] is not None else {}),
            "ramp_median_abs_error": ({r: score[(*best[:7], r)][0] for r in ramps if (*best[:7], r) in score}
                                      if best[3] is not None else {})}


# ------------------------------------------------------------------------ the plateau (issue 45)


def plateau_residuals(profiles: pd.DataFrame, measured: pd.DataFrame, *, top: int = 5,
                      confidence: float = 0.9) -> pd.DataFrame:
    """Whether :func:`predict`'s misses on a measured run fall at the sizes where a workload's solo
    curve is on a plateau (:func:`gcexplore.fit_table`), and whether the curve carries it.

    The solo curve is the profile's median per measured size, so at a measured size it already
    carries a plateau (the time that does not fall as SMs grow); this says by how much the
    per-workload residuals differ on and off the plateau sizes.

    Parameters
    ----------
    profiles : pandas.DataFrame
        Solo profiles (:func:`profile_from`, ``load_recorded("predict_profiles")``).
    measured : pandas.DataFrame
        Sweep or overlap runs (``concurrent`` rows; runs told apart by ``run_id``); a run with a
        workload ``profiles`` lacks is left out (``attrs["skipped_runs"]``).
    top : int, default 5
        How many of the largest residuals ``attrs["facts"]`` places.
    confidence : float, default 0.9
        Of :func:`gcexplore.fit_table`'s intervals.

    Returns
    -------
    pandas.DataFrame
        One row per (run, layout, workload): ``run_id``, ``layout``, ``workload``, ``position`` (the profile
        position the prediction reads: ``first`` on p0..., ``last`` on the remainder),
        ``sm_count``, ``alone_ms`` and ``alone_measured`` (the solo curve there),
        ``plateau_ms`` (the profile's median there on a plateau, else NaN), ``on_plateau``,
        ``plateau_start_sm``, ``predicted_ms`` (the predicted concurrent duration),
        ``measured_ms`` (the median concurrent duration), ``residual`` (predicted / measured - 1).
        ``attrs["facts"]``: ``runs``, ``pairs``, ``on_plateau`` (pairs at plateau sizes),
        ``alone_measured`` (pairs whose solo time was measured, not interpolated),
        ``curve_gap`` (the largest |alone_ms / plateau_ms - 1| at plateau sizes),
        ``median_on`` / ``median_off`` and ``worst_on`` / ``worst_off`` (|residual|),
        ``top`` and ``top_on_plateau`` (of the ``top`` largest |residual|, how many at plateau sizes).
    """
    from ..analysis.waves import fit_table

    plateau, runs, skipped = {}, [], []
    for pos in ("first", "last"):
        rows = profiles[profiles["position"] == pos]
        if len(rows):
            t = fit_table(rows, confidence=confidence)
            for r in t[t["on_plateau"]].itertuples():
                plateau[(pos, r.workload, int(r.sm_count))] = (float(r.median_ms), int(r.plateau_start_sm))
    have = set(profiles["workload"].astype(str))
    run = measured["run_id"].astype(str) if "run_id" in measured else pd.Series("", index=measured.index)
    for rid, m in measured.groupby(run, sort=False):
        m.attrs.update(measured.attrs)
        got = _plateau_run(profiles, m, plateau, have)
        (runs if isinstance(got, pd.DataFrame) else skipped).append(got if isinstance(got, pd.DataFrame) else rid)
    if not runs:
        raise ValueError(f"plateau_residuals: no run of the measurement has all its workloads profiled (profiled: "
                         f"{sorted(have)}; runs: {skipped[:4]})")
    out = pd.concat(runs, ignore_index=True)
    a, on = out["residual"].abs(), out["on_plateau"]
    worst = a.sort_values(ascending=False).index[:top]
    out.attrs.update({"summary_of": "plateau_residuals", "device_name": str(measured.attrs.get("device_name", "")),
                      "runs": [r.attrs["run"] for r in runs], "skipped_runs": skipped})
    out.attrs["facts"] = {
        "runs": len(runs), "pairs": len(out), "on_plateau": int(on.sum()),
        "alone_measured": int(out["alone_measured"].sum()),
        "curve_gap": float((out["alone_ms"] / out["plateau_ms"] - 1).abs()[on].max()) if on.any() else np.nan,
        "median_on": float(a[on].median()) if on.any() else np.nan,
        "median_off": float(a[~on].median()) if (~on).any() else np.nan,
        "worst_on": float(a[on].max()) if on.any() else np.nan,
        "worst_off": float(a[~on].max()) if (~on).any() else np.nan,
        "top": len(worst), "top_on_plateau": int(on[worst].sum())}
    return out


def _plateau_run(profiles: pd.DataFrame, measured: pd.DataFrame, plateau: dict, have: set):
    """:func:`plateau_residuals`'s rows of one run; its run id where a workload is not profiled."""
    from ..analysis.display import placement

    names = [str(w) for _, w in placement(measured)]
    rid = str(measured["run_id"].iloc[0]) if "run_id" in measured else ""
    if not set(names) <= have:
        return rid
    layouts = list(dict.fromkeys(measured.loc[measured["mode"] == "concurrent", "layout"].astype(str)))
    pred = predict(profiles, names, layouts)
    last = len(names) - 1
    out = pd.DataFrame({
        "run_id": rid, "layout": pred["layout"], "workload": pred["workload"],
        "position": ["last" if names.index(w) == last else "first" for w in pred["workload"]],
        "sm_count": pred["sm_count"].astype(int), "alone_ms": pred["alone_ms"],
        "alone_measured": pred["alone_measured"].astype(bool)})
    keys = list(zip(out["position"], out["workload"], out["sm_count"]))
    out["plateau_ms"] = [plateau.get(k, (np.nan, 0))[0] for k in keys]
    out["on_plateau"] = [k in plateau for k in keys]
    out["plateau_start_sm"] = [plateau[k][1] if k in plateau else np.nan for k in keys]
    out["predicted_ms"] = pred["duration_ms"].to_numpy()
    conc = measured[measured["mode"] == "concurrent"]
    med = conc.groupby([conc["layout"].astype(str), conc["workload"].astype(str)])["duration_ms"].median()
    out["measured_ms"] = [float(med.get((str(lay), str(w)), np.nan)) for lay, w in zip(out["layout"], out["workload"])]
    out["residual"] = out["predicted_ms"] / out["measured_ms"] - 1.0
    out.attrs["run"] = " + ".join(names)
    return out


def plateau_sentence(res: pd.DataFrame) -> str:
    """One sentence of a :func:`plateau_residuals` result: whether the curve carries the plateau
    and whether the largest misses fall on it."""
    f = res.attrs["facts"]
    runs = res.attrs.get("runs") or []
    who = f"the recorded {runs[0]} sweep" if len(runs) == 1 else f"{len(runs)} recorded sweeps"
    head = (f"Over {who} ({f['pairs']} workload x layout pairs), the solo curve is measured at "
            f"{f['alone_measured']} of the {f['pairs']} predicted sizes")
    if not f["on_plateau"]:
        return head + ", and none of them is on a plateau of its curve."
    return (head + f"; at the {f['on_plateau']} pairs on a plateau of their curve its solo time is the plateau's "
            f"within {f['curve_gap']:.1%} (the curve carries it) and the prediction misses by a "
            f"median {f['median_on']:.1%} (worst {f['worst_on']:.1%}), against {f['median_off']:.1%} (worst "
            f"{f['worst_off']:.1%}) off it; {f['top_on_plateau']} of the {f['top']} largest misses fall at a "
            "plateau size.")
