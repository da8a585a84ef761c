"""Campaign scaling (issue 30) on the stand-in experiment, no GPU: the per-worker cache of
built workloads (reused, invalidated when a recipe or its factory changes), longest-first
ordering, the warm-up and the per-phase decomposition bench/campaign.py reports."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

import gcexplore as gx
from _campaign_standin import standin
from gcexplore.campaigns import _task as ct
from gcexplore.campaigns.grid import plan_tasks, task_order
from gcexplore.campaigns import timing as T

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

    from gcexplore.campaigns.grid import local_cluster

    cluster = local_cluster(["0"])
    client = Client(cluster)
    yield client
    client.close()
    cluster.close()


def test_one_worker_runs_warm_up_first_then_longest_first_with_phases(one_worker, tmp_path):
    splits = [[8], [8, 16, 24], [8, 16]]
    c = gx.campaign(["_campaign_standin:pair"], splits, experiment=EXP, options={"layout_s": 0.05, "partition_s": 0.04},
                    folder=tmp_path / "c", client=one_worker, progress=False)
    started = sorted(c.reports.values(), key=lambda r: r["started_s"])
    assert [len(c.tasks[r["key"]]["splits"]) for r in started] == [3, 2, 1], "not longest first"
    # each task reports its own host-side steps (this process's running sums, taken around its experiment)
    for r, layouts in zip(started, [3, 2, 1]):
        assert set(r["host_s"]) == {"partitions"}, r["host_s"]
        assert layouts * 0.04 <= r["host_s"]["partitions"] < layouts * 0.04 + 0.035, r["host_s"]
    (warm,) = c.warm_ups.values()
    assert "error" not in warm and warm["import_s"] >= 0 and "import _campaign_standin_s" in warm
    assert warm["pid"] == started[0]["pid"]
    # the warm-up primes nothing: the worker's first task of the recipe builds and primes it (outside its
    # experiment), the next ones find it built and primed (the module's worker may have met it in an earlier test)
    assert "primed" not in warm and "prime_s" not in warm
    assert [r["cached"] for r in started][1:] == [True, True] and [r["primed"] for r in started][1:] == [False, False]
    assert all(r["prime_s"] >= 0 for r in started) and started[0]["primed"] == (not started[0]["cached"])
    from gcexplore.campaigns.store import CampaignFolder

    phases = CampaignFolder(tmp_path / "c").read_shard(started[0]["key"]).attrs["campaign"]["phases"]
    assert set(phases) >= {"build_s", "prime_s", "experiment_s", "cpu_s", "checkpoint_s", "cached", "first"}
    assert phases["first"] is True and phases["experiment_s"] >= 3 * 0.05


def test_a_worker_primes_a_recipe_once_by_its_first_task_and_a_changed_recipe_again(monkeypatch):
    from gcexplore.campaigns import _task as ct

    calls, streams = [], []

    class Stream:
        def sync(self):
            streams.append("sync")

        def close(self):
            streams.append("close")

    class Dev:
        def create_stream(self):
            return Stream()

    def workload(name):
        return lambda stream=None: calls.append((name, stream is not None))

    monkeypatch.setattr(ct, "_PRIMED", set())
    a = ct.recipe_digest({"builtins": {"compute": "compute"}})
    b = ct.recipe_digest({"builtins": {"compute": "compute:n=4"}})  # the same workload with another option
    assert a != b
    wls = {"x": workload("x"), "y": workload("y")}
    assert ct._call_once(a, wls, Dev()) is True and calls == [("x", True), ("y", True)]
    assert streams == ["sync", "close"]
    assert ct._call_once(a, wls, Dev()) is False and len(calls) == 2  # primed once per worker
    assert ct._call_once(b, wls, Dev()) is True and len(calls) == 4  # a changed recipe is primed again
    assert ct._call_once("cpu", wls, None) is True and len(calls) == 4  # no GPU: nothing to call, noted


def _bench():
    """bench/campaign.py's runs and report (gcexplore.campaigns.scaling; its decomposition: timing)."""
    from gcexplore.campaigns import scaling

    return scaling


