"""Serving in rounds, and the advisor keeping what it measured, without a GPU.

``serve(rounds=...)`` on the simulated GPU of tests/test_serving.py: every split and the whole device
once per round, round after round; each row carries its round; ``serving_table`` pools the rounds
and gives the spread between them. The recorded serving result (measured before rounds) reads as
round 0 and analyses to exactly what it did (tests/data/expected/, written before rounds existed).
``advise_split`` stopped at its k-th measurement keeps every row measured before it.
"""

from __future__ import annotations

import contextlib
import io
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gcexplore as gx
from gcexplore.experiments.runner import MeasurementFailed, MeasurementInterrupted
from gcexplore.serving import analysis as S

from test_serving import _cursor, _run, _simulated, SYNTH

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = ROOT / "tests" / "data" / "expected"


def _slo_of(df):
    return S.ServingSLO(df.attrs["slo_ttft_ms"], df.attrs["slo_itl_p99_ms"], df.attrs["slo_attainment"])


# -- serve(rounds=...) on the simulated GPU ---------------------------------------------------------

def test_rounds_are_interleaved_and_every_row_carries_its_round(monkeypatch):
    E, model = _simulated(monkeypatch)
    said: list[str] = []
    df = E.serve(model, [32, 96], rates=[30.0], duration_s=0.1, seed=2, rounds=3, progress=said.append)
    assert sorted(df["round"].unique()) == [0, 1, 2] and df.attrs["rounds"] == 3
    runs = df.groupby(["mode", "layout", "load"])["round"].nunique()
    assert (runs == 3).all()  # every run (mode, split, load) in every round
    # round by round: every line of a round comes before any of the next
    rounds = [int(line.split(" round ")[1].split()[0]) for line in said]
    assert rounds == sorted(rounds) and set(rounds) == {0, 1, 2}
    # the arrivals are the same in every round
    reqs = df[(df["record"] == "request") & (df["mode"] == "partitioned") & (df["layout"] == "32+100")]
    per = [tuple(g.sort_values("index")["arrival_ms"]) for _, g in reqs.groupby("round")]
    assert len(set(per)) == 1


def test_each_rounds_visits_come_in_a_fresh_order(monkeypatch):
    E, model = _simulated(monkeypatch)
    said: list[str] = []
    E.serve(model, [16, 32, 48, 64, 80, 96], rates=[30.0], duration_s=0.02, seed=2, rounds=4,
            modes=("partitioned",), progress=said.append)
    orders = {}
    for line in said:
        layout, rnd = line.split(" round ")[0], int(line.split(" round ")[1].split()[0])
        orders.setdefault(rnd, []).append(layout)
    assert all(sorted(o) == sorted(orders[0]) for o in orders.values())  # every split once per round
    assert len({tuple(o) for o in orders.values()}) > 1  # 4 shuffles of 6 splits: not all one order


def test_one_round_is_round_zero_in_the_given_order(monkeypatch):
    E, model = _simulated(monkeypatch)
    said: list[str] = []
    df = E.serve(model, [96, 32], rates=[30.0], duration_s=0.05, seed=2, modes=("partitioned",),
                 progress=said.append)
    assert set(df["round"]) == {0} and df.attrs["rounds"] == 1
    assert [line.split()[0] for line in said] == ["96+36", "32+100"] and " round " not in " ".join(said)
    assert (S.serving_table(df)["rounds"] == 1).all()


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2"])
def test_a_bad_round_count_is_refused_before_the_gpu(monkeypatch, bad):
    E, model = _simulated(monkeypatch)
    monkeypatch.setattr(E, "device_info", lambda device: pytest.fail("the device was asked before the check"))
    with pytest.raises((ValueError, TypeError), match="rounds"):
        E.serve(model, [32], rates=[30.0], rounds=bad)


