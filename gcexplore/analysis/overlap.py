"""Overlap and sweep results: makespans per layout and mode, the overlap summary, the bounds
(:func:`lower_bound`, :func:`resource_bound`), the per-layout table (:func:`layout_table`), the best
split (:func:`best_split`), speedups, interference, split loss, efficiency and the verdict facts."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, cast

import numpy as np
import pandas as pd

from ..results.io import bare
from ..results.run import per_run, rep_keys, require_one_run, run_of, with_identity
from ..results.validate import open_run, require_columns
from ..schema import IDENTITY_COLUMNS, MODES
from .stats import STAT_COLUMNS, finite, nanmedian, ratio, round_median_ci, round_ratio_ci, run_floor, stats

__all__ = ["BOUND_FIELDS", "CONCURRENT_COLUMNS", "LAYOUT_TABLE_COLUMNS", "OVERLAP_SUMMARY_COLUMNS",
           "PER_LAYOUT_COLUMNS", "LAUNCH_BOUND_RATIO", "SPAN_INCLUDES_WAIT", "baseline_choice", "baseline_ms",
           "best_layout", "best_split", "launch_limits", "layout_table", "lower_bound", "makespan_stats",
           "overlap_summary", "resource_bound", "summarize_overlap", "verdict_facts"]


#: Modes whose event span may include waiting for SMs: no rate is computed from it
#: without a kernel trace (a summary says why in ``attrs["rate_notes"]``).
SPAN_INCLUDES_WAIT = {
    "streams": "no rate on plain streams from events: a workload's event span includes its wait for SMs "
               "held by the other workload; trace=True measures its GPU-busy time",
}

OVERLAP_SUMMARY_COLUMNS = [
    "layout", "split_sm_count", "mode", "workload", "partition", "sm_count", "requested_sm_count",
    *STAT_COLUMNS, "makespan_median_ms", "throughput_tflops", "bandwidth_gbs", "speedup_vs_sequential",
    "speedup_vs_streams", "slowdown_vs_alone", "interference_free_ms", "interference", "split_loss",
    "lower_bound_ms", "efficiency", *IDENTITY_COLUMNS,
]
#: The per-layout columns of :func:`layout_table`; in a summary, ``lower_bound_ms`` (one value per
#: run) is on every row and the others (:data:`CONCURRENT_COLUMNS`) on the layout's concurrent rows.
PER_LAYOUT_COLUMNS = ["speedup_vs_sequential", "speedup_vs_streams", "interference_free_ms", "interference",
                      "split_loss", "lower_bound_ms", "efficiency"]
#: Summary columns that describe a layout's concurrent run: NaN on its alone, sequential and
#: streams rows (``slowdown_vs_alone``, per workload, too).
CONCURRENT_COLUMNS = [c for c in PER_LAYOUT_COLUMNS if c != "lower_bound_ms"]
LAYOUT_TABLE_COLUMNS = [
    "layout", "split_sm_count", *(f"{m}_ms" for m in MODES if m != "alone"), *PER_LAYOUT_COLUMNS,
]


# --------------------------------------------------------------------------- basics


# ------------------------------------------------------------------------ makespans


def _rep_makespans(df: pd.DataFrame, mode: str | None = None) -> pd.DataFrame:
    """One makespan per (layout, mode, rep): the run's (:meth:`Run.rep_makespans`, computed once)."""
    return run_of(df).rep_makespans(mode)


def makespan_stats(df: pd.DataFrame, mode: str) -> pd.DataFrame:
    """Per layout, the median, p10 and p90 makespan of ``mode`` over repetitions.

    Returns columns ``layout``, ``split_sm_count``, ``median_ms``, ``p10_ms``,
    ``p90_ms``, ``reps``, sorted by ``split_sm_count``.
    """
    per_rep = _rep_makespans(df, mode)
    rows = []
    for (layout, k), g in per_rep.groupby(["layout", "split_sm_count"], sort=False):
        s = stats(g["makespan_ms"])
        rows.append({"layout": layout, "split_sm_count": int(cast(int, k)), "median_ms": s["median_ms"],
                     "p10_ms": s["p10_ms"], "p90_ms": s["p90_ms"], "reps": s["reps"]})
    out = pd.DataFrame(rows, columns=["layout", "split_sm_count", "median_ms", "p10_ms", "p90_ms", "reps"])
    return out.sort_values("split_sm_count", kind="stable").reset_index(drop=True)


