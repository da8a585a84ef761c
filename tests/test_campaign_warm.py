"""The warm campaign cluster (`gcexplore cluster start|status|stop`) on CPU workers, with the stand-in experiment.

One cluster is started for the module (a detached server process and two CPU workers): the tests read its
record, run campaigns on it, refuse it when its code is stale, and stop it; one more, of one worker, is killed
to be found as a crashed command's. Every wait is on an event (a line from the server, a process's exit).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import sys
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="Dask distributed is not installed (pip install .[campaign])")
psutil = pytest.importorskip("psutil")

import gcexplore as gx  # noqa: E402
from gcexplore.campaigns import warm  # noqa: E402
from gcexplore.cli.commands import main  # noqa: E402

HERE = Path(__file__).resolve().parent
EXP = "_campaign_standin:standin"
FACTORY = '''
def pair(device=0):
    return {"a": lambda *, stream: None, "b": lambda *, stream: None}
'''


@pytest.fixture(autouse=True)
def _cpu_workers(request, monkeypatch):
    """The stand-in needs no GPU: CPU workers on a GPU machine too, except in the two-GPU test."""
    if request.node.get_closest_marker("multigpu") is None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


@pytest.fixture(scope="module")
def mods(tmp_path_factory):
    """A factory module of this test's own (its source is changed to make the cluster's code stale), on the path
    of this process and of the processes it starts."""
    d = tmp_path_factory.mktemp("mods")
    (d / "warm_factory_i49.py").write_text(FACTORY)
    mp = pytest.MonkeyPatch()
    mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(HERE), str(d), os.environ.get("PYTHONPATH")))))
    mp.syspath_prepend(str(d))
    mp.syspath_prepend(str(HERE))
    yield d
    mp.undo()


@pytest.fixture(scope="module")
def kept(mods, tmp_path_factory):
    """A warm cluster of two CPU workers that imported the stand-in and the factory; stopped at the end."""
    state = tmp_path_factory.mktemp("state") / "private" / "cluster.json"
    mp = pytest.MonkeyPatch()
    mp.setenv("CUDA_VISIBLE_DEVICES", "")  # CPU workers on a GPU machine too (the stand-in needs none)
    try:
        rec, note = warm.start(state=state, workers=2, modules=["_campaign_standin", "warm_factory_i49"])
    finally:
        mp.undo()
    yield {"state": state, "rec": rec, "note": note}
    warm.stop(state)


def _procs(rec):
    return [psutil.Process(rec["pid"])] + [psutil.Process(p) for p, _ in rec["workers"].values()]


def test_start_leaves_a_loopback_cluster_recorded_in_a_private_folder_with_its_code(kept, mods):
    rec, state = kept["rec"], kept["state"]
    assert kept["note"] is None and json.loads(state.read_text()) == rec
    assert stat.S_IMODE(os.stat(state.parent).st_mode) == 0o700
    assert rec["address"].startswith("tcp://127.0.0.1:") and rec["cpu"] and len(rec["workers"]) == 2
    assert rec["version"] == gx.__version__
    assert rec["sources"]["warm_factory_i49"] == hashlib.sha256((mods / "warm_factory_i49.py").read_bytes()).hexdigest()
    procs = _procs(rec)
    assert all(p.is_running() for p in procs)
    listening = [c.laddr for p in procs for c in p.net_connections("inet") if c.status == psutil.CONN_LISTEN]
    assert listening and {a.ip for a in listening} == {"127.0.0.1"}, listening
    from distributed import Client

    with Client(rec["address"]) as c:  # the workers imported the modules as they started
        seen = c.run(lambda: ("warm_factory_i49" in sys.modules, "_campaign_standin" in sys.modules))
    assert set(seen) == set(rec["workers"]) and all(v == (True, True) for v in seen.values())
    live, text = warm.status(state)
    assert live == rec and rec["address"] in text
    with pytest.raises(RuntimeError, match="already runs at .*gcexplore cluster stop"):
        warm.start(state=state, workers=1)


def test_later_campaigns_reuse_its_workers_through_the_cli_and_the_environment(kept, tmp_path, monkeypatch, capsys):
    rec = kept["rec"]
    workers = {p for p, _ in rec["workers"].values()}
    c = gx.campaign(["warm_factory_i49:pair"], [[8, 16], [24]], experiment=EXP, options={"layout_s": 0.01},
                    folder=tmp_path / "a", scheduler=rec["address"], cut="layouts", progress=False)
    assert all(r["status"] == "done" for r in c.reports.values()) and len(c.reports) == 3  # cut: a layout each
    assert {r["pid"] for r in c.reports.values()} <= workers
    # the factory was imported at the workers' start: the campaign's warm-up found it there
    assert all(w.get("import warm_factory_i49_s", 1.0) < 0.5 for w in c.warm_ups.values()), c.warm_ups
    spec = tmp_path / "spec.toml"
    spec.write_text(f'experiment = "{EXP}"\nworkloads = ["warm_factory_i49:pair"]\nsplits = [[8], [16]]\n'
                    'options = {layout_s = 0.01}\n')
    monkeypatch.setenv(warm.SCHEDULER_ENV, rec["address"])
    monkeypatch.setenv(warm.STATE_ENV, str(kept["state"]))
    assert main(["campaign", str(spec), "--out", str(tmp_path / "b"), "--quiet"]) == 0
    assert "2 of 2 tasks done" in capsys.readouterr().out
    df = gx.load_campaign(tmp_path / "b")
    assert set(df["worker_pid"]) <= workers  # the stand-in's rows name the process that measured them
    assert all(p.is_running() for p in _procs(rec))  # the campaigns left the cluster running


def test_a_cluster_of_other_code_is_refused_with_what_differs_and_the_fix(kept, mods, tmp_path):
    rec, src = kept["rec"], mods / "warm_factory_i49.py"
    run = lambda name: gx.campaign(["warm_factory_i49:pair"], [[8]], experiment=EXP,  # noqa: E731
                                   folder=tmp_path / name, scheduler=rec["address"], progress=False)
    src.write_text(FACTORY + "# changed after the cluster imported it\n")
    try:
        with pytest.raises(RuntimeError, match=r"warm_factory_i49's source changed.*gcexplore cluster stop"):
            run("a")
    finally:
        src.write_text(FACTORY)
    from distributed import Client

    with Client(rec["address"]) as c:  # the code the server published on the scheduler, as an older one's
        meta = c.get_metadata(warm.META_KEY)
        c.set_metadata(warm.META_KEY, {**meta, "version": "0.0.0"})
        try:
            with pytest.raises(RuntimeError, match=r"gcexplore 0\.0\.0 on the cluster, .* here.*gcexplore cluster stop"):
                run("b")
        finally:
            c.set_metadata(warm.META_KEY, meta)
    assert meta == {"version": rec["version"], "sources": rec["sources"]}
    assert not (tmp_path / "a" / "shards").exists() and not (tmp_path / "b" / "shards").exists()
    assert run("c").reports  # the same code again: used


def test_stop_ends_every_process_and_removes_the_record(kept, capsys):
    procs = _procs(kept["rec"])
    assert main(["cluster", "stop", "--state", str(kept["state"])]) == 0
    assert "stopped the warm cluster" in capsys.readouterr().out
    _, alive = psutil.wait_procs(procs, timeout=60)  # a guard: the server waits for its workers to close
    assert not alive and not kept["state"].exists()
    assert main(["cluster", "status", "--state", str(kept["state"])]) == 1
    assert "no warm cluster recorded" in capsys.readouterr().out


def test_a_crashed_commands_cluster_is_reported_and_cleaned_up_not_reused(mods, tmp_path, monkeypatch):
    state = tmp_path / "s" / "cluster.json"
    monkeypatch.setenv(warm.STATE_ENV, str(state))  # where a campaign looks for the record of its address
    rec, _ = warm.start(state=state, workers=1, modules=["_campaign_standin"])
    procs = _procs(rec)
    os.kill(rec["pid"], signal.SIGKILL)  # the server dies as a crashed command's would: its record stays
    procs[0].wait(60)
    assert state.exists()
    with pytest.raises(RuntimeError, match=r"is not running: its server .* is gone.*cleaned up"):
        gx.campaign(["_campaign_standin:pair"], [[8]], experiment=EXP, folder=tmp_path / "c",
                    scheduler=rec["address"], progress=False)
    _, alive = psutil.wait_procs(procs, timeout=60)
    assert not alive and not state.exists()  # the worker it left killed, the record removed
    rec, note = warm.start(state=state, workers=1)  # found dead at the next start: said, and a new one runs
    try:
        assert note is None and warm.status(state)[0] == rec
        p = psutil.Process(rec["pid"])
        p.kill()
        p.wait(60)
        live, text = warm.status(state)
        assert live is None and "is not running" in text and not state.exists()
    finally:
        warm.stop(state)


def _certs(d: Path) -> dict:
    """A certificate authority and one certificate of 127.0.0.1 signed by it (openssl), for a TLS cluster."""
    import shutil
    import subprocess

    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed (it makes the test's certificates)")
    run = lambda *a: subprocess.run(["openssl", *a], cwd=d, check=True, capture_output=True)  # noqa: E731
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
        "-subj", "/CN=gcexplore-test-ca")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem", "-out", "req.csr", "-subj", "/CN=127.0.0.1")
    (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", "req.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out",
        "cert.pem", "-days", "1", "-extfile", "san.cnf")
    return {"ca": str(d / "ca.pem"), "cert": str(d / "cert.pem"), "key": str(d / "key.pem")}


def test_a_tls_cluster_when_asked_and_campaigns_reach_it_with_its_certificates(mods, tmp_path, monkeypatch):
    state = tmp_path / "s" / "cluster.json"
    monkeypatch.setenv(warm.STATE_ENV, str(state))  # the campaign finds the record, and its TLS files, there
    rec, _ = warm.start(state=state, workers=1, modules=["_campaign_standin"], tls=_certs(tmp_path))
    try:
        assert rec["address"].startswith("tls://127.0.0.1:") and rec["tls"]["ca"].endswith("ca.pem")
        c = gx.campaign(["_campaign_standin:pair"], [[8]], experiment=EXP, options={"layout_s": 0.01},
                        folder=tmp_path / "c", scheduler=rec["address"], progress=False)
        assert [r["status"] for r in c.reports.values()] == ["done"]
    finally:
        warm.stop(state)


def test_a_network_host_needs_tls_and_module_names_are_checked(tmp_path):
    with pytest.raises(ValueError, match="could be reached from the network.*--tls-ca"):
        warm.start(state=tmp_path / "s.json", host="0.0.0.0")
    with pytest.raises(ValueError, match="imports modules by name"):
        warm.start(state=tmp_path / "s.json", modules=["os; rm -rf /"])
    assert not (tmp_path / "s.json").exists()


def test_a_damaged_record_says_so_and_the_fix(tmp_path):
    state = tmp_path / "cluster.json"
    state.write_text("{not json")
    with pytest.raises(ValueError, match="is not JSON.*gcexplore cluster stop"):
        warm.status(state)


def test_state_folder_is_made_private(tmp_path, monkeypatch):
    monkeypatch.delenv(warm.STATE_ENV, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert warm.default_state() == tmp_path / "gcexplore" / "cluster.json"
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    os.chmod(loose, 0o755)
    warm.private_folder(loose)
    assert stat.S_IMODE(os.stat(loose).st_mode) == 0o700


@pytest.mark.gpu
@pytest.mark.multigpu
def test_warm_cluster_on_two_gpus_runs_later_campaigns_on_both_cards(tmp_path, monkeypatch):
    """On two GPUs: `cluster start` leaves one worker per GPU, its GPU started; campaigns on it use both cards."""
    root = Path(__file__).resolve().parents[1]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(root), os.environ.get("PYTHONPATH")))))
    state = tmp_path / "s" / "cluster.json"
    rec, _ = warm.start(state=state, devices=["0", "1"])
    try:
        assert not rec["cpu"] and len(rec["workers"]) == 2
        for name in ("a", "b"):
            c = gx.campaign([["compute", "memory"]], [[16, 32], [48, 64], [24, 40], [56, 72]],
                            options={"repeats": 20, "warmup": 1}, folder=tmp_path / name, scheduler=rec["address"],
                            progress=False)
            df = c.result(progress=False)
            assert df.attrs["done"] == 4 and df["device_uuid"].nunique() == 2
            assert {r["pid"] for r in c.reports.values()} <= {p for p, _ in rec["workers"].values()}
            assert all("error" not in (w.get("preload") or {}) for w in c.warm_ups.values())
    finally:
        warm.stop(state)


def _bench(monkeypatch):
    """bench/campaign.py's runs and report (gcexplore.campaigns.scaling), on the stand-in pair and experiment."""
    from gcexplore.campaigns import scaling as bench

    monkeypatch.setattr(bench, "PAIRS", ["_campaign_standin:pair"])
    monkeypatch.setattr(bench, "EXPERIMENT", EXP)
    return bench


