"""Silently wrong at the edges (issue 29): inputs that used to get a confident answer now get a
refusal that says what is wrong, or the answer with a note that says what it does not model."""

from __future__ import annotations

import math

import _synthetic as S
import numpy as np
import pandas as pd
import pytest

import gcexplore as gx
from gcexplore.prediction import model as P
from gcexplore.analysis.stats import quantile_ci
from gcexplore.analysis.tuning import gpu_time_ms, tune_table
from gcexplore.results import io as R
from gcexplore.results.validate import ResultError

CARD = 40


def _profile(name, time_at, *, bw=3000.0, run="r", nbytes=1e9):
    rows = [{"workload": name, "position": pos, "sm_count": k if pos == "first" else CARD - k, "rep": r,
             "duration_ms": time_at(k if pos == "first" else CARD - k), "start_ms": 0.0, "bytes": nbytes,
             "flops": math.nan, "working_set_bytes": math.nan, "shared_bandwidth_gbs": bw, "l2_bytes": 50 * 2 ** 20,
             "device_sm_count": CARD, "sm_alignment": 8, "device_name": "test card", "run_id": run}
            for pos in ("first", "last") for k in range(8, CARD, 8) for r in range(3)]
    df = pd.DataFrame(rows, columns=P.PROFILE_COLUMNS)
    df.attrs["kind"] = "solo_profile"
    return df


def _stream(name, **kw):
    return _profile(name, lambda k: max(1.0, 16.0 / k), **kw)


# ------------------------------------------------------------------ profiles and predict


def test_a_profile_without_bandwidth_says_dram_sharing_is_not_modelled():
    profs = [_stream("a", bw=math.nan), _stream("b", bw=math.nan)]
    with pytest.warns(UserWarning, match="DRAM sharing is not modelled"):
        pred = gx.predict(profs)
    assert any("shared_bandwidth_gbs=" in n for n in pred.attrs["notes"])
    assert gx.predict([_stream("a"), _stream("b")]).attrs["notes"] == []


@pytest.mark.parametrize("bw", [0.0, -5.0])
def test_a_bandwidth_of_zero_or_below_is_refused(bw):
    with pytest.raises(P.ProfileError, match="shared_bandwidth_gbs must be a positive bandwidth"):
        gx.predict([_stream("a", bw=bw), _stream("b", bw=bw)])
    with pytest.raises(ValueError, match="shared_bandwidth_gbs must be a positive bandwidth"):
        gx.predict([_stream("a"), _stream("b")], shared_bandwidth_gbs=bw)


def test_profiles_at_different_bandwidths_are_refused():
    with pytest.raises(P.ProfileError, match="different shared bandwidths"):
        gx.predict([_stream("a", bw=3000.0), _stream("b", bw=4000.0)])
    gx.predict([_stream("a", bw=3000.0), _stream("b", bw=4000.0)], shared_bandwidth_gbs=3500.0)  # said which


def test_one_workload_profiled_twice_is_not_pooled():
    with pytest.raises(P.ProfileError, match="workload 'a' is in profiles 0 and 1"):
        gx.predict([_stream("a", run="r1"), _stream("a", run="r2"), _stream("b")])
    both = pd.concat([_stream("a", run="r1"), _stream("a", run="r2")], ignore_index=True)
    with pytest.raises(P.ProfileError, match="profiled in 2 runs"):
        gx.predict([both, _stream("b")])


def test_a_layout_larger_than_the_card_is_refused():
    with pytest.raises(ValueError, match="needs 48 SMs; the profiled card .* has 40"):
        gx.predict([_stream("a"), _stream("b")], layouts=["24+24"])


def test_predict_error_refuses_another_pairs_sweep():
    pred = gx.predict([_stream("compute"), _stream("copy")])
    sweep = S.sweep_df()  # compute + memory
    with pytest.raises(ValueError, match="the prediction is of compute, copy, the measurement of compute, memory"):
        gx.predict_error(pred, sweep)


# ------------------------------------------------------------------ results


def test_a_csv_cut_short_is_refused_even_without_a_row_count(tmp_path):
    path = R.save(S.sweep_df(), tmp_path / "r.csv")
    side = path.with_suffix(".json")
    meta = __import__("json").loads(side.read_text())
    del meta["rows"], meta["sha256"]  # a sidecar from before these were recorded
    side.write_text(__import__("json").dumps(meta))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # cut in place, mid-row
    with pytest.raises(R.ResultFileError, match="ends in the middle of a row"):
        R.load(path)


