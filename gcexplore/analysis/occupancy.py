"""Per-SM busy fractions of occupancy records, how busy each workload kept its SMs (against the run and
its own span), and the layout an occupancy run was at."""

from __future__ import annotations

import math
from typing import cast

import pandas as pd

from ..schema import columns, sorted_partitions
from ..results.validate import require_columns
from ..results.io import bare

__all__ = ["busy_shares", "occupancy_layout", "sm_busy"]


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
    for (sm, part, wl), g in bare(df).groupby(["sm_id", "partition", "workload"], sort=True):  # no attrs per group
        iv = list(zip(g["start_ns"].astype("int64"), g["end_ns"].astype("int64")))
        busy = _union_length(iv)
        rows.append({"sm_id": int(cast(int, sm)), "partition": part, "workload": wl, "blocks": len(iv),
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
