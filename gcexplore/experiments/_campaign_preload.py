"""Start-up preload of a local campaign cluster's workers (Dask ``preload``).

Each worker runs :func:`dask_setup` before it joins the scheduler: it imports
gcexplore's experiments and the factory modules named in ``GCEXPLORE_WARM_MODULES``
(PyTorch, typically: seconds per process), makes the GPU context and compiles the
built-in kernels. The cluster's start thus carries the warm-up, in parallel on every
worker and while the client plans the campaign, instead of after it. A failure here
is recorded, not raised: the worker starts, and a task that needs what failed fails
with its own traceback.
"""

from __future__ import annotations

import os
import time

ENV = "GCEXPLORE_WARM_MODULES"


def dask_setup(worker) -> None:
    from ._campaign_task import PRELOADED, warm_up

    t, at = time.perf_counter(), time.time()
    modules = [m for m in os.environ.get(ENV, "").split(",") if m]
    try:
        report = warm_up(modules, gpu=True)
    except Exception as e:  # recorded; the first task that needs the module raises it with a traceback
        report = {"error": f"{type(e).__name__}: {e}"}
    PRELOADED.update(report, total_s=time.perf_counter() - t, started_at=at)
