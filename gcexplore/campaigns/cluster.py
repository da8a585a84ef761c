"""The Dask cluster of a local campaign: one worker process per GPU, on loopback or with TLS.

Whoever can reach a Dask scheduler or worker can run code on it as its user, so the
local cluster's listeners (scheduler, nannies, workers, dashboards) bind 127.0.0.1
unless the caller asks for a network address, and then only with TLS. Dask is imported
only when a cluster starts.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from typing import Any

from ..device.driver import UnsupportedError, device_count

__all__ = ["GPU_STARTS", "LOOPBACK", "START_METHODS", "ClusterStart", "forkserver_ready", "gpu_start_mode",
           "local_cluster", "require_distributed", "start_forkserver", "stop_forkserver", "visible_gpus"]


def visible_gpus() -> list[str]:
    """The GPUs this process may use: CUDA_VISIBLE_DEVICES entries, else 0..device_count-1."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [v.strip() for v in env.split(",") if v.strip()]

    try:
        return [str(i) for i in range(device_count())]
    except UnsupportedError:
        return []


def require_distributed():
    try:
        import distributed
    except ImportError:
        raise ImportError("campaigns run on Dask distributed, which is not installed: "
                          "pip install 'gcexplore[campaign]' (or pip install distributed)") from None
    return distributed


LOOPBACK = "127.0.0.1"
MODULE_NAME = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*\Z")


def is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _dashboard_bind(address: str | None, host: str, bind: str, tls: bool) -> str:
    """Where the scheduler's dashboard listens: ``host`` (loopback by default) on the port asked for.
    An address without a host (``":0"``, ``"8787"``) takes ``host``, never every interface; one on
    an address the network reaches needs TLS for the cluster, like ``host``."""
    if address is None:
        return f"{bind}:0"
    text = str(address).strip()
    where, sep, port = text.rpartition(":")
    if not sep:
        where, port = "", text
    if not port.isdigit():
        raise ValueError(f"dashboard_address is 'HOST:PORT' or ':PORT' (PORT 0: any free one), got {address!r}")
    if not where:
        return f"{bind}:{port}"  # ":0" to Dask means every interface; here it means this cluster's host
    if not is_loopback(where) and not tls:
        raise ValueError(f"a dashboard on {where!r} could be reached from the network and shows the cluster's "
                         "tasks to whoever reaches it: keep dashboard_address=':0' (on the cluster's host, "
                         "127.0.0.1 by default), or pass security= with require_encryption=True")
    return text


#: Scheduler options that decide where it listens and how: local_cluster's own ``host`` and ``security``
#: (checked for loopback and TLS) say it; through ``**scheduler_options`` they would bypass that check.
_NETWORK_OPTIONS = ("host", "interface", "protocol", "security", "listen_address", "contact_address")


def local_devices(devices: Sequence | None = None) -> list[str]:
    """The GPUs a local campaign cluster has a worker for (default every visible one); raises
    UnsupportedError, in one sentence, where there are none."""
    devs = [str(d) for d in (visible_gpus() if devices is None else devices)]
    if not devs:
        why = "no GPU is visible here"
        try:
            device_count()
        except UnsupportedError as e:  # "no NVIDIA driver found", as every GPU-less error opens
            why = str(e).split(";")[0]
        raise UnsupportedError(f"{why}, so a local campaign cluster has no workers; pass client= "
                               "or scheduler='tcp://host:8786' to use a cluster whose workers have GPUs")
    return devs


