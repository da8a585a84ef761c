"""The interval's margins calibrated on many measured pairs (the pair as the unit) and judged on pairs that set
none of them (issue 25): the "risk" rule, leave-one-run-out coverage on recorded runs, refusals (CPU only)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gcexplore as gx
from gcexplore.prediction.check import MARGIN_RULES, held_out_coverage, layout_errors, margins_of, predict_kwargs

FIT_GROUPS = ("fitted", "fitted4")
DATA = Path(__file__).parent / "data"


def _errors(pairs: int, layouts: int, above: np.ndarray, seed: int = 0) -> pd.DataFrame:
    """Raw-model layout errors: each pair's measured median ``above`` (a fraction per pair) over the model's upper
    end, with a tight measured interval and the low end well below."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(pairs):
        pred = 10.0 + rng.random(layouts)
        meas = pred * (1 + above[i] + 0.002 * rng.random(layouts))
        rows.append(pd.DataFrame({"_case": i, "predicted_ms": pred, "predicted_low_ms": pred * 0.99,
                                  "predicted_high_ms": pred, "measured_ms": meas, "measured_low_ms": meas * 0.999,
                                  "measured_high_ms": meas * 1.001}))
    return pd.concat(rows, ignore_index=True)


def test_the_risk_margin_covers_the_promised_share_of_a_new_pairs_layouts_and_no_more():
    assert MARGIN_RULES == ("pairs", "risk")
    above = np.linspace(0.0, 0.2, 40)  # pair i is missed by 0-20%
    m = margins_of(_errors(40, 10, above), rule="risk")
    below, up = m["model_error"]
    assert below == 0.0 and m["pairs"] == 40
    # (outside pairs + 1) / 41 <= 0.1: at most 3 of 40 pairs outside, so the 37th smallest miss is covered...
    assert above[36] <= up < above[37]
    assert m["coverage"] == pytest.approx(37 / 40, abs=0.01)
    # ...and the "pairs" rule (fit_model's) with more than 18 pairs: the conformal bound of per-pair 90% quantiles
    pairs = margins_of(_errors(40, 10, above), rule="pairs")["model_error"][1]
    assert above[36] <= pairs
    # a new pair inside the calibrated spread is covered, one beyond it is not
    new = _errors(2, 10, np.array([above[30], above[39]]), seed=1)
    hit = new["measured_low_ms"] <= new["predicted_high_ms"] * (1 + up)
    assert hit[new["_case"] == 0].all() and not hit[new["_case"] == 1].any()


def test_the_strict_count_asks_the_measured_median_inside_and_never_holds_more_than_the_overlap():
    # each pair's medians 0-20% above the model's upper end, but the measured intervals reach 3% lower: the overlap
    # count takes them in with a 3% narrower margin than the strict count (the median itself inside)
    above = np.linspace(0.0, 0.2, 40)
    e = _errors(40, 10, above)
    e["measured_low_ms"] = e["measured_ms"] * 0.97
    strict = margins_of(e, rule="risk", count="strict")
    overlap = margins_of(e, rule="risk", count="overlap")
    assert strict["model_error"][1] > overlap["model_error"][1] + 0.02
    assert above[36] <= strict["model_error"][1] < above[37] + 0.003
    for m in (strict, overlap):  # both counts of its own margins, each no more than the overlap's
        assert m["coverage_strict"] <= m["coverage"]
    assert strict["coverage_strict"] == pytest.approx(37 / 40, abs=0.01)
    assert overlap["coverage_strict"] < 0.9 <= overlap["coverage"]  # counted strictly the overlap margins fall short
    with pytest.raises(ValueError, match="count must be one of"):
        margins_of(e, rule="risk", count="median")
    with pytest.raises(ValueError, match="'pairs' rule counts the overlap only"):
        margins_of(e, rule="pairs", count="strict")


def test_coverage_table_counts_both_ways_per_run():
    from gcexplore.prediction.check import coverage_table

    rows = pd.DataFrame({"run": ["a", "a", "a", "b"], "inside": [True, True, False, True],
                         "inside_strict": [True, False, False, False]})
    t = coverage_table(rows, "run").set_index("run")
    assert t.loc["a"].to_dict() == {"layouts": 3, "inside": 2, "inside_strict": 1, "coverage": 2 / 3,
                                    "coverage_strict": 1 / 3}
    assert t.loc["b", "coverage_strict"] == 0.0 and coverage_table(rows)["layouts"].tolist() == [4]
    with pytest.raises(ValueError, match="missing \\['inside_strict'\\]"):
        coverage_table(rows.drop(columns="inside_strict"))


