"""Profiles prepared once (``PreparedProfiles``) predict what the frame itself predicts, and a measured
sweep read once (``MeasuredSide``) gives what ``predict_error`` gives: fit_model relies on both."""

from __future__ import annotations

import math

import pandas as pd
import pytest

import gcexplore as gx
from gcexplore.prediction import model as P
from gcexplore.prediction import traffic_profile as TP
from gcexplore.prediction.check import MeasuredSide, _error_rows, predict_kwargs
from gcexplore.results.run import run_of
from test_predict import _compute, _stream
from test_traffic import _recorded_pairs


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a, b)
    assert a.attrs == b.attrs


def test_prepared_recorded_profiles_predict_what_the_frame_predicts_at_the_shipped_terms():
    prof, sweeps = _recorded_pairs()
    ready = P.PreparedProfiles(prof)
    kw = predict_kwargs(prof.attrs["fit"])
    for pair in list(sweeps.attrs["pairs"])[:3]:
        names = sweeps.attrs["pairs"][pair]["workloads"]
        _same(gx.predict(ready, names, **kw), gx.predict(prof, names, **kw))
    # and for another card: the scaled curves, not the prepared ones
    if "predict_profiles_h200" not in gx.results.recorded_names():
        pytest.skip("no recorded H200 profiles in gcexplore/data")
    card = TP.card_of(gx.load_recorded("predict_profiles_h200"))
    _same(gx.predict(ready, names, card=card), gx.predict(prof, names, card=card))


def test_a_prepared_profile_does_not_follow_later_changes_to_its_frame():
    frames = [_compute("a"), _stream("b")]
    ready = P.PreparedProfiles(frames)
    before = gx.predict(frames)
    frames[1]["duration_ms"] *= 3.0
    _same(gx.predict(ready), before)
    assert not gx.predict(frames)["makespan_ms"].equals(before["makespan_ms"])  # the frame itself did change


def test_preparing_refuses_what_predict_refuses_and_a_given_bandwidth_is_not_carried_over():
    with pytest.raises(P.ProfileError, match="positive finite"):
        P.PreparedProfiles([_compute("a").assign(duration_ms=-1.0), _compute("b")])
    two = [_compute("a"), _stream("b").assign(shared_bandwidth_gbs=2000.0)]
    with pytest.raises(P.ProfileError, match="different shared bandwidths"):
        gx.predict(two)
    ready = P.PreparedProfiles(two, bandwidth_given=True)
    _same(gx.predict(ready, shared_bandwidth_gbs=2500.0), gx.predict(two, shared_bandwidth_gbs=2500.0))
    with pytest.raises(P.ProfileError, match="different shared bandwidths"):
        gx.predict(ready)  # prepared for a given bandwidth, then asked without one


def test_a_measured_sweep_read_once_compares_as_predict_error_does():
    prof, sweeps = _recorded_pairs()
    pair = next(iter(sweeps.attrs["pairs"]))
    names, sweep = sweeps.attrs["pairs"][pair]["workloads"], sweeps[sweeps["pair"] == pair]
    side = MeasuredSide(sweep)
    kw = predict_kwargs(prof.attrs["fit"])
    for terms in (kw["terms"], {"sharing": "equal"}):
        pred = gx.predict(prof, names, terms=terms)
        got = _error_rows(pred, side)
        pd.testing.assert_frame_equal(got, gx.predict_error(pred, sweep))
        assert got["error"].abs().median() < 1 and not math.isnan(got["measured_ms"].iloc[0])
    with pytest.raises(ValueError, match="prediction is of"):
        _error_rows(gx.predict([_compute("a"), _compute("b")]), side)


def test_a_frame_is_read_once_while_unchanged_and_again_once_changed_in_place():
    frame = pd.concat([_compute("a"), _stream("b")], ignore_index=True)
    frame.attrs["kind"] = "solo_profile"
    first = gx.predict(frame)
    kept = run_of(frame).memo(("prepared", False), lambda: None)
    assert isinstance(kept, P.PreparedProfiles)  # the first call's reading, kept for the next
    _same(gx.predict(frame), first)
    frame.loc[frame["workload"] == "b", "duration_ms"] *= 3.0  # in place: the kept reading is not used
    again = gx.predict(frame)
    _same(again, gx.predict(frame.copy()))
    assert (again["makespan_ms"] > first["makespan_ms"]).any()
