"""Rounds and the run as the unit of noise (no GPU): intervals with the between-round component,
the run-to-run floor for single-round sides, rounds through save/load, the round plan."""

from __future__ import annotations

import math
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gcexplore
from gcexplore.results.synthetic import sweep
from gcexplore.analysis.comparison import compare, row_verdict
from gcexplore.analysis.stats import (DEFAULT_FLOOR, Floor, noise_floor, round_ratio_ci, rounds_needed, t_cdf,
                                      t_quantile)
from gcexplore import workloads as W
from gcexplore.experiments.runner import round_plan
from gcexplore.schema import Options, auto_rounds, round_sizes


def test_student_t_quantiles_match_tables():
    for p, df, want in ((0.975, 1, 12.7062), (0.975, 4, 2.7764), (0.995, 10, 3.1693), (0.95, 30, 1.6973)):
        assert t_quantile(p, df) == pytest.approx(want, abs=2e-4)
    assert t_quantile(0.975, math.inf) == pytest.approx(1.95996, abs=1e-4)
    assert t_cdf(0.0, 3) == pytest.approx(0.5)


def test_a_run_effect_larger_than_the_within_run_spread_gives_no_fast_or_slow():
    # Old-style single-round sides: each (layout, mode) moves by 1.5% per run, repetitions by 0.25%.
    decided = 0
    for seed in range(10):
        a = sweep(2 * seed, rounds=1, round_sigma=0.0, run_sigma=0.015)
        b = sweep(2 * seed + 1, rounds=1, round_sigma=0.0, run_sigma=0.015)
        c = compare(a, b)
        decided += c.counts()["FAST"] + c.counts()["SLOW"]
        # the within-run interval alone (the old method) would have called many of them
        old = [gcexplore.analysis.stats.ratio_ci(x, y, c.settings["level"]) for x, y in _pairs(a, b)]
        assert sum(lo > 1.01 or hi < 1 / 1.01 for _, lo, hi in old) > 5
    assert decided == 0


def _pairs(a, b):
    ga = a.groupby(["layout", "mode", "rep"])["makespan_ms"].max().groupby(level=[0, 1])
    gb = b.groupby(["layout", "mode", "rep"])["makespan_ms"].max().groupby(level=[0, 1])
    bb = {k: g.to_numpy() for k, g in gb}
    return [(g.to_numpy(), bb[k]) for k, g in ga]


def test_a_between_round_effect_is_seen_by_rounds():
    # Rounds draw the effect again: a 1.5% per-round wobble over 5 rounds decides nothing falsely ...
    null = [compare(sweep(2 * s, round_sigma=0.015), sweep(2 * s + 1, round_sigma=0.015)).counts() for s in range(10)]
    assert sum(c["FAST"] + c["SLOW"] for c in null) <= 0.01 * 640
    # ... and a 3% shift at a 0.3% round spread is SLOW nearly everywhere
    shifted = [compare(sweep(2 * s, round_sigma=0.003), sweep(2 * s + 1, round_sigma=0.003, shift=1.03)).counts()
               for s in range(5)]
    assert sum(c["SLOW"] for c in shifted) >= 0.9 * 320 and sum(c["FAST"] for c in shifted) == 0


def test_a_run_level_effect_rounds_cannot_see_is_held_by_the_floor_run_part():
    # every round of a run shares the run's offset: only the floor's run_sd keeps it from deciding
    a, b = sweep(1, round_sigma=0.001, run_sigma=0.01), sweep(2, round_sigma=0.001, run_sigma=0.01)
    naive = compare(a, b, floor=Floor(0.001, 0.0, "test")).counts()
    held = compare(a, b, floor=Floor(0.001, 0.01, "test")).counts()
    assert naive["FAST"] + naive["SLOW"] > 0
    assert held["FAST"] + held["SLOW"] == 0


