"""A warm campaign cluster a later command reuses: ``gcexplore cluster start|status|stop``.

``start`` runs a detached server process that holds a local cluster (:func:`.cluster.local_cluster`:
one worker per GPU, or CPU workers where there is none, their modules imported as they start) and
records it in a state file (``cluster.json``) in a private folder (0700: the user's runtime dir,
else their cache dir, or ``--state``). The record names the scheduler's address, the processes,
and what the workers' code was: gcexplore's version and a hash of each warmed module's source
(the spec's factory and experiment modules). A campaign given that address checks the record
before it uses the cluster (:func:`check_use`): a cluster whose processes are dead (a crashed
command, a rebooted host) is reported and cleaned up, and one whose code differs from this
process's is refused with what differs and ``gcexplore cluster stop`` as the fix (the server also
publishes its code on the scheduler, so the check needs no state file: :func:`check_code`).

Every listener is on 127.0.0.1 unless a host and TLS files are given (then ``tls://``, one
certificate and key for the scheduler, the workers and the client, of the named authority).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import cast
from pathlib import Path

from .._version import __version__
from .cluster import LOOPBACK

__all__ = [
    "SCHEDULER_ENV",
    "STATE_ENV",
    "check_code",
    "check_use",
    "default_state",
    "fingerprint",
    "read_state",
    "security_for",
    "start",
    "status",
    "stop",
]

STATE_ENV, SCHEDULER_ENV, STATE_NAME = "GCEXPLORE_CLUSTER_STATE", "GCEXPLORE_SCHEDULER", "cluster.json"
FORMAT = 1
META_KEY = "gcexplore-warm-cluster"  # the scheduler's metadata: the workers' code, for any client to check
MAX_STATE_BYTES = 1 << 16
START_WAIT_S = 600.0  # a guard against a server that hangs, not a measure: the server says when it is ready
FIX = "run `gcexplore cluster stop` (then `gcexplore cluster start` again for a warm cluster of this code)"


# ------------------------------------------------------------------ where the record lives


def state_dir() -> Path:
    """``$XDG_RUNTIME_DIR/gcexplore`` where that runtime dir exists (cleared at logout), else
    ``$XDG_CACHE_HOME/gcexplore`` (default ``~/.cache/gcexplore``)."""
    run = os.environ.get("XDG_RUNTIME_DIR")
    if run and os.path.isdir(run):
        return Path(run) / "gcexplore"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gcexplore"


def default_state(path=None) -> Path:
    """The state file: ``path``, else ``GCEXPLORE_CLUSTER_STATE``, else ``cluster.json`` in :func:`state_dir`."""
    return Path(path or os.environ.get(STATE_ENV) or state_dir() / STATE_NAME)


def private_folder(folder: Path) -> Path:
    """``folder`` made (0700) or checked: a folder of this user's that only they can enter."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(folder)
    import stat

    if not stat.S_ISDIR(st.st_mode):
        raise ValueError(
            f"the cluster's state folder {str(folder)!r} is not a folder (a symlink or a file); "
            "pass --state FILE in a folder of your own"
        )
    if st.st_uid != os.getuid():
        raise PermissionError(
            f"the cluster's state folder {str(folder)!r} belongs to another user; "
            "pass --state FILE in a folder of your own"
        )
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(folder, 0o700)  # ours: the record names a scheduler that runs code as us
    return folder


def _write_state(path: Path, state: dict) -> None:
    from ..results.files import atomic_write

    private_folder(path.parent)
    atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(state, indent=1, sort_keys=True)))


def read_state(path=None) -> dict | None:
    """The recorded cluster, or None where there is no record; ValueError for a damaged one."""
    from .store import NotRegular, read_bounded

    p = default_state(path)
    try:
        data = read_bounded(p, MAX_STATE_BYTES)
    except FileNotFoundError:
        return None
    except (NotRegular, ValueError) as e:
        raise ValueError(
            f"the cluster's state file {str(p)!r} cannot be read ({e}); remove it or pass --state"
        ) from None
    try:
        state = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(
            f"the cluster's state file {str(p)!r} is not JSON ({e}); a crashed start may have left it: {FIX}"
        ) from None
    if not isinstance(state, dict) or state.get("format") != FORMAT or "address" not in state:
        raise ValueError(
            f"the cluster's state file {str(p)!r} is not a gcexplore cluster record of format {FORMAT}; {FIX}"
        )
    return state


