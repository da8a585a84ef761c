"""Imported by the forkserver a local campaign cluster forks its workers from (Linux).

The forkserver imports, once per client process, what every worker would otherwise import
for itself (Dask, pandas, gcexplore's experiments, the factories' modules named in
``GCEXPLORE_FORK_MODULES``: PyTorch, typically seconds); each worker is then a fork of it,
started in a fraction of a second. A process whose CUDA driver is initialised cannot
be forked into one that uses the GPU, so after the imports this module records whether
one of them initialised CUDA; ``local_cluster`` then starts no worker from it and
raises :func:`refusal`, naming the modules. Import errors are recorded, not raised: the
forkserver must live, and a worker imports a failed module again (and fails with its
traceback in the task that needs it).
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import time

ENV = "GCEXPLORE_FORK_MODULES"
MODULE = __name__  # the forkserver imports it by this name
# cuda.core and the kernels' module too: importing them loads no driver library and opens no device file (the
# driver is loaded at its first call), and a worker saved 0.1-0.3 s of them before its GPU context (batch final5)
BASE = ("distributed", "pandas", "gcexplore.campaigns._task", "gcexplore.campaigns._preload",
        "gcexplore.experiments.overlap", "gcexplore.experiments.tuner", "cuda.core", "gcexplore.device.kernels")
DEVICE_FILES = "/dev/nvidia"  # the driver's device files: open once cuInit (or NVML) ran in the process

GPU_ENV = "GCEXPLORE_WORKER_GPU"  # a local cluster's worker's card, set last in its environment by its Nanny
LOCK_ENV = "GCEXPLORE_GPU_START_LOCK"  # a file the cluster's workers lock around their GPU start: one at a time
EARLY_WAIT_S = 5.0  # a child of the server that is not such a worker stops waiting for it after this long

#: In a worker forked from the server: what its early GPU start (:func:`early_gpu`) did, when.
EARLY: dict = {}
_EARLY_THREAD: list = []
_EARLY_CANCEL = threading.Event()
_RETAINED: list = []  # the primary context the early start made, never released (the worker's tasks use it)

#: What the forkserver did: Unix times ``started_at`` (its process) and ``ended_at`` (its imports), seconds
#: per module, import errors, and ``cuda`` (why CUDA counts as initialised here, or None).
REPORT: dict = {}


def process_started_at() -> float | None:
    """Unix time this process started (Linux; to 10 ms): its start in clock ticks after boot, the
    boot placed by /proc/uptime (psutil's is whole seconds). For a forked process: the fork."""
    try:
        with open("/proc/self/stat") as f:
            ticks = float(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
        return time.time() - up + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):  # not Linux: only this timing is missing
        return None


def cuda_in_process(device_files: str = DEVICE_FILES) -> str | None:
    """Why CUDA counts as initialised in this process (PyTorch says so, or a file descriptor is
    open on the driver's device files), else None. Nothing here initialises anything."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return "torch.cuda.is_initialized() is True"
    except Exception:  # a partial or stand-in torch: the file descriptors below still tell
        pass
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:  # not Linux
        return None
    for fd in fds:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(device_files):
            return f"a file descriptor is open on {target} (the CUDA driver or NVML was initialised)"
    return None


def refusal(report: dict | None = None) -> str | None:
    """Why no worker may fork from the server that did ``report``, or None when they may use the GPU."""
    report = REPORT if report is None else report
    if not report.get("cuda"):
        return None
    return (f"the campaign's forkserver initialised CUDA while it imported {', '.join(report['modules']) or 'nothing'} "
            f"({report['cuda']}); a worker forked from it cannot use the GPU. Make those modules leave the GPU alone "
            "at import (create contexts, tensors and handles inside the factory), or start the workers without "
            "forking: local_cluster(..., start='spawn')")


def report_to(conn) -> None:
    """In a process forked from the server: send back what the server did (:data:`REPORT`)."""
    conn.send(dict(REPORT))
    conn.close()


def _after_fork_in_child() -> None:
    """In each child of the server: start the GPU in a thread as soon as the Nanny has set the worker's card
    in its environment: the driver's initialisation and the primary context (the slow, GIL-free part, slower
    still when several workers make theirs at once) before and beside Dask's worker set-up and registration.
    The worker's preload joins it (:func:`early_gpu`) on the thread that will run its tasks."""
    EARLY.clear()
    _EARLY_THREAD.clear()
    _EARLY_CANCEL.clear()
    if os.environ.get(GPU_ENV) is not None:  # the server's own environment named a card: not a worker's start
        return
    thread = threading.Thread(target=_early_start, name="gcexplore-early-gpu", daemon=True)
    _EARLY_THREAD.append(thread)
    thread.start()