def test_a_single_round_side_is_refused_a_verdict_the_floor_does_not_allow():
    rng = np.random.default_rng(0)
    va = np.exp(rng.normal(0, 0.001, 20))
    vb = 1.03 * np.exp(rng.normal(0, 0.001, 20))
    out = row_verdict(va, vb, [0] * 20, [0] * 20, np.full(20, np.nan), np.full(20, np.nan), level=0.99,
                      min_effect=0.01, floor=Floor(0.02, 0.0, "test floor"))
    assert out["verdict"] == "UNCLEAR"
    assert "one round" in out["reason"] and "from the noise floor" in out["reason"]  # its source: once per table
    assert math.isfinite(out["rounds_needed"]) and out["rounds_needed"] >= 2
    assert f"about {int(out['rounds_needed'])} rounds per side" in out["reason"]
    # a difference far beyond the floor is still decided from one round
    big = row_verdict(va, 1.5 * vb, [0] * 20, [0] * 20, np.full(20, np.nan), np.full(20, np.nan), level=0.99,
                      min_effect=0.01, floor=Floor(0.02, 0.0, "test floor"))
    assert big["verdict"] == "SLOW"


def test_rounds_needed_grows_with_the_spread_and_stops_at_the_run_floor():
    z = 2.58
    few, many = rounds_needed(1.03, 0.005, 0.01, z), rounds_needed(1.03, 0.02, 0.01, z)
    assert 2 <= few < many < math.inf
    assert rounds_needed(1.03, 0.005, 0.01, z, run_sd=0.02) == math.inf


def test_round_interval_covers_the_truth_at_its_level():
    rng = np.random.default_rng(5)
    hits, n = 0, 400
    for _ in range(n):
        def side(shift):
            eff = np.repeat(rng.normal(0, 0.01, 5), 4)
            return shift * np.exp(eff + rng.normal(0, 0.002, 20)), np.repeat(np.arange(5), 4)
        (a, ra), (b, rb) = side(1.0), side(1.02)
        r = round_ratio_ci(a, b, ra, rb, 0.9)
        hits += r["low"] <= 1.02 <= r["high"]
    assert 0.85 <= hits / n <= 0.96


def test_rounds_round_trip_through_save_and_load(tmp_path):
    df = sweep(1, rounds=4, reps=8)
    for ext in ("parquet", "csv"):
        p = gcexplore.save(df, tmp_path / f"r.{ext}")
        back = gcexplore.load(p)
        assert back["round"].tolist() == df["round"].tolist()
        assert str(back["round"].dtype) == "int64"


def test_results_from_before_rounds_load_as_one_round(tmp_path):
    df = gcexplore.load_recorded("sweep")
    old = df.drop(columns="round")
    old.attrs = dict(df.attrs)
    p = tmp_path / "old.parquet"
    old.to_parquet(p)
    back = gcexplore.load(p)
    assert set(back["round"]) == {0}
    c = compare(back, back.assign(run_id="other"))
    assert c.counts()["FAST"] + c.counts()["SLOW"] == 0  # one round each: the floor holds


def test_round_plan_visits_each_layout_once_per_round_in_fresh_orders():
    layouts = [(str(k), k) for k in range(8, 132, 8)]
    plan = round_plan(layouts, 15, 5, seed="run-1")
    assert len(plan) == 5 * len(layouts)
    orders = []
    for r in range(5):
        part = [(key, arg) for key, (arg, rnd) in plan if rnd.index == r]
        assert sorted(a for _, a in part) == sorted(a for _, a in layouts)
        assert all(key.endswith(f"round {r}") for key, _ in part)
        orders.append([a for _, a in part])
    assert len({tuple(o) for o in orders}) == 5  # shuffled afresh each round
    firsts = sorted({rnd.first_rep for _, (_, rnd) in plan})
    assert firsts == [0, 3, 6, 9, 12] and round_sizes(15, 5) == [3] * 5
    assert round_plan(layouts, 15, 5, seed="run-1") == plan  # the run id fixes the order (resume)
    one = round_plan(layouts, 20, 1)
    assert [k for k, _ in one] == [k for k, _ in layouts]


def test_round_options_are_checked():
    assert auto_rounds(15, None) == 5 and auto_rounds(20, None) == 5 and auto_rounds(5, None) == 1
    assert auto_rounds(20, 2) == 2
    with pytest.raises(ValueError, match=r"rounds \(6\) must not exceed repeats \(5\)"):
        Options(repeats=5, rounds=6)
    assert Options(repeats=6, rounds=3).metadata("sweep")["rounds"] == 3


