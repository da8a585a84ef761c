"""A campaign on a full disk (issue 46): the measured rows are kept, the status says why in one sentence.

ENOSPC is injected where a task writes into the folder: the files module's writer (shards, traces),
the failure record's writer and the checkpoint's append. Tasks run in this process (run_task) or on an
in-process Dask worker (threads), so the patched writers are the ones that run; every wait is on a
task's end, none on a clock.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import types
from pathlib import Path

import pandas as pd
import pytest

import gcexplore as gx
from _campaign_standin import pair, standin
from gcexplore.campaigns import disk_full, store as store_mod
from gcexplore.campaigns._task import Experiment, run_task
from gcexplore.campaigns.grid import plan_tasks
from gcexplore.campaigns.store import CampaignFolder
from gcexplore.experiments.runner import Checkpoint
from gcexplore.results import files

ROOT = Path(__file__).resolve().parent.parent
EXP = "_campaign_standin:standin"


def _full(sub):
    """A writer of results/files.py that finds no space for files under ``sub``/ (others are written)."""
    real = files.temp_beside

    def temp_beside(path, write):
        if Path(path).parent.name == sub:
            raise files.named_error(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), Path(path))
        return real(path, write)

    return temp_beside


def _json_full(path, data):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


def _spec(tmp_path, n=1):
    tasks, _ = plan_tasks(EXP, ["_campaign_standin:pair"], [[8 * (i + 1)] for i in range(n)], [{"layout_s": 0}])
    folder = tmp_path / "c"
    CampaignFolder(folder).write_spec("camp-1", tasks, gx.__version__)
    return folder, tasks


def _status_cli(folder):
    r = subprocess.run([sys.executable, "-m", "gcexplore", "campaign", "status", str(folder)], capture_output=True,
                       text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    return r.stdout


@pytest.mark.parametrize("record_fits", [True, False])
def test_a_shard_the_disk_has_no_room_for_keeps_its_rows_and_says_so(tmp_path, monkeypatch, record_fits):
    folder, tasks = _spec(tmp_path)
    (key, task), = tasks.items()
    monkeypatch.setattr(files, "temp_beside", _full("shards"))
    if not record_fits:  # not even the failure record fits: the empty marker says it
        monkeypatch.setattr(store_mod, "_write_json", _json_full)
    rep = run_task(task, str(folder), "camp-1", Experiment(standin), pair, reuse=False)  # no exception
    want = f"disk full while writing shards/{key}.parquet"
    assert rep["status"] == "failed" and rep["error"] == want
    rows = rep["unsaved"]["shards"]
    assert len(rows) == rep["rows"] == 4 and set(rows["task_key"]) == {key}  # the measured rows, whole
    assert not (folder / "shards" / f"{key}.parquet").exists()
    assert (folder / "failed" / f"{key}.json").exists() == record_fits
    assert (folder / "failed" / f"{key}.shards{disk_full.SUFFIX}").exists() != record_fits
    st = gx.campaign_status(folder)
    assert st["status"].tolist() == ["failed"] and st["error"].tolist() == [want]
    out = _status_cli(folder)
    assert f"  failed {key}: {want}\n" in out and "1 failed" in out, out
    # the client keeps the rows: the folder is still full, so they go to the temporary folder
    handle = types.SimpleNamespace(folder=folder, campaign_id="camp-1", reports={key: rep}, unsaved={})
    disk_full.keep_unsaved(handle, CampaignFolder(folder))
    kept = gx.load(rep["rows_at"])
    assert not handle.unsaved and Path(rep["rows_at"]).parent.name == "gcexplore-unsaved-camp-1"
    pd.testing.assert_frame_equal(kept.reset_index(drop=True), rows.reset_index(drop=True), check_dtype=False)
    assert "unsaved" not in rep and gx.campaign_status(folder)["status"].tolist() == ["failed"]


def test_rows_brought_back_are_written_as_the_shard_once_there_is_room(tmp_path, monkeypatch):
    folder, tasks = _spec(tmp_path)
    (key, task), = tasks.items()
    monkeypatch.setattr(files, "temp_beside", _full("shards"))
    rep = run_task(task, str(folder), "camp-1", Experiment(standin), pair, reuse=False)
    monkeypatch.undo()  # room again
    handle = types.SimpleNamespace(folder=folder, campaign_id="camp-1", reports={key: rep}, unsaved={})
    disk_full.keep_unsaved(handle, CampaignFolder(folder))
    assert rep["status"] == "done" and rep["rows_at"].endswith(f"shards/{key}.parquet")
    st = gx.campaign_status(folder)
    assert st["status"].tolist() == ["done"] and st["rows"].tolist() == [4]
    assert not list((folder / "failed").iterdir())  # the record is gone with the shard written


def test_rows_nowhere_written_stay_in_memory_and_the_report_says_where(tmp_path, monkeypatch):
    folder, tasks = _spec(tmp_path)
    (key, task), = tasks.items()
    monkeypatch.setattr(files, "temp_beside", _full("shards"))
    rep = run_task(task, str(folder), "camp-1", Experiment(standin), pair, reuse=False)
    monkeypatch.setattr(files, "temp_beside", _full("gcexplore-unsaved-camp-1"))  # the temporary folder full too
    handle = types.SimpleNamespace(folder=folder, campaign_id="camp-1", reports={key: rep}, unsaved={})
    disk_full.keep_unsaved(handle, CampaignFolder(folder))
    assert rep["rows_at"] == f"in memory only: Campaign.unsaved[{key!r}]"
    assert len(handle.unsaved[key]["shards"]) == 4


def test_a_checkpoint_the_disk_has_no_room_for_keeps_the_rows_so_far(tmp_path, monkeypatch):
    folder, tasks = _spec(tmp_path)
    (key, task), = tasks.items()

    def append(self, label, rows):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Checkpoint, "append", append)
    monkeypatch.setattr(store_mod, "_write_json", _json_full)
    rep = run_task(task, str(folder), "camp-1", Experiment(standin), pair, reuse=False)
    want = f"disk full while writing checkpoints/{key}.jsonl"
    assert rep["status"] == "failed" and rep["error"] == want
    partial = rep["unsaved"]["shards"]
    assert partial.attrs.get("partial") and len(partial) == 4  # the layout measured before the append failed
    assert gx.campaign_status(folder)["error"].tolist() == [want]
    monkeypatch.undo()
    handle = types.SimpleNamespace(folder=folder, campaign_id="camp-1", reports={key: rep}, unsaved={})
    disk_full.keep_unsaved(handle, CampaignFolder(folder))  # partial rows are no shard: they go beside, and the task is still not done
    assert "gcexplore-unsaved-camp-1" in rep["rows_at"] and rep["status"] == "failed"
    assert len(gx.load(rep["rows_at"])) == 4


def test_a_campaign_on_a_full_disk_reports_keeps_and_finishes(tmp_path, monkeypatch):
    """Through Dask (an in-process worker, so the patched writer is the one that runs)."""
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    monkeypatch.setattr(files, "temp_beside", _full("shards"))
    folder = tmp_path / "c"
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        c = gx.campaign(["_campaign_standin:pair"], [[8], [16]], experiment=EXP, folder=folder, client=client,
                        options={"layout_s": 0}, progress=False)
    assert sorted(r["status"] for r in c.reports.values()) == ["failed", "failed"]
    st = c.status()
    assert (st["status"] == "failed").all()
    assert st["error"].tolist() == [f"disk full while writing shards/{k}.parquet" for k in st["task_key"]]
    for key, rep in c.reports.items():
        assert len(gx.load(rep["rows_at"])) == 4 and set(gx.load(rep["rows_at"])["task_key"]) == {key}