# ------------------------------------------------------------------ what the workers' code was


def module_source_hash(module: str) -> str | None:
    """sha256 of ``module``'s source file, found without running it (its parent packages are imported);
    None where it has no file (a built-in, or not found)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None)
    if not origin or not os.path.isfile(origin):
        return None
    with open(origin, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def fingerprint(modules: Sequence[str]) -> dict:
    """gcexplore's version and module -> the hash of its source, for the modules a cluster's workers import."""
    return {"version": __version__, "sources": {m: module_source_hash(m) for m in sorted(set(modules))}}


def differences(recorded: dict, now: dict) -> list[str]:
    """What differs between a cluster's recorded code and this process's, one phrase each."""
    out = []
    if recorded.get("version") != now["version"]:
        out.append(f"gcexplore {recorded.get('version')} on the cluster, {now['version']} here")
    rec = recorded.get("sources") or {}
    for m, h in now["sources"].items():
        if m in rec and rec[m] != h:
            out.append(f"{m}'s source changed since the cluster imported it")
    return out


# ------------------------------------------------------------------ are its processes there


def _same_process(pid, started) -> bool:
    """The process ``pid`` runs and is the one recorded (its start time; a pid is reused after a reboot)."""
    import psutil

    try:
        p = psutil.Process(int(pid))
        return abs(p.create_time() - float(started)) < 1.0 and p.status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, TypeError, ValueError):
        return False


def alive(state: dict) -> bool:
    return _same_process(state.get("pid"), state.get("pid_started"))


def _kill_left(state: dict) -> list[int]:
    """The recorded processes still running (workers a crashed server left): killed; their pids."""
    killed = []
    for pid, started in [(state.get("pid"), state.get("pid_started")), *state.get("workers", {}).values()]:
        if _same_process(pid, started):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(pid), signal.SIGKILL)
                killed.append(int(pid))
    return killed


def _crashed(state: dict, path: Path) -> str:
    """A record whose server is gone: what is left killed, the record removed; the sentence that says so."""
    killed = _kill_left(state)
    started = _SERVERS.pop(int(state.get("pid") or 0), None)
    if started is not None:
        started.wait()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(state.get("started_at", 0)))
    return (
        f"the warm cluster recorded in {str(path)!r} ({state['address']}, started {when}) is not running: its "
        f"server (pid {state.get('pid')}) is gone (a crashed or killed command, or a reboot); cleaned up: the "
        "record removed"
        + (f", {len(killed)} process(es) it left killed" if killed else "")
        + "; `gcexplore cluster start` starts a new one"
    )


# ------------------------------------------------------------------ the commands


def start(
    *,
    state=None,
    devices: Sequence[str] | None = None,
    workers: int | None = None,
    modules: Sequence[str] = (),
    host: str = LOOPBACK,
    tls: dict | None = None,
) -> tuple[dict, str | None]:
    """Start a warm cluster in a detached server process; (its record, a note on a dead one cleaned up first).

    Parameters
    ----------
    state : path, optional
        The state file (default :func:`default_state`).
    devices : sequence of str, optional
        GPUs (default every visible one); on a machine without GPUs, ``workers`` CPU workers.
    workers : int, optional
        CPU workers where no GPU is visible (default 2); ignored where devices are given or found.
    modules : sequence of str
        Modules every worker imports as it starts (a spec's factories: :func:`gcexplore.campaigns.grid.spec_modules`).
    host : str, default "127.0.0.1"
        Another interface needs ``tls``.
    tls : dict, optional
        ``{"ca": file, "cert": file, "key": file}``: every listener ``tls://``, peers need a certificate of ``ca``.

    Raises
    ------
    RuntimeError
        A warm cluster runs already at this state file, or the server failed to start (its error).
    ValueError
        A network host without TLS, a bad module name or worker count.
    """
    import subprocess

    from .cluster import MODULE_NAME, is_loopback, visible_gpus

    path = default_state(state)
    if not is_loopback(host) and not tls:
        raise ValueError(
            f"a warm cluster on {host!r} could be reached from the network, and whoever reaches a Dask "
            "worker runs code as you: pass --tls-ca, --tls-cert and --tls-key, or keep 127.0.0.1"
        )
    bad = [m for m in modules if not MODULE_NAME.match(str(m))]
    if bad:
        raise ValueError("a warm cluster imports modules by name, such as 'gcexplore.workloads.torch_pairs'; "
                         f"got {bad}")
    note = None
    old = read_state(path)
    if old is not None:
        if alive(old):
            raise RuntimeError(
                f"a warm cluster already runs at {old['address']} (recorded in {str(path)!r}): use it "
                f"with --scheduler {old['address']}, or end it with `gcexplore cluster stop`"
            )
        note = _crashed(old, path)
    cpu = False
    devs = [str(d) for d in devices] if devices else visible_gpus()
    if not devs:  # no GPU here: CPU workers (an experiment that needs no GPU, as the tests' stand-in)
        n = 2 if workers is None else int(workers)
        if n < 1:
            raise ValueError(f"a warm cluster needs at least one worker, got --workers {workers}")
        devs, cpu = [str(i) for i in range(n)], True
    private_folder(path.parent)
    # the server, and the workers it spawns, import from this process's path: the code a campaign here would see
    config = {
        "state": str(path),
        "devices": devs,
        "cpu": cpu,
        "modules": list(modules),
        "host": host,
        "tls": tls,
        "path": [p for p in sys.path if p],
    }
    log = path.with_suffix(".log")
    from ..results.files import new_file_mode

    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, new_file_mode())
    with os.fdopen(fd, "ab") as err:  # files: an appended log, opened never through a planted link
        proc = subprocess.Popen(
            [sys.executable, "-m", __name__, json.dumps(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
            cwd=os.getcwd(),
        )
    line = _first_line(proc)
    assert proc.stdout is not None  # started with stdout=PIPE
    proc.stdout.close()
    try:
        said = json.loads(line) if line else {}
    except json.JSONDecodeError:
        said = {}
    if "state" not in said:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()
        tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
        raise RuntimeError(
            f"the warm cluster did not start: {said.get('error') or ' | '.join(tail) or 'no reason given'}"
            f" (its log: {str(log)!r})"
        )
    _SERVERS[proc.pid] = proc  # it outlives this call (and this command): kept to be reaped where we stop it
    return said["state"], note


_SERVERS: dict = {}


def _first_line(proc) -> bytes:
    """The server's one line (its record, or its error); empty where it died or hung past START_WAIT_S."""
    import selectors

    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(START_WAIT_S):
            return b""
    return proc.stdout.readline()


def status(state=None) -> tuple[dict | None, str]:
    """(the running cluster's record or None, a sentence); a dead one is reported and cleaned up."""
    path = default_state(state)
    rec = read_state(path)
    if rec is None:
        return None, f"no warm cluster recorded in {str(path)!r} (`gcexplore cluster start` starts one)"
    if not alive(rec):
        return None, _crashed(rec, path)
    return rec, describe(rec, path)


def describe(rec: dict, path: Path) -> str:
    kind = "CPU workers" if rec.get("cpu") else "GPU workers"
    return (
        f"warm cluster at {rec['address']} (pid {rec['pid']}, {len(rec.get('workers', {}))} {kind}: "
        f"{', '.join(rec.get('devices', []))}; gcexplore {rec.get('version')}; modules imported: "
        f"{', '.join(rec.get('sources', {})) or 'none'}; recorded in {str(path)!r}); use it with "
        f"`gcexplore campaign SPEC --scheduler {rec['address']}` or {SCHEDULER_ENV}={rec['address']}"
    )


def stop(state=None, *, wait_s: float = 120.0) -> str:
    """End the recorded cluster (its server closes the workers, then removes the record); a sentence."""
    import psutil

    path = default_state(state)
    rec = read_state(path)
    if rec is None:
        return f"no warm cluster recorded in {str(path)!r}: nothing to stop"
    if not alive(rec):
        return _crashed(rec, path)
    proc = psutil.Process(int(rec["pid"]))
    proc.terminate()
    try:
        proc.wait(wait_s)  # the server's exit: its workers closed, its record removed
    except psutil.TimeoutExpired:
        proc.kill()
    started = _SERVERS.pop(int(rec["pid"]), None)  # started by this process: reaped
    if started is not None:
        started.wait()
    left = _kill_left(rec)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    return f"stopped the warm cluster at {rec['address']}" + (f" ({len(left)} process(es) killed)" if left else "")


def check_use(address: str, state=None) -> dict | None:
    """Before a campaign connects to ``address``: its record where the state file has one (else None).
    RuntimeError where the recorded cluster is dead (reported, cleaned up)."""
    path = default_state(state)
    rec = read_state(path)
    if rec is None or rec["address"] != address:
        return None
    if not alive(rec):
        raise RuntimeError(_crashed(rec, path))
    return rec


def check_code(client, modules: Sequence[str]) -> None:
    """Before a campaign submits to a warm cluster (its code, as its server published it on the scheduler):
    RuntimeError where gcexplore's version or a module's source differs from this process's (what
    differs, and the fix). A cluster that published nothing (not started by ``cluster start``) passes."""
    meta = client.get_metadata(META_KEY, default=None)
    if not isinstance(meta, dict):
        return
    diff = differences(meta, fingerprint(list(meta.get("sources") or {}) + list(modules)))
    if diff:
        raise RuntimeError(
            f"the warm cluster at {client.scheduler.address} runs other code than this command: "
            f"{'; '.join(diff)}; not used: {FIX}"
        )


def security_for(rec: dict | None):
    """A client's distributed.Security for a recorded TLS cluster, else None."""
    tls = (rec or {}).get("tls")
    if not tls:
        return None
    from distributed import Security

    return Security(
        tls_ca_file=tls["ca"], tls_client_cert=tls["cert"], tls_client_key=tls["key"], require_encryption=True
    )


# ------------------------------------------------------------------ the server process


def _security(tls: dict):
    from distributed import Security

    return Security(
        tls_ca_file=tls["ca"],
        tls_scheduler_cert=tls["cert"],
        tls_scheduler_key=tls["key"],
        tls_worker_cert=tls["cert"],
        tls_worker_key=tls["key"],
        tls_client_cert=tls["cert"],
        tls_client_key=tls["key"],
        require_encryption=True,
    )


def _serve(config: dict) -> int:
    """Hold the cluster until SIGTERM/SIGINT; say on stdout (one JSON line) its record or why it did not start."""
    import psutil

    stop_now = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop_now.set())
    path, out = Path(config["state"]), sys.stdout
    sys.path[:] = config.get("path") or sys.path
    sys.stdout = sys.stderr  # stdout is the one line to the starting command
    cluster = None
    try:
        from distributed import Client

        from .cluster import local_cluster

        tls = config.get("tls")
        prints = fingerprint(config["modules"])  # what the workers are about to import
        cluster = local_cluster(
            config["devices"],
            host=config["host"],
            security=_security(tls) if tls else None,
            warm=config["modules"],
            start="spawn",
        )
        with Client(cluster, security=cluster.security) as c:
            pids = cast("dict[str, int]", c.run(os.getpid))  # a synchronous client's: no coroutine
            c.set_metadata(META_KEY, prints)
        rec = {
            "format": FORMAT,
            "address": cluster.scheduler_address,
            "pid": os.getpid(),
            "pid_started": psutil.Process().create_time(),
            "started_at": time.time(),
            "devices": config["devices"],
            "cpu": config["cpu"],
            "host": config["host"],
            "tls": tls,
            "workers": {a: [p, psutil.Process(p).create_time()] for a, p in pids.items()},
            **prints,
        }
        _write_state(path, rec)
    except BaseException as e:  # said to the starting command, which prints it
        out.write(json.dumps({"error": f"{type(e).__name__}: {e}"}) + "\n")
        out.flush()
        if cluster is not None:
            cluster.close()
        return 1
    out.write(json.dumps({"state": rec}) + "\n")
    out.close()
    try:
        stop_now.wait()
    finally:
        cluster.close()
        with contextlib.suppress(FileNotFoundError, ValueError):
            if (read_state(path) or {}).get("pid") == os.getpid():
                os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(_serve(json.loads(sys.argv[1])))