def local_cluster(devices: Sequence | None = None, *, host: str = LOOPBACK, security=None,
                  dashboard_address: str | None = None, warm: Sequence[str] | None = None, start: str | None = None,
                  **scheduler_options):
    """A Dask cluster on this machine: one worker process per GPU, one thread each.

    Each worker is a Nanny-managed process with ``CUDA_VISIBLE_DEVICES`` set to its one
    GPU before it starts, so a worker's device 0 is its own card. Whoever can reach a
    Dask scheduler or worker can run code on it as this user, so by default every
    listener (scheduler, nannies, workers, dashboard) is on the loopback interface
    only; a cluster reachable from other machines (``host`` not loopback) needs TLS.

    Parameters
    ----------
    devices : sequence of int or str, optional
        GPU indices or UUIDs; default every visible GPU.
    host : str, default "127.0.0.1"
        The interface every listener binds; a non-loopback address (``"0.0.0.0"``, the
        machine's own) needs ``security``.
    security : distributed.Security, optional
        TLS certificates with ``require_encryption=True``; the listeners then speak
        ``tls://`` and refuse peers without a certificate of the same authority.
    dashboard_address : str, optional
        ``"HOST:PORT"`` or ``":PORT"`` (default ``":0"``: a free port); an address without a host is on
        ``host`` (127.0.0.1 by default: never every interface), one the network reaches needs ``security``.
    warm : sequence of str, optional
        Warm each worker as it starts, before it joins (the cluster's start then takes
        that long, in parallel on every worker): import gcexplore's experiments and these
        modules (``"gcexplore.workloads.torch_pairs"``), make the GPU context and compile the
        built-in kernels. None: the workers start bare (a campaign warms them by a task).
    start : {"forkserver", "spawn"}, optional
        How worker processes start. ``"forkserver"``: forked from a server process of this
        client that has imported Dask, pandas, gcexplore's experiments and the ``warm``
        modules once (:func:`start_forkserver`; kept for the next cluster of this process),
        so a worker skips those imports; the server must not initialise CUDA (where it did,
        no worker starts: RuntimeError naming the modules). ``"spawn"``: each worker a fresh
        interpreter (its GPU context made while it imports). None (default): forkserver
        where a kept server has these modules, else spawn, and such a server is started in
        the background for the next cluster (where the platform has forkservers).

    A warmed worker (``warm=``) moves to the CPUs local to its card (``GCEXPLORE_WORKER_CPUS``:
    ``local``, the default; ``share``, its own run of them; ``off``: see
    :mod:`gcexplore.campaigns.worker_cpus`), and records them in its preload report. Every worker
    measures behind the gate ``GCEXPLORE_GATE`` names in this process (:mod:`gcexplore.experiments.gate`).

    A campaign hands a worker its next task only when the worker is free (its first once its
    GPU is ready: :mod:`gcexplore.campaigns.dispatch`), so tasks start in the order the
    campaign gives up to the last one (Dask's ``worker-saturation`` 1.0 here does so only for
    groups of tasks larger than twice the cluster).

    Raises
    ------
    UnsupportedError (a RuntimeError)
        No GPU is visible (pass ``client=`` or ``scheduler=`` to use a cluster elsewhere).
    ValueError
        A network-reachable ``host`` or ``dashboard_address`` without a TLS ``security``, or
        ``host``/``interface``/``protocol``/``security`` among the scheduler options; ``GCEXPLORE_WORKER_CPUS``,
        ``GCEXPLORE_GPU_START`` or ``GCEXPLORE_GATE`` set to a value they do not take.
    RuntimeError
        The forkserver initialised CUDA while importing (a worker forked from it could not use its GPU).
    """
    d = require_distributed()
    Nanny, Scheduler, SpecCluster = d.Nanny, d.Scheduler, d.SpecCluster
    tls = security is not None and bool(getattr(security, "require_encryption", False))
    if not is_loopback(host) and not tls:
        raise ValueError(f"a campaign cluster on {host!r} could be reached from the network, and whoever reaches "
                         "a Dask worker runs code as you: pass security=distributed.Security(tls_ca_file=..., "
                         "tls_scheduler_cert=..., tls_worker_cert=..., tls_client_cert=..., require_encryption=True) "
                         "(docs/guide.md, 'Campaigns on several machines'), or keep host='127.0.0.1'")
    net_options = sorted(set(scheduler_options) & set(_NETWORK_OPTIONS))
    if net_options:
        raise ValueError(f"local_cluster sets where the cluster listens from host= and security= (checked for "
                         f"loopback and TLS); pass those instead of {', '.join(net_options)}")
    bind = f"[{host}]" if ":" in host else host
    dashboard = _dashboard_bind(dashboard_address, host, bind, tls)
    devs = local_devices(devices)
    background = None
    if start is None:  # fork from a kept server that has these modules; else spawn, and start one for the next cluster
        start = "forkserver" if forkserver_ready(warm or ()) else "spawn"
        background = start == "spawn" and default_start() == "forkserver"
    if start not in START_METHODS:
        raise ValueError(f"start is one of {', '.join(map(repr, START_METHODS))}, got {start!r}")
    if warm is not None:
        bad = [m for m in warm if not MODULE_NAME.match(str(m))]
        if bad:
            raise ValueError("warm names modules to import, such as 'gcexplore.workloads.torch_pairs'; "
                             f"got {bad}")
    preload, preload_env = {}, {}
    if warm is not None:
        from ._preload import ENV, dask_setup

        from ._fork_preload import GPU_ENV, LOCK_ENV

        preload = {"preload": [dask_setup.__module__]}
        preload_env = {ENV: ",".join(map(str, warm))}
        if gpu_start_mode() == "serial":  # the workers' driver and context one at a time (a file they lock)
            preload_env[LOCK_ENV] = _start_lock_file()
    # the card last (dicts keep their order, the Nanny sets them in it): a worker forked from the server starts its
    # GPU once it sees it, with CUDA_VISIBLE_DEVICES already its own (_fork_preload.early_gpu)
    from . import worker_cpus
    from ..experiments.gate import gate_kind

    # each worker's CPUs near its card (worker_cpus; GCEXPLORE_WORKER_CPUS=off: as inherited); the engine's gate
    # (GCEXPLORE_GATE) as this process has it (a forked worker has the server's environment otherwise)
    cpus = {worker_cpus.ENV: worker_cpus.cpu_mode(), "GCEXPLORE_GATE": gate_kind()}
    no_nvml = {"DASK_DISTRIBUTED__DIAGNOSTICS__NVML": "False"}
    envs = {d: {"CUDA_VISIBLE_DEVICES": d, **no_nvml, **preload_env, **cpus, worker_cpus.SLOT_ENV: f"{k}/{len(devs)}",
                **({GPU_ENV: d} if warm is not None else {})} for k, d in enumerate(devs)}
    net = {"host": host, "protocol": "tls" if tls else "tcp", **({"security": security} if tls else {})}
    workers = {f"gpu{d}": {"cls": Nanny, "options": {"nthreads": 1, "name": f"gpu{d}", "silence_logs": 40,
                                                     "dashboard_address": f"{bind}:0", **net,
                                                     "env": envs[d],
                                                     **preload}} for d in devs}
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": dashboard, **net,
                                               **scheduler_options}}
    import dask.config

    # one task per free worker: a second task queued on a worker early could leave another card idle at the end;
    # no statistical profiler (it samples the measuring thread's stack 100 times a second, taking the GIL from it)
    # and an event-loop check every 0.5 s, not 50 times a second (the Nannies hand this config to their workers);
    # no NVML monitor of Dask's: it polls the card the worker measures on (gcexplore reads NVML itself, per round),
    # and fails a worker whose CUDA_VISIBLE_DEVICES names no card NVML knows
    if background:  # its imports run beside the spawned workers' (a first campaign pays no more than before)
        threading.Thread(target=_start_quietly, args=(tuple(warm or ()),), name="gcexplore-forkserver-start",
                         daemon=True).start()
    if start == "forkserver":  # its imports done and checked before any worker forks from it
        server = start_forkserver(warm or (), wait=True)
        if server.get("cuda"):
            from ._fork_preload import refusal

            raise RuntimeError(refusal(server))
    with dask.config.set({"distributed.scheduler.worker-saturation": 1.0, "distributed.worker.profile.enabled": False,
                          "distributed.admin.tick.interval": "500ms", "distributed.diagnostics.nvml": False,
                          "distributed.worker.multiprocessing-method": start}):
        # distributed's SpecCluster types silence_logs as bool (it is a logging level), and pyright matches the
        # spread dict against every keyword
        return SpecCluster(workers=workers, scheduler=scheduler, name="gcexplore-campaign", silence_logs=40,  # pyright: ignore[reportArgumentType]
                           **({"security": security} if tls else {}))  # pyright: ignore[reportArgumentType]


