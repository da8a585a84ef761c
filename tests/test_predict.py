"""The prediction model on synthetic profiles with known answers, profiles on disk, the tuner's use
of predictions, and (marker gpu) a pair's prediction against its measured sweep."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import gcexplore as gx
from gcexplore.experiments import search as S
from gcexplore.prediction import model as P

PEAK = 3000.0  # GB/s
CARD = 40


def _profile(name, time_at, *, bytes=math.nan, ws=math.nan, sizes=range(8, CARD, 8), reps=5, spread=0.0):  # noqa: A002
    """Synthetic solo profile on a 40-SM card (sizes 8..32 first, 32..8 last)."""
    rows = []
    for pos in ("first", "last"):
        for k in sizes:
            kk = k if pos == "first" else CARD - k
            for r in range(reps):
                rows.append({"workload": name, "position": pos, "sm_count": kk, "rep": r,
                             "duration_ms": time_at(kk) * (1 + spread * (r - reps // 2) / reps), "start_ms": 0.0,
                             "bytes": bytes, "flops": math.nan, "working_set_bytes": ws,
                             "shared_bandwidth_gbs": PEAK, "l2_bytes": 50 * 2 ** 20, "device_sm_count": CARD,
                             "sm_alignment": 8, "device_name": "test card", "run_id": "r"})
    df = pd.DataFrame(rows, columns=P.PROFILE_COLUMNS)
    df.attrs["kind"] = "solo_profile"
    return df


def _compute(name):
    return _profile(name, lambda k: 8.0 / k, bytes=1e3)


def _stream(name, gb=3.0):
    # saturates the card's bandwidth from 16 SMs on: 3 GB at 3000 GB/s is 1 ms
    return _profile(name, lambda k: max(1.0, 16.0 / k) * gb / 3.0, bytes=gb * 1e9)


def _layout(pred, label):
    return pred[pred["layout"] == label].set_index("workload")


def test_pure_compute_pair_has_no_interference():
    pred = gx.predict([_compute("a"), _compute("b")])
    assert set(pred["layout"]) == {"8+32", "16+24", "24+16", "32+8"}
    assert np.allclose(pred["interference"], 1.0)
    assert np.allclose(pred["duration_ms"], pred["alone_ms"])
    row = _layout(pred, "16+24").loc["a"]
    assert row["makespan_ms"] == pytest.approx(8.0 / 16)  # the slower side: 16 SMs
    assert row["split_loss"] == pytest.approx((8.0 / 16) / (8.0 / 32))


def test_two_bandwidth_bound_workloads_share_the_peak():
    pred = gx.predict([_stream("a"), _stream("b")])
    row = _layout(pred, "16+24")
    # alone each moves 3 GB in 1 ms at the card's 3000 GB/s; together 6 GB at 3000 GB/s: 2 ms
    assert row["alone_ms"].max() == pytest.approx(1.0)
    assert row["makespan_ms"].iloc[0] == pytest.approx(2.0, rel=1e-6)
    assert row["interference"].iloc[0] == pytest.approx(2.0, rel=1e-6)


def test_bandwidth_left_over_by_a_finished_workload_goes_to_the_other():
    pred = gx.predict([_stream("small", gb=1.5), _stream("big", gb=3.0)], terms={"sharing": "equal"})
    row = _layout(pred, "16+24")
    # equal shares of 1500 GB/s: small (1.5 GB) ends at 1 ms having let big move 1.5 GB; big's last 1.5 GB
    # then takes 0.5 ms at the full 3000 GB/s
    assert row.loc["small", "duration_ms"] == pytest.approx(1.0, rel=1e-6)
    assert row.loc["big", "duration_ms"] == pytest.approx(1.5, rel=1e-6)


def test_l2_working_sets_that_fit_together_do_not_touch_dram():
    mib = 2 ** 20
    fit = gx.predict([_profile(n, lambda k: 1.0, bytes=50 * 4 * mib * 1e3, ws=4 * mib) for n in "ab"])
    spill = gx.predict([_profile(n, lambda k: 1.0, bytes=50 * 30 * mib * 1e3 / 1e3, ws=30 * mib) for n in "ab"],
                       shared_bandwidth_gbs=1.0)
    assert np.allclose(fit["interference"], 1.0)
    assert (spill["interference"] > 1.5).all()


def test_intervals_widen_where_sizes_are_missing():
    full = _profile("a", lambda k: 0.2 + 8.0 / k, bytes=0.0, spread=0.02)
    sparse = full[full["sm_count"].isin([8, 32])]
    other = _compute("b")
    dense = _layout(gx.predict([full, other]), "16+24").loc["a"]
    thin = _layout(gx.predict([sparse, other]), "16+24").loc["a"]
    assert dense["alone_measured"] and not thin["alone_measured"]
    assert (thin["alone_high_ms"] - thin["alone_low_ms"]) > 3 * (dense["alone_high_ms"] - dense["alone_low_ms"])
    assert thin["alone_low_ms"] <= 0.2 + 8.0 / 16 <= thin["alone_high_ms"]


def test_unknown_bytes_widen_the_interval_upward_only():
    known = gx.predict([_stream("a"), _compute("b")], model_error=0.0)
    unknown = gx.predict([_stream("a"), _profile("b", lambda k: 8.0 / k)], model_error=0.0)
    k, u = _layout(known, "32+8").iloc[0], _layout(unknown, "32+8").iloc[0]
    assert u["makespan_ms"] == pytest.approx(k["makespan_ms"])
    assert u["makespan_high_ms"] > k["makespan_high_ms"] * 1.2
    assert unknown.attrs["unknown_bytes"] == ["b"]


def test_profiles_save_and_load(tmp_path):
    profs = [_compute("a"), _stream("b")]
    path = gx.save_profiles(profs, tmp_path / "p.parquet")
    back = gx.load_profiles(path)
    pd.testing.assert_frame_equal(back.reset_index(drop=True), P.check_profiles(profs), check_dtype=False)
    a = gx.predict(profs)
    b = gx.predict(back)
    assert np.allclose(a["makespan_ms"], b["makespan_ms"])


@pytest.mark.parametrize("break_it, words", [
    (lambda d: d.assign(duration_ms=-1.0), "positive finite"),
    (lambda d: d.drop(columns="bytes"), "missing"),
    (lambda d: d.iloc[0:0], "no rows"),
    (lambda d: d.assign(position="middle"), "position"),
    (lambda d: d.assign(bytes=-5.0), "bytes must be >= 0"),
])
def test_bad_profiles_are_refused_clearly(break_it, words):
    with pytest.raises(P.ProfileError, match=words):
        gx.predict([break_it(_compute("a")), _compute("b")])


def test_profiles_of_two_cards_are_refused():
    with pytest.raises(P.ProfileError, match="different cards"):
        gx.predict([_compute("a"), _compute("b").assign(device_name="other card")])


def test_bad_requests_are_refused():
    with pytest.raises(ValueError, match="no profile for workload 'c'"):
        gx.predict([_compute("a"), _compute("b")], ["a", "c"])
    with pytest.raises(ValueError, match="sharing"):
        gx.predict([_compute("a"), _compute("b")], terms={"sharing": "fair"})
    with pytest.raises(ValueError, match="2 positive SM counts"):
        gx.predict([_compute("a"), _compute("b")], layouts=["8+8+8"])


def test_one_profile_serves_a_pair_of_itself():
    pred = gx.predict([_stream("memory")], ["m1=memory", "m2=memory"])
    assert pred.attrs["workloads"] == ["m1", "m2"]
    assert _layout(pred, "16+24")["interference"].iloc[0] == pytest.approx(2.0, rel=1e-6)


def test_recorded_h100_sweep_is_predicted_within_the_goal():
    sc = gx.load_recorded("scaling")
    peak = float(gx.summarize(sc).query("workload == 'memory'")["bandwidth_gbs"].max())
    prof = P.profile_from(sc, shared_bandwidth_gbs=peak, l2_bytes=50 * 2 ** 20)
    f = gx.prediction_facts(gx.predict(prof, ["compute", "memory"]), gx.load_recorded("sweep"))
    assert f["layouts"] == 16 and f["median_abs_error"] <= 0.08 and f["best_gap"] <= 0.03


def test_plot_predict_draws_the_prediction_and_the_measurement():
    sc = gx.load_recorded("scaling")
    prof = P.profile_from(sc, shared_bandwidth_gbs=3050.0, l2_bytes=50 * 2 ** 20)
    pred = gx.predict(prof, ["compute", "memory"])
    fig = gx.plot_predict(pred, gx.load_recorded("sweep"))
    gids = {a.get_gid() for ax in fig.axes for a in [*ax.lines, *ax.collections, *ax.texts]}
    assert {"predicted", "interval", "predicted_best", "split_loss", "interference", "facts"} <= gids
    line = next(a for a in fig.axes[0].lines if a.get_gid() == "predicted")
    assert np.allclose(line.get_ydata(), P.predicted_layouts(pred)["makespan_ms"])


def _recorded_measure(sweep, names, seed=0):
    conc = sweep[sweep["mode"] == "concurrent"]
    data = {}
    for lab, g in conc.groupby("layout"):
        data[tuple(int(x) for x in lab.split("+"))] = [
            (float(gg["makespan_ms"].max()), tuple(float(gg.set_index("workload")["duration_ms"][n]) for n in names))
            for _, gg in g.groupby("rep")]
    rng = np.random.default_rng(seed)
    return data, lambda lay, n: [data[lay][i] for i in rng.integers(0, len(data[lay]), n)]


def test_tuner_search_with_predictions_measures_less_for_the_same_answer():
    ts = gx.load_recorded("torch_sweep")
    prof = P.profile_from(ts, shared_bandwidth_gbs=3050.0, l2_bytes=50 * 2 ** 20)
    pred = gx.predict(prof, ["matmul", "sigmoid"])
    prior = {tuple(int(x) for x in lab.split("+")): {"makespan": (g["makespan_ms"].iloc[0], g["makespan_low_ms"].iloc[0])}
             for lab, g in pred.groupby("layout")}
    data, measure = _recorded_measure(ts, ["matmul", "sigmoid"])
    plain = S.search(sorted(data), measure, names=["matmul", "sigmoid"])
    data, measure = _recorded_measure(ts, ["matmul", "sigmoid"])
    guided = S.search(sorted(data), measure, names=["matmul", "sigmoid"], prior=prior)
    reps = [sum(v["reps"] for v in o.visits) for o in (plain, guided)]
    assert guided.answer == plain.answer
    assert reps[1] <= reps[0] / 2 + 5
    assert guided.visits[0]["layout"] == P.predicted_layouts(pred).sort_values("makespan_ms")["layout"].iloc[0]


def test_a_layout_predicted_slower_is_first_measured_with_confirm_repeats_and_a_close_one_gets_more():
    ts = gx.load_recorded("torch_sweep")
    pred = gx.predict(P.profile_from(ts, shared_bandwidth_gbs=3050.0, l2_bytes=50 * 2 ** 20), ["matmul", "sigmoid"])
    prior = {tuple(int(x) for x in lab.split("+")): {"makespan": (g["makespan_ms"].iloc[0], g["makespan_low_ms"].iloc[0])}
             for lab, g in pred.groupby("layout")}
    runs = {}
    for confirm in (None, 3):
        data, measure = _recorded_measure(ts, ["matmul", "sigmoid"])
        runs[confirm] = S.search(sorted(data), measure, S.Settings(confirm_repeats=confirm),
                                 names=["matmul", "sigmoid"], prior=prior)
    full, cheap = runs[None], runs[3]
    assert cheap.answer == full.answer
    best = tuple(int(x) for x in cheap.answer.split("+"))
    first = {}
    for v in cheap.visits:
        first.setdefault(v["layout"], v["reps"])
    for lab, n in first.items():  # each first visit: 3 where predicted slower than the answer by > 1%, else 5
        lay = tuple(int(x) for x in lab.split("+"))
        slower = prior[lay]["makespan"][0] > prior[best]["makespan"][0] * 1.01 and lab != cheap.visits[0]["layout"]
        assert n in ((3,) if slower else (5, 6)), (lab, n, slower)
    assert sum(v["reps"] for v in cheap.visits) < sum(v["reps"] for v in full.visits)
    with pytest.raises(ValueError, match="confirm_repeats"):
        S.Settings(confirm_repeats=6)  # at most repeats


def test_replayed_tuner_finds_the_sweeps_best_and_predictions_cut_what_it_measures():
    ts = gx.load_recorded("torch_sweep")
    pred = gx.predict(P.profile_from(ts, shared_bandwidth_gbs=3050.0, l2_bytes=50 * 2 ** 20), ["matmul", "sigmoid"])
    med = gx.analysis.makespan_stats(ts, "concurrent").set_index("layout")["median_ms"]
    plain, guided = gx.replay_tune(ts), gx.replay_tune(ts, pred)
    assert plain["best"] == guided["best"] == med.idxmin() and plain["layouts"] == med.size
    assert guided["gap"] <= 0.01 and plain["gap"] <= 0.01  # the search's tolerance
    assert not plain["predicted"] and guided["predicted"]
    assert guided["layouts_measured"] < plain["layouts_measured"] and guided["gpu_ms"] < plain["gpu_ms"]
    assert plain["gpu_ms"] <= plain["sweep_gpu_ms"]
    # a prediction whose best is elsewhere (mirrored) and promises nothing (lower ends 0): the
    # search starts there and still walks to the measured best
    lay = P.predicted_layouts(pred)
    mirror = dict(zip(lay["layout"], lay["makespan_ms"].to_numpy()[::-1]))
    wrong = pred.assign(makespan_ms=pred["layout"].map(mirror), makespan_low_ms=0.0)
    wrong.attrs.update(pred.attrs)
    moved = gx.replay_tune(ts, wrong)
    assert moved["gap"] <= 0.01 and moved["layouts_measured"] > guided["layouts_measured"]
    with pytest.raises(ValueError, match="concurrent"):
        gx.replay_tune(ts[ts["mode"] == "alone"])


def test_tune_refuses_a_prediction_of_other_workloads_before_the_gpu():
    from gcexplore.experiments.tuner import _prior

    pred = gx.predict([_compute("a"), _compute("b")])
    with pytest.raises(ValueError, match="the prediction is for workloads"):
        _prior(pred, ["x", "y"], "test card")


@pytest.mark.gpu
def test_pair_prediction_against_its_sweep_on_the_gpu():
    from gcexplore import workloads as W

    step = list(range(16, 129, 16))
    peak = gx.card_bandwidth(0)
    wls = {"compute": W.compute(), "memory": W.memory()}
    try:
        profs = [gx.solo_profile(w, sm_counts=step, repeats=3, shared_bandwidth_gbs=peak) for w in wls.values()]
        sweep = gx.sweep(wls, sm_counts=step, modes=("concurrent",), repeats=5, warmup=1, progress=False)
    finally:
        for w in wls.values():
            w.close()
    f = gx.prediction_facts(gx.predict(profs, ["compute", "memory"]), sweep)
    assert f["median_abs_error"] <= 0.08, f
    assert f["best_gap"] <= 0.03, f
    assert max(p.attrs["gpu_time_ms"] for p in profs) <= gx.analysis.gpu_time_ms(sweep) * 23 / 6


def test_the_tuner_takes_a_prediction_not_the_profiles():
    """The tuner takes a prior (a frame of predicted makespans); it does not call the predictor."""
    from gcexplore.experiments.tuner import _prior

    profiles = [_compute("a"), _compute("b")]
    with pytest.raises(ValueError, match=r"predict= takes a gcexplore.predict\(...\) result.*predict\(profiles"):
        _prior(profiles[0], ["a", "b"])
    assert set(_prior(gx.predict(profiles), ["a", "b"], "test card"))  # the prediction itself is taken
