"""Campaign scaling (issue 30) on the stand-in experiment, no GPU: the per-worker cache of
built workloads (reused, invalidated when a recipe or its factory changes), longest-first
ordering, the warm-up and the per-phase decomposition bench/campaign.py reports."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

import gcexplore as gx
from _campaign_standin import standin
from gcexplore.experiments import _campaign_task as ct
from gcexplore.experiments.campaigns import plan_tasks, task_order

HERE = Path(__file__).resolve().parent
EXP = "_campaign_standin:standin"

COUNTING = """
BUILT = []
def pair(device=0, size=1):
    BUILT.append(size)
    return {{"a": lambda *, stream: None, "b": lambda *, stream: None, "tag": {tag!r}}}
"""


@pytest.fixture
def counting(tmp_path, monkeypatch):
    """A factory module on disk that counts its builds; ``write(tag)`` edits its code."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(tag):
        (tmp_path / "counting_factory.py").write_text(COUNTING.format(tag=tag))
        sys.modules.pop("counting_factory", None)
        importlib.invalidate_caches()
        return importlib.import_module("counting_factory")

    ct.clear_cache()
    yield write
    ct.clear_cache()
    sys.modules.pop("counting_factory", None)


def _task(tmp_path, recipe, splits=(8,)):
    tasks, _ = plan_tasks(EXP, [recipe], [list(splits)], [{"layout_s": 0}])
    return next(iter(tasks.values()))


def test_per_worker_cache_reused_and_invalidated_when_the_recipe_changes(tmp_path, counting):
    mod = counting("v1")
    folder = str(tmp_path / "c")
    run = lambda t: ct.run_task(t, folder, "camp", ct.Experiment(standin))  # noqa: E731
    first = run(_task(tmp_path, {"factory": "counting_factory:pair"}))
    again = run(_task(tmp_path, {"factory": "counting_factory:pair"}, splits=(16,)))  # another task, same recipe
    assert (first["status"], first["cached"], again["status"], again["cached"]) == ("done", False, "done", True)
    assert mod.BUILT == [1], "the second task of the same recipe built its workloads again"
    other = run(_task(tmp_path, {"factory": "counting_factory:pair", "kwargs": {"size": 2}}))
    assert other["cached"] is False and mod.BUILT == [1, 2]  # changed kwargs: built afresh
    mod2 = counting("v2")  # the factory's code is edited between campaigns
    edited = run(_task(tmp_path, {"factory": "counting_factory:pair"}, splits=(24,)))
    assert edited["cached"] is False and mod2.BUILT == [1]
    off = ct.run_task(_task(tmp_path, {"factory": "counting_factory:pair"}), folder, "camp",
                      ct.Experiment(standin), reuse=False)
    assert off["cached"] is False and mod2.BUILT == [1, 1]
    for r in (first, again, other, edited):
        assert r["build_s"] >= 0 and r["experiment_s"] > 0 and r["cpu_s"] >= 0 and r["checkpoint_s"] > 0
    assert r["write_s"] > 0


def test_cache_closes_what_it_evicts():
    closed = []

    class W:
        def __init__(self, tag):
            self.tag = tag

        def close(self):
            closed.append(self.tag)

    def make(device=0, i=0):
        return {"w": W(i)}

    ct.clear_cache()
    try:
        for i in range(ct.CACHE_SIZE + 2):
            wls, cached = ct._cached_build({"factory": "here:make", "kwargs": {"i": i}}, make, 0)
            assert not cached and wls["w"].tag == i
        assert closed == [0, 1], "the least recently used recipes are closed when evicted"
        assert ct._cached_build({"factory": "here:make", "kwargs": {"i": 5}}, make, 0)[1] is True
    finally:
        ct.clear_cache()
    assert sorted(closed) == list(range(ct.CACHE_SIZE + 2))