START_METHODS = ("forkserver", "spawn")
GPU_START_ENV, GPU_STARTS = "GCEXPLORE_GPU_START", ("serial", "together")
_LOCK_DIR: list = []


def gpu_start_mode() -> str:
    """How a local cluster's workers start their GPUs (``GCEXPLORE_GPU_START``): ``serial`` (default), the
    driver's initialisation and the context one worker at a time, or ``together``. Four processes making
    theirs at once all finish after 1.6 s where one alone takes 0.3 s (4x H100, batch g1): one at a time,
    the first worker runs tasks after 0.3 s and the last is ready sooner than any of four at once."""
    mode = os.environ.get(GPU_START_ENV, "serial")
    if mode not in GPU_STARTS:
        raise ValueError(f"{GPU_START_ENV} is one of {', '.join(map(repr, GPU_STARTS))}, got {mode!r}")
    return mode


def _start_lock_file() -> str:
    """A file in a directory of this process's own (0700), removed at its exit: no one else can plant it."""
    if not _LOCK_DIR:
        import atexit
        import shutil
        import tempfile

        _LOCK_DIR.append(tempfile.mkdtemp(prefix="gcexplore-gpu-start-"))
        atexit.register(shutil.rmtree, _LOCK_DIR[0], True)
    path = os.path.join(_LOCK_DIR[0], "lock")
    if not os.path.exists(path):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    return path