def test_the_table_pools_rounds_and_gives_the_spread_between_them(monkeypatch):
    E, model = _simulated(monkeypatch)
    df = E.serve(model, [32], rates=[30.0, 60.0], duration_s=0.1, seed=2, rounds=2,
                 modes=("alone", "paired", "partitioned"))
    t = S.serving_table(df)
    per = {r: S.serving_table(df[df["round"] == r]) for r in (0, 1)}
    assert (t["rounds"] == 2).all()
    keys = ["mode", "layout", "load", "decode_sm_count"]
    both = per[0].merge(per[1], on=keys, suffixes=("_0", "_1"))
    m = t.merge(both, on=keys)
    assert len(m) == len(t) == len(per[0])  # one row per run, its rounds pooled
    for c in ("gaps", "requests", "served", "window_ms", "run_ms"):  # counts and times add up over rounds
        assert np.allclose(m[c], m[f"{c}_0"] + m[f"{c}_1"])
    for c in S.SPREAD_OF:  # largest minus smallest of the rounds' own tails
        want = (m[f"{c}_0"] - m[f"{c}_1"]).abs().fillna(0.0)
        assert np.allclose(m[c.replace("_ms", "_spread_ms")].fillna(0.0), want)
    # the pooled tail is the quantile of every round's gaps together
    rows = df[(df["mode"] == "partitioned") & (df["load"] == "poisson 30/s") & (df["record"] == "gap")]
    got = t[(t["mode"] == "partitioned") & (t["load"] == "poisson 30/s")]["itl_p99_ms"].item()
    assert got == pytest.approx(np.quantile(rows["itl_ms"].to_numpy(), 0.99))
    # the goodput table quotes the best run's tails with their spreads (only where there are rounds)
    slo = S.ServingSLO(ttft_ms=1e4, itl_p99_ms=1e3)  # met by every run: the best is the highest rate
    good = S.goodput_table(df, slo)
    best = t[(t["mode"] == "partitioned") & (t["rate_rps"] == 60.0)]
    assert good["itl_p99_spread_ms"].item() == best["itl_p99_spread_ms"].item()
    assert good["ttft_p50_spread_ms"].item() == best["ttft_p50_spread_ms"].item()
    assert "itl_p99_spread_ms" not in S.goodput_table(df[df["round"] == 0], slo).columns


def test_a_rounds_tail_spread_is_infinite_where_one_round_left_requests_unserved():
    rows = [dict(r, round=0) for r in _run("partitioned", "32+100", 32, 100, 10, [1.0] * 4, [0, 1], [5.0, 6.0])]
    rows += [dict(r, round=1) for r in _run("partitioned", "32+100", 32, 100, 10, [1.0] * 4, [0, 1],
                                            [5.0, math.nan])]
    t = S.serving_table(gx.schema.frame(rows, "serving", SYNTH))
    assert t["ttft_p99_spread_ms"].item() == math.inf and t["itl_p99_spread_ms"].item() == 0.0


def test_busy_gaps_pair_each_rounds_gaps_with_its_own_requests():
    """Each round runs on its own clock from 0: a gap of round 0 overlaps no request of round 1."""
    def one(rnd, req):
        gaps = [1.0] * 10 + [5.0] * 2  # ten 1 ms gaps over 0-10 ms, two 5 ms gaps over 10-20 ms
        return [dict(r, round=rnd) for r in _run("paired", "32+100", 32, 100, 0, gaps, [req], [10.0])]

    df = gx.schema.frame(one(0, 0.0) + one(1, 10.0), "serving", SYNTH)
    busy = np.sort(S._busy_gaps(df))
    assert busy.tolist() == [1.0] * 10 + [5.0] * 2  # round 0: the 1 ms gaps; round 1: the 5 ms gaps
    pooled = np.sort(S._busy_gaps(df.assign(round=0)))  # as one clock the two rounds' times would mix
    assert len(pooled) == 24


def test_loads_and_predictions_of_two_rounds_are_those_of_one_when_the_rounds_agree(monkeypatch):
    E, model = _simulated(monkeypatch)
    one = E.serve(model, [32], rates=[30.0], duration_s=0.1, seed=2, modes=("alone", "paired", "partitioned"))
    twice = pd.concat([one, one.assign(round=1)], ignore_index=True)
    twice.attrs = dict(one.attrs)
    (a_rate, a_arr), = S.loads_of(one).values()
    (b_rate, b_arr), = S.loads_of(twice).values()
    assert a_rate == b_rate and np.array_equal(a_arr, b_arr)  # one round's arrivals, not two rounds' at once
    p1 = S.predict_serving(one, S.loads_of(one))
    p2 = S.predict_serving(twice, S.loads_of(twice))
    pd.testing.assert_frame_equal(p1, p2)


