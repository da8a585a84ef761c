"""Counted traffic without a GPU: samples to bytes per call, profiles with measured, declared and
missing traffic, the model's use of counted bytes and L2 re-reads, the bound, cross-card scaling,
calibrated intervals, and the one sentence where CUPTI cannot count."""

from __future__ import annotations

import dataclasses
import math
import sys

import numpy as np
import pandas as pd
import pytest

import gcexplore as gx
from gcexplore.prediction import traffic_profile as TP
from gcexplore.prediction import saturation as SAT
from gcexplore.prediction.check import fit_model, predict_kwargs
from gcexplore.prediction import traffic as T
from test_predict import PEAK, _profile

READ, WRITE = "dram__bytes_read.sum", "dram__bytes_write.sum"
FIT_GROUPS = ("fitted", "fitted4")  # the recorded pairs the model is fitted on (bench/predict.py's FITS)


# ----------------------------------------------------------------------------- samples -> bytes


def _samples(n=100, busy=range(10, 60), per=(1e6, 5e5, 3e6)):
    st = np.arange(n) * 1000
    vals = np.zeros((n, len(per)))
    vals[list(busy)] = per
    return st, st + 1000, vals


def test_sum_counters_add_up_over_the_run_and_divide_by_the_calls():
    st, en, vals = _samples()
    r = T.traffic_from_samples(st, en, vals, [READ, WRITE, "lts__t_bytes.sum"], 10_000, 60_000, calls=10)
    assert r["dram_read_bytes"] == pytest.approx(50 * 1e6 / 10)
    assert r["dram_write_bytes"] == pytest.approx(50 * 5e5 / 10)
    assert r["l2_bytes"] == pytest.approx(50 * 3e6 / 10)
    assert r["peak_gbs"] == pytest.approx(1.5e6 / 1000)  # bytes per ns are GB/s
    assert r["window"] == "run"


def test_deciles_show_a_two_phase_workloads_draw_over_time():
    # 30 samples at 1.5 GB/ns (1.5 TB/s) then 20 at 0.3: a call with a busy and a quiet phase
    st, en, vals = _samples()
    vals[40:60] = (2e5, 1e5, 1e6)
    r = T.traffic_from_samples(st, en, vals, [READ, WRITE, "lts__t_bytes.sum"], 10_000, 60_000, calls=1)
    d, l2 = r["dram_gbs_deciles"], r["l2_gbs_deciles"]
    assert len(d) == 9 and d == sorted(d)
    assert d[0] == pytest.approx(300) and d[-1] == pytest.approx(1500)  # the quiet 40%, the busy 60%
    assert l2[0] == pytest.approx(1000) and l2[-1] == pytest.approx(3000)
    r = T.traffic_from_samples(st, en, vals[:, :2], [READ, WRITE], 10_000, 60_000, calls=1)
    assert r["l2_gbs_deciles"] == []  # no L2 counter: no L2 phases, never zeros


def test_a_sample_half_inside_the_run_counts_half():
    st, en, vals = _samples()
    r = T.traffic_from_samples(st, en, vals, [READ, WRITE, "lts__t_bytes.sum"], 10_500, 60_000, calls=1)
    assert r["dram_read_bytes"] == pytest.approx(49.5 * 1e6)


def test_rates_are_integrated_and_sectors_are_32_bytes():
    st, en, vals = _samples(per=(1e12, 2e12))  # bytes per second over 1 us samples: 1e6 and 2e6 bytes
    r = T.traffic_from_samples(st, en, vals, [READ + ".per_second", WRITE + ".per_second"], 10_000, 60_000, 50)
    assert r["dram_read_bytes"] == pytest.approx(1e6) and r["dram_write_bytes"] == pytest.approx(2e6)
    assert math.isnan(r["l2_bytes"])
    st, en, vals = _samples(per=(0, 0, 10))
    r = T.traffic_from_samples(st, en, vals, [READ, WRITE, "lts__t_sectors.sum"], 10_000, 60_000, 1)
    assert r["l2_bytes"] == pytest.approx(50 * 10 * 32)


def test_no_sample_means_unknown_bytes_not_zero_and_a_clock_mismatch_is_said():
    r = T.traffic_from_samples([], [], np.zeros((0, 2)), [READ, WRITE], 0, 5, 1)
    assert math.isnan(r["dram_read_bytes"]) and r["window"] == "no samples"
    st, en, vals = _samples()
    # another clock: samples of about the run's length, none inside its timestamps -> all of them count
    r = T.traffic_from_samples(st, en, vals, [READ, WRITE, "lts__t_bytes.sum"], 10 ** 12, 10 ** 12 + 50_000, 1)
    assert r["dram_read_bytes"] == pytest.approx(50e6) and "none inside" in r["window"]
    # samples far longer than the run (an earlier run's too) and none inside: unknown, never a guess
    r = T.traffic_from_samples(st, en, vals, [READ, WRITE, "lts__t_bytes.sum"], 10 ** 12, 10 ** 12 + 5, 1)
    assert math.isnan(r["dram_read_bytes"]) and r["window"] == "no sample inside the run"
    with pytest.raises(ValueError, match="calls"):
        T.traffic_from_samples(st, en, vals, [READ, WRITE, "lts__t_bytes.sum"], 0, 1, 0)


# ----------------------------------------------------------------------------- the refusal


def test_without_cupti_python_the_refusal_is_one_sentence_and_says_what_happens_instead(monkeypatch):
    monkeypatch.setattr("gcexplore.trace.collector.preload_cupti", lambda: None)
    monkeypatch.setitem(sys.modules, "cupti", None)  # import cupti raises ImportError
    msg = T.counters_refusal()
    assert msg is not None and msg.count(". ") == 0 and msg.startswith("measured DRAM and L2 traffic needs")
    assert "declared bytes instead" in msg and "cannot be imported" in msg


def test_an_old_cupti_is_refused_with_its_version_before_the_profiler_is_touched(monkeypatch):
    from gcexplore.trace import features as F

    class Fake:  # a cupti module stand-in
        pass

    fake = type(sys)("cupti")
    fake.cupti, fake.pm_sampling = Fake(), Fake()
    monkeypatch.setattr("gcexplore.trace.collector.preload_cupti", lambda: None)
    monkeypatch.setitem(sys.modules, "cupti", fake)
    monkeypatch.setattr(F, "describe", lambda cupti: F.LoadedCupti(library="/x/libcupti.so.13", version=(13, 0, 85),
                                                                  package="13.4.0", pm_module=True))
    msg = T.counters_refusal()
    assert "CUPTI 13.0.85" in msg and "declared bytes instead" in msg


def test_solo_profile_falls_back_to_declared_bytes_with_the_sentence_as_a_warning(monkeypatch):
    from gcexplore.prediction import solo

    def refuse(*a, **k):
        raise T.TrafficUnavailable(T.traffic_refusal("no PM sampler here"))

    monkeypatch.setattr(T, "measure_traffic", refuse)
    with pytest.warns(UserWarning, match="no PM sampler here"):
        assert solo._traffic(object(), "auto", 0, 8) is None
    with pytest.raises(T.TrafficUnavailable):
        solo._traffic(object(), "required", 0, 8)
    assert solo._traffic(object(), False, 0, 8) is None