def test_bench_decomposition_adds_up_on_the_stand_in(one_worker, tmp_path):
    """gcexplore.campaigns.timing (bench/campaign.py's report) on a campaign of the stand-in: its parts add up."""
    import time

    w0, t0 = time.time(), time.perf_counter()
    c = gx.campaign(["_campaign_standin:pair"], [[8], [16, 24]], experiment=EXP,
                    options={"layout_s": 0.05, "partition_s": 0.02}, folder=tmp_path / "c", client=one_worker,
                    progress=False)
    run = {"n": 1, "mode": "warm", "end_to_end_s": time.perf_counter() - t0, "timings": dict(c.timings),
           "wall0": w0, "wall1": time.time(), "reports": c.reports, "warm_ups": c.warm_ups, "tasks": c.tasks,
           "df": c.result(progress=False)}
    d = T.decompose(run)
    assert d["tasks"] == 2 and d["failed"] == 0 and len(d["task_time_per_card_s"]) == 1
    assert d["end_to_end_s"] == run["end_to_end_s"] and d["cluster_start_s"] is None  # a cluster of the caller's
    assert 0 <= d["plan_s"] < d["end_to_end_s"]
    # the card's lead-in, busy time and idle tail fill the campaign (gaps between its tasks aside)
    assert d["lead_in_s_mean"] >= 0 and d["idle_tail_s_max"] >= 0
    assert d["lead_in_s_mean"] + d["sum_task_s"] + d["idle_tail_s_max"] <= run["wall1"] - w0 + 1e-6
    assert d["phases_s"]["experiment_s"] <= d["sum_task_s"] and d["phases_s"]["experiment_s"] >= 3 * 0.05
    assert d["warm_up_task_s_mean"] >= 0 and d["warm_up_at_start_s_mean"] == 0  # warmed by a task, not at start
    # the experiments' time split: (no GPU time here) the host steps summed over the tasks, 3 layouts in all
    h = d["host_steps"]
    assert h["gpu_s"] is None and h["rest_s"] is None and set(h["steps"]) == {"partitions"}
    assert 3 * 0.02 <= h["steps"]["partitions"] < h["experiment_s"] == d["phases_s"]["experiment_s"]
    h = T.host_steps({**run, "gpu_s": {k: 0.01 for k in c.reports}}, list(c.reports.values()))
    assert abs(h["gpu_s"] + sum(h["steps"].values()) + h["checkpoint_s"] + h["rest_s"] - h["experiment_s"]) < 1e-9
    # along the card that ended last (the only one): its parts add up to the end to end (the call's own
    # time before wall0 and after wall1 aside: a few ms)
    cr = d["critical"]
    assert cr["gaps_s"] >= 0 and cr["after_s"] >= 0 and cr["tasks_s"] == d["sum_task_s"] == cr["mean_tasks_s"]
    assert abs(cr["lead_in_s"] + cr["tasks_s"] + cr["gaps_s"] + cr["after_s"] - (run["wall1"] - w0)) < 1e-6
    line = T.critical_line(d, d, 3.6)
    assert f"end to end {d['end_to_end_s']:.2f} s" in line and f"3.6x needs <= {d['end_to_end_s'] / 3.6:.2f} s" in line
    ag = T.agreement(run["df"], run["df"])
    assert ag["comparisons"] > 0 and ag["inside_95"] == ag["comparisons"]  # a run against itself
    lines = T.table([d], {"warm": d})
    assert lines[2].startswith("| 1 | warm |") and "1.00x" in lines[2]


SLOW = """
import time
STARTED = time.time()
time.sleep({sleep})
IMPORTED = time.time()
def pair(device=0):
    return {{"a": lambda *, stream: None, "b": lambda *, stream: None}}
"""


