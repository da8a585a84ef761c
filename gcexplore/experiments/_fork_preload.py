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
import time

ENV = "GCEXPLORE_FORK_MODULES"
MODULE = __name__  # the forkserver imports it by this name
# cuda.core and the kernels' module too: importing them loads no driver library and opens no device file (the
# driver is loaded at its first call), and a worker saved 0.1-0.3 s of them before its GPU context (batch final5)
BASE = ("distributed", "pandas", "gcexplore.experiments._campaign_task", "gcexplore.experiments._campaign_preload",
        "gcexplore.experiments.overlap", "gcexplore.experiments.tuner", "cuda.core", "gcexplore.device.kernels")
DEVICE_FILES = "/dev/nvidia"  # the driver's device files: open once cuInit (or NVML) ran in the process

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


if os.environ.get(ENV) is not None:  # in the forkserver (imported elsewhere: the functions only)
    _preload()
