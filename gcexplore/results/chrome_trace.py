"""Timelines for Perfetto (ui.perfetto.dev) and ``chrome://tracing``: :func:`to_chrome_trace`.

One process per partition (occupancy) or per layout and mode (overlap results and kernel
traces), one track per partition (and stream, for a kernel trace). Every event is built
from whole columns at once (offsets, lanes and arguments per column, not per row), so
a trace of hundreds of thousands of kernels exports in seconds.
"""

from __future__ import annotations

import heapq
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..schema import partition_key, sorted_partitions

__all__ = ["to_chrome_trace"]

_KERNEL_ARGS = ("workload", "rep", "launch", "sm_count", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
                "block_z", "cluster_x", "cluster_y", "cluster_z", "registers_per_thread", "static_shared_bytes",
                "dynamic_shared_bytes", "max_active_clusters", "bytes", "graph_id", "context_id", "correlation_id")


def lanes(starts: np.ndarray, ends: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
    """Greedy lane per interval so intervals in one lane (of one group) never overlap: in
    (start, end) order, each takes the lowest lane whose last interval ended by its start."""
    n = len(starts)
    out = np.zeros(n, dtype=np.int64)
    if n == 0:
        return out
    g = np.zeros(n, dtype=np.int64) if groups is None else np.asarray(groups)
    order = np.lexsort((ends, starts, g))
    s, e, gs = starts[order], ends[order], g[order]
    new = np.r_[True, gs[1:] != gs[:-1]]
    # The common case, one lane: no interval starts before every earlier one in its group ended.
    prev_end = pd.Series(e).groupby(np.cumsum(new)).cummax().shift(1).to_numpy()
    clash = ~new & ~(prev_end <= s)
    if not clash.any():
        return out
    lane = np.zeros(n, dtype=np.int64)
    first = np.flatnonzero(new)
    bounds = zip(first, np.r_[first[1:], n])
    for (i, j), clashes in zip(bounds, np.add.reduceat(clash, first)):
        if not clashes:
            continue
        busy: list[tuple[float, int]] = []  # (end, lane) of lanes in use; free lanes by index
        free: list[int] = []
        count = 0
        for k in range(i, j):
            while busy and busy[0][0] <= s[k]:
                heapq.heappush(free, heapq.heappop(busy)[1])
            if free:
                lane[k] = heapq.heappop(free)
            else:
                lane[k], count = count, count + 1
            heapq.heappush(busy, (e[k], int(lane[k])))
    out[order] = lane
    return out


def _plain(values: pd.Series) -> list:
    """Column values as JSON-ready Python values: NaN, infinities and NA as None."""
    dtype = values.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iub":
        return values.tolist()
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        missing = ~np.isfinite(values.to_numpy())
    else:
        missing = values.isna().to_numpy(dtype=bool)
        if dtype == object:  # floats among other values: infinities too
            missing |= np.array([isinstance(v, float) and not math.isfinite(v) for v in values], dtype=bool)
    return values.astype(object).where(~missing, None).tolist()


def _meta(kind: str, pid: int, name: str, tid: int | None = None) -> dict:
    ev = {"ph": "M", "pid": pid, "name": kind, "args": {"name": name}}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _process(pid: int, name: str) -> list[dict]:
    return [_meta("process_name", pid, name),
            {"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": pid}}]


def _slices(pid, tids, names, ts, dur, cat, args) -> list[dict]:
    return [{"ph": "X", "pid": pid, "tid": t, "name": n, "ts": a, "dur": d, "cat": c, "args": r}
            for t, n, a, d, c, r in zip(tids, names, _plain(pd.Series(ts)), _plain(pd.Series(dur)), cat, args)]


