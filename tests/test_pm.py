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
from gcexplore.experiments import pm
from gcexplore.results import io as results
from gcexplore.views.pm import plot_dram_timeline
from gcexplore.results.kinds import kind_of
from gcexplore.schema import columns, frame
from gcexplore.results.validate import ResultError

T0 = {"alone": 1_000_000_000, "concurrent": 1_010_000_000}
STEP = 20_000  # ns between samples
# (mode, workload) -> kernel start and end, ms after the repetition's origin: alone runs the
# two one after the other in one repetition, concurrent runs them side by side
KERNELS = {("alone", "a"): (0.1, 1.1), ("alone", "b"): (1.2, 2.2),
           ("concurrent", "a"): (0.1, 1.1), ("concurrent", "b"): (0.1, 1.6)}
DRAM = {"a": 70.0, "b": 80.0, "a+b": 85.0}
SHARE = {"a": 24 / 132, "b": 108 / 132, "a+b": 1.0}


def _trace():
    """Workload a on p0 (24 SMs) and b on the remainder (108 SMs), alone and together."""
    rows = []
    group = {m: i for i, m in enumerate(T0)}  # one repetition group per mode, as the collector numbers them
    for (mode, n), (a, b) in KERNELS.items():
        # every column but the identity (device_name, run_id), which frame() takes from the attrs
        rows.append({**dict.fromkeys(columns("trace")[:-2], 0), "layout": "24+108", "mode": mode, "rep": 0,
                     "group": group[mode], "workload": n, "partition": "p0" if n == "a" else "remainder", "sm_count": 24 if n == "a" else 108,
                     "stream_id": 7, "activity": "kernel", "name": "k", "start_ms": a, "end_ms": b,
                     "correlation_id": len(rows) + 1})
    origins = [{"layout": "24+108", "mode": m, "rep": 0, "group": group[m], "origin_ns": t0, "workloads": ["a", "b"]}
               for m, t0 in T0.items()]
    return frame(rows, "trace", {"device_name": "Test GPU", "run_id": "r1", "rep_origins": origins})


def _samples():
    """Every 20 us from 0.5 ms before the first origin to 3 ms after the last: what runs decides
    DRAM (% of peak) and SM cycles (the running partitions' share of the elapsed ones)."""
    starts = np.arange(T0["alone"] - 500_000, T0["concurrent"] + 3_000_000, STEP)
    ends = starts + STEP
    vals = []
    for s in starts:
        running = [n for (mode, n), (a, b) in KERNELS.items()
                   if T0[mode] + a * 1e6 <= s and s + STEP <= T0[mode] + b * 1e6]
        key = "+".join(sorted(running))
        vals.append([DRAM.get(key, 0.0), SHARE.get(key, 0.0) * 39_600.0, 39_600.0])
    starts[0] = 0  # CUPTI's first sample has no start
    return starts, ends, np.array(vals), list(pm.METRIC_SETS["dram_sm"])


def test_samples_land_in_their_repetition_on_the_trace_time_axis():
    tr = _trace()
    s = pm.samples_frame(*_samples(), tr)
    assert kind_of(s) == "pm" and list(s.columns) == columns("pm")
    # midpoints from two intervals before the origin to two after the last kernel end:
    # alone -30 ... 2230 us (114 samples), concurrent -30 ... 1630 us (84)
    assert s.groupby(["mode", "workloads"]).size().to_dict() == {("alone", "a+b"): 114, ("concurrent", "a+b"): 84}
    al = s[s["mode"] == "alone"]
    assert al["start_ms"].min() == pytest.approx(-0.04) and al["end_ms"].max() == pytest.approx(2.24)
    a = al[(al["start_ms"] >= 0.1) & (al["end_ms"] <= 1.1)]
    assert (a["dram_pct"] == 70).all() and a["sm_active_pct"].to_numpy() == pytest.approx(100 * 24 / 132)
    assert (al[al["end_ms"] <= 0.1]["dram_pct"] == 0).all()
    assert s["dram_read_gbs"].isna().all()  # not in this metric set
    assert s.attrs["samples_kept"] == 114 + 84 and s.attrs["samples_total"] == len(_samples()[0]) - 1