PROBE_DIED = "a process forked from the campaign's forkserver exited"


def default_start() -> str:
    import multiprocessing

    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


_FORK: dict = {"pid": None, "modules": frozenset(), "report": None}
_FORK_LOCK = threading.Lock()


def start_forkserver(modules: Sequence[str] = (), *, wait: bool = False) -> dict:
    """Start (or keep) the forkserver local campaign clusters fork their workers from.

    The server imports Dask's modules, pandas, gcexplore's experiments and ``modules``
    once (:mod:`gcexplore.campaigns._fork_preload`); it lives until this process exits
    or :func:`stop_forkserver`, so the next campaign's workers fork from it at once. A
    server running without one of ``modules`` is replaced. Returns ``{"pid", "started"}``
    (started: False when a running server already had every module); ``wait=True`` also
    waits for its imports (by forking a process that returns at once) and adds what it did
    (``preload_s``, ``seconds`` per module, ``errors``, ``cuda``)."""
    import multiprocessing.forkserver as fs

    bad = [m for m in modules if not MODULE_NAME.match(str(m))]
    if bad:
        raise ValueError("the forkserver imports modules by name, such as 'gcexplore.workloads.torch_pairs'; "
                         f"got {bad}")
    from ._fork_preload import ENV, MODULE, report_to

    with _FORK_LOCK:
        # the process's one server (multiprocessing's); its preload list is ours to set (typeshed has no private fields)
        server: Any = fs._forkserver
        ours = server._forkserver_pid is not None and server._forkserver_pid == _FORK["pid"]
        want = frozenset(map(str, modules)) | (_FORK["modules"] if ours else frozenset())
        if server._forkserver_pid is not None and (not ours or want != _FORK["modules"]):
            _detach(server)  # one without our imports, or without a module asked for now: replaced
        before = server._forkserver_pid
        server.set_forkserver_preload([MODULE])  # which imports Dask first (what Dask's own list would)
        # the server inherits this process's environment as it starts: the module list travels there
        old = os.environ.get(ENV)
        os.environ[ENV] = ",".join(sorted(want))
        try:
            server.ensure_running()  # a server that died is started again here
        finally:
            if old is None:
                os.environ.pop(ENV, None)
            else:
                os.environ[ENV] = old
        started = server._forkserver_pid != before
        if started:
            _FORK.update(pid=server._forkserver_pid, modules=want, report=None)
        out = {"pid": server._forkserver_pid, "started": started}
        if wait and _FORK.get("report"):  # what this server did, asked before
            return {**out, **_FORK["report"]}
    if wait:
        import multiprocessing

        from multiprocessing.connection import wait as ready

        ctx = multiprocessing.get_context("forkserver")
        reader, writer = ctx.Pipe(duplex=False)
        child = ctx.Process(target=report_to, args=(writer,), name="gcexplore-forkserver-probe")
        child.start()  # served once the server's imports are done
        writer.close()
        ready([reader, child.sentinel])  # its report, or its end (a script without a main guard ends it early)
        try:
            report = reader.recv()
        except EOFError:  # it ended without a word
            report = None
        child.join()
        reader.close()
        if report is None:
            raise RuntimeError(f"{PROBE_DIED} (exit code {child.exitcode}) before it reported what the server imported")
        with _FORK_LOCK:
            if _FORK["pid"] == out["pid"]:
                _FORK["report"] = report
        out.update(report)
    return out


