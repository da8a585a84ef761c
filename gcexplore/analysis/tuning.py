"""The tuner's numbers: per measured layout, its median and confidence interval, the
answer, the smallest size meeting a latency target, and the GPU time spent."""

from __future__ import annotations

import pandas as pd

from ..results.run import require_one_run
from ..results.validate import require_columns
from .display import placement
from .stats import quantile, quantile_ci

__all__ = ["TUNE_TABLE_COLUMNS", "gpu_time_ms", "slo_split", "tune_table"]


TUNE_TABLE_COLUMNS = [
    "layout", "split_sm_count", "first_step", "visits", "reps", "makespan_ms", "makespan_ci_low_ms",
    "makespan_ci_high_ms", "latency_ms", "latency_ci_low_ms", "latency_ci_high_ms", "answer",
]


def tune_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per layout the tuner measured, in the order it first measured them.

    Parameters
    ----------
    df : pandas.DataFrame
        A :func:`gcexplore.tune` result (one run).

    Returns
    -------
    pandas.DataFrame
        ``layout``, ``split_sm_count``, ``first_step`` (search step of its first
        measurement), ``visits`` (times measured), ``reps``, ``makespan_ms`` (median
        concurrent makespan) with ``makespan_ci_low_ms`` / ``makespan_ci_high_ms``
        (order-statistic interval at ``attrs["confidence"]``), ``latency_ms`` (the
        first workload's ``attrs["percentile"]`` duration) with its interval, and
        ``answer`` (True on the chosen layout).
    """
    require_one_run(df, "tune_table")
    require_columns(df, ["layout", "split_sm_count", "step", "rep", "workload", "partition", "duration_ms",
                          "makespan_ms"], "tune_table")
    level = float(df.attrs.get("confidence", 0.9))
    q = float(df.attrs.get("percentile", 50.0)) / 100.0
    first = placement(df)[0][1] if len(df) else None
    rows = []
    for layout, g in df.groupby("layout", sort=False):
        spans = g.groupby("rep")["makespan_ms"].max()
        lat = g[g["workload"] == first]["duration_ms"]
        m_ci, l_ci = quantile_ci(spans, 0.5, level), quantile_ci(lat, q, level)
        rows.append({"layout": layout, "split_sm_count": int(g["split_sm_count"].iloc[0]),
                     "first_step": int(g["step"].min()), "visits": int(g["step"].nunique()), "reps": len(spans),
                     "makespan_ms": quantile(spans, 0.5), "makespan_ci_low_ms": m_ci[0],
                     "makespan_ci_high_ms": m_ci[1], "latency_ms": quantile(lat, q), "latency_ci_low_ms": l_ci[0],
                     "latency_ci_high_ms": l_ci[1], "answer": layout == df.attrs.get("answer")})
    out = pd.DataFrame(rows, columns=TUNE_TABLE_COLUMNS)
    return out.sort_values("first_step", kind="stable").reset_index(drop=True)


def slo_split(df: pd.DataFrame, slo_ms: float, percentile: float = 50.0) -> str | None:
    """The layout with the smallest first partition whose first workload's concurrent
    ``percentile`` duration is at most ``slo_ms`` (point estimates), or None.

    For a sweep, what a full measurement says the latency-target tuner should find.
    """
    require_one_run(df, "slo_split")
    conc = df[df["mode"] == "concurrent"]
    first = placement(conc)[0][1]
    lat = conc[conc["workload"] == first].groupby(["split_sm_count", "layout"])["duration_ms"].apply(
        lambda v: quantile(v, percentile / 100.0))
    ok = lat[lat <= slo_ms]
    return None if ok.empty else str(ok.index[0][1])


def gpu_time_ms(df: pd.DataFrame) -> float:
    """GPU time a result cost: every measured repetition's makespan, plus the warm-up.

    Warm-up repetitions are not recorded; each is counted at the median makespan of the
    repetitions measured after it (``attrs["warmup"]`` of them per layout, mode and round,
    or per tuner step).
    """
    keys = [c for c in ("layout", "mode", "step") if c in df.columns]
    rnd = ["round"] if "round" in df.columns else []
    per_rep = df.groupby([*keys, *rnd, "rep"], sort=False)["makespan_ms"].max()
    warm = int(df.attrs.get("warmup", 0) or 0)  # per round: each round warms up again
    per_round = per_rep.groupby(level=list(range(len(keys) + len(rnd)))).median()
    return float(per_rep.sum() + warm * per_round.sum())
