"""Campaigns on a local Dask cluster of two worker processes, with a stand-in experiment (no GPU).

The stand-in (tests/_campaign_standin.py) runs the real layout loop and checkpoint; its
rows record the worker process that measured them, so a test can tell rows kept from a
checkpoint from rows measured again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="Dask distributed is not installed (pip install .[dev])")

import gcexplore as gx  # noqa: E402
from gcexplore.campaigns.grid import local_cluster, plan_tasks  # noqa: E402
from gcexplore.campaigns.store import FORMAT, CampaignFolder  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EXP = "_campaign_standin:standin"
PAIR = "_campaign_standin:pair"


@pytest.fixture(scope="module")
def client():
    from distributed import Client

    cluster = local_cluster(["0", "1"])
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


def _run(client, folder, splits, **kw):
    kw.setdefault("options", {"layout_s": 0.02})
    return gx.campaign([PAIR], splits, experiment=EXP, folder=folder, client=client, progress=False, **kw)


def _once(df, keys):
    """Every key's rows come from one run of its task: one task_key each, one run id each."""
    assert set(df["task_key"]) == set(keys)
    runs = df.groupby("task_key")["run_id"].nunique()
    assert (runs == 1).all(), runs


def test_keys_are_deterministic_across_processes():
    grid = ([["compute", "memory:n=1048576"], PAIR], [None, [16, 32]], [{"repeats": 3}, {"repeats": 5}])
    keys = sorted(plan_tasks("sweep", *grid)[0])
    assert len(keys) == 8 and len(set(keys)) == 8
    code = ("import json, sys; sys.path.insert(0, 'tests'); from gcexplore.campaigns.grid import plan_tasks; "
            f"print(json.dumps(sorted(plan_tasks('sweep', *{grid!r})[0])))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "123", "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))})
    assert json.loads(out.stdout) == keys
    # what the task measures changes its key; nothing else does
    assert plan_tasks("sweep", [["compute", "memory"]], [[16]])[0].keys() != \
        plan_tasks("sweep", [["compute", "memory"]], [[24]])[0].keys()


@pytest.mark.parametrize("bad, match", [
    ({"experiment": "swep"}, "unknown experiment 'swep'"),
    ({"workloads": [["compute", "memroy"]]}, "unknown built-in workload 'memroy'"),
    ({"workloads": [["memory:n"]]}, "bad workload option 'n'"),
    ({"options": {"repeats": 0}}, "repeats"),
    ({"options": {"repeat": 3}}, "has no option"),
    ({"cards": "all"}, "cards must be one of"),
])
def test_bad_grid_is_refused_before_anything(tmp_path, bad, match):
    kw = {"workloads": [["compute", "memory"]], "experiment": "sweep", **bad}
    with pytest.raises((ValueError, TypeError), match=match):
        gx.campaign(kw.pop("workloads"), folder=tmp_path / "c", progress=False, **kw)
    assert not (tmp_path / "c").exists()


def test_one_shard_per_task_with_identity(client, tmp_path):
    folder = tmp_path / "c"
    c = _run(client, folder, [[8], [16], [24], [32]])
    df = c.result(progress=False)
    keys = sorted(c.tasks)
    assert sorted(p.stem for p in (folder / "shards").glob("*.parquet")) == keys
    _once(df, keys)
    assert len(df) == 4 * 2 * 2  # one layout x 2 repetitions x 2 workloads per task
    for col in ("device_uuid", "host", "campaign_id", "pair", "split_set", "device_name"):
        assert (df[col] != "").all(), col
    assert set(df["device_uuid"]) <= {"standin-0", "standin-1"}
    assert (df["campaign_id"] == c.campaign_id).all() and df.attrs["done"] == 4
    assert (df["task_finished_s"] >= df["task_started_s"]).all()
    again = _run(client, folder, [[8], [16], [24], [32]])  # a rerun submits nothing
    assert again.submitted == [] and sorted(again.skipped) == keys


def _notebook_factory(device=0, **kwargs):
    return [gx.Workload("first", lambda *, stream: None), gx.Workload("second", lambda *, stream: None)]


