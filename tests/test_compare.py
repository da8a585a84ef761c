"""gcexplore.compare on synthetic repetitions with known truth (no GPU), and one GPU check:
the same small sweep measured twice on one card comes out SAME in most rows, never FAST or SLOW."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gcexplore
from gcexplore.results.synthetic import sweep, typical_spread
from gcexplore.analysis.comparison import compare, decide
from gcexplore.analysis.stats import mann_whitney_cdf, quantile_ci, ratio_ci, shift_ci

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ statistics


def test_exact_mann_whitney_distribution_matches_brute_force():
    from itertools import combinations

    n, m = 4, 5
    counts = np.zeros(n * m + 1)
    for pos in combinations(range(n + m), n):  # ranks of the first sample among n + m
        u = sum(p - i for i, p in enumerate(pos))  # pairs (x, y) with y < x
        counts[u] += 1
    np.testing.assert_allclose(mann_whitney_cdf(n, m), np.cumsum(counts) / counts.sum(), atol=1e-12)


def test_shift_interval_covers_a_known_shift_at_its_level():
    rng = np.random.default_rng(3)
    hits = 0
    for _ in range(2000):
        x, y = rng.standard_t(3, 12), rng.standard_t(3, 15) + 0.7
        _, lo, hi = shift_ci(x, y, 0.9)
        hits += lo <= 0.7 <= hi
    assert 0.88 <= hits / 2000 <= 0.97  # distribution-free: at least 90% (discreteness adds a little)


def test_too_few_repetitions_give_no_bound_and_unclear():
    est, lo, hi = ratio_ci([1.0, 1.1], [2.0, 2.1], 0.99)
    assert lo == 0.0 and hi == np.inf
    assert decide(lo, hi, 0.01)[0] == "UNCLEAR" and "too few" in decide(lo, hi, 0.01)[1]
    assert quantile_ci([1.0, 2.0], 0.5, 0.9) == (-np.inf, np.inf)


@pytest.mark.parametrize("low, high, verdict", [(0.95, 0.98, "FAST"), (1.02, 1.05, "SLOW"),
                                                 (0.995, 1.008, "SAME"), (0.98, 1.001, "UNCLEAR")])
def test_verdict_only_when_the_interval_allows_it(low, high, verdict):
    assert decide(low, high, 0.01)[0] == verdict


def _rates(seeds, sigma, shift):
    counts = {"FAST": 0, "SLOW": 0, "SAME": 0, "UNCLEAR": 0}
    for s in seeds:
        c = compare(sweep(2 * s, sigma=sigma), sweep(2 * s + 1, sigma=sigma, shift=shift))
        for k, v in c.counts().items():
            if k in counts:
                counts[k] += v
    total = sum(counts.values())
    return {k: v / total for k, v in counts.items()}, total


def test_same_distribution_gives_at_most_one_percent_false_decisions():
    sigma = typical_spread()
    rates, n = _rates(range(30), sigma, 1.0)
    assert n == 30 * 64
    assert rates["FAST"] + rates["SLOW"] <= 0.01, rates
    # a wide spread (the recorded 90th percentile is about 2.5%) must not make false decisions either
    wide, _ = _rates(range(100, 115), 0.05, 1.0)
    assert wide["FAST"] + wide["SLOW"] <= 0.01, wide


@pytest.mark.slow  # among the slowest on a 2-core machine (pytest --durations, 2026-12-02)
def test_a_three_percent_shift_is_detected_at_the_typical_spread():
    sigma = typical_spread()
    assert 0.0005 < sigma < 0.02  # the recorded sweeps' spread, not a made-up one
    rates, _ = _rates(range(200, 230), sigma, 1.03)
    assert rates["SLOW"] >= 0.95 and rates["FAST"] == 0, rates
    faster, _ = _rates(range(300, 310), sigma, 1 / 1.03)
    assert faster["FAST"] >= 0.95 and faster["SLOW"] == 0, faster


def test_intervals_are_bonferroni_corrected_over_the_layouts_compared():
    c = compare(sweep(1), sweep(2))
    assert c.settings["compared"] == 64
    assert c.settings["level"] == pytest.approx(1 - 0.05 / 64)
    one = compare(sweep(1, modes=("concurrent",), total=24), sweep(2, modes=("concurrent",), total=24))
    assert one.settings["compared"] == 2 and one.settings["level"] == pytest.approx(0.99)  # capped at 1%


# ------------------------------------------------------------------ clocks, alignment, best


def test_a_difference_that_vanishes_in_cycles_is_a_clock_difference():
    a = sweep(1, clock_mhz=1980.0, reps=40, rounds=10)
    b = sweep(2, clock_mhz=1980.0 / 1.05, shift=1.05, reps=40, rounds=10)  # 5% slower clock, same cycles
    t = compare(a, b).table
    assert (t["verdict"] == "SLOW").all()
    assert (t["cycles_verdict"] == "SAME").all() and t["clock_difference"].all()
    assert t["reason"].str.contains("a clock difference").all()
    real = compare(a, sweep(3, shift=1.05, reps=40, rounds=10)).table
    assert (real["cycles_verdict"] == "SLOW").all() and not real["clock_difference"].any()


def test_cards_with_different_sm_counts_are_aligned_by_fraction():
    curve = lambda f: 1.0 + 4.0 * (f - 0.6) ** 2  # noqa: E731
    a = sweep(1, total=132, curve=curve)
    b = sweep(2, total=144, curve=curve, device_name="synthetic 144-SM GPU")
    c = compare(a, b)
    conc = c.table[c.table["group"] == "concurrent"]
    both = conc[conc["present"] == "both"]
    assert len(both) >= 14
    assert (abs(both["fraction_a"] - both["fraction_b"]) <= 0.5 * 8 / 144 + 1e-9).all()
    assert set(both["sm_a"] + both["layout_a"].str.split("+").str[1].astype(int)) == {132}
    assert set(both["sm_b"] + both["layout_b"].str.split("+").str[1].astype(int)) == {144}
    row = both[both["layout_a"] == "24+108"].iloc[0]
    assert row["layout_b"] == "24+120"  # 18.2% of 132 is nearest 16.7% of 144
    one_sided = conc[conc["present"] != "both"]
    assert set(one_sided["present"]) <= {"A only", "B only"} and len(one_sided) == 17 - len(both) + 16 - len(both)
    assert c.identity.set_index("field").loc["SM count", "b"] == "144"


def test_best_split_moves_and_what_the_old_answer_costs():
    a = sweep(1, curve=lambda f: 1.0 + 4.0 * (f - 0.3) ** 2)
    b = sweep(2, curve=lambda f: 1.0 + 4.0 * (f - 0.7) ** 2)
    best = compare(a, b).best
    assert best["moved"]
    assert abs(best["a"]["fraction"] - 0.3) < 0.04 and abs(best["b"]["fraction"] - 0.7) < 0.04
    assert best["a"]["ci_low_ms"] <= best["a"]["median_ms"] <= best["a"]["ci_high_ms"]
    cost = best["a_best_on_b"]
    assert cost["verdict"] == "SLOW" and cost["ratio"] == pytest.approx(1 + 4 * 0.4 ** 2, rel=0.02)
    same = compare(a, sweep(3, curve=lambda f: 1.0 + 4.0 * (f - 0.3) ** 2)).best
    assert not same["moved"] and same["a_best_on_b"]["verdict"] == "SAME"


def test_latency_target_answer_per_side():
    a, b = sweep(1), sweep(2, shift=1.3)
    c = compare(a, b, slo_ms=0.8 * 1.3)  # the first workload's latency is 0.8 x makespan
    slo = c.slo
    assert slo["workload"] == "compute" and slo["a"]["layout"] is not None
    assert slo["moved"] and slo["a_answer_on_b"]["status"] == "fails"


def test_identity_diff_names_what_differs():
    a = sweep(1)
    b = sweep(2, device_name="synthetic other GPU")
    b.attrs.update(driver_version="13.1", graphs=True)
    ident = compare(a, b).identity.set_index("field")
    assert not ident.loc["card", "same"] and ident.loc["card", "b"] == "synthetic other GPU"
    assert not ident.loc["driver", "same"] and (ident.loc["driver", "a"], ident.loc["driver", "b"]) == ("13.0", "13.1")
    assert ident.loc["SM count", "same"] and ident.loc["graphs", "b"] == "True" and ident.loc["graphs", "a"] == ""


def test_one_frame_split_by_a_column():
    both = pd.concat([sweep(1, run_id="r1"), sweep(2, run_id="r2", shift=1.05)], ignore_index=True)
    both.attrs = {"kind": "sweep"}
    c = compare(both, by="run_id")
    assert c.labels == ("r1", "r2") and c.counts()["SLOW"] == 64
    assert c.identity.iloc[0]["field"] == "run_id" and not c.identity.iloc[0]["same"]
    assert "run" not in list(c.identity["field"])  # the run is named once


# ------------------------------------------------------------------ bad pairs


@pytest.mark.parametrize("make_b, message", [
    (lambda: sweep(2, workloads=("matmul", "sigmoid")), "different workloads"),
    (lambda: sweep(2, workloads=("memory", "compute")), "in partition order"),
    (lambda: gcexplore.load_recorded("scaling"), "side A is a sweep result and side B a scaling result"),
    (lambda: sweep(2).iloc[0:0], "side B (B) has no rows"),
    (lambda: gcexplore.load_recorded("isolation"), "is an isolation result"),
])
def test_bad_pairs_are_refused_with_what_is_valid(make_b, message):
    with pytest.raises(ValueError) as e:
        compare(sweep(1), make_b())
    assert message in str(e.value)
    assert "sweep/overlap" in str(e.value) or "same workloads" in str(e.value)


def test_bad_by_is_refused():
    with pytest.raises(ValueError, match="gives one side only"):
        compare(sweep(1), by="run_id")
    with pytest.raises(ValueError, match="not a column"):
        compare(sweep(1), by="nope")


# ------------------------------------------------------------------ command line


def _cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "gcexplore.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_cli_exit_codes(tmp_path):
    a, same, slow = tmp_path / "a.parquet", tmp_path / "same.parquet", tmp_path / "slow.parquet"
    gcexplore.save(sweep(1, reps=40, rounds=10), a)
    gcexplore.save(sweep(2, reps=40, rounds=10), same)
    gcexplore.save(sweep(3, shift=1.05, reps=40, rounds=10), slow)
    r = _cli("compare", str(a), str(same), "--fail-on-regression", "2")
    assert r.returncode == 0, r.stderr
    assert "SAME" in r.stdout and "64 of 64" in r.stdout
    r = _cli("compare", str(a), str(slow), "--fail-on-regression", "2")
    assert r.returncode == 1 and "regression" in r.stderr and "64 layout" in r.stderr
    assert _cli("compare", str(a), str(slow)).returncode == 0  # reported, not failed, unless asked
    assert _cli("compare", str(a), str(slow), "--fail-on-regression", "10").returncode == 0  # beyond 5%? no
    r = _cli("compare", str(a), str(tmp_path / "missing.parquet"))
    assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    r = _cli("compare", str(a))
    assert r.returncode == 2 and "by" in r.stderr


# ------------------------------------------------------------------ GPU


@pytest.mark.gpu
def test_the_same_sweep_twice_on_one_card_is_never_fast_or_slow_and_mostly_same(info):
    from gcexplore import workloads as W

    pair = {"compute": W.compute(), "memory": W.memory()}  # the built-ins' default sizes (about 1 ms)
    sizes = [k for k in info.valid_sm_counts() if k < info.sm_count][::4]
    runs = [gcexplore.sweep(pair, sm_counts=sizes, progress=False) for _ in range(2)]  # default rounds
    for w in pair.values():
        w.close()
    assert runs[0]["round"].nunique() == 5
    t = compare(runs[0], runs[1]).table
    cols = ["group", "layout_a", "ratio", "ratio_low", "ratio_high", "verdict", "reason"]
    decided = t[t["verdict"].isin(["FAST", "SLOW"])]
    assert decided.empty, "a false difference:\n" + decided[cols].to_string()
    same = int((t["verdict"] == "SAME").sum())  # and it decides: all UNCLEAR would pass the line above
    assert same * 2 > len(t), f"only {same} of {len(t)} rows SAME:\n" + t[cols].to_string()


# ------------------------------------------------------------------ views and explorer


def test_plot_compare_draws_the_comparison_and_escapes_dollars():
    from gcexplore.views.compare_text import describe

    a = sweep(1, curve=lambda f: 1.0 + 4.0 * (f - 0.3) ** 2)
    b = sweep(2, total=144, curve=lambda f: 1.0 + 4.0 * (f - 0.7) ** 2, device_name="a $5 card")
    c = compare(a, b)
    fig = gcexplore.plot_compare(c)
    ax = fig.axes[0]
    gids = {a.get_gid() for a in [*ax.lines, *ax.collections, *ax.texts]}
    assert {"a", "b", "a_band", "b_band", "best_a", "best_b"} <= gids
    best_b = next(line for line in ax.lines if line.get_gid() == "best_b")
    assert best_b.get_xdata()[0] == pytest.approx(100 * c.best["b"]["fraction"])
    marks = {t.get_gid(): t.get_text() for t in ax.texts}
    conc = c.table[(c.table["group"] == "concurrent") & (c.table["present"] == "both")]
    for r in conc.itertuples():
        assert marks[f"verdict_{r.layout_a}"][0] == {"FAST": "F", "SLOW": "S", "SAME": "=", "UNCLEAR": "?"}[r.verdict]
    assert r"\$5 card" in fig._suptitle.get_text()
    lines = describe(c)
    assert c.labels[1] == "B (a $5 card)"  # different cards: each side named with its card
    assert any(f"best split on {c.labels[0]}: {c.best['a']['layout']}" in s for s in lines)
    assert any("the best split moved" in s for s in lines)


def test_compare_explorer_redraws_when_the_band_changes():
    from gcexplore.widgets import CompareExplorer

    ex = CompareExplorer(sweep(1, reps=40, rounds=10), sweep(2, shift=1.025, reps=40, rounds=10))
    assert ex.comparison.counts()["SLOW"] == 64 and ex.redraws["sweep"] == 1
    ex.band.value = 5.0  # a 2% shift is within ±5%
    assert ex.comparison.settings["min_effect"] == pytest.approx(0.05)
    assert ex.comparison.counts()["SAME"] == 64 and ex.redraws["sweep"] == 2
    ex.group.value = "sequential"
    assert ex.redraws["sweep"] == 3 and "SAME" in ex.words.value


# ------------------------------------------------------------------ the words (issue 46)


def _one_round_each():
    """Two sides of one round each: every row leans on the recorded noise floor."""
    return sweep(1, rounds=1), sweep(2, rounds=1)


def test_the_noise_floor_sentence_is_said_once_per_table_not_in_every_row():
    from gcexplore.views.compare_text import describe

    c = compare(*_one_round_each())
    floor = c.settings["floor_text"]
    assert c.table["reason"].str.contains("from the noise floor").all()  # each row says it leaned on it...
    assert not c.table["reason"].str.contains(floor, regex=False).any()  # ...but not the whole sentence
    assert c.table["reason"].str.len().max() < 400
    lines = describe(c)
    assert sum(floor in line for line in lines) == 1, lines
    r = subprocess.run([sys.executable, "-m", "gcexplore", "compare", "sweep", "sweep_second"], capture_output=True,
                       text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""}, timeout=300)
    assert r.returncode == 0, r.stderr
    recorded = compare("sweep", "sweep_second").settings["floor_text"]
    assert r.stdout.count(recorded) == 1, r.stdout[-3000:]


def test_all_unclear_is_not_called_no_difference():
    from gcexplore.views.compare_text import describe

    c = compare(sweep(1, reps=20, sigma=0.3), sweep(3, reps=20, sigma=0.3))
    per = c.by_group()
    assert (per["UNCLEAR"] == per["compared"]).all()  # the case: every row undecided
    lines = describe(c)
    assert not [line for line in lines if "no difference beyond" in line], lines
    assert sum("undecided at all" in line and "all UNCLEAR" in line for line in lines) == len(per), lines
    same = compare(sweep(1, reps=20, sigma=0.001), sweep(1, reps=20, sigma=0.001))
    assert (same.by_group()["SAME"] == same.by_group()["compared"]).all()
    assert sum("no difference beyond" in line for line in describe(same)) == len(same.by_group())


def test_a_new_card_does_not_fail_a_null_but_fails_a_real_regression(tmp_path):
    """Issue 46: on a card with no recorded floor, two runs of one work 1% apart (their run offset) are
    not a regression at ``--fail-on-regression 1`` (the default floor has a run part); 5% still is."""
    card = "a card with no recorded noise floor"
    a, b, slow = tmp_path / "a.parquet", tmp_path / "b.parquet", tmp_path / "slow.parquet"
    tight = dict(reps=40, rounds=10, round_sigma=0.001, device_name=card)  # tight rounds: only the run differs
    gcexplore.save(sweep(10, **tight), a)
    gcexplore.save(sweep(20, shift=1.012, **tight), b)
    gcexplore.save(sweep(30, shift=1.05, **tight), slow)
    r = _cli("compare", str(a), str(b), "--fail-on-regression", "1")
    assert r.returncode in (0, 3), r.stderr  # never 1: the runs' 1% is within the cards' run noise
    if r.returncode == 3:
        assert "cannot rule out" in r.stderr and "the default one" in r.stderr, r.stderr
    r = _cli("compare", str(a), str(slow), "--fail-on-regression", "1")
    assert r.returncode == 1 and "regression" in r.stderr, r.stderr
    assert "no noise floor is recorded for this card" in r.stderr and "per run" in r.stderr
    c = compare(sweep(10, **tight), sweep(20, shift=1.012, **tight))
    assert c.settings["floor"]["run_sd"] > 0 and "default" in c.settings["floor_text"]
    from gcexplore.analysis.gate import gate

    assert gate(c.table, 1.0)[0] != 1
