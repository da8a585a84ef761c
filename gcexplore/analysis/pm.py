"""PM-sample numbers: counter means per workload window and all together, the summary of a sample
frame per repetition group, and what the means say about sharing DRAM."""

from __future__ import annotations

import math

import pandas as pd

from ..results.validate import check_pm_matches
from ..schema import trace_groups

__all__ = ["DRAM_SAME_POINTS", "SUMMARY_COLUMNS", "dram_headline", "dram_summary", "dram_verdict", "summarize_pm"]



_METRIC_COLUMNS = ("dram_pct", "dram_read_gbs", "dram_write_gbs", "sm_active_pct")


SUMMARY_COLUMNS = ["layout", "mode", "rep", "workloads", "workload", "from_ms", "to_ms", "samples", *_METRIC_COLUMNS]


def _spans(kernels) -> list[tuple[str, float, float]]:
    """Each workload's first start and last end, then, where several overlap, their common stretch."""
    spans = [(str(w), float(k["start_ms"].min()), float(k["end_ms"].max()))
             for w, k in kernels.groupby("workload", sort=True)]
    if len(spans) > 1:
        a, b = max(s[1] for s in spans), min(s[2] for s in spans)
        if b > a:
            spans.append(("+".join(s[0] for s in spans), a, b))
    return spans


def dram_summary(samples, trace):
    """Mean of each counter while each workload ran, and while all of a repetition's ran together.

    Parameters
    ----------
    samples : pandas.DataFrame
        Kind ``"pm"`` (:func:`dram_timeline`).
    trace : pandas.DataFrame
        The trace of the same run (its kernels bound each window).

    Returns
    -------
    pandas.DataFrame
        One row per repetition group (``layout``, ``mode``, ``rep``, ``workloads``) and
        ``workload``: a workload's window runs from its first kernel's start to its last
        kernel's end; where the group's workloads overlap, one more row (``workload``
        their names joined by "+") covers the stretch where all of them ran. ``from_ms``
        / ``to_ms`` bound the window, ``samples`` counts the samples wholly inside it, and
        ``dram_pct``, ``dram_read_gbs``, ``dram_write_gbs``, ``sm_active_pct`` are their means.
    """
    check_pm_matches(samples, trace, "dram_summary")  # one run, valid rows
    rows = []
    for o, k in trace_groups(trace):
        group = "+".join(o["workloads"])
        mine = samples[(samples["layout"] == o["layout"]) & (samples["mode"] == o["mode"])
                       & (samples["rep"] == o["rep"]) & (samples["workloads"] == group)]
        for w, a, b in _spans(k):
            s = mine[(mine["start_ms"] >= a) & (mine["end_ms"] <= b)]
            rows.append({"layout": o["layout"], "mode": o["mode"], "rep": o["rep"], "workloads": group,
                         "workload": w, "from_ms": a, "to_ms": b, "samples": len(s),
                         **{c: float(s[c].mean()) if len(s) else math.nan for c in _METRIC_COLUMNS}})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)



def dram_verdict(summary: pd.DataFrame) -> str:
    """What the means say about sharing DRAM: each workload alone against all of them together."""
    alone = summary[(summary["mode"] == "alone") & ~summary["workload"].str.contains("+", regex=False)]
    together = summary[(summary["mode"] == "concurrent") & summary["workload"].str.contains("+", regex=False)]
    if len(alone) < 2 or len(together) != 1 or alone["dram_pct"].isna().any():
        return ""
    a, c = float(alone["dram_pct"].sum()), float(together["dram_pct"].iloc[0])
    parts = " and ".join(f"{r.workload} {r.dram_pct:.0f}%" for r in alone.itertuples())
    text = f":\nalone {parts} of DRAM peak; together {c:.0f}%"
    if a > c + 5:
        text += ", less than the sum: the SMs were split, the bandwidth was shared"
    return text



def summarize_pm(df: pd.DataFrame) -> pd.DataFrame:
    """PM samples per repetition group over its whole window (``pm.dram_summary`` splits it per workload)."""
    keys = ["layout", "mode", "rep", "workloads"]
    g = df.groupby(keys, sort=False)
    out = g.size().rename("samples").to_frame()
    for c in ("dram_pct", "sm_active_pct", "dram_read_gbs", "dram_write_gbs"):
        out[f"{c}_mean"] = g[c].mean()
    out["dram_pct_max"] = g["dram_pct"].max()
    return out.reset_index()


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
    top = max(means, key=lambda w: means[w])
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