def test_default_cluster_warms_workers_while_the_client_plans_and_closes_after_the_call(tmp_path, monkeypatch):
    """campaign() without a client: the workers start and import the factory module (slow to import here)
    while the client imports it too, and the cluster shuts down after the call, every row already on disk."""
    pytest.importorskip("distributed")
    import os

    import psutil

    (tmp_path / "slow_factory_i30.py").write_text(SLOW.format(sleep=1.5))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(tmp_path), os.environ.get("PYTHONPATH")))))
    sys.modules.pop("slow_factory_i30", None)
    c = gx.campaign(["slow_factory_i30:pair"], [[8], [16], [24]], experiment=EXP, options={"layout_s": 0.05},
                    folder=tmp_path / "c", devices=["0", "1"], progress=False)
    imported = sys.modules["slow_factory_i30"]
    assert len(c.warm_ups) == 2
    for w in c.warm_ups.values():
        pre = w["preload"]
        # no forkserver kept with this module: the workers were spawned and imported it as they started
        assert "forkserver" not in pre and "error" not in pre and pre["import slow_factory_i30_s"] >= 1.5, pre
        assert w["import slow_factory_i30_s"] < 0.5 and "primed" not in w  # the task's warm-up found it imported
    # the client's own 1.5-s import ran while the cluster started: it waited that much less than the start took
    assert imported.IMPORTED - imported.STARTED >= 1.5 and c.timings["cluster_start_s"] >= 1.5
    assert c.timings["cluster_start_s"] - c.timings["cluster_wait_s"] >= 1.4, c.timings
    pids = {r["pid"] for r in c.reports.values()}
    assert all(r["status"] == "done" for r in c.reports.values())
    # each worker built and primed the recipe in its first task, its later tasks found it built
    for pid in pids:
        mine = sorted((r for r in c.reports.values() if r["pid"] == pid), key=lambda r: r["started_s"])
        assert [(r["cached"], r["primed"]) for r in mine] == [(False, True)] + [(True, False)] * (len(mine) - 1)
    assert c._closing is not None and c._closing.is_alive() or "close_background_s" in c.timings
    c.close()  # waits for the background shutdown
    assert c.timings["close_background_s"] > 0 and c.timings["close_s"] < c.timings["close_background_s"]
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)
    df = gx.load_campaign(tmp_path / "c")
    assert df.attrs["done"] == 3 and df.groupby("task_key")["run_id"].nunique().eq(1).all()


def test_a_bad_module_name_for_warming_is_refused():
    pytest.importorskip("distributed")
    from gcexplore.campaigns.cluster import local_cluster

    with pytest.raises(ValueError, match="warm names modules"):
        local_cluster(["0"], warm=["os; rm -rf /"])


