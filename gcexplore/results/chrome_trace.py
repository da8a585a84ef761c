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
        if isinstance(dtype, np.dtype) and dtype.kind == "O":  # floats among other values: infinities too
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


def _slices(pids, tids, names, ts, dur, cat, args) -> list[dict]:
    """One complete ("X") event per row; ``pids`` one process id or one per row."""
    pids = [pids] * len(names) if isinstance(pids, int) else np.asarray(pids).tolist()
    return [{"ph": "X", "pid": p, "tid": t, "name": n, "ts": a, "dur": d, "cat": c, "args": r}
            for p, t, n, a, d, c, r in zip(pids, tids, names, _plain(pd.Series(ts)), _plain(pd.Series(dur)), cat, args)]


def occupancy_events(df: pd.DataFrame, reps: int | None = None) -> list[dict]:
    """Perfetto events of an occupancy result: one track per SM, one slice per block (``reps`` unused)."""
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


def _codes(*columns) -> np.ndarray:
    """A group number per row for the combination of ``columns``, numbered in order of first appearance."""
    return pd.DataFrame({i: c for i, c in enumerate(columns)}).groupby(
        list(range(len(columns))), sort=False, dropna=False).ngroup().to_numpy()


def _reps(pg: np.ndarray, rep: pd.Series, span: pd.Series,
          reps: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: kept (among the first ``reps`` repetitions of its process, in order of
    appearance), its repetition's rank, and its time offset: repetitions laid end to end,
    each after the previous one's largest ``span`` plus 10%."""
    pair = _codes(pg, rep.to_numpy())
    first = np.unique(pair, return_index=True)[1]
    pair_pg = pg[first]
    rank = pd.Series(pair_pg).groupby(pair_pg).cumcount().to_numpy()
    step = pd.Series(span.to_numpy(float)).groupby(pair).max().to_numpy() * 1.1 + 0.01
    offset = np.zeros(len(first))
    for g in np.unique(pair_pg):  # a running sum per process, in repetition order (a handful of processes)
        at = np.flatnonzero(pair_pg == g)
        offset[at[1:]] = np.cumsum(step[at[:-1]])
    keep = np.ones(len(pg), bool) if reps is None else rank[pair] < reps
    return keep, rank[pair], offset[pair]


def _processes(df: pd.DataFrame, name) -> tuple[np.ndarray, list]:
    """A process number per row (one per layout and mode, in order of appearance) and each process's
    (pid, name) for :func:`_process`."""
    pg = _codes(df["layout"].to_numpy(), df["mode"].to_numpy())
    first = np.unique(pg, return_index=True)[1]
    return pg, [(i + 1, name(df["layout"].iloc[r], df["mode"].iloc[r])) for i, r in enumerate(first)]


def _emit(pg: np.ndarray, procs: list, threads: dict, slices: list[dict]) -> list[dict]:
    """Each process's metadata, its thread names, then its slices (``slices`` sorted by process)."""
    events, bounds = [], np.searchsorted(pg, np.arange(len(procs) + 1))
    for i, (pid, name) in enumerate(procs):
        events += _process(pid, name)
        events += [_meta("thread_name", pid, label, tid) for tid, label in threads.get(i, [])]
        events += slices[bounds[i]:bounds[i + 1]]
    return events


def overlap_events(df: pd.DataFrame, reps: int | None) -> list[dict]:
    """Perfetto events of an overlap or sweep result's first ``reps`` repetitions per mode."""
    """One process per layout and mode, one track per partition; plain streams of the whole
    device run at once, so in "streams" mode each workload gets its own track."""
    pg, procs = _processes(df, lambda layout, mode: f"{layout} {mode}")
    part = df["partition"].astype(str)
    key = np.where(df["mode"].to_numpy() == "streams", (part + ": " + df["workload"].astype(str)).to_numpy(),
                   part.to_numpy())
    span = df["makespan_ms"] if "makespan_ms" in df else df["start_ms"] + df["duration_ms"]
    keep, rank, offset = _reps(pg, df["rep"], span, reps)
    track = _codes(pg, key)
    first = np.unique(track, return_index=True)[1]
    tid_of = pd.Series(pg[first]).groupby(pg[first]).cumcount().to_numpy() + 1  # per process, in order of appearance
    threads: dict = {}
    for t, r in enumerate(first):
        threads.setdefault(int(pg[r]), []).append((int(tid_of[t]), key[r]))
    pos = np.lexsort((rank, pg))
    pos = pos[keep[pos]]
    g = df.iloc[pos]
    dur = g["duration_ms"].to_numpy(float)
    args = [{"rep": r, "sm_count": k, "duration_ms": d}
            for r, k, d in zip(g["rep"].astype(int).tolist(), g["sm_count"].astype(int).tolist(), dur.tolist())]
    for col in ("throughput_tflops", "bandwidth_gbs"):
        if col in g and g[col].dtype.kind == "f":
            for a, v in zip(args, g[col].tolist()):
                if math.isfinite(v):
                    a[col] = v
    slices = _slices(pg[pos] + 1, tid_of[track[pos]].tolist(), g["workload"].astype(str).tolist(),
                     (offset[pos] + g["start_ms"].to_numpy(float)) * 1e3, dur * 1e3, df["mode"].to_numpy()[pos], args)
    return _emit(pg[pos], procs, threads, slices)


def kernel_events(df: pd.DataFrame, reps: int | None) -> list[dict]:
    """Perfetto events of a kernel trace: one track per partition and stream, one slice per kernel."""
    """A kernel trace: one process per layout and mode, one track per partition and stream."""
    pg, procs = _processes(df, lambda layout, mode: f"{layout} {mode}".strip())
    part, stream = df["partition"].astype(str).to_numpy(), df["stream_id"].astype(int).to_numpy()
    threads, base = {}, {}
    tracks = pd.DataFrame({"g": pg, "p": part, "s": stream}).drop_duplicates()
    for g, t in tracks.groupby("g", sort=True):
        ordered = sorted(zip(t["p"], t["s"].tolist()), key=lambda k: (partition_key(k[0]), k[1]))
        for i, (p, st) in enumerate(ordered):
            base[(g, p, st)] = i * 8 + 1
        threads[int(g)] = [(i * 8 + 1, f"{p} · stream {st}") for i, (p, st) in enumerate(ordered)]
    keep, rank, offset = _reps(pg, df["rep"], df["end_ms"], reps)
    track = _codes(pg, df["rep"].to_numpy(), part, stream)  # a track within one repetition
    # Rows go out by process, repetition, track (in order of appearance), then as they were.
    pos = np.lexsort((track, rank, pg))
    pos = pos[keep[pos]]
    g = df.iloc[pos]
    s, e = g["start_ms"].to_numpy(float), g["end_ms"].to_numpy(float)
    lane = lanes(s, e, track[pos])
    tid = [base[k] + ln for k, ln in zip(zip(pg[pos].tolist(), part[pos], stream[pos].tolist()), lane.tolist())]
    cols = [c for c in _KERNEL_ARGS if c in g.columns]
    args = [dict(zip(cols, vals)) for vals in zip(*(_plain(g[c]) for c in cols))] if cols else [{}] * len(g)
    cat = g["activity"].astype(str).tolist() if "activity" in g else ["kernel"] * len(g)
    slices = _slices(pg[pos] + 1, tid, g["name"].astype(str).tolist(), (offset[pos] + s) * 1e3,
                     np.maximum(e - s, 1e-6) * 1e3, cat, args)
    return _emit(pg[pos], procs, threads, slices)


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
    from .files import as_path, atomic_write, check_target
    from .io import is_sidecar, plain_attrs, without_attrs
    from .run import require_one_run
    from .validate import check_result

    if reps is not None:
        reps = as_count("reps", reps)
    other = _scalar_attrs(plain_attrs(df.attrs)) if isinstance(df, pd.DataFrame) else {}  # before pandas copies them
    from . import kinds as _kinds

    exportable = tuple(k.name for k in _kinds.kinds() if k.export is not None and k.like is None)
    kind = check_result(df, exportable, "to_chrome_trace")
    require_one_run(df, "to_chrome_trace")  # one timeline: two runs' repetitions would interleave
    path = as_path(path, "to_chrome_trace")
    check_target(path, "to_chrome_trace")
    if path.suffix.lower() == ".json" and path.with_suffix(".csv").exists() and is_sidecar(path):
        raise ValueError(f"{str(path)!r} is the metadata sidecar of {str(path.with_suffix('.csv'))!r}; "
                         "writing a trace there would orphan that result — choose another name")
    with without_attrs(df):
        export = _kinds.get(kind).export
        assert export is not None  # kind is one of exportable
        events = _kinds.resolve(export)(df, reps)
    path.parent.mkdir(parents=True, exist_ok=True)
    trace = {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}
    text = json.dumps(trace, allow_nan=False)  # strict JSON: Perfetto refuses NaN
    atomic_write(path, lambda tmp: Path(tmp).write_text(text))
    return path
