"""Modes of a sample: repetitions that fall into separate clusters (pure numpy/pandas).

A median summarises one cluster. When the repetitions of one measurement fall into two
clusters far apart (a kernel that either starts at once or waits a millisecond for SMs),
the median reports one of them and hides the other; these functions find the clusters so
a report can name both, and say which cluster a drawn repetition belongs to.

The rule (gaps, not a fitted mixture): sort the values and cut at the widest gap between
neighbours when that gap is wider than ``gap_factor`` times the range of each side and at
least ``min_gap`` of the sample's largest magnitude, and each side holds at least
``min_count`` values; repeat on each side. A unimodal sample's widest gap is a small part
of its range, so it stays one cluster.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

__all__ = ["DRAM_SAME_POINTS", "LAUNCH_BOUND_RATIO", "MODE_COLUMNS", "SATURATION", "baseline_choice", "busy_shares",
           "cluster_labels", "dram_headline", "group_modes", "scaling_facts",
           "launch_limits", "rep_mode", "sample_modes", "trace_modes"]

#: Columns of :func:`sample_modes`.
MODE_COLUMNS = ["cluster", "count", "share", "median", "low", "high"]


def _check(values) -> np.ndarray:
    v = np.asarray(values, dtype=float).ravel()
    if not np.isfinite(v).all():
        raise ValueError(f"sample_modes needs finite values; got {int((~np.isfinite(v)).sum())} NaN or infinite "
                         f"of {v.size}")
    return v


def _cuts(v: np.ndarray, lo: int, hi: int, gap_factor: float, min_gap: float, min_count: int) -> list[int]:
    """Positions in sorted ``v[lo:hi]`` where a new cluster starts."""
    n = hi - lo
    if n < 2 * min_count:
        return []
    part = v[lo:hi]
    gaps = np.diff(part)
    # only cuts that leave min_count values on each side
    allowed = gaps[min_count - 1: n - min_count]
    if allowed.size == 0:
        return []
    i = int(np.argmax(allowed)) + min_count - 1
    gap = float(gaps[i])
    spread = max(part[i] - part[0], part[-1] - part[i + 1])
    if gap <= gap_factor * spread or gap < min_gap:
        return []
    at = lo + i + 1
    return [*_cuts(v, lo, at, gap_factor, min_gap, min_count), at, *_cuts(v, at, hi, gap_factor, min_gap,
                                                                          min_count)]


def cluster_labels(values, *, gap_factor: float = 2.0, min_gap: float = 0.05, min_count: int = 2) -> np.ndarray:
    """The cluster of each value, in the input's order: 0 for the lowest cluster, 1 the next.

    Parameters
    ----------
    values : array-like of float
        One measurement's repetitions (finite).
    gap_factor : float, default 2.0
        A gap separates two clusters when wider than this many times the range of each.
    min_gap : float, default 0.05
        ... and at least this share of the largest absolute value (so quantised, nearly
        equal values never split).
    min_count : int, default 2
        Fewest values a cluster holds (a lone outlier stays in its neighbour's cluster).
    """
    v = _check(values)
    if min_count < 1:
        raise ValueError(f"min_count must be at least 1, not {min_count}")
    if v.size == 0:
        return np.zeros(0, dtype=int)
    order = np.argsort(v, kind="stable")
    s = v[order]
    scale = float(np.max(np.abs(s)))
    cuts = _cuts(s, 0, s.size, gap_factor, min_gap * scale, min_count)
    labels = np.empty(v.size, dtype=int)
    labels[order] = np.searchsorted(np.asarray(cuts, dtype=int), np.arange(s.size), side="right")
    return labels


def sample_modes(values, **kwargs) -> pd.DataFrame:
    """The clusters of a sample (see the module): one row each, lowest first.

    Returns
    -------
    pandas.DataFrame
        Columns ``cluster`` (0, 1, ...), ``count``, ``share`` (of all values), ``median``,
        ``low`` and ``high`` (the cluster's smallest and largest value). One row when the
        sample is unimodal; no rows for an empty sample.
    """
    v = _check(values)
    labels = cluster_labels(v, **kwargs)
    rows = [{"cluster": c, "count": int((labels == c).sum()), "share": float((labels == c).mean()),
             "median": float(np.median(v[labels == c])), "low": float(v[labels == c].min()),
             "high": float(v[labels == c].max())} for c in np.unique(labels)]
    return pd.DataFrame(rows, columns=MODE_COLUMNS)


def group_modes(per_rep: pd.DataFrame, column: str, *, by: Sequence[str] = ("layout", "mode", "workload"),
                also: Sequence[str] = (), **kwargs) -> pd.DataFrame:
    """The clusters of ``column`` over the repetitions of each group.

    Parameters
    ----------
    per_rep : pandas.DataFrame
        One row per repetition and group (column ``rep``, the ``by`` columns, ``column``).
    column : str
        The per-repetition number to cluster (e.g. ``"wait_ms"``).
    by : sequence of str
        The group columns.
    also : sequence of str
        Other per-repetition columns whose median in each cluster is reported too
        (as ``<name>_median``).

    Returns
    -------
    pandas.DataFrame
        One row per group and cluster: the ``by`` columns, ``clusters`` (how many the
        group has), ``reps_total``, then the :data:`MODE_COLUMNS`, the ``also`` medians
        and ``reps`` (a tuple of the repetitions in the cluster).
    """
    need = [*by, "rep", column, *also]
    missing = [c for c in need if c not in per_rep.columns]
    if missing:
        raise ValueError(f"group_modes needs the columns {missing}; this DataFrame has {list(per_rep.columns)}")
    rows = []
    for key, g in per_rep.groupby(list(by), sort=False):
        key = key if isinstance(key, tuple) else (key,)
        labels = cluster_labels(g[column], **kwargs)
        n = int(labels.max()) + 1 if labels.size else 0
        for c in range(n):
            sel = g[labels == c]
            vals = sel[column].to_numpy(float)
            rows.append({**dict(zip(by, key)), "clusters": n, "reps_total": len(g), "cluster": c,
                         "count": len(sel), "share": len(sel) / len(g), "median": float(np.median(vals)),
                         "low": float(vals.min()), "high": float(vals.max()),
                         **{f"{a}_median": float(sel[a].median()) for a in also},
                         "reps": tuple(int(r) for r in sel["rep"])})
    cols = [*by, "clusters", "reps_total", *MODE_COLUMNS, *[f"{a}_median" for a in also], "reps"]
    return pd.DataFrame(rows, columns=cols)


def trace_modes(trace: pd.DataFrame, df: pd.DataFrame | None = None, *, column: str | None = None,
                also: Sequence[str] = ()) -> pd.DataFrame:
    """:func:`group_modes` of a traced number per (layout, mode, workload).

    With the overlap result ``df`` of the same run, the per-repetition numbers are those of
    :func:`gcexplore.analysis.trace.trace_rates` (``wait_ms``, ``event_ms``, ...; default
    ``wait_ms``); without it, those of :func:`gcexplore.busy_time` from the trace alone
    (``first_start_ms``, ``busy_span_ms``, ...; default ``first_start_ms``).
    """
    from .trace import busy_time, trace_rates

    per_rep = busy_time(trace) if df is None else trace_rates(df, trace)
    column = column or ("first_start_ms" if df is None else "wait_ms")
    return group_modes(per_rep, column, also=also)


def rep_mode(modes: pd.DataFrame, rep: int) -> pd.DataFrame:
    """The rows of :func:`group_modes` whose cluster holds repetition ``rep``, one per group,
    with ``others``: the other clusters of its group as (count, median) pairs."""
    if modes.empty:
        return modes.assign(others=[])
    keys = [c for c in modes.columns if c not in ("clusters", "reps_total", *MODE_COLUMNS, "reps")
            and not c.endswith("_median")]
    mine = modes[modes["reps"].map(lambda reps: rep in reps)].copy()
    others = []
    for r in mine.itertuples(index=False):
        same = (modes[keys] == pd.Series({k: getattr(r, k) for k in keys})).all(axis=1)
        rest = modes[same & (modes["cluster"] != r.cluster)]
        others.append([(int(c), float(m)) for c, m in zip(rest["count"], rest["median"])])
    mine["others"] = others
    return mine.reset_index(drop=True)


# ------------------------------------------------------------ numbers the notebooks say


def busy_shares(occupancy: pd.DataFrame) -> pd.DataFrame:
    """How busy each workload kept its SMs, against the whole run and against its own span.

    :func:`gcexplore.sm_busy`'s ``busy_fraction`` is a share of the *whole run* (first block
    of any workload to the last), so a workload that finishes early shows a small fraction
    on every SM however evenly it used them. This adds the share of the workload's own span.

    Returns
    -------
    pandas.DataFrame
        One row per (partition, workload): ``sms``, ``run_span_ms``, ``own_span_ms`` (its
        first block start to its last block end), ``of_run_mean`` / ``of_run_min`` /
        ``of_run_max`` (busy time over the run's span, across its SMs) and ``of_own_mean`` /
        ``of_own_min`` / ``of_own_max`` (over its own span).
    """
    need = ["partition", "workload", "sm_id", "start_ns", "end_ns"]
    missing = [c for c in need if c not in occupancy.columns]
    if missing:
        raise ValueError(f"busy_shares needs the occupancy columns {missing}")
    from .occupancy import sm_busy

    busy = sm_busy(occupancy)
    run_ns = float(occupancy["end_ns"].max() - occupancy["start_ns"].min())
    rows = []
    for (part, wl), g in busy.groupby(["partition", "workload"], sort=False):
        mine = occupancy[(occupancy["partition"] == part) & (occupancy["workload"] == wl)]
        own_ns = float(mine["end_ns"].max() - mine["start_ns"].min())
        of_run, of_own = g["busy_ns"] / run_ns, g["busy_ns"] / own_ns
        rows.append({"partition": part, "workload": wl, "sms": len(g), "run_span_ms": run_ns / 1e6,
                     "own_span_ms": own_ns / 1e6, "of_run_mean": of_run.mean(), "of_run_min": of_run.min(),
                     "of_run_max": of_run.max(), "of_own_mean": of_own.mean(), "of_own_min": of_own.min(),
                     "of_own_max": of_own.max()})
    return pd.DataFrame(rows)


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
    from .overlap import baseline_ms, layout_table
    from .summaries import summarize

    table = layout_table(summarize(df) if summary is None else summary)  # summary: of df, computed once
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


# ------------------------------------------------------------- what a figure's headline says


def dram_headline(summary: pd.DataFrame) -> dict | None:
    """What a PM sample shows about sharing DRAM, from :func:`gcexplore.dram_summary` means.

    Each workload alone against all of them together: the together mean set beside the
    *larger* alone mean (a sum of two loads over 50% exceeds the peak whatever happens, so
    it says nothing). Returns None unless the summary has at least two workloads alone and
    one together row; else ``alone`` (workload -> % of peak), ``together``, ``top`` (the
    workload with the larger alone mean), ``added`` (together minus the larger alone, in
    points of peak) and ``verdict``: ``"no more than one alone"`` when ``added`` is within
    :data:`DRAM_SAME_POINTS`, ``"adds up"`` when together reaches the sum of the alone means
    (within as much) below the peak, else ``"more than one alone, less than both"``.
    """
    alone = summary[(summary["mode"] == "alone") & ~summary["workload"].str.contains("+", regex=False)]
    together = summary[(summary["mode"] == "concurrent") & summary["workload"].str.contains("+", regex=False)]
    if len(alone) < 2 or len(together) != 1 or alone["dram_pct"].isna().any():
        return None
    means = dict(zip(alone["workload"], alone["dram_pct"].astype(float)))
    c = float(together["dram_pct"].iloc[0])
    top = max(means, key=means.get)
    added = c - means[top]
    total = sum(means.values())
    if added <= DRAM_SAME_POINTS:
        verdict = "no more than one alone"
    elif total <= 100 + DRAM_SAME_POINTS and c >= total - DRAM_SAME_POINTS:
        verdict = "adds up"
    else:
        verdict = "more than one alone, less than both"
    return {"alone": means, "together": c, "top": top, "added": added, "sum": total, "verdict": verdict}


#: Points of DRAM peak within which two sample means count as the same.
DRAM_SAME_POINTS = 5.0


def scaling_facts(df: pd.DataFrame, metric: str = "auto") -> pd.DataFrame:
    """Per workload of a scaling result: its efficiency at the largest size and where its rate peaks.

    Returns
    -------
    pandas.DataFrame
        One row per workload: ``unit`` (the rate drawn), ``largest_sm`` and
        ``efficiency_at_largest`` (:func:`gcexplore.summarize`'s ``parallel_efficiency``),
        ``peak`` (the highest median rate) and ``peak_sm``, ``saturates_sm`` (the fewest SMs
        whose median rate reaches :data:`SATURATION` of the peak).
    """
    from .display import rate_quantiles, rates
    from .summaries import summarize

    summary = summarize(df)
    rows = []
    for w in dict.fromkeys(df["workload"]):
        mine = df[df["workload"] == w]
        _, unit = rates(mine, metric)
        q = rate_quantiles(mine, unit, by="sm_count").sort_values("sm_count")
        s = summary[summary["workload"] == w].sort_values("sm_count")
        peak = q.loc[q["median"].idxmax()]
        sat = q[q["median"] >= SATURATION * peak["median"]]["sm_count"].min()
        rows.append({"workload": w, "unit": unit, "largest_sm": int(s["sm_count"].iloc[-1]),
                     "efficiency_at_largest": float(s["parallel_efficiency"].iloc[-1]),
                     "peak": float(peak["median"]), "peak_sm": int(peak["sm_count"]), "saturates_sm": int(sat)})
    return pd.DataFrame(rows)


#: The share of its peak rate at which a workload counts as saturated.
SATURATION = 0.95