def test_the_cli_names_the_spread_only_for_results_of_several_rounds(monkeypatch, capsys):
    import gcexplore.cli.commands  # noqa: F401 (first: gcexplore.serving.cli imported alone runs in a circle)
    from gcexplore.serving import cli

    E, model = _simulated(monkeypatch)
    df = E.serve(model, [32], rates=[30.0], duration_s=0.05, seed=2, rounds=2, modes=("partitioned", "streams"))
    cli._show(df, None, "poisson")
    out = capsys.readouterr().out
    assert "itl_p99_spread_ms" in out and "pooled over 2 rounds" in out
    assert "2 rounds, whose own ITL p99 differ by up to" in S.trade_facts(S.serving_table(df))["text"]
    cli._show(df[df["round"] == 0], None, "poisson")
    out = capsys.readouterr().out
    assert "spread" not in out and "rounds" not in out


# -- the recorded result, measured before rounds ----------------------------------------------------

def test_the_recorded_serving_result_reads_as_round_zero_and_analyses_as_before():
    df = gx.load_recorded("serving")
    assert set(df["round"]) == {0}
    slo = _slo_of(df)
    t = S.serving_table(df, slo)
    old = pd.read_csv(EXPECTED / "serving_table_recorded.csv")
    back = pd.read_csv(io.StringIO(t[list(old.columns)].to_csv(index=False, float_format="%.17g")))
    pd.testing.assert_frame_equal(back, old, rtol=0, atol=0)
    assert (t["rounds"] == 1).all()
    for c in S.SPREAD_OF:  # one round: no spread, NaN where the tail itself is (an alone row's other role)
        spread = t[c.replace("_ms", "_spread_ms")]
        assert (spread[t[c].notna()] == 0).all() and spread[t[c].isna()].isna().all()
    p = S.predict_serving(df, S.loads_of(df), slo, S.deadline_of(df))
    old = pd.read_csv(EXPECTED / "predict_serving_recorded.csv")
    back = pd.read_csv(io.StringIO(p.to_csv(index=False, float_format="%.17g")))
    pd.testing.assert_frame_equal(back, old, rtol=0, atol=0)


@pytest.mark.parametrize("argv, expected", [(["serve", "--recorded"], "serve_recorded.txt"),
                                            (["serve", "--recorded", "--ttft-ms", "200", "--itl-p99-ms", "5"],
                                             "serve_recorded_slo.txt")])
def test_serve_recorded_prints_what_it_printed(argv, expected):
    from gcexplore.cli.commands import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    assert out.getvalue() == (EXPECTED / expected).read_text()


# -- the advisor keeps its rows ---------------------------------------------------------------------

_ADVISE = dict(rates=[20.0, 60.0], duration_s=0.05, seed=2)
# no split can meet a 1 ms TTFT (a prefill takes 5 ms): the advisor measures every split once, at the
# lowest rate, after the alone / paired run: 4 serving runs, whatever the simulated host's timing
_SLO = S.ServingSLO(ttft_ms=1.0, itl_p99_ms=50.0, attainment=0.9)
_SPLITS = [32, 64, 96]


def _counting_serve(monkeypatch, E, fail_at, exc):
    """serve() that raises ``exc`` when called for the ``fail_at``-th time (1-based), before measuring;
    the frames the earlier calls returned are in ``returned``."""
    from gcexplore.serving import advisor

    real, calls = E.serve, {"n": 0, "returned": []}

    def serve(*a, **kw):
        calls["n"] += 1
        if calls["n"] == fail_at:
            raise exc
        calls["returned"].append(real(*a, **kw))
        return calls["returned"][-1]

    monkeypatch.setattr(advisor.E, "serve", serve)
    return calls


@pytest.mark.parametrize("exc, aborted", [(RuntimeError("CUDA error: an illegal memory access"), MeasurementFailed),
                                          (KeyboardInterrupt(), MeasurementInterrupted)])
