"""Which CUPTI this process loaded, what it offers, and kernel attribution on the PyTorch pair.

Prints the loaded libcupti (version, file, how the version was found), the feature table
(offered, or the sentence that refuses it), then traces the design's PyTorch pair (bf16
matmul + sigmoid) at 24 + 108 SMs in every mode and prints, per mode and workload, the
kernels traced, the share that ran in the partition the workload was placed on and the
SM count CUPTI's context records give for it; then what ``tpc_map`` and
``dram_timeline`` do with this CUPTI (a result, or their one sentence).

Goals (issue 16): with any CUPTI 13.x, 100% of kernels in the right partition and SM
counts 24 / 108 / 132; with CUPTI older than 13.2 / 13.3 the TPC map / PM sampling refuse
in one sentence, with 13.4 they work.

Run from the project root on the GPU machine:
``python3 bench/cupti_features.py --out DIR`` (writes ``cupti_features.json`` and ``trace.parquet``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from gcexplore.trace.collector import preload_cupti

preload_cupti()  # the newest CUPTI in the environment, before PyTorch loads its own

import gcexplore
from gcexplore.analysis import trace as busy
from gcexplore.trace import features as F
from gcexplore.cli.needs import needs  # noqa: E402


def trace_pair(*, n: int = 8192, mib: int = 512, repeats: int = 5, device: int = 0):
    """``(df, trace)`` of the PyTorch pair at 24 + rest, every mode, fresh green contexts."""
    from gcexplore.workloads.torch_pairs import matmul_sigmoid

    gcexplore.release_contexts()  # new contexts, so CUPTI reports their creation
    wls = matmul_sigmoid(device, n=n, mib=mib)
    return gcexplore.profile_overlap(wls, [24], repeats=repeats, warmup=1, trace=True, device=device)


def what_refuses(trace: pd.DataFrame) -> dict[str, str]:
    """The TPC map and PM sampling with this CUPTI: a short result, or the sentence they raise."""
    out = {}
    try:
        t = busy.tpc_map(trace)
        out["tpc_map"] = f"offered: {t.groupby('partition')['tpc'].nunique().to_dict()} TPCs"
    except ValueError as e:
        out["tpc_map"] = f"refused: {e}"
    refused = trace.attrs.get("cupti_refused", {}).get("pm_sampling")
    if refused:
        try:
            gcexplore.dram_timeline({"m24": "memory", "m108": "memory"}, [24], repeats=1, warmup=0)
            out["pm_sampling"] = "NOT refused although the trace says it should be"
        except gcexplore.TraceUnavailable as e:
            out["pm_sampling"] = f"refused: {e}"
    else:
        out["pm_sampling"] = "offered (bench/pm_sampling.py and tests/test_pm_gpu.py measure it)"
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    needs(modules=("torch",))
    args.out.mkdir(parents=True, exist_ok=True)
    pd.set_option("display.width", 200)
    df, tr = trace_pair(repeats=args.repeats)
    info = tr.attrs["cupti"]
    print(f"loaded: {tr.attrs['cupti_version']}")
    refused = tr.attrs["cupti_refused"]
    for name in F.FEATURES:
        print(f"  {name:13s} {'offered' if name not in refused else 'refused: ' + refused[name]}")
    table = busy.attribution(df, tr)
    print(table.to_string(index=False))
    others = what_refuses(tr)
    for name, text in others.items():
        print(f"{name}: {text}")
    conc = table[table["mode"] == "concurrent"]
    sms = dict(zip(conc["partition"], conc["cupti_sm_count"]))
    ok = bool((table["right_pct"] == 100).all()) and sms == {"p0": 24, "remainder": gcexplore.device_info(0).sm_count - 24}
    pct = float((table["right_pct"] * table["kernels"]).sum() / table["kernels"].sum())
    print(f"\n{df.attrs['device_name']}, CUPTI {info['version']} (cupti-python {info['package']}): "
          f"{pct:.1f}% of {int(table['kernels'].sum())} kernels in the right partition; CUPTI's SM counts "
          f"{sms}; goals {'met' if ok else 'NOT met'}")
    from gcexplore.results import save

    save(tr, args.out / "trace.parquet")
    (args.out / "cupti_features.json").write_text(json.dumps(
        {"cupti": info, "cupti_version": tr.attrs["cupti_version"], "refused": refused, "others": others,
         "attribution": table.to_dict("records"), "attributed_pct": pct, "goals_met": ok}, indent=1, default=str))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