def test_read_and_write_bytes_become_gb_per_second():
    tr = _trace()
    starts, ends, _, _ = _samples()
    vals = np.tile([50.0, 1.5e12, 0.5e12], (len(starts), 1))
    s = pm.samples_frame(starts, ends, vals, list(pm.METRIC_SETS["dram_bytes"]), tr)
    assert s["dram_read_gbs"].to_numpy() == pytest.approx(1500.0)
    assert s["dram_write_gbs"].to_numpy() == pytest.approx(500.0)
    assert s["sm_active_pct"].isna().all()


def test_summary_means_each_workload_and_all_together_over_the_samples_inside():
    tr = _trace()
    summ = gcexplore.dram_summary(pm.samples_frame(*_samples(), tr), tr)
    assert list(summ.columns) == gcexplore.analysis.pm.SUMMARY_COLUMNS
    by = summ.set_index(["mode", "workload"])
    assert by.loc[("alone", "a"), "dram_pct"] == pytest.approx(70.0)
    assert by.loc[("alone", "b"), "sm_active_pct"] == pytest.approx(100 * 108 / 132)
    assert ("alone", "a+b") not in by.index  # one after the other: never together
    assert by.loc[("concurrent", "a+b"), "dram_pct"] == pytest.approx(85.0)
    assert (by.loc[("concurrent", "a+b"), ["from_ms", "to_ms"]].to_list()) == pytest.approx([0.1, 1.1])
    assert by.loc[("concurrent", "b"), "dram_pct"] == pytest.approx((50 * 85 + 25 * 80) / 75)
    assert by["samples"].to_dict() == {("alone", "a"): 50, ("alone", "b"): 50, ("concurrent", "a"): 50,
                                       ("concurrent", "b"): 75, ("concurrent", "a+b"): 50}


def test_plot_states_the_means_it_draws(tmp_path):
    tr = _trace()
    s = pm.samples_frame(*_samples(), tr)
    s.attrs["interval_us"] = 20.0
    fig = plot_dram_timeline(s, tr)
    titles = [" ".join(ax.get_title().split()) for ax in fig.axes]
    assert any("while a ran: device DRAM 70% of peak, SMs active 18%; while b ran: device DRAM 80% of peak, "
               "SMs active 82%" in t for t in titles)  # device-wide means while each ran
    assert any("while a and b ran together: device DRAM 85% of peak, SMs active 100%" in t for t in titles)
    sup = " ".join(fig._suptitle.get_text().split())
    # together set beside the larger alone mean, never "less than the sum" (true of any two loads over 50%)
    assert "alone: a 70% and b 80% of peak; while all ran together 85%, no more than b alone (80%)" in sup
    assert "less than the sum" not in sup and "PM sampling every 20.0 µs" in sup
    gids = {a.get_gid() for ax in fig.axes for a in [*ax.lines, *ax.collections]}
    assert {"dram:concurrent:a+b", "sm_active:alone:a+b", "kernel:a", "kernel:b"} <= gids
    fig.savefig(tmp_path / "pm.png")
    with pytest.raises(ValueError, match="no repetition 5"):
        plot_dram_timeline(s, tr, rep=5)
    with pytest.raises(ResultError, match="pm result"):
        plot_dram_timeline(tr, tr)


def _result_rounds():
    """An overlap result's repetitions: alone rep 0 in round 0, concurrent rep 0 in round 1."""
    return pd.DataFrame({"layout": ["24+108"] * 4, "mode": ["alone", "alone", "concurrent", "concurrent"],
                         "rep": [0] * 4, "round": [0, 0, 1, 1], "workload": ["a", "b", "a", "b"]})


def test_samples_carry_the_round_of_their_repetition():
    rounds = pm.rep_rounds(_result_rounds())
    assert rounds == {("24+108", "alone", 0): 0, ("24+108", "concurrent", 0): 1}
    s = pm.samples_frame(*_samples(), _trace(), rounds=rounds)
    assert s.groupby("mode")["round"].unique().map(list).to_dict() == {"alone": [0], "concurrent": [1]}
    # a repetition the result does not name (or no result) is round 0, as results from before rounds load
    assert set(pm.samples_frame(*_samples(), _trace())["round"]) == {0}
    assert pm.rep_rounds(_result_rounds().drop(columns="round")) == {}


