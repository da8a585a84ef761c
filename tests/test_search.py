"""The tuner's search and stopping rules on synthetic curves (no GPU).

Each fake ``measure`` times a made-up pair (or trio) of workloads: a duration per
workload from its SM count, multiplicative noise, and a makespan of the longest plus a
small start offset. Nothing here is a measurement.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings as hsettings, strategies as st

from gcexplore.analysis import stats as ST
from gcexplore.experiments import search as S
from gcexplore.schema import parse_layout

TOTAL = 132
PAIRS = [(k, TOTAL - k) for k in range(8, 129, 8)]


class Fake:
    """``measure(layout, n)`` over per-workload duration models ``fns[i](layout) -> ms``."""

    def __init__(self, *fns, noise=0.003, offset=0.005, seed=0, slow=None):
        self.fns, self.noise, self.offset = fns, noise, offset
        self.rng = np.random.default_rng(seed)
        self.slow = slow  # (probability, factor): a repetition now and then much slower
        self.calls: list[tuple[tuple, int]] = []

    def durations(self, layout):
        return [f(layout) for f in self.fns]

    def true(self, layout) -> float:
        return max(self.durations(layout)) + self.offset

    def __call__(self, layout, n):
        self.calls.append((tuple(layout), n))
        reps = []
        for _ in range(n):
            f = 1.0
            if self.slow is not None and self.rng.random() < self.slow[0]:
                f = self.slow[1]
            d = [x * f * float(self.rng.lognormal(0.0, self.noise)) for x in self.durations(layout)]
            reps.append((max(d) + self.offset, tuple(d)))
        return reps

    def measured(self):
        return {c for c, _ in self.calls}

    def best(self, cands):
        return min(cands, key=self.true)


def first(fn):
    return lambda c: fn(c[0])


def last(fn):
    return lambda c: fn(c[-1])


def _check_makespan(fake, out, cands, within=0.011):
    best = fake.best(cands)
    got = parse_layout(out.answer)
    assert fake.true(got) <= fake.true(best) * (1 + within), (out.answer, S.label(best), out.reason)
    assert set(out.unmeasured) == {S.label(c) for c in cands} - {S.label(c) for c in fake.measured()}
    return got


# ------------------------------------------------------------------------ statistics


@given(st.lists(st.floats(0.01, 100.0), min_size=1, max_size=40), st.floats(0.0, 1.0))
@hsettings(max_examples=200, deadline=None)
def test_quantile_is_numpys_linear_percentile(values, q):
    assert ST.quantile(values, q) == pytest.approx(float(np.percentile(values, 100 * q)), rel=1e-12, abs=1e-12)


def test_median_interval_needs_five_samples_at_ninety_percent():
    assert ST.quantile_ci([1, 2, 3, 4], 0.5, 0.9) == (-math.inf, math.inf)
    assert ST.quantile_ci([5, 1, 4, 2, 3], 0.5, 0.9) == (1.0, 5.0)
    lo, hi = ST.quantile_ci(list(range(40)), 0.5, 0.9)
    assert 10 < lo < 19.5 < hi < 29
    assert ST.quantile_ci(list(range(5)), 0.9, 0.9)[1] == math.inf  # p90 needs 29 samples above
    assert ST.quantile_ci(list(range(29)), 0.9, 0.9)[1] == 28.0


def test_median_interval_covers_the_true_median():
    rng = np.random.default_rng(1)
    for n, level in ((5, 0.9), (12, 0.9), (30, 0.95)):
        hits = 0
        for _ in range(2000):
            lo, hi = ST.quantile_ci(rng.exponential(1.0, n), 0.5, level)
            hits += lo <= math.log(2) <= hi
        assert hits / 2000 >= level - 0.02, (n, level, hits)


def test_rank_sum_distribution_is_exact():
    import itertools

    for n, m in ((1, 1), (2, 3), (4, 4), (3, 6)):
        counts = np.zeros(n * m + 1)
        for xs in itertools.combinations(range(n + m), n):  # ranks of the first sample
            counts[sum(xs) - n * (n - 1) // 2] += 1
        assert ST.mann_whitney_cdf(n, m) == pytest.approx(np.cumsum(counts) / counts.sum())


def test_settings_are_checked_where_written():
    with pytest.raises(ValueError, match="percentile must be in"):
        S.Settings(percentile=100)
    with pytest.raises(ValueError, match="tolerance must be a number in"):
        S.Settings(tolerance=0)
    with pytest.raises(ValueError, match=r"slo_ms must be a number of milliseconds"):
        S.Settings(slo_ms=-1.0)
    with pytest.raises(ValueError, match=r"max_repeats must be an int in \[10, 1000\]"):
        S.Settings(repeats=10, max_repeats=5)
    assert S.Settings().objective == "makespan" and S.Settings(slo_ms=1).objective == "slo"
    assert S.Settings(slo_ms=2).metadata()["slo_ms"] == 2.0


def test_a_measure_that_returns_the_wrong_count_is_refused():
    with pytest.raises(ValueError, match=r"returned 1 repetitions, expected 5"):
        S.search(PAIRS, lambda layout, n: [(1.0, (1.0, 1.0))])
    with pytest.raises(ValueError, match="2 durations per repetition"):
        S.search([(8, 8, 116)], lambda layout, n: [(1.0, (1.0, 1.0))] * n)


# ------------------------------------------------------------------------ makespan


def test_convex_curve_answer_in_few_layouts_with_neighbours_measured():
    fake = Fake(first(lambda k: 100 / k), last(lambda r: 60 / r))
    out = S.search(PAIRS, fake)
    got = _check_makespan(fake, out, PAIRS, within=0.0)
    assert len(fake.measured()) <= 7
    assert {(got[0] - 8, got[1] + 8), (got[0] + 8, got[1] - 8)} <= fake.measured()
    assert out.reason[0].startswith(f"{out.answer} has the lowest median concurrent makespan")
    assert all(d["decision"].startswith("slower") for d in out.comparisons)
    assert [v["step"] for v in out.visits] == list(range(len(out.visits)))


def test_flat_curve_stops_early():
    # the fake has no round-to-round noise: a card whose recorded floor matches its repetition noise
    fake = Fake(first(lambda k: 2.0), last(lambda r: 2.0), noise=0.002)
    out = S.search(PAIRS, fake, S.Settings(floor=ST.Floor(0.002, 0.0, "synthetic")))
    _check_makespan(fake, out, PAIRS)
    assert len(fake.measured()) <= 8


def test_memory_pair_sharing_bandwidth_is_flat_in_the_middle():
    def share(s, other):  # bandwidth shared in proportion to SMs, saturating at 26 SMs alone
        return 1.0 * max(1.0, 26 / s) + 1.0 * min(1.0, other / max(s, 1)) * 0.5

    fake = Fake(lambda c: share(c[0], c[1]), lambda c: share(c[1], c[0]))
    out = S.search(PAIRS, fake)
    _check_makespan(fake, out, PAIRS)


def test_noisy_curve_adds_repetitions_and_stays_within_tolerance():
    # 96+36 and 104+28 within 0.1% of each other: too close to decide at 5 repetitions
    fake = Fake(first(lambda k: 100 / k), last(lambda r: 29.2 / r), noise=0.03, seed=3)
    out = S.search(PAIRS, fake)
    _check_makespan(fake, out, PAIRS, within=0.03)
    assert max(sum(n for c, n in fake.calls if c == lay) for lay in fake.measured()) > 5


def test_bimodal_samples_are_repeated_until_decided_or_called_too_close():
    fake = Fake(first(lambda k: 100 / k), last(lambda r: 60 / r), slow=(0.4, 1.3), seed=5)
    out = S.search(PAIRS, fake, S.Settings(max_repeats=40))
    _check_makespan(fake, out, PAIRS, within=0.1)
    reps = {c: sum(n for cc, n in fake.calls if cc == c) for c in fake.measured()}
    assert max(reps.values()) > 5
    for d in out.comparisons:
        assert d["decision"].startswith(("slower", "within", "too close"))
        if d["decision"].startswith("too close"):
            assert d["reps"] == 40


def test_two_minima_from_a_placement_penalty_are_not_taken_for_one():
    # the first workload is 12% slower on the 96-SM layout (one of the probes): a local
    # minimum at 88, the global one at 104, and a bound from 96 that is wrong
    def a(k):
        return 92 / k * (1.12 if k == 96 else 1.0)

    fake = Fake(first(a), last(lambda r: 25.8 / r if r < 28 else 0.9), noise=0.001)
    curve = {c: fake.true(c) for c in PAIRS}
    assert curve[(80, 52)] > curve[(88, 44)] < curve[(96, 36)] > curve[(104, 28)] < curve[(88, 44)]
    out = S.search(PAIRS, fake, names=["a", "b"])
    assert out.answer == "104+28"
    assert any(n.startswith("a sped up") and "more than linearly" in n for n in out.notes)


def test_two_minima_behind_an_interference_bump_are_found_by_the_probes():
    # the remainder's workload is 4x slower while the first has 56..72 SMs: a local
    # minimum at 56 and the global one at 96, far from the balanced start (64)
    fake = Fake(first(lambda k: 60 / k), lambda c: 20 / c[1] * (4.0 if 56 <= c[0] <= 72 else 1.0), noise=0.001)
    curve = {c[0]: fake.true(c) for c in PAIRS}
    assert curve[56] < curve[48] and curve[56] < curve[64] and curve[96] < curve[56]
    out = S.search(PAIRS, fake)
    assert out.answer == "96+36"


def test_wave_quantised_staircase():
    fake = Fake(first(lambda k: 0.3 * math.ceil(300 / k)), last(lambda r: 30 / r), noise=0.001)
    out = S.search(PAIRS, fake)
    _check_makespan(fake, out, PAIRS, within=0.0)


@given(st.floats(20, 300), st.floats(5, 100), st.floats(0.3, 1.5), st.floats(0.2, 1.5), st.integers(0, 10_000))
@hsettings(max_examples=60, deadline=None)
def test_monotone_sublinear_curves_answer_within_tolerance(ca, cb, floor_a, floor_b, seed):
    # each workload: linear scaling down to a saturation floor (a roofline)
    fake = Fake(first(lambda k: max(floor_a, ca / k)), last(lambda r: max(floor_b, cb / r)),
                noise=0.002, seed=seed)
    out = S.search(PAIRS, fake)
    _check_makespan(fake, out, PAIRS, within=0.015)


def test_three_workloads_search_the_middle_size_too():
    cands = [(k1, k2, TOTAL - k1 - k2) for k1 in range(8, 129, 8) for k2 in range(8, 129, 8) if k1 + k2 < TOTAL]
    fake = Fake(lambda c: 60 / c[0], lambda c: 30 / c[1], lambda c: 40 / c[2])
    out = S.search(cands, fake)
    _check_makespan(fake, out, cands)
    assert len(fake.measured()) < len(cands) / 4
    assert len(out.answer.split("+")) == 3


# ------------------------------------------------------------------------ latency target


def latency_pair(c0=100.0, noise=0.003, seed=0):
    return Fake(first(lambda k: c0 / k), last(lambda r: 50 / r), noise=noise, seed=seed)


def test_target_met_in_the_middle_smallest_size_and_its_smaller_neighbour_fails():
    fake = latency_pair()
    out = S.search(PAIRS, fake, S.Settings(slo_ms=100 / 44))  # 48 SMs give 2.08 ms, 40 give 2.5 ms
    assert out.answer == "48+84" and out.met
    assert (40, 92) in fake.measured()
    assert out.reason[1].startswith("the next smaller measured, 40+92, fails")
    assert out.unmeasured["56+76"]["why"] == "larger than the answer"
    assert len(fake.measured()) <= 5


def test_target_never_met_is_an_answer_with_the_best_latency():
    fake = latency_pair()
    out = S.search(PAIRS, fake, S.Settings(slo_ms=0.5))
    assert out.answer is None and not out.met
    assert (128, 4) in fake.measured()  # said only after the largest partition was measured
    assert out.best_measured == "128+4" and out.value_ms == pytest.approx(100 / 128, rel=0.02)
    assert "not met" in out.reason[0] and "128+4" in out.reason[0]


def test_target_met_only_on_the_largest_partition():
    fake = latency_pair()
    out = S.search(PAIRS, fake, S.Settings(slo_ms=100 / 126))
    assert out.answer == "128+4" and out.met
    assert (120, 12) in fake.measured()
    assert len(fake.measured()) <= 4


def test_target_close_to_a_layouts_latency_adds_repetitions():
    fake = latency_pair(noise=0.02, seed=2)
    out = S.search(PAIRS, fake, S.Settings(slo_ms=100 / 48 * 1.005))
    assert out.answer in ("48+84", "56+76")
    near = [d for d in out.comparisons if d["layout"] == "48+84"]
    assert near and near[0]["reps"] > 5


def test_ninetieth_percentile_needs_enough_samples_above():
    fake = latency_pair(noise=0.01)
    out = S.search(PAIRS, fake, S.Settings(slo_ms=100 / 60, percentile=90))
    ans = [d for d in out.comparisons if d["layout"] == out.answer][0]
    assert ans["reps"] >= 29 and ans["decided"] and ans["ci_high_ms"] <= 100 / 60


def test_a_target_with_the_middle_sizes_searched_is_refused():
    cands = [(8, 8, 116), (8, 16, 108)]
    with pytest.raises(ValueError, match="one candidate per first-partition size"):
        S.search(cands, Fake(*(lambda c: 1.0,) * 3), S.Settings(slo_ms=1.0))


# ------------------------------------------------------------------------ pooled spread (issue 27)


def test_pooled_pair_sd_is_consistent_and_one_stray_repetition_cannot_blow_it_up():
    rng = np.random.default_rng(7)
    groups = [list(np.exp(rng.normal(np.log(2.0 + g), 0.01, 3))) for g in range(300)]  # levels differ
    assert ST.pooled_pair_sd(groups) == pytest.approx(0.01, rel=0.08)
    few = [list(np.exp(rng.normal(0.0, 0.01, 3))) for _ in range(4)]
    stray = [few[0][:2] + [few[0][2] * 1.4], *few[1:]]  # one step 40% slow in a 3-step visit
    own = float(np.std(np.log(stray[0]), ddof=1))
    assert own > 0.15 and ST.pooled_pair_sd(stray) < 0.03  # its own sd explodes, the pooled one does not
    assert math.isnan(ST.pooled_pair_sd([[1.0], []]))
    with pytest.raises(ValueError, match="spread must be 'layout' or 'pooled'"):
        S.Settings(spread="robust")


class Stray(Fake):
    """A Fake whose first visit of one layout has its last repetition ``factor`` times slower."""

    def __init__(self, *fns, at, factor=1.4, **kw):
        super().__init__(*fns, **kw)
        self.at, self.factor, self.hit = at, factor, False

    def __call__(self, layout, n):
        reps = super().__call__(layout, n)
        if tuple(layout) == self.at and not self.hit:
            self.hit = True
            m, d = reps[-1]
            reps[-1] = (m * self.factor, tuple(x * self.factor for x in d))
        return reps


@pytest.mark.parametrize("seed", range(5))
def test_pooled_spread_decides_a_stray_first_visit_without_a_second_round(seed):
    fns = (first(lambda k: 2.0 + 0.004 * abs(k - 32)), last(lambda r: 0.5))
    cands = [(k, TOTAL - k) for k in range(8, 65, 8)]
    steps = {}
    for spread in ("layout", "pooled"):
        fake = Stray(*fns, at=(40, 92), noise=0.002, seed=seed)  # 40 SMs: 1.6% slower than 32, and one stray step
        out = S.search(cands, fake, S.Settings(repeats=3, max_repeats=8, floor=ST.Floor(0.0, 0.0, "replay"),
                                               spread=spread))
        _check_makespan(fake, out, cands)
        steps[spread] = sum(n for _, n in fake.calls)
        assert fake.hit
    assert steps["pooled"] < steps["layout"], steps


@pytest.mark.parametrize("seed", range(5))
def test_two_step_first_visits_take_a_third_only_when_the_two_disagree(seed):
    """Pooled spread, 2 steps a first visit: a stray step at the best layout (32 SMs, 40% slow) would make its
    2-step median 20% slow and hand the answer to a neighbour 3.2% slower; the tie-break's third step outvotes it.
    Visits whose two steps agree within the tolerance stay at 2; with the layout's own spread nothing is added."""
    fns = (first(lambda k: 2.0 + 0.004 * abs(k - 32)), last(lambda r: 0.5))
    cands = [(k, TOTAL - k) for k in range(8, 65, 8)]
    settings = dict(repeats=2, max_repeats=8, floor=ST.Floor(0.0, 0.0, "replay"))
    fake = Stray(*fns, at=(32, 100), noise=0.002, seed=seed)
    out = S.search(cands, fake, S.Settings(spread="pooled", **settings))
    assert fake.hit and _check_makespan(fake, out, cands) == (32, 100)
    firsts = {}
    for c, n in fake.calls:
        firsts.setdefault(c, []).append(n)
    assert firsts[(32, 100)][:2] == [2, 1]  # the stray pair got its third step, in the same round
    v = [v for v in out.visits if v["layout"] == "32+100"][0]
    assert (v["reps"], v["round"]) == (3, 0)
    # noise 0.2% per step: the other pairs agree within 1%, so they stay at 2 steps
    assert all(ns[0] == 2 and (len(ns) == 1 or ns[1] != 1) for c, ns in firsts.items() if c != (32, 100))
    own = Stray(*fns, at=(32, 100), noise=0.002, seed=seed)
    S.search(cands, own, S.Settings(spread="layout", **settings))
    assert all(n == 2 for _, n in own.calls)  # the tuner's default is unchanged
    assert not ST.disagree(2.0, 2.0 * 1.0099, 0.01) and ST.disagree(2.0, 2.0 * 1.0101, 0.01)


