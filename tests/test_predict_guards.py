"""Hostile numbers in the predictor's input frames (issue 46): every numeric column of a solo profile, of
measure_traffic rows and of a prediction handed to the tuner or to predict_error, set to NaN, an
infinity, a negative, an absurd value, a fraction of an SM or a string, is refused with an error naming
the column and what is valid, before it can move a predicted best split. And the tuner refuses a
prediction whose card, or rows whose card, is unknown."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

import gcexplore as gx
from gcexplore.experiments.tuner import PRIOR_NUMBERS, _prior
from gcexplore.prediction import model as P
from gcexplore.prediction import traffic_profile as TP

CARD = 40


def _profile(name: str, gb: float) -> pd.DataFrame:
    rows = []
    for pos in ("first", "last"):
        for k in range(8, CARD, 8):
            kk = k if pos == "first" else CARD - k
            for r in range(3):
                rows.append({"workload": name, "position": pos, "sm_count": kk, "rep": r,
                             "duration_ms": max(1.0, 16.0 / kk) * gb / 3.0, "start_ms": 0.0, "bytes": gb * 1e9,
                             "flops": 1e9, "working_set_bytes": 1e6, "shared_bandwidth_gbs": 3000.0,
                             "l2_bytes": 50 * 2 ** 20, "device_sm_count": CARD, "sm_alignment": 8,
                             "device_name": "test card", "run_id": "r"})
    df = TP.with_traffic_columns(pd.DataFrame(rows, columns=P.PROFILE_COLUMNS))
    for col, spec in TP.PROFILE_NUMBERS.items():  # every optional number present and valid, so each can be spoiled
        if col in df and df[col].isna().all():
            df[col] = 16.0 if spec.integer else 1.0
    df.attrs["kind"] = "solo_profile"
    return df


def _spoiled(df: pd.DataFrame, col: str, value) -> pd.DataFrame:
    out = df.copy()
    if isinstance(value, str):
        out[col] = out[col].astype(str)  # the whole column as text: a wrong dtype
    else:
        out[col] = out[col].astype(float)
        out.loc[out.index[1], col] = value
    out.attrs.update(df.attrs)
    return out


def _hostile(spec) -> list:
    values = [math.inf, -math.inf, -1.0, 1e30, "12"]
    if not spec.missing:
        values.append(math.nan)
    if spec.integer:
        values.append(16.5)
    return values


PROFILE_CASES = [(c, v) for c, spec in TP.PROFILE_NUMBERS.items() for v in _hostile(spec)]


def test_the_guard_tries_every_numeric_profile_column_the_model_reads():
    prof = _profile("a", 3.0)
    numeric = [c for c in prof.columns if pd.api.types.is_numeric_dtype(prof[c]) and not
               pd.api.types.is_bool_dtype(prof[c])]
    assert sorted(numeric) == sorted(c for c in TP.PROFILE_NUMBERS if c in prof), "a numeric column has no rule"
    assert gx.predict([prof, _profile("b", 1.0)], layouts=["16+24"])["makespan_ms"].notna().all()


@pytest.mark.parametrize("col,value", PROFILE_CASES, ids=[f"{c}={v}" for c, v in PROFILE_CASES])
def test_a_hostile_profile_number_is_refused_by_name(col, value):
    bad = _spoiled(_profile("a", 3.0), col, value)
    with pytest.raises(ValueError, match=col) as e:
        gx.predict([bad, _profile("b", 1.0)], layouts=["16+24"])
    # the shared rule's words, or an older check's that comes first (each says what a profile must hold)
    assert re.search(r"; valid: |must be|not positive finite|different cards", str(e.value)), e.value


def _traffic() -> pd.DataFrame:
    return pd.DataFrame({"workload": ["a", "a"], "sm_count": [8, CARD], "flushed": [False, False], "calls": [5, 5],
                         "duration_ms": [2.0, 1.0], "dram_read_bytes": [2e9, 1.8e9], "dram_write_bytes": [1e9, 0.9e9],
                         "l2_bytes": [4e9, 4e9], "achieved_gbs": [1500.0, 2700.0], "peak_gbs": [1600.0, 2900.0],
                         "metric_set": "m", "source": "measured"})


TRAFFIC_CASES = [(c, v) for c, spec in TP.TRAFFIC_NUMBERS.items() for v in _hostile(spec)]


@pytest.mark.parametrize("col,value", TRAFFIC_CASES, ids=[f"{c}={v}" for c, v in TRAFFIC_CASES])
def test_a_hostile_traffic_number_is_refused_by_name(col, value):
    assert TP.attach_traffic(_profile("a", 3.0), _traffic())["bytes_source"].eq("measured").all()
    with pytest.raises(ValueError, match=rf"column '{col}'.*valid"):
        TP.attach_traffic(_profile("a", 3.0), _spoiled(_traffic(), col, value))


def test_traffic_rows_without_their_columns_or_with_a_numeric_flushed_are_refused():
    with pytest.raises(ValueError, match="flushed.*True or False"):
        TP.attach_traffic(_profile("a", 3.0), _traffic().assign(flushed=[0.0, 1.0]))
    with pytest.raises(ValueError, match=r"need the columns.*missing \['dram_read_bytes'\]"):
        TP.attach_traffic(_profile("a", 3.0), _traffic().drop(columns="dram_read_bytes"))


def _prediction() -> pd.DataFrame:
    return gx.predict([_profile("a", 3.0), _profile("b", 1.0)])


PREDICTION_CASES = [(c, v) for c, spec in P.PREDICTION_NUMBERS.items() for v in _hostile(spec)]


@pytest.mark.parametrize("col,value", PREDICTION_CASES, ids=[f"{c}={v}" for c, v in PREDICTION_CASES])
def test_a_hostile_prediction_number_is_refused_by_the_tuner_and_by_predict_error(col, value):
    bad = _spoiled(_prediction(), col, value)
    if col in PRIOR_NUMBERS:  # the numbers the tuner's prior reads
        with pytest.raises(ValueError, match=rf"column '{col}'.*valid"):
            _prior(bad, ["a", "b"], "test card")
    with pytest.raises(ValueError, match=rf"column '{col}'.*valid"):
        P.predicted_layouts(bad)  # what predict_error and plot_predict read


def test_a_low_end_above_its_point_or_a_bad_layout_label_is_refused_by_the_tuner():
    pred = _prediction()
    assert set(_prior(pred, ["a", "b"], "test card"))
    up = pred.assign(makespan_low_ms=pred["makespan_ms"] * 2)
    up.attrs.update(pred.attrs)
    with pytest.raises(ValueError, match="'makespan_low_ms' is above 'makespan_ms'"):
        _prior(up, ["a", "b"], "test card")
    lab = pred.assign(layout=pred["layout"].where(pred.index > 0, "16+x"))
    lab.attrs.update(pred.attrs)
    with pytest.raises(ValueError, match="column 'layout' holds '16\\+x'"):
        _prior(lab, ["a", "b"], "test card")


def test_every_prior_number_is_a_prediction_number():
    assert set(PRIOR_NUMBERS) <= set(P.PREDICTION_NUMBERS)


# ----------------------------------------------------------------------------- the card


def test_the_tuner_refuses_a_prediction_that_names_no_card():
    pred = _prediction()
    for missing in (None, "", "  "):
        blind = pred.copy()
        blind.attrs.update(pred.attrs)
        if missing is None:
            del blind.attrs["device_name"]
        else:
            blind.attrs["device_name"] = missing
        with pytest.raises(ValueError, match=r"the prediction says no card \(attrs\['device_name'\]"):
            _prior(blind, ["a", "b"], "test card")
    with pytest.raises(ValueError, match="prediction is for the test card, the tuner measures on the other"):
        _prior(pred, ["a", "b"], "other")


def test_a_replay_refuses_a_prediction_when_the_sweeps_card_columns_are_absent():
    ts = gx.load_recorded("torch_sweep")
    card = str(ts["device_name"].iloc[0])
    pred = gx.predict(P.profile_from(ts, shared_bandwidth_gbs=3050.0, l2_bytes=50 * 2 ** 20), ["matmul", "sigmoid"])
    assert pred.attrs["device_name"] == card and gx.replay_tune(ts, pred)["predicted"]
    assert not gx.replay_tune(ts.drop(columns="device_name"))["predicted"]  # without a prediction: nothing to check
    for blind in (ts.drop(columns="device_name"), ts.assign(device_name=""), ts.assign(device_name=np.nan)):
        blind.attrs.update(ts.attrs)
        with pytest.raises(ValueError, match=r"measured rows say no card \(their 'device_name' column"):
            gx.replay_tune(blind, pred)
    two = ts.assign(device_name=np.where(ts.index % 2 == 0, card, "NVIDIA H200"))
    two.attrs.update(ts.attrs)
    with pytest.raises(ValueError, match="rows of 2 cards"):
        gx.replay_tune(two, pred)
