"""The campaign trust boundary (issue 28): who can reach the cluster, what a spec may run,
what the folder's writers and readers touch, which shards count, bounded inputs and the
CI gate. No GPU: tasks run the stand-in experiment (tests/_campaign_standin.py) in-process."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import gcexplore as gx
from _campaign_standin import pair, standin
from gcexplore.campaigns._task import Experiment, run_task
from gcexplore.campaigns.grid import plan_tasks
from gcexplore.experiments.runner import Checkpoint
from gcexplore.campaigns.store import CampaignFolder, NotRegular, check_key

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), str(HERE), os.environ.get("PYTHONPATH"))))}
EXP = "_campaign_standin:standin"


def _cli(*args, cwd=ROOT, timeout=120):
    return subprocess.run([sys.executable, "-m", "gcexplore.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=ENV, timeout=timeout)


def _folder(tmp_path, n=3, campaign_id="camp-1", name="c"):
    """A finished campaign of ``n`` stand-in tasks, run in this process (no Dask)."""
    tasks, _ = plan_tasks(EXP, ["_campaign_standin:pair"], [[8 * (i + 1)] for i in range(n)], [{"layout_s": 0}])
    folder = tmp_path / name
    store = CampaignFolder(folder)
    store.write_spec(campaign_id, tasks, gx.__version__)
    for t in tasks.values():
        assert run_task(t, str(folder), campaign_id, Experiment(standin), pair, reuse=False)["status"] == "done"
    return folder, sorted(tasks)


# ------------------------------------------------------------------ the cluster


def _other_address() -> str:
    import psutil

    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return a.address
    pytest.skip("this machine has no non-loopback IPv4 address to connect from")


def _listening(proc_root):
    import psutil

    out = []
    for p in [proc_root, *proc_root.children(recursive=True)]:
        out += [c.laddr for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    return out


def test_local_cluster_listens_on_loopback_only_and_refuses_the_network():
    pytest.importorskip("distributed")
    import psutil
    from distributed import Client

    from gcexplore.campaigns.grid import local_cluster

    other = _other_address()
    cluster = local_cluster(["0", "1"])
    client = Client(cluster)
    try:
        addrs = _listening(psutil.Process())
        ports = {a.port for a in addrs}
        assert len(ports) >= 5, addrs  # scheduler, its dashboard, two nannies, two workers
        assert all(a.ip == "127.0.0.1" for a in addrs), addrs
        for port in ports:  # from the machine's ordinary address: nothing answers
            with socket.socket() as s, pytest.raises(ConnectionRefusedError):
                s.settimeout(5)
                s.connect((other, port))
        assert all(w.startswith("tcp://127.0.0.1:") for w in client.scheduler_info()["workers"])
    finally:
        client.close()
        cluster.close()


@pytest.mark.parametrize("dashboard", [":0", "0", "127.0.0.1:0", "localhost:0"])
def test_every_listener_stays_on_loopback_whatever_dashboard_address_says(dashboard):
    """Dask reads ':0' as every interface; here an address without a host is the cluster's host."""
    pytest.importorskip("distributed")
    import psutil

    from gcexplore.campaigns.grid import local_cluster

    cluster = local_cluster(["0"], dashboard_address=dashboard)
    try:
        addrs = _listening(psutil.Process())
        assert len({a.port for a in addrs}) >= 3, addrs  # scheduler, its dashboard, a nanny, a worker
        assert all(a.ip == "127.0.0.1" for a in addrs), addrs
    finally:
        cluster.close()


@pytest.mark.parametrize("kw", [{"dashboard_address": "0.0.0.0:0"}, {"dashboard_address": "[::]:8787"},
                                {"dashboard_address": "10.1.2.3:0"}, {"host": "::"}, {"host": "0.0.0.0"},
                                {"interface": "eth0"}, {"protocol": "tcp"}, {"listen_address": "tcp://0.0.0.0:0"}])
def test_a_listener_the_network_reaches_is_refused_without_tls(kw):
    pytest.importorskip("distributed")
    from gcexplore.campaigns.grid import local_cluster

    with pytest.raises(ValueError, match="network|host= and security="):
        local_cluster(["0"], **kw)