def _occupancy_events(df: pd.DataFrame) -> list[dict]:
    events = []
    for pid, part in enumerate(sorted_partitions(df["partition"]), start=1):
        g = df[df["partition"] == part]
        events += _process(pid, f"partition {part} ({g['sm_id'].nunique()} SMs)")
        g = g.iloc[np.argsort(g["sm_id"].to_numpy(), kind="stable")]  # by SM, rows in order within one
        sm = g["sm_id"].to_numpy().astype(np.int64)
        s, e = g["start_ns"].to_numpy(float) / 1e3, g["end_ns"].to_numpy(float) / 1e3
        lane = lanes(s, e, sm)
        tid = sm * 64 + lane
        wl = g["workload"].astype(str).tolist()
        args = [{"sm_id": a, "block": b, "workload": w} for a, b, w in zip(sm.tolist(), g["block"].astype(int), wl)]
        xs = _slices(pid, tid.tolist(), wl, s, np.maximum(e - s, 0.001), ["block"] * len(g), args)
        _, first = np.unique(tid, return_index=True)
        named = {int(i): _meta("thread_name", pid, f"SM {sm[i]}" + (f" slot {lane[i]}" if lane[i] else ""),
                               int(tid[i])) for i in first}
        for i, x in enumerate(xs):
            if i in named:
                events.append(named[i])
            events.append(x)
    return events


def _rep_offsets(g: pd.DataFrame, span: pd.Series, reps: int | None) -> tuple[np.ndarray, pd.Series]:
    """The rows of the first ``reps`` repetitions (in order of appearance) and each row's time
    offset: repetitions laid end to end, each after the previous one's ``span`` plus 10%."""
    order = list(dict.fromkeys(g["rep"]))
    if reps is not None:
        order = order[:reps]
    spans = span.groupby(g["rep"], sort=False).max().reindex(order).to_numpy(float)
    starts = np.r_[0.0, np.cumsum(spans * 1.1 + 0.01)][:-1] if len(order) else np.zeros(0)
    keep = g["rep"].isin(order).to_numpy()
    return keep, g["rep"][keep].map(dict(zip(order, starts)))


def _overlap_events(df: pd.DataFrame, reps: int | None) -> list[dict]:
    events = []
    for pid, ((layout, mode), g) in enumerate(df.groupby(["layout", "mode"], sort=False), start=1):
        events += _process(pid, f"{layout} {mode}")
        # One track per partition; plain streams of the whole device run at once, so
        # in "streams" mode each workload gets its own track.
        key = g["partition"].astype(str) + ": " + g["workload"].astype(str) if mode == "streams" \
            else g["partition"].astype(str)
        keys = list(dict.fromkeys(key))
        events += [_meta("thread_name", pid, k, tid) for tid, k in enumerate(keys, start=1)]
        span = g["makespan_ms"] if "makespan_ms" in g else g["start_ms"] + g["duration_ms"]
        keep, offset = _rep_offsets(g, span, reps)
        gk = g[keep]
        # rows of one repetition stay together, repetitions in order of appearance
        pos = np.argsort(pd.factorize(gk["rep"])[0], kind="stable")
        gk, offset = gk.iloc[pos], offset.iloc[pos]
        dur = gk["duration_ms"].to_numpy(float)
        args = [{"rep": r, "sm_count": k, "duration_ms": d}
                for r, k, d in zip(gk["rep"].astype(int).tolist(), gk["sm_count"].astype(int).tolist(), dur.tolist())]
        for col in ("throughput_tflops", "bandwidth_gbs"):
            if col in gk and gk[col].dtype.kind == "f":
                for a, v in zip(args, gk[col].tolist()):
                    if math.isfinite(v):
                        a[col] = v
        tids = key[keep].iloc[pos].map({k: i for i, k in enumerate(keys, start=1)}).tolist()
        events += _slices(pid, tids, gk["workload"].astype(str).tolist(),
                          (offset.to_numpy(float) + gk["start_ms"].to_numpy(float)) * 1e3, dur * 1e3,
                          [mode] * len(gk), args)
    return events