def _makespan_medians(df: pd.DataFrame) -> dict[tuple[Any, Any], float]:  # (layout, mode) -> ms
    per_rep = _rep_makespans(df)
    return {(lay, mode): nanmedian(g["makespan_ms"])
            for (lay, mode), g in per_rep.groupby(["layout", "mode"], sort=False)}


# ------------------------------------------------------------------------ summarize


def summarize_overlap(df: pd.DataFrame) -> pd.DataFrame:
    """The overlap summary of one run's rows (see :func:`gcexplore.summarize`), computed once per
    unchanged frame (the run's memo); a copy, so a caller's edits never reach the kept one."""
    return run_of(df).memo("overlap_summary", lambda: _summarize_overlap(df)).copy()


def _summarize_overlap(df: pd.DataFrame) -> pd.DataFrame:
    require_columns(df, ["layout", "split_sm_count", "mode", "rep", "workload", "partition",
                          "sm_count", "duration_ms", "makespan_ms"], "summarize")
    if df.empty:
        out = pd.DataFrame(columns=OVERLAP_SUMMARY_COLUMNS)
        out.attrs.update(df.attrs)
        return out
    makespan = _makespan_medians(df)
    rows = []
    for (layout, mode, workload), g in bare(df).groupby(["layout", "mode", "workload"], sort=False):
        first = g.iloc[0]
        row = {"layout": layout, "split_sm_count": int(first["split_sm_count"]), "mode": mode,
               "workload": workload, "partition": first["partition"], "sm_count": int(first["sm_count"]),
               "requested_sm_count": first.get("requested_sm_count", pd.NA)}
        row.update(stats(g["duration_ms"]))
        row["makespan_median_ms"] = makespan.get((layout, mode), math.nan)
        for col in ("throughput_tflops", "bandwidth_gbs", "flops", "bytes"):
            row[col] = nanmedian(g[col]) if col in g and mode not in SPAN_INCLUDES_WAIT else math.nan
        rows.append(row)
    s = pd.DataFrame(rows)
    bound = lower_bound(df)
    s["lower_bound_ms"] = float(bound["lower_bound_ms"])  # one value per run, on every row
    per_layout = _layout_rows(s).set_index("layout")
    conc = s["mode"] == "concurrent"  # a layout's comparisons describe its concurrent run only
    for col in CONCURRENT_COLUMNS:
        s[col] = s["layout"].map(per_layout[col]).where(conc)
    tuples = cast("list[Any]", list(s.itertuples()))  # pandas-stubs types each field as any scalar
    med = {(r.layout, r.mode, r.workload): r.median_ms for r in tuples}
    s["slowdown_vs_alone"] = [ratio(r.median_ms, med.get((r.layout, "alone", r.workload), math.nan))
                              if r.mode == "concurrent" else math.nan for r in tuples]
    s = with_identity(s, df)
    s = s[OVERLAP_SUMMARY_COLUMNS].reset_index(drop=True)
    s["requested_sm_count"] = pd.array([None if pd.isna(v) else int(v) for v in s["requested_sm_count"]],
                                       dtype="Int64")
    s.attrs.update(df.attrs)
    s.attrs["summary_of"] = df.attrs.get("kind", "overlap")
    s.attrs["rate_notes"] = {m: note for m, note in SPAN_INCLUDES_WAIT.items() if m in set(s["mode"])}
    # plain values (None for NaN), so the attrs survive a save and compare equal after it
    s.attrs["lower_bound"] = {k: None if isinstance(v, float) and math.isnan(v)
                              else (getattr(v, "item")() if hasattr(v, "item") else v)  # a numpy scalar
                              for k, v in bound.items()}
    return s


def _num(v) -> float:
    try:
        return math.nan if v is None else float(v)
    except (TypeError, ValueError):
        return math.nan


#: What :func:`lower_bound` returns, in order.
BOUND_FIELDS = ["lower_bound_ms", "workload", "mode", "sm_count", "p10_ms", "p90_ms", "measured_ms",
                "resource_ms", "resource_note"]


