"""compare_until_decided on a real GPU: null pairs and 3% shifts of compare_real's GEMM chain.

Each side's run is its own :func:`gcexplore.scaling` call (fresh workload, engine, partitions, run
id) at 16, 64, 96, 128 SMs and the whole device, 15 rounds of 1 repetition after 1 warm-up (the
setting of compare_real's independent evaluation). Per pair, :func:`gcexplore.compare_until_decided`
measures both sides again, only at the sizes still undecided, up to ``--max-runs`` runs per side,
with the card's shipped floor. Reported: false FAST/SLOW on null rows, SLOW share on shifted rows,
for the first run alone (compare at its usual level: today's answer) and after the looks, the runs
per side used and the GPU time against one run per side. Writes ``summary.json`` and
``until_raw.parquet`` (every side's repetitions) into ``--out``. Run on the GPU machine from the
project root: ``python3 bench/until_decided.py --out DIR`` (about 40 s on an H100).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


import gcexplore
from gcexplore.analysis import sequential as calibration
from gcexplore.analysis.sequential import logged, run_pairs, summarize
from gcexplore.workloads.examples import shifted


def measurer(kind, shift, args, total, log, tag, what=""):
    """``measure(sizes)`` for compare_until_decided: one new run of ``kind`` at those sizes (logged)."""
    def measure(sizes):
        want = list(args.sizes) if sizes is None else list(sizes)
        part = [k for k in want if k < total] or [min(args.sizes)]  # scaling needs one partition size
        wl = shifted(kind, shift, args.device, args.redraw)
        try:
            return gcexplore.scaling(wl, part, whole_device_too=sizes is None or total in sizes, device=args.device,
                                     repeats=args.repeats, rounds=args.rounds, warmup=args.warmup, progress=False)
        finally:
            wl.close()
            if "torch" in sys.modules:
                sys.modules["torch"].cuda.empty_cache()
    return logged(measure, log, tag, what)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="until_decided_out")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--kind", default="gemm")
    ap.add_argument("--nulls", type=int, default=4)
    ap.add_argument("--shifts", type=int, default=6)
    ap.add_argument("--shift", type=float, default=0.03)
    ap.add_argument("--max-runs", type=int, default=4)
    ap.add_argument("--sizes", default="16,64,96,128")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--redraw", action="store_true", help="PyTorch kinds allocate afresh every round (setup=)")
    ap.add_argument("--budget-s", type=float, default=0.0, help="stop starting pairs after this many seconds (0: none)")
    ap.add_argument("--replay", metavar="RAW", help="no GPU: replay a recorded until_raw.parquet with --max-runs "
                                                    "and --run-sd (the floor's run part) as given")
    ap.add_argument("--run-sd", type=float, help="with --replay: the floor's run part (default: the shipped floor)")
    ap.add_argument("--use-rounds", type=int, default=0, help="with --replay: only each run's first N rounds")
    args = ap.parse_args(argv)
    if args.replay:
        return replay(args)
    args.sizes = [int(x) for x in args.sizes.split(",") if x]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info = gcexplore.device_info(args.device)
    total = info.sm_count
    wl = shifted(args.kind, 0.0, args.device, args.redraw)  # libraries loaded, kernels compiled: untimed
    try:
        gcexplore.scaling(wl, args.sizes, device=args.device, repeats=3, rounds=1, warmup=1, progress=False)
    finally:
        wl.close()
    nulls, shifts = [("null", 0.0)] * args.nulls, [("shift", args.shift)] * args.shifts
    order = [x for i in range(max(len(nulls), len(shifts))) for x in (nulls[i:i + 1] + shifts[i:i + 1])]  # interleaved

    def make(i, side, shift, log):
        return measurer(args.kind, shift, args, total, log, f"{i}{side}", order[i][0])
    pairs = run_pairs(order, make, args.max_runs, args.budget_s, out, echo=lambda line: print(line, flush=True))
    summary = {"device": info.name, "args": vars(args), "pairs": pairs, **summarize(pairs)}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(json.dumps({k: summary.get(k) for k in ("device", "null", "shift")}, indent=1, default=str))
    return 0


def replay(args) -> int:
    """The decisions again from a recording, with other settings (no GPU)."""
    summary = calibration.replay(args.replay, max_runs=args.max_runs, run_sd=args.run_sd, use_rounds=args.use_rounds,
                                 echo=lambda line: print(line, flush=True))
    print(json.dumps(summary, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
