"""Attribution: which partition each kernel of three libraries' workloads ran in.

A CuPy elementwise workload on 16 SMs, the built-in compute kernel (cuda.core launch)
on 32 SMs and a PyTorch bf16 matmul on the 84-SM remainder, in every mode, traced with
CUPTI. Prints, per mode and workload, the kernels traced and the share that ran in the
partition the workload was placed on (context id), and the green-context records.

Goals (issue 9): 100% of kernels in the right partition; green-context records give 16,
32 and 84 SMs.

Run from the project root on the GPU machine: ``python3 bench/trace_attribution.py``.
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

import gcexplore
from gcexplore import workloads as W
from gcexplore.trace.collector import preload_cupti
from gcexplore.cli.needs import needs

preload_cupti()  # CUPTI 13.4 before PyTorch's 13.0: green-context records


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args(argv)
    needs(modules=("torch", "cupy"))
    import cupy
    import torch

    pd.set_option("display.width", 200)
    gcexplore.release_contexts()  # new green contexts, so CUPTI reports their creation
    x = cupy.arange(1 << 24, dtype=cupy.float32)
    n = 8192
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    core = W.compute()
    wls = {"cupy": W.from_cupy(lambda: cupy.sqrt(x * 2.0 + 1.0), name="cupy"), "cuda_core": core,
           "torch": W.from_torch(lambda: torch.matmul(a, b, out=c), name="torch")}
    try:
        df, tr = gcexplore.profile_overlap(wls, [16, 32], repeats=args.repeats, trace=True)
    finally:
        core.close()
    print(f"{df.attrs['device_name']}, layout {df['layout'].iloc[0]}; {tr.attrs['cupti_version']}")
    print("diagnostics:", tr.attrs["trace_diagnostics"])
    placed = {(r.mode, r.workload): r.partition for r in df.itertuples()}
    tr = tr.assign(right=[placed[(r.mode, r.workload)] == r.partition for r in tr.itertuples()])
    table = tr.groupby(["mode", "workload"]).agg(kernels=("right", "size"), right_pct=("right", "mean"),
                                                  partition=("partition", "first"),
                                                  names=("name", "nunique"))
    table["right_pct"] *= 100
    print(table.to_string())
    greens = pd.DataFrame(tr.attrs["green_contexts"])
    print(greens[[c for c in ("partition", "context_id", "source", "num_multiprocessors", "num_tpcs",
                              "parent_context_id", "logical_tpc_mask") if c in greens]].to_string(index=False))
    sms = {g["partition"]: g.get("num_multiprocessors") for g in tr.attrs["green_contexts"]
           if g.get("source") == "GREEN_CONTEXT"}
    ok = bool(tr["right"].all()) and sms == {"p0": 16, "p1": 32, "remainder": 84}
    print(f"\nkernels in the right partition: {100 * tr['right'].mean():.1f}%; green-context SMs {sms}; "
          f"goals {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