def _fastest_alone(df: pd.DataFrame) -> pd.DataFrame:
    """Per workload and size, its time with nothing beside it: ``alone`` rows (on a
    partition) and ``sequential`` rows (the whole device), pooled over layouts."""
    solo = df[df["mode"].isin(["alone", "sequential"])]
    rows = []
    for (wl, mode, sm), g in solo.groupby(["workload", "mode", "sm_count"], sort=False):
        st = stats(g["duration_ms"])
        rows.append({"workload": wl, "mode": mode, "sm_count": int(sm), "median_ms": st["median_ms"],
                     "p10_ms": st["p10_ms"], "p90_ms": st["p90_ms"]})
    return pd.DataFrame(rows, columns=["workload", "mode", "sm_count", "median_ms", "p10_ms", "p90_ms"])


def lower_bound(df: pd.DataFrame) -> pd.Series:
    """A makespan that no layout of this run can beat, built only from measurements.

    Every workload of a pair must run to its end, and nothing beside it makes it faster,
    so a concurrent makespan is at least each workload's time alone on its partition;
    that time is at least the workload's fastest ``alone`` median at any measured size,
    the whole device (``sequential``) included. The bound is the largest of these over
    the workloads (the *measured* term). More SMs are not always faster (a
    bandwidth-bound kernel can peak on a few dozen SMs), which is why the fastest size
    is taken, not the whole device. Sizes that were not measured are not covered.

    When ``df.attrs`` declares a peak (``peak_bandwidth_gbs``, ``peak_tflops``: the
    card's datasheet numbers, say) and nothing in the run exceeded it, the
    :func:`resource_bound` (all declared bytes or FLOPs at that peak) counts too.

    Parameters
    ----------
    df : pandas.DataFrame
        An overlap or sweep result (raw rows, one run).

    Returns
    -------
    pandas.Series
        ``lower_bound_ms`` (NaN without ``alone`` or ``sequential`` rows); ``workload``,
        ``mode``, ``sm_count``, ``p10_ms``, ``p90_ms``: the measurement that sets the
        measured term and its spread; ``measured_ms``; ``resource_ms`` (NaN when not
        used) and ``resource_note`` (why or why not).
    """
    return run_of(df).memo("lower_bound", lambda: _lower_bound(df)).copy()


def _lower_bound(df: pd.DataFrame) -> pd.Series:
    solo = _fastest_alone(df)
    out: dict[str, Any] = dict.fromkeys(BOUND_FIELDS, math.nan)
    out.update(workload="", mode="", sm_count=0)
    solo = solo[np.isfinite(solo["median_ms"].to_numpy(dtype=float))]
    if not solo.empty:
        fastest = solo.loc[solo.groupby("workload", sort=False)["median_ms"].idxmin()]
        top = fastest.loc[fastest["median_ms"].idxmax()]
        out.update(measured_ms=float(top["median_ms"]), workload=str(top["workload"]), mode=str(top["mode"]),
                   sm_count=int(top["sm_count"]), p10_ms=float(top["p10_ms"]), p90_ms=float(top["p90_ms"]))
    res_ms, note = resource_bound(df)
    out.update(resource_ms=res_ms, resource_note=note)
    terms = [v for v in (out["measured_ms"], res_ms) if math.isfinite(v)]
    out["lower_bound_ms"] = max(terms) if terms and math.isfinite(out["measured_ms"]) else math.nan
    return pd.Series(out, index=BOUND_FIELDS, name="lower_bound")


_RESOURCES = (("bytes", "bandwidth_gbs", "peak_bandwidth_gbs", 1e9, "GB/s"),
              ("flops", "throughput_tflops", "peak_tflops", 1e12, "TFLOP/s"))


def rep_work(df: pd.DataFrame, work: str) -> pd.DataFrame:
    """Per repetition, the declared ``work`` (a column such as ``bytes``) of its rows summed, beside its
    makespan: :meth:`~gcexplore.results.run.Run.rep_makespans` with a ``work`` column."""
    out = _rep_makespans(df).copy()
    out["work"] = df.groupby(rep_keys(df), sort=False, dropna=False)[work].sum().to_numpy()
    return out