def test_the_copy_probe_times_the_workload_beside_the_copy_on_half_and_most_of_the_card_and_closes_the_copy(
        monkeypatch):
    from gcexplore.prediction import solo
    from gcexplore.workloads import builtins

    made, calls = [], []

    class FakeRef:
        def __init__(self, name, nbytes):
            self.name, self.closed, self.bytes = name, False, nbytes
            made.append(self)

        def close(self):
            self.closed = True

    def fake_sweep(wls, sm_counts, modes, **kw):
        calls.append({"sizes": list(sm_counts), "modes": tuple(modes), "names": list(wls)})
        (w, c), rows = list(wls), []
        for k in sm_counts:  # the workload slower beside the copy on 64 SMs than on 104, least on 112
            slow = {64: 1.5, 104: 1.1}.get(k, 1.02) if "polite" not in c else 1.2
            for mode, dw, dc in (("alone", 1.0, 2.0), ("concurrent", slow, 2.2)):
                for rep in range(3):
                    rows += [{"split_sm_count": k, "mode": mode, "workload": w, "duration_ms": dw + 0.01 * rep,
                              "rep": rep}, {"split_sm_count": k, "mode": mode, "workload": c, "duration_ms": dc,
                                            "rep": rep}]
        return pd.DataFrame(rows)

    monkeypatch.setattr(builtins, "copy", lambda device, name: FakeRef(name, 3.2e9))
    monkeypatch.setattr(builtins, "polite", lambda device, name: FakeRef(name, 8.05e8))
    monkeypatch.setattr(solo, "sweep", fake_sweep)
    monkeypatch.setattr(solo, "gpu_time_ms", lambda df: 12.5)
    wl = type("W", (), {"name": "conv"})()
    got = solo._probe(wl, 0, 3, 1, list(range(8, 129, 8)), 132, with_polite=True)  # an H100: 132 SMs
    first = calls[0]
    assert first["sizes"] == [64, 104, 112] and first["modes"] == ("alone", "concurrent")
    assert first["names"][0] == "conv"
    assert made and all(m.closed for m in made)  # every copy and streamer it made is closed
    assert got["probe_sm_count"] == 64 and got["probe_ms"] == pytest.approx(1.51)
    assert got["probe_alone_ms"] == pytest.approx(1.01) and got["probe_copy_ms"] == 2.2
    assert got["probe_copy_alone_ms"] == 2.0 and got["probe_copy_bytes"] == 3.2e9
    assert got["probe_large_sm_count"] == 104 and got["probe_large_ms"] == pytest.approx(1.11)
    assert got["probe_large_alone_ms"] == pytest.approx(1.01) and got["probe_large_copy_ms"] == 2.2
    # the third probe: 112 SMs (nearest 0.85 of 132), the copy on 20 below saturation
    assert got["probe_low_sm_count"] == 112 and got["probe_low_ms"] == pytest.approx(1.03)
    assert got["probe_low_alone_ms"] == pytest.approx(1.01) and got["probe_low_copy_alone_ms"] == 2.0
    # the polite probe: half the card beside the polite streamer, and each reference on 104 SMs beside the copy
    assert calls[1] == {"sizes": [64], "modes": ("alone", "concurrent"), "names": ["conv", "conv~polite"]}
    assert got["probe_polite_sm_count"] == 64 and got["probe_polite_ms"] == pytest.approx(1.21)
    assert got["probe_polite_alone_ms"] == pytest.approx(1.01) and got["probe_polite_bytes"] == 8.05e8
    assert [c["names"] for c in calls[2:]] == [["reference~copy", "reference~side"], ["conv~polite", "reference~side"]]
    assert all(c["sizes"] == [104] for c in calls[2:])
    assert got["probe_refcopy_sm_count"] == 104 and got["probe_refcopy_copy_alone_ms"] == 2.0
    assert got["probe_refpolite_ms"] == pytest.approx(1.11) and got["probe_refpolite_copy_ms"] == 2.2
    assert got["_gpu_ms"] == 12.5 * 4  # every sweep's GPU time counted
    assert {k for k in got if k.startswith("probe_")} == set(TP.PROBE_COLUMNS)  # every probe column, no other
    # profiled at one size only: one probe, no second or third column
    calls.clear()
    one = solo._probe(wl, 0, 3, 1, [64])
    assert calls[0]["sizes"] == [64] and "probe_large_ms" not in one and one["probe_ms"] == pytest.approx(1.51)


# ----------------------------------------------------------------------------- profiles


def _counted(name, read, write, *, cold=None, l2=math.nan, sizes=(40, 8)):
    rows = [{"workload": name, "sm_count": k, "flushed": False, "dram_read_bytes": read, "dram_write_bytes": write,
             "l2_bytes": l2, "metric_set": "dram_l2"} for k in sizes]
    if cold is not None:
        rows.append({"workload": name, "sm_count": sizes[0], "flushed": True, "dram_read_bytes": cold,
                     "dram_write_bytes": 0.0, "l2_bytes": l2, "metric_set": "dram_l2"})
    return pd.DataFrame(rows)


def _quiet(name, **kw):  # a workload that declares nothing, 1 ms on any size
    return _profile(name, lambda k: 1.0, **kw)


def _stream(name, gb=3.0, **kw):
    return _profile(name, lambda k: max(1.0, 16.0 / k) * gb / 3.0, bytes=gb * 1e9, **kw)


def test_profiles_with_measured_declared_and_missing_traffic_say_so():
    prof = gx.prediction.model.check_profiles([_stream("declared"), _quiet("missing"), _quiet("counted")])
    prof = TP.attach_traffic(prof, _counted("counted", 2e9, 1e9, cold=3.5e9, l2=5e9))
    src = TP.profile_sources(prof).set_index("workload")
    assert src.loc["declared", "bytes"] == "declared" and src.loc["missing", "bytes"] == "missing"
    assert src.loc["counted", "bytes"] == "measured" and src.loc["counted", "working_set"] == "measured"
    assert src.loc["missing", "bound"] == "assumed" and src.loc["counted", "bound"] == "measured"
    row = prof[prof["workload"] == "counted"].iloc[0]
    assert row["bytes"] == 3e9 and row["dram_cold_bytes"] == 3.5e9 and row["l2_traffic_bytes"] == 5e9
    assert row["small_dram_bytes"] == 3e9 and row["small_sm_count"] == 8


def test_declared_bytes_override_the_count_when_asked():
    prof = TP.attach_traffic(_stream("s"), _counted("s", 1e9, 1e9), declared=["s"])
    assert set(prof["bytes"]) == {3e9} and set(prof["bytes_source"]) == {"declared"}


def test_the_model_uses_counted_bytes_where_nothing_was_declared():
    pair = [_stream("a"), _quiet("b")]
    blind = gx.predict(pair, layouts=["16+24"])
    assert blind.attrs["bytes_source"] == {"a": "declared", "b": "missing"}
    assert blind["interference"].iloc[0] == pytest.approx(1.0)  # b assumed to draw none
    prof = TP.attach_traffic(gx.prediction.model.check_profiles(pair), _counted("b", 2e9, 1e9))
    seen = gx.predict(prof, layouts=["16+24"])
    assert seen.attrs["bytes_source"]["b"] == "measured"
    # both move 3 GB in 1 ms alone at the card's 3000 GB/s: together 6 GB take 2 ms
    assert seen["makespan_ms"].iloc[0] == pytest.approx(2.0, rel=1e-6)


def test_counted_l2_re_reads_go_to_dram_only_when_the_neighbour_does_not_fit_beside_them():
    mib = 2 ** 20
    # alone: 0.3 GB from DRAM per 1 ms call; with the L2 flushed 16 MiB more: re-read from L2 across calls
    cold = 3e8 + 16 * mib
    reuse = TP.attach_traffic(_quiet("reuse"), _counted("reuse", 2e8, 1e8, cold=cold))
    small = _profile("small", lambda k: 1.0, bytes=4 * mib)  # moves 4 MiB: 20 MiB together, 40% of the L2
    big = _stream("big")  # streams 3 GB: evicts everything
    with_small = gx.predict([reuse, small], layouts=["16+24"])
    assert with_small["interference"].iloc[0] == pytest.approx(1.0, abs=1e-6)
    # beside the stream its re-reads go to DRAM: as if it had declared its cold bytes
    with_big = gx.predict([reuse, big], layouts=["16+24"])
    as_cold = gx.predict([_quiet("reuse", bytes=cold), big], layouts=["16+24"])
    assert with_big["makespan_ms"].iloc[0] == pytest.approx(as_cold["makespan_ms"].iloc[0], rel=1e-9)
    warm_only = gx.predict([_quiet("reuse", bytes=3e8), big], layouts=["16+24"])
    assert with_big["makespan_ms"].iloc[0] > warm_only["makespan_ms"].iloc[0]


@pytest.mark.parametrize("name,time_at,nbytes,bound", [
    ("stream", lambda k: max(1.0, 16.0 / k), 3e9, "memory"),
    ("compute", lambda k: 8.0 / k, 1e3, "compute"),
    ("latency", lambda k: 1.0, 1e3, "latency"),
])
def test_the_bound_is_memory_compute_or_latency(name, time_at, nbytes, bound):
    prof = TP.with_traffic_columns(_profile(name, time_at, bytes=nbytes))
    assert set(prof["bound"]) == {bound} and set(prof["bound_source"]) == {"declared"}


# ----------------------------------------------------------------------------- another card


def test_scaling_to_another_card_moves_memory_bound_time_by_bandwidth_and_compute_by_clock():
    card = {"device_sm_count": 40, "shared_bandwidth_gbs": 2 * PEAK, "sm_clock_mhz": 2000.0, "device_name": "B"}
    prof = TP.with_traffic_columns(gx.prediction.model.check_profiles([_stream("s"), _profile(
        "c", lambda k: 8.0 / k, bytes=1e3)]))
    prof["sm_clock_mhz"] = 1000.0
    moved = TP.scale_profiles(prof, card)
    t = lambda df, w, k: float(df[(df["workload"] == w) & (df["sm_count"] == k)]["duration_ms"].median())  # noqa: E731
    assert t(moved, "s", 32) == pytest.approx(t(prof, "s", 32) / 2, rel=1e-6)  # all memory-bound at 32 SMs
    assert t(moved, "c", 32) == pytest.approx(t(prof, "c", 32) / 2, rel=1e-3)  # all clock
    pred = gx.predict(prof, card=card, layouts=["16+24"])
    assert pred.attrs["device_name"] == "B" and any("L2" in a for a in pred.attrs["assumed"])
    with pytest.raises(ValueError, match="shared_bandwidth_gbs"):
        TP.scale_profiles(prof, {"device_sm_count": 40})
    with pytest.raises(ValueError, match="unknown keys"):
        TP.scale_profiles(prof, {**card, "hbm": 1})


