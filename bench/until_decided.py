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
import time
from pathlib import Path

import numpy as np
import pandas as pd

import gcexplore
from compare_real import build, gpu_ms  # noqa: E402 (bench/ is the script's own folder)
from gcexplore.analysis.comparison import compare
from gcexplore.analysis.sequential import compare_until_decided


def measurer(kind, shift, args, total, log, tag, what=""):
    """``measure(sizes)`` for compare_until_decided: one new run of ``kind`` at those sizes."""
    def measure(sizes):
        want = list(args.sizes) if sizes is None else list(sizes)
        part = [k for k in want if k < total] or [min(args.sizes)]  # scaling needs one partition size
        wl = build(kind, shift, args.device, args.redraw)
        try:
            df = gcexplore.scaling(wl, part, whole_device_too=sizes is None or total in sizes, device=args.device,
                                   repeats=args.repeats, rounds=args.rounds, warmup=args.warmup, progress=False)
        finally:
            wl.close()
            if "torch" in sys.modules:
                sys.modules["torch"].cuda.empty_cache()
        log.append(df.assign(tag=tag, what=what, call=sum(1 for x in log if x["tag"].iloc[0] == tag)))
        return df
    return measure


class RanOut(Exception):
    """A replayed side has no further recorded run."""


def replayer(raw: pd.DataFrame, tag: str, log: list):
    """``measure(sizes)`` over a recorded side: its next recorded run, at the sizes asked for that
    it measured (a size it did not measure then keeps its earlier runs only)."""
    calls = [d.drop(columns=["tag", "call", "what"], errors="ignore")
             for _, d in raw[raw["tag"] == tag].groupby("call", sort=True)]

    def measure(sizes):
        n = sum(1 for x in log if x["tag"].iloc[0] == tag)
        if n >= len(calls):
            raise RanOut(tag)
        df = calls[n]
        if sizes is not None:  # what measurer() would have measured: a partition size always
            total, smallest = int(raw["sm_count"].max()), int(raw["sm_count"].min())
            keep = [k for k in sizes if k < total] or [smallest]
            df = df[df["sm_count"].isin(keep + ([total] if total in sizes else []))]
        if df.empty:
            raise RanOut(tag)
        df = df.copy()
        df.attrs.update(kind="scaling", device_name=str(df["device_name"].iloc[0]))
        log.append(df.assign(tag=tag, call=n))
        return df
    return measure


def verdicts(c) -> pd.Series:
    return c.table.loc[c.table["present"] == "both", "verdict"]


def run_pairs(order, make, max_runs: int, budget_s: float, out: Path | None, floor=None) -> list[dict]:
    """compare_until_decided on each (what, shift) of ``order``; ``make(i, side, shift, log)`` gives a
    side's measure callable. One record per pair (a replayed pair that ran out is left out)."""
    log: list[pd.DataFrame] = []
    pairs, t0 = [], time.perf_counter()
    for i, (what, shift) in enumerate(order):
        if budget_s and time.perf_counter() - t0 > budget_s:
            print(f"budget of {budget_s} s spent after {i} pairs", flush=True)
            break
        try:
            c = compare_until_decided(make(i, "a", 0.0, log), make(i, "b", shift, log), max_runs=max_runs, floor=floor)
        except RanOut as e:
            print(f"pair {i}: the recording has no further run of side {e}; left out", flush=True)
            continue
        sides = {t: [d for d in log if d["tag"].iloc[0] == t] for t in (f"{i}a", f"{i}b")}
        first = compare(sides[f"{i}a"][0], sides[f"{i}b"][0], floor=floor)  # the first run alone
        v, v1 = verdicts(c), verdicts(first)
        pairs.append({"pair": i, "what": what, "rows": len(v), "runs_per_side": c.settings["runs_per_side"],
                      "verdicts": v.value_counts().to_dict(), "first_run_verdicts": v1.value_counts().to_dict(),
                      "looks": c.settings["looks"], "gpu_ms": sum(gpu_ms(d) for s in sides.values() for d in s),
                      "gpu_ms_one_run": sum(gpu_ms(s[0]) for s in sides.values()),
                      "floor": c.settings["floor_text"], "ratio_median": float(c.table["ratio"].median())})
        print(json.dumps(pairs[-1], default=str), flush=True)
        if out is not None:
            pd.concat(log, ignore_index=True).to_parquet(out / "until_raw.parquet")  # kept if stopped later
    return pairs