def _flat_top(k: int) -> float:
    """A collective's step on a flat top (the shape of 2 x H200 all-reduce 1 GiB): 40..64 SMs within 0.3%, 32 SMs
    4% slower, fewer SMs far slower."""
    return 3.39 * (1.0 + 0.0004 * abs(k - 48)) if k >= 40 else 3.53 * (40.0 / max(k, 8)) ** (1.0 if k < 32 else 0.0)


def _flat_top_search(seed: int) -> dict:
    """Step spread 0.8% (as measured), tolerance 1%: confirming that no layout of the flat top beats another by
    1% at 90% takes rounds of each close pair; with ``settle`` 2% a rival within 1% by its median is settled once
    the bound keeps it from being 2% faster. -> {settle: (steps, comparisons settled so)}; the answer is checked
    within 1% of the true best either way."""
    cands = [(k, TOTAL - k) for k in range(8, 65, 8)]
    base = dict(repeats=2, max_repeats=8, floor=ST.Floor(0.0, 0.0, "replay"), spread="pooled")
    got = {}
    for settle in (None, 0.02):
        fake = Fake(first(_flat_top), last(lambda r: 2.3), noise=0.008, offset=0.0, seed=seed)
        out = S.search(cands, fake, S.Settings(settle=settle, **base))
        _check_makespan(fake, out, cands, within=0.01)
        settled = [d for d in out.comparisons if d["decision"].endswith("settled")]
        for d in settled:  # within the tolerance by the medians, the bound inside settle, not inside the tolerance
            assert d["margin"] >= -0.01 / 1.01 and -0.02 / 1.02 <= d["margin_low"] < -0.01 / 1.01, d
        got[settle] = (sum(n for _, n in fake.calls), len(settled))
    return got


