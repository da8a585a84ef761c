"""The tuner's numbers: per measured layout, its median and confidence interval, the
answer, the smallest size meeting a latency target, and the GPU time spent."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..results.run import require_one_run, run_columns, run_of
from ..results.validate import check_result, require_columns
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
    check_result(df, "tune", "tune_table")  # NaN or negative times: refused, as the search refuses them
    level = float(df.attrs.get("confidence", 0.9))
    q = float(df.attrs.get("percentile", 50.0)) / 100.0
    first = placement(df)[0][1] if len(df) else None
    rows = []
    per = run_of(df).rep_makespans()
    for layout, g in df.groupby("layout", sort=False):
        spans = per[per["layout"] == layout]["makespan_ms"]
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
    repetitions measured after it: ``attrs["warmup"]`` of them before a layout's first mode
    in each round (per tuner step), and ``attrs["warmup_later_modes"]`` before each later mode
    at the layouts in ``attrs["warmup_later_modes_at"]`` where recorded (results recorded before that
    schedule: ``attrs["warmup"]`` before every mode); in a
    layout's later rounds ``attrs["warmup_later_rounds"]`` (per mode) where recorded, plus one
    before the first mode for the layouts in ``attrs["warmup_calls"]`` (one call of each workload).
    """
    per = run_of(df).rep_makespans()  # the run's per-repetition makespans, with their round
    keys = [c for c in (*run_columns(df), "layout", "mode", "step", "round") if c in per.columns]
    per_rep = per["makespan_ms"]  # each round warms up again: its medians are its own
    warm = df.attrs.get("warmup", 0) or 0
    if isinstance(warm, bool) or not isinstance(warm, (int, float)) or warm < 0 or warm != int(warm):
        raise ValueError(f"gpu_time_ms: attrs['warmup'] must be a whole number of repetitions >= 0, got {warm!r}")
    warm = int(warm)
    medians = per.groupby(keys, sort=False, dropna=False)["makespan_ms"].median()
    if "mode" in keys:  # the first mode of a layout gets every warm-up repetition, a later one at most one
        modes = list(df.attrs.get("modes") or dict.fromkeys(df["mode"]))
        later = int(df.attrs.get("warmup_later_modes", warm))
        at = df.attrs.get("warmup_later_modes_at")  # where recorded, only these layouts' later modes warm up
        ran = (np.ones(len(medians), bool) if not isinstance(at, (list, tuple))
               else medians.index.get_level_values("layout").isin(list(at)))
        counts = np.array([warm if m == modes[0] else later * r
                           for m, r in zip(medians.index.get_level_values("mode"), ran)])
        again = df.attrs.get("warmup_later_rounds")
        if "round" in keys and isinstance(again, (list, tuple)) and len(again) == len(modes):
            if not all(isinstance(n, (int, float)) and not isinstance(n, bool) and n >= 0 and n == int(n)
                       for n in again):
                raise ValueError("gpu_time_ms: attrs['warmup_later_rounds'] must hold a whole number of "
                                 f"repetitions >= 0 per mode, got {again!r}")
            per_mode = dict(zip(modes, (int(n) for n in again)))
            calls = set(df.attrs.get("warmup_calls") or ())  # layouts whose later rounds call each workload once
            idx = medians.index
            again_counts = [per_mode.get(m, later) + int(m == modes[0] and lay in calls)
                            for lay, m in zip(idx.get_level_values("layout"), idx.get_level_values("mode"))]
            counts = np.where(idx.get_level_values("round") > 0, again_counts, counts)
        return float(per_rep.sum() + (medians.to_numpy() * counts).sum())
    return float(per_rep.sum() + warm * medians.sum())
