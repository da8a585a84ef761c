"""gcexplore.prediction.fit: the shipped predictor's fit from a run folder laid out as bench/predict.py writes
one (the recorded profiles and pair sweeps), with no bench script imported."""

from __future__ import annotations

from pathlib import Path

import pytest

import gcexplore as gx
from gcexplore.prediction import fit as F
from gcexplore.prediction.check import predict_kwargs

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if not (DATA / "predict_sweeps.parquet").exists():
        pytest.skip("no recorded pair sweeps in tests/data (bench/ship_predict.py writes them)")
    folder = tmp_path_factory.mktemp("run")
    prof = gx.load_recorded("predict_profiles")
    gx.save_profiles(prof, folder / "profiles.parquet")
    sweeps = gx.load(DATA / "predict_sweeps.parquet")
    groups = {}
    for pair, spec in sweeps.attrs["pairs"].items():  # one fitted pair and one checked-only (a fit is slow)
        groups.setdefault(spec["group"] in ("fitted", "fitted4"), pair)
    keep = {p: sweeps.attrs["pairs"][p] for p in sorted(groups.values())}
    for pair in keep:
        gx.save(sweeps[sweeps["pair"] == pair].drop(columns="pair").reset_index(drop=True),
                folder / f"sweep_{pair}.parquet")
    return folder, prof, sweeps, keep


def test_the_catalog_names_every_pair_once_with_its_group():
    pairs = [p for _, table in F.GROUPS for p in table]
    assert len(pairs) == len(set(pairs)) == len(F.ALL)
    assert set(F.FITS) == set(dict(F.GROUPS)["fitted"]) | set(dict(F.GROUPS)["fitted4"])
    assert F.members(["memory_a=memory", "compute"]) == {"memory", "compute"}


def test_the_sweeps_of_a_folder_come_back_with_their_pairs_and_groups(run):
    folder, _, sweeps, keep = run
    got = F.run_sweeps(folder)
    assert got.attrs["pairs"] == keep and len(keep) == 2
    assert len(got) == int(sweeps["pair"].isin(list(keep)).sum())
    fitted = {p for p, s in keep.items() if s["group"] in ("fitted", "fitted4")}
    only = F.run_sweeps(folder, {keep[p]["group"] for p in fitted})
    assert set(only.attrs["pairs"]) == fitted


def test_the_fit_of_a_folder_is_fitted_on_its_fitted_pairs_only(run, monkeypatch):
    folder, prof, _, keep = run
    seen = []

    def fit_model(cases):  # the fit itself (slow) is test_traffic's; here, what it is given
        seen.extend(cases)
        return {k: prof.attrs["fit"].get(k) for k in (*F.SHIPPED_TERMS, "coverage")}

    monkeypatch.setattr(F, "fit_model", fit_model)
    fit = F.fit_run(folder)
    fitted = [p for p in keep if p in F.FITS]
    assert [names for _, names, _ in seen] == [F.FITS[p] for p in fitted] and fitted
    assert all(set(sw["workload"]) == F.members(names) for _, names, sw in seen)
    record = F.shipped_fit(fit, folder)
    assert set(record) == {*F.SHIPPED_TERMS, "coverage", "fitted_on"}
    assert record["fitted_on"] == fitted and isinstance(record["model_error"], list)
    assert set(predict_kwargs(record)) >= set(predict_kwargs(prof.attrs["fit"]))  # what predict() takes