def test_without_recorded_clocks_the_scaling_says_it_assumed_equal_clocks():
    moved = TP.scale_profiles(_stream("s"), {"device_sm_count": 48, "shared_bandwidth_gbs": PEAK})
    assert any("SM clock" in a for a in moved.attrs["assumed"])
    assert any("profiled SMs" in a for a in moved.attrs["assumed"])


def test_across_cards_the_interval_widens_on_the_side_scaled_alone_times_err():
    prof = TP.with_traffic_columns(gx.prediction.model.check_profiles([_stream("s"), _quiet("q")]))
    e = TP.CROSS_CARD_ERROR
    for factor, widened in ((2.0, (0.05, 1.05 * (1 + e) - 1)), (0.5, (1 - 0.95 / (1 + e), 0.05))):
        card = {"device_sm_count": 40, "shared_bandwidth_gbs": factor * PEAK}
        there = gx.predict(prof, card=card, layouts=["16+24"], model_error=(0.05, 0.05))
        # the same as the scaled profiles predicted with the margin widened on one side only:
        # toward more bandwidth the truth lies on the slow side (upper end), toward less the fast
        same = gx.predict(TP.scale_profiles(prof, card), layouts=["16+24"], model_error=widened)
        for col in ("makespan_ms", "makespan_low_ms", "makespan_high_ms"):
            assert there[col].iloc[0] == pytest.approx(same[col].iloc[0], rel=1e-9), (factor, col)
        said = [a for a in there.attrs["assumed"] if f"{e:.0%}" in a]
        assert len(said) == 1 and ("upper" if factor > 1 else "lower") in said[0]


# ----------------------------------------------------------------------------- intervals# ----------------------------------------------------------------------------- intervals


def test_a_calibrated_interval_covers_the_pairs_it_was_fitted_on_and_a_zero_width_one_does_not():
    sweep = gx.load_recorded("sweep")  # compute + memory on an H100, with its alone rows
    prof = gx.prediction.model.profile_from(sweep, shared_bandwidth_gbs=3000.0, l2_bytes=50 * 2 ** 20)
    fit = fit_model([(prof, ["compute", "memory"], sweep)])
    assert fit["coverage"] >= 0.9
    err = gx.predict_error(gx.predict(prof, ["compute", "memory"], **predict_kwargs(fit)), sweep)
    assert err["inside"].mean() == pytest.approx(fit["coverage"])
    # the recorded sweep is one round: without a run-to-run floor only its repetitions' spread counts
    narrow = gx.predict_error(gx.predict(prof, ["compute", "memory"], model_error=(0.0, 0.0)), sweep,
                              floor=gx.analysis.stats.Floor(0.0))
    assert narrow["inside"].mean() < 0.9
    with pytest.raises(ValueError, match="below, above"):
        gx.predict(prof, ["compute", "memory"], model_error=(0.1, 1.5))


def test_the_figure_says_where_each_workloads_bytes_came_from():
    pytest.importorskip("matplotlib")
    prof = TP.attach_traffic(gx.prediction.model.check_profiles([_stream("a"), _quiet("b")]),
                             _counted("b", 2e9, 1e9))
    fig = gx.plot_predict(gx.predict(prof))
    assert "a declared, b measured" in fig._suptitle.get_text()


def test_the_l2_bandwidth_is_a_second_shared_resource_only_when_asked():
    # two workloads that touch DRAM little but each push 6 TB/s through the L2 alone
    pair = [TP.attach_traffic(_quiet(n), _counted(n, 1e6, 1e6, l2=6e9)) for n in "ab"]
    free = gx.predict(pair, layouts=["16+24"])
    assert free["interference"].iloc[0] == pytest.approx(1.0, abs=1e-6)
    shared = gx.predict(pair, layouts=["16+24"], l2_bandwidth_gbs=6000.0, sharing="equal")
    # 12 TB/s asked of 6: equal halves, each fully L2-bound, so twice as long
    assert shared["makespan_ms"].iloc[0] == pytest.approx(2.0, rel=1e-6)
    assert gx.prediction.model.l2_drawn_gbs(pair) == pytest.approx(6000.0)
    with pytest.raises(ValueError, match="l2_bandwidth_gbs"):
        gx.predict(pair, l2_bandwidth_gbs=0)


def test_the_interval_allows_no_l2_sharing_at_its_low_end_because_the_l2_bandwidth_is_fitted():
    pair = [TP.attach_traffic(_quiet(n), _counted(n, 1e6, 1e6, l2=6e9)) for n in "ab"]
    shared = gx.predict(pair, layouts=["16+24"], l2_bandwidth_gbs=6000.0, sharing="equal", model_error=0.0)
    free = gx.predict(pair, layouts=["16+24"], sharing="equal", model_error=0.0)
    assert shared["makespan_ms"].iloc[0] == pytest.approx(2 * free["makespan_ms"].iloc[0], rel=1e-6)
    # the point keeps the L2 term; the low end is where the L2 shares nothing (a tuner must not skip it)
    assert shared["makespan_low_ms"].iloc[0] == pytest.approx(free["makespan_low_ms"].iloc[0], rel=1e-6)
    assert shared["makespan_high_ms"].iloc[0] >= shared["makespan_ms"].iloc[0]


def test_fit_model_says_whether_modelling_the_l2_bandwidth_helped():
    sweep = gx.load_recorded("sweep")
    prof = gx.prediction.model.profile_from(sweep, shared_bandwidth_gbs=3000.0, l2_bytes=50 * 2 ** 20)
    fit = fit_model([(prof, ["compute", "memory"], sweep)])
    assert fit["l2_bandwidth_gbs"] is None and list(fit["l2_median_abs_error"]) == ["none"]  # no L2 counted


def test_bytes_counted_on_a_small_partition_apply_to_small_partitions():
    # 3 GB per call on the whole device (40 SMs), 1.5 GB on 8 SMs (fewer tiles in flight, more L2 hits)
    prof = TP.attach_traffic(_quiet("q"), _counted("q", 2e9, 1e9, sizes=(40, 8)))
    prof.loc[:, "small_dram_bytes"] = 1.5e9
    c = gx.prediction.model._curves(prof)["q"]
    assert c.bytes_at(40) == pytest.approx(3e9) and c.bytes_at(8) == pytest.approx(1.5e9)
    assert c.bytes_at(24) == pytest.approx(2.25e9)


def test_bytes_counted_on_three_partitions_are_piecewise_linear_through_them():
    # a GEMM's count falls steeply, then flattens (measured H100: 5.19 GB on 16 SMs, 2.35 on 64, 1.39 on 132),
    # so the size nearest half the card is counted too and the bytes between are read through it
    counts = {40: 1.4e9, 24: 2.3e9, 12: 4.0e9, 8: 5.2e9}
    t = pd.concat([_counted("q", b / 2, b / 2, sizes=(k,)) for k, b in counts.items()], ignore_index=True)
    prof = TP.attach_traffic(_quiet("q"), t)
    row = prof.iloc[0]
    assert (row["small_sm_count"], row["small_dram_bytes"]) == (8, 5.2e9)
    assert (row["mid_sm_count"], row["mid_dram_bytes"]) == (24, 2.3e9)  # nearest 20 of the inner sizes
    c = gx.prediction.model._curves(prof)["q"]
    assert c.bytes_at(24) == pytest.approx(2.3e9) and c.bytes_at(40) == pytest.approx(1.4e9)
    assert c.bytes_at(16) == pytest.approx(3.75e9) and c.bytes_at(32) == pytest.approx(1.85e9)
    two = TP.attach_traffic(_quiet("q"), t[t["sm_count"].isin([40, 8])])  # two counts: the line between them
    assert math.isnan(two.iloc[0]["mid_sm_count"])
    assert gx.prediction.model._curves(two)["q"].bytes_at(24) == pytest.approx(3.3e9)


def test_measure_traffic_refuses_no_partition_before_any_gpu_work():
    with pytest.raises(ValueError, match="sm_counts"):
        T.measure_traffic("memory", sm_counts=())
    with pytest.raises(ValueError, match="sm_counts"):
        T.measure_traffic("memory", sm_counts=(0,))


def _recorded_pairs():
    from pathlib import Path

    pairs = Path(__file__).parent / "data" / "predict_sweeps.parquet"
    if "predict_profiles" not in gx.results.recorded_names() or not pairs.exists():
        pytest.skip("no recorded profiles in gcexplore/data or pair sweeps in tests/data")
    return gx.load_recorded("predict_profiles"), gx.load(pairs)