def test_a_margin_that_cannot_cover_is_refused_with_what_would_help():
    # every pair measured 1.5-3x the model's upper end: no margin below 1 holds 90% of a new pair's layouts
    with pytest.raises(ValueError, match="no margin below 1 .* calibrate on more pairs or lower quantile"):
        margins_of(_errors(10, 8, np.linspace(1.5, 3.0, 10)), rule="risk")
    with pytest.raises(ValueError, match="rule must be one of"):
        margins_of(_errors(3, 4, np.zeros(3)), rule="conformal")
    with pytest.raises(ValueError, match="quantile must be in"):
        margins_of(_errors(3, 4, np.zeros(3)), quantile=1.0)


def _two_runs():
    """Layout errors of the shipped terms (no margins) on two recorded H100 runs: g1's K (tests/data/predict_sweeps)
    and f1's (predict_sweeps_f1), one ``run`` column."""
    paths = {"g1": DATA / "predict_sweeps.parquet", "f1": DATA / "predict_sweeps_f1.parquet"}
    if "predict_profiles" not in gx.results.recorded_names() or not all(p.exists() for p in paths.values()):
        pytest.skip("no recorded profiles in gcexplore/data or pair sweeps in tests/data")
    prof = gx.load_recorded("predict_profiles")
    kw = {k: v for k, v in predict_kwargs(prof.attrs["fit"]).items() if k != "model_error"}
    frames = []
    for run, path in paths.items():
        sweeps = gx.load(path)
        cases, groups = [], []
        for pair, spec in sweeps.attrs["pairs"].items():
            cases.append((prof, spec["workloads"], sweeps[sweeps["pair"] == pair]))
            groups.append(spec["group"])
        e = layout_errors(cases, **kw)
        # the terms were fitted on g1's fitted pairs: they calibrate nothing
        e["checked"] = ~e["_case"].map(dict(enumerate(groups))).isin(FIT_GROUPS)
        frames.append(e.assign(run=run, _case=run + ":" + e["_case"].astype(str)))
    return pd.concat(frames, ignore_index=True)


@pytest.mark.slow  # among the slowest on a 2-core machine (pytest --durations, 2026-12-02)
def test_held_out_coverage_is_computed_on_runs_whose_pairs_set_no_margin():
    e = _two_runs()
    t = held_out_coverage(e, "run", judged="checked", calibrating="checked").set_index("run")
    assert list(t.index) == ["g1", "f1"]
    for run, other in (("g1", "f1"), ("f1", "g1")):
        # each run's margins are the other run's alone...
        own = margins_of(e[(e["run"] == other) & e["checked"]], rule="risk")["model_error"]
        assert (t.loc[run, "below"], t.loc[run, "above"]) == pytest.approx(own)
        mine = e[(e["run"] == run) & e["checked"]]
        assert t.loc[run, "layouts"] == len(mine) and t.loc[run, "calibrated_pairs"] == e.loc[
            (e["run"] == other) & e["checked"], "_case"].nunique()
    # ...so moving a held-out run's measurements moves its coverage, never its margins
    moved = e.copy()
    g1 = moved["run"] == "g1"
    for col in ("measured_ms", "measured_low_ms", "measured_high_ms"):
        moved.loc[g1, col] *= 1.5
    t2 = held_out_coverage(moved, "run", judged="checked", calibrating="checked").set_index("run")
    assert t2.loc["g1", "above"] == t.loc["g1", "above"] and t2.loc["g1", "coverage"] < 0.2 < t.loc["g1", "coverage"]
    # pooled: inside / layouts over the held-out runs; these recorded runs hold most layouts out of sample
    assert t.attrs["coverage"] == pytest.approx(t["inside"].sum() / t["layouts"].sum())
    assert t.attrs["coverage"] >= 0.8, t
    with pytest.raises(ValueError, match="'_case' column and a 'host' column"):
        held_out_coverage(e, "host")