def summarize(pairs: list[dict]) -> dict:
    summary = {}
    for what in ("null", "shift"):
        ps = [p for p in pairs if p["what"] == what]
        rows = sum(p["rows"] for p in ps)
        if not rows:
            continue
        count = lambda key, vs: sum(p[key].get(x, 0) for p in ps for x in vs)  # noqa: E731
        summary[what] = {"pairs": len(ps), "rows": rows,
                         "fast_slow": count("verdicts", ("FAST", "SLOW")) / rows,
                         "slow": count("verdicts", ("SLOW",)) / rows,
                         "first_run_fast_slow": count("first_run_verdicts", ("FAST", "SLOW")) / rows,
                         "first_run_slow": count("first_run_verdicts", ("SLOW",)) / rows,
                         "runs_per_side_mean": float(np.mean([p["runs_per_side"] for p in ps])),
                         "gpu_x_one_run": float(sum(p["gpu_ms"] for p in ps) / sum(p["gpu_ms_one_run"] for p in ps))}
    return summary


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
    wl = build(args.kind, 0.0, args.device, args.redraw)  # libraries loaded, kernels compiled: untimed
    try:
        gcexplore.scaling(wl, args.sizes, device=args.device, repeats=3, rounds=1, warmup=1, progress=False)
    finally:
        wl.close()
    nulls, shifts = [("null", 0.0)] * args.nulls, [("shift", args.shift)] * args.shifts
    order = [x for i in range(max(len(nulls), len(shifts))) for x in (nulls[i:i + 1] + shifts[i:i + 1])]  # interleaved

    def make(i, side, shift, log):
        return measurer(args.kind, shift, args, total, log, f"{i}{side}", order[i][0])
    pairs = run_pairs(order, make, args.max_runs, args.budget_s, out)
    summary = {"device": info.name, "args": vars(args), "pairs": pairs, **summarize(pairs)}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(json.dumps({k: summary.get(k) for k in ("device", "null", "shift")}, indent=1, default=str))
    return 0


def replay(args) -> int:
    """The decisions again from a recording, with other settings (no GPU)."""
    from gcexplore.analysis.stats import Floor, noise_floor

    full = pd.read_parquet(args.replay)
    raw = full[full["round"] < args.use_rounds] if args.use_rounds else full  # a cheaper run, from the same
    floor = None
    if args.run_sd is not None:
        f = noise_floor(str(raw["device_name"].iloc[0]), sorted(set(raw["workload"].astype(str))))
        floor = Floor(f.round_sd, args.run_sd, f"{f.source}, run part {args.run_sd:.2%} given")
    order = [(what_of(raw, args.replay, i), 0.0) for i in sorted({int(t[:-1]) for t in raw["tag"]})]
    pairs = run_pairs(order, lambda i, side, shift, log: replayer(raw, f"{i}{side}", log), args.max_runs, 0.0,
                      None, floor)
    one = {t: gpu_ms(d.drop(columns=["tag", "call", "what"], errors="ignore"))
           for t, d in full[full["call"] == 0].groupby("tag")}  # each side's first run as recorded
    summary = summarize(pairs)
    for what in summary:  # GPU time against one recorded run per side (all its rounds)
        ps = [p for p in pairs if p["what"] == what]
        summary[what]["gpu_x_recorded_run"] = sum(p["gpu_ms"] for p in ps) / sum(
            one[f"{p['pair']}{x}"] for p in ps for x in "ab")
    print(json.dumps({"max_runs": args.max_runs, "run_sd": args.run_sd, "use_rounds": args.use_rounds, **summary},
                     indent=1, default=str))
    return 0


def what_of(raw: pd.DataFrame, path: str, i: int) -> str:
    """"null" or "shift" for recorded pair ``i``: its rows' ``what``, else the recording's summary.json."""
    if "what" in raw.columns:
        return str(raw.loc[raw["tag"] == f"{i}b", "what"].iloc[0])
    pairs = json.loads((Path(path).parent / "summary.json").read_text())["pairs"]
    return next(p["what"] for p in pairs if p["pair"] == i)


if __name__ == "__main__":
    sys.exit(main())