def test_longest_tasks_first_from_the_grid_or_known_durations():
    grid = plan_tasks(EXP, ["_campaign_standin:pair"], [[8], [8, 16, 24, 32], [8, 16]],
                      [{"repeats": 5}, {"repeats": 50}])[0]
    order = task_order(grid)
    sizes = [(len(grid[k]["splits"]), grid[k]["options"]["repeats"]) for k in order]
    assert sizes == [(4, 50), (2, 50), (1, 50), (4, 5), (2, 5), (1, 5)]
    short = order[-1]
    known = {short: 1000.0, order[0]: 1.0}  # measured before: the grid's estimate was wrong
    assert task_order(grid, known)[0] == short and task_order(grid, known)[-1] == order[0]


@pytest.fixture(scope="module")
def one_worker():
    pytest.importorskip("distributed")
    from distributed import Client

    from gcexplore.experiments.campaigns import local_cluster

    cluster = local_cluster(["0"])
    client = Client(cluster)
    yield client
    client.close()
    cluster.close()


def test_one_worker_runs_warm_up_first_then_longest_first_with_phases(one_worker, tmp_path):
    splits = [[8], [8, 16, 24], [8, 16]]
    c = gx.campaign(["_campaign_standin:pair"], splits, experiment=EXP, options={"layout_s": 0.05},
                    folder=tmp_path / "c", client=one_worker, progress=False)
    started = sorted(c.reports.values(), key=lambda r: r["started_s"])
    assert [len(c.tasks[r["key"]]["splits"]) for r in started] == [3, 2, 1], "not longest first"
    (warm,) = c.warm_ups.values()
    assert "error" not in warm and warm["import_s"] >= 0 and "import _campaign_standin_s" in warm
    assert warm["pid"] == started[0]["pid"]
    assert [r["cached"] for r in started] == [False, True, True]
    from gcexplore.results.campaign_store import CampaignFolder

    phases = CampaignFolder(tmp_path / "c").read_shard(started[0]["key"]).attrs["campaign"]["phases"]
    assert set(phases) >= {"build_s", "experiment_s", "cpu_s", "checkpoint_s", "cached", "first"}
    assert phases["first"] is True and phases["experiment_s"] >= 3 * 0.05


def _bench():
    spec = importlib.util.spec_from_file_location("bench_campaign", HERE.parent / "bench" / "campaign.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bench_decomposition_adds_up_on_the_stand_in(one_worker, tmp_path):
    import time

    bench = _bench()
    w0, t0 = time.time(), time.perf_counter()
    c = gx.campaign(["_campaign_standin:pair"], [[8], [16, 24]], experiment=EXP, options={"layout_s": 0.05},
                    folder=tmp_path / "c", client=one_worker, progress=False)
    run = {"n": 1, "start_s": 0.5, "campaign_s": time.perf_counter() - t0, "close_s": 0.25, "wall0": w0,
           "wall1": time.time(), "reports": c.reports, "warm_ups": c.warm_ups, "df": c.result(progress=False)}
    d = bench._decompose(run)
    assert d["tasks"] == 2 and d["failed"] == 0 and len(d["task_time_per_card_s"]) == 1
    assert d["end_to_end_s"] == pytest.approx(0.5 + run["campaign_s"] + 0.25)
    # the card's lead-in, busy time and idle tail fill the campaign (gaps between its tasks aside)
    assert d["lead_in_s_mean"] >= 0 and d["idle_tail_s_max"] >= 0
    assert d["lead_in_s_mean"] + d["sum_task_s"] + d["idle_tail_s_max"] <= run["wall1"] - w0 + 1e-6
    assert d["phases_s"]["experiment_s"] <= d["sum_task_s"] and d["phases_s"]["experiment_s"] >= 3 * 0.05
    ag = bench._agreement(run["df"], run["df"])
    assert ag["comparisons"] > 0 and ag["inside_95"] == ag["comparisons"]  # a run against itself
    lines = bench._table([d], d)
    assert lines[2].startswith("| 1 |") and "1.00x" in lines[2]