def resource_bound(df: pd.DataFrame) -> tuple[float, str]:
    """(ms, note): all declared work of one call of each workload at a declared peak rate.

    Two workloads that both move bytes through DRAM cannot finish before their bytes
    together, at the card's peak bandwidth, have moved (the same for FLOPs). That holds
    only for a true peak: one that no measurement of the run exceeded. The peak comes
    from ``df.attrs["peak_bandwidth_gbs"]`` / ``df.attrs["peak_tflops"]``, never from the
    rates measured here (a measured best is no ceiling: memory reached 3,052 GB/s on 32
    SMs and 2,976 GB/s on the whole device). It is checked against every row's rate and
    every repetition's combined rate (declared work / makespan); a peak that was exceeded
    is not used, and the note says so. NaN and the reason when no term applies.
    """
    terms, notes = [], []
    for work, rate, key, scale, unit in _RESOURCES:
        peak = _num(df.attrs.get(key))
        if work not in df.columns or not df[work].notna().any():
            continue
        if not (math.isfinite(peak) and peak > 0):
            notes.append(f"no declared peak {unit} (attrs[{key!r}])")
            continue
        per_wl = df.groupby("workload", sort=False)[work].median().dropna()
        combined = rep_work(df, work)
        seen = [*finite(df.get(rate, pd.Series(dtype=float))),
                *finite(combined["work"] / (combined["makespan_ms"] * 1e-3) / scale)]
        highest = max(seen, default=0.0)
        if highest > peak:
            notes.append(f"declared peak {peak:,.0f} {unit} not used: the run measured {highest:,.0f} {unit}")
            continue
        ms = float(per_wl.sum()) / (peak * scale) * 1e3
        terms.append(ms)
        notes.append(f"{float(per_wl.sum()):.3g} {work} at the declared peak {peak:,.0f} {unit}: {ms:.3f} ms")
    return (max(terms) if terms else math.nan), "; ".join(notes)


def overlap_summary(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`summarize_overlap` per run, after the result's checks (what ``summarize`` gives)."""
    open_run(df, ("overlap", "sweep", "tune"), "summarize", one_run=False)
    return per_run(df, summarize_overlap)


def _summary_of(df: pd.DataFrame) -> pd.DataFrame:
    return df if "median_ms" in df.columns else overlap_summary(df)


def layout_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per layout: median makespan per mode and the derived comparisons.

    Parameters
    ----------
    df : pandas.DataFrame
        An overlap or sweep result, or its :func:`summarize`.

    Returns
    -------
    pandas.DataFrame
        Columns ``layout``, ``split_sm_count``, ``concurrent_ms``, ``sequential_ms``,
        ``streams_ms`` (median makespans), ``speedup_vs_sequential``,
        ``speedup_vs_streams``, ``lower_bound_ms``, ``efficiency``; sorted by
        ``split_sm_count``.
    """
    require_one_run(df, "layout_table")  # a table of two runs would mix their makespans
    return _layout_rows(_summary_of(df))


def _layout_rows(s: pd.DataFrame) -> pd.DataFrame:
    """The one place a layout's comparisons are computed: from a summary's makespan medians,
    its ``alone`` medians and the run's ``lower_bound_ms`` (the summary writes them back on
    its concurrent rows, :func:`layout_table` shows them)."""
    rows = []
    for layout, g in bare(s).groupby("layout", sort=False):  # bare: no attrs deep-copied into each group
        ms = g.drop_duplicates("mode").set_index("mode")["makespan_median_ms"]
        row = {"layout": layout, "split_sm_count": int(g["split_sm_count"].iloc[0])}
        row.update({f"{m}_ms": float(ms.get(m, math.nan)) for m in MODES if m != "alone"})
        conc, lb = row["concurrent_ms"], float(g["lower_bound_ms"].iloc[0])
        alone = g.loc[g["mode"] == "alone", "median_ms"]
        free = float(alone.max()) if alone.notna().any() else math.nan
        row.update(speedup_vs_sequential=ratio(row["sequential_ms"], conc),
                   speedup_vs_streams=ratio(row["streams_ms"], conc), interference_free_ms=free,
                   interference=ratio(conc, free), split_loss=ratio(free, lb), lower_bound_ms=lb,
                   efficiency=ratio(lb, conc))
        rows.append(row)
    out = pd.DataFrame(rows, columns=LAYOUT_TABLE_COLUMNS)
    return out.sort_values("split_sm_count", kind="stable").reset_index(drop=True)


def best_split(df: pd.DataFrame) -> pd.Series:
    """The layout with the lowest median concurrent makespan.

    Parameters
    ----------
    df : pandas.DataFrame
        A :func:`~gcexplore.sweep` or :func:`~gcexplore.profile_overlap` result (one
        run), or its :func:`summarize`.

    Returns
    -------
    pandas.Series
        Named by the layout, with the columns of :func:`layout_table`; from raw rows also
        ``ci_low_ms`` / ``ci_high_ms`` (90% interval of its median concurrent makespan, the
        round as the unit: :func:`~gcexplore.analysis.stats.round_median_ci`), ``rounds``, and
        ``tied`` (layouts whose makespan is not shown above the best's by more than 1% at 90%,
        rounds as the unit: as good, within what another run could show).

    Raises
    ------
    ValueError
        No ``concurrent`` rows, no finite concurrent makespan, or rows of several runs.
    """
    if "median_ms" in df.columns:
        require_one_run(df, "best_split")
    else:  # raw rows: checked (kind, values, one run) before any number is read from them
        open_run(df, ("overlap", "sweep", "tune"), "best_split")
    s = _summary_of(df)
    if "mode" not in s.columns or not (s["mode"] == "concurrent").any():
        modes = sorted(set(s["mode"])) if "mode" in s.columns else []
        raise ValueError(f"best_split needs 'concurrent' rows from sweep() or profile_overlap(); "
                         f"this result has modes {modes}")
    table = layout_table(s)
    table = table[np.isfinite(table["concurrent_ms"].to_numpy(dtype=float))]
    if table.empty:
        raise ValueError("best_split: no layout has a finite concurrent makespan")
    best = table.loc[table["concurrent_ms"].idxmin()]
    if "rep" in df.columns and "makespan_ms" in df.columns:
        best = pd.concat([best, pd.Series(_best_interval(df, str(best["layout"])), dtype=object)])
    best.name = best["layout"]
    return best


def _best_interval(df: pd.DataFrame, layout: str, confidence: float = 0.9, tolerance: float = 0.01) -> dict:
    per = run_of(df).rep_makespans("concurrent")
    floor = run_floor(df)
    groups = {lay: g for lay, g in per.groupby("layout", sort=False)}
    b = groups[layout]
    _, lo, hi = round_median_ci(b["makespan_ms"], b["round"], confidence, floor=floor)
    within = dataclasses.replace(floor, run_sd=0.0)  # one run: its layouts share the run's offset
    tied = [lay for lay, g in groups.items() if lay != layout and
            round_ratio_ci(b["makespan_ms"], g["makespan_ms"], b["round"], g["round"], confidence,
                           floor=within)["low"] <= 1.0 + tolerance]
    return {"ci_low_ms": lo, "ci_high_ms": hi, "rounds": int(b["round"].nunique()), "tied": tied}


def best_layout(df: pd.DataFrame) -> str:
    """The label of :func:`best_split`'s layout."""
    return str(best_split(df)["layout"])


