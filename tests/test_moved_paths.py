"""The families' modules moved out of the core's folders (issue 43): every old module path and every
name a layer offered still resolves, to the same object, with a DeprecationWarning naming where it
went; the new paths and the public names warn about nothing."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

import gcexplore

FAMILIES = {"prediction", "serving", "comm", "campaigns"}
MODULE_MOVES = {old: new for old, new in gcexplore._MOVED.items() if "." in old}
FAMILY_MOVES = {old: new for old, new in MODULE_MOVES.items() if new.split(".")[0] in FAMILIES}
LAYER_NAMES = [(layer, name, where) for layer in ("analysis", "experiments", "views", "workloads", "results")
               for name, where in importlib.import_module(f"gcexplore.{layer}").MOVED.items()]


def test_every_family_module_is_listed_with_its_old_path():
    new = {f"gcexplore.{n}" for n in FAMILY_MOVES.values()}
    assert len(FAMILY_MOVES) == 29
    assert all(n.split(".")[1] in FAMILIES for n in new)
    # the one core module that moved: isolation's summary joined the scaling module's
    assert {o: n for o, n in MODULE_MOVES.items() if o not in FAMILY_MOVES} == {"analysis.isolation": "analysis.scaling"}
    for n in new:  # each new path is a module of the tree
        importlib.import_module(n)


@pytest.mark.parametrize("old", sorted(MODULE_MOVES))
def test_an_old_module_path_imports_the_moved_module_and_warns(old, monkeypatch):
    monkeypatch.delitem(sys.modules, f"gcexplore.{old}", raising=False)
    new = importlib.import_module(f"gcexplore.{MODULE_MOVES[old]}")
    with pytest.warns(DeprecationWarning, match=rf"gcexplore\.{old} moved to gcexplore\.{MODULE_MOVES[old]}"):
        got = importlib.import_module(f"gcexplore.{old}")
    assert got is new and got.__name__ == f"gcexplore.{MODULE_MOVES[old]}"


@pytest.mark.parametrize("layer,name,where", LAYER_NAMES)
def test_a_name_a_layer_offered_resolves_from_its_family_and_warns(layer, name, where):
    package = importlib.import_module(f"gcexplore.{layer}")
    with pytest.warns(DeprecationWarning, match=rf"gcexplore\.{layer}\.{name} moved to {where}\.{name}"):
        got = getattr(package, name)
    assert got is getattr(importlib.import_module(where), name)
    assert name not in package.__all__ and name not in dir(package)


def test_from_import_of_an_old_path_works():
    with pytest.warns(DeprecationWarning, match="gcexplore.analysis.predict moved to gcexplore.prediction.model"):
        from gcexplore.analysis import predict
    assert predict is gcexplore.predict


def test_public_names_and_new_paths_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ("predict", "serve", "advise_split", "comm_sweep", "recommend_comm", "campaign",
                     "load_campaign", "plot_serving", "plot_comm", "plot_predict", "solo_profile"):
            getattr(gcexplore, name)
        for new in FAMILY_MOVES.values():
            importlib.import_module(f"gcexplore.{new}")
        gcexplore.serving.SERVING_MODES
        gcexplore.comm.COLLECTIVES


def test_dir_lists_only_public_names_each_resolving_without_a_warning():
    names = dir(gcexplore)
    assert [n for n in names if n.startswith("_") and n != "__version__"] == []
    assert {"sys", "importlib", "warnings", "annotations"} & set(names) == set()
    assert set(gcexplore.__all__) <= set(names)
    assert {"prediction", "serving", "comm", "campaigns", "analysis", "api", "profile", "widgets"} <= set(names)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecated flat module listed
        for n in names:
            getattr(gcexplore, n)