def test_a_network_reachable_cluster_needs_tls():
    pytest.importorskip("distributed")
    from gcexplore.campaigns.grid import local_cluster

    with pytest.raises(ValueError, match="reached from the network.*Security"):
        local_cluster(["0"], host="0.0.0.0")


def _certs(tmp_path, ip, name="a"):
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed (needed to make the test's certificates)")
    key, cert = tmp_path / f"{name}-key.pem", tmp_path / f"{name}-cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=gcx",
                    "-addext", f"subjectAltName=IP:{ip},IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return str(key), str(cert)


def test_tls_cluster_on_the_network_serves_certified_clients_only(tmp_path):
    pytest.importorskip("distributed")
    from distributed import Client, Security

    from gcexplore.campaigns.grid import local_cluster

    other = _other_address()
    key, cert = _certs(tmp_path, other)
    sec = Security(tls_ca_file=cert, tls_scheduler_cert=cert, tls_scheduler_key=key, tls_worker_cert=cert,
                   tls_worker_key=key, tls_client_cert=cert, tls_client_key=key, require_encryption=True)
    cluster = local_cluster(["0"], host=other, security=sec)
    try:
        addr = cluster.scheduler_address
        assert addr.startswith(f"tls://{other}:")
        with Client(addr, security=sec, timeout=20) as good:
            assert good.submit(lambda: 41 + 1).result(timeout=20) == 42
        with pytest.raises((OSError, TimeoutError)):  # plain TCP to the TLS listener
            Client(addr.replace("tls://", "tcp://"), timeout=3)
        key2, cert2 = _certs(tmp_path, other, "stranger")  # TLS, but a certificate of another authority
        stranger = Security(tls_ca_file=cert, tls_client_cert=cert2, tls_client_key=key2, require_encryption=True)
        with pytest.raises((OSError, TimeoutError)):
            Client(addr, security=stranger, timeout=3)
    finally:
        cluster.close()


# ------------------------------------------------------------------ a spec is code

PLANT = """
import pathlib
pathlib.Path({marker!r}).write_text("imported")
def factory(device=0, size=1):
    return {{"a": lambda *, stream: None, "b": lambda *, stream: None}}
def experiment(wls, *, splits, device, checkpoint, **options):
    raise RuntimeError("never run here")
"""


def test_spec_modules_are_imported_only_after_the_whole_spec_is_checked(tmp_path, monkeypatch):
    marker = tmp_path / "imported.txt"
    (tmp_path / "plant_mod.py").write_text(PLANT.format(marker=str(marker)))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "plant_mod", raising=False)
    with pytest.raises(ValueError, match="unknown built-in workload 'nope'"):
        plan_tasks("plant_mod:experiment", [{"factory": "plant_mod:factory"}, ["compute", "nope"]])
    with pytest.raises(TypeError, match="split set"):
        plan_tasks("sweep", [{"factory": "plant_mod:factory"}], [object()])
    assert not marker.exists(), "a module named by the spec ran before the spec was checked"
    plan_tasks("plant_mod:experiment", [{"factory": "plant_mod:factory", "kwargs": {"size": 2}}])
    assert marker.exists()  # the same grid, valid, imports it


def test_factory_kwargs_are_checked_against_its_signature(tmp_path):
    victim = tmp_path / "notes.txt"
    victim.write_text("the user's notes")
    with pytest.raises(TypeError, match="does not name the parameter.*device"):
        plan_tasks(EXP, [{"factory": "logging:basicConfig", "kwargs": {"filename": str(victim), "filemode": "w"}}])
    assert victim.read_text() == "the user's notes"
    with pytest.raises(TypeError, match="does not name the parameter.*sise"):
        plan_tasks(EXP, [{"factory": "_campaign_standin:pair", "kwargs": {"sise": 3}}])
    with pytest.raises(ValueError, match="module:function"):
        plan_tasks(EXP, [{"factory": "os:system; rm"}])


#: Modules gcexplore imports after the interpreter started (a planted copy of one that runpy itself
#: needs, functools say, breaks every ``python -m`` before any package runs: not ours to guard).
PLANTED_STDLIB = ("json", "argparse", "tomllib", "textwrap", "dataclasses", "inspect", "shutil", "tempfile",
                  "numpy", "pandas")