def _outcome(conc: dict, base: dict) -> str:
    """"pays" when the concurrent p90 is below the baseline's p10, "does not pay" when its
    p10 is above the baseline's p90, else "even" (the spreads overlap)."""
    if not all(math.isfinite(v) for v in (conc["p10_ms"], conc["p90_ms"], base["p10_ms"], base["p90_ms"])):
        return "unknown"
    if conc["p90_ms"] < base["p10_ms"]:
        return "pays"
    if conc["p10_ms"] > base["p90_ms"]:
        return "does not pay"
    return "even"


def verdict_facts(df: pd.DataFrame) -> dict:
    """Everything a sentence about the best split may say, computed from ``df``.

    Parameters
    ----------
    df : pandas.DataFrame
        A sweep or overlap result (raw rows, one run).

    Returns
    -------
    dict
        ``best``: the :func:`best_split` row as a dict; ``concurrent``, ``sequential``,
        ``streams``: per mode at the best layout, ``median_ms``, ``p10_ms``, ``p90_ms`` of
        the makespan (NaN when the mode was not run); ``vs_sequential``, ``vs_streams``:
        ``"pays"`` (the concurrent p90 lies below the baseline's p10), ``"does not pay"``
        (its p10 lies above the baseline's p90), ``"even"`` (the spreads overlap) or
        ``"unknown"``; ``bound``: :func:`lower_bound` as a dict; ``worst``: the
        :func:`layout_table` row with the highest concurrent makespan, as a dict;
        ``noisy_configs``: how many (layout, mode, workload) samples :func:`stats` flags.
    """
    require_one_run(df, "verdict_facts")
    best = best_split(df)
    layout = best["layout"]
    nan = {"median_ms": math.nan, "p10_ms": math.nan, "p90_ms": math.nan}
    per_mode = {}
    for mode in ("concurrent", "sequential", "streams"):
        ms = makespan_stats(df, mode)
        row = ms[ms["layout"] == layout]
        per_mode[mode] = nan if row.empty else {k: float(row[k].iloc[0]) for k in nan}
    table = layout_table(df)
    worst = table.loc[cast(Any, table["concurrent_ms"].idxmax())]  # pandas-stubs: idxmax gives a Hashable
    noisy = int(overlap_summary(df)["noisy"].sum())
    return {"best": best.to_dict(), **per_mode,
            "vs_sequential": _outcome(per_mode["concurrent"], per_mode["sequential"]),
            "vs_streams": _outcome(per_mode["concurrent"], per_mode["streams"]),
            "bound": lower_bound(df).to_dict(), "worst": worst.to_dict(), "noisy_configs": noisy}


