"""Clusters among the repetitions of one measurement (its "modes" in the statistical sense, not
the timing modes): repetitions that fall into separate clusters (pure numpy/pandas).

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

from typing import Sequence, cast

import numpy as np
import pandas as pd

from .trace import busy_time, trace_rates

__all__ = ["MODE_COLUMNS", "cluster_labels", "group_modes", "rep_mode", "sample_modes", "trace_modes"]

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
    mine = modes[modes["reps"].map(lambda reps: rep in cast(list, reps))].copy()
    others = []
    for r in mine.itertuples(index=False):
        same = (modes[keys] == pd.Series({k: getattr(r, k) for k in keys})).all(axis=1)
        rest = modes[same & (modes["cluster"] != r.cluster)]
        others.append([(int(c), float(m)) for c, m in zip(rest["count"], rest["median"])])
    mine["others"] = others
    return mine.reset_index(drop=True)