@pytest.mark.parametrize("entry", [["-m", "gcexplore"], ["-m", "gcexplore.cli"], ["-mgcexplore"],
                                   ["-W", "ignore", "-m", "gcexplore"]])
def test_python_m_does_not_import_from_the_spec_folder_and_help_says_spec_is_code(tmp_path, entry):
    marker = tmp_path / "imported.txt"
    (tmp_path / "plant_mod.py").write_text(PLANT.format(marker=str(marker)))
    for name in PLANTED_STDLIB:  # each writes its own marker at import, with nothing imported
        (tmp_path / f"{name}.py").write_text(f"open({str(tmp_path / ('planted-' + name))!r}, 'w').close()\n")
    (tmp_path / "spec.toml").write_text(f'experiment = "{EXP}"\nworkloads = [{{ factory = "plant_mod:factory" }}]\n')
    env = {**ENV, "PYTHONPATH": os.pathsep.join((str(ROOT), str(HERE)))}
    r = subprocess.run([sys.executable, *entry, "campaign", "spec.toml", "--out", "c"], cwd=tmp_path,
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode != 0 and "plant_mod" in r.stderr, r.stderr
    assert not marker.exists(), f"python {' '.join(entry)} imported a module planted beside the spec"
    ran = sorted(p.name for p in tmp_path.glob("planted-*"))
    assert not ran, f"python {' '.join(entry)} imported planted standard modules: {ran}"
    h = subprocess.run([sys.executable, *entry, "campaign", "--help"], cwd=ROOT, capture_output=True, text=True,
                       env=ENV, timeout=120)
    text = " ".join(h.stdout.split())
    assert "A spec is code" in text and "run with your rights, like a script" in text and "127.0.0.1" in text


def test_python_m_keeps_the_import_path_of_other_programs():
    """Only gcexplore's own ``-m`` loses the working folder: ``python -c`` importing gcexplore keeps it."""
    r = subprocess.run([sys.executable, "-c", "import sys, gcexplore; print(repr(sys.path[0]))"], cwd=ROOT,
                       capture_output=True, text=True, env=ENV, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "''", r.stderr


# ------------------------------------------------------------------ writers and paths


def test_writers_replace_planted_symlinks_never_write_through_them(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    folder = tmp_path / "c"
    (folder / "failed").mkdir(parents=True)
    store = CampaignFolder(folder)
    # every name a writer used to use (pid-based temporaries) and the targets themselves
    for name in (f".campaign.json.{os.getpid()}.tmp", "campaign.json", "failed/k1.json",
                 f"failed/.k1.json.{os.getpid()}.tmp"):
        (folder / name).symlink_to(victim)
    tasks, _ = plan_tasks(EXP, ["_campaign_standin:pair"], [[8]])
    with pytest.raises(ValueError, match="not a regular file|symlink"):
        store.read_spec()  # a spec that is a symlink is not read as this folder's
    os.unlink(folder / "campaign.json")
    store.write_spec("camp", tasks, "0")
    store.write_failure("k1", {"error": "x"})
    assert victim.read_text() == "precious"
    assert not (folder / "failed" / "k1.json").is_symlink() and json.loads((folder / "failed/k1.json").read_text())

    ck = folder / "checkpoints" / "k1.jsonl"
    ck.parent.mkdir()
    ck.symlink_to(victim)
    with pytest.raises(ValueError, match="symlink"):
        Checkpoint(ck, {"kind": "x"}).load()
    with pytest.raises(ValueError, match="symlink"):
        Checkpoint(ck, {"kind": "x"}).append("8", [{"a": 1}])
    os.unlink(ck)
    Path(f"{ck}.tmp{os.getpid()}").symlink_to(victim)  # the old fixed temporary of a new checkpoint
    c = Checkpoint(ck, {"kind": "x"})
    assert c.load() == {}
    c.append("8", [{"a": 1}])
    assert victim.read_text() == "precious" and Checkpoint(ck, {"kind": "x"}).load() == {"8": [{"a": 1}]}


def test_a_symlinked_subfolder_is_neither_written_nor_moved_from(tmp_path):
    folder, keys = _folder(tmp_path, 1)
    user = tmp_path / "user"
    user.mkdir()
    (user / f"{keys[0]}.parquet").write_bytes(b"the user's own unreadable parquet")
    shutil.rmtree(folder / "shards")
    (folder / "shards").symlink_to(user)
    st = gx.campaign_status(folder, repair=True)
    assert st["status"].tolist() == ["started"]  # its checkpoint holds its layouts; no shard counted
    assert any("shards/ is a symlink" in n for n in st.attrs["torn"])
    assert (user / f"{keys[0]}.parquet").read_bytes() == b"the user's own unreadable parquet"
    with pytest.raises(NotRegular, match="symlink"):
        CampaignFolder(folder).write_shard(keys[0], gx.load_campaign(folder))


@pytest.mark.parametrize("key", ["../../x/secret", "/etc/passwd", ".hidden", "a/b", "", "x\x00y"])
def test_task_keys_that_leave_the_folder_are_refused(tmp_path, key):
    with pytest.raises(ValueError, match="not a plain file name"):
        check_key(key)
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "campaign.json").write_text(json.dumps({"gcexplore_campaign": 1, "campaign_id": "x",
                                                      "tasks": {key: {"key": key}}}))
    with pytest.raises(ValueError, match="not a plain file name"):
        gx.campaign_status(folder)


# ------------------------------------------------------------------ readers


def _in_thread(fn, timeout=20.0):
    box = {}

    def run():
        try:
            box["out"] = fn()
        except BaseException as e:
            box["error"] = e

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(timeout)
    assert not th.is_alive(), "blocked (a named pipe or an endless file was read)"
    if "error" in box:
        raise box["error"]
    return box["out"]


def test_status_skips_pipes_devices_and_symlinks_and_reads_bounded(tmp_path):
    folder, keys = _folder(tmp_path, 3)
    (folder / "failed").mkdir(exist_ok=True)
    os.mkfifo(folder / "failed" / f"{keys[0]}.json")
    os.unlink(folder / "shards" / f"{keys[1]}.parquet")
    os.mkfifo(folder / "shards" / f"{keys[1]}.parquet")
    (folder / "failed" / f"{keys[2]}.json").symlink_to("/dev/zero")
    os.unlink(folder / "checkpoints" / f"{keys[1]}.jsonl")
    os.mkfifo(folder / "checkpoints" / f"{keys[1]}.jsonl")
    before = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    st = _in_thread(lambda: gx.campaign_status(folder))
    notes = " | ".join(st.attrs["torn"])
    assert f"shards/{keys[1]}.parquet: a named pipe" in notes and f"failed/{keys[0]}.json: a named pipe" in notes
    assert f"failed/{keys[2]}.json: a symlink" in notes
    assert st.set_index("task_key")["status"].to_dict() == {keys[0]: "done", keys[1]: "pending", keys[2]: "done"}
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) == before, "status changed the folder"


@pytest.fixture
def readonly_mount(tmp_path):
    """A tmpfs mounted on a folder and remounted read-only (root with CAP_SYS_ADMIN only)."""
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)],
                                           capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN) for a folder that really refuses writes")

    def seal():
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        with pytest.raises(OSError):
            (mnt / "probe").write_text("x")  # the filesystem itself refuses, even to root

    yield mnt, seal
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_status_and_load_work_on_a_read_only_folder_with_a_damaged_shard(tmp_path, readonly_mount):
    mnt, seal = readonly_mount
    src, keys = _folder(tmp_path, 3)
    shutil.copytree(src, mnt / "c", symlinks=True)
    folder = mnt / "c"
    shard = folder / "shards" / f"{keys[0]}.parquet"
    shard.write_bytes(shard.read_bytes()[:100])
    seal()
    r = _cli("campaign", "status", str(folder))
    assert r.returncode == 0, r.stderr
    assert "2 of 3 tasks done" in r.stdout and keys[0] in r.stdout and "left in place" in r.stdout
    df = gx.load_campaign(folder)
    assert set(df["task_key"]) == set(keys[1:]) and df.attrs["done"] == 2
    r = _cli("campaign", "repair", str(folder))
    assert r.returncode == 0 and "cannot move it" in r.stdout, r.stdout + r.stderr