def test_failing_factory_and_failing_task_are_recorded_and_stop_nothing(client, tmp_path):
    folder = tmp_path / "c"
    c = gx.campaign([PAIR, "_campaign_standin:broken_factory", _notebook_factory], [[8, 16]], experiment=EXP,
                    options=[{"layout_s": 0.02}, {"layout_s": 0.02, "fail": True}], folder=folder, client=client,
                    progress=False)
    df = c.result(progress=False)
    st = c.status().set_index("task_key")
    assert len(st) == 6
    failed = st[st["status"] == "failed"]
    assert len(failed) == 4 and (st["status"] == "done").sum() == 2
    broken = failed[failed["pair"] == "broken_factory"]
    assert len(broken) == 2 and broken["error"].str.contains("the factory broke on purpose").all()
    record = json.loads((folder / "failed" / f"{broken.index[0]}.json").read_text())
    assert "in broken_factory" in record["traceback"]  # the worker's frames, summarised
    task_fail = failed[failed["pair"] != "broken_factory"]
    assert task_fail["error"].str.contains("the stand-in task failed on purpose").all()
    assert set(df["pair"]) == {"pair", "_notebook_factory"}  # the notebook's own function ran on the workers
    assert set(df.loc[df["pair"] == "_notebook_factory", "workload"]) == {"first", "second"}
    assert set(df.attrs["failed"]) == set(failed.index)


def test_torn_shard_is_moved_aside_and_measured_again(client, tmp_path):
    folder = tmp_path / "c"
    c = _run(client, folder, [[8, 16], [24, 32]])
    c.wait(progress=False)
    victim = sorted(c.tasks)[0]
    shard = folder / "shards" / f"{victim}.parquet"
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2])  # a copy cut short
    (folder / "shards" / f".{victim}.parquet.x.tmp").write_bytes(b"half a write")  # an interrupted write
    st = gx.campaign_status(folder)
    assert st.set_index("task_key").loc[victim, "status"] == "started"  # its checkpoint still holds the layouts
    assert any(victim in note and "left in place" in note for note in st.attrs["torn"])
    assert shard.exists() and not (folder / "torn").exists(), "campaign status changed the folder"
    before = len(gx.load_campaign(folder))
    again = _run(client, folder, [[8, 16], [24, 32]])
    assert again.submitted == [victim]
    assert list((folder / "torn").iterdir()), "the resume deleted the damaged shard instead of moving it aside"
    df = again.result(progress=False)
    _once(df, c.tasks)
    assert len(df) > before
    rows = df[df["task_key"] == victim]
    assert set(rows["worker_pid"]) == {c.reports[victim]["pid"]}, "the checkpointed layouts were measured again"