def test_bench_runs_cold_warm_and_alone_on_the_stand_in(tmp_path, monkeypatch):
    """bench/campaign.py end to end on the stand-in: cold (campaign starts its own cluster) and warm
    (a kept cluster) on 1 and 2 workers, the tasks alone, and the report with speedups like for like."""
    pytest.importorskip("distributed")
    bench = _bench()
    monkeypatch.setattr(bench, "PAIRS", ["_campaign_standin:pair"])
    monkeypatch.setattr(bench, "EXPERIMENT", EXP)
    splits = [[8], [16, 24]]
    runs = [bench._run(["0"], tmp_path / "campaign-1gpu", splits, 2),
            bench._run(["0", "1"], tmp_path / "c2", splits, 2, durations=tmp_path / "campaign-1gpu"),
            bench._run(["0", "1"], tmp_path / "c2w", splits, 2, warm=True),
            bench._run(["0"], tmp_path / "c1w", splits, 2, warm=True)]
    assert [r["mode"] for r in runs] == ["cold", "cold", "warm", "warm"]
    for r in runs[:2]:  # the start's steps, in the order they happen (the processes' clocks agree)
        st = T.start_steps(r)
        assert all(v >= -0.01 for v in st.values()), st
    st = T.start_steps(runs[0])
    ready = st.pop("gpu_ready_s")  # the GPU's start runs beside the others (on the worker's executor thread)
    assert abs(sum(st.values()) - runs[0]["timings"]["cluster_start_s"]) < 0.01  # one worker
    assert ready >= st["spawn_s"] - 0.01
    assert runs[0]["timings"]["cluster_start_s"] > 0 and "cluster_start_s" not in runs[2]["timings"]
    # cold (no server kept): spawned workers; kept: forked from a server started before, its start not the campaign's
    from gcexplore.campaigns.cluster import start_forkserver

    assert not any("forkserver" in w["preload"] for r in runs[:2] for w in r["warm_ups"].values())
    server = start_forkserver(["_campaign_standin"], wait=True)
    kept = bench._run(["0"], tmp_path / "c1k", splits, 2, fork="kept")
    assert all(w["preload"]["forkserver"]["pid"] == server["pid"] for w in kept["warm_ups"].values())
    assert kept["mode"] == "cold, forkserver kept" and T.start_steps(kept)["forkserver_s"] == 0
    # a forked worker's GPU start began at its fork, as soon as it had its card, before Dask's set-up and preload
    for w in kept["warm_ups"].values():
        pre = w["preload"]
        assert pre["process_started_at"] - 0.02 <= pre["early_seen_at"] < pre["started_at"], pre
        assert "gpu" in pre and pre["gpu_ready_at"] >= pre["early_seen_at"], pre  # no driver here: recorded
    st = T.start_steps(kept)
    st.pop("gpu_ready_s")
    assert abs(sum(st.values()) - kept["timings"]["cluster_start_s"]) < 0.01
    assert all(r["timings"]["close_background_s"] > 0 for r in runs[:2])  # the cold ones' own clusters
    direct = bench._direct(runs[0], splits, 2)
    assert len(direct[0]) == 1 and set(direct[1]["task_key"]) == set(direct[0])  # one pair: one task alone
    assert bench._report(runs, direct, tmp_path, splits, 2) == 0
    text = (tmp_path / "campaign_bench.md").read_text()
    assert "| 1 | cold |" in text and "| 2 | warm |" in text and "2 GPUs cold: speedup" in text
    assert "2 GPUs warm: speedup" in text and "campaign vs each task alone" in text
    # the stand-in's makespans are a function of the layout: alone and in the campaign they agree exactly
    assert "alone: 1 of 1 ratio intervals contain 1 at 95% each" in text and "1 of 1 in the combined" in text, text
    assert "outside the combined interval (campaign over alone, ratio of medians [95% interval]): none" in text
    assert "| 2 | cold | " in text and "| spawn s (to the worker's birth) |" in text
    import pandas as pd

    rows = pd.read_csv(tmp_path / "campaign_vs_alone.csv")  # the rows, not only the counts
    assert len(rows) == 1 and rows["rounds_ratio"].iloc[0] == 1.0 and rows["inside_rounds_95"].all()
    gx.save(direct[1], tmp_path / "alone.parquet")  # what main() keeps: the comparison again from the files
    assert bench._alone_again(tmp_path) == 0
    assert pd.read_csv(tmp_path / "campaign_vs_alone_again.csv").equals(rows)


def _callbacks(dask_worker):
    return sorted(dask_worker.periodic_callbacks), dask_worker.periodic_callbacks["tick"].callback_time


def test_local_workers_run_no_stack_sampler_beside_the_measuring_thread():
    """Dask's statistical profiler samples a worker's task thread 100 times a second (taking the GIL from
    the thread that enqueues the measured work); the local cluster's workers run without it."""
    pytest.importorskip("distributed")
    from distributed import Client

    from gcexplore.campaigns.grid import local_cluster

    with local_cluster(["0"], warm=[]) as cluster, Client(cluster) as client:
        ((names, tick_ms),) = client.run(_callbacks).values()
    assert "profile" not in names and "heartbeat" in names and tick_ms >= 500, (names, tick_ms)


