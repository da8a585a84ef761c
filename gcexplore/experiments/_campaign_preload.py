"""Start-up preload of a local campaign cluster's workers (Dask ``preload``).

Each worker runs :func:`dask_setup` before it joins the scheduler: it imports
gcexplore's experiments and the factory modules named in ``GCEXPLORE_WARM_MODULES``
(PyTorch, typically: seconds per process) while a thread makes the GPU context and
compiles the built-in kernels. The cluster's start thus carries the warm-up, in parallel on every
worker and while the client plans the campaign, instead of after it. A failure here
is recorded, not raised: the worker starts, and a task that needs what failed fails
with its own traceback. A worker forked from the campaign's forkserver
(:mod:`._fork_preload`) reports what the server imported, and when.
"""

from __future__ import annotations

import os
import threading
import time

from ._fork_preload import REPORT as FORKSERVER, process_started_at

ENV = "GCEXPLORE_WARM_MODULES"


def dask_setup(worker) -> None:
    t, at = time.perf_counter(), time.time()
    forked = dict(FORKSERVER)  # filled in the forkserver this worker was forked from, else empty
    from ..device.driver import device_count
    from ._campaign_task import PRELOADED, warm_gpu, warm_up

    modules = [m for m in os.environ.get(ENV, "").split(",") if m]
    steps = {"gcexplore_import_s": time.perf_counter() - t, "process_started_at": process_started_at()}
    if forked:
        steps["forkserver"] = {k: forked.get(k) for k in ("started_at", "imports_at", "ended_at", "preload_s",
                                                             "seconds", "errors", "pid")}
    gpu: dict = {}
    thread = None
    try:
        t1 = time.perf_counter()
        n = device_count()  # the driver's initialisation, in this process (never in the forkserver)
        steps["driver_init_s"] = time.perf_counter() - t1
        if n:
            t1 = time.perf_counter()
            import cuda.core  # noqa: F401 (imported here, so that the thread below imports nothing the modules do)

            from ..device import kernels  # noqa: F401

            steps["cuda_import_s"] = time.perf_counter() - t1  # ~0 when forked from the server, which has them

            # the context and NVRTC are driver time (the GIL released): they overlap the imports. On the thread
            # that will run the tasks (the worker's one executor thread), so the context is current there already
            pool = getattr(worker, "executors", {}).get("default")
            if pool is not None:
                thread = pool.submit(_gpu, warm_gpu, gpu)
            else:
                thread = threading.Thread(target=_gpu, args=(warm_gpu, gpu), name="gcexplore-warm-gpu")
                thread.start()
    except Exception as e:  # no driver here (the CPU stand-in): nothing to warm on a GPU
        gpu["gpu"] = f"{type(e).__name__}: {e}"
    try:
        report = warm_up(modules, gpu=False)
    except Exception as e:  # recorded; the first task that needs the module raises it with a traceback
        report = {"error": f"{type(e).__name__}: {e}"}
    if isinstance(thread, threading.Thread):
        thread.join()
    elif thread is not None:
        thread.result()  # _gpu records its errors: this only waits
    PRELOADED.update(report, **steps, **gpu, total_s=time.perf_counter() - t, started_at=at)


def _gpu(warm_gpu, out: dict) -> None:
    try:
        warm_gpu(out)
    except Exception as e:  # recorded; the first task makes the context itself
        out["error"] = f"{type(e).__name__}: {e}"