def test_samples_round_trip_through_save_and_load(tmp_path):
    s = pm.samples_frame(*_samples(), _trace(), rounds=pm.rep_rounds(_result_rounds()))
    assert sorted(set(s["round"])) == [0, 1]
    for ext in ("parquet", "csv"):
        back = results.load(results.save(s, tmp_path / f"s.{ext}"))
        assert kind_of(back) == "pm"
        pd.testing.assert_frame_equal(back.reset_index(drop=True), s.reset_index(drop=True), check_dtype=False)
    old = s.drop(columns="round")  # saved before PM rows carried their round: all of it one round
    back = results.load(results.save(old, tmp_path / "old.parquet"))
    assert sorted(back.columns) == sorted(columns("pm")) and set(back["round"]) == {0}


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


def test_the_guide_states_what_the_recorded_run_shows():
    from pathlib import Path

    if not {"pm", "pm_trace"} <= set(results.recorded_names()):
        pytest.skip("no recorded PM sampling run in gcexplore/data")
    s, tr = gcexplore.load_recorded("pm"), gcexplore.load_recorded("pm_trace")
    summ = gcexplore.dram_summary(s, tr)
    summ["ms"] = summ["to_ms"] - summ["from_ms"]
    med = summ.groupby(["mode", "workload"])[["dram_pct", "sm_active_pct", "ms"]].median()
    a24, a108, both = med.loc[("alone", "m24")], med.loc[("alone", "m108")], med.loc[("concurrent", "m108+m24")]
    guide = " ".join((Path(__file__).resolve().parents[1] / "docs" / "guide.md").read_text().split())
    assert (f"alone on 24 SMs drew {a24.dram_pct:.0f}% of DRAM's peak with {a24.sm_active_pct:.0f}% of the SMs "
            f"active; alone on the 108-SM remainder, {a108.dram_pct:.0f}%; both together, {both.dram_pct:.0f}%, "
            f"so the 24-SM kernel took {med.loc[('concurrent', 'm24'), 'ms']:.1f} ms instead of {a24.ms:.1f} ms") in guide


def _child_that_writes(monkeypatch, tmp_path, populated: int):
    """A stand-in child that writes what a real one does, from the synthetic trace and samples."""
    src = tmp_path / "src"
    src.mkdir()
    tr = _trace()
    results.save(tr, src / "trace.parquet")
    results.save(tr, src / "result.parquet")
    starts, ends, values, metrics = _samples()
    np.savez(src / "samples.npz", start=starts, end=ends, values=values, metrics=np.array(metrics),
             populated=np.array(populated))
    _fake_child(monkeypatch, f"import glob, shutil, sys\nfor f in glob.glob({str(src)!r} + '/*'):\n"
                             "    shutil.copy(f, sys.argv[2])")


def test_what_the_child_writes_comes_back_as_samples_result_and_trace(monkeypatch, tmp_path, recwarn):
    _child_that_writes(monkeypatch, tmp_path, populated=300)
    t = gcexplore.dram_timeline(["memory", "compute"], [24])
    assert isinstance(t, pm.DramTimeline) and kind_of(t.samples) == "pm" and kind_of(t.trace) == "trace"
    assert len(t.samples) == 114 + 84 and t.samples.attrs["metric_set"] == "dram_sm"
    assert t.samples.attrs["interval_us"] == 20 and not t.samples.attrs["recorded"]
    assert not [w for w in recwarn if "PM sampling kept" in str(w.message)]


def test_samples_past_the_decode_capacity_are_reported(monkeypatch, tmp_path):
    _child_that_writes(monkeypatch, tmp_path, populated=pm.MAX_SAMPLES)
    with pytest.warns(UserWarning, match=r"kept its first 200,000 samples \(4.0 s\); later repetitions have none"):
        gcexplore.dram_timeline(["memory", "compute"], [24])


def test_a_child_that_exits_without_results_says_so(monkeypatch):
    _fake_child(monkeypatch, "import sys; print('out of memory', file=sys.stderr); sys.exit(1)")
    with pytest.raises(pm.PmSamplingError, match="exited with status 1 before writing its results.*out of memory"):
        gcexplore.dram_timeline(["memory", "compute"], [24])