def test_the_start_makes_the_gpu_context_on_the_thread_that_will_run_the_tasks(monkeypatch):
    """A CUDA context is current per thread: the worker's start makes it on the worker's one executor thread
    (where its tasks run), not on a thread of its own that the first task would have to repeat."""
    import threading
    import time
    import types
    from concurrent.futures import ThreadPoolExecutor

    from gcexplore.device import driver
    from gcexplore.campaigns import _preload as _campaign_preload

    seen = {}

    def fake_warm_gpu(steps):
        seen["thread"] = threading.get_ident()
        time.sleep(0.4)  # the context and kernels take this long
        steps.update(device_s=0.0, context_s=0.4, kernels_s=0.0)
        seen["ended"] = time.time()

    monkeypatch.setattr(driver, "device_count", lambda: 1)
    monkeypatch.setattr(ct, "warm_gpu", fake_warm_gpu)
    monkeypatch.setattr(ct, "PRELOADED", {})
    pool = ThreadPoolExecutor(1)
    try:
        task_thread = pool.submit(threading.get_ident).result()
        _campaign_preload.dask_setup(types.SimpleNamespace(executors={"default": pool}))
        joined = time.time()  # the worker would join now, without waiting for its GPU
        first_task = pool.submit(lambda: (time.time(), dict(ct.PRELOADED))).result()
    finally:
        pool.shutdown()
    assert seen["thread"] == task_thread != threading.get_ident()
    assert joined < seen["ended"] - 0.2, "the preload waited for the GPU's start"
    # queued ahead of the tasks on their thread: the first task starts after the GPU's start, and finds it recorded
    assert first_task[0] >= seen["ended"] and first_task[1]["context_s"] == 0.4
    assert first_task[1]["gpu_ready_at"] >= seen["ended"] and "total_s" in first_task[1]


def _bench_on_the_stand_in(monkeypatch):
    """bench/campaign.py's main on the stand-in experiment and pair, two fake GPUs, no PyTorch."""
    import types

    import gcexplore.campaigns.grid as campaigns

    bench = _bench()
    monkeypatch.setattr(bench, "PAIRS", ["_campaign_standin:pair"])
    monkeypatch.setattr(bench, "EXPERIMENT", EXP)
    monkeypatch.setattr(bench, "_split_sets", lambda step: [[8], [16, 24]])
    monkeypatch.setattr(bench, "_prime_here", lambda: None)
    monkeypatch.setattr(campaigns, "visible_gpus", lambda: ["0", "1"])
    monkeypatch.setitem(sys.modules, "gcexplore.workloads.torch_pairs", types.ModuleType("gcexplore.workloads.torch_pairs"))  # no PyTorch
    return bench


def test_bench_without_cold_runs_kept_clusters_one_gpu_first(tmp_path, monkeypatch):
    """bench/campaign.py --no-cold: only campaigns on kept clusters, 1 GPU first (its task times order the 2-GPU
    run's tasks), the speedup against the 1-GPU kept one; no cold folder, no tasks alone."""
    pytest.importorskip("distributed")
    bench = _bench_on_the_stand_in(monkeypatch)
    orders = []
    real = bench._run
    monkeypatch.setattr(bench, "_run", lambda devices, folder, *a, **k: orders.append((len(devices), a[2], k)) or
                        real(devices, folder, *a, **k))
    monkeypatch.setattr(sys, "argv", ["campaign.py", "--out", str(tmp_path), "--repeats", "2", "--gpus", "1,2",
                                      "--no-cold"])
    assert bench.main() == 0
    assert [(n, k["warm"]) for n, _, k in orders] == [(1, True), (2, True)]
    assert orders[0][1] is None and orders[1][1] == tmp_path / "campaign-1gpu-warm"  # the 2-GPU run's durations
    assert sorted(p.name for p in tmp_path.glob("campaign-*gpu*") if p.is_dir() and "prime" not in p.name) == \
        ["campaign-1gpu-warm", "campaign-2gpu-warm"]
    text = (tmp_path / "campaign_bench.md").read_text()
    assert "| 1 | warm |" in text and "2 GPUs warm: speedup" in text and "campaign vs each task alone" not in text