def test_noise_floor_lookup(tmp_path):
    p = tmp_path / "floor.csv"
    p.write_text("device_name,workload,round_sd,run_sd,rounds,runs,source\n"
                 "H100,gemm,0.01,0.002,5,4,bench\nH100,sort,0.004,0,5,4,bench\n")
    f = noise_floor("H100", ["sort"], table=str(p))
    assert (f.round_sd, f.run_sd) == (0.004, 0.0) and "sort" in f.source
    g = noise_floor("H100", ["my_kernel"], table=str(p))
    assert g.round_sd == 0.01 and "not measured" in g.source  # the card's largest stands in
    other = noise_floor("other card", ["sort"], table=str(p))  # a card never measured: the default floor...
    assert other.default and other.round_sd == DEFAULT_FLOOR.round_sd
    assert other.run_sd == 0.0  # ...with the run part the cards recorded for sort (none here)
    assert noise_floor("other card", ["gemm"], table=str(p)).run_sd == 0.002
    with pytest.raises(ValueError, match="standard deviation"):
        Floor(1.5)


def test_a_card_never_measured_gets_a_run_part_from_the_cards_that_have_one(tmp_path, monkeypatch):
    from gcexplore.analysis.stats import default_floor
    from gcexplore.results.floor_table import FLOOR_ENV

    monkeypatch.delenv(FLOOR_ENV, raising=False)  # the shipped table alone

    p = tmp_path / "floor.csv"
    p.write_text("device_name,workload,round_sd,run_sd,rounds,runs,source\n"
                 "H100,compute,0.0005,0.003,5,6,b\nH200,compute,0.0004,0.001,5,6,b\n"
                 "H200,memory,0.0008,0.002,5,6,b\nH100,gemm,0.01,0.005,5,6,b\n")
    f = noise_floor("a new card", ["compute", "memory"], table=str(p))
    assert f == default_floor(["memory", "compute"], table=str(p)) and f.default
    assert f.run_sd == pytest.approx(math.hypot(0.003, 0.002))  # each workload's largest, in quadrature
    assert f.round_sd == DEFAULT_FLOOR.round_sd
    assert "H100" in f.source and "H200" in f.source and "in quadrature" in f.source
    g = noise_floor("a new card", ["my_kernel"], table=str(p))
    assert g.run_sd == 0.005 and "recorded on no card" in g.source  # a name no card recorded: the largest row
    assert not noise_floor("H100", ["compute"], table=str(p)).default
    assert default_floor(table=str(tmp_path / "missing.csv")) == DEFAULT_FLOOR
    # the shipped table: the default's run part is the largest recorded for each workload, computed here apart
    shipped = pd.read_csv(Path(gcexplore.__file__).parent / "data" / "noise_floor.csv")
    top = shipped.groupby("workload")["run_sd"].max()
    d = noise_floor("a card no one measured", ["compute", "memory"])
    assert d.run_sd == pytest.approx(math.hypot(top["compute"], top["memory"])) and d.run_sd > 0
    # a card of one's own, recorded in the table the environment names, is no longer a default
    monkeypatch.setenv(FLOOR_ENV, str(p))
    assert noise_floor("H100", ["gemm"]) == Floor(0.01, 0.005, "H100, gemm, b")
    assert not noise_floor("NVIDIA H200", ["compute"]).default  # read beside the shipped table, not instead


def test_a_pairs_floor_takes_both_workloads_run_parts_in_quadrature(tmp_path):
    p = tmp_path / "floor.csv"
    p.write_text("device_name,workload,round_sd,run_sd,rounds,runs,source\n"
                 "H100,compute,0.0005,0.003,5,6,batch b\nH100,memory,0.0008,0,5,6,batch b\n"
                 "H100,compute,0.0004,0.006,15,8,batch e\n")  # compute recorded twice: each part's largest
    f = noise_floor("H100", ["compute", "memory"], table=str(p))
    assert f.run_sd == pytest.approx(math.hypot(0.006, 0.0)) and f.round_sd == 0.0008
    assert "compute (batch b; batch e) + memory (batch b); run parts in quadrature" in f.source
    assert noise_floor("H100", ["compute"], table=str(p)) == Floor(0.0005, 0.006, "H100, compute, batch b; batch e")
    q = tmp_path / "floor2.csv"  # (tables are cached by path)
    q.write_text(p.read_text() + "H100,memory,0.0008,0.004,15,8,batch e\n")
    g = noise_floor("H100", ["memory", "compute"], table=str(q))
    assert g.run_sd == pytest.approx(math.hypot(0.006, 0.004))  # an interval that holds both workloads' run effects
    assert g.run_sd > max(0.006, 0.004)