def test_the_recorded_profiles_counted_every_workloads_bytes_and_say_so():
    prof, _ = _recorded_pairs()
    src = TP.profile_sources(prof).set_index("workload")
    assert set(src["bytes"]) == {"measured"} and len(src) >= 12
    assert set(prof["bound"]) <= set(TP.BOUNDS) and set(prof["bound_source"]) == {"measured"}
    mem = prof[prof["workload"] == "memory"].iloc[0]
    assert abs(mem["dram_read_bytes"] / (8 * 2 ** 28) - 1) <= 0.05  # the triad's known bytes, counted on the GPU
    assert abs(mem["dram_write_bytes"] / (4 * 2 ** 28) - 1) <= 0.05


@pytest.mark.slow  # among the slowest on a 2-core machine (pytest --durations, 2026-12-02)
def test_the_shipped_margins_come_from_many_checked_pairs_and_hold_a_run_that_set_none_of_them():
    from pathlib import Path

    prof, sweeps = _recorded_pairs()
    fit = prof.attrs["fit"]
    # calibrated by conformal risk control (the pair as the unit) at 0.92 on the checked-only pairs of eight H100 runs on
    # two hosts (batches m1, m2): none of them a pair the terms were fitted on; before: ten runs' 496 pairs at 0.90
    # (3.7% / 4.6%), which held 88-89% of m2's layouts; before that 14 fitted pairs, and g1's one-buffer triads (17%)
    assert fit["margins_rule"] == "risk" and fit["margins_quantile"] == 0.92 and len(fit["margins_from"]) >= 900
    assert not {m.partition(":")[2] for m in fit["margins_from"]} & {p for p, s in sweeps.attrs["pairs"].items()
                                                                     if s["group"] in FIT_GROUPS}
    assert fit["earlier_model_error"][0] > 0.15
    # widened since (issue 46) to hold 90% of medians counted strictly (tests/test_predict_strict.py): never narrower
    assert all(p <= m for p, m in zip(fit["previous_model_error"], fit["model_error"]))
    assert fit["previous_model_error"][1] < fit["model_error"][1]
    kw = predict_kwargs(fit)
    # judged on a run whose pairs set no margin (batch k2's run S, shipped as tests/data/predict_sweeps_k2)
    path = Path(__file__).parent / "data" / "predict_sweeps_k2.parquet"
    if not path.exists():
        pytest.skip("no held-out run's sweeps in tests/data")
    held = gx.load(path)
    have = set(prof["workload"])
    inside = []
    for pair, spec in held.attrs["pairs"].items():
        if not {w.partition("=")[2] or w for w in spec["workloads"]} <= have:
            continue  # tanh / scale: not in the shipped profiles
        sw = held[held["pair"] == pair]
        e = gx.predict_error(gx.predict(prof, spec["workloads"], sorted(set(sw["layout"])), **kw), sw)
        inside.append(e["inside"].to_numpy())
    held_out = np.concatenate(inside)
    assert len(inside) >= 60 and held_out.mean() >= 0.9, held_out.mean()
    # without the margins the same intervals would not hold: the check can fail
    narrow = {**kw, "model_error": 0.0}
    missed = [gx.predict_error(gx.predict(prof, spec["workloads"], sorted(set(held[held["pair"] == p]["layout"])),
                                          **narrow), held[held["pair"] == p])["inside"].to_numpy()
              for p, spec in held.attrs["pairs"].items() if {w.partition("=")[2] or w for w in spec["workloads"]} <= have]
    assert np.concatenate(missed).mean() < held_out.mean() - 0.1


@pytest.mark.slow  # among the slowest on a 2-core machine (pytest --durations, 2026-12-02)
def test_the_tuner_started_at_the_predictions_finds_every_recorded_pairs_best_for_less():
    # the way a best split is chosen: start at the predicted best, confirm by measuring (replayed
    # over each recorded sweep); the predicted best alone misses some pairs by more than 3%
    prof, sweeps = _recorded_pairs()
    fit = prof.attrs["fit"]
    kw = predict_kwargs(fit)
    gaps, spent, plain_spent = {}, 0.0, 0.0
    for pair, spec in sweeps.attrs["pairs"].items():
        sw = sweeps[sweeps["pair"] == pair]
        pred = gx.predict(prof, spec["workloads"], sorted(set(sw["layout"])), **kw)
        guided, plain = gx.replay_tune(sw, pred), gx.replay_tune(sw)
        gaps[pair] = guided["gap"]
        spent, plain_spent = spent + guided["gpu_ms"], plain_spent + plain["gpu_ms"]
        assert guided["layouts_measured"] < guided["layouts"], pair
    assert len(gaps) >= 19 and np.mean([g <= 0.03 for g in gaps.values()]) >= 0.9, gaps
    assert spent < plain_spent


def test_the_cross_card_error_is_the_measured_scaling_error_of_the_shipped_alone_times():
    h100, _ = _recorded_pairs()
    if "predict_profiles_h200" not in gx.results.recorded_names():
        pytest.skip("no recorded H200 profiles")
    h200 = gx.load_recorded("predict_profiles_h200")
    for a, b in ((h100, h200), (h200, h100)):
        e = TP.scaling_error(a, b)
        assert len(e) >= 12 * 28  # every workload at every size on both cards
        p90 = float(e.abs().quantile(0.9))
        assert p90 <= TP.CROSS_CARD_ERROR <= p90 + 0.02, p90
        # one way: toward more bandwidth the scaled times are too fast (negative), toward less too slow
        faster = TP.card_of(b)["shared_bandwidth_gbs"] > TP.card_of(a)["shared_bandwidth_gbs"]
        assert (e.quantile(0.9) <= 0.03) if faster else (e.quantile(0.1) >= -0.03)


@pytest.mark.slow  # among the slowest on a 2-core machine (pytest --durations, 2026-12-02)
def test_h100_profiles_predict_the_h200_sweeps_inside_the_widened_interval():
    from pathlib import Path

    h100, _ = _recorded_pairs()
    path = Path(__file__).parent / "data" / "predict_sweeps_h200.parquet"
    if "predict_profiles_h200" not in gx.results.recorded_names() or not path.exists():
        pytest.skip("no recorded H200 profiles or sweeps")
    sweeps, card = gx.load(path), TP.card_of(gx.load_recorded("predict_profiles_h200"))
    fit = h100.attrs["fit"]
    kw = predict_kwargs(fit)
    wide, narrow, errors = [], [], []
    for pair, spec in sweeps.attrs["pairs"].items():
        sw = sweeps[sweeps["pair"] == pair]
        lays = sorted(set(sw["layout"]))
        e = gx.predict_error(gx.predict(h100, spec["workloads"], lays, card=card, **kw), sw)
        wide.append(e["inside"].to_numpy())
        errors.append(e["error"].abs().to_numpy())
        plain = gx.predict(TP.scale_profiles(h100, card), spec["workloads"], lays, **kw)  # not widened
        narrow.append(gx.predict_error(plain, sw)["inside"].to_numpy())
    assert len(wide) >= 19 and np.median(np.concatenate(errors)) <= 0.08  # the cross-card goal
    # the widening holds more of the other card's layouts than the same margins unwidened
    assert np.concatenate(wide).mean() >= 0.9 and np.concatenate(wide).mean() > np.concatenate(narrow).mean()



# ----------------------------------------------------------------------------- loaded latency