def test_bench_gpu_start_too_runs_the_largest_count_again_in_the_other_start_mode(tmp_path, monkeypatch):
    """bench/campaign.py --gpu-start-too together --cpus-too off: after the cold runs (the default: workers start
    their driver and context one at a time, each taking the cluster's lock, and move to their card's local
    CPUs), the largest GPU count again with GCEXPLORE_GPU_START=together (no lock), and again with
    GCEXPLORE_WORKER_CPUS=off, each speedup against the same 1-GPU run; every worker's CPUs reported."""
    pytest.importorskip("distributed")
    import os

    bench = _bench_on_the_stand_in(monkeypatch)
    monkeypatch.delenv("GCEXPLORE_GPU_START", raising=False)
    monkeypatch.delenv("GCEXPLORE_WORKER_CPUS", raising=False)
    monkeypatch.delenv("GCEXPLORE_DISPATCH", raising=False)
    monkeypatch.setattr(sys, "argv", ["campaign.py", "--out", str(tmp_path), "--repeats", "2", "--gpus", "1,2",
                                      "--no-fresh", "--no-warm", "--no-direct", "--gpu-start-too", "together",
                                      "--cpus-too", "off",
                                      "--dispatch-too", "eager"])
    with pytest.raises(SystemExit):  # a mode it does not know, among known ones
        monkeypatch.setattr(sys, "argv", [*sys.argv, "--cpus-too", "off,numa"]) or bench.main()
    monkeypatch.setattr(sys, "argv", sys.argv[:-2])
    assert bench.main() == 0
    assert "GCEXPLORE_GPU_START" not in os.environ and "GCEXPLORE_WORKER_CPUS" not in os.environ  # that run only
    data = json.loads((tmp_path / "campaign_bench.json").read_text())
    together, off = "cold" + bench.ALSO + "GPU start together", "cold" + bench.ALSO + "worker CPUs off"
    eager = "cold" + bench.ALSO + "dispatch eager"
    assert [(r["gpus"], r["mode"]) for r in data["runs"]] == [(1, "cold"), (2, "cold"), (2, together), (2, off),
                                                              (2, eager)]
    assert (tmp_path / "campaign-2gpu-eager").is_dir() and "GCEXPLORE_DISPATCH" not in os.environ
    assert all("lock_wait_s" in w["preload"] for w in data["runs"][1]["warm_up_steps"])  # serial by default
    assert not any("lock_wait_s" in w["preload"] for w in data["runs"][2]["warm_up_steps"])
    # each worker's CPUs, in the mode its cluster gave it (no card here: left as inherited, and why)
    modes = [{c["mode"] for c in r["worker_cpus"].values()} for r in data["runs"]]
    assert modes == [{"local"}, {"local"}, {"local"}, {"off"}, {"local"}] and len(data["runs"][3]["worker_cpus"]) == 2
    assert all(not c["applied"] and c["why"] for r in data["runs"] for c in r["worker_cpus"].values())
    assert (tmp_path / "campaign-2gpu-together").is_dir() and (tmp_path / "campaign-2gpu-off").is_dir()
    text = (tmp_path / "campaign_bench.md").read_text()
    assert f"2 GPUs {together}: speedup" in text and "2 GPUs cold: speedup" in text and f"2 GPUs {off}: speedup" in text
    assert f"2 GPUs {off}: worker CPUs card " in text and "(off: not pinned" in text
    assert sorted(c["card"] for c in data["runs"][3]["worker_cpus"].values()) == ["0", "1"]


