"""Small facts the views and explorers need: which workload ran where, the order to list them,
which rate a workload is shown in, the modes a result holds."""

from __future__ import annotations

import pandas as pd

from ..schema import MODES, sorted_partitions
from .stats import quantiles

__all__ = ["RATES", "modes_in", "placement", "rate_quantiles", "rates", "workload_order"]



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
