"""Every number derived from a result, computed here and only here (pure pandas, no GPU).

Statistics of raw samples (:func:`stats`), makespans per layout and mode, the summary
of every result kind (:func:`summarize`), the per-layout table (:func:`layout_table`),
the best split (:func:`best_split`), speedups, the bounds (:func:`lower_bound`,
:func:`resource_bound`), interference, split loss and efficiency, the verdict on the best
split (:func:`verdict_facts`), parallel efficiency of scaling results, per-SM busy fractions (:func:`sm_busy`), and the small
facts front ends need (which workload ran where, which rate a workload is shown in).
Plots, widgets, the demo and the command line call these and compute none of them.

Results of several runs (``pd.concat`` of two sweeps, from two cards, say) are
summarized per run: the summary carries ``device_name`` and ``run_id``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..schema import KINDS, MODES, columns, sorted_partitions
from ..validate import check_result
from . import stats as _stats_module  # noqa: F401  loaded before def stats below, which keeps the name

__all__ = [
    "NOISY_FRACTION",
    "best_layout",
    "best_split",
    "gpu_time_ms",
    "layout_table",
    "lower_bound",
    "resource_bound",
    "makespan_stats",
    "occupancy_layout",
    "placement",
    "quantiles",
    "rates",
    "require_one_run",
    "runs",
    "slo_split",
    "sm_busy",
    "stats",
    "summarize",
    "tune_table",
    "verdict_facts",
    "workload_order",
]

#: A configuration is flagged noisy when its IQR exceeds this fraction of its median ...
NOISY_FRACTION = 0.10
#: ... or when its p10-p90 range exceeds this fraction of its median. Two clusters of
#: samples (say 14 repetitions at 1.95 ms and 6 at 1.17 ms: which stream reached the SMs
#: first) can leave the IQR near zero; the p10-p90 range sees them.
NOISY_RANGE_FRACTION = 0.25

#: Modes whose event span may include waiting for SMs: no rate is computed from it
#: without a kernel trace (a summary says why in ``attrs["rate_notes"]``).
SPAN_INCLUDES_WAIT = {
    "streams": "no rate on plain streams from events: a workload's event span includes its wait for SMs "
               "held by the other workload; trace=True measures its GPU-busy time",
}

STAT_COLUMNS = ["reps", "median_ms", "p10_ms", "p90_ms", "iqr_ms", "noisy"]
OVERLAP_SUMMARY_COLUMNS = [
    "layout", "split_sm_count", "mode", "workload", "partition", "sm_count", "requested_sm_count",
    *STAT_COLUMNS, "makespan_median_ms", "throughput_tflops", "bandwidth_gbs", "speedup_vs_sequential",
    "speedup_vs_streams", "slowdown_vs_alone", "interference_free_ms", "interference", "split_loss",
    "lower_bound_ms", "efficiency", "device_name", "run_id",
]
#: The per-layout columns of a summary (the same value on every row of a layout).
PER_LAYOUT_COLUMNS = ["speedup_vs_sequential", "speedup_vs_streams", "interference_free_ms", "interference",
                      "split_loss", "lower_bound_ms", "efficiency"]
LAYOUT_TABLE_COLUMNS = [
    "layout", "split_sm_count", *(f"{m}_ms" for m in MODES if m != "alone"), *PER_LAYOUT_COLUMNS,
]


# --------------------------------------------------------------------------- basics


def _finite(values) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    return v[np.isfinite(v)]


def stats(values) -> dict:
    """Count, median, p10, p90, IQR and the noisy flag of raw samples in ms (NaN ignored).

    ``noisy`` is True when the IQR exceeds :data:`NOISY_FRACTION` (10%) of the median or
    the p10-p90 range exceeds :data:`NOISY_RANGE_FRACTION` (25%) of it; the second test
    catches bimodal samples, whose IQR can be tiny while p10 and p90 lie far apart.
    """
    v = _finite(values)
    if v.size == 0:
        return {"reps": 0, "median_ms": math.nan, "p10_ms": math.nan, "p90_ms": math.nan,
                "iqr_ms": math.nan, "noisy": False}
    q10, q25, q50, q75, q90 = np.percentile(v, [10, 25, 50, 75, 90])
    iqr = float(q75 - q25)
    return {"reps": int(v.size), "median_ms": float(q50), "p10_ms": float(q10), "p90_ms": float(q90),
            "iqr_ms": iqr, "noisy": bool(iqr > NOISY_FRACTION * q50 or (q90 - q10) > NOISY_RANGE_FRACTION * q50)}


def quantiles(values) -> tuple[float, float, float]:
    """(median, p10, p90) of raw samples; NaNs when there are none."""
    s = stats(values)
    return s["median_ms"], s["p10_ms"], s["p90_ms"]


def _nanmedian(values) -> float:
    v = _finite(values)
    return float(np.median(v)) if v.size else math.nan


def _ratio(a: float, b: float) -> float:
    return a / b if (b > 0 and math.isfinite(a)) else math.nan


def runs(df: pd.DataFrame) -> list[str]:
    """The run ids in a result (one for a single run; none for frames without identity)."""
    return list(dict.fromkeys(df["run_id"])) if "run_id" in df.columns else []


def require_one_run(df: pd.DataFrame, where: str) -> None:
    """ValueError when ``df`` holds rows of several runs (pick one first)."""
    ids = runs(df)
    if len(ids) > 1:
        cards = df.drop_duplicates("run_id")
        what = ", ".join(f"{r} ({d})" for r, d in zip(cards["run_id"], cards.get("device_name", cards["run_id"])))
        raise ValueError(f"{where} draws one run, but these rows hold {len(ids)} runs: {what}; "
                         "select one, e.g. df[df.run_id == ...], or summarize(df) to compare them")


def _per_run(df: pd.DataFrame, one) -> pd.DataFrame:
    ids = runs(df)
    if len(ids) <= 1:
        return one(df)
    parts = [one(df[df["run_id"] == r]) for r in ids]
    out = pd.concat(parts, ignore_index=True)
    out.attrs.update(parts[0].attrs)
    return out


def _identity(df: pd.DataFrame) -> dict:
    if "run_id" in df.columns and len(df):
        return {"device_name": str(df["device_name"].iloc[0]) if "device_name" in df.columns else "",
                "run_id": str(df["run_id"].iloc[0])}
    return {"device_name": str(df.attrs.get("device_name", "")), "run_id": str(df.attrs.get("run_id", ""))}


def require_columns(df: pd.DataFrame, needed, where: str) -> None:
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise ValueError(f"{where} needs columns {missing}, which this DataFrame lacks "
                         f"(it has {list(df.columns)})")


# ------------------------------------------------------------------------ makespans


def _rep_makespans(df: pd.DataFrame, mode: str | None = None) -> pd.DataFrame:
    """One makespan per (layout, mode, rep): every workload row of a repetition repeats it."""
    sel = df if mode is None else df[df["mode"] == mode]
    keys = ["layout", "split_sm_count", "mode", "rep"]
    return sel.groupby(keys, sort=False)["makespan_ms"].max().reset_index()


def makespan_stats(df: pd.DataFrame, mode: str) -> pd.DataFrame:
    """Per layout, the median, p10 and p90 makespan of ``mode`` over repetitions.

    Returns columns ``layout``, ``split_sm_count``, ``median_ms``, ``p10_ms``,
    ``p90_ms``, ``reps``, sorted by ``split_sm_count``.
    """
    per_rep = _rep_makespans(df, mode)
    rows = []
    for (layout, k), g in per_rep.groupby(["layout", "split_sm_count"], sort=False):
        s = stats(g["makespan_ms"])
        rows.append({"layout": layout, "split_sm_count": int(k), "median_ms": s["median_ms"],
                     "p10_ms": s["p10_ms"], "p90_ms": s["p90_ms"], "reps": s["reps"]})
    out = pd.DataFrame(rows, columns=["layout", "split_sm_count", "median_ms", "p10_ms", "p90_ms", "reps"])
    return out.sort_values("split_sm_count", kind="stable").reset_index(drop=True)


def _makespan_medians(df: pd.DataFrame) -> dict[tuple[str, str], float]:
    per_rep = _rep_makespans(df)
    return {(lay, mode): _nanmedian(g["makespan_ms"])
            for (lay, mode), g in per_rep.groupby(["layout", "mode"], sort=False)}


# ------------------------------------------------------------------------ summarize


def summarize(df: pd.DataFrame, trace: pd.DataFrame | None = None) -> pd.DataFrame:
    """Medians and spread from the raw samples, with the derived comparisons.

    Dispatches on the result's kind (``df.attrs["kind"]``, else its columns). Rows of
    several runs are summarized per run (``device_name`` and ``run_id`` columns).

    Overlap and sweep results: one row per (layout, mode, workload), columns
    ``layout``, ``split_sm_count``, ``mode``, ``workload``, ``partition``, ``sm_count``,
    ``requested_sm_count``, ``reps``, ``median_ms``, ``p10_ms``, ``p90_ms``, ``iqr_ms``
    (of ``duration_ms``), ``noisy`` (IQR > 10% of the median), ``makespan_median_ms``
    (median over repetitions of the mode's makespan), ``throughput_tflops`` and
    ``bandwidth_gbs`` (medians), and per layout (the same on all its rows):

    - ``speedup_vs_sequential``: sequential makespan / concurrent makespan (medians);
    - ``speedup_vs_streams``: streams makespan / concurrent makespan;
    - ``slowdown_vs_alone``: the workload's concurrent median / its alone median on
      the same partition (per workload);
    - ``interference_free_ms``: the makespan the layout would give if its partitions
      shared nothing: the slowest workload's ``alone`` median on its own partition of
      that layout (NaN without ``alone`` rows);
    - ``interference``: concurrent makespan / ``interference_free_ms``, what sharing
      memory bandwidth, L2 and power costs at this layout (1.0 = nothing);
    - ``split_loss``: ``interference_free_ms`` / ``lower_bound_ms``, what giving each
      workload fewer SMs than its best costs at this layout (1.0 = nothing);
    - ``lower_bound_ms``: :func:`lower_bound`, one value for the whole run: no layout
      of it can beat it (up to the measured spread);
    - ``efficiency``: ``lower_bound_ms`` / concurrent makespan
      (= 1 / (``interference`` x ``split_loss``)); at most 1 up to the spread.

    Scaling results: one row per (workload, sm_count) with the same statistics plus
    ``speedup`` (median at the smallest size / median here) and
    ``parallel_efficiency`` (speedup / (sm_count / smallest sm_count)).

    Isolation results: one row per (scenario, role, workload) with the statistics,
    ``sm_count`` and ``slowdown_vs_alone`` (median / the same role's ``alone`` median).

    Occupancy results: :func:`sm_busy`. Traces: :func:`gcexplore.busy.busy_time`.

    Tune results: as overlap results (their rows are concurrent ones); see also
    :func:`tune_table`. PM samples (kind ``"pm"``): per repetition group, ``samples``
    and the means of the counters over its whole window, ``dram_pct_max``; per workload
    with the trace: :func:`gcexplore.pm.dram_summary`.

    Rates (``throughput_tflops``, ``bandwidth_gbs``) of a mode in
    :data:`SPAN_INCLUDES_WAIT` (plain streams) are NaN, with the reason in
    ``attrs["rate_notes"]``. With ``trace`` (the kernel trace of the same run), every
    mode's rates come from GPU-busy time instead and the columns of
    :func:`gcexplore.busy.trace_summary` are added.
    """
    from .. import busy

    kind = check_result(df, KINDS, "summarize")
    one = {"overlap": _summarize_overlap, "sweep": _summarize_overlap, "tune": _summarize_overlap,
           "scaling": _summarize_scaling, "isolation": _summarize_isolation, "occupancy": sm_busy,
           "trace": busy.busy_time, "pm": _summarize_pm}[kind]
    out = _per_run(df, one)
    return out if trace is None or kind not in ("overlap", "sweep") else busy.with_trace(out, df, trace)


def _summarize_pm(df: pd.DataFrame) -> pd.DataFrame:
    """PM samples per repetition group over its whole window (``pm.dram_summary`` splits it per workload)."""
    keys = ["layout", "mode", "rep", "workloads"]
    g = df.groupby(keys, sort=False)
    out = g.size().rename("samples").to_frame()
    for c in ("dram_pct", "sm_active_pct", "dram_read_gbs", "dram_write_gbs"):
        out[f"{c}_mean"] = g[c].mean()
    out["dram_pct_max"] = g["dram_pct"].max()
    return out.reset_index()


def _summarize_overlap(df: pd.DataFrame) -> pd.DataFrame:
    require_columns(df, ["layout", "split_sm_count", "mode", "rep", "workload", "partition",
                          "sm_count", "duration_ms", "makespan_ms"], "summarize")
    if df.empty:
        out = pd.DataFrame(columns=OVERLAP_SUMMARY_COLUMNS)
        out.attrs.update(df.attrs)
        return out
    makespan = _makespan_medians(df)
    rows = []
    for (layout, mode, workload), g in df.groupby(["layout", "mode", "workload"], sort=False):
        first = g.iloc[0]
        row = {"layout": layout, "split_sm_count": int(first["split_sm_count"]), "mode": mode,
               "workload": workload, "partition": first["partition"], "sm_count": int(first["sm_count"]),
               "requested_sm_count": first.get("requested_sm_count", pd.NA)}
        row.update(stats(g["duration_ms"]))
        row["makespan_median_ms"] = makespan.get((layout, mode), math.nan)
        for col in ("throughput_tflops", "bandwidth_gbs", "flops", "bytes"):
            row[col] = _nanmedian(g[col]) if col in g and mode not in SPAN_INCLUDES_WAIT else math.nan
        rows.append(row)
    s = pd.DataFrame(rows)
    bound = lower_bound(df)
    lb = float(bound["lower_bound_ms"])
    per_layout = {}
    for layout, g in s.groupby("layout", sort=False):
        conc = makespan.get((layout, "concurrent"), math.nan)
        alone = g.loc[g["mode"] == "alone", "median_ms"]
        free = float(alone.max()) if len(alone) and alone.notna().any() else math.nan
        per_layout[layout] = {
            "speedup_vs_sequential": _ratio(makespan.get((layout, "sequential"), math.nan), conc),
            "speedup_vs_streams": _ratio(makespan.get((layout, "streams"), math.nan), conc),
            "interference_free_ms": free,
            "interference": _ratio(conc, free),
            "split_loss": _ratio(free, lb),
            "lower_bound_ms": lb,
            "efficiency": _ratio(lb, conc),
        }
    for col in PER_LAYOUT_COLUMNS:
        s[col] = [per_layout[lay][col] for lay in s["layout"]]
    med = {(r.layout, r.mode, r.workload): r.median_ms for r in s.itertuples()}
    s["slowdown_vs_alone"] = [_ratio(med.get((r.layout, "concurrent", r.workload), math.nan),
                                     med.get((r.layout, "alone", r.workload), math.nan))
                              for r in s.itertuples()]
    s = s.assign(**_identity(df))
    s = s[OVERLAP_SUMMARY_COLUMNS].reset_index(drop=True)
    s["requested_sm_count"] = pd.array([None if pd.isna(v) else int(v) for v in s["requested_sm_count"]],
                                       dtype="Int64")
    s.attrs.update(df.attrs)
    s.attrs["summary_of"] = df.attrs.get("kind", "overlap")
    s.attrs["rate_notes"] = {m: note for m, note in SPAN_INCLUDES_WAIT.items() if m in set(s["mode"])}
    # plain values (None for NaN), so the attrs survive a save and compare equal after it
    s.attrs["lower_bound"] = {k: None if isinstance(v, float) and math.isnan(v) else (v.item() if hasattr(v, "item") else v)
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
    solo = _fastest_alone(df)
    out = dict.fromkeys(BOUND_FIELDS, math.nan)
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
        combined = df.groupby(["layout", "mode", "rep"], sort=False).agg(w=(work, "sum"), m=("makespan_ms", "max"))
        seen = [*_finite(df.get(rate, pd.Series(dtype=float))),
                *_finite(combined["w"] / (combined["m"] * 1e-3) / scale)]
        highest = max(seen, default=0.0)
        if highest > peak:
            notes.append(f"declared peak {peak:,.0f} {unit} not used: the run measured {highest:,.0f} {unit}")
            continue
        ms = float(per_wl.sum()) / (peak * scale) * 1e3
        terms.append(ms)
        notes.append(f"{float(per_wl.sum()):.3g} {work} at the declared peak {peak:,.0f} {unit}: {ms:.3f} ms")
    return (max(terms) if terms else math.nan), "; ".join(notes)


def _summary_of(df: pd.DataFrame) -> pd.DataFrame:
    return df if "median_ms" in df.columns else summarize(df)


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
    s = _summary_of(df)
    rows = []
    for layout, g in s.groupby("layout", sort=False):
        ms = g.drop_duplicates("mode").set_index("mode")["makespan_median_ms"]
        first = g.iloc[0]
        row = {"layout": layout, "split_sm_count": int(first["split_sm_count"])}
        for col in LAYOUT_TABLE_COLUMNS[2:]:
            mode = col[:-3]
            row[col] = float(ms.get(mode, math.nan)) if col.endswith("_ms") and mode in MODES \
                else float(first[col])
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
        Named by the layout, with the columns of :func:`layout_table`.

    Raises
    ------
    ValueError
        No ``concurrent`` rows, no finite concurrent makespan, or rows of several runs.
    """
    require_one_run(df, "best_split")
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
    best.name = best["layout"]
    return best


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
    worst = table.loc[table["concurrent_ms"].idxmax()]
    noisy = int(summarize(df)["noisy"].sum())
    return {"best": best.to_dict(), **per_mode,
            "vs_sequential": _outcome(per_mode["concurrent"], per_mode["sequential"]),
            "vs_streams": _outcome(per_mode["concurrent"], per_mode["streams"]),
            "bound": lower_bound(df).to_dict(), "worst": worst.to_dict(), "noisy_configs": noisy}


# ---------------------------------------------------------------- scaling, isolation


def _summarize_scaling(df: pd.DataFrame) -> pd.DataFrame:
    require_columns(df, columns("scaling")[:5], "summarize (scaling)")
    rows = []
    for (workload, sm), g in df.groupby(["workload", "sm_count"], sort=True):
        row = {"workload": workload, "sm_count": int(sm), "requested_sm_count": g["requested_sm_count"].iloc[0]}
        row.update(stats(g["duration_ms"]))
        for col in ("throughput_tflops", "bandwidth_gbs"):
            row[col] = _nanmedian(g[col]) if col in g else math.nan
        rows.append(row)
    s = pd.DataFrame(rows)
    sp, eff = [], []
    for r in s.itertuples():
        g = s[s["workload"] == r.workload]
        base = g.loc[g["sm_count"].idxmin()]
        sp.append(_ratio(base["median_ms"], r.median_ms))
        eff.append(sp[-1] / (r.sm_count / base["sm_count"]))
    s["speedup"] = sp
    s["parallel_efficiency"] = eff
    s["requested_sm_count"] = pd.array([None if pd.isna(v) else int(v) for v in s["requested_sm_count"]],
                                       dtype="Int64")
    s = s.assign(**_identity(df))
    s.attrs.update(df.attrs)
    s.attrs["summary_of"] = "scaling"
    return s


def _summarize_isolation(df: pd.DataFrame) -> pd.DataFrame:
    require_columns(df, columns("isolation")[:6], "summarize (isolation)")
    rows = []
    for (scenario, role, workload), g in df.groupby(["scenario", "role", "workload"], sort=False):
        row = {"scenario": scenario, "role": role, "workload": workload, "sm_count": int(g["sm_count"].iloc[0])}
        row.update(stats(g["duration_ms"]))
        rows.append(row)
    s = pd.DataFrame(rows)
    alone = {(r.role, r.workload): r.median_ms for r in s.itertuples() if r.scenario == "alone"}
    s["slowdown_vs_alone"] = [_ratio(r.median_ms, alone.get((r.role, r.workload), math.nan))
                              for r in s.itertuples()]
    s = s.assign(**_identity(df))
    s.attrs.update(df.attrs)
    s.attrs["summary_of"] = "isolation"
    return s


# ---------------------------------------------------------------- facts for display


def placement(df: pd.DataFrame) -> list[tuple[str, str]]:
    """(partition, workload) of an overlap result's concurrent rows, p0 first, remainder last."""
    conc = df[df["mode"] == "concurrent"].drop_duplicates("partition")
    if conc.empty:
        raise ValueError("these results have no 'concurrent' rows; pass results of "
                         "gcexplore.profile_overlap() or gcexplore.sweep()")
    order = {p: i for i, p in enumerate(sorted_partitions(conc["partition"]))}
    return sorted(zip(conc["partition"], conc["workload"]), key=lambda pw: order[pw[0]])


def workload_order(df: pd.DataFrame) -> list[str]:
    """Workload names in partition order (from the concurrent rows when there are any)."""
    try:
        return list(dict.fromkeys(w for _, w in placement(df)))
    except ValueError:
        return list(dict.fromkeys(df["workload"]))


#: Rate columns a workload can be shown in, with their labels.
RATES = {
    "throughput_tflops": "throughput (TFLOP/s)",
    "bandwidth_gbs": "bandwidth (GB/s)",
    "calls_per_s": "calls per second (no declared work)",
    "duration_ms": "duration (ms)",
}


def rates(rows: pd.DataFrame, metric: str = "auto") -> tuple[pd.Series, str]:
    """Per-row values of the rate ``metric`` and the metric used.

    ``"auto"`` picks what the workload declared: TFLOP/s for FLOPs, GB/s for bytes
    (GB/s also when both are declared at under 1 FLOP per byte, where every GPU is
    bandwidth-bound), else calls per second (1 / duration).
    """
    if metric == "auto":
        has = {c: c in rows and rows[c].notna().any() for c in ("throughput_tflops", "bandwidth_gbs")}
        order = ("throughput_tflops", "bandwidth_gbs")
        if all(has.values()) and "flops" in rows and "bytes" in rows:
            if float((rows["flops"] / rows["bytes"]).median()) < 1.0:
                order = ("bandwidth_gbs", "throughput_tflops")
        metric = next((c for c in order if has[c]), "calls_per_s")
    if metric == "calls_per_s":
        return 1e3 / rows["duration_ms"], metric
    if metric not in RATES or metric not in rows:
        raise ValueError(f"metric {metric!r} is not available; use 'auto' or one of {', '.join(RATES)}")
    return rows[metric], metric


def baseline_ms(df: pd.DataFrame, mode: str) -> float:
    """Median makespan of a mode that runs on the whole device (``sequential``, ``streams``)
    over every repetition of every layout: the split does not change it."""
    per_rep = _rep_makespans(df, mode)
    return stats(per_rep["makespan_ms"])["median_ms"]


def rate_quantiles(rows: pd.DataFrame, metric: str, by: str) -> pd.DataFrame:
    """Median, p10 and p90 of a rate (see :func:`rates`) per value of ``by``, sorted by it."""
    values, _ = rates(rows, metric)
    out = []
    for key, v in values.groupby(rows[by], sort=True):
        med, lo, hi = quantiles(v)
        out.append({by: key, "median": med, "p10": lo, "p90": hi})
    return pd.DataFrame(out, columns=[by, "median", "p10", "p90"])


def modes_in(df: pd.DataFrame) -> list[str]:
    """The modes of a result in schema order, then any other modes in the order met."""
    present = list(dict.fromkeys(df["mode"]))
    return [m for m in MODES if m in present] + [m for m in present if m not in MODES]


# Per-SM busy fractions and the tuner's table live beside this module; they are part of
# this one analysis layer and are re-exported here.
from .occupancy import occupancy_layout, sm_busy  # noqa: E402
from .tuning import TUNE_TABLE_COLUMNS, gpu_time_ms, slo_split, tune_table  # noqa: E402
