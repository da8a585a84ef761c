"""Attacks on the analysis surfaces (issue 20): bad kernel-trace and PM numbers, runs pooled,
the same run twice, labels that contradict the rows, a tuner fed impossible measurements.

Each test names what a user would get without the check: a NaN, a negative time, a summary of
two runs as one, or a silent wrong answer; each asserts the clear refusal instead.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import _synthetic as S
import _synthetic_trace as T
import gcexplore as gx
from gcexplore.analysis.occupancy_estimate import LIMITS, blocks_per_sm
from gcexplore.experiments import pm
from gcexplore.experiments import search as SE
from gcexplore.trace import collector as tracing
from gcexplore.results.validate import ResultError
from gcexplore.results.kinds import kind_of
from test_pm import _samples, _trace


@pytest.fixture(autouse=True)
def _fresh_context_records(monkeypatch):
    """The synthetic collector's context records stay in this test (the collector keeps them per process)."""
    monkeypatch.setattr(tracing, "_CONTEXTS_SEEN", {})


def _traced():
    trace, df = T.trace_df()
    return trace.copy(), df  # copy: attrs and rows are the test's own


# --------------------------------------------------------------------- kernel-trace numbers

BAD_TIMES = {
    "nan start": ("start_ms", math.nan, "not a finite number"),
    "infinite end": ("end_ms", math.inf, "not a finite number"),
    "end before start": ("end_ms", -5.0, "end before they start"),
}


def _spoiled(col, value):
    trace, df = _traced()
    trace.loc[trace.index[1], col] = value
    return trace, df


@pytest.mark.parametrize("case", list(BAD_TIMES))
@pytest.mark.parametrize("call", ["summarize", "busy_time", "kernel_gaps", "summarize with trace",
                                  "estimate_occupancy", "to_chrome_trace"])
def test_kernel_times_that_are_not_finite_or_run_backwards_are_refused(case, call, tmp_path):
    col, value, text = BAD_TIMES[case]
    trace, df = _spoiled(col, value)
    run = {"summarize": lambda: gx.summarize(trace), "busy_time": lambda: gx.busy_time(trace),
           "kernel_gaps": lambda: gx.kernel_gaps(trace),
           "summarize with trace": lambda: gx.summarize(df, trace=trace),
           "estimate_occupancy": lambda: gx.estimate_occupancy(trace),
           "to_chrome_trace": lambda: gx.to_chrome_trace(trace, tmp_path / "t.json")}[call]
    if call == "to_chrome_trace":  # the one call that writes a file: none is left with "ts": null
        (tmp_path / "t.json").write_text("{}")  # an earlier timeline there must survive the refusal
    with pytest.raises(ResultError, match=text):
        run()
    if call == "to_chrome_trace":
        assert (tmp_path / "t.json").read_text() == "{}"
        assert not [p for p in tmp_path.iterdir() if p.name != "t.json"]  # no temporary either


def test_a_valid_trace_still_gives_finite_busy_times():
    trace, _ = _traced()
    busy = gx.busy_time(trace)
    assert len(busy) and np.isfinite(busy["gpu_busy_ms"]).all() and (busy["gpu_busy_ms"] > 0).all()


@pytest.mark.parametrize("col", ["registers_per_thread", "static_shared_bytes", "dynamic_shared_bytes", "grid_x"])
def test_negative_kernel_resources_are_refused_before_the_occupancy_estimate(col):
    trace, _ = _traced()
    trace.loc[trace.index[0], col] = -2048
    with pytest.raises(ResultError, match=f"{col} that is not a non-negative number"):
        gx.estimate_occupancy(trace)
    with pytest.raises(ResultError, match=col):
        gx.sm_usage(trace)


@pytest.mark.parametrize("registers, shared", [(-32, 0), (32, -1024), (0, -4096)])
def test_blocks_per_sm_refuses_negative_resources_instead_of_dividing_by_zero(registers, shared):
    with pytest.raises(ValueError, match="cannot be negative"):
        blocks_per_sm(256, registers, shared, LIMITS["9.0"])


# --------------------------------------------------------------------- PM samples

def _pm():
    tr = _trace()
    return pm.samples_frame(*_samples(), tr), tr


@pytest.mark.parametrize("col, value, text", [("start_ms", math.nan, "not a finite number"),
                                              ("end_ms", -1.0, "end before they start"),
                                              ("dram_pct", -3.0, "dram_pct that is not a non-negative"),
                                              ("sm_active_pct", math.inf, "sm_active_pct")])
def test_pm_samples_with_impossible_numbers_are_refused(col, value, text):
    samples, tr = _pm()
    samples.loc[samples.index[5], col] = value
    with pytest.raises(ResultError, match=text):
        gx.dram_summary(samples, tr)
    with pytest.raises(ResultError, match=text):
        gx.summarize(samples)