def test_loaded_latency_slows_a_workload_at_the_per_sm_limit_beside_load_below_saturation_only_as_fitted():
    # a streaming kernel on few SMs (at the per-SM limit: 100 GB/s/SM alone on 8 SMs) beside a
    # compute-bound one drawing 1200 GB/s on the rest: together 2000 of 3000 GB/s, so bandwidth
    # sharing slows neither; the loaded latency slows the streaming one by 1 + k x 1.0 x 0.4
    stream = _profile("stream", lambda k: 8.0 / k, bytes=800e6)  # 8 SMs: 1 ms, 800 MB: 800 GB/s
    gemm = _profile("gemm", lambda k: 128.0 / k, bytes=4800e6)  # 32 SMs: 4 ms, 1200 GB/s (ends last)
    profs = [stream, gemm]
    none = gx.predict(profs, ["stream", "gemm"], ["8+32"], model_error=0.0)
    for k in (0.5, 1.0):
        got = gx.predict(profs, ["stream", "gemm"], ["8+32"], model_error=0.0, loaded_latency=k)
        d = got.set_index("workload")["duration_ms"]
        assert d["stream"] == pytest.approx(none.set_index("workload")["duration_ms"]["stream"] * (1 + k * 0.4))
        # the GEMM draws 37.5 GB/s per SM, 0.375 of the limit, beside 800 of 3000 GB/s while the stream runs
        slow = 1 + k * 0.375 * 800 / 3000
        assert d["gemm"] == pytest.approx(d["stream"] + (4.0 - d["stream"] / slow), rel=1e-6)
        # fitted, not measured: the low end allows none, so a tuner never skips a layout for it
        assert got["makespan_low_ms"].iloc[0] == pytest.approx(none["makespan_low_ms"].iloc[0])
        assert got.attrs["loaded_latency"] == k
    assert SAT.latency_slowdown(1.0, 1.0, 0.0) == 1.0 and SAT.latency_slowdown(0.0, 1.0, 1.0) == 1.0
    # at saturation bandwidth sharing already slows it; the two are not multiplied
    hog = _profile("hog", lambda k: 128.0 / k, bytes=12000e6)  # 3000 GB/s on 32 SMs, 4 ms
    shared = gx.predict([stream, hog], ["stream", "hog"], ["8+32"], model_error=0.0)
    both = gx.predict([stream, hog], ["stream", "hog"], ["8+32"], model_error=0.0, loaded_latency=1.0)
    s, b = (x.set_index("workload")["duration_ms"]["stream"] for x in (shared, both))
    assert s > 1.0 and b == pytest.approx(max(s, 2.0), rel=1e-6)
    with pytest.raises(ValueError, match="loaded_latency"):
        gx.predict(profs, ["stream", "gemm"], loaded_latency=-1)


def test_the_probe_slowdown_counts_only_the_time_the_copy_overlapped():
    assert SAT.probe_slowdown(2.0, 1.0, 3.0) == pytest.approx(2.0)  # overlapped throughout: 2 ms for 1
    # outlasts the copy (1 ms): 4.5 ms for 4 alone = half the rate while the copy ran
    assert SAT.probe_slowdown(4.5, 4.0, 1.0) == pytest.approx(2.0)
    assert SAT.probe_slowdown(6.0, 4.0, 1.0) == SAT.PROBE_MAX_SLOWDOWN  # more than the copy could cause: capped
    assert SAT.probe_slowdown(0.9, 1.0, 3.0) == 1.0  # never faster than alone
    assert math.isnan(SAT.probe_slowdown(math.nan, 1.0, 3.0))
    # the part bandwidth sharing explains is not counted twice: a stream drawing 1500 GB/s beside the
    # copy's 3000 (of 3000) gets 1000 by demand, half DRAM-bound: 1.25x from sharing alone
    probe = {"probe_ms": 1.25, "probe_alone_ms": 1.0, "probe_copy_ms": 3.0, "probe_copy_alone_ms": 1.0,
             "probe_copy_bytes": 3.0e9}
    assert SAT.probe_excess(probe, 1.5e9, 3000.0) == pytest.approx(1.0)
    assert SAT.probe_excess({**probe, "probe_ms": 2.5}, 1.5e9, 3000.0) == pytest.approx(2.0)
    assert SAT.probe_excess({**probe, "probe_ms": 2.5}, 1e3, 3000.0) == pytest.approx(2.5, rel=1e-4)  # no DRAM
    assert SAT.probe_excess({**probe, "probe_ms": 2.5}, math.nan, 3000.0) == 2.5  # bytes unknown: all of it
    assert SAT.saturation_slowdown(2.0, 0.4, 0.5) == 1.0 and SAT.saturation_slowdown(2.0, 1.2, 0.5) == 2.0
    assert SAT.saturation_slowdown(2.0, 0.75, 0.5) == pytest.approx(1.5)
    assert SAT.saturation_slowdown(math.nan, 1.0, 0.5) == 1.0 and SAT.saturation_slowdown(2.0, 1.0, math.nan) == 1.0


def _probed(df, probe_ms, alone_ms, copy_ms):
    return df.assign(probe_sm_count=20.0, probe_ms=probe_ms, probe_alone_ms=alone_ms, probe_copy_ms=copy_ms,
                     probe_copy_alone_ms=copy_ms)


def test_the_saturation_term_slows_a_probed_workload_only_beside_others_near_saturation():
    # a workload that reads almost nothing from DRAM (so bandwidth sharing never slows it) but ran 2x
    # slower beside the copy; 1 ms on 8 SMs beside a co-runner on 32 SMs that outlasts it (4 ms)
    victim = _probed(_profile("victim", lambda k: 8.0 / k, bytes=1e6), 2.0, 1.0, 3.0)
    plain = _profile("victim", lambda k: 8.0 / k, bytes=1e6)
    # (onset, co-runner's DRAM GB/s: 3000 or 1200 of 3000) -> slowdown: all of it at saturation,
    # none below the onset, a quarter at 0.4 with the onset at 0.2
    want = {(0.5, "hog"): 2.0, (0.5, "light"): 1.0, (0.2, "light"): 1.25}
    for (on, name), slow in want.items():
        gb = {"hog": 12000e6, "light": 4800e6}[name]
        other = _profile(name, lambda k: 128.0 / k, bytes=gb)
        base = gx.predict([victim, other], ["victim", name], ["8+32"], model_error=0.0)
        got = gx.predict([victim, other], ["victim", name], ["8+32"], model_error=0.0, saturation_onset=on)
        unprobed = gx.predict([plain, other], ["victim", name], ["8+32"], model_error=0.0, saturation_onset=on)
        d = {k: x.set_index("workload")["duration_ms"]["victim"] for k, x in
             (("base", base), ("got", got), ("unprobed", unprobed))}
        assert d["base"] == pytest.approx(1.0, rel=1e-3) and d["unprobed"] == pytest.approx(d["base"])
        assert d["got"] == pytest.approx(slow, rel=1e-3), (on, name)
        # fitted, not measured: the low end allows none, so a tuner never skips a layout for it
        assert got["makespan_low_ms"].iloc[0] == pytest.approx(base["makespan_low_ms"].iloc[0])
        assert got.attrs["saturation_onset"] == on
    # beyond sharing: a streaming workload that sharing DRAM already slows is slowed by its probe's
    # excess on top (multiplied, not the larger of the two), as long as the saturating one runs
    stream = _probed(_profile("stream", lambda k: 8.0 / k, bytes=1.5e9), 2.0, 1.0, 3.0)
    hog = _profile("hog", lambda k: 128.0 / k, bytes=12000e6)
    share, both = (gx.predict([stream, hog], ["stream", "hog"], ["8+32"], model_error=0.0, saturation_onset=on)
                   .set_index("workload")["duration_ms"]["stream"] for on in (None, 0.5))
    assert 1.0 < share < 2.0 and both == pytest.approx(2 * share, rel=1e-3)
    with pytest.raises(ValueError, match="saturation_onset"):
        gx.predict([victim, other], ["victim", "light"], saturation_onset=1.5)


def test_the_saturation_ramp_by_everyones_demand_counts_the_workloads_own_and_still_saturates_beside_a_hog():
    assert SAT.saturation_input(900.0, 2100.0, 3000.0, "others") == pytest.approx(0.4)
    assert SAT.saturation_input(900.0, 2100.0, 3000.0, "total") == pytest.approx(0.7)
    with pytest.raises(ValueError, match="load must be one of"):
        SAT.saturation_input(1.0, 2.0, 3.0, "mine")
    # a victim drawing 900 GB/s (1 ms on 8 SMs), 2x slower beside the copy, beside a co-runner drawing
    # 1200 GB/s of 3000 (together 0.7, no sharing) and beside a hog that saturates DRAM alone; onset 0.5
    victim = _probed(_profile("victim", lambda k: 8.0 / k, bytes=0.9e9), 2.0, 1.0, 3.0)
    light = _profile("light", lambda k: 128.0 / k, bytes=4800e6)
    hog = _profile("hog", lambda k: 128.0 / k, bytes=12000e6)
    d = {}
    for other in (light, hog):
        name = str(other["workload"].iloc[0])
        for load in (None, "others", "total"):
            got = gx.predict([victim, other], ["victim", name], ["8+32"], model_error=0.0,
                             saturation_onset=None if load is None else 0.5, saturation_load=load or "others")
            d[name, load] = got.set_index("workload")["duration_ms"]["victim"]
            assert got.attrs["saturation_load"] == (load or "others")
    # beside the light one: the others alone stay below the onset (none of the excess), everyone's
    # demand passes it (0.7: 0.4 of the way to saturation -> 1 + 0.4 x (2 - 1))
    assert d["light", None] == pytest.approx(1.0, rel=1e-3) and d["light", "others"] == pytest.approx(1.0, rel=1e-3)
    assert d["light", "total"] == pytest.approx(1.4, rel=1e-3)
    # beside the hog both are at saturation: the whole excess on top of the sharing
    assert d["hog", "others"] == pytest.approx(2 * d["hog", None], rel=1e-3)
    assert d["hog", "total"] == pytest.approx(d["hog", "others"], rel=1e-3)
    with pytest.raises(ValueError, match="load must be one of"):
        gx.predict([victim, light], ["victim", "light"], saturation_onset=0.5, saturation_load="mine")