def test_rows_without_a_repetition_are_refused_not_dropped(tmp_path):
    df = S.sweep_df()
    df.loc[df.index[3], "rep"] = np.nan
    with pytest.raises(ResultError, match="1 rows have no repetition number"):
        gx.to_chrome_trace(df, tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()


def test_blocks_without_an_sm_are_refused_not_drawn_on_sm_0():
    occ = gx.load_recorded("occupancy").copy()
    occ["sm_id"] = occ["sm_id"].astype(float)
    occ.loc[occ.index[0], "sm_id"] = np.nan
    with pytest.raises(ResultError, match="1 blocks have no SM id"):
        gx.plot_occupancy(occ)


@pytest.mark.parametrize("value", [np.nan, -1.0])
def test_tune_table_refuses_times_the_search_refuses(value):
    df = gx.load_recorded("sweep")
    tune = df[df["mode"] == "concurrent"].assign(step=0).copy()
    tune.attrs = {**df.attrs, "kind": "tune"}
    tune_table(tune)  # as recorded: fine
    tune.loc[tune.index[0], "makespan_ms"] = value
    with pytest.raises(ResultError, match="makespan_ms"):
        tune_table(tune)
    with pytest.raises(ResultError, match="makespan_ms"):
        gx.plot_tune(tune)


@pytest.mark.parametrize("q, conf, what", [(1.5, 0.9, "q must be"), (0.0, 0.9, "q must be"), (0.5, 2.0, "confidence"),
                                           (0.5, 0.0, "confidence")])
def test_quantile_ci_refuses_what_is_no_quantile_or_level(q, conf, what):
    with pytest.raises(ValueError, match=what):
        quantile_ci([1.0, 2.0, 3.0, 4.0, 5.0], q, conf)


@pytest.mark.parametrize("warmup", [-3, 1.5])
def test_gpu_time_refuses_a_warmup_that_is_no_count(warmup):
    df = S.sweep_df()
    assert gpu_time_ms(df) > 0
    df.attrs["warmup"] = warmup
    with pytest.raises(ValueError, match="warmup"):
        gpu_time_ms(df)


def test_gpu_time_counts_a_layouts_later_rounds_with_their_own_warm_up():
    df = S.sweep_df(splits=[8, 64], repeats=6)
    df["round"] = (df["rep"] >= 3).astype(int)  # two rounds of 3
    df.attrs.update(warmup=3, warmup_later_modes=1, modes=["alone", "concurrent", "sequential", "streams"])
    per_rep = df.groupby(["layout", "mode", "round", "rep"])["makespan_ms"].max()
    med = per_rep.groupby(level=["layout", "mode", "round"]).median()
    counts = {"alone": 3, "concurrent": 1, "sequential": 1, "streams": 1}
    weight = [counts[m] if r == 0 else 0 for _, m, r in med.index]
    df.attrs["warmup_later_rounds"] = [0, 0, 0, 0]  # later rounds: short spins only
    assert gpu_time_ms(df) == pytest.approx(per_rep.sum() + (med * weight).sum())
    df.attrs["warmup_later_rounds"] = [1, 0, 0, 0]
    weight = [counts[m] if r == 0 else int(m == "alone") for _, m, r in med.index]
    assert gpu_time_ms(df) == pytest.approx(per_rep.sum() + (med * weight).sum())
    df.attrs.update(warmup_later_rounds=[0, 0, 0, 0], warmup_calls=["8+124"])  # one call of each workload there
    weight = [counts[m] if r == 0 else int(m == "alone" and lay == "8+124") for lay, m, r in med.index]
    assert gpu_time_ms(df) == pytest.approx(per_rep.sum() + (med * weight).sum())
    del df.attrs["warmup_later_rounds"]  # recorded before: every round warmed up in full
    assert gpu_time_ms(df) == pytest.approx(per_rep.sum() + (med * [counts[m] for _, m, _ in med.index]).sum())
    df.attrs["warmup_later_rounds"] = [-1, 0, 0, 0]
    with pytest.raises(ValueError, match="warmup_later_rounds"):
        gpu_time_ms(df)


def test_the_cli_summary_says_later_rounds_skip_the_warm_up(capsys):
    from gcexplore.cli.commands import _print_overlap

    df = S.sweep_df(splits=[8, 64], repeats=6)
    df["round"] = (df["rep"] >= 3).astype(int)
    df.attrs.update(repeats=6, rounds=2, warmup=3, launch_gap_us=8.0, warmup_later_rounds=[0, 0, 0, 0])
    _print_overlap(df)
    assert "6 repetitions in 2 round(s), 3 warm-up in a layout's first round, 0 in its later ones" in capsys.readouterr().out
    del df.attrs["warmup_later_rounds"]  # recorded before: every round warmed up
    _print_overlap(df)
    assert "6 repetitions in 2 round(s), each after 3 warm-up" in capsys.readouterr().out