def _kernel_events(df: pd.DataFrame, reps: int | None) -> list[dict]:
    """A kernel trace: one process per layout and mode, one track per partition and stream."""
    events = []
    for pid, ((layout, mode), g) in enumerate(df.groupby(["layout", "mode"], sort=False), start=1):
        events += _process(pid, f"{layout} {mode}".strip())
        part, stream = g["partition"].astype(str), g["stream_id"].astype(int)
        tracks = sorted(set(zip(part, stream)), key=lambda t: (partition_key(t[0]), t[1]))
        tids = {key: i * 8 + 1 for i, key in enumerate(tracks)}
        events += [_meta("thread_name", pid, f"{p} · stream {s}", tids[(p, s)]) for p, s in tracks]
        keep, offset = _rep_offsets(g, g["end_ms"], reps)
        gk, part, stream = g[keep], part[keep], stream[keep]
        # Rows go out by repetition, then track (in order of appearance), then as they were.
        rep_code = pd.factorize(gk["rep"])[0]
        track_code = pd.factorize(pd.MultiIndex.from_arrays([rep_code, part, stream]))[0]
        pos = np.lexsort((track_code, rep_code))
        gk, offset, part, stream = gk.iloc[pos], offset.iloc[pos], part.iloc[pos], stream.iloc[pos]
        s, e = gk["start_ms"].to_numpy(float), gk["end_ms"].to_numpy(float)
        lane = lanes(s, e, track_code[pos])
        tid = [tids[k] + int(ln) for k, ln in zip(zip(part, stream), lane.tolist())]
        cols = [c for c in _KERNEL_ARGS if c in gk.columns]
        args = [dict(zip(cols, vals)) for vals in zip(*(_plain(gk[c]) for c in cols))] if cols else [{}] * len(gk)
        cat = gk["activity"].astype(str).tolist() if "activity" in gk else ["kernel"] * len(gk)
        events += _slices(pid, tid, gk["name"].astype(str).tolist(), (offset.to_numpy(float) + s) * 1e3,
                          np.maximum(e - s, 1e-6) * 1e3, cat, args)
    return events


def _scalar_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    """The plain scalar entries of ``attrs`` (already JSON values), for ``otherData``."""
    return {k: v for k, v in attrs.items()
            if isinstance(v, (str, int, bool)) or (isinstance(v, float) and math.isfinite(v))}


def to_chrome_trace(df: pd.DataFrame, path, *, reps: int | None = 5) -> Path:
    """Write a timeline of a result for Perfetto (ui.perfetto.dev) or ``chrome://tracing``.

    Parameters
    ----------
    df : pandas.DataFrame
        An :func:`gcexplore.occupancy` result (one process per partition, one track per
        SM, one slice per block; blocks resident at the same time on one SM go to
        extra "slot" tracks) or a :func:`gcexplore.profile_overlap` /
        :func:`gcexplore.sweep` result (one process per layout and mode, one track per
        partition, repetitions laid end to end), or a kernel trace (``trace=True`` or
        :func:`gcexplore.kernel_trace`: one process per layout and mode, one track per
        partition and stream, one slice per kernel with its grid, block, cluster,
        registers and shared memory as arguments).
    path : str or path
        Output ``.json`` file.
    reps : int or None, default 5
        Overlap results: repetitions per mode to draw (None: all).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ValueError
        A DataFrame of another kind, ``reps`` below 1, or a ``path`` that is the
        metadata sidecar of a saved CSV result.
    """
    from .._checks import as_count
    from .io import as_path, atomic_write, check_target, is_sidecar, plain_attrs
    from .validate import check_result

    if reps is not None:
        reps = as_count("reps", reps)
    other = _scalar_attrs(plain_attrs(df.attrs)) if isinstance(df, pd.DataFrame) else {}  # before pandas copies them
    kind = check_result(df, ("occupancy", "overlap", "trace"), "to_chrome_trace")
    path = as_path(path, "to_chrome_trace")
    check_target(path, "to_chrome_trace")
    if path.suffix.lower() == ".json" and path.with_suffix(".csv").exists() and is_sidecar(path):
        raise ValueError(f"{str(path)!r} is the metadata sidecar of {str(path.with_suffix('.csv'))!r}; "
                         "writing a trace there would orphan that result — choose another name")
    events = {"occupancy": lambda: _occupancy_events(df), "trace": lambda: _kernel_events(df, reps)}.get(
        kind, lambda: _overlap_events(df, reps))()
    path.parent.mkdir(parents=True, exist_ok=True)
    trace = {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}
    text = json.dumps(trace, allow_nan=False)  # strict JSON: Perfetto refuses NaN
    atomic_write(path, lambda tmp: Path(tmp).write_text(text))
    return path