def test_a_pair_whose_quiet_workload_has_the_larger_round_part_is_held_by_the_other_ones_run_part(tmp_path,
                                                                                                   monkeypatch):
    # x4's campaign-vs-alone misses: memory (the larger round part, run part 0) used to stand for the pair while
    # compute moved by a run effect; with the run parts combined compare finds the floor itself and decides nothing
    from gcexplore.results import floor_table

    p = tmp_path / "floor.csv"
    p.write_text("device_name,workload,round_sd,run_sd,rounds,runs,source\n"
                 "H100,compute,0.0005,0.008,15,8,test\nH100,memory,0.001,0,15,8,test\n")
    monkeypatch.setattr(floor_table, "shipped_path", lambda: str(p))
    decided = held = 0
    for seed in range(6):
        a = sweep(2 * seed, device_name="H100", round_sigma=0.0005, run_sigma=0.008)
        b = sweep(2 * seed + 1, device_name="H100", round_sigma=0.0005, run_sigma=0.008)
        old = compare(a, b, floor=Floor(0.001, 0.0, "the noisier row alone (memory)")).counts()
        decided += old["FAST"] + old["SLOW"]
        c = compare(a, b)
        assert "run parts in quadrature" in c.settings["floor_text"]
        held += c.counts()["FAST"] + c.counts()["SLOW"]
    assert decided > 10  # the old rule called these nulls FAST/SLOW
    assert held == 0


def test_compare_prints_the_floor_it_used():
    c = compare(sweep(1, rounds=1), sweep(2, rounds=1))
    assert "noise floor" in c.settings["floor_text"]
    assert c.table["reason"].str.contains("one round").all()


def test_the_tuners_search_adds_rounds_not_doublings():
    from gcexplore.experiments import search as S

    rng = np.random.default_rng(2)
    cands = [(k, 132 - k) for k in range(8, 129, 8)]
    calls = []

    def measure(layout, n):  # each call is a round: the layout moves by 1% per round, reps by 0.1%
        calls.append((layout, n))
        true = 1.0 + 0.5 * ((layout[0] - 72) / 132) ** 2
        eff = rng.normal(0, 0.01)
        return [(true * np.exp(eff + rng.normal(0, 0.001)),) * 1 + ((0.5, 0.5),) for _ in range(n)]

    out = S.search(cands, measure, S.Settings(repeats=4, max_repeats=24))
    assert {n for _, n in calls} == {4}  # every visit is one round of `repeats` repetitions
    per = {}
    for lay, _ in calls:
        per[lay] = per.get(lay, 0) + 1
    assert max(per.values()) >= 2  # close rivals got more rounds
    assert all("round" in v for v in out.visits)
    best = min(cands, key=lambda c: abs(c[0] - 72))
    assert abs(int(out.answer.split("+")[0]) - best[0]) <= 16


