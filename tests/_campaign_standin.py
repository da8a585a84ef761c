"""A stand-in campaign experiment for the CPU tests: no GPU, the real checkpoint and layout loop.

Each split size is one "layout" that takes ``layout_s`` seconds; its rows record the
worker process that measured them (``worker_pid``), so a test can tell rows kept in a
checkpoint from rows measured again.
"""

from __future__ import annotations

import os
import time

from gcexplore.experiments.gate import gate_kind, phase_totals
from gcexplore.experiments.runner import Checkpoint, host_add, run_layouts
from gcexplore.schema import frame, new_run_id

SIZES = (8, 16, 24, 32)


def pair(device=0, **kwargs):
    """A factory: two plain callables standing in for workloads."""
    return {"a": lambda *, stream: None, "b": lambda *, stream: None}


def broken_factory(device=0, **kwargs):
    raise RuntimeError("the factory broke on purpose")


def standin(wls, *, splits, device, checkpoint, layout_s: float = 0.05, fail: bool = False,
            repeats: int = 2, partition_s: float = 0.0, **options):
    sizes = list(SIZES if splits is None else ([splits] if isinstance(splits, int) else splits))
    names = list(wls)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "?")
    attrs = {"device_name": "stand-in (no GPU)", "device_uuid": f"standin-{visible}", "device_sm_count": 40,
             "device_index": 0, "driver_version": "none", "cuda_core_version": "none", "run_id": new_run_id()}
    ckpt = Checkpoint(checkpoint, {"kind": "standin", "workloads": names, "sizes": sizes})

    def measure(k, out):
        t = time.perf_counter()
        time.sleep(partition_s)  # a host-side step outside the repetitions, accounted as a sweep's partitions are
        host_add("partitions", time.perf_counter() - t)
        time.sleep(layout_s)
        if fail:
            raise RuntimeError("the stand-in task failed on purpose")
        for rep in range(repeats):
            for i, name in enumerate(names):
                out.append({"layout": f"{k}+{40 - k}", "split_sm_count": k, "mode": "concurrent", "rep": rep,
                            "workload": name, "partition": f"p{i}", "sm_count": k if i == 0 else 40 - k,
                            "duration_ms": float(k + rep), "makespan_ms": float(k + rep),
                            "start_ms": 0.0, "worker_pid": os.getpid()})

    def build(rows):
        # an engine's record as a sweep's has it: the gate this worker's environment names, phases per repetition
        reps = len(rows) // max(1, len(names))
        host = {**phase_totals(), "reps": reps, "queued": max(0, reps - 1), "gate_idle_s": 0.001 * reps,
                "enqueue_s": 0.002 * reps, "wait_s": 0.003 * reps, "collect_s": 0.0005 * reps}
        df = frame(rows, "sweep", {**attrs, "kind": "sweep", "gate": gate_kind(), "gate_note": "", "engine_phases": host})
        df["worker_pid"] = [r["worker_pid"] for r in rows]
        return df

    rows, _ = run_layouts([(str(k), k) for k in sizes], measure, build=build, checkpoint=ckpt)
    return build(rows)