CRASH = """
import os, sys
sys.path.insert(0, {tests!r})
from _campaign_standin import pair, standin
from gcexplore.campaigns._task import Experiment, run_task
import gcexplore.results.io as io
real = os.replace
def crash(src, dst, *a, **k):
    if str(dst).endswith(".parquet"):
        os._exit(9)  # the process dies between the shard's write and its rename
    return real(src, dst, *a, **k)
io.os.replace = crash
import json
spec = json.load(open({spec!r}))
task = spec["tasks"][{key!r}]
run_task(task, {folder!r}, spec["campaign_id"], Experiment(standin), pair, reuse=False)
"""


def test_a_crash_between_write_and_rename_leaves_the_folder_readable_and_resumable(tmp_path):
    folder, keys = _folder(tmp_path, 2)
    store = CampaignFolder(folder)
    victim = keys[0]
    os.unlink(store.shard_path(victim))
    os.unlink(store.checkpoint_path(victim))
    script = tmp_path / "crash.py"
    script.write_text(CRASH.format(tests=str(HERE), spec=str(store.spec_path), key=victim, folder=str(folder)))
    r = subprocess.run([sys.executable, str(script)], env=ENV, capture_output=True, text=True, timeout=120)
    assert r.returncode == 9, r.stderr
    left = [p.name for p in (folder / "shards").iterdir()]
    assert any(n.startswith(f".{victim}.parquet.") for n in left), left  # the temporary the crash left
    st = gx.campaign_status(folder)
    assert st.set_index("task_key").loc[victim, "status"] == "started"  # checkpointed, not done
    spec = store.read_spec()
    assert run_task(spec["tasks"][victim], str(folder), spec["campaign_id"], Experiment(standin), pair,
                    reuse=False)["status"] == "done"
    df = gx.load_campaign(folder)
    assert df.groupby("task_key").size().to_dict() == {k: 2 * 2 for k in keys}  # each layout once


