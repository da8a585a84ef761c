"""Profiler logic without a GPU: statistics, best split, lower bound, keeping rows, validation."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import _synthetic as S
import gcexplore
import gcexplore as P
from gcexplore.experiments import request as SZ
from gcexplore import analysis as A
from gcexplore.experiments import runner as R
from gcexplore.schema import check_modes, columns, frame
from gcexplore import workloads as W


def _overlap(rows, attrs=None):
    """A tiny overlap frame from (mode, rep, workload, partition, sm, duration, makespan, flops, bytes)."""
    recs = []
    for mode, rep, wl, part, sm, dur, mk, flops, nbytes in rows:
        recs.append({
            "layout": "24+108", "split_sm_count": 24, "mode": mode, "rep": rep, "workload": wl,
            "partition": part, "sm_count": sm, "requested_sm_count": 24 if part == "p0" else None,
            "start_ms": 0.0, "duration_ms": dur, "makespan_ms": mk, "flops": flops, "bytes": nbytes,
            "throughput_tflops": flops / (dur * 1e-3) / 1e12, "bandwidth_gbs": nbytes / (dur * 1e-3) / 1e9,
            "sm_clock_mhz_before": math.nan, "power_w_before": math.nan,
            "sm_clock_mhz": math.nan, "power_w": math.nan,
        })
    return frame(recs, "overlap", {"kind": "overlap", **(attrs or {})})


NAN = math.nan


def _pair(seq_a=1.0, seq_b=1.0, flops_a=5e10, bytes_a=NAN, flops_b=NAN, bytes_b=3e9, reps=3):
    rows = []
    for r in range(reps):
        rows += [
            ("alone", r, "a", "p0", 24, 2.0, 3.0, flops_a, bytes_a),
            ("alone", r, "b", "remainder", 108, 1.0, 3.0, flops_b, bytes_b),
            ("concurrent", r, "a", "p0", 24, 2.2, 2.3, flops_a, bytes_a),
            ("concurrent", r, "b", "remainder", 108, 1.1, 2.3, flops_b, bytes_b),
            ("sequential", r, "a", "device", 132, seq_a, seq_a + seq_b, flops_a, bytes_a),
            ("sequential", r, "b", "device", 132, seq_b, seq_a + seq_b, flops_b, bytes_b),
            ("streams", r, "a", "device", 132, 1.5, 1.8, flops_a, bytes_a),
            ("streams", r, "b", "device", 132, 1.6, 1.8, flops_b, bytes_b),
        ]
    return rows


# --- summarize -------------------------------------------------------------


def test_summary_statistics_come_from_the_raw_samples():
    df = S.sweep_df(repeats=7, seed=3)
    s = P.summarize(df)
    assert len(s) == df.groupby(["layout", "mode", "workload"]).ngroups
    g = df[(df.layout == "40+92") & (df["mode"] == "concurrent") & (df.workload == "compute")]["duration_ms"]
    row = s[(s.layout == "40+92") & (s["mode"] == "concurrent") & (s.workload == "compute")].iloc[0]
    assert row.median_ms == pytest.approx(np.median(g))
    assert row.p10_ms == pytest.approx(np.percentile(g, 10))
    assert row.p90_ms == pytest.approx(np.percentile(g, 90))
    assert row.iqr_ms == pytest.approx(np.percentile(g, 75) - np.percentile(g, 25))
    assert row.reps == 7
    assert list(s.columns) == A.OVERLAP_SUMMARY_COLUMNS
    assert s.attrs["device_name"] == df.attrs["device_name"]


def test_noisy_flag_at_ten_percent_of_the_median():
    quiet = [("alone", r, "a", "p0", 24, d, d, NAN, NAN) for r, d in enumerate([1.0, 1.01, 0.99, 1.02, 0.98])]
    loud = [("alone", r, "b", "p0", 24, d, d, NAN, NAN) for r, d in enumerate([1.0, 1.3, 0.7, 1.25, 0.8])]
    s = P.summarize(_overlap(quiet + loud)).set_index("workload")
    assert not s.loc["a", "noisy"]
    assert s.loc["b", "noisy"]


def test_noisy_flag_catches_two_clusters_that_the_iqr_misses():
    # 16 samples at 1.95 ms and 4 at 1.17 ms: the IQR is zero, p10 and p90 lie 0.78 ms apart.
    two = A.stats.stats([1.95] * 16 + [1.17] * 4)
    assert two["iqr_ms"] == pytest.approx(0.0, abs=1e-12)
    assert two["noisy"]
    assert not A.stats.stats([1.95] * 19 + [1.96])["noisy"]


def test_noisy_flag_on_the_recorded_bimodal_streams_samples():
    if "sweep" not in gcexplore.results.recorded_names():
        pytest.skip("no recorded sweep in gcexplore/data (bench/record.py writes it on a GPU)")
    s = A.summarize(gcexplore.load_recorded("sweep"))
    row = s[(s.layout == "104+28") & (s["mode"] == "streams") & (s.workload == "memory")].iloc[0]
    assert row.p90_ms - row.p10_ms > 0.25 * row.median_ms  # 1.17 ms and 1.95 ms, as recorded
    assert row.noisy
    # the steady configurations of the same layout stay unflagged
    assert not s[(s.layout == "104+28") & s["mode"].isin(["alone", "concurrent", "sequential"])]["noisy"].any()


def test_speedups_and_slowdown_per_layout():
    s = P.summarize(_overlap(_pair()))
    row = s[(s["mode"] == "concurrent") & (s.workload == "a")].iloc[0]
    assert row.makespan_median_ms == pytest.approx(2.3)
    assert row.speedup_vs_sequential == pytest.approx(2.0 / 2.3)
    assert row.speedup_vs_streams == pytest.approx(1.8 / 2.3)
    assert row.slowdown_vs_alone == pytest.approx(2.2 / 2.0)
    b = s[(s["mode"] == "concurrent") & (s.workload == "b")].iloc[0]
    assert b.slowdown_vs_alone == pytest.approx(1.1 / 1.0)
    # per-layout values are the same on both concurrent rows of the layout, and only there
    conc = s["mode"] == "concurrent"
    assert s.loc[conc, "speedup_vs_sequential"].nunique() == 1
    assert s.loc[~conc, ["slowdown_vs_alone", *A.overlap.CONCURRENT_COLUMNS]].isna().all().all()


def test_ratios_only_on_the_rows_they_describe_on_the_recorded_sweep():
    """An alone, sequential or plain-streams row carries no slowdown, speedup, interference or
    efficiency (they describe a layout's concurrent run); the run's bound is on every row."""
    df = gcexplore.load_recorded("sweep")
    s = P.summarize(df)
    ratios = ["slowdown_vs_alone", "speedup_vs_sequential", "speedup_vs_streams", "interference_free_ms",
              "interference", "split_loss", "efficiency"]
    conc = s["mode"] == "concurrent"
    assert s.loc[~conc, ratios].isna().all().all()
    assert s.loc[conc, ratios].notna().all().all()
    assert (s["lower_bound_ms"] == A.lower_bound(df)["lower_bound_ms"]).all()
    # the concurrent rows carry what layout_table shows, one value per layout
    table = A.layout_table(df).set_index("layout")
    for col in ratios[1:]:
        per = s[conc].groupby("layout")[col].agg(["min", "max"])
        assert (per["min"] == per["max"]).all()
        assert np.allclose(per["min"], table.loc[per.index, col])


def test_lower_bound_is_the_slowest_workloads_fastest_solo_time():
    # a: alone 2.0 on 24 SMs, 1.0 on the whole device; b: alone 1.0 on 108, 1.0 on the device.
    s = P.summarize(_overlap(_pair()))
    assert s["lower_bound_ms"].iloc[0] == pytest.approx(1.0)
    s = s[s["mode"] == "concurrent"]
    assert s["efficiency"].iloc[0] == pytest.approx(1.0 / 2.3)
    assert s["interference_free_ms"].iloc[0] == pytest.approx(2.0)  # a alone on its 24 SMs
    assert s["interference"].iloc[0] == pytest.approx(2.3 / 2.0)
    assert s["split_loss"].iloc[0] == pytest.approx(2.0 / 1.0)
    assert s["efficiency"].iloc[0] == pytest.approx(1 / (s["interference"].iloc[0] * s["split_loss"].iloc[0]))


def test_lower_bound_takes_the_fastest_size_not_the_whole_device():
    # b is faster on its 108-SM partition (0.8) than on the whole device (1.5): a
    # bandwidth-bound kernel can peak below all SMs. The bound must not exceed 0.8 for b.
    rows = [r if not (r[0] == "alone" and r[2] == "b") else (*r[:5], 0.8, *r[6:]) for r in _pair(seq_a=0.5, seq_b=1.5)]
    b = A.lower_bound(_overlap(rows))
    assert b["lower_bound_ms"] == pytest.approx(0.8)
    assert (b["workload"], b["mode"], b["sm_count"]) == ("b", "alone", 108)


def test_resource_bound_needs_a_declared_peak():
    # Two FLOP-bound workloads: without a declared peak, no resource term (a measured best is no ceiling).
    s = P.summarize(_overlap(_pair(flops_b=5e10, bytes_b=NAN)))
    assert s["lower_bound_ms"].iloc[0] == pytest.approx(1.0)
    assert "no declared peak" in s.attrs["lower_bound"]["resource_note"]
    # A declared 60 TFLOP/s peak, not exceeded (plain streams reached 1e11 FLOPs in 1.8 ms,
    # 56 TFLOP/s): 1e11 FLOPs take at least 1.67 ms.
    s = P.summarize(_overlap(_pair(flops_b=5e10, bytes_b=NAN), attrs={"peak_tflops": 60.0}))
    assert s["lower_bound_ms"].iloc[0] == pytest.approx(1e11 / 60e12 * 1e3)


def test_resource_bound_refuses_a_peak_the_run_exceeded():
    # The run measured 56 TFLOP/s (plain streams); a declared 50 TFLOP/s is no peak and must not count.
    b = A.lower_bound(_overlap(_pair(flops_b=5e10, bytes_b=NAN), attrs={"peak_tflops": 50.0}))
    assert b["lower_bound_ms"] == pytest.approx(1.0)
    assert math.isnan(b["resource_ms"])
    assert "not used" in b["resource_note"]


def test_resource_bound_loose_peak_does_not_lower_the_measured_bound():
    s = P.summarize(_overlap(_pair(flops_b=5e10, bytes_b=NAN), attrs={"peak_tflops": 200.0}))
    # 1e11 FLOPs at 200 TFLOP/s = 0.5 ms < the slowest workload's fastest solo time (1 ms)
    assert s["lower_bound_ms"].iloc[0] == pytest.approx(1.0)


def test_lower_bound_undeclared_work_falls_back_to_the_solo_times():
    s = P.summarize(_overlap(_pair(seq_a=3.0, flops_a=NAN, bytes_b=NAN)))
    assert s["lower_bound_ms"].iloc[0] == pytest.approx(2.0)  # a alone on 24 SMs beats its 3.0 on the device


def test_lower_bound_nan_without_solo_rows():
    rows = [r for r in _pair() if r[0] not in ("sequential", "alone")]
    s = P.summarize(_overlap(rows))
    assert s["lower_bound_ms"].isna().all()
    assert s["speedup_vs_sequential"].isna().all()


def test_lower_bound_never_above_any_measured_makespan_on_synthetic_sweep():
    s = P.summarize(S.sweep_df())
    conc = s[s["mode"] == "concurrent"]
    assert (conc["lower_bound_ms"] <= conc["makespan_median_ms"]).all()
    assert ((conc["efficiency"] > 0) & (conc["efficiency"] <= 1)).all()


@pytest.mark.parametrize("name", ["sweep", "torch_sweep"])
def test_recorded_concurrent_makespans_respect_the_bound_within_the_spread(name):
    if name not in gcexplore.results.recorded_names():
        pytest.skip(f"no recorded {name} in gcexplore/data (bench/record.py writes it on a GPU)")
    df = gcexplore.load_recorded(name)
    bound = A.lower_bound(df)
    slack = bound["lower_bound_ms"] - bound["p10_ms"]  # the spread of the measurement that sets it
    per_rep = A.makespan_stats(df, "concurrent")
    assert (per_rep["median_ms"] >= bound["lower_bound_ms"] - slack).all(), per_rep
    table = A.layout_table(df)
    assert (table["efficiency"] <= bound["lower_bound_ms"] / (bound["lower_bound_ms"] - slack)).all()
    # every concurrent repetition, not only the medians
    reps = df[df["mode"] == "concurrent"].groupby(["layout", "rep"])["makespan_ms"].max()
    assert (reps >= bound["lower_bound_ms"] - slack).all()


def test_recorded_sweep_bound_is_below_memory_on_its_best_size():
    # The case: memory alone on 36 SMs (1.057 ms) beat the old whole-device bound (1.085 ms).
    if "sweep" not in gcexplore.results.recorded_names():
        pytest.skip("no recorded sweep in gcexplore/data")
    df = gcexplore.load_recorded("sweep")
    mem = df[(df["mode"] == "alone") & (df.workload == "memory")].groupby("sm_count")["duration_ms"].median()
    bound = A.lower_bound(df)
    assert bound["lower_bound_ms"] == pytest.approx(mem.min())
    assert (bound["workload"], bound["sm_count"]) == ("memory", int(mem.idxmin()))
    assert bound["lower_bound_ms"] < 1.06  # not the 1.085 ms of memory on the whole device


# --- best_split ------------------------------------------------------------


def test_best_split_is_the_lowest_concurrent_makespan():
    df = S.sweep_df(seed=1)
    best = P.best_split(df)
    conc = df[df["mode"] == "concurrent"].drop_duplicates(["layout", "rep"])
    medians = conc.groupby("layout")["makespan_ms"].median()
    assert best.name == medians.idxmin() == best["layout"]
    assert best["concurrent_ms"] == pytest.approx(medians.min())
    assert best["split_sm_count"] == int(best["layout"].split("+")[0])
    # the same answer from the summary
    assert P.best_split(P.summarize(df))["layout"] == best["layout"]


def test_best_split_needs_concurrent_rows():
    df = S.sweep_df()
    with pytest.raises(ValueError, match="concurrent"):
        P.best_split(df[df["mode"] != "concurrent"])


# --- scaling, isolation, occupancy summaries -------------------------------


def test_scaling_summary_speedup_and_parallel_efficiency():
    recs = []
    for sm, ms in ((8, 8.0), (16, 4.0), (32, 2.5)):
        for rep in range(3):
            recs.append({"workload": "w", "sm_count": sm, "requested_sm_count": sm, "rep": rep,
                         "duration_ms": ms, "flops": 1e9, "bytes": NAN,
                         "throughput_tflops": 1e9 / (ms * 1e-3) / 1e12, "bandwidth_gbs": NAN})
    df = frame(recs, "scaling", {"kind": "scaling"})
    s = P.summarize(df).set_index("sm_count")
    assert s.loc[8, "speedup"] == pytest.approx(1.0)
    assert s.loc[16, "speedup"] == pytest.approx(2.0)
    assert s.loc[16, "parallel_efficiency"] == pytest.approx(1.0)
    assert s.loc[32, "speedup"] == pytest.approx(3.2)
    assert s.loc[32, "parallel_efficiency"] == pytest.approx(0.8)


def test_isolation_summary_slowdown_vs_alone():
    s = P.summarize(S.isolation_df(repeats=40)).set_index(["scenario", "role"])
    assert s.loc[("alone", "critical"), "slowdown_vs_alone"] == pytest.approx(1.0)
    assert s.loc[("streams", "critical"), "slowdown_vs_alone"] == pytest.approx(1.86, rel=0.05)
    assert s.loc[("partitioned", "critical"), "slowdown_vs_alone"] == pytest.approx(1.21, rel=0.05)
    assert s.loc[("partitioned", "critical"), "sm_count"] == 16


def test_sm_busy_unions_overlapping_blocks():
    recs = [("p0", "a", 0, 0, 0, 10), ("p0", "a", 0, 1, 5, 15), ("p0", "a", 0, 2, 20, 30),
            ("remainder", "b", 7, 0, 0, 3)]
    df = pd.DataFrame(recs, columns=columns("occupancy")[:6])
    busy = P.sm_busy(df).set_index("sm_id")
    assert busy.loc[0, "busy_ns"] == 25 and busy.loc[0, "blocks"] == 3
    assert busy.loc[0, "busy_fraction"] == pytest.approx(25 / 30)
    assert busy.loc[7, "busy_fraction"] == pytest.approx(3 / 30)
    assert P.summarize(df).equals(P.sm_busy(df))  # summarize dispatches on the columns


def test_summarize_refuses_unknown_frames():
    with pytest.raises(ValueError, match=r"gcexplore\.profile_overlap\(\), gcexplore\.sweep\(\), gcexplore\.scaling\(\)"):
        P.summarize(pd.DataFrame({"x": [1]}))


# --- keeping rows: failures, interrupts, checkpoints ------------------------


def _fake_layouts(n=8):
    return [(f"{8 * (i + 1)}+{132 - 8 * (i + 1)}", 8 * (i + 1)) for i in range(n)]


def _fake_measure(calls, fail_at=None, interrupt_at=None):
    def measure(k, out):
        calls.append(k)
        if fail_at is not None and len(calls) == fail_at:
            raise RuntimeError("workload exploded")
        if interrupt_at is not None and len(calls) == interrupt_at:
            out.append(S.layout_row(k, 0))  # half a layout measured, then Ctrl-C
            raise KeyboardInterrupt
        for rep in range(2):
            out.append(S.layout_row(k, rep))
    return measure


def _build(rows):
    return frame(rows, "overlap", {"kind": "sweep"})


def test_a_workload_raising_at_the_fifth_layout_keeps_the_first_four(tmp_path):
    calls = []
    ck = R.Checkpoint(tmp_path / "ck.jsonl", {"workloads": ["w"]})
    with pytest.raises(P.MeasurementFailed) as ei:
        R.run_layouts(_fake_layouts(), _fake_measure(calls, fail_at=5), build=_build, checkpoint=ck)
    part = ei.value.partial
    assert isinstance(ei.value, gcexplore.GreenContextError)
    assert isinstance(ei.value.__cause__, RuntimeError)
    assert sorted(part["split_sm_count"].unique()) == [8, 16, 24, 32]
    assert len(part) == 8 and part.attrs["partial"] is True
    assert "workload exploded" in str(ei.value)
    # the checkpoint holds the same four layouts
    lines = (tmp_path / "ck.jsonl").read_text().splitlines()
    assert [json.loads(x)["layout"] for x in lines[1:]] == ["8+124", "16+116", "24+108", "32+100"]


def test_checkpoint_resume_measures_only_what_is_missing(tmp_path):
    path = tmp_path / "ck.jsonl"
    header = {"workloads": ["w"], "repeats": 2}
    with pytest.raises(P.MeasurementFailed):
        R.run_layouts(_fake_layouts(), _fake_measure([], fail_at=4),
                       build=_build, checkpoint=R.Checkpoint(path, header))
    calls = []
    rows, resumed = R.run_layouts(_fake_layouts(), _fake_measure(calls), build=_build,
                                   checkpoint=R.Checkpoint(path, header))
    assert resumed == ["8+124", "16+116", "24+108"]
    assert calls == [32, 40, 48, 56, 64]
    df = _build(rows)
    assert sorted(df["split_sm_count"].unique()) == [8 * i for i in range(1, 9)]
    assert len(df) == 16
    assert df["requested_sm_count"].dtype == "Int64"
    # a third run measures nothing
    calls.clear()
    R.run_layouts(_fake_layouts(), _fake_measure(calls), build=_build, checkpoint=R.Checkpoint(path, header))
    assert calls == []


def test_checkpoint_from_a_different_run_is_refused(tmp_path):
    path = tmp_path / "ck.jsonl"
    R.Checkpoint(path, {"workloads": ["a", "b"], "repeats": 20}).load()
    with pytest.raises(ValueError, match="different run.*repeats"):
        R.Checkpoint(path, {"workloads": ["a", "b"], "repeats": 5}).load()


def test_checkpoint_ignores_a_torn_last_line(tmp_path):
    path = tmp_path / "ck.jsonl"
    ck = R.Checkpoint(path, {"workloads": ["w"]})
    ck.load()
    ck.append("8+124", [S.layout_row(8, 0)])
    with open(path, "a") as f:
        f.write('{"layout": "16+116", "rows": [{"lay')
    done = R.Checkpoint(path, {"workloads": ["w"]}).load()
    assert list(done) == ["8+124"]


def test_interrupt_keeps_rows_and_stays_a_keyboard_interrupt():
    calls = []
    with pytest.raises(KeyboardInterrupt) as ei:
        R.run_layouts(_fake_layouts(), _fake_measure(calls, interrupt_at=3), build=_build)
    assert isinstance(ei.value, P.MeasurementInterrupted)
    assert isinstance(ei.value, gcexplore.MeasurementAborted)
    part = ei.value.partial
    # two full layouts plus the one row of the half-measured third
    assert len(part) == 5 and sorted(part["split_sm_count"].unique()) == [8, 16, 24]


# --- validation ---------------------------------------------------------------


def test_unknown_mode_lists_the_valid_ones():
    with pytest.raises(ValueError, match="alone, concurrent, sequential, streams"):
        check_modes(["alone", "parallel"])
    with pytest.raises(ValueError, match="valid modes"):
        gcexplore.profile_overlap({"a": lambda *, stream: None}, [24], modes=["overlapped"])
    assert check_modes("alone") == ("alone",)


def test_bad_repeats_and_warmup():
    with pytest.raises(ValueError, match=r"repeats must be an int in \[1, 100000\], got 0"):
        gcexplore.profile_overlap({"a": lambda *, stream: None}, [24], repeats=0)
    with pytest.raises(ValueError, match=r"warmup must be an int in \[0, 10000\], got -1"):
        gcexplore.sweep({"a": lambda *, stream: None}, warmup=-1)


def test_more_workloads_than_partitions(h100_like):
    plan = gcexplore.plan_split(h100_like, [24])
    SZ.fit_workloads(plan, 2)
    SZ.fit_workloads(plan, 1)
    with pytest.raises(ValueError, match="3 workloads.*give 2 or 3 SM counts"):
        SZ.fit_workloads(plan, 3)
    import dataclasses

    full = gcexplore.plan_split(dataclasses.replace(h100_like, sm_count=128), [64, 64])
    assert full.remainder == 0
    with pytest.raises(ValueError, match="no remainder"):
        SZ.fit_workloads(full, 3)


def test_sweep_sizes_cover_every_valid_size_and_refuse_others(h100_like):
    sizes = SZ.sweep_sizes(h100_like, 2, None, ())
    assert sizes == [k for k in h100_like.valid_sm_counts() if k < 132]
    assert sizes[0] == 8 and sizes[-1] == 128
    with pytest.raises(ValueError, match=r"size\(s\) \[20, 200\].*valid sizes .* are 8, 16"):
        SZ.sweep_sizes(h100_like, 2, [16, 20, 200], ())
    assert SZ.sweep_sizes(h100_like, 2, [24, 24, 16], ()) == [24, 16]
    with pytest.raises(ValueError, match="at least two workloads"):
        SZ.sweep_sizes(h100_like, 1, None, ())
    with pytest.raises(ValueError, match="1 fixed size"):
        SZ.sweep_sizes(h100_like, 3, None, ())
    three = SZ.sweep_sizes(h100_like, 3, None, [16])
    assert three[-1] == 112  # 112 + 16 leaves 4 SMs for the last workload


# --- workloads -------------------------------------------------------------------


def test_workload_needs_an_explicit_stream():
    w = W.Workload("w", lambda *, stream: None)
    with pytest.raises(TypeError, match="explicit stream"):
        w(stream=None)
    with pytest.raises(TypeError):
        w()


def test_workload_declared_work_is_checked():
    with pytest.raises(ValueError, match="flops must be a finite number"):
        W.Workload("w", lambda *, stream: None, flops=-1)
    with pytest.raises(TypeError, match="callable"):
        W.Workload("w", 3)


def test_as_workloads_names_and_duplicates():
    def f(*, stream):
        return None

    ws, made = W.as_workloads({"x": f, "y": W.Workload("z", f, flops=1.0)})
    assert [w.name for w in ws] == ["x", "y"] and ws[1].flops == 1.0
    assert made == []  # nothing was built from a name, so nothing for the caller to close
    with pytest.raises(ValueError, match="unique"):
        W.as_workloads([f, f])
    with pytest.raises(ValueError, match="no workloads"):
        W.as_workloads([])
    with pytest.raises(TypeError, match="built-in name"):
        W.as_workload(3)


def test_unknown_builtin_lists_the_builtins():
    with pytest.raises(ValueError, match="compute, memory, copy, spin, latency"):
        W.builtin("matmul")


def test_occupancy_refuses_uninstrumentable_workloads_before_touching_the_gpu():
    w = W.Workload("mine", lambda *, stream: None)
    assert not w.instrumentable
    with pytest.raises(ValueError, match="'mine' cannot be instrumented"):
        w.instrumented()
    with pytest.raises(ValueError, match="'mine' cannot be instrumented"):
        gcexplore.occupancy({"mine": w}, [24])


@pytest.mark.parametrize("make, module", [(W.from_torch, "torch"), (W.from_cupy, "cupy")])
def test_library_adapters_name_the_missing_package(make, module):
    import importlib.util

    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{module} is installed; the missing-package message cannot be shown")

    class FakeStream:
        handle = 0

        def __cuda_stream__(self):
            return (0, 0)

    w = make(lambda: None, name="x")
    with pytest.raises(ImportError, match=f"needs {module}.*pip install"):
        w(stream=FakeStream())
