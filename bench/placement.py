"""Does a re-split per round put a partition on other SMs? (placement as a cause of run-to-run noise)

For each size in ``--sizes`` and each way of splitting (``reuse``: ``partitions.split``'s default,
which hands a closed split's green contexts to the next split of the same layout, as every round of
an experiment does; ``fresh``: ``reuse=False``, new green contexts each round), ``--rounds`` rounds:
split, read the SM ids of the partition and of the remainder with the ``%smid`` probe (launched
afresh each round, not the cached set), and time a bf16 GEMM chain on the partition (median of
``--reps``, when PyTorch is here). Reports per size and way: how many distinct SM sets the rounds
saw, the SMs that ever changed, and the spread (sd of log) of the round medians. Run on the GPU
machine from the project root: ``python3 bench/placement.py --out DIR`` (about 10 s on an H100);
writes ``placement.json`` and ``placement_rounds.csv``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

import gcexplore
from gcexplore.device import partitions
from gcexplore.device.driver import use
from gcexplore.device.kernels import sm_ids_on
from gcexplore.cli.needs import needs


def gemm_timer(device: int):
    """A function timing ``reps`` launches of a 16-matmul bf16 chain on a stream (ms each), or None."""
    try:
        import torch
    except ImportError:
        return None
    dev = f"cuda:{device}"
    a = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16) / 45.0
    x = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)

    def time_on(stream, reps: int) -> list[float]:
        ts = torch.cuda.get_stream_from_external(int(stream.handle), device=device)
        out = []
        with torch.cuda.stream(ts):
            for i in range(reps + 1):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record(ts)
                t = x
                for _ in range(16):
                    t = torch.matmul(t, a)
                e1.record(ts)
                e1.synchronize()
                if i:  # the first launch on a new stream is a warm-up
                    out.append(e0.elapsed_time(e1))
        return out

    return time_on


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="placement_out")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--sizes", default="16,64,96")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    needs()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info = gcexplore.device_info(args.device)
    timer = gemm_timer(args.device)
    rows, summary = [], {"device": info.name, "sm_count": info.sm_count, "driver": getattr(info, "driver_version", None),
                         "sizes": {}}
    for k in [int(s) for s in args.sizes.split(",") if s]:
        for way in ("reuse", "fresh"):
            sets, rem_sets, meds = [], [], []
            for r in range(args.rounds):
                with partitions.split([k], device=args.device, reuse=way == "reuse") as parts:
                    with use(args.device) as dev:
                        ids = sm_ids_on(parts[0].stream, dev, info.sm_count)
                        rem = sm_ids_on(parts.remainder.stream, dev, info.sm_count) if parts.remainder else frozenset()
                    t = timer(parts[0].stream, args.reps) if timer else []
                    reused = bool(parts.reused)
                sets.append(ids)
                rem_sets.append(rem)
                med = float(np.median(t)) if t else math.nan
                meds.append(med)
                rows.append({"sm_count": k, "way": way, "round": r, "reused_contexts": reused, "granted": len(ids),
                             "sm_ids": " ".join(map(str, sorted(ids))), "remainder_ids": len(rem),
                             "overlap_with_remainder": len(ids & rem), "gemm_median_ms": med})
            changed = sorted(set().union(*sets) - set.intersection(*map(set, sets)))
            lm = np.log([m for m in meds if math.isfinite(m)])
            summary["sizes"].setdefault(str(k), {})[way] = {
                "rounds": args.rounds, "distinct_sm_sets": len(set(sets)), "sms_that_changed": len(changed),
                "sm_ids_round0": sorted(sets[0]), "distinct_remainder_sets": len(set(rem_sets)),
                "gemm_round_sd": float(np.std(lm, ddof=1)) if lm.size > 1 else math.nan,
                "gemm_median_ms": float(np.exp(lm.mean())) if lm.size else math.nan}
            print(k, way, json.dumps({x: y for x, y in summary["sizes"][str(k)][way].items() if x != "sm_ids_round0"}),
                  flush=True)
    import csv

    with open(out / "placement_rounds.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (out / "placement.json").write_text(json.dumps(summary, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
