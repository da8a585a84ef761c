"""Start-up preload of a local campaign cluster's workers (Dask ``preload``).

Each worker runs :func:`dask_setup` before it joins the scheduler: it imports
gcexplore's experiments and the factory modules named in ``GCEXPLORE_WARM_MODULES``
(PyTorch, typically: seconds per process; nothing when forked from the campaign's
forkserver, which has them) while its one executor thread, the one that will run its
tasks, starts the GPU (driver, context, built-in kernels). The worker joins once its
imports are done, without waiting for the GPU: the start is queued ahead of every task
on that thread, so the first task finds the context current, and the worker's
registration and the client's planning overlap it. A worker forked from the server began
its GPU start at its fork (:func:`._fork_preload.early_gpu`), before Dask's set-up. A
failure here is recorded, not raised: the worker starts, and a task that needs what
failed fails with its own traceback. A forked worker reports what the server imported, and when.
"""

from __future__ import annotations

import os
import threading
import time

from ._fork_preload import REPORT as FORKSERVER, early_gpu, gpu_start_lock, process_started_at

ENV = "GCEXPLORE_WARM_MODULES"


def dask_setup(worker) -> None:
    t, at = time.perf_counter(), time.time()
    forked = dict(FORKSERVER)  # filled in the forkserver this worker was forked from, else empty
    from ._task import PRELOADED, warm_up

    modules = [m for m in os.environ.get(ENV, "").split(",") if m]
    steps = {"gcexplore_import_s": time.perf_counter() - t, "process_started_at": process_started_at()}
    if forked:
        steps["forkserver"] = {k: forked.get(k) for k in ("started_at", "imports_at", "ended_at", "preload_s",
                                                             "seconds", "errors", "pid")}
    # the GPU's start (driver, context, kernels; begun at the fork where the worker was forked from the server)
    # on the worker's one executor thread, where its tasks run: queued ahead of them, so the first task finds the
    # context current, while the worker joins without waiting for it (its registration and the client's
    # warm-up task overlap it); it records into PRELOADED when done
    pool = getattr(worker, "executors", {}).get("default")
    if pool is not None:
        pool.submit(_gpu, PRELOADED)
        thread = None
    else:
        thread = threading.Thread(target=_gpu, args=(PRELOADED,), name="gcexplore-warm-gpu")
        thread.start()
    try:
        report = warm_up(modules, gpu=False)
    except Exception as e:  # recorded; the first task that needs the module raises it with a traceback
        report = {"error": f"{type(e).__name__}: {e}"}
    if thread is not None:
        thread.join()
    PRELOADED.update(report, **steps, total_s=time.perf_counter() - t, started_at=at)


def _gpu(out: dict) -> None:
    """The GPU's start on this thread; seconds per step into ``out``, ``gpu_ready_at`` (Unix time) at its end."""
    from ..device.driver import device_count
    from ._task import warm_gpu
    from .worker_cpus import pin_to_card

    gpu: dict = {}
    try:
        early = early_gpu()  # the driver and the primary context, begun at the fork (forked workers)
        if early and "error" not in early:
            gpu.update({k: early[k] for k in ("driver_init_s", "context_s", "lock_wait_s", "cpus") if k in early},
                       early_seen_at=early["seen_at"], early_ended_at=early["ended_at"])
            if "context_s" in early:  # made there: retained and made current on this thread, then the kernels
                here: dict = {}
                warm_gpu(here)
                gpu.update(set_current_s=here["device_s"] + here["context_s"], kernels_s=here["kernels_s"])
        else:
            if early:  # it failed there: started here, as for a spawned worker
                gpu.update(early_error=early["error"], early_seen_at=early["seen_at"])
            with gpu_start_lock(gpu):  # one worker at a time, where the cluster asks for it
                t1 = time.perf_counter()
                n = device_count()  # the driver's initialisation, in this process (never in the forkserver)
                gpu["driver_init_s"] = time.perf_counter() - t1
                if n:
                    gpu["cpus"] = pin_to_card()  # near its card, before the context
                    warm_gpu(gpu)  # the context and the kernels, current on this thread
    except Exception as e:  # no driver here (the CPU stand-in), or it failed: the first task makes the context
        gpu["gpu"] = f"{type(e).__name__}: {e}"
    if "cpus" not in gpu:  # no card to place by: what the worker runs on, and why it was left so
        gpu["cpus"] = pin_to_card()
    out.update(gpu, gpu_ready_at=time.time())