@pytest.mark.parametrize("k", [2, 3, 4])
def test_the_advisor_stopped_at_its_kth_measurement_keeps_every_row_before_it(monkeypatch, exc, aborted, k):
    from gcexplore.serving.advisor import advise_split

    E, model = _simulated(monkeypatch)
    calls = _counting_serve(monkeypatch, E, k, exc)
    with pytest.raises(aborted) as e:
        advise_split(model, _SPLITS, _SLO, **_ADVISE)
    assert calls["n"] == k and len(calls["returned"]) == k - 1
    kept = e.value.partial
    assert kept.attrs["partial"] is True and kept.attrs["kind"] == "serving"
    before = pd.concat(calls["returned"], ignore_index=True)  # every serve() call before the k-th
    pd.testing.assert_frame_equal(kept, before)
    assert kept["run_id"].nunique() == k - 1 and set(kept["mode"]) == {"alone", "paired", "partitioned"} - (
        {"partitioned"} if k == 2 else set())
    assert f"the {len(kept)} rows of the {k - 1} serving run(s) measured so far" in str(e.value)
    assert e.value.__cause__ is exc


def test_the_advisor_uninterrupted_measures_four_runs(monkeypatch):
    from gcexplore.serving.advisor import advise_split

    E, model = _simulated(monkeypatch)
    calls = _counting_serve(monkeypatch, E, 0, None)
    advice, measured = advise_split(model, _SPLITS, _SLO, **_ADVISE)
    assert calls["n"] == 4 and advice.layout is None and len(advice.measured) == 3
    assert "partial" not in measured.attrs and measured["run_id"].nunique() == 4


@pytest.mark.parametrize("exc, aborted", [(RuntimeError("CUDA error: an illegal memory access"), MeasurementFailed),
                                          (KeyboardInterrupt(), MeasurementInterrupted)])
def test_the_advisor_stopped_inside_a_measurement_keeps_that_runs_rows_too(monkeypatch, exc, aborted):
    """A fault inside the first serving run (the alone / paired one), at its second split: the first
    split's rows come back, from inside serve()."""
    from gcexplore.serving.advisor import advise_split

    calls = {"n": 0}

    def prefill(*, stream):  # fails on the second split's prefill partition (the simulation names it p64)
        calls["n"] += 1
        if stream.name == "p64":
            raise exc
        stream.t["now"][stream.name] = _cursor(stream) + 5.0

    E, model = _simulated(monkeypatch, prefill=prefill)
    with pytest.raises(aborted) as e:
        advise_split(model, _SPLITS, _SLO, **_ADVISE)
    assert calls["n"] > 1
    kept = e.value.partial
    assert kept.attrs["partial"] is True and set(kept["layout"]) == {"32+100"}
    assert set(kept["mode"]) == {"alone", "paired"} and kept["run_id"].nunique() == 1
    assert e.value.__cause__ is exc and f"the {len(kept)} rows of the 1 serving run(s)" in str(e.value)


def test_the_cli_advisor_saves_the_rows_measured_before_a_failure(monkeypatch, tmp_path, capsys):
    import argparse

    import gcexplore.cli.commands  # noqa: F401 (first: gcexplore.serving.cli imported alone runs in a circle)
    from gcexplore.results.io import load
    from gcexplore.serving import cli, roles

    E, model = _simulated(monkeypatch)
    calls = _counting_serve(monkeypatch, E, 3, RuntimeError("boom"))
    monkeypatch.setattr(cli, "_require_gpu", lambda: None)
    monkeypatch.setattr(roles, "decoder_stack", lambda *a, **kw: model)
    out = tmp_path / "serving.parquet"
    args = argparse.Namespace(recorded=False, out=str(out), chunk=512, prompt=2048, rates=_ADVISE["rates"],
                              duration=_ADVISE["duration_s"], seed=2, pattern="poisson", burst=8, layers=1, batch=4,
                              kv_len=64, no_graphs=True, device=0, advise=True, decode_sms=_SPLITS,
                              ttft_ms=_SLO.ttft_ms, itl_p99_ms=_SLO.itl_p99_ms, attainment=_SLO.attainment, rounds=2)
    assert cli.cmd_serve(args) == 1
    assert calls["n"] == 3
    back = load(out)
    assert back["run_id"].nunique() == 2 and set(back["round"]) == {0, 1}  # two runs of two rounds each
    assert "rows measured so far" in capsys.readouterr().err