def test_folder_of_a_newer_format_is_refused(tmp_path, client):
    folder = tmp_path / "c"
    folder.mkdir()
    spec = {"gcexplore_campaign": FORMAT + 1, "campaign_id": "x", "tasks": {}, "gcexplore_version": "9.0"}
    (folder / "campaign.json").write_text(json.dumps(spec))
    with pytest.raises(ValueError, match=f"format {FORMAT + 1}.*upgrade gcexplore"):
        _run(client, folder, [[8]])
    with pytest.raises(ValueError, match="upgrade gcexplore"):
        gx.load_campaign(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["campaign.json"]


def test_folder_written_by_an_older_run_is_read_and_resumed(client, tmp_path):
    """An older writer kept the identity only in the shard's attrs; it is filled into the rows."""
    folder = tmp_path / "c"
    first = _run(client, folder, [[8]])
    first.wait(progress=False)
    (key,) = first.tasks
    store = CampaignFolder(folder)
    old = store.read_shard(key)
    ident_cols = ["device_uuid", "host", "device_index", "cupti_version", "task_started_s", "split_set"]
    old = old.drop(columns=ident_cols)
    old.attrs.pop("recorded", None)
    gx.save(old, store.shard_path(key))
    spec = json.loads(store.spec_path.read_text())
    spec["gcexplore_version"] = "0.0.1"
    store.spec_path.write_text(json.dumps(spec))
    df = gx.load_campaign(folder)
    assert (df["device_uuid"] == old.attrs["campaign"]["identity"]["device_uuid"]).all()
    assert (df["split_set"] == "8").all() and df["device_index"].notna().all()
    grown = _run(client, folder, [[8], [16]])
    assert grown.skipped == [key] and len(grown.submitted) == 1
    _once(grown.result(progress=False), grown.tasks)


def _pid_of_worker_running(client, key, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for addr, keys in client.processing().items():
            if key in keys:
                return addr, client.run(os.getpid, workers=[addr])[addr]
        time.sleep(0.02)
    raise AssertionError(f"{key} never ran")


def test_worker_killed_mid_task_loses_at_most_one_layout(client, tmp_path):
    folder = tmp_path / "c"
    c = gx.campaign([PAIR], [[8, 16, 24, 32, 40, 48]], experiment=EXP, options={"layout_s": 0.4}, folder=folder,
                    client=client, progress=False, wait=False)
    (key,) = c.tasks
    store = CampaignFolder(folder)
    addr, pid = _pid_of_worker_running(client, key)
    while store.checkpointed_layouts(key) < 2:
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    df = c.result(progress=False)
    assert set(df["task_key"]) == {key}
    assert sorted(df["split_sm_count"].unique()) == [8, 16, 24, 32, 40, 48]
    assert len(df) == 6 * 2 * 2, "a layout is in the result twice or is missing"
    pids = set(df["worker_pid"])
    assert pid in pids and len(pids) == 2, "checkpointed layouts were measured again or lost"
    assert int((df["worker_pid"] == pid).sum()) >= 2 * 2 * 2


CLIENT_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    import gcexplore as gx
    if __name__ == "__main__":
        gx.campaign([{pair!r}], [[8, 16, 24]] * 1 + [[k, k + 8, k + 16] for k in (32, 64, 96, 120, 136)],
                    experiment={exp!r}, options={{"layout_s": 0.3}}, folder={folder!r}, devices=["0", "1"],
                    progress=False)
""")


def test_client_killed_mid_run_resumes_every_task_once(client, tmp_path):
    folder = tmp_path / "c"
    script = tmp_path / "client.py"
    script.write_text(CLIENT_SCRIPT.format(tests=str(HERE), pair=PAIR, exp=EXP, folder=str(folder)))
    proc = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    shards = folder / "shards"
    deadline = time.monotonic() + 45

    def mid_task():  # a task not finished that has checkpointed a layout: the kill lands inside it
        done = {p.stem for p in shards.glob("*.parquet")}
        spec = json.loads((folder / "campaign.json").read_text())
        return [k for k in spec["tasks"] if k not in done and CampaignFolder(folder).checkpointed_layouts(k)]

    try:
        while not (shards.is_dir() and len(list(shards.glob("*.parquet"))) >= 2 and mid_task()):
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the client subprocess wrote no shard and no task checkpoint"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)  # the client dies first (kill -9)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # then its cluster, as on a crashed machine
        proc.wait()
    finished = {p.stem for p in shards.glob("*.parquet")}
    assert 2 <= len(finished) < 6
    spec = json.loads((folder / "campaign.json").read_text())
    kept = {k: CampaignFolder(folder).checkpointed_layouts(k) for k in spec["tasks"] if k not in finished}
    started = [k for k, n in kept.items() if n]
    assert started, "the kill landed between tasks: the resume check below would check nothing"
    c = gx.campaign([PAIR], [[8, 16, 24]] + [[k, k + 8, k + 16] for k in (32, 64, 96, 120, 136)], experiment=EXP,
                    options={"layout_s": 0.3}, folder=folder, client=client, progress=False)
    assert set(c.skipped) == finished and set(c.submitted) == set(spec["tasks"]) - finished
    df = c.result(progress=False)
    assert set(df["task_key"]) == set(spec["tasks"]) and df.attrs["done"] == 6
    assert df.groupby("task_key").size().eq(3 * 2 * 2).all(), "a layout was measured twice or lost"
    ours = set(client.run(os.getpid).values())  # the resuming cluster's workers
    for key in started:  # layouts checkpointed before the kill were kept, not measured again
        pids = df.loc[df["task_key"] == key, "worker_pid"]
        if kept[key] == 3:  # every layout checkpointed, killed before its shard: nothing measured again
            assert not set(pids) & ours, "a checkpointed task was measured again"
        else:
            assert pids.nunique() == 2 and (pids.isin(ours).sum() == (3 - kept[key]) * 2 * 2), kept[key]


def test_cli_campaign_and_status(client, tmp_path, capsys):
    from gcexplore.cli import main

    spec = tmp_path / "spec.toml"
    spec.write_text(textwrap.dedent(f"""
        experiment = "{EXP}"
        workloads = ["{PAIR}"]
        splits = [[8], [16]]
        options = {{ layout_s = 0.02 }}
    """))
    addr = client.scheduler.address
    assert main(["campaign", str(spec), "--scheduler", addr, "--out", str(tmp_path / "c"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "2 of 2 tasks done" in out
    assert main(["campaign", "status", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert "2 of 2 tasks done, 0 failed" in out
    assert main(["campaign", "status", str(tmp_path / "nothing")]) == 1
    assert "no campaign.json" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text('experiment = "sweep"\nworkloads = [["compute", "nope"]]\n')
    assert main(["campaign", str(bad), "--out", str(tmp_path / "d")]) == 2
    assert "unknown built-in workload 'nope'" in capsys.readouterr().err