def test_bench_first_run_is_a_fresh_process_timed_from_its_birth_and_the_table_says_what_was_not_run(
        mods, tmp_path, monkeypatch):
    bench = _bench(monkeypatch)
    splits = [[8], [16, 24]]
    first = bench._fresh(["0"], tmp_path / "campaign-1gpu", splits, 2)
    assert first["mode"] == "first" and first["n"] == 1 and len(first["reports"]) == 2
    born = first["timings"]["process_to_call_s"]
    assert born > 0 and first["end_to_end_s"] > born + first["timings"]["cluster_wait_s"]
    assert os.getpid() not in {r["pid"] for r in first["reports"].values()}
    cut = bench._fresh(["0"], tmp_path / "campaign-1gpu-cut", splits, 2, cut="layouts")
    assert cut["mode"] == "first, cut a layout each" and len(cut["reports"]) == 3  # [16, 24]: a layout each
    missing = ["8 GPUs: not run, 1 visible here (run this on a machine of 8 GPUs of one host)"]
    assert bench._report([first], None, tmp_path, splits, 2, missing) == 0
    text = (tmp_path / "campaign_bench.md").read_text()
    assert "| GPUs | first: end to end s, speedup (goal) |" in text and missing[0] in text
    assert f"| 1 | {first['end_to_end_s']:.2f}, 1.00x |" in text


def test_bench_says_each_gpu_count_it_cannot_run(tmp_path, monkeypatch, capsys):
    bench = _bench(monkeypatch)
    from gcexplore.campaigns import grid

    monkeypatch.setattr(grid, "visible_gpus", list)  # no GPU here
    monkeypatch.setattr(sys, "argv", ["campaign.py", "--out", str(tmp_path), "--gpus", "1,2,4,8"])
    assert bench.main() == 1
    out = capsys.readouterr().out
    for n in (1, 2, 4, 8):
        assert f"{n} GPU{'s' * (n > 1)}: not run, 0 visible here (run this on a machine of {n} GPUs of one host)" in out
