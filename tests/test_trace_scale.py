"""Kernel traces at scale: busy_time, kernel_gaps and to_chrome_trace work on whole columns,
give what the interval definitions say on random traces, and take seconds, not minutes,
on traces of hundreds of thousands of kernels with a collector's large attrs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gcexplore.analysis import trace as busy
from gcexplore.results.chrome_trace import to_chrome_trace
from gcexplore.results.chrome_trace import lanes
from gcexplore.schema import conform

MODES = ("alone", "concurrent")


def _trace(intervals, *, origins: int = 0) -> pd.DataFrame:
    """A kernel trace from (run, rep, workload, partition, stream, start, end) tuples."""
    rows = [{"layout": "24+108", "mode": MODES[rep % 2], "rep": rep // 2, "workload": wl, "launch": i,
             "partition": part, "sm_count": 24 if part == "p0" else 108, "stream_id": stream, "activity": "kernel",
             "name": f"k{i}", "start_ms": s, "end_ms": e, "grid_x": 1, "grid_y": 1, "grid_z": 1, "block_x": 32,
             "block_y": 1, "block_z": 1, "cluster_x": 0, "cluster_y": 1, "cluster_z": 1, "registers_per_thread": 32,
             "static_shared_bytes": 0, "dynamic_shared_bytes": 0, "max_active_clusters": 0, "bytes": np.nan,
             "graph_id": 0, "context_id": 1, "correlation_id": i, "device_name": "synthetic", "run_id": run}
            for i, (run, rep, wl, part, stream, s, e) in enumerate(intervals)]
    df = pd.DataFrame(rows)
    df.attrs.update(kind="trace", device_name="synthetic", run_id="r0",
                    rep_origins=[{"layout": "24+108", "mode": "concurrent", "rep": r, "origin_ns": r,
                                  "workloads": ["a", "b"]} for r in range(origins)])
    return conform(df, "trace")


def _union(iv):
    """Reference: the union of intervals, in start order, merging touching ones."""
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


_interval = st.tuples(st.sampled_from(["r0", "r1"]), st.integers(0, 3), st.sampled_from(["a", "b"]),
                      st.sampled_from(["p0", "remainder"]), st.integers(10, 11),
                      st.integers(0, 40).map(lambda x: x / 8), st.integers(0, 16).map(lambda x: x / 8))


@settings(max_examples=150, deadline=None)
@given(st.lists(_interval, min_size=1, max_size=40))
def test_busy_time_and_gaps_follow_the_interval_union(raw):
    tr = _trace([(run, rep, wl, part, stream, s, s + d) for run, rep, wl, part, stream, s, d in raw])
    b = busy.busy_time(tr)
    gaps = busy.kernel_gaps(tr)
    groups = tr.groupby(["run_id", "layout", "mode", "rep", "workload"], sort=False)
    assert len(b) == groups.ngroups
    # each key's rows looked up once, not by masking the whole frames for every group
    key = ["run_id", "mode", "rep", "workload"]
    b_at = {k: idx[0] for k, idx in b.groupby(key, sort=False).indices.items()}
    gaps_at = gaps.groupby(key, sort=False).indices if len(gaps) else {}
    for (run, _, mode, rep, wl), g in groups:
        row = b.iloc[b_at[(run, mode, rep, wl)]]
        u = _union(list(zip(g.start_ms, g.end_ms)))
        holes = [b2[0] - a[1] for a, b2 in zip(u, u[1:])]
        assert row.kernels == len(g) and row.gaps == len(holes)
        assert row.first_start_ms == u[0][0] and row.last_end_ms == u[-1][1]
        assert row.gpu_busy_ms == pytest.approx(sum(e - s for s, e in u))
        assert row.largest_gap_ms == max(holes, default=0.0)
        assert row.partition == "+".join(p for p in ("p0", "remainder") if p in set(g.partition))
        assert row.sm_count == g.sm_count.iloc[0]
        mine = gaps.iloc[gaps_at.get((run, mode, rep, wl), [])]
        assert mine["gap_us"].tolist() == pytest.approx([h * 1e3 for h in holes])
        ends = dict(zip(g.name, g.end_ms))
        starts = dict(zip(g.name, g.start_ms))
        assert all(ends[n] == a[1] for n, a in zip(mine.before, u))  # the kernel whose end opened the gap
        assert all(starts[n] == b2[0] for n, b2 in zip(mine.after, u[1:]))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 30), st.integers(0, 10)), min_size=1, max_size=60))
def test_lanes_never_overlap_and_reuse_the_lowest_free_lane(raw):
    g = np.array([x[0] for x in raw])
    s = np.array([x[1] for x in raw], float)
    e = s + np.array([x[2] for x in raw], float)
    lane = lanes(s, e, g)
    for grp in set(g.tolist()):
        ends: list[float] = []  # the greedy rule by hand: lowest lane whose last interval ended
        for i in sorted(np.flatnonzero(g == grp), key=lambda i: (s[i], e[i], i)):
            free = [j for j, end in enumerate(ends) if end <= s[i]]
            want = free[0] if free else len(ends)
            assert lane[i] == want
            if want < len(ends):
                ends[want] = e[i]
            else:
                ends.append(e[i])


def _big(n_reps: int) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    iv = []
    for rep in range(n_reps):
        for wl, part in (("a", "p0"), ("b", "remainder")):
            t = 0.0
            for k in range(3):
                d = float(rng.uniform(0.01, 0.05))
                iv.append(("r0", rep, wl, part, 10 + k % 2, t, t + d))
                t += d * 0.6
    return _trace(iv, origins=n_reps)


@pytest.mark.slow  # among the slowest on a 2-core machine (pytest --durations, 2026-12-02)
def test_a_large_trace_is_summarised_and_exported_whole(tmp_path):
    """120,000 kernels with 20,000 repetition origins: every repetition summarised, every kernel
    exported, the attrs untouched. How fast is bench/trace_scale.py's question, not a test's."""
    tr = _big(20_000)
    attrs = dict(tr.attrs)
    b = busy.busy_time(tr)
    path = to_chrome_trace(tr.iloc[:60_000], tmp_path / "t.json", reps=None)
    assert len(b) == 40_000 and tr.attrs == attrs  # attrs set aside during the work, then back
    assert b.attrs["rep_origins"] == attrs["rep_origins"]
    xs = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == 60_000


def test_chrome_trace_of_a_kernel_trace_keeps_each_track_nested(tmp_path):
    tr = _big(30)
    events = json.loads(to_chrome_trace(tr, tmp_path / "t.json", reps=None).read_text())["traceEvents"]
    xs = [e for e in events if e["ph"] == "X"]
    assert len(xs) == len(tr)
    named = {(e["pid"], e["tid"]) for e in events if e["name"] == "thread_name"}
    by_track: dict = {}
    for e in xs:
        by_track.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for key, iv in by_track.items():
        iv.sort()
        assert all(a[1] <= b[0] + 1e-9 for a, b in zip(iv, iv[1:])), key  # slices in one track never overlap
        assert (key[0], key[1] - key[1] % 8 + 1) in named or key in named
