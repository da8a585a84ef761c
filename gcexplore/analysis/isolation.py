"""Isolation results: per scenario, role and workload, the statistics and the slowdown against the
same role alone."""

from __future__ import annotations

import math

import pandas as pd

from ..results.run import with_identity
from ..results.validate import require_columns
from ..schema import columns
from .stats import ratio, stats

__all__ = ["summarize_isolation"]


def summarize_isolation(df: pd.DataFrame) -> pd.DataFrame:
    require_columns(df, columns("isolation")[:6], "summarize (isolation)")
    rows = []
    for (scenario, role, workload), g in df.groupby(["scenario", "role", "workload"], sort=False):
        row = {"scenario": scenario, "role": role, "workload": workload, "sm_count": int(g["sm_count"].iloc[0])}
        row.update(stats(g["duration_ms"]))
        rows.append(row)
    s = pd.DataFrame(rows)
    alone = {(r.role, r.workload): r.median_ms for r in s.itertuples() if r.scenario == "alone"}
    s["slowdown_vs_alone"] = [ratio(r.median_ms, alone.get((r.role, r.workload), math.nan))
                              for r in s.itertuples()]
    s = with_identity(s, df)
    s.attrs.update(df.attrs)
    s.attrs["summary_of"] = "isolation"
    return s