@pytest.mark.slow  # among the slowest on a 2-core machine (pytest --durations, 2026-12-02)
def test_the_bench_redoes_the_held_out_table_from_run_folders(tmp_path):
    # bench/predict_heldout.py on two recorded runs laid out as bench/predict.py writes them: each host's coverage
    # comes from the other's margins; a judge-only run (here f1's, every time 1.5x) is counted with margins from the
    # others, so its own misses widen nothing
    import re
    import subprocess
    import sys

    e = _two_runs()  # skips without the recorded data
    prof = gx.load_recorded("predict_profiles")
    runs = {}
    for run, name, slow in (("g1", "predict_sweeps.parquet", 1.0), ("f1", "predict_sweeps_f1.parquet", 1.0),
                            ("slow", "predict_sweeps_f1.parquet", 1.5)):
        folder = tmp_path / run
        folder.mkdir()
        gx.save_profiles(prof, folder / "profiles.parquet")
        sweeps = gx.load(DATA / name)
        for col in ("start_ms", "duration_ms", "makespan_ms"):
            sweeps[col] = sweeps[col] * slow
        for pair in sweeps.attrs["pairs"]:
            gx.save(sweeps[sweeps["pair"] == pair].drop(columns="pair").reset_index(drop=True),
                    folder / f"sweep_{pair}.parquet")
        runs[run] = folder
    bench = Path(__file__).resolve().parents[1] / "bench" / "predict_heldout.py"
    out = subprocess.run([sys.executable, str(bench), "--calibrate", "checked", f"g1:{runs['g1']}",
                          f"f1:{runs['f1']}", "--judge", f"x:{runs['slow']}"], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    t = held_out_coverage(e, "run", judged="checked", calibrating="checked")
    assert f"rule 'risk', leave-one-host-out: the checked-only layouts of each host inside the margins of the " \
           f"others: pooled {t.attrs['coverage']:.2%}" in out, out
    both = margins_of(e[e["checked"]], rule="risk")["model_error"]
    assert f"from every calibrating pair: below / above {both[0]:.4f} / {both[1]:.4f}" in out
    judged = re.findall(rf"judged on {re.escape(str(runs['slow']))} \(calibrated nothing\): ([0-9.]+)%", out)
    assert len(judged) == 2 and float(judged[1]) < 20, out  # risk rule: 1.5x slower is outside the margins


@pytest.mark.slow  # among the slowest on a 2-core machine (pytest --durations, 2026-12-02)
def test_the_residual_bench_scales_each_co_runner_against_the_triad_and_counts_the_best_split_misses(tmp_path):
    # bench/predict_residuals.py on one recorded run laid out as bench/predict.py writes it: the triad's index is 1 by
    # definition, every other co-runner's the least-squares scale of its column against the triad's, and the count of
    # predicted best splits within 3% is prediction_facts' own
    import re
    import subprocess
    import sys

    prof = gx.load_recorded("predict_profiles")
    sweeps = gx.load(DATA / "predict_sweeps.parquet")
    folder = tmp_path / "g1"
    folder.mkdir()
    gx.save_profiles(prof, folder / "profiles.parquet")
    for pair in sweeps.attrs["pairs"]:
        one = sweeps[sweeps["pair"] == pair].drop(columns="pair").reset_index(drop=True)
        gx.save(one, folder / f"sweep_{pair}.parquet")
    bench = Path(__file__).resolve().parents[1] / "bench" / "predict_residuals.py"
    out = subprocess.run([sys.executable, str(bench), str(folder)], capture_output=True, text=True, timeout=300,
                         check=True).stdout
    assert re.search(r"^memory\s+1\.00\s+1\.00\s+1\.00$", out, re.M), out
    kw = predict_kwargs(prof.attrs["fit"])
    ok = n = 0
    for pair, spec in sweeps.attrs["pairs"].items():
        if spec["group"] in ("fitted", "fitted4"):
            continue
        f = gx.prediction_facts(gx.predict(prof, spec["workloads"], **kw), sweeps[sweeps["pair"] == pair])
        ok, n = ok + (f["best_gap"] <= 0.03), n + 1
    assert f"within 3% of the measured best: {ok} of {n} checked-only pair-runs" in out, out
