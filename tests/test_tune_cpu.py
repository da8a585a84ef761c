"""The tuner's glue without a GPU: rows and attrs, kept rows on failure, the table, the
plot, the command line and the sweep explorer's Tune button (synthetic timings)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import _synthetic as S
import gcexplore
from gcexplore import analysis as A
from gcexplore.results import io as R
from gcexplore.experiments import tuner as T
from gcexplore import experiments as X
from gcexplore.results.kinds import kind_of
from gcexplore.schema import columns

ROOT = Path(__file__).resolve().parents[1]


def test_candidates_cover_the_valid_sizes_and_fixed_or_searched_middles(h100_like):
    two = T.candidates(h100_like, 2)
    assert two[0] == (8, 124) and two[-1] == (128, 4) and len(two) == 16
    fixed = T.candidates(h100_like, 3, others=[16])
    assert {c[1] for c in fixed} == {16} and all(sum(c) == 132 for c in fixed)
    assert len(T.candidates(h100_like, 3)) > 100
    with pytest.raises(ValueError, match="valid sizes are 8, 16"):
        T.candidates(h100_like, 2, sm_counts=[12])
    with pytest.raises(ValueError, match="3 workloads need 1 fixed size"):
        T.candidates(h100_like, 3, others=[8, 8])
    with pytest.raises(ValueError, match="at least two workloads"):
        T.candidates(h100_like, 1)


def test_tune_rows_are_concurrent_rows_with_the_search_step():
    df = S.fake_tune()
    assert list(df.columns) == columns("tune") and kind_of(df) == "tune"
    assert set(df["mode"]) == {"concurrent"}
    a = df.attrs
    assert a["kind"] == "tune" and a["objective"] == "makespan" and a["answer"] == "104+28"
    assert [v["layout"] for v in a["visits"]] == list(dict.fromkeys(df.sort_values("step")["layout"]))
    # repetitions count on across a layout's visits, one row per workload each
    for _, g in df.groupby("layout"):
        assert sorted(g["rep"].unique()) == list(range(g["rep"].nunique()))
        assert (g.groupby("rep").size() == 2).all()
    assert set(a["unmeasured"]) | set(df["layout"]) == set(a["candidates"])
    assert a["reason"][0].startswith("104+28 has the lowest median concurrent makespan")


def test_the_tuner_measures_with_its_own_options_and_leaves_the_runs_alone():
    runs: list = []
    df = S.fake_tune(runs=runs, repeats=5)
    (run,) = runs
    assert run.options.repeats == 5 and run.options.modes == ("concurrent",)
    assert len(run.measured_with) == len(df.attrs["visits"])
    for during, given in run.measured_with:
        assert during is run.options  # the run's options were never swapped, even while measuring
        assert given is not run.options and given.modes == ("concurrent",) and given.warmup == run.options.warmup
    assert [g.repeats for _, g in run.measured_with] == [v["reps"] for v in df.attrs["visits"]]
    assert run.redraws == len(df.attrs["visits"])  # each visit is a round: setup= inputs drawn again


def test_tune_table_and_gpu_time():
    df = S.fake_tune()
    t = A.tune_table(df)
    assert list(t.columns) == A.TUNE_TABLE_COLUMNS
    assert t["answer"].sum() == 1 and t.loc[t["answer"], "layout"].item() == "104+28"
    assert t.loc[t["answer"], "makespan_ms"].item() == pytest.approx(df.attrs["value_ms"])
    assert list(t["first_step"]) == sorted(t["first_step"])
    spans = df.groupby(["step", "rep"])["makespan_ms"].max()
    expect = spans.sum() + df.attrs["warmup"] * spans.groupby(level=0).median().sum()
    assert A.gpu_time_ms(df) == pytest.approx(expect)
    assert A.summarize(df)["mode"].eq("concurrent").all()
    assert A.best_layout(df) == "104+28"


def test_latency_target_met_and_not_met():
    df = S.fake_tune(slo_ms=2.0)
    assert df.attrs["answer"] == "80+52" and df.attrs["met"]
    assert A.slo_split(df, 2.0) == "80+52"
    t = A.tune_table(df)
    assert (t.loc[t["answer"], "latency_ci_high_ms"] <= 2.0).all()
    unmet = S.fake_tune(slo_ms=0.3)
    assert unmet.attrs["answer"] is None and unmet.attrs["met"] is False
    assert unmet.attrs["best_measured"] == "128+4"
    assert "not met" in unmet.attrs["reason"][0]
    assert A.slo_split(unmet, 0.3) is None


def test_slo_split_of_a_sweep_is_the_smallest_size_meeting_the_target():
    df = S.sweep_df()
    conc = df[(df["mode"] == "concurrent") & (df["workload"] == "compute")]
    med = conc.groupby("split_sm_count")["duration_ms"].median()
    want = int(med[med <= 2.0].index.min())
    assert A.slo_split(df, 2.0) == f"{want}+{132 - want}"


def test_a_failure_keeps_every_measured_repetition():
    with pytest.raises(gcexplore.MeasurementFailed) as info:
        S.fake_tune(fail_at=3)
    part = info.value.partial
    assert part.attrs["partial"] is True and kind_of(part) == "tune"
    assert part["step"].nunique() == 3 and len(part) == 3 * 5 * 2
    visits = part.attrs["visits"]  # the failed attempt is there, with no repetition
    assert [v["layout"] for v in visits[:3]] == list(dict.fromkeys(part["layout"]))
    assert visits[3]["reps"] == 0 and len(visits) == 4


def test_three_workloads_and_a_target_without_others_is_refused_before_measuring():
    with pytest.raises(ValueError, match="needs others="):
        S.fake_tune(("compute", "memory", "spin"), slo_ms=1.0)
    df = S.fake_tune(("compute", "memory", "spin"), slo_ms=3.0, others=[16])
    assert df.attrs["answer"].split("+")[1] == "16"


def test_tune_results_save_and_load(tmp_path):
    df = S.fake_tune(slo_ms=2.0)
    back = R.load(R.save(df, tmp_path / "tune.parquet"))
    assert back.attrs["answer"] == "80+52" and back.attrs["reason"] == df.attrs["reason"]
    pd.testing.assert_frame_equal(A.tune_table(back), A.tune_table(df))


def test_plot_marks_the_answer_and_the_bounds():
    fig = gcexplore.plot_tune(S.fake_tune())
    left, right = fig.axes
    gids = {a.get_gid() for a in right.get_children()}
    assert {"answer", "bounds"} <= gids
    assert "104+28" in fig.get_suptitle() and S.SYNTHETIC_DEVICE in fig.get_suptitle()
    steps = [a for a in left.get_lines() if str(a.get_gid()).startswith("step:")]
    assert len(steps) == len(S.fake_tune().attrs["visits"])
    unmet = gcexplore.plot_tune(S.fake_tune(slo_ms=0.3))
    gids = {a.get_gid() for a in unmet.axes[1].get_children()}
    assert {"target", "best_measured"} <= gids and "answer" not in gids
    assert "target not met" in unmet.get_suptitle()


def test_plot_refuses_a_sweep():
    with pytest.raises(ValueError, match=r"plot_tune needs the columns \['step'\]"):
        gcexplore.plot_tune(S.sweep_df())


def _cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "gcexplore.cli", *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize("args, message", [
    (["tune", "compute", "memory", "--slo-ms", "0"], "--slo-ms must be a number of milliseconds in (0, 1e+06]"),
    (["tune", "compute", "memory", "--slo-ms", "x"], "--slo-ms: expected a number, got 'x'"),
    (["tune", "compute", "memory", "--percentile", "100"], "percentile must be in (0, 100)"),
    (["tune", "compute", "memory", "--tolerance", "0.9"], "tolerance must be a number in [0.001, 0.5]"),
    (["tune", "compute", "memory", "--repeats", "8", "--max-repeats", "4"], "max_repeats must be an int in [8,"),
    (["tune", "compute", "memory", "spin", "--slo-ms", "1"], "--slo-ms with 3 workloads needs --others"),
    (["tune", "compute", "fast"], "unknown built-in workload 'fast'"),
    (["tune", "compute", "memory", "--out", "t.txt"], "--out 't.txt' must end in .parquet or .csv"),
])
def test_cli_checks_tune_arguments_before_the_gpu(tmp_path, args, message):
    r = _cli(*args, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_cli_prints_the_table_answer_and_reason(monkeypatch, capsys, tmp_path):
    from gcexplore.workloads import builtins as workloads
    from gcexplore.cli import commands as cli

    class Dummy:
        def close(self):
            pass

    monkeypatch.setattr(workloads, "builtin", lambda name, **kw: Dummy())
    df = S.fake_tune(slo_ms=2.0)
    seen = {}
    monkeypatch.setattr(T, "tune", lambda wls, **kw: seen.update(kw) or df)
    out = tmp_path / "t.parquet"
    assert cli.main(["tune", "compute", "memory", "--slo-ms", "2", "--out", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "80+52 is the smallest first partition measured" in text
    assert "at 80+52:" in text and "throughput_tflops" in text and f"wrote {out}" in text
    assert R.load(out).attrs["answer"] == "80+52"
    assert seen["slo_ms"] == 2.0 and seen["progress"] is False and seen["max_repeats"] == 40


def test_sweep_explorer_tune_button(monkeypatch):
    import gcexplore.widgets as GW
    from gcexplore.device import driver as api

    monkeypatch.setattr(api, "device_info", lambda device=0: gcexplore.DeviceInfo(
        name=S.SYNTHETIC_DEVICE, index=0, compute_capability=(9, 0), sm_count=132, min_partition_size=8,
        alignment=8, driver_version=13000))
    monkeypatch.setattr(X, "tune", lambda wls, **kw: S.fake_tune(list(wls)))
    monkeypatch.setattr(X, "occupancy", lambda *a, **k: S.occupancy_df())
    sx = GW.SweepExplorer()
    assert not sx.tune_button.disabled and __import__("gcexplore.explorers._base", fromlist=["CSS"]).CSS["tune"] in sx.tune_button._dom_classes
    sx.tune_button.click()
    assert sx.error_box.layout.display == "none", sx.error_box.value
    assert sx.split_slider.value == 104 and sx.layout == "104+28"
    assert sx.figures["sweep"].axes[1].get_title() == "layouts measured"
    assert list(sx.split_slider.options) == sorted(sx.results["split_sm_count"].unique())
    assert "104+28 has the lowest" in sx.status.value
    off = GW.SweepExplorer.from_results(S.sweep_df(recorded=True))
    assert off.tune_button.disabled


def test_sweep_explorer_tune_keeps_partial_rows(monkeypatch):
    import gcexplore.widgets as GW
    from gcexplore.device import driver as api

    monkeypatch.setattr(api, "device_info", lambda device=0: gcexplore.DeviceInfo(
        name=S.SYNTHETIC_DEVICE, index=0, compute_capability=(9, 0), sm_count=132, min_partition_size=8,
        alignment=8, driver_version=13000))
    monkeypatch.setattr(X, "tune", lambda wls, **kw: S.fake_tune(list(wls), fail_at=2))
    monkeypatch.setattr(X, "occupancy", lambda *a, **k: S.occupancy_df())
    sx = GW.SweepExplorer()
    sx.tune()
    assert "the tuner failed" in sx.error_box.value
    assert len(sx.split_slider.options) == 2 and sx.redraws["sweep"] == 1
    assert np.isin(sx.results["step"], [0, 1]).all()
