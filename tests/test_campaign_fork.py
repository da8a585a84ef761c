"""The forkserver a local campaign cluster forks its workers from (issue 30): it imports the
heavy modules once, its workers are its children and find those modules imported, and no
worker is forked from a server that initialised CUDA (the cluster refuses, saying why). No GPU."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("distributed")
from distributed import Client  # noqa: E402

from gcexplore.campaigns import _fork_preload  # noqa: E402
from gcexplore.campaigns.cluster import forkserver_ready, local_cluster, start_forkserver, stop_forkserver  # noqa: E402

HERE = Path(__file__).resolve().parent


@pytest.fixture
def tests_on_path(monkeypatch):
    """The forkserver and the workers import this folder's modules (the server inherits the environment)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(HERE), os.environ.get("PYTHONPATH")))))
    monkeypatch.syspath_prepend(str(HERE))
    stop_forkserver()
    yield
    stop_forkserver()


def _worker_view():
    import gcexplore.campaigns._task as ct
    from gcexplore.campaigns import _fork_preload as fp

    return {"ppid": os.getppid(), "preloaded": dict(ct.PRELOADED), "report": dict(fp.REPORT),
            "imported": "_campaign_standin" in sys.modules, "cuda_core": "cuda.core" in sys.modules}


def test_workers_fork_from_one_server_that_imported_their_modules_once(tests_on_path):
    first = start_forkserver(["_campaign_standin"], wait=True)
    assert first["started"] and first["errors"] == {} and first["cuda"] is None
    assert "_campaign_standin" in first["modules"] and first["seconds"]["_campaign_standin"] >= 0
    # cuda.core and the kernels' module too, without initialising CUDA (the check above: cuda None)
    assert {"cuda.core", "gcexplore.device.kernels"} <= set(first["seconds"])
    again = start_forkserver(["_campaign_standin"])
    assert again == {"pid": first["pid"], "started": False}  # kept for the next campaign of the process
    with local_cluster(["0", "1"], warm=["_campaign_standin"]) as cluster, Client(cluster) as client:
        views = list(client.run(_worker_view).values())
    assert len(views) == 2
    for v in views:
        assert v["ppid"] == first["pid"] and v["report"]["pid"] == first["pid"] and v["imported"]
        assert v["cuda_core"]  # found imported: a worker on a GPU imports it no more before its context
        pre = v["preloaded"]
        assert pre["forkserver"]["pid"] == first["pid"]
        assert pre["process_started_at"] >= pre["forkserver"]["ended_at"] - 0.05  # forked after the imports
    # a module the running server lacks: replaced by one that imports it too (and keeps the earlier one)
    more = start_forkserver(["_fork_cuda_standin_absent_ok"], wait=True)
    assert more["started"] and more["pid"] != first["pid"]
    assert {"_campaign_standin", "_fork_cuda_standin_absent_ok"} <= set(more["modules"])
    assert "ModuleNotFoundError" in more["errors"]["_fork_cuda_standin_absent_ok"]  # recorded; the server lives


def test_no_worker_forks_from_a_server_that_initialised_cuda(tests_on_path):
    report = start_forkserver(["_fork_cuda_standin"], wait=True)
    assert report["cuda"] == "torch.cuda.is_initialized() is True"
    with pytest.raises(RuntimeError, match="initialised CUDA while it imported") as err:
        local_cluster(["0"], warm=["_fork_cuda_standin"])
    assert "_fork_cuda_standin" in str(err.value) and "start='spawn'" in str(err.value)
    # the same modules with fresh interpreters: the worker starts (no forkserver involved)
    with local_cluster(["0"], warm=["_fork_cuda_standin"], start="spawn") as cluster, Client(cluster) as client:
        ((view,),) = [tuple(client.run(_worker_view).values())]
    assert view["report"] == {} and "forkserver" not in view["preloaded"]


def test_cuda_check_sees_an_open_driver_file_and_nothing_else(tmp_path):
    assert _fork_preload.cuda_in_process(str(tmp_path / "nvidia")) is None
    (tmp_path / "nvidiactl").write_text("")
    with open(tmp_path / "nvidiactl") as f:  # noqa: F841 (held open: what cuInit leaves behind)
        why = _fork_preload.cuda_in_process(str(tmp_path / "nvidia"))
    assert why is not None and "nvidiactl" in why
    assert _fork_preload.refusal({"cuda": None, "modules": ["x"]}) is None
    assert "x" in _fork_preload.refusal({"cuda": why, "modules": ["x"]})