def test_the_calibration_bench_recomputes_its_rates_from_recorded_sides(tmp_path):

    C = _compare_real()
    rng = np.random.default_rng(4)
    raw = []
    for role, shift in (("u", 1.0), ("s", 1.04)):
        for side in range(4):
            for k in (16, 64, 132):
                for r in range(5):
                    eff = rng.normal(0, 0.003)
                    for i in range(3):
                        raw.append({"kind": "gemm", "role": role, "side": side, "shift": shift - 1, "sm_count": k,
                                    "rep": 3 * r + i, "round": r, "duration_ms": shift * 132 / k * np.exp(eff + rng.normal(0, 0.001)),
                                    "sm_clock_mhz_before": 1980.0, "power_w_before": 300.0, "sm_clock_mhz": 1980.0,
                                    "power_w": 300.0, "device_name": "synthetic", "run_id": f"{role}{side}"})
    p = tmp_path / "raw.parquet"
    pd.DataFrame(raw).to_parquet(p)
    out = C.recompute_frames(pd.read_parquet(p), min_effect=0.01, warmup=1)["overall"]
    assert out["null_comparisons"] == 3 and out["null_rows"] == 9 and out["shift_rows"] == 12
    assert out["new_false_decisions"] == 0 and out["new_false_gate"] == 0
    assert out["new_power"] >= 0.9
    # a cheaper setting from the same recording: each side's first 2 rounds, each round's first 2 repetitions
    sub = C.subsample(pd.DataFrame(raw), rounds=2, reps=2)
    assert set(sub["round"]) == {0, 1} and (sub.groupby(["role", "side", "sm_count", "round"]).size() == 2).all()
    assert set(sub["rep"] % 3) == {0, 1}  # the first two of each round, not any two
    fewer = C.recompute_frames(pd.read_parquet(p), min_effect=0.01, warmup=1, use_rounds=2, use_reps=2)["overall"]
    assert fewer["null_rows"] == 9 and (fewer["new_power"] <= out["new_power"])