def forkserver_ready(modules: Sequence[str] = ()) -> bool:
    """Whether this process keeps a campaign forkserver that has imported ``modules``."""
    import multiprocessing.forkserver as fs

    with _FORK_LOCK:
        server: Any = fs._forkserver  # typeshed has no private fields
        return (_FORK["pid"] is not None and _FORK["pid"] == server._forkserver_pid
                and set(map(str, modules)) <= _FORK["modules"])


def _start_quietly(modules) -> None:
    try:
        start_forkserver(modules, wait=True)
    except Exception:  # only the next cluster's start is at stake: it spawns its workers then
        pass


def stop_forkserver() -> None:
    """Let the forkserver go (the next local cluster starts a new one). It exits once the workers
    forked from it have (each holds it alive), without this call waiting for them."""
    import multiprocessing.forkserver as fs

    with _FORK_LOCK:
        _detach(fs._forkserver)
        _FORK.update(pid=None, modules=frozenset(), report=None)


def _detach(server) -> None:
    """multiprocessing's ``_stop`` without its wait: the server outlives us until its children exit,
    which a running cluster's workers have not; it is reaped in the background."""
    pid = server._forkserver_pid
    if pid is None:
        return
    from multiprocessing import util

    os.close(server._forkserver_alive_fd)  # the server's "client alive" pipe: it ends when its children end
    address = server._forkserver_address
    server._forkserver_alive_fd = server._forkserver_pid = server._forkserver_address = None
    if address and not util.is_abstract_socket_namespace(address):
        try:
            os.unlink(address)
        except OSError:
            pass
    threading.Thread(target=_reap, args=(pid,), name="gcexplore-forkserver-reap", daemon=True).start()


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


class ClusterStart:
    """A local cluster started in a thread, its workers warmed as they start (``warm=``), while
    the client imports, checks and plans: the two overlap instead of adding up."""

    def __init__(self, devices, modules):
        import threading
        import time

        self.cluster: Any  # a SpecCluster once started
        self.error: BaseException | None
        self.seconds: float | None
        self.cluster, self.error, self.seconds, self._t0 = None, None, None, time.perf_counter()
        self.started_at = time.time()  # Unix seconds, to place the workers' start-up steps (their preload report)
        self._thread = threading.Thread(target=self._start, args=(devices, modules), name="gcexplore-cluster-start")
        self._thread.start()

    def _start(self, devices, modules):
        import time

        try:
            self.cluster = local_cluster(devices, warm=modules)
        except BaseException as e:  # raised in the caller's thread by result()
            self.error = e
        self.seconds = time.perf_counter() - self._t0

    def result(self):
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self.cluster

    def discard(self) -> None:
        """The campaign failed before it used the cluster: close it once it is up."""
        self._thread.join()
        if self.cluster is not None:
            self.cluster.close()