# ---------------------------------------------------------------- scaling, isolation


# ---------------------------------------------------------------- facts for display


def baseline_ms(df: pd.DataFrame, mode: str) -> float:
    """Median makespan of a mode that runs on the whole device (``sequential``, ``streams``)
    over every repetition of every layout: the split does not change it."""
    per_rep = _rep_makespans(df, mode)
    return stats(per_rep["makespan_ms"])["median_ms"]


# Per-SM busy fractions and the tuner's table live beside this module; they are part of
# this one analysis layer and are re-exported here.


def baseline_choice(df: pd.DataFrame, layout: str, mode: str = "sequential", *,
                    summary: pd.DataFrame | None = None) -> dict:
    """A split's speedup over a whole-device baseline, against both baselines one can mean.

    A sweep measures ``sequential`` (or ``streams``) next to every split; the guide's
    ``speedup_vs_<mode>`` divides by the one measured next to ``layout``, while the sweep
    figure draws the median over all layouts. Returns ``layout``, ``concurrent_ms``,
    ``next_ms`` (the baseline measured next to it), ``median_ms`` (the median of every
    repetition of the baseline in the run: the line the sweep figure draws), ``low_ms`` /
    ``high_ms`` (the lowest and highest layout's baseline median), ``layouts``, ``rank``
    (1 = the highest of the layouts' baselines),
    ``speedup_next`` and ``speedup_median``.
    """
    table = layout_table(df if summary is None else summary)  # summary: of df, when the caller has it
    col = f"{mode}_ms"
    if layout not in set(table["layout"]):
        raise ValueError(f"layout {layout!r} was not measured; layouts {list(table['layout'])}")
    base = table[col].dropna()
    row = table[table["layout"] == layout].iloc[0]
    nxt, med = float(row[col]), float(baseline_ms(df, mode))
    return {"layout": layout, "concurrent_ms": float(row["concurrent_ms"]), "next_ms": nxt, "median_ms": med,
            "low_ms": float(base.min()), "high_ms": float(base.max()), "layouts": len(base),
            "rank": int((base > nxt).sum()) + 1, "speedup_next": nxt / float(row["concurrent_ms"]),
            "speedup_median": med / float(row["concurrent_ms"])}


#: A launch that takes less than this many launch gaps is limited by launching, not memory.
LAUNCH_BOUND_RATIO = 1.25


def launch_limits(summary: pd.DataFrame, *, passes: int, launch_gap_us: float, by: str = "working_set_mib",
                  mode: str = "alone") -> pd.DataFrame:
    """Time per kernel launch against the run's launch gap, per ``by`` value.

    Every launch costs the launch gap (``df.attrs["launch_gap_us"]``: an event-timed launch
    minus the kernel's own span, the overhead the kernel does not see). A call that
    launches ``passes`` kernels and takes less than :data:`LAUNCH_BOUND_RATIO` gaps per
    launch measures that overhead, not the memory system.

    Returns
    -------
    pandas.DataFrame
        Indexed by ``by``: ``median_ms`` (mean over workloads of the ``mode`` medians),
        ``us_per_launch``, ``launch_gap_us``, ``gaps`` (their ratio) and ``launch_bound``.
    """
    if passes < 1 or not np.isfinite(launch_gap_us) or launch_gap_us <= 0:
        raise ValueError(f"launch_limits needs passes >= 1 and a positive launch gap; got {passes}, {launch_gap_us}")
    rows = summary[summary["mode"] == mode].groupby(by)["median_ms"].mean().to_frame()
    rows["us_per_launch"] = rows["median_ms"] * 1e3 / passes
    rows["launch_gap_us"] = float(launch_gap_us)
    rows["gaps"] = rows["us_per_launch"] / float(launch_gap_us)
    rows["launch_bound"] = rows["gaps"] < LAUNCH_BOUND_RATIO
    return rows