def test_the_shipped_calibration_reproduces_its_rates_and_meets_the_bar():
    """The recorded real-GPU calibration (bench/compare_real.py): recomputed here from its sides,
    the rates are those it recorded, null pairs give no FAST/SLOW, and no null pair fails the gate."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    data = root / "gcexplore" / "data" / "calibration"
    recorded = json.loads((data / "compare_real.json").read_text())
    C = _compare_real()
    raw = pd.read_parquet(data / "compare_real_raw.parquet")
    raw = raw[~raw["kind"].str.endswith("@process")]
    # the floor the package ships now may differ from the one the run had: old-method rates are floor-free
    got = C.recompute_frames(raw, min_effect=recorded["args"]["min_effect"], warmup=recorded["args"]["warmup"])
    for kind, rates in recorded["kinds"].items():
        assert got[kind]["null_rows"] == rates["null_rows"] and got[kind]["shift_rows"] == rates["shift_rows"]
        assert got[kind]["old_false_decisions"] == pytest.approx(rates["old_false_decisions"])
    overall = got["overall"]
    assert overall["null_comparisons"] >= 20 and overall["shift_rows"] >= 20
    assert len({k.split("@")[0] for k in recorded["kinds"]}) >= 5
    assert overall["new_false_decisions"] <= 0.01 and overall["new_false_gate"] == 0


# ------------------------------------------------------------------ inputs drawn again per round


class _FakeStream:
    def __init__(self, handle):
        self.handle = handle
        self.device = types.SimpleNamespace(device_id=0)

    def __cuda_stream__(self):
        return (0, self.handle)


def _fake_torch(log):
    import contextlib

    class Tensor:
        def __init__(self, what):
            self.what = what
            log.append(("alloc", what))

        def __del__(self):
            log.append(("free", self.what))

    torch = types.SimpleNamespace(uint8="u8")
    torch.cuda = types.SimpleNamespace(get_stream_from_external=lambda h, device=None: h,
                                       stream=lambda s: contextlib.nullcontext())
    torch.empty = lambda n, dtype=None, device=None: Tensor(f"pad{len(log)}")
    return torch, Tensor


def test_a_setup_workload_allocates_afresh_each_round_before_dropping_the_old(monkeypatch):
    from gcexplore.workloads import workload as wmod

    log = []
    torch, Tensor = _fake_torch(log)
    monkeypatch.setattr(wmod, "_import", lambda module, pip: torch)
    made = []

    def setup():
        x = Tensor(f"x{len(made)}")
        made.append(x.what)
        return lambda: log.append(("run", x.what))

    w = W.from_torch(setup=setup, name="chain")
    assert w.name == "chain" and w.new_round is not None
    s = _FakeStream(7)
    w(stream=s)
    w(stream=s)
    assert made == ["x0"] and [e for e in log if e[0] == "run"] == [("run", "x0"), ("run", "x0")]
    w.new_round()
    w(stream=_FakeStream(8))
    assert made == ["x0", "x1"] and log[-1] == ("run", "x1")
    i_new, i_free = log.index(("alloc", "x1")), log.index(("free", "x0"))
    assert i_new < i_free  # the new inputs exist before the old are dropped (so they land elsewhere)
    pads = [i for i, e in enumerate(log) if e[0] == "alloc" and e[1].startswith("pad")]
    assert len(pads) == 2 and pads[1] < i_new  # behind a pad of random size
    w.close()
    assert ("free", "x1") in log
    w(stream=s)  # used again after close: inputs made again
    assert made[-1] == "x2"


def test_setup_and_fn_are_exclusive_and_setup_must_return_a_callable(monkeypatch):
    from gcexplore.workloads import workload as wmod

    with pytest.raises(TypeError, match="fn .* or setup .* exactly one"):
        W.from_torch()
    with pytest.raises(TypeError, match="exactly one"):
        W.from_cupy(lambda: None, setup=lambda: (lambda: None))
    assert W.from_torch(lambda: None).new_round is None  # a plain fn keeps its inputs for the run
    torch, _ = _fake_torch([])
    monkeypatch.setattr(wmod, "_import", lambda module, pip: torch)
    w = W.from_torch(setup=lambda: 3, name="bad")
    with pytest.raises(TypeError, match="setup\\(\\) of workload 'bad' must return the callable to time, got 3"):
        w(stream=_FakeStream(1))


def test_an_experiment_draws_setup_inputs_again_when_a_round_starts():
    from gcexplore.experiments.experiment import Experiment

    calls = []
    wl = W.Workload("w", lambda *, stream: None, new_round=lambda: calls.append("new"))
    run = Experiment("scaling", None, Options(), [wl, W.Workload("plain", lambda *, stream: None)], "r")
    run.enter_round(0)
    assert calls == []  # round 0 is where it starts: inputs are made at the first call anyway
    run.enter_round(1)
    run.enter_round(1)  # within a round: nothing
    run.enter_round(2)
    assert calls == ["new", "new"]


# ------------------------------------------------------------------ a round far off


def _side(rng, level, rounds=10, reps=2, far=None, sd_round=0.004):
    v, r = [], []
    for k in range(rounds):
        eff = rng.normal(0, sd_round) + (math.log(2.5) if k == far else 0.0)  # a whole round 2.5x slower
        v += list(level * np.exp(eff + rng.normal(0, 0.001, reps)))
        r += [k] * reps
    return np.array(v), r


def test_a_round_far_off_is_set_aside_and_named():
    from gcexplore.analysis.stats import steady_rounds

    kept, aside = steady_rounds(np.log([1.0, 1.004, 0.997, 1.001, 2.5, 1.002]))
    assert aside == 1 and kept.max() < math.log(1.01)
    assert steady_rounds(np.log([1.0, 1.004, 2.5]))[1] == 0  # too few rounds to call one far off
    assert steady_rounds(np.log([1.0, 1.0, 1.01, 1.2, 1.3, 1.4]))[1] == 0  # more than a third: the spread itself
    rng = np.random.default_rng(11)
    a, ra = _side(rng, 1.0, far=3)
    b, rb = _side(rng, 1.03)
    kept_t = row_verdict(a, b, ra, rb, np.full(a.size, np.nan), np.full(b.size, np.nan), level=0.99,
                         min_effect=0.01, floor=Floor(0.0, 0.001, "test"))
    assert kept_t["verdict"] == "SLOW" and "1 of A's 10 rounds set aside" in kept_t["reason"]
    # without the rule the one slow round would have swallowed the 3% (mean of logs and its spread)
    r = round_ratio_ci(a, b, ra, rb, 0.99, floor=Floor(0.0, 0.001, "test"))
    assert r["aside_a"] == 1 and r["aside_b"] == 0 and r["rounds_a"] == 10


def test_null_runs_with_a_stray_round_are_never_fast_or_slow():
    rng = np.random.default_rng(5)
    decided = 0
    for i in range(40):
        a, ra = _side(rng, 1.0, far=int(rng.integers(10)) if i % 2 else None)
        b, rb = _side(rng, 1.0, far=int(rng.integers(10)) if i % 3 == 0 else None)
        v = row_verdict(a, b, ra, rb, np.full(a.size, np.nan), np.full(b.size, np.nan), level=0.99,
                        min_effect=0.01, floor=Floor(0.0, 0.001, "test"))
        decided += v["verdict"] in ("FAST", "SLOW")
    assert decided == 0


def _compare_real():
    from gcexplore.analysis import sequential as calibration

    return calibration


def test_the_calibration_takes_each_kinds_run_part_from_separate_processes():
    """bench/compare_real.py --processes: every process measures every kind once; paired across processes
    (calibration.pair_processes), the floor's run part of a kind comes from the differences between
    processes (a process-level offset shows there, and not for a kind without one), a process that
    returned nothing leaves its neighbours paired, and the floor's source names the processes and the batch."""
    C = _compare_real()
    rng = np.random.default_rng(7)
    kinds = ["copy", "gemm_chain"]
    frames = []
    for n in range(8):
        if n == 2:  # a process that died: only it is missing
            continue
        rows = []
        for kind in kinds:
            offset = 0.006 * (-1) ** n if kind == "gemm_chain" else 0.0  # the run part
            for role, shift in (("u", 0.0), ("s", 0.03)):
                for k in (16, 64, 132):
                    for r in range(6):
                        eff = rng.normal(0, 0.002)
                        rows.append({"kind": kind, "role": role, "shift": shift, "sm_count": k, "rep": r, "round": r,
                                     "duration_ms": (1 + shift) * 132 / k * np.exp(offset + eff),
                                     "sm_clock_mhz_before": 1980.0, "power_w_before": 300.0, "sm_clock_mhz": 1980.0,
                                     "power_w": 300.0, "device_name": "synthetic", "run_id": f"{n}{role}"})
        frames.append(pd.DataFrame(rows))
    paired, floors = C.pair_processes(frames, kinds, "synthetic", "batch d1")
    by = {f["workload"]: f for f in floors}
    assert set(by) == {"copy", "gemm_chain"} and all(f["runs"] == 7 for f in floors)
    assert by["gemm_chain"]["run_sd"] > 0.003 > by["copy"]["run_sd"]
    assert 0.001 < by["gemm_chain"]["round_sd"] < 0.003
    assert all("7 separate processes" in f["source"] and "batch d1" in f["source"] for f in floors)
    got = C.recompute_frames(pd.concat(paired, ignore_index=True), min_effect=0.01, warmup=1)
    assert got["copy@process"]["null_comparisons"] == 6 and got["gemm_chain@process"]["shift_rows"] == 6 * 3
    assert got["gemm_chain@process"]["shift_median_ratio"] == pytest.approx(1.03, abs=0.01)  # pairs not crossed
    # process i's shifted side is paired with process i - 1's unshifted one: the first shifted side has none
    one = pd.concat(paired, ignore_index=True)
    assert sorted(set(one.loc[one["role"] == "s", "run_id"])) == sorted(f"{n}s" for n in (1, 3, 4, 5, 6, 7))