def test_bench_gate_too_compares_the_gates_on_one_and_two_gpus_with_the_rest_per_phase(tmp_path, monkeypatch):
    """bench/campaign.py --gate-too timed --too-gpus 1,2: after the default runs (the flag gate) 1 and 2 GPUs again
    with GCEXPLORE_GATE=timed in the workers; the timed 2-GPU run's speedup against the timed 1-GPU run, the
    timed 1-GPU run against the default one (end to end, task times, makespans), and per run the engines'
    phases summed over the tasks (here the stand-in's record: the gate its worker's environment named)."""
    pytest.importorskip("distributed")
    import os

    bench = _bench_on_the_stand_in(monkeypatch)
    monkeypatch.delenv("GCEXPLORE_GATE", raising=False)
    monkeypatch.setattr(sys, "argv", ["campaign.py", "--out", str(tmp_path), "--repeats", "2", "--gpus", "1,2",
                                      "--no-fresh", "--no-warm", "--no-direct", "--gate-too", "timed",
                                      "--too-gpus", "1,2"])
    assert bench.main() == 0
    assert "GCEXPLORE_GATE" not in os.environ  # set for those runs only
    data = json.loads((tmp_path / "campaign_bench.json").read_text())
    timed = "cold" + bench.ALSO + "gate timed"
    assert [(r["gpus"], r["mode"]) for r in data["runs"]] == [(1, "cold"), (2, "cold"), (1, timed), (2, timed)]
    phases = [r["host_steps"]["phases"] for r in data["runs"]]
    assert [p["gates"] for p in phases] == [["flag"], ["flag"], ["timed"], ["timed"]]  # what each worker measured with
    # 2 tasks x (1 + 2 sizes) x 2 repetitions, summed from each task's record
    assert all(p["tasks"] == 2 and p["reps"] == 6 and p["queued"] == 4 for p in phases)
    assert all(p["gate_idle_s"] == pytest.approx(0.006) and p["wait_s"] == pytest.approx(0.018) for p in phases)
    text = (tmp_path / "campaign_bench.md").read_text()
    one, two = data["runs"][2]["end_to_end_s"], data["runs"][3]["end_to_end_s"]
    assert f"2 GPUs {timed}: speedup {one / two:.2f}x" in text  # against the timed 1-GPU run
    assert f"1 GPU {timed} against 1 GPU cold: end to end {one:.2f} s vs {data['runs'][0]['end_to_end_s']:.2f} s" in text
    p = phases[3]
    assert p["besides_gate_s"] == pytest.approx(p["rest_s"] - 0.006) and p["rest_per_rep_us"] == pytest.approx(
        p["rest_s"] / 6 * 1e6)
    assert (f"| 2 | {timed} | timed | 6 (4; 0; 0) | {p['rest_s']:.2f} | 0.01 | {p['besides_gate_s']:.2f} | "
            f"{p['rest_per_rep_us']:.0f} | 0.01 | 0.02 | 0.00 |") in text


def test_the_rest_split_by_phase_from_the_engines_records():
    import types

    from gcexplore.campaigns.phases import engine_records, rest_phases, table

    frames = {k: types.SimpleNamespace(attrs=a) for k, a in {
        "t1": {"gate": "flag", "gate_note": "", "host": "vm", "engine_phases": {"reps": 100, "queued": 99, "measured_again": 1,
                                                         "flag_timeouts": 1, "gate_idle_s": 0.02, "enqueue_s": 0.05,
                                                         "wait_s": 0.3, "collect_s": 0.01}},
        "t2": {"gate": "timed", "gate_note": "flag gate unavailable: no host memory",
               "engine_phases": {"reps": 300, "queued": 0, "gate_idle_s": 0.18, "enqueue_s": 0.09, "wait_s": 0.5,
                        "collect_s": 0.03}},
        "old": {"gate_us": 60.0, "host": "vm"}}.items()}  # a shard from before the record (host: the machine): left out
    eng = engine_records(frames)
    assert sorted(eng) == ["t1", "t2"]
    p = rest_phases(eng, ["t1", "t2", "gone"], rest_s=0.5)
    assert (p["reps"], p["queued"], p["measured_again"], p["flag_timeouts"], p["tasks"]) == (400, 99, 1, 1, 2)
    assert p["gate_idle_s"] == pytest.approx(0.2) and p["besides_gate_s"] == pytest.approx(0.3)
    assert p["rest_per_rep_us"] == pytest.approx(1250) and p["gates"] == ["flag", "timed"]
    assert rest_phases(eng, ["old"], 1.0) is None and rest_phases(eng, ["t1"], None)["besides_gate_s"] is None
    lines = table([{"gpus": 2, "mode": "cold", "host_steps": {"phases": p}}])
    assert lines[3] == "| 2 | cold | flag, timed | 400 (99; 1; 1) | 0.50 | 0.20 | 0.30 | 1250 | 0.14 | 0.80 | 0.04 |"
    assert lines[-1] == "gate notes: flag gate unavailable: no host memory" and table([{"host_steps": {}}]) == []