def _early_start() -> None:
    deadline = time.monotonic() + EARLY_WAIT_S
    while not _EARLY_CANCEL.is_set():  # the Nanny sets the card last: CUDA_VISIBLE_DEVICES is then the worker's own
        card = os.environ.get(GPU_ENV)
        if card is not None and os.environ.get("CUDA_VISIBLE_DEVICES") == card:
            break
        if time.monotonic() > deadline:  # not a campaign worker (multiprocessing's own use of the server)
            return
        time.sleep(0.002)
    else:  # the worker's preload came first: it starts the GPU itself
        return
    EARLY["seen_at"] = time.time()
    try:
        with gpu_start_lock(EARLY):
            _early_context()
    except Exception as e:  # recorded; the worker's preload starts the GPU itself
        EARLY["error"] = f"{type(e).__name__}: {e}"
    EARLY["ended_at"] = time.time()


class gpu_start_lock:
    """Hold the cluster's GPU-start lock (``LOCK_ENV`` in the environment; none: nothing) while the driver and the
    context start, so that the workers of one cluster make theirs one at a time; ``lock_wait_s`` into ``out``."""

    def __init__(self, out: dict):
        self.out, self.fd = out, None

    def __enter__(self):
        path = os.environ.get(LOCK_ENV)
        if path:
            import fcntl

            t = time.perf_counter()
            self.fd = os.open(path, os.O_RDWR)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            self.out["lock_wait_s"] = time.perf_counter() - t
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)  # the lock goes with it
        return False


def _early_context() -> None:
    from ..device.driver import check, device_count, driver_module

    t = time.perf_counter()
    n = device_count()  # cuInit, in this process only
    EARLY["driver_init_s"] = time.perf_counter() - t
    if n:
        from .worker_cpus import pin_to_card

        EARLY["cpus"] = pin_to_card()  # near its card, before the context (its host memory then lies there)
        t = time.perf_counter()
        cu = driver_module()
        # the primary context, retained for the process's life: a retain that ended with this thread (cuda.core
        # caches its handle per thread) would destroy it, and the task thread would make it again
        _RETAINED.append(check(cu.cuDevicePrimaryCtxRetain(check(cu.cuDeviceGet(0), "cuDeviceGet")),
                               "cuDevicePrimaryCtxRetain"))
        EARLY["context_s"] = time.perf_counter() - t


def early_gpu(timeout: float = 60.0) -> dict:
    """In a worker: wait for the early GPU start begun at its fork, if it began; what it did (empty when
    none began: a spawned worker, or one whose environment has no card in ``GPU_ENV``; then the caller
    starts the GPU itself)."""
    _EARLY_CANCEL.set()  # one still waiting for the card gives up
    if "seen_at" not in EARLY:
        return {}
    _EARLY_THREAD[0].join(timeout)
    return dict(EARLY)


def _preload() -> None:
    t, at = time.perf_counter(), time.time()
    modules = [*BASE, *(m for m in os.environ.get(ENV, "").split(",") if m)]
    seconds, errors = {}, {}
    for name in modules:
        t1 = time.perf_counter()
        try:
            importlib.import_module(name)
        except BaseException as e:  # recorded: the forkserver must live (KeyboardInterrupt aside)
            if isinstance(e, KeyboardInterrupt):
                raise
            errors[name] = f"{type(e).__name__}: {e}"
        seconds[name] = time.perf_counter() - t1
    REPORT.update(started_at=process_started_at(), imports_at=at, ended_at=time.time(), pid=os.getpid(),
                  modules=modules, seconds=seconds, errors=errors, preload_s=time.perf_counter() - t,
                  cuda=cuda_in_process())
    os.register_at_fork(after_in_child=_after_fork_in_child)


if os.environ.get(ENV) is not None:  # in the forkserver (imported elsewhere: the functions only)
    _preload()