def _shipped_process_floors(card, batch, processes):
    """The shipped floor rows of one batch's separate-process runs on a card, each checked against the
    floors recomputed from its recorded sides; returns (that batch's rows by workload, all the card's rows)."""
    import csv
    from pathlib import Path

    data = Path(gcexplore.__file__).parent / "data"
    rows = [r for r in csv.DictReader(open(data / "noise_floor.csv", encoding="utf-8")) if r["device_name"] == card]
    mine = {r["workload"]: r for r in rows if f"batch {batch}" in r["source"]
            and f"{processes} separate processes" in r["source"]}
    assert set(mine) == {"compute", "memory", "attention", "sort"}
    C = _compare_real()
    raw = pd.read_parquet(data / "calibration" / batch / "floors_raw.parquet")
    for kind, row in mine.items():
        g = raw[(raw["kind"] == f"{kind}@process") & (raw["role"] == "u")]
        got = C.floor_rows([d for _, d in g.groupby("side")], kind, card)
        assert got["runs"] == int(row["runs"]) == processes
        assert got["round_sd"] == pytest.approx(float(row["round_sd"])) and got["run_sd"] == pytest.approx(float(row["run_sd"]))
    return mine, rows


def test_the_shipped_e1_floors_are_their_processes_and_a_pair_takes_both_run_parts():
    """Batch e1 (4x H200; gcexplore/data/calibration/e1): compute, memory, attention and sort each from 8
    separate processes; the rows of noise_floor.csv are those recomputed from the recorded sides, and the
    floor of the campaign's compute+memory pair is the largest round part with the run parts of both
    workloads (each its largest row) in quadrature."""
    card = "NVIDIA H200"
    e1, rows = _shipped_process_floors(card, "e1", 8)
    top = {w: (max(float(r["round_sd"]) for r in rows if r["workload"] == w),
               max(float(r["run_sd"]) for r in rows if r["workload"] == w)) for w in ("compute", "memory")}
    f = noise_floor(card, ["memory", "compute"])
    assert f.round_sd == max(top["compute"][0], top["memory"][0])
    assert f.run_sd == pytest.approx(math.hypot(top["compute"][1], top["memory"][1]))
    assert "batch e1" in f.source and "run parts in quadrature" in f.source


