"""Split tuner against a full concurrent-only sweep, measured in the same run.

For four pairs — the built-in compute + memory, PyTorch's 8192^3 bf16 matmul + sigmoid
over 512 MiB, memory + memory, and latency + compute with a latency target on the first
— runs :func:`gcexplore.tune` and a concurrent-only :func:`gcexplore.sweep` (every valid
split, 15 repetitions in 5 rounds, each after 1 warm-up), alternating which goes first in
each rerun (``--rounds`` reruns per pair), and
prints per pair and round: layouts measured, repetitions, GPU time (sum of measured
makespans plus warm-up, :func:`gcexplore.analysis.gpu_time_ms`) and wall time of each,
the tuner's answer against the sweep's, and pass/fail against issue 11's goals:

- makespan pairs: the tuned layout's median makespan *in the sweep* within 2% of the
  sweep's best; latency pair: the same smallest size as the sweep's point estimates
  (:func:`gcexplore.analysis.slo_split`);
- GPU time and wall time of the tuner at most 1/3 of the sweep's.

The latency target (unless ``--slo-ms`` is given) is the geometric mean of the latency
workload's median alone at 40 and 48 SMs (measured first, untimed), so it lies between
two partition sizes. Workloads are built and warmed up before any clock starts.

Run from the project root on the GPU machine: ``python3 bench/tune.py`` (about a
minute; ``--rounds 1`` halves it). Results and the tuner's plots go to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import pandas as pd

import gcexplore
from gcexplore import analysis as A
from gcexplore import workloads as W
from gcexplore.cli.needs import needs


def _pairs(device: int, sm_count: int, torch_too: bool) -> dict:
    pairs = {
        "compute+memory": {"compute": W.compute(device=device), "memory": W.memory(device=device)},
        "memory+memory": {"memory_a": W.memory(device=device, name="memory_a"),
                          "memory_b": W.memory(device=device, name="memory_b")},
        "latency+compute": {"latency": W.latency(blocks=4 * sm_count, device=device),
                            "compute": W.compute(device=device)},
    }
    if torch_too:
        from gcexplore.workloads.torch_pairs import matmul_sigmoid

        pairs["matmul+sigmoid"] = matmul_sigmoid(device)
    return pairs


def _target(wls: dict, device: int) -> float:
    lat = next(iter(wls.values()))
    s = A.summarize(gcexplore.scaling(lat, [40, 48], repeats=10, device=device, whole_device_too=False,
                                      progress=False))
    return math.sqrt(float(s["median_ms"].iloc[0]) * float(s["median_ms"].iloc[1]))


def _timed(call):
    t0 = time.perf_counter()
    df = call()
    return df, time.perf_counter() - t0


def _round(name: str, wls: dict, slo_ms, args, rnd: int, out: Path | None) -> dict:
    def tune():
        return gcexplore.tune(wls, slo_ms=slo_ms, device=args.device, progress=False)

    def sweep():  # the exhaustive reference: every split, in rounds (15 repetitions in 5 rounds)
        return gcexplore.sweep(wls, modes=("concurrent",), repeats=args.sweep_repeats, device=args.device,
                               progress=False)

    if rnd % 2 == 0:
        (t, t_wall), (s, s_wall) = _timed(tune), _timed(sweep)
    else:
        (s, s_wall), (t, t_wall) = _timed(sweep), _timed(tune)
    if out is not None:
        gcexplore.save(t, out / f"{name}_tune_r{rnd}.parquet", overwrite=True)
        gcexplore.save(s, out / f"{name}_sweep_r{rnd}.parquet", overwrite=True)
        gcexplore.plot_tune(t).savefig(out / f"{name}_tune_r{rnd}.png", dpi=100)
    table = A.tune_table(t)
    row = {"pair": name, "round": rnd, "layouts": len(table), "reps": int(table["reps"].sum()),
           "tune_gpu_s": A.gpu_time_ms(t) / 1e3, "sweep_gpu_s": A.gpu_time_ms(s) / 1e3,
           "tune_wall_s": t_wall, "sweep_wall_s": s_wall, "answer": t.attrs["answer"]}
    row["gpu_ratio"] = row["tune_gpu_s"] / row["sweep_gpu_s"]
    row["wall_ratio"] = t_wall / s_wall
    if slo_ms is None:
        ms = A.makespan_stats(s, "concurrent").set_index("layout")["median_ms"]
        row["sweep_answer"] = str(ms.idxmin())
        row["vs_sweep_best"] = float(ms[t.attrs["answer"]] / ms.min() - 1.0)
        row["answer_ok"] = row["vs_sweep_best"] <= 0.02
    else:
        row["sweep_answer"] = A.slo_split(s, slo_ms)
        row["vs_sweep_best"] = math.nan
        row["answer_ok"] = row["answer"] == row["sweep_answer"]
    row["pass"] = bool(row["answer_ok"] and row["gpu_ratio"] <= 1 / 3 and row["wall_ratio"] <= 1 / 3)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--slo-ms", type=float, help="latency target of the latency pair (default: see above)")
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch pair")
    ap.add_argument("--pairs", default="", help="comma-separated pair names to run (default: all four)")
    ap.add_argument("--sweep-repeats", type=int, default=15,
                    help="repetitions of the reference sweep, in min(5, n // 3) rounds (default: %(default)s)")
    ap.add_argument("--out", default="gcexplore-out/bench_tune", help="folder for results and plots ('' for none)")
    args = ap.parse_args(argv)
    needs()

    info = gcexplore.device_info(args.device)
    out = Path(args.out) if args.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    gcexplore.launch_gap(info.index)
    rows, notes = [], []
    pairs = _pairs(info.index, info.sm_count, not args.no_torch)
    if args.pairs:
        for skip in set(pairs) - set(args.pairs.split(",")):
            for w in pairs.pop(skip).values():
                w.close()
    for name, wls in pairs.items():
        slo = None
        if name == "latency+compute":
            slo = args.slo_ms or _target(wls, info.index)
            notes.append(f"latency target of latency+compute: p50 <= {slo:.4f} ms")
        gcexplore.profile_overlap(wls, [64], repeats=2, warmup=2, modes=("concurrent",), device=info.index)
        try:
            for rnd in range(args.rounds):
                rows.append(_round(name, wls, slo, args, rnd, out))
                print(f"{name} round {rnd}: {rows[-1]['answer']} ({'pass' if rows[-1]['pass'] else 'FAIL'}) "
                      f"{json.dumps(rows[-1], default=str)}", file=sys.stderr, flush=True)  # kept if cut short
        finally:
            for w in wls.values():
                w.close()
    table = pd.DataFrame(rows)
    print(f"split tuner vs concurrent-only sweep on {info.name} ({info.sm_count} SMs), driver "
          f"{info.driver_version_str}, {args.rounds} round(s) per pair")
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.float_format", "{:.3f}".format):
        print(table.to_string(index=False))
    for n in notes:
        print(n)
    ok = bool(table["pass"].all())
    print("goals: answer within 2% of the sweep's best (same smallest size for the target); GPU time and "
          f"wall time <= 1/3 of the sweep's -> {'pass' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
