"""Campaigns on two real GPUs: both cards in parallel, a killed worker, a scheduler and workers started by hand.

Run on the 2-GPU machine (markers gpu and multigpu); skipped elsewhere with the reason.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.multigpu]
distributed = pytest.importorskip("distributed", reason="Dask distributed is not installed (pip install .[campaign])")

import gcexplore as gx  # noqa: E402
from gcexplore.campaigns.store import CampaignFolder  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PAIRS = [["compute", "memory"], ["compute", "copy"]]
OPTS = {"repeats": 3, "warmup": 1}


def _each_task_once(df, c, reps=OPTS["repeats"]):
    assert set(df["task_key"]) == set(c.tasks) and df.attrs["failed"] == {}
    per = df.groupby(["task_key", "layout", "mode", "workload"]).size()
    assert (per == reps).all(), per[per != reps]


def test_two_gpus_measure_in_parallel_with_identity(tmp_path):
    # tasks of ~1 s: the workers make their driver and context one at a time (~0.3 s each), so with tasks of 3
    # repetitions (~0.2 s) the first worker could finish one before the second began (batch g2)
    opts = {**OPTS, "repeats": 40}
    c = gx.campaign(PAIRS, [[16, 32], [48, 64]], options=opts, folder=tmp_path / "c", devices=["0", "1"],
                    progress=False)
    df = c.result(progress=False)
    _each_task_once(df, c, reps=40)
    # the default cluster warmed each worker as it started (context, kernels; its GPU ready before its first task);
    # a worker's first task of a recipe built and primed it, its later tasks of that recipe found it built
    assert len(c.warm_ups) == 2 and c.timings["cluster_start_s"] > 0
    for w in c.warm_ups.values():
        assert "error" not in w["preload"] and w["preload"]["context_s"] > 0, w
        first = min(r["started_s"] for r in c.reports.values() if r["pid"] == w["pid"])
        assert w["preload"]["gpu_ready_at"] <= first, w
    seen = set()
    for r in sorted(c.reports.values(), key=lambda r: r["started_s"]):
        mine = (r["pid"], c.tasks[r["key"]]["pair"])
        assert r["primed"] == (mine not in seen) and r["cached"] == (mine in seen), r
        seen.add(mine)
    # each task reports its sweep's host-side steps outside the repetitions, each within the experiment's time
    for r in c.reports.values():
        assert {"setup", "partitions", "nvml", "drain", "close"} <= set(r["host_s"]), r["host_s"]
        assert 0 < sum(r["host_s"].values()) < r["experiment_s"], r
    cards = df.groupby("device_uuid").agg(index=("device_index", "first"), sm=("device_sm_count", "first"))
    assert len(cards) == 2, "both GPUs should have run tasks"
    assert sorted(cards["index"]) == [0, 1]
    assert (cards["sm"] == gx.device_info(0).sm_count).all()
    for col in ("device_uuid", "host", "driver_version", "cuda_core_version", "device_name", "run_id"):
        assert (df[col] != "").all(), col
    # interleaved in time: some task on one card ran while a task on the other did
    spans = df.groupby(["device_uuid", "task_key"])[["task_started_s", "task_finished_s"]].first().reset_index()
    a, b = (spans[spans["device_uuid"] == u] for u in cards.index)
    t0 = spans["task_started_s"].min()
    assert any(x.task_started_s < y.task_finished_s and y.task_started_s < x.task_finished_s
               for x in a.itertuples() for y in b.itertuples()), [
        (r.device_uuid[:8], round(r.task_started_s - t0, 3), round(r.task_finished_s - t0, 3))
        for r in spans.itertuples()]


def test_worker_killed_mid_campaign(tmp_path):
    from distributed import Client

    from gcexplore.campaigns.grid import local_cluster

    cluster = local_cluster(["0", "1"])
    client = Client(cluster)
    try:
        c = gx.campaign(PAIRS, [[16, 32, 48, 64, 80]], options={"repeats": 10}, folder=tmp_path / "c",
                        client=client, progress=False, wait=False)
        store, deadline = CampaignFolder(tmp_path / "c"), time.monotonic() + 120
        victim = None
        while victim is None:
            assert time.monotonic() < deadline, "no task checkpointed a layout"
            for addr, keys in client.processing().items():
                for key in keys:
                    if key in c.tasks and store.checkpointed_layouts(key) >= 1:  # not a warm-up
                        victim = key, client.run(os.getpid, workers=[addr])[addr]
            time.sleep(0.05)
        os.kill(victim[1], signal.SIGKILL)
        df = c.result(progress=False)
    finally:
        client.close()
        cluster.close()
    _each_task_once(df, c, reps=10)
    assert df.attrs["done"] == len(c.tasks)


def _spawn(args, env, log):
    return subprocess.Popen([sys.executable, "-m", *args], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def test_scheduler_and_workers_started_by_hand(tmp_path):
    sched_file = tmp_path / "scheduler.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    procs = []
    with open(tmp_path / "dask.log", "wb") as log:
        try:
            procs.append(_spawn(["distributed.cli.dask_scheduler", "--scheduler-file", str(sched_file), "--port", "0",
                                 "--dashboard-address", ":0"], env, log))
            deadline = time.monotonic() + 60
            while not sched_file.exists():
                assert time.monotonic() < deadline, (tmp_path / "dask.log").read_text()[-3000:]
                time.sleep(0.1)
            for gpu in ("0", "1"):
                procs.append(_spawn(["distributed.cli.dask_worker", "--scheduler-file", str(sched_file),
                                     "--nthreads", "1", "--nworkers", "1", "--name", f"gpu{gpu}"],
                                    {**env, "CUDA_VISIBLE_DEVICES": gpu}, log))
            import json

            address = json.loads(sched_file.read_text())["address"]
            with distributed.Client(address) as probe:
                probe.wait_for_workers(2, timeout=120)
            c = gx.campaign(PAIRS[:1], [[16, 32]], options=OPTS, folder=tmp_path / "c", scheduler=address,
                            cards="each", progress=False)
            df = c.result(progress=False)
        finally:
            for p in reversed(procs):
                os.killpg(p.pid, signal.SIGTERM)
            for p in procs:
                p.wait(timeout=30)
    _each_task_once(df, c)
    assert len(c.tasks) == 2 and df["device_uuid"].nunique() == 2, "cards='each' runs the task once on each GPU"


def test_two_gpu_task_times_match_the_same_tasks_one_by_one(tmp_path):
    """Scaling does not slow a task down or buy speed with noise: 4 tasks on 2 cards against
    the same 4 on one card (one after the other), per task and per layout x mode."""
    grid, opts = (PAIRS, [[16, 32], [48, 64]]), {"repeats": 20}
    one = gx.campaign(*grid, options=opts, folder=tmp_path / "one", devices=["0"], progress=False)
    two = gx.campaign(*grid, options=opts, folder=tmp_path / "two", devices=["0", "1"], progress=False)
    assert len(one.tasks) == 4 and set(one.reports) == set(two.reports) == set(one.tasks)
    t1 = {k: r["experiment_s"] for k, r in one.reports.items()}
    t2 = {k: r["experiment_s"] for k, r in two.reports.items()}
    ratio = sum(t2.values()) / sum(t1.values())
    assert 0.85 <= ratio <= 1.15, f"the tasks took {ratio:.2f}x as long on two cards: {t1} vs {t2}"
    assert all(0.7 <= t2[k] / t1[k] <= 1.3 for k in t1), (t1, t2)
    keys = ["task_key", "layout", "mode", "rep"]
    a = gx.load_campaign(tmp_path / "one").groupby(keys)["makespan_ms"].max()
    b = gx.load_campaign(tmp_path / "two").groupby(keys)["makespan_ms"].max()
    groups = sorted(set(a.index.droplevel("rep")))
    # Two runs on different physical cards differ by ~1% in makespan, which 20 repetitions can resolve
    # (batch 2, 4x H100: 16 of 32 intervals excluded 1), so the bound is on the size of the difference.
    ratios = {g: float(b.loc[g].median() / a.loc[g].median()) for g in groups}
    worst = max(ratios.items(), key=lambda kv: abs(kv[1] - 1))
    assert abs(worst[1] - 1) <= 0.03, f"a makespan median moved by {worst[1] - 1:+.1%} at {worst[0]} on two cards"
