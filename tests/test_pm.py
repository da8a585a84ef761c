"""PM sampling on the CPU: samples to rows, the summary and its plot from synthetic samples;
request checks; a child process that crashes, fails or hangs becomes one clear error.

Nothing here is a measurement: the samples and the trace are made up.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pandas as pd
import pytest

import gcexplore
from gcexplore import pm, results
from gcexplore.pm_plot import plot_dram_timeline
from gcexplore.schema import columns, frame, kind_of
from gcexplore.validate import ResultError

T0 = {("alone", 0, "a"): 1_000_000_000, ("alone", 0, "b"): 1_010_000_000, ("concurrent", 0, None): 1_020_000_000}
STEP = 20_000  # ns between samples


def _trace():
    """Workload a on p0 (24 SMs) and b on the remainder (108), alone then together, 1 ms kernels."""
    rows, origins = [], []
    for (mode, rep, only), t0 in T0.items():
        names = [only] if only else ["a", "b"]
        origins.append({"layout": "24+108", "mode": mode, "rep": rep, "origin_ns": t0, "workloads": names})
        for n in names:
            rows.append({**dict.fromkeys(columns("trace"), 0), "layout": "24+108", "mode": mode, "rep": rep, "workload": n, "launch": 0,
                         "partition": "p0" if n == "a" else "remainder", "sm_count": 24 if n == "a" else 108,
                         "stream_id": 7, "activity": "kernel", "name": "k", "start_ms": 0.1, "end_ms": 1.1,
                         "correlation_id": len(rows) + 1})
    return frame(rows, "trace", {"device_name": "Test GPU", "run_id": "r1", "rep_origins": origins})


def _samples():
    """Every 20 us from 0.5 ms before the first origin to 3 ms after the last: DRAM 80% while a kernel
    runs, 0 otherwise; SM cycles 24/132 or 108/132 of the elapsed ones (both: all)."""
    starts = np.arange(T0[("alone", 0, "a")] - 500_000, T0[("concurrent", 0, None)] + 3_000_000, STEP)
    ends = starts + STEP
    vals = []
    for s in starts:
        share, dram = 0.0, 0.0
        for (mode, _, only), t0 in T0.items():
            if t0 + 100_000 <= s and s + STEP <= t0 + 1_100_000:
                share = {"a": 24 / 132, "b": 108 / 132, None: 1.0}[only]
                dram = {"a": 70.0, "b": 80.0, None: 85.0}[only]
        vals.append([dram, share * 39_600.0, 39_600.0])
    starts[0] = 0  # CUPTI's first sample has no start
    return starts, ends, np.array(vals), list(pm.METRIC_SETS["dram_sm"])


def test_samples_land_in_their_repetition_on_the_trace_time_axis():
    tr = _trace()
    s = pm.samples_frame(*_samples(), tr)
    assert kind_of(s) == "pm" and list(s.columns) == columns("pm")
    groups = s.groupby(["mode", "workloads"]).size()
    # midpoints from two intervals before the origin to two after the last kernel end (1.1 ms):
    # -30, -10, ..., 1130 us -> 59 samples
    assert set(groups.index) == {("alone", "a"), ("alone", "b"), ("concurrent", "a+b")}
    assert (groups == 59).all()
    a = s[s["workloads"] == "a"]
    assert a["start_ms"].min() == pytest.approx(-0.04) and a["end_ms"].max() == pytest.approx(1.14)
    inside = a[(a["start_ms"] >= 0.1) & (a["end_ms"] <= 1.1)]
    assert (inside["dram_pct"] == 70).all() and inside["sm_active_pct"].to_numpy() == pytest.approx(100 * 24 / 132)
    assert (a[a["end_ms"] <= 0.1]["dram_pct"] == 0).all()
    assert s["dram_read_gbs"].isna().all()  # not in this metric set
    assert s.attrs["samples_kept"] == 3 * 59 and s.attrs["samples_total"] == len(_samples()[0]) - 1


def test_read_and_write_bytes_become_gb_per_second():
    tr = _trace()
    starts, ends, _, _ = _samples()
    vals = np.tile([50.0, 1.5e12, 0.5e12], (len(starts), 1))
    s = pm.samples_frame(starts, ends, vals, list(pm.METRIC_SETS["dram_bytes"]), tr)
    assert s["dram_read_gbs"].to_numpy() == pytest.approx(1500.0)
    assert s["dram_write_gbs"].to_numpy() == pytest.approx(500.0)
    assert s["sm_active_pct"].isna().all()


def test_summary_means_only_the_samples_inside_the_kernels():
    tr = _trace()
    summ = pm.dram_summary(pm.samples_frame(*_samples(), tr), tr).set_index(["mode", "workloads"])
    assert summ.loc[("alone", "a"), "dram_pct"] == pytest.approx(70.0)
    assert summ.loc[("alone", "b"), "sm_active_pct"] == pytest.approx(100 * 108 / 132)
    assert summ.loc[("concurrent", "a+b"), "dram_pct"] == pytest.approx(85.0)
    assert summ.loc[("concurrent", "a+b"), "kernels_ms"] == pytest.approx(1.0)
    assert (summ["samples"] == 50).all()


def test_plot_states_the_means_it_draws(tmp_path):
    tr = _trace()
    s = pm.samples_frame(*_samples(), tr)
    s.attrs["interval_us"] = 20.0
    fig = plot_dram_timeline(s, tr)
    titles = [ax.get_title() for ax in fig.axes]
    assert any("a: DRAM 70% of peak, SMs active 18%" in t for t in titles)
    assert any("a+b: DRAM 85% of peak, SMs active 100%" in t for t in titles)
    sup = fig._suptitle.get_text()
    assert "alone 70% + 80% of DRAM peak, together 85%, so they shared the bandwidth" in sup
    gids = {a.get_gid() for ax in fig.axes for a in [*ax.lines, *ax.collections]}
    assert {"dram:concurrent:a+b", "sm_active:alone:a", "kernel:a", "kernel:b"} <= gids
    fig.savefig(tmp_path / "pm.png")
    with pytest.raises(ValueError, match="no repetition 5"):
        plot_dram_timeline(s, tr, rep=5)
    with pytest.raises(ResultError, match="pm result"):
        plot_dram_timeline(tr, tr)


def test_samples_round_trip_through_save_and_load(tmp_path):
    s = pm.samples_frame(*_samples(), _trace())
    for ext in ("parquet", "csv"):
        back = results.load(results.save(s, tmp_path / f"s.{ext}"))
        assert kind_of(back) == "pm"
        pd.testing.assert_frame_equal(back.reset_index(drop=True), s.reset_index(drop=True), check_dtype=False)


# ----------------------------------------------------------------------------- requests


@pytest.mark.parametrize("kwargs, error, text", [
    ({"workloads": {"x": lambda stream: None}}, TypeError, "builds them there: give built-in names"),
    ({"workloads": ["memory", "nope"]}, ValueError, "unknown built-in workload 'nope'"),
    ({"workloads": "pkg.mod:"}, ValueError, "'module:function'"),
    ({"metrics": "sm__throughput.avg"}, ValueError, r"verified metric set \('dram_sm', 'dram_bytes'\)"),
    ({"interval_us": 2}, ValueError, r"interval_us must be a number of microseconds in \[10, 10000\]"),
    ({"interval_us": float("nan")}, ValueError, "interval_us"),
    ({"split": "24"}, TypeError, "split"),
    ({"modes": ["together"]}, ValueError, "valid modes are alone, concurrent"),
    ({"repeats": 0}, ValueError, "repeats"),
    ({"timeout_s": -1}, ValueError, "timeout_s"),
])
def test_bad_requests_are_refused_before_a_child_starts(monkeypatch, kwargs, error, text):
    monkeypatch.setattr(pm, "_child_command", lambda *a: pytest.fail("the child must not start"))
    args = {"workloads": ["memory", "compute"], "split": [24], **kwargs}
    with pytest.raises(error, match=text):
        gcexplore.dram_timeline(args.pop("workloads"), args.pop("split"), **args)


def _fake_child(monkeypatch, code: str):
    monkeypatch.setattr(pm, "_cupti_present", lambda: None)
    monkeypatch.setattr(pm, "_child_command", lambda spec, out: [sys.executable, "-c", code, str(spec), str(out)])


def test_a_child_that_crashes_is_an_error_message_not_the_end_of_this_process(monkeypatch):
    _fake_child(monkeypatch, "import os, signal, sys; print('decoding', file=sys.stderr, flush=True); "
                             "os.kill(os.getpid(), signal.SIGSEGV)")
    with pytest.raises(pm.PmSamplingError, match=r"died from signal SIGSEGV .*your process is unaffected.*decoding"):
        gcexplore.dram_timeline(["memory", "compute"], [24])


def test_a_child_error_comes_back_with_its_type_and_sentence(monkeypatch):
    code = ("import json, sys, pathlib; spec = json.loads(pathlib.Path(sys.argv[1]).read_text()); "
            "assert spec['split'] == [24] and spec['names'] == {'memory': 'memory', 'compute': 'compute'}; "
            "pathlib.Path(sys.argv[2], 'error.json').write_text(json.dumps({'type': 'ValueError', "
            "'message': 'split [200] asks for more SMs than device 0 has'})); sys.exit(3)")
    _fake_child(monkeypatch, code)
    with pytest.raises(ValueError, match=r"split \[200\] asks for more SMs"):
        gcexplore.dram_timeline(["memory", "compute"], [24])
    code = code.replace("ValueError", "cuptiError")
    _fake_child(monkeypatch, code)
    with pytest.raises(pm.PmSamplingError, match="child process .cuptiError: split"):
        gcexplore.dram_timeline(["memory", "compute"], [24])


def test_a_child_that_hangs_is_stopped_at_the_timeout(monkeypatch):
    _fake_child(monkeypatch, "import time; time.sleep(30)")
    with pytest.raises(pm.PmSamplingError, match="ran past timeout_s=1 s"):
        gcexplore.dram_timeline(["memory", "compute"], [24], timeout_s=1)


def test_factory_spec_reaches_the_child(monkeypatch):
    code = ("import json, sys, pathlib; spec = json.loads(pathlib.Path(sys.argv[1]).read_text()); "
            "pathlib.Path(sys.argv[2], 'error.json').write_text(json.dumps({'type': 'TypeError', "
            "'message': 'factory ' + spec['factory'] + ' metrics ' + ','.join(spec['metrics'])})); sys.exit(3)")
    _fake_child(monkeypatch, code)
    with pytest.raises(TypeError, match="factory mypkg.pairs:make metrics dram__throughput"):
        gcexplore.dram_timeline("mypkg.pairs:make", [24])
    assert json.dumps(pm.METRIC_SETS)  # plain data, passed to the child as JSON