def test_start_method_and_module_names_are_checked():
    with pytest.raises(ValueError, match="start is one of 'forkserver', 'spawn'"):
        local_cluster(["0"], start="fork")
    with pytest.raises(ValueError, match="imports modules by name"):
        start_forkserver(["os; rm -rf /"])


def test_by_default_a_first_cluster_spawns_and_starts_a_server_that_the_next_one_forks_from(tests_on_path):
    """No server kept: the workers are spawned (each makes its GPU context while it imports) and a server is
    started beside them; the next cluster with those modules forks its workers from it."""
    import time

    assert not forkserver_ready(["_campaign_standin"])
    with local_cluster(["0"], warm=["_campaign_standin"]) as cluster, Client(cluster) as client:
        (first,) = client.run(_worker_view).values()
    assert first["ppid"] == os.getpid() and first["report"] == {} and "forkserver" not in first["preloaded"]
    deadline = time.monotonic() + 60
    while not forkserver_ready(["_campaign_standin"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert forkserver_ready(["_campaign_standin"]) and not forkserver_ready(["_campaign_standin", "json"])
    with local_cluster(["0"], warm=["_campaign_standin"]) as cluster, Client(cluster) as client:
        (second,) = client.run(_worker_view).values()
    server = start_forkserver(["_campaign_standin"])
    assert not server["started"] and second["ppid"] == server["pid"] and second["imported"]
    assert second["preloaded"]["forkserver"]["pid"] == server["pid"]


def _lock_view():
    import time

    import gcexplore.campaigns._task as ct

    deadline = time.monotonic() + 20
    while "gpu_ready_at" not in ct.PRELOADED and time.monotonic() < deadline:  # its GPU start, on the task thread
        time.sleep(0.01)
    return os.environ.get(_fork_preload.LOCK_ENV), dict(ct.PRELOADED)


def test_a_serial_gpu_start_holds_one_lock_per_cluster_and_a_bad_mode_is_refused(tests_on_path, monkeypatch):
    """By default (GCEXPLORE_GPU_START unset or serial) the cluster's workers lock one file (in a directory of the
    client's own) around their driver and context, so that they make them one at a time; together: no lock."""
    import threading
    import time

    spans = []

    def start(out):
        with _fork_preload.gpu_start_lock(out):
            t = time.monotonic()
            time.sleep(0.2)  # a driver initialisation and a context
            spans.append((t, time.monotonic()))

    def run_two():
        spans.clear()
        outs = [{}, {}]
        threads = [threading.Thread(target=start, args=(o,)) for o in outs]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        (a0, a1), (b0, b1) = sorted(spans)
        return b0 < a1, outs  # overlapping?

    monkeypatch.delenv(_fork_preload.LOCK_ENV, raising=False)
    overlap, outs = run_two()
    assert overlap and outs == [{}, {}]
    monkeypatch.delenv("GCEXPLORE_GPU_START", raising=False)  # the default
    from gcexplore.campaigns.cluster import _start_lock_file

    path = _start_lock_file()
    assert oct(os.stat(os.path.dirname(path)).st_mode & 0o777) == "0o700"
    monkeypatch.setenv(_fork_preload.LOCK_ENV, path)
    overlap, outs = run_two()
    assert not overlap and sorted(o["lock_wait_s"] for o in outs)[1] >= 0.15  # the second waited for the first
    monkeypatch.delenv(_fork_preload.LOCK_ENV)
    with local_cluster(["0", "1"], warm=["_campaign_standin"]) as cluster, Client(cluster) as client:
        views = list(client.run(_lock_view).values())
    assert [v[0] for v in views] == [path, path]
    assert all("lock_wait_s" in v[1] for v in views), views  # the workers' GPU start took the lock
    monkeypatch.setenv("GCEXPLORE_GPU_START", "together")
    with local_cluster(["0", "1"], warm=["_campaign_standin"]) as cluster, Client(cluster) as client:
        views = list(client.run(_lock_view).values())
    assert [v[0] for v in views] == [None, None] and not any("lock_wait_s" in v[1] for v in views)
    monkeypatch.setenv("GCEXPLORE_GPU_START", "sideways")
    with pytest.raises(ValueError, match="GCEXPLORE_GPU_START is one of 'serial', 'together'"):
        local_cluster(["0"], warm=[])
