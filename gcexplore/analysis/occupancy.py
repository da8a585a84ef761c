"""Per-SM busy fractions of occupancy records, and the layout an occupancy run was at."""

from __future__ import annotations

import math

import pandas as pd

from ..schema import columns, sorted_partitions
from ..results.validate import require_columns

__all__ = ["occupancy_layout", "sm_busy"]


def _union_length(intervals) -> int:
    busy, cur_s, cur_e = 0, None, None
    for s0, e0 in sorted(intervals):
        if cur_e is None or s0 > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s0, e0
        else:
            cur_e = max(cur_e, e0)
    return busy + (cur_e - cur_s if cur_e is not None else 0)


def sm_busy(df: pd.DataFrame) -> pd.DataFrame:
    """Per-SM busy fractions from :func:`~gcexplore.occupancy` records.

    Returns
    -------
    pandas.DataFrame
        One row per (sm_id, partition, workload), sorted by ``sm_id``: ``sm_id`` (int),
        ``partition`` (str), ``workload`` (str), ``blocks`` (int: blocks that ran there),
        ``busy_ns`` (int: length of the union of those blocks' intervals),
        ``busy_fraction`` (float: ``busy_ns`` over the run's span, earliest block start
        to latest block end).
    """
    require_columns(df, columns("occupancy")[:6], "sm_busy")
    cols = ["sm_id", "partition", "workload", "blocks", "busy_ns", "busy_fraction"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    span = int(df["end_ns"].max() - df["start_ns"].min())
    rows = []
    for (sm, part, wl), g in df.groupby(["sm_id", "partition", "workload"], sort=True):
        iv = list(zip(g["start_ns"].astype("int64"), g["end_ns"].astype("int64")))
        busy = _union_length(iv)
        rows.append({"sm_id": int(sm), "partition": part, "workload": wl, "blocks": len(iv),
                     "busy_ns": int(busy), "busy_fraction": busy / span if span > 0 else math.nan})
    out = pd.DataFrame(rows, columns=cols)
    out.attrs.update(df.attrs)
    out.attrs["summary_of"] = "occupancy"
    return out


def occupancy_layout(occupancy: pd.DataFrame) -> str:
    """The layout label (e.g. ``"24+108"``) an occupancy run was measured at.

    ``occupancy.attrs["layout"]`` when the profiler stored it, else the number of
    distinct SMs each partition's blocks ran on (p0, p1, ..., remainder).
    """
    if occupancy.attrs.get("layout"):
        return str(occupancy.attrs["layout"])
    counts = occupancy.groupby("partition")["sm_id"].nunique()
    return "+".join(str(int(counts[p])) for p in sorted_partitions(counts.index))