@pytest.mark.parametrize("seed", range(6))
def test_settle_stops_a_flat_top_without_extra_rounds_and_keeps_the_answer_within_it(seed):
    got = _flat_top_search(seed)
    assert got[0.02][0] <= got[None][0] and got[None][1] == 0, got


def test_settle_saves_steps_on_flat_tops_over_seeds():
    got = [_flat_top_search(s) for s in range(6)]
    assert sum(g[0.02][1] for g in got) > 0  # some rival was settled so
    assert sum(g[0.02][0] for g in got) < 0.8 * sum(g[None][0] for g in got), got


def test_settle_never_settles_a_rival_faster_by_more_than_the_tolerance():
    """A rival 1.5% faster by its median is not within the tolerance, whatever its bound: the answer moves to it."""
    cands = [(k, TOTAL - k) for k in range(8, 65, 8)]
    fake = Fake(first(lambda k: 3.39 * (0.985 if k == 56 else 1.0) if k >= 40 else 4.0), last(lambda r: 2.3),
                noise=0.0005, offset=0.0, seed=1)
    out = S.search(cands, fake, S.Settings(repeats=2, max_repeats=8, floor=ST.Floor(0.0, 0.0, "replay"),
                                           spread="pooled", settle=0.5))
    assert out.answer == "56+76"
    st_ = S._State(cands, fake, S.Settings(settle=0.02))
    assert not S._settled(st_, 1 / 1.015, 0.99) and S._settled(st_, 1 / 1.009, 1 / 1.019)
    assert not S._settled(S._State(cands, fake, S.Settings()), 1.0, 0.999)  # no settle: the tolerance alone


def test_settle_is_checked_where_written():
    for bad in (0.005, 0.6, "2%", True):
        with pytest.raises(ValueError, match=r"settle must be a number in \[0.01, 0.5\]"):
            S.Settings(tolerance=0.01, settle=bad)
    assert S.Settings(settle=0.02).metadata()["settle"] == 0.02 and S.Settings().settle is None
