"""The PM sampling child process of :func:`gcexplore.pm.dram_timeline`.

``python -m gcexplore._pm_child SPEC OUT``: reads the request from SPEC (JSON), runs
the overlap with the kernel trace on while CUPTI's PM sampler runs, and writes
``result.parquet``, ``trace.parquet`` and ``samples.npz`` to OUT; on an error it writes
``error.json`` (type and message) and exits with status 3. A crash inside CUPTI ends
this process only.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import numpy as np

_BUFFER_BYTES = 256 << 20


def _workloads(spec: dict):
    from ..workloads.spec import as_workloads

    if "factory" in spec:
        module, _, func = spec["factory"].partition(":")
        return as_workloads(getattr(importlib.import_module(module), func)(), device=spec["device"])
    return as_workloads(spec["names"], device=spec["device"])


def run(spec: dict, out: Path) -> None:
    from ..trace.collector import TraceUnavailable, preload_cupti, require_cupti

    preload_cupti()
    cupti = require_cupti()
    from ..device.driver import device_count
    from ..trace.features import describe, refusal

    device_count()  # the driver loaded, so the loaded CUPTI can be asked its version
    refused = refusal("pm_sampling", describe(cupti))
    if refused:
        raise TraceUnavailable(refused)  # before CUPTI's profiler is touched: it gave ERROR_INVALID_PARAMETER
    from cupti import pm_sampling

    from .pm import MAX_SAMPLES
    from .overlap import profile_overlap
    from ..results.io import save

    items, owned = _workloads(spec)
    try:
        wls = {w.name: w for w in items}
        kw = {"modes": spec["modes"], "device": spec["device"]}
        profile_overlap(wls, spec["split"], repeats=1, warmup=1, **kw)  # compile and touch everything first
        col = pm_sampling.Collector(spec["device"])
        col.enable()
        try:
            col.configure(metrics=spec["metrics"], sampling_interval=spec["interval_ns"],
                          hardware_buffer_size=_BUFFER_BYTES)
            col.start()
            try:
                result, trace = profile_overlap(wls, spec["split"], repeats=spec["repeats"],
                                                warmup=spec["warmup"], trace=True, **kw)
            finally:
                col.stop()
            data = col.decode(max_samples=MAX_SAMPLES)
            populated = data.num_populated_samples
            # cupti's CounterData.__getitem__ is unannotated (a slice gives a list); iterating it yields Samples
            samples = [(s.start_timestamp, s.end_timestamp, list(s.metric_values)) for s in data]  # pyright: ignore[reportAttributeAccessIssue]
        finally:
            col.disable()
    finally:
        for w in owned:
            w.close()
    save(result, out / "result.parquet")
    save(trace, out / "trace.parquet")
    np.savez(out / "samples.npz", start=np.array([s[0] for s in samples], dtype=np.int64),
             end=np.array([s[1] for s in samples], dtype=np.int64),
             values=np.array([s[2] for s in samples], dtype=float).reshape(len(samples), len(spec["metrics"])),
             metrics=np.array(spec["metrics"]), populated=np.array(populated))


def main(argv: list[str]) -> int:
    spec_path, out = Path(argv[0]), Path(argv[1])
    try:
        run(json.loads(spec_path.read_text()), out)
    except Exception as e:  # noqa: BLE001 - relayed to the parent as type and message
        (out / "error.json").write_text(json.dumps({"type": type(e).__name__, "message": str(e)}))
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