def _large(df, k, ms, alone_ms, copy_ms, copy_alone_ms, copy_bytes=3.2e9):
    return df.assign(probe_large_sm_count=float(k), probe_large_ms=ms, probe_large_alone_ms=alone_ms,
                     probe_large_copy_ms=copy_ms, probe_large_copy_alone_ms=copy_alone_ms, probe_copy_bytes=copy_bytes)


def test_the_co_runners_measured_aggression_weighs_its_demand_in_a_neighbours_saturation_ramp():
    # the copy (3.2 GB in 1.6 ms alone: 2000 GB/s) beside a workload drawing 1000 GB/s (1 GB in 1 ms) that
    # outlasts it, on a 3000 GB/s card: sharing does not slow the copy (3000 asked, 3000 given); measured
    # 1.5x -> aggression 1.5; measured 1.0x -> 1.0 (nothing beyond sharing)
    row = {"probe_large_sm_count": 32.0, "probe_large_ms": 3.0, "probe_large_alone_ms": 1.0,
           "probe_large_copy_ms": 2.4, "probe_large_copy_alone_ms": 1.6, "probe_copy_bytes": 3.2e9}
    assert SAT.aggression(row, 1e9, 3000.0) == pytest.approx(1.5)
    assert SAT.aggression({**row, "probe_large_copy_ms": 1.6}, 1e9, 3000.0) == pytest.approx(1.0)
    # a workload that ended first (0.8 ms): the copy counted slowed only while it ran beside it
    short = {**row, "probe_large_ms": 0.8, "probe_large_copy_ms": 1.6 + 0.8 * (1 - 1 / 1.5)}
    assert SAT.aggression(short, 1e9, 3000.0) == pytest.approx(1.5)
    # where sharing explains part (the co-runner draws 2000 GB/s too: 4000 asked of 3000, the copy's speed
    # 1 / (1/3 + 2/3 x 4/3) = 9/11 by demand), only the rest: measured 1.5 x 11/9 -> 1.5
    assert SAT.aggression({**row, "probe_large_copy_ms": 1.6 * 1.5 * 11 / 9}, 2e9, 3000.0) == pytest.approx(1.5)
    assert math.isnan(SAT.aggression({"probe_ms": 1.0}, 1e9, 3000.0))  # no large probe
    assert math.isnan(SAT.aggression(row, math.nan, 3000.0))  # its bytes unknown
    assert [SAT.aggressor_weight(a, 1.0) for a in (0.9, 1.0, 1.5, 2.0, 3.0)] == pytest.approx([0, 0, 0.5, 1, 1])
    assert SAT.aggressor_weight(1.5, 0.5) == 1.0 and SAT.aggressor_weight(1.5, None) == 1.0
    assert SAT.aggressor_weight(math.nan, 1.0) == 1.0  # not probed: its demand counts in full, as before
    # a victim that reads almost nothing (2x slower beside the copy) beside two co-runners that each draw
    # 2400 of 3000 GB/s (0.8: past the onset 0.5, 0.6 of the ramp): one starves the copy in its probe
    # (3x while beside it, sharing explains 1.3x: aggression 2.3), one does not (below sharing's 1.3x)
    victim = _probed(_profile("victim", lambda k: 8.0 / k, bytes=1e6), 2.0, 1.0, 3.0)
    d = {}
    for name, copy_ms in (("rough", 4.8), ("polite", 1.6)):
        other = _large(_profile(name, lambda k: 4.0, bytes=9600e6), 32, 8.0, 4.0, copy_ms, 1.6)
        a = SAT.aggression(other.iloc[0].to_dict(), 9600e6, 3000.0)
        assert (a > 2.0) if name == "rough" else (a < 1.0), (name, a)
        for agg in (None, 1.0):
            got = gx.predict([victim, other], ["victim", name], ["8+32"], model_error=0.0, shared_bandwidth_gbs=3000.0,
                             saturation_onset=0.5, saturation_aggression=agg)
            d[name, agg] = got.set_index("workload")["duration_ms"]["victim"]
            assert got.attrs["saturation_aggression"] == agg
    # without the weight both give the victim 0.6 of its excess; with it the polite one none, the rough one all
    # (within 0.5%: the victim's own 1 GB/s shares DRAM with them too)
    assert d["rough", None] == pytest.approx(1.6, rel=5e-3) and d["polite", None] == pytest.approx(1.6, rel=5e-3)
    assert d["polite", 1.0] == pytest.approx(1.0, rel=5e-3) and d["rough", 1.0] == pytest.approx(1.6, rel=5e-3)
    with pytest.raises(ValueError, match="saturation_aggression"):
        gx.predict([victim, other], ["victim", "polite"], saturation_onset=0.5, saturation_aggression=0.0)


def test_by_default_a_workload_not_memory_bound_takes_its_polite_probes_excess_beside_a_polite_co_runner():
    # the victim above (2x slower beside the copy, reading almost nothing), probed beside the polite streamer too: no
    # slower there; beside a co-runner drawing 2400 of 3000 GB/s that starves the copy no more than sharing does
    polite = dict(probe_polite_sm_count=20.0, probe_polite_ms=1.0, probe_polite_alone_ms=1.0, probe_polite_copy_ms=3.0,
                  probe_polite_copy_alone_ms=3.0, probe_polite_bytes=9600e6)
    victim = _probed(_profile("victim", lambda k: 8.0 / k, bytes=1e6), 2.0, 1.0, 3.0).assign(**polite)
    # its own probe of the two references: the copy starves the copy (3x), the polite streamer does not
    refs = {f"probe_ref{r}_{c}": v for r, cm in (("copy", 4.8), ("polite", 1.6))
            for c, v in (("sm_count", 32.0), ("ms", 8.0), ("alone_ms", 4.0), ("copy_ms", cm), ("copy_alone_ms", 1.6))}
    other = _large(_profile("other", lambda k: 4.0, bytes=9600e6), 32, 8.0, 4.0, 1.6, 1.6).assign(**refs, **polite)
    kw = dict(model_error=0.0, shared_bandwidth_gbs=3000.0, saturation_onset=0.5)

    def victim_ms(v, **extra):
        got = gx.predict([v, other], ["victim", "other"], ["8+32"], **kw, **extra)
        return got.set_index("workload")["duration_ms"]["victim"]

    assert victim_ms(victim, saturation_polite=False) == pytest.approx(1.6, rel=5e-3)  # the copy's: 0.6 of the ramp
    assert victim_ms(victim) == pytest.approx(1.0, rel=5e-3)  # on by default: the polite probe's (none)
    # a memory-bound victim keeps the copy's excess either way: two streamers are not a streamer and the polite one
    hog = victim.assign(bytes=1.2e9)
    assert gx.prediction.traffic_profile.with_traffic_columns(hog)["bound"].iloc[0] == "memory"
    assert victim_ms(hog) == pytest.approx(victim_ms(hog, saturation_polite=False))
    assert victim_ms(hog) > victim_ms(hog.drop(columns=[c for c in hog if c.startswith("probe_")]))


