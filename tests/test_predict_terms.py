"""predict()'s parameters grouped (issue 43): the model's terms are one frozen ModelTerms, the inputs
every call names stay keywords, and the old keywords still work for a release with a DeprecationWarning,
giving the same prediction."""

from __future__ import annotations

import dataclasses
import inspect
import warnings

import pandas as pd
import pytest

import gcexplore as gx
from gcexplore.prediction import model as P
from gcexplore.prediction.check import predict_kwargs
from gcexplore.prediction.terms import TERMS, ModelTerms, model_terms

CARD = 40


def _profile(name: str, gb: float) -> pd.DataFrame:
    rows = [{"workload": name, "position": pos, "sm_count": k if pos == "first" else CARD - k, "rep": r,
             "duration_ms": max(1.0, 16.0 / (k if pos == "first" else CARD - k)) * gb / 3.0, "start_ms": 0.0,
             "bytes": gb * 1e9, "flops": float("nan"), "working_set_bytes": float("nan"),
             "shared_bandwidth_gbs": 3000.0, "l2_bytes": 50 * 2 ** 20, "device_sm_count": CARD, "sm_alignment": 8,
             "device_name": "test card", "run_id": "r"}
            for pos in ("first", "last") for k in range(8, CARD, 8) for r in range(3)]
    return pd.DataFrame(rows, columns=P.PROFILE_COLUMNS)


PROFS = [_profile("a", 3.0), _profile("b", 1.5)]


def test_predict_takes_a_few_keywords_and_the_terms_as_one_value():
    sig = inspect.signature(gx.predict)
    named = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    assert len(named) <= 8, [p.name for p in named]  # was 17
    assert {"profiles", "workloads", "layouts", "terms", "model_error", "card"} <= set(sig.parameters)
    assert TERMS == tuple(f.name for f in dataclasses.fields(ModelTerms)) and len(TERMS) == 10
    t = ModelTerms(sharing="equal")
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.sharing = "demand"  # type: ignore[misc]


@pytest.mark.parametrize("old", [{"sharing": "equal"}, {"loaded_latency": 1.0},
                                 {"sharing": "demand", "l2_bandwidth_gbs": 6000.0, "bandwidth_gain": 1.2}])
def test_the_old_keywords_warn_and_predict_the_same(old):
    new = gx.predict(PROFS, terms=ModelTerms(**old), model_error=0.0)
    as_map = gx.predict(PROFS, terms=old, model_error=0.0)
    with pytest.warns(DeprecationWarning, match=r"predict\(.*\) is deprecated: pass terms=ModelTerms"):
        before = gx.predict(PROFS, model_error=0.0, **old)
    pd.testing.assert_frame_equal(new, before)
    pd.testing.assert_frame_equal(new, as_map)
    assert {k: new.attrs[k] for k in old} == old  # the prediction records the terms it used
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new spelling warns nothing
        gx.predict(PROFS, terms=old)


def test_the_terms_are_checked_when_made_and_bad_spellings_say_what_is_valid():
    with pytest.raises(ValueError, match="sharing must be one of"):
        ModelTerms(sharing="fair")
    with pytest.raises(ValueError, match="loaded_latency must be a factor in"):
        ModelTerms(loaded_latency=-1)
    with pytest.raises(ValueError, match="saturation_onset must be a fraction"):
        gx.predict(PROFS, terms={"saturation_onset": 1.5})
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['sharin'\]; the model's terms are sharing"):
        gx.predict(PROFS, sharin="equal")
    with pytest.raises(TypeError, match=r"terms has unknown keys \['nope'\]"):
        gx.predict(PROFS, terms={"nope": 1})
    with pytest.raises(TypeError, match=r"\['sharing'\] given both as keywords and in terms="):
        model_terms({"sharing": "equal"}, {"sharing": "demand"})
    with pytest.raises(TypeError, match="terms must be a ModelTerms"):
        gx.predict(PROFS, terms=["equal"])


def test_a_fit_becomes_predicts_arguments_without_a_warning():
    prof = gx.load_recorded("predict_profiles")
    kw = predict_kwargs(prof.attrs["fit"])
    assert set(kw) == {"terms", "model_error"} and isinstance(kw["terms"], ModelTerms)
    assert kw["terms"].sharing == prof.attrs["fit"]["sharing"]
    assert kw["terms"].saturation_onset == prof.attrs["fit"]["saturation_onset"]
    assert predict_kwargs({"sharing": "equal"})["terms"] == ModelTerms(sharing="equal")  # an older fit: defaults