def test_dram_summary_never_averages_the_samples_of_two_runs():
    samples, tr = _pm()
    other = samples.copy()
    other["run_id"] = "r2"
    other["dram_pct"] = 5.0
    with pytest.raises(ValueError, match="2 runs: r1 .*, r2"):
        gx.dram_summary(pd.concat([samples, other], ignore_index=True), tr)
    with pytest.raises(ResultError, match="the trace is of run r1 .*PM sample of run r2"):
        gx.dram_summary(other, tr)
    assert gx.dram_summary(samples, tr)["dram_pct"].max() > 5.0  # its own run still works


def test_a_trace_without_its_repetition_groups_says_so():
    samples, tr = _pm()
    bare = tr.drop(columns="group")
    del bare.attrs["rep_origins"]
    with pytest.raises(ValueError, match="no repetition groups"):
        gx.dram_summary(samples, bare)
    del tr.attrs["rep_origins"]  # the group column alone places every kernel
    assert gx.dram_summary(samples, tr)["samples"].sum() > 0


# --------------------------------------------------------------------- a trace of another run

def test_summarize_refuses_the_trace_of_another_run():
    trace, df = _traced()
    trace["run_id"] = "another-run"
    with pytest.raises(ResultError, match="the trace is of run another-run"):
        gx.summarize(df, trace=trace)


def test_summarize_refuses_a_trace_of_other_workloads_or_repetitions():
    trace, df = _traced()
    renamed = trace.assign(workload=trace["workload"].replace({"matmul": "gemm"}))
    with pytest.raises(ValueError, match=r"workloads \['gemm', 'sigmoid'\]"):
        gx.summarize(df, trace=renamed)
    moved = trace.assign(layout="64+68")
    with pytest.raises(ResultError, match="covers none of the result's repetitions"):
        gx.summarize(df, trace=moved)


def test_summarize_refuses_a_trace_with_a_result_it_cannot_use():
    trace, _ = _traced()
    with pytest.raises(ResultError, match="trace= with an overlap or sweep result"):
        gx.summarize(S.isolation_df(), trace=trace)
    # a scaling result takes its own trace (the waves of its sizes), never another run's workloads
    with pytest.raises(ResultError, match=r"the trace's workloads \['matmul', 'sigmoid'\] are not in this scaling"):
        gx.summarize(S.scaling_df(), trace=trace)


def test_summarize_with_its_own_trace_takes_rates_from_it():
    trace, df = _traced()
    s = gx.summarize(df, trace=trace)
    assert s["reps_traced"].notna().all() and set(s.attrs["rate_notes"]) == {"concurrent", "streams"}


# --------------------------------------------------------------------- runs pooled

def _second_card(df, **identity):
    """The same run id measured on another card: slower, so pooling would show."""
    b = df.copy()
    b["duration_ms"] *= 2.0
    b["makespan_ms"] *= 2.0
    return b.assign(**identity)


def _reps(summary):
    return set(summary["reps"])


@pytest.mark.parametrize("how", ["device_name", "device_uuid"])
def test_two_cards_sharing_a_run_id_are_two_runs(how):
    a = S.sweep_df(repeats=5)
    if how == "device_name":
        both = pd.concat([a, _second_card(a, device_name="another card")], ignore_index=True)
    else:
        both = pd.concat([a.assign(device_uuid="GPU-aaaa"), _second_card(a, device_uuid="GPU-bbbb")],
                         ignore_index=True)
    s = gx.summarize(both)
    assert _reps(s) == {5}  # not 10: each card's repetitions stay its own
    assert s[how].nunique() == 2
    one = gx.summarize(a)
    mine = s[s[how] == both[how].iloc[0]].reset_index(drop=True)
    assert mine["median_ms"].to_numpy() == pytest.approx(one["median_ms"].to_numpy())
    with pytest.raises(ValueError, match="2 runs: synthetic-0"):
        gx.best_split(both)


def test_runs_without_identity_columns_are_not_pooled():
    a = S.sweep_df(seed=1).drop(columns=["device_name", "run_id"])
    b = _second_card(S.sweep_df(seed=2).drop(columns=["device_name", "run_id"]))
    assert _reps(gx.summarize(a)) == {5}  # one older file on its own is one run
    pooled = pd.concat([a, b], ignore_index=True)
    with pytest.raises(ResultError, match="carry no run identity"):
        gx.summarize(pooled)
    with pytest.raises(ValueError, match="carry no run identity"):
        gx.best_split(pooled)


@pytest.mark.parametrize("make", [S.sweep_df, S.scaling_df], ids=["sweep", "scaling"])
def test_the_same_run_concatenated_twice_is_refused_not_counted_twice(make):
    df = make()
    twice = pd.concat([df, df], ignore_index=True)
    with pytest.raises(ResultError, match="within one run .* concatenated twice"):
        gx.summarize(twice)


def test_the_same_trace_concatenated_twice_is_refused():
    trace, _ = _traced()
    with pytest.raises(ResultError, match="concatenated twice"):
        gx.summarize(pd.concat([trace, trace], ignore_index=True))


def _two_runs():
    a = S.sweep_df(seed=1)
    return pd.concat([a, _second_card(S.sweep_df(seed=2))], ignore_index=True)