# ------------------------------------------------------------------ exactly once


def _shard(folder, key):
    return folder / "shards" / f"{key}.parquet"


def test_a_shard_swapped_between_tasks_is_set_aside_with_the_reason(tmp_path):
    folder, (a, b, c) = _folder(tmp_path, 3)
    shutil.copy(_shard(folder, a), _shard(folder, b))
    df = gx.load_campaign(folder)
    assert df.groupby("task_key").size().to_dict() == {a: 4, c: 4} and df.attrs["done"] == 2
    assert any(b in n and f"task {a!r}'s" in n for n in df.attrs["torn"])


def test_shards_of_another_campaign_other_rows_other_kinds_and_symlinks_do_not_count(tmp_path):
    folder, (a, b, c) = _folder(tmp_path, 3)
    other, _ = _folder(tmp_path, 3, campaign_id="camp-2", name="other")
    shutil.copy(_shard(other, a), _shard(folder, a))  # same grid, same key, another campaign
    rows = gx.load(_shard(folder, b))
    rows["task_key"] = c  # rows naming another task
    gx.save(rows, _shard(folder, b))
    os.unlink(_shard(folder, c))
    elsewhere = tmp_path / "result.parquet"
    shutil.copy(_shard(other, c), elsewhere)
    _shard(folder, c).symlink_to(elsewhere)
    df = gx.load_campaign(folder)
    assert len(df) == 0 and df.attrs["done"] == 0
    notes = " | ".join(df.attrs["torn"])
    assert "campaign 'camp-2'" in notes and "another task_key" in notes and f"{c}.parquet: a symlink" in notes
    gx.save(gx.load_recorded("sweep"), _shard(folder, a))  # another result, no campaign record
    assert "no campaign record" in " | ".join(gx.load_campaign(folder).attrs["torn"])


def test_two_campaigns_on_one_folder_are_refused_while_one_holds_it(tmp_path):
    folder = tmp_path / "c"
    held = CampaignFolder(folder).lock()
    try:
        with pytest.raises(RuntimeError, match=f"in use by pid {os.getpid()}"):
            gx.campaign([["compute", "memory"]], [[8]], folder=folder, scheduler="tcp://127.0.0.1:9")
        assert not (folder / "campaign.json").exists()
    finally:
        held.release()
    CampaignFolder(folder).lock().release()  # free again once released