def test_the_probe_below_saturation_sets_each_workloads_own_onset_of_the_saturation_ramp():
    # a victim reading almost nothing: 2x slower beside the copy on 20 of 40 SMs (the copy drawing 3.2 GB in 3 ms
    # there), 1.5x on 32; on 34 beside the copy on 6 drawing 2000 of 3000 GB/s alone (x = 2/3): 1.25x
    victim = _probed(_profile("victim", lambda k: 8.0 / k, bytes=1e6), 2.0, 1.0, 3.0).assign(
        probe_copy_bytes=3.2e9, probe_large_sm_count=32.0, probe_large_ms=1.5, probe_large_alone_ms=1.0,
        probe_large_copy_ms=3.0, probe_large_copy_alone_ms=3.0, probe_low_sm_count=34.0, probe_low_ms=1.25,
        probe_low_alone_ms=1.0, probe_low_copy_ms=1.6, probe_low_copy_alone_ms=1.6)
    row = victim.iloc[0].to_dict()
    at = {r: SAT.probed_onset(row, lambda k: 1e6, 3000.0, 40, r) for r in ("flat", "interp")}
    # it took r of its saturated excess there (flat: 2x -> r = 0.25; interp at 0.85 of the card: 1.5x -> 0.5):
    # the ramp through (2/3, r) starts at (2/3 - r) / (1 - r)
    assert at["flat"] == pytest.approx((2 / 3 - 0.25) / 0.75) and at["interp"] == pytest.approx((2 / 3 - 0.5) / 0.5)
    assert SAT.probed_onset({**row, "probe_low_ms": 1.0}, lambda k: 1e6, 3000.0, 40) == pytest.approx(2 / 3)  # none
    assert SAT.probed_onset({**row, "probe_low_ms": 2.5}, lambda k: 1e6, 3000.0, 40) == 0.0  # all of it already
    assert math.isnan(SAT.probed_onset({**row, "probe_low_sm_count": math.nan}, lambda k: 1e6, 3000.0, 40))
    assert math.isnan(SAT.probed_onset({**row, "probe_ms": 1.0, "probe_large_ms": 1.0}, lambda k: 1e6, 3000.0, 40))
    # beside a co-runner drawing 1800 of 3000 GB/s (0.6): the fitted onset 0.7 gives none, the victim's own
    # (flat: 0.556) a tenth of the way -> 1 + 0.1 x (2 - 1)
    light = _profile("light", lambda k: 4.0, bytes=7200e6)
    d = {ramp: gx.predict([victim, light], ["victim", "light"], ["8+32"], model_error=0.0, saturation_onset=0.7,
                          saturation_ramp=ramp).set_index("workload")["duration_ms"]["victim"]
         for ramp in SAT.SATURATION_RAMPS}
    assert d["fitted"] == pytest.approx(1.0, rel=5e-3) and d["probed"] == pytest.approx(1.1, rel=5e-3)
    # a workload without a low probe keeps the fitted onset
    plain = _probed(_profile("victim", lambda k: 8.0 / k, bytes=1e6), 2.0, 1.0, 3.0)
    p = {ramp: gx.predict([plain, light], ["victim", "light"], ["8+32"], model_error=0.0, saturation_onset=0.5,
                          saturation_ramp=ramp).set_index("workload")["duration_ms"]["victim"]
         for ramp in SAT.SATURATION_RAMPS}
    assert p["probed"] == pytest.approx(p["fitted"]) and p["fitted"] > 1.1
    with pytest.raises(ValueError, match="saturation_ramp must be one of"):
        gx.predict([victim, light], ["victim", "light"], saturation_onset=0.5, saturation_ramp="measured")


def test_the_probe_table_says_per_probe_what_the_saturation_term_reads():
    # the victim of the probed-onset test: three probes; a workload without probes has no row
    victim = _probed(_profile("victim", lambda k: 8.0 / k, bytes=1e6), 2.0, 1.0, 3.0).assign(
        probe_copy_bytes=3.2e9, probe_large_sm_count=32.0, probe_large_ms=1.5, probe_large_alone_ms=1.0,
        probe_large_copy_ms=3.0, probe_large_copy_alone_ms=3.0, probe_low_sm_count=34.0, probe_low_ms=1.25,
        probe_low_alone_ms=1.0, probe_low_copy_ms=2.0, probe_low_copy_alone_ms=1.6)
    t = SAT.probe_table(pd.concat([victim, _quiet("plain")], ignore_index=True)).set_index("probe")
    assert list(t.index) == ["half", "large", "low"] and set(t["workload"]) == {"victim"}
    assert list(t["sm_count"]) == [20, 32, 34] and t.loc["low", "share"] == pytest.approx(34 / 40)
    # the copy alone: 3.2 GB in 3 ms on half and large, 1.6 ms on low, of 3000 GB/s
    assert list(t["copy_load"]) == pytest.approx([3.2 / 3 / 3, 3.2 / 3 / 3, 2 / 3])
    assert list(t["slowdown"]) == pytest.approx([2.0, 1.5, 1.25])
    assert list(t["excess"]) == pytest.approx([2.0, 1.5, 1.25])
    # the copy (2.0 ms against 1.6) outlasted the workload (1.25 ms): slowed only while it ran beside it
    assert t.loc["low", "copy_slowdown"] == pytest.approx(1 / (1 - 0.4 / 1.25))
    assert t.loc["half", "copy_slowdown"] == 1.0
    # its onset (interp): 1.25 of 1.5 at 0.85 of the card -> r = 0.5, x = 2/3 -> (2/3 - 1/2) / (1/2)
    assert t["probed_onset"].iloc[0] == pytest.approx(1 / 3) and t["aggression"].iloc[0] == pytest.approx(1.0)


def test_the_saturation_excess_follows_the_workloads_share_of_the_sms_between_its_two_probes():
    pts = [(0.5, 3.0), (0.8, 1.5)]  # 3x beyond sharing on half the card, 1.5x on 80% of it
    assert [SAT.excess_at(pts, x, "flat") for x in (0.3, 0.65, 0.9)] == [3.0, 3.0, 3.0]
    assert [SAT.excess_at(pts, x, "interp") for x in (0.3, 0.65, 0.9)] == pytest.approx([3.0, 2.25, 1.5])
    assert [SAT.excess_at(pts, x, "extrap") for x in (0.4, 0.9, 1.5)] == pytest.approx([3.5, 1.0, 1.0])
    assert SAT.excess_at(pts[:1], 0.9, "interp") == 3.0 and math.isnan(SAT.excess_at([], 0.5, "interp"))
    with pytest.raises(ValueError, match="share rule must be one of"):
        SAT.excess_at(pts, 0.5, "linear")
    # a workload that reads almost nothing from DRAM, 2x slower beside the copy on 20 of 40 SMs and not
    # slowed on 32; beside a hog that saturates DRAM on any size
    victim = _probed(_profile("victim", lambda k: 8.0 / k, bytes=1e6), 2.0, 1.0, 3.0).assign(
        probe_large_sm_count=32.0, probe_large_ms=0.25, probe_large_alone_ms=0.25, probe_large_copy_ms=3.0,
        probe_large_copy_alone_ms=3.0)
    hog = _profile("hog", lambda k: 4.0, bytes=12000e6)
    alone = {20: 0.4, 26: 8.0 / 26, 32: 0.25}
    want = {"flat": {20: 2.0, 26: 2.0, 32: 2.0}, "interp": {20: 2.0, 26: 1.5, 32: 1.0}}
    for rule, slow in want.items():
        got = gx.predict([victim, hog], ["victim", "hog"], [f"{k}+{40 - k}" for k in alone], model_error=0.0,
                         saturation_onset=0.5, saturation_share=rule)
        d = got[got["workload"] == "victim"].set_index("sm_count")["duration_ms"]
        assert [d[k] / alone[k] for k in alone] == pytest.approx([slow[k] for k in alone], rel=5e-3), rule
        assert got.attrs["saturation_share"] == rule
    with pytest.raises(ValueError, match="share rule"):
        gx.predict([victim, hog], ["victim", "hog"], saturation_onset=0.5, saturation_share="linear")


@pytest.mark.slow  # among the slowest on a 2-core machine (pytest --durations, 2026-12-02)
def test_the_fit_chooses_the_loaded_latency_and_saturation_onset_with_the_lowest_error_on_the_fitted_pairs():
    from gcexplore.prediction.check import (AGGRESSION_CANDIDATES, LATENCY_CANDIDATES, SATURATION_CANDIDATES,
                                            TOTAL_ONSETS)

    prof, sweeps = _recorded_pairs()
    cases = [(prof, spec["workloads"], sweeps[sweeps["pair"] == pair]) for pair, spec in
             sweeps.attrs["pairs"].items() if spec["group"] in FIT_GROUPS]
    fit = fit_model(cases, aggressions=(None,))  # the shipped fit predates the co-runners' aggression
    per, sat = fit["latency_median_abs_error"], fit["saturation_median_abs_error"]
    assert set(per) == set(LATENCY_CANDIDATES)
    assert {None, *SATURATION_CANDIDATES[1:]} <= set(sat) <= {None, *SATURATION_CANDIDATES[1:], *TOTAL_ONSETS}
    # the terms are chosen together: the chosen onset's score is the lowest of all, below every
    # loaded latency's without the saturation term (the recorded profiles carry copy probes)
    assert sat[fit["saturation_onset"]] == min(sat.values()) <= min(per.values())
    assert fit["loaded_latency"] > 0 and fit["saturation_onset"] is not None  # the recorded H100 pairs want both
    # two probes per workload (batch g1): the share rule is chosen with them, the lowest of the three
    shares = fit["share_median_abs_error"]
    assert set(shares) == set(SAT.SHARE_RULES) and shares[fit["saturation_share"]] == min(shares.values())
    assert shares["flat"] > shares[fit["saturation_share"]]  # the recorded fitted pairs want the share term
    # the ramp's load (the others' demand, or everyone's) with that share rule: the lower of the two
    loads = fit["load_median_abs_error"]
    assert set(loads) == set(SAT.SATURATION_LOADS) and loads[fit["saturation_load"]] == min(loads.values())
    assert fit["saturation_load"] == prof.attrs["fit"].get("saturation_load", "others")
    shipped = prof.attrs["fit"]
    assert all(shipped[k] == fit[k] for k in ("loaded_latency", "sharing", "saturation_onset", "l2_bandwidth_gbs",
                                              "saturation_share"))
    assert fit["saturation_aggression"] is None and fit["saturation_ramp"] == "fitted"  # no low probes recorded
    # with the co-runners' measured aggression (their large probes) tried too: the scale with the lowest
    # score, or none; on these 7 pairs (batch g1) the largest scale, below the fit without it (session j)
    both = fit_model(cases)
    aggs = both["aggression_median_abs_error"]
    assert set(aggs) == {"none" if a is None else a for a in AGGRESSION_CANDIDATES}
    assert aggs[both["saturation_aggression"] or "none"] == min(aggs.values()) < aggs["none"]
    assert both["saturation_aggression"] == 1.5 and both["ramp_median_abs_error"] == {"fitted": aggs[1.5]}


