"""Record the results that ship in gcexplore/data/ (run on the GPU, then commit the files).

Writes, with :func:`gcexplore.results.save`, into the folder given on the command line:

- ``sweep.parquet``: the built-in compute + memory pair over every valid split;
- ``scaling.parquet``: scaling curves of both built-ins (every valid size and the whole device);
- ``occupancy.parquet``: per-block SM ids and times of the pair on 24 + 108 SMs;
- ``isolation.parquet``: the latency kernel on a 16-SM partition next to the compute kernel;
- ``torch_sweep.parquet``: an 8192^3 bf16 PyTorch matmul + sigmoid over 512 MiB, every split;
- ``trace.parquet`` and ``trace_overlap.parquet``: that pair at 24+108 in all four modes with
  the CUPTI kernel trace on (needs cupti-python): the trace, and the event rows of the same run.

Total GPU time is about a minute on an H100. Each result's summary is printed.

Run from the project root: ``python3 bench/record.py gcexplore/data`` (``--only trace`` records
just the trace).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

import gcexplore
from gcexplore import results
from gcexplore import workloads as W


def _say(name: str, df: pd.DataFrame, t0: float) -> None:
    print(f"\n== {name}: {len(df)} rows in {time.perf_counter() - t0:.1f} s on {df.attrs['device_name']}")


def _torch_pair(dev: int):
    from torch_pair import matmul_sigmoid

    return matmul_sigmoid(dev)[1]


_TORCH_NOTES = "matmul: 8192^3 bf16 torch.matmul; sigmoid: torch.sigmoid over 512 MiB fp32"


def _record_trace(out: Path, ext: str, dev: int, reps: int) -> None:
    """The torch pair at 24+108, all four modes, with the kernel trace."""
    t0 = time.perf_counter()
    df, tr = gcexplore.profile_overlap(_torch_pair(dev), [24], repeats=reps, device=dev, trace=True)
    for frame in (df, tr):
        frame.attrs["workload_notes"] = _TORCH_NOTES
    results.save(tr, out / ("trace" + ext))
    results.save(df, out / ("trace_overlap" + ext))
    _say("trace", tr, t0)
    print("diagnostics:", tr.attrs["trace_diagnostics"])
    s = gcexplore.summarize(df, trace=tr)
    print(s[["mode", "workload", "partition", "median_ms", "event_median_ms", "busy_span_median_ms",
             "gpu_busy_median_ms", "wait_median_ms", "kernels_per_rep", "throughput_tflops",
             "bandwidth_gbs"]].to_string(index=False))
    k = tr.drop_duplicates(["mode", "workload", "name"])
    print(k[["mode", "workload", "partition", "name", "grid_x", "grid_y", "block_x", "cluster_x",
             "max_active_clusters", "registers_per_thread"]].to_string(index=False, max_colwidth=70))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="folder for the .parquet files (e.g. gcexplore/data)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--skip-torch", action="store_true", help="leave out torch_sweep and the trace")
    ap.add_argument("--only", choices=("all", "trace"), default="all", help="record everything or the trace")
    ap.add_argument("--format", choices=("parquet", "csv"), default="parquet",
                    help="csv where pyarrow is absent (convert with results.load + results.save)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    ext = "." + args.format
    out.mkdir(parents=True, exist_ok=True)
    dev, reps = args.device, args.repeats
    pd.set_option("display.width", 200)
    pd.set_option("display.float_format", "{:.4f}".format)
    if args.only == "trace":
        _record_trace(out, ext, dev, reps)
        return 0

    compute, memory = W.compute(device=dev), W.memory(device=dev)
    pair = {"compute": compute, "memory": memory}

    t0 = time.perf_counter()
    sweep = gcexplore.sweep(pair, repeats=reps, device=dev, progress=False)
    results.save(sweep, out / ("sweep" + ext))
    _say("sweep", sweep, t0)
    best = gcexplore.best_split(sweep)
    print(best.to_string())

    t0 = time.perf_counter()
    curves = [gcexplore.scaling(w, repeats=reps, device=dev, progress=False) for w in (compute, memory)]
    scaling = pd.concat(curves, ignore_index=True)
    scaling.attrs = dict(curves[0].attrs, workloads=["compute", "memory"])
    results.save(scaling, out / ("scaling" + ext))
    _say("scaling", scaling, t0)
    s = gcexplore.summarize(scaling)
    print(s[["workload", "sm_count", "median_ms", "speedup", "parallel_efficiency"]].to_string(index=False))

    t0 = time.perf_counter()
    occ = gcexplore.occupancy(pair, [24], device=dev)
    results.save(occ, out / ("occupancy" + ext))
    _say("occupancy", occ, t0)
    print(occ.groupby("partition")["sm_id"].nunique().to_string())

    t0 = time.perf_counter()
    latency = W.latency(device=dev)
    iso = gcexplore.isolation(latency, compute, 16, repeats=reps, device=dev)
    latency.close()
    results.save(iso, out / ("isolation" + ext))
    _say("isolation", iso, t0)
    print(gcexplore.summarize(iso)[["scenario", "role", "sm_count", "median_ms", "p10_ms", "p90_ms",
                                    "slowdown_vs_alone"]].to_string(index=False))
    compute.close()
    memory.close()

    if not args.skip_torch:
        t0 = time.perf_counter()
        ts = gcexplore.sweep(_torch_pair(dev), repeats=reps, device=dev, progress=False)
        ts.attrs["workload_notes"] = _TORCH_NOTES
        results.save(ts, out / ("torch_sweep" + ext))
        _say("torch_sweep", ts, t0)
        print(gcexplore.best_split(ts).to_string())
        _record_trace(out, ext, dev, reps)
    print(f"\nwrote {', '.join(sorted(p.name for p in out.glob('*' + ext)))} to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