def test_layout_table_refuses_several_runs_and_names_them():
    both = _two_runs()
    for given in (both, gx.summarize(both)):
        with pytest.raises(ValueError, match="layout_table .* 2 runs: synthetic-1 .*, synthetic-2"):
            gx.layout_table(given)
    assert len(gx.layout_table(both[both["run_id"] == "synthetic-1"]))


def test_to_chrome_trace_refuses_several_runs(tmp_path):
    with pytest.raises(ValueError, match="to_chrome_trace .* 2 runs"):
        gx.to_chrome_trace(_two_runs(), tmp_path / "both.json")
    trace, _ = _traced()
    other = trace.assign(run_id="another-run")
    with pytest.raises(ValueError, match="to_chrome_trace .* 2 runs"):
        gx.to_chrome_trace(pd.concat([trace, other], ignore_index=True), tmp_path / "t.json")
    assert not list(tmp_path.iterdir())


# --------------------------------------------------------------------- regressions: kind labels

@pytest.mark.parametrize("make, label", [(S.sweep_df, "scaling"), (S.scaling_df, "sweep"),
                                         (S.sweep_df, "isolation"), (S.isolation_df, "occupancy")])
def test_a_kind_label_that_contradicts_the_columns_is_refused(make, label):
    df = make()
    df.attrs["kind"] = label
    with pytest.raises(ResultError, match=f"attrs\\['kind'\\] says '{label}' but the columns do not fit"):
        gx.summarize(df)
    with pytest.raises(ValueError, match="the label and the rows disagree"):
        kind_of(df)


def test_labels_that_fit_their_columns_still_decide():
    sweep = S.sweep_df()
    for label in ("overlap", "sweep"):  # the same rows, either name
        sweep.attrs["kind"] = label
        assert kind_of(sweep) == label
    bare = S.sweep_df()
    bare.attrs.pop("kind")
    assert kind_of(bare) == "overlap"  # no label: told from the columns


# --------------------------------------------------------------------- regressions: the tuner

PAIRS = [(k, 132 - k) for k in range(8, 129, 8)]


def _curve(bad=None, where="makespan", every=False):
    """A convex makespan curve; with ``bad``, the first repetition of every layout (or, with
    ``every``, all of them) has that makespan (or first workload's duration)."""
    def measure(layout, n):
        durs = (100.0 / layout[0], 60.0 / layout[1])
        out = [(max(durs) + 0.005, durs)] * n
        for i in range(n if every else min(n, 1) if bad is not None else 0):
            m, d = out[i]
            out[i] = (bad, d) if where == "makespan" else (m, (bad, d[1]))
        return out
    return measure


@pytest.mark.parametrize("every", [False, True], ids=["one repetition", "every repetition"])
@pytest.mark.parametrize("bad", [math.nan, -1.0, math.inf, 0.0])
def test_the_tuner_refuses_impossible_makespans_instead_of_answering(bad, every):
    # without the check: every-repetition NaN answered met=True with value_ms NaN; one bad
    # repetition was hidden by the median
    with pytest.raises(ValueError, match="decides only on finite times"):
        SE.search(PAIRS, _curve(bad, every=every))


@pytest.mark.parametrize("bad", [math.nan, -0.5])
def test_a_latency_target_refuses_impossible_durations(bad):
    with pytest.raises(ValueError, match="decides only on finite times"):
        SE.search(PAIRS, _curve(bad, where="first"), SE.Settings(slo_ms=3.0))


def test_the_tuner_on_sound_measurements_still_answers():
    out = SE.search(PAIRS, _curve())
    assert out.met and math.isfinite(out.value_ms) and out.value_ms > 0


def test_tune_fed_a_nan_timing_fails_with_every_row_kept(monkeypatch):
    monkeypatch.setitem(S._MODEL, "broken", lambda sm, total: math.nan)
    with pytest.raises(gx.MeasurementFailed, match="finite times") as info:
        S.fake_tune(("compute", "broken"))
    part = info.value.partial
    assert len(part) == 5 * 2 and part["duration_ms"].isna().any()  # the first layout's rows, as measured


@pytest.mark.parametrize("origins", ["nope", [1, 2], [{"group": 0, "mode": "alone", "workloads": "ab"}]])
def test_damaged_repetition_origins_are_refused_by_name(origins):
    samples, tr = _pm()
    tr.attrs["rep_origins"] = origins
    with pytest.raises(ValueError, match="rep_origins'\\] of this trace is damaged"):
        gx.dram_summary(samples, tr)


def test_busy_time_of_a_trace_concatenated_twice_is_refused():
    trace, _ = _traced()
    with pytest.raises(ResultError, match="concatenated twice"):
        gx.busy_time(pd.concat([trace, trace], ignore_index=True))


def test_plot_occupancy_refuses_two_runs():
    import pandas as pd

    import gcexplore

    occ = gcexplore.load_recorded("occupancy")
    other = occ.assign(run_id="another-run")
    both = pd.concat([occ, other], ignore_index=True)
    both.attrs.update(occ.attrs)
    with pytest.raises(ValueError, match="plot_occupancy takes one run, but these rows hold 2 runs"):
        gcexplore.plot_occupancy(both)
