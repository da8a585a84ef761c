"""The MPS mechanism: each workload in its own client process of gcexplore's daemon
(:mod:`.mps`), at an active-thread percentage, the processes released together.

:func:`run_clients` starts one spawned process per workload (:func:`client_main`); each sets its
MPS environment before CUDA starts, builds its workload from its recipe (:mod:`.pair`), warms it up,
probes which SMs its stream reaches (``%smid``), then waits on a host barrier; every repetition
starts at the same barrier, and the client stamps ``%globaltimer`` on its stream before and after its
workload (a zero-length ``gcx_spin`` writes the GPU's clock) beside a pair of events. The stamps are
aligned on the GPU's clock by :func:`.align.align_clients`.
"""

from __future__ import annotations

import os
import queue as queue_module
from collections.abc import Mapping

__all__ = ["client_main", "run_clients"]

_BARRIER_S = 120.0  # a client that never arrives (it failed building) releases the others with an error


def _measure(job: dict, barrier) -> dict:
    import numpy as np
    from cuda.core import Device, EventOptions, LaunchConfig, StreamOptions, launch

    from ..device.driver import check, driver_module
    from ..device.kernels import builtin_kernel, sm_ids_on
    from .pair import build_pair

    dev = Device(job["device"])
    dev.set_current()
    wls = build_pair(job["specs"], device=job["device"])
    try:
        wl = wls[job["name"]]
        stream = dev.create_stream(options=StreamOptions(nonblocking=True))
        sms = sorted(sm_ids_on(stream, dev, int(dev.properties.multiprocessor_count)))
        spin, one = builtin_kernel(dev, "gcx_spin"), LaunchConfig(grid=1, block=32)
        reps = int(job["repeats"])
        buf = dev.allocate(2 * reps * 3 * 8, stream=stream)
        base, timed = int(buf.handle), EventOptions(timing_enabled=True)
        for _ in range(int(job["warmup"])):
            wl(stream=stream)
        stream.sync()
        barrier.wait(_BARRIER_S)  # both built and warm
        events = []
        for r in range(reps):
            barrier.wait(_BARRIER_S)
            e0 = stream.record(options=timed)
            launch(stream, one, spin, np.uint64(0), np.uint64(base + 2 * r * 24))
            wl(stream=stream)
            launch(stream, one, spin, np.uint64(0), np.uint64(base + (2 * r + 1) * 24))
            e1 = stream.record(options=timed)
            e1.sync()
            events.append(float(e1 - e0))
        host = np.zeros(2 * reps * 3, dtype=np.uint64)
        check(
            driver_module().cuMemcpyDtoHAsync(host.ctypes.data, base, host.nbytes, int(stream.handle)),
            "cuMemcpyDtoHAsync",
        )
        stream.sync()
        buf.close(stream)
        rec = host.reshape(2 * reps, 3)
        # the first spin's end and the second's start: the workload's span on the GPU's clock
        stamps = [(int(rec[2 * r, 2]), int(rec[2 * r + 1, 1]), events[r]) for r in range(reps)]
        return {"name": job["name"], "sms": sms, "stamps": stamps, "error": None}
    finally:
        for w in wls.values():
            w.close()


def client_main(job: dict, barrier, out) -> None:
    """One client process: ``job`` holds ``env``, ``specs``, ``name``, ``device``, ``repeats``,
    ``warmup``; the result (or the error) goes to the queue ``out``."""
    os.environ.update(job["env"])  # before CUDA starts in this process: MPS reads it at context creation
    try:
        out.put(_measure(job, barrier))
    except BaseException as e:  # noqa: BLE001 (the parent reports it; the other client must not wait)
        barrier.abort()
        out.put({"name": job["name"], "error": f"{type(e).__name__}: {e}"})


def run_clients(
    specs: dict, pcts: Mapping[str, float], daemon, *, device: int, repeats: int, warmup: int, timeout_s: float = 300.0
) -> dict[str, dict]:
    """``{name: {"sms": [...], "stamps": [...]}}`` from one client per workload at ``pcts[name]`` %.

    Raises
    ------
    RuntimeError
        A client failed (its error is in the message) or did not report within ``timeout_s``.
    """
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # a fresh process: CUDA and the MPS variables start there
    barrier, out = ctx.Barrier(len(pcts)), ctx.Queue()
    procs = [
        ctx.Process(
            target=client_main,
            daemon=True,
            args=(
                {
                    "env": daemon.client_env(pct),
                    "specs": specs,
                    "name": name,
                    "device": device,
                    "repeats": repeats,
                    "warmup": warmup,
                },
                barrier,
                out,
            ),
        )
        for name, pct in pcts.items()
    ]
    got: dict[str, dict] = {}
    try:
        for p in procs:
            p.start()
        for _ in procs:
            r = out.get(timeout=timeout_s)
            got[r["name"]] = r
    except queue_module.Empty:
        raise RuntimeError(
            f"MPS clients {sorted(set(pcts) - set(got))} did not report within {timeout_s:g} s"
        ) from None
    finally:
        for p in procs:  # only the processes started here
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
    errors = {n: r["error"] for n, r in got.items() if r.get("error")}
    if errors:
        raise RuntimeError("MPS client(s) failed: " + "; ".join(f"{n}: {e}" for n, e in errors.items()))
    return got