# ------------------------------------------------------------------ bounded inputs

BOMB = """a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
workloads: [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def test_spec_size_and_depth_are_checked_before_parsing(tmp_path):
    pytest.importorskip("yaml")
    from gcexplore.campaigns.cli import read_spec
    from gcexplore.cli.args import Usage

    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    t0 = time.perf_counter()
    with pytest.raises(Usage, match="YAML alias"):
        read_spec(str(bomb))
    assert time.perf_counter() - t0 < 5
    deep = tmp_path / "deep.toml"
    deep.write_text("workloads = " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(Usage, match="nests deeper than 32"):
        read_spec(str(deep))
    deep_yaml = tmp_path / "deep.yaml"
    deep_yaml.write_text("workloads: " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(Usage, match="nests deeper than 32"):
        read_spec(str(deep_yaml))
    big = tmp_path / "big.toml"
    big.write_text('workloads = [["compute"]]\n' + "# padding\n" * 200_000)
    with pytest.raises(Usage, match="larger than"):
        read_spec(str(big))
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    with pytest.raises(Usage, match="named pipe"):
        _in_thread(lambda: read_spec(str(fifo)))
    ok = tmp_path / "ok.toml"
    ok.write_text('workloads = [["compute", "memory"]]\nsplits = [[8, 16]]\noptions = { modes = ["alone"] }\n'
                  'note = """ [[[ not nesting ]]] """\n'.replace("note", "folder"))
    assert read_spec(str(ok))["splits"] == [[8, 16]]


def test_shift_interval_of_20000_repetitions_in_linear_memory_at_the_same_answers():
    from gcexplore.analysis import stats

    rng = np.random.default_rng(7)
    x, y = rng.lognormal(0, 0.3, 1500), rng.lognormal(0.05, 0.3, 1300)
    ties_x, ties_y = rng.integers(0, 40, 1400).astype(float), rng.integers(2, 40, 1200).astype(float)
    for a, b in ((x, y), (ties_x, ties_y)):
        d = np.sort((b[:, None] - a[None, :]).ravel())
        ranks = [1, 7, d.size // 2, d.size // 2 + 1, d.size - 6, d.size]
        assert stats.pairwise_order_stats(b, a, ranks, sorted_max=1000) == [float(d[r - 1]) for r in ranks]
    big_x, big_y = rng.normal(10, 1, 20_000), rng.normal(10.3, 1, 20_000)
    tracemalloc.start()
    try:
        est, lo, hi = stats.shift_ci(big_x, big_y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200e6, f"{peak / 1e6:.0f} MB for 4e8 pairwise differences"  # a sort of them needs 3.2 GB
    assert lo < est < hi and 0.25 < est < 0.35


# ------------------------------------------------------------------ the gate and the terminal


def test_gate_fails_a_noisy_2x_regression_and_refuses_non_finite_thresholds(tmp_path):
    from gcexplore.results.synthetic import sweep

    a, slow, noisy = tmp_path / "a.parquet", tmp_path / "slow.parquet", tmp_path / "noisy.parquet"
    gx.save(sweep(1, reps=20, sigma=0.02), a)
    gx.save(sweep(2, reps=20, sigma=0.3, shift=2.0), slow)
    r = _cli("compare", str(a), str(slow), "--fail-on-regression", "5")
    assert "64 UNCLEAR" in r.stdout and " 0 SLOW" in r.stdout  # every row noisy: no verdict says SLOW
    assert r.returncode == 1 and "regression" in r.stderr and "verdict UNCLEAR" in r.stderr, r.stderr
    gx.save(sweep(3, reps=20, sigma=0.3, shift=1.0), noisy)
    r = _cli("compare", str(a), str(noisy), "--fail-on-regression", "5")
    assert r.returncode == 3 and "cannot rule out a regression beyond 5%" in r.stderr, r.stderr
    for bad in ("nan", "inf", "-1"):
        r = _cli("compare", str(a), str(slow), "--fail-on-regression", bad)
        assert r.returncode == 2 and "finite percentage" in r.stderr, (bad, r.stderr)


@pytest.mark.parametrize("brk", ["\n", "\r", "\r\n", "\u2028", "\x85", "\x0b"])
def test_line_breaks_in_file_data_never_print_a_forged_line(tmp_path, brk):
    """A device name, run id or workload holding a line break prints as an escape inside its own
    line: "- B is 2.0x faster everywhere" never stands as a bullet of its own."""
    from gcexplore.results.synthetic import sweep

    forged = f"{brk}- FORGED B is 2.0x faster everywhere; no regression"
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    gx.save(sweep(1, device_name="H200" + forged, run_id="r1" + forged), a)
    gx.save(sweep(2, device_name="other" + forged, workloads=("compute" + forged, "memory")), b)
    r = _cli("compare", str(a), str(b))
    lines = (r.stdout + r.stderr).splitlines()  # splitlines breaks at every separator a terminal might
    assert any("FORGED" in line for line in lines), r.stdout[-2000:]  # the names are shown...
    assert not [line for line in lines if line.lstrip().startswith("- FORGED")], r.stdout[-2000:]  # ...escaped
    r = _cli("compare", str(a), "recorded-name-that-is-not" + forged)  # an error message is one line too
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("form", ["brackets", "inline tables", "dotted keys", "table header", "array of tables"])
def test_a_toml_spec_nested_3000_deep_is_refused_in_every_form(tmp_path, form):
    from gcexplore.campaigns.cli import read_spec
    from gcexplore.cli.args import Usage

    keys = ".".join(["a"] * 3000)
    text = 'workloads = [["compute", "memory"]]\n' + {
        "brackets": "splits = " + "[" * 3000 + "]" * 3000,
        "inline tables": "options = " + "{ a = " * 3000 + "1" + " }" * 3000,
        "dotted keys": f"options.{keys} = 1",
        "table header": f"[options.{keys}]\nx = 1",
        "array of tables": f"[[options.{keys}]]\nx = 1"}[form] + "\n"
    spec = tmp_path / "deep.toml"
    spec.write_text(text)
    t0 = time.perf_counter()
    with pytest.raises(Usage, match="nests deeper than 32"):
        read_spec(str(spec))
    assert time.perf_counter() - t0 < 10
    r = _cli("campaign", str(spec), "--out", str(tmp_path / "c"))  # the command: one line, no traceback
    assert r.returncode == 2 and "nests deeper than 32" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_campaign_id_with_line_breaks_prints_no_forged_status_line(tmp_path):
    folder, keys = _folder(tmp_path, 2, campaign_id="camp\ncampaign X in /tmp: 9 of 9 tasks done\r\u2028- ok")
    CampaignFolder(folder).write_failure(keys[0], {"error": "boom\n  failed nothing: all good"})
    os.unlink(_shard(folder, keys[0]))
    r = _cli("campaign", "status", str(folder))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("campaign camp\\ncampaign X") and "9 of 9 tasks done" not in " ".join(lines[1:])
    assert not [line for line in lines if line.startswith(("campaign X", "- ok", "  failed nothing"))], r.stdout


def test_control_characters_from_files_are_escaped_in_terminal_output(tmp_path):
    from gcexplore.results.synthetic import sweep

    evil = "run\x1b]0;owned\x07\x1b[2J"
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    gx.save(sweep(1, run_id=evil, workloads=("comp\x1b[31mute", "memory")), a)
    gx.save(sweep(2, workloads=("comp\x1b[31mute", "memory")), b)
    r = _cli("compare", str(a), str(b))
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout + r.stderr and "\x07" not in r.stdout
    assert "\\x1b" in r.stdout
    folder, keys = _folder(tmp_path, 1)
    CampaignFolder(folder).write_failure(keys[0], {"error": "boom \x1b[2J\x9b1m cleared"})
    os.unlink(_shard(folder, keys[0]))
    r = _cli("campaign", "status", str(folder))
    assert "\x1b" not in r.stdout and "\x9b" not in r.stdout and "boom \\x1b[2J\\x9b1m cleared" in r.stdout, r.stdout


# ------------------------------------------------------------------ every reader, one size budget (issue 46)


def test_every_reader_of_user_files_refuses_huge_or_bombed_input_quickly(tmp_path):
    """The same hostile inputs at every entry point: campaign status over a 30 GiB sparse checkpoint,
    compare and load over a parquet bomb and a 6 GiB sidecar. Each answers in seconds, naming the file."""
    from test_files import _parquet_bomb

    folder, keys = _folder(tmp_path, 2)
    os.unlink(_shard(folder, keys[0]))
    ck = folder / "checkpoints" / f"{keys[0]}.jsonl"
    ck.parent.mkdir(exist_ok=True)
    ck.write_text('{"gcexplore_checkpoint": 1}\n')
    with open(ck, "r+b") as f:
        f.truncate(30 << 30)
    t0 = time.perf_counter()
    r = _cli("campaign", "status", str(folder))
    assert r.returncode == 0 and "30.0 GiB, over the" in r.stdout, r.stdout + r.stderr
    assert time.perf_counter() - t0 < 60

    bomb = _parquet_bomb(tmp_path / "bomb.parquet")
    from gcexplore.results.synthetic import sweep

    good = tmp_path / "good.parquet"
    gx.save(sweep(1), good)
    side = tmp_path / "big.csv"
    gx.save(sweep(2), side)
    with open(side.with_suffix(".json"), "r+b") as f:
        f.truncate(6 << 30)
    for bad, words in ((bomb, "MAX_LOAD_CELLS"), (side, "MAX_METADATA_BYTES")):
        t0 = time.perf_counter()
        r = _cli("compare", str(good), str(bad))
        assert r.returncode in (1, 2) and words in r.stderr and "MemoryError" not in r.stderr, r.stderr
        assert len(r.stderr.splitlines()) == 1 and time.perf_counter() - t0 < 60


def test_a_failure_record_that_cannot_be_removed_does_not_fail_a_task_that_succeeded(tmp_path, monkeypatch):
    """A read-only failed/ (EROFS or EACCES on unlink): the shard is written and the task counts as done."""
    import errno

    folder, keys = _folder(tmp_path, 1)
    store = CampaignFolder(folder)
    store.write_failure(keys[0], {"error": "an earlier attempt"})
    rows = gx.load(_shard(folder, keys[0]))
    real_unlink = os.unlink

    def read_only(path, *a, **k):
        if "failed" in str(path):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_unlink(path, *a, **k)

    monkeypatch.setattr(os, "unlink", read_only)
    store.write_shard(keys[0], rows)
    monkeypatch.setattr(os, "unlink", real_unlink)
    st = gx.campaign_status(folder)
    assert st["status"].tolist() == ["done"] and (folder / "failed" / f"{keys[0]}.json").exists()


def test_a_task_dask_failed_is_reported_when_its_record_cannot_be_written(tmp_path, monkeypatch):
    """The client records a task Dask could not run; a read-only failed/ (EROFS) makes its report say so
    instead of ending the wait (the other tasks' reports and rows are kept)."""
    import errno

    from gcexplore.campaigns.grid import Campaign

    folder, keys = _folder(tmp_path, 2)
    os.unlink(_shard(folder, keys[0]))
    tasks = json.loads((folder / "campaign.json").read_text())["tasks"]

    class Lost:  # a future whose worker died more often than Dask allows
        status = "error"

        def exception(self):
            return RuntimeError("KilledWorker: worker died 3 times")

    camp = Campaign(folder, {"campaign_id": "camp-1"}, tasks, [], {}, None, None)

    def read_only(self, *a, **k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(CampaignFolder, "write_failure", read_only)
    report = camp._report(keys[0], Lost())
    assert report["status"] == "failed" and "KilledWorker" in report["error"]
    assert "could not be written: Read-only file system" in report["error"]
    monkeypatch.undo()
    report = camp._report(keys[0], Lost())
    assert "could not be written" not in report["error"]
    assert "KilledWorker" in json.loads((folder / "failed" / f"{keys[0]}.json").read_text())["error"]
    st = gx.campaign_status(folder).set_index("task_key")["status"]
    assert st[keys[1]] == "done" and st[keys[0]] == "failed"
