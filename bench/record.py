"""Record the results that ship in gcexplore/data/ (run on the GPU, then commit the files).

Writes, with :func:`gcexplore.results.save`, into the folder given on the command line:

- ``sweep.parquet``: the built-in compute + memory pair over every valid split;
- ``scaling.parquet``: scaling curves of both built-ins (every valid size and the whole device);
- ``occupancy.parquet``: per-block SM ids and times of the pair on 24 + 108 SMs;
- ``isolation.parquet``: the latency kernel on a 16-SM partition next to the compute kernel;
- ``torch_sweep.parquet``: an 8192^3 bf16 PyTorch matmul + sigmoid over 512 MiB, every split.

Total GPU time is about a minute on an H100. Each result's summary is printed.

Run from the project root: ``python3 bench/record.py gcexplore/data``.
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="folder for the .parquet files (e.g. gcexplore/data)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--skip-torch", action="store_true", help="leave out torch_sweep")
    ap.add_argument("--format", choices=("parquet", "csv"), default="parquet",
                    help="csv where pyarrow is absent (convert with results.load + results.save)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    ext = "." + args.format
    out.mkdir(parents=True, exist_ok=True)
    dev, reps = args.device, args.repeats
    pd.set_option("display.width", 200)
    pd.set_option("display.float_format", "{:.4f}".format)

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
        from torch_pair import matmul_sigmoid

        t0 = time.perf_counter()
        _, wls = matmul_sigmoid(dev)
        ts = gcexplore.sweep(wls, repeats=reps, device=dev, progress=False)
        ts.attrs["workload_notes"] = "matmul: 8192^3 bf16 torch.matmul; sigmoid: torch.sigmoid over 512 MiB fp32"
        results.save(ts, out / ("torch_sweep" + ext))
        _say("torch_sweep", ts, t0)
        print(gcexplore.best_split(ts).to_string())
    print(f"\nwrote {', '.join(sorted(p.name for p in out.glob('*' + ext)))} to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