def test_the_shipped_e2_h100_floors_hold_the_campaign_medians_against_the_tasks_run_alone():
    """Batch e2 (an H100; gcexplore/data/calibration/e2): compute, memory, attention and sort each from 6
    separate processes (the bench was stopped by its timeout after 6: the floors are recomputed from the
    recorded sides). Compute's run part is the largest: its time sits at one of two levels 0.8% apart from
    process to process, which in-process runs (b2: 0.03%) never showed; with it, the compute+memory pair's
    run part is at least the 0.22% that the 4x H100 campaign's medians against the tasks run alone needed."""
    card = "NVIDIA H100 80GB HBM3"
    e2, rows = _shipped_process_floors(card, "e2", 6)
    assert float(e2["compute"]["run_sd"]) == max(float(r["run_sd"]) for r in e2.values())
    assert noise_floor(card, ["compute", "memory"]).run_sd >= 0.0022


def test_the_shipped_gemm_floor_is_the_pooled_upper_bound_of_its_recorded_runs():
    """gcexplore/data/calibration/gemm_runs.parquet (the H100 GEMM chain's runs of batches b2, c1, c2,
    d1): pooled, their run part's 95% upper bound and their round spread are the shipped floor; and
    on synthetic runs with a known run effect the point estimate finds it and the bound lies above."""
    import csv
    from pathlib import Path

    C = _compare_real()
    data = Path(gcexplore.__file__).parent / "data"
    got = C.pooled_floor(pd.read_parquet(data / "calibration" / "gemm_runs.parquet"))
    row = next(r for r in csv.DictReader(open(data / "noise_floor.csv", encoding="utf-8"))
               if r["device_name"] == "NVIDIA H100 80GB HBM3" and r["workload"] == "gemm")
    assert got["runs"] == int(row["runs"]) == 119 and {"b2", "c1 fixed", "c2", "d1 pair 0"} <= set(got["per_set"])
    assert round(got["run_sd_upper"], 4) == float(row["run_sd"]) and round(got["round_sd"], 4) == float(row["round_sd"])
    assert got["run_sd"] < got["run_sd_upper"] < max(got["per_set"].values())
    rng = np.random.default_rng(11)
    rows = []
    for s in range(6):
        for run in range(8):
            eff = rng.normal(0, 0.004)
            for k in (16, 64, 132):
                for r in range(10):
                    rows.append({"set": f"s{s}", "role": "u", "side": run, "sm_count": k, "round": r,
                                 "duration_ms": 132 / k * np.exp(eff + rng.normal(0, 0.005))})
    syn = C.pooled_floor(pd.DataFrame(rows))
    assert syn["dof"] == 42 and 0.003 < syn["run_sd"] < 0.005 and syn["run_sd"] < syn["run_sd_upper"]
    assert abs(syn["round_sd"] - 0.005) < 0.0005