def test_the_margins_of_a_chosen_model_are_calibrated_on_the_given_pairs_as_the_fit_does():
    from gcexplore.prediction.check import calibrate_margins

    prof, sweeps = _recorded_pairs()
    fitted = [(prof, spec["workloads"], sweeps[sweeps["pair"] == pair]) for pair, spec in
              sweeps.attrs["pairs"].items() if spec["group"] == "fitted"]
    kw = predict_kwargs(prof.attrs["fit"])
    # on the pairs the shipped model was fitted on (batch g1): the margins fit_model calibrated there (shipped
    # until session j)
    got = calibrate_margins(fitted, **kw)
    assert got["model_error"] == pytest.approx(tuple(prof.attrs["fit"]["earlier_model_error"]), abs=1e-9)
    assert got["coverage"] >= 0.9
    # the lower margin is what the most over-predicted layout needs: memory_a + memory_b shares one buffer in
    # these sweeps (batch g1; fixed in the bench since), so without that pair the margin below shrinks
    rest = calibrate_margins([c for c in fitted if c[1][0] != "memory_a=memory"], **kw)
    assert rest["model_error"][0] < 0.5 * got["model_error"][0]
    with pytest.raises(ValueError, match="at least one"):
        calibrate_margins([], **kw)


def test_loaded_latency_lowers_the_error_on_recorded_pairs_it_was_not_chosen_on():
    # chosen on the 7 fitted pairs; the 22 checked and fresh pairs judge it
    prof, sweeps = _recorded_pairs()
    kw = predict_kwargs(prof.attrs["fit"])
    assert kw["terms"].loaded_latency > 0
    errs = {True: [], False: []}
    for pair, spec in sweeps.attrs["pairs"].items():
        if spec["group"] in FIT_GROUPS:
            continue
        sw = sweeps[sweeps["pair"] == pair]
        for on in (True, False):
            pred = gx.predict(prof, spec["workloads"], sorted(set(sw["layout"])), **{**kw, "terms": dataclasses.replace(
                kw["terms"], loaded_latency=kw["terms"].loaded_latency * on)})
            errs[on].append(gx.predict_error(pred, sw)["error"].abs().to_numpy())
    with_, without = (np.median(np.concatenate(errs[k])) for k in (True, False))
    assert len(errs[True]) >= 20 and with_ < without, (with_, without)


def test_the_saturation_term_brings_every_recorded_pair_it_was_not_chosen_on_within_8_percent():
    # chosen on the 7 fitted pairs (batch f1, H100); its 24 checked-only pairs judge it: beside the
    # copy or the triad, which saturate DRAM, a convolution, an FFT, a GEMM chain slow more than
    # sharing DRAM explains, and their probes say by how much
    prof, sweeps = _recorded_pairs()
    kw = predict_kwargs(prof.attrs["fit"])
    assert kw["terms"].saturation_onset is not None
    med = {True: {}, False: {}}
    for pair, spec in sweeps.attrs["pairs"].items():
        if spec["group"] in FIT_GROUPS:
            continue
        sw = sweeps[sweeps["pair"] == pair]
        for on in (True, False):
            pred = gx.predict(prof, spec["workloads"], sorted(set(sw["layout"])),
                              **{**kw, "terms": dataclasses.replace(
                                  kw["terms"], saturation_onset=kw["terms"].saturation_onset if on else None)})
            med[on][pair] = float(gx.predict_error(pred, sw)["error"].abs().median())
    assert len(med[True]) >= 20 and max(med[True].values()) <= 0.08, med[True]  # the every-pair goal
    assert max(med[False].values()) > 0.08  # the check can fail: without the term some pair misses it
    assert np.mean(list(med[True].values())) < np.mean(list(med[False].values()))


def _best_gaps(prof, sweeps, **kw) -> dict:
    """Per pair not fitted on: how far the predicted best's measured makespan lies above the measured best."""
    return {pair: gx.prediction_facts(gx.predict(prof, spec["workloads"], sorted(set(sw["layout"])), **kw),
                                      sw)["best_gap"]
            for pair, spec in sweeps.attrs["pairs"].items() if spec["group"] not in FIT_GROUPS
            for sw in [sweeps[sweeps["pair"] == pair]]}


def test_the_excess_by_sm_share_finds_the_best_split_of_a_gemm_holding_most_sms_beside_the_copy_or_triad():
    # chosen on the 7 fitted pairs of batch g1 (H100, two probes per workload: 64 and 104 SMs); judged on
    # the 24 pairs of another H100 run (batch f1: confirm + fresh2) never used to choose it. With the
    # half-card probe's excess at every share, a matmul or GEMM chain on 104-112 SMs beside the triad /
    # copy on the rest was predicted 15-36% slow, so the predicted best lay 25% / 19% off
    from pathlib import Path

    path = Path(__file__).parent / "data" / "predict_sweeps_f1.parquet"
    prof, _ = _recorded_pairs()
    if not path.exists():
        pytest.skip("no recorded batch-f1 pair sweeps in tests/data")
    kw = predict_kwargs(prof.attrs["fit"])
    assert kw["terms"].saturation_share != "flat" and prof["probe_large_ms"].notna().all()
    sweeps = gx.load(path)
    got, flat = (_best_gaps(prof, sweeps, **{**kw, "terms": dataclasses.replace(kw["terms"], saturation_share=share)})
                 for share in (kw["terms"].saturation_share, "flat"))
    assert len(got) == 24
    for pair in ("matmul+memory", "chain+copy"):
        assert got[pair] <= 0.03 < 0.15 < flat[pair], (pair, got[pair], flat[pair])
    ok = {k: sum(g <= 0.03 for g in v.values()) for k, v in (("share", got), ("flat", flat))}
    assert ok["share"] > ok["flat"], ok  # fails without the share dependence


def test_the_excess_by_sm_share_loses_no_best_split_on_the_recorded_pairs_it_was_not_chosen_on():
    # the same run's 34 checked-only pairs (batch g1): the share rule finds at least as many best splits
    # within 3% as the flat excess, and more where a probed workload holds most SMs (sigmoid + FFT)
    prof, sweeps = _recorded_pairs()
    kw = predict_kwargs(prof.attrs["fit"])
    got, flat = (_best_gaps(prof, sweeps, **{**kw, "terms": dataclasses.replace(kw["terms"], saturation_share=share)})
                 for share in (kw["terms"].saturation_share, "flat"))
    assert len(got) >= 30
    assert all(got[p] <= 0.03 for p in flat if flat[p] <= 0.03), {p: got[p] for p in flat if flat[p] <= 0.03}
    assert sum(g <= 0.03 for g in got.values()) > sum(g <= 0.03 for g in flat.values())


def test_the_tuner_refuses_a_prediction_for_another_card_and_takes_one_scaled_to_it():
    # batch e1: H100 profiles predicting a tuner that ran on an H200 skipped every layout but the
    # predicted best on 9 of 11 pairs (its slower times bounded them out) and missed by up to 17%
    from pathlib import Path

    path = Path(__file__).parent / "data" / "predict_sweeps_h200.parquet"
    if "predict_profiles_h200" not in gx.results.recorded_names() or not path.exists():
        pytest.skip("no recorded H200 profiles or pair sweeps")
    prof, _ = _recorded_pairs()
    sweeps, h200 = gx.load(path), gx.load_recorded("predict_profiles_h200")
    sw = sweeps[sweeps["pair"] == "fft+sort"]
    names = sweeps.attrs["pairs"]["fft+sort"]["workloads"]
    with pytest.raises(ValueError, match="prediction is for the NVIDIA H100.*tuner measures on the NVIDIA H200"):
        gx.replay_tune(sw, gx.predict(prof, names))
    scaled = gx.predict(prof, names, card=TP.card_of(h200))
    assert scaled.attrs["device_name"] == "NVIDIA H200" and gx.replay_tune(sw, scaled)["predicted"]
    assert gx.replay_tune(sw, gx.predict(h200, names))["gap"] <= 0.03
