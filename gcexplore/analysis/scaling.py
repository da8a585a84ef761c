"""Scaling results: the summary per workload and SM count (medians, speedup, parallel efficiency)
and what a figure says about it (efficiency at the largest size, where the rate peaks and saturates);
isolation results: per scenario, role and workload, the statistics and the slowdown against the same
role alone (:func:`summarize_isolation`)."""

from __future__ import annotations

import math
from typing import Any, cast

import pandas as pd

from ..results.run import per_run, with_identity
from ..results.validate import check_result, require_columns
from ..schema import columns
from .display import rate_quantiles, rates
from .stats import nanmedian, ratio, stats
from ..results.io import bare

__all__ = ["SATURATION", "scaling_facts", "summarize_isolation", "summarize_scaling"]


def summarize_scaling(df: pd.DataFrame) -> pd.DataFrame:
    require_columns(df, columns("scaling")[:5], "summarize (scaling)")
    rows = []
    for (workload, sm), g in bare(df).groupby(["workload", "sm_count"], sort=True):  # no attrs copied per group
        row = {"workload": workload, "sm_count": int(cast(int, sm)),
               "requested_sm_count": g["requested_sm_count"].iloc[0]}
        row.update(stats(g["duration_ms"]))
        for col in ("throughput_tflops", "bandwidth_gbs"):
            row[col] = nanmedian(g[col]) if col in g else math.nan
        rows.append(row)
    s = pd.DataFrame(rows)
    sp, eff = [], []
    r: Any  # a row: its fields are the columns' values (pandas-stubs types each as any scalar)
    for r in s.itertuples():
        g = s[s["workload"] == r.workload]
        base = g.loc[g["sm_count"].idxmin()]
        sp.append(ratio(base["median_ms"], r.median_ms))
        eff.append(sp[-1] / (r.sm_count / base["sm_count"]))
    s["speedup"] = sp
    s["parallel_efficiency"] = eff
    s["requested_sm_count"] = pd.array([None if pd.isna(v) else int(v) for v in s["requested_sm_count"]],
                                       dtype="Int64")
    s = with_identity(s, df)
    s.attrs.update(df.attrs)
    s.attrs["summary_of"] = "scaling"
    return s


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
    check_result(df, "scaling", "scaling_facts")
    summary = per_run(df, summarize_scaling)
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


def summarize_isolation(df: pd.DataFrame) -> pd.DataFrame:
    require_columns(df, columns("isolation")[:6], "summarize (isolation)")
    rows = []
    for (scenario, role, workload), g in df.groupby(["scenario", "role", "workload"], sort=False):
        row = {"scenario": scenario, "role": role, "workload": workload, "sm_count": int(g["sm_count"].iloc[0])}
        row.update(stats(g["duration_ms"]))
        rows.append(row)
    s = pd.DataFrame(rows)
    tuples = cast("list[Any]", list(s.itertuples()))  # pandas-stubs types each field as any scalar
    alone = {(r.role, r.workload): r.median_ms for r in tuples if r.scenario == "alone"}
    s["slowdown_vs_alone"] = [ratio(r.median_ms, alone.get((r.role, r.workload), math.nan))
                              for r in tuples]
    s = with_identity(s, df)
    s.attrs.update(df.attrs)
    s.attrs["summary_of"] = "isolation"
    return s
