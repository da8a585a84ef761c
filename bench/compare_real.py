"""Calibration of :func:`gcexplore.compare` on a real GPU: null pairs, true shifts, the noise floor.

Each side is its own run (its own :func:`gcexplore.scaling` call with its own run id, engine,
partitions and freshly allocated tensors). Per kind of work, ``--runs`` unshifted runs ``u1..uk``
and as many shifted runs ``s1..sk`` (the same work plus ``--shift`` more of it: one more matmul of
a chain of 32, one more batch of 32, 3% more iterations or elements) are measured interleaved
(u1 s1 u2 s2 ...). Null comparisons are consecutive unshifted runs (u1-u2, u2-u3, ...), true
shifts u_i against s_i. Reported per kind and overall: the false FAST/SLOW rate over compared
rows, the false CI-gate rates per null comparison (``--fail-on-regression 2``: exit 1, some row's
interval wholly above +2%; exit 3, none but some reaching beyond +2%), the power (SLOW share of shifted rows), and the same numbers
for the old method (one interval from all repetitions of a run, the round ignored) on the same
data. From the null runs: the noise floor per card and workload (``noise_floor.csv``: the
between-round standard deviation of log time within a run, and what runs add beyond it).

Also measured: the cost of the new defaults against today's 20 repetitions after 3 warm-ups (a
built-in sweep and a scaling side of each kind), and what makes rounds differ (``causes``): a
PyTorch GEMM chain timed in rounds with nothing re-drawn, a fresh partition each round, fresh
tensors each round, or both, with the round medians' spread in time and in clock-normalised time.

Work kinds (``--kinds``): compute and memory (built-ins), gemm (a chain of bf16 2048^3 matmuls
through cuBLAS), attention (scaled-dot-product attention, bf16), sort (torch.sort of float32),
fft (torch.fft.fft2 of a batch of complex64 images); not by default, the campaign bench's workloads
by their names (copy: the built-in; gemm_chain: 4 fp16 2048^3 matmuls; layer_norm: 8192 x 4096 fp16),
so that its campaign-vs-alone check finds their floors. ``--processes N --process-kinds K1,K2``:
N separate Python processes, each measuring every named kind once: the floors of those kinds then
take their run part from processes, not from runs inside one process. Run on the GPU machine from the project
root: ``python3 bench/compare_real.py --out DIR`` (about 2 minutes on an H100 at the defaults;
``--runs 3 --sizes 16,96`` for a quick look). Writes ``compare_real.parquet`` (every compared
row), ``compare_real_raw.parquet`` (every side's repetitions, for ``--recompute``),
``summary.json`` (the tables) and ``noise_floor.csv`` into ``--out``.
``--recompute RAW`` redoes the comparisons from a recorded raw file on any machine (no GPU),
with the noise floor the package now ships (``--use-rounds N --use-reps M``: only each side's
first N rounds and each round's first M repetitions, what a cheaper setting would have measured).
``--redraw``: the PyTorch kinds are built with ``from_torch(setup=...)``, so their tensors are
allocated afresh in every round and the rounds see what a fresh allocation changes (by default a
side allocates once, as a workload built from ``fn`` does).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

import gcexplore
from gcexplore import workloads as W
from gcexplore.analysis.sequential import (floor_rows, gpu_ms, judge, pair_processes, pooled_floor, rates,
                                            recompute_frames, write_floors)
from gcexplore.analysis.tuning import gpu_time_ms
from gcexplore.workloads.examples import SHIFTED_KINDS, TORCH_KINDS, shifted as build
from gcexplore.cli.needs import needs

KINDS = SHIFTED_KINDS


def side(kind: str, shift: float, args, **kw) -> tuple[pd.DataFrame, float]:
    """One run of ``kind``: a scaling over ``args.sizes`` and the whole device; (rows, wall s)."""
    wl = build(kind, shift, args.device, getattr(args, "redraw", False))
    try:
        t0 = time.perf_counter()
        df = gcexplore.scaling(wl, args.sizes, device=args.device, progress=False, **kw)
        return df, time.perf_counter() - t0
    finally:
        wl.close()
        if "torch" in sys.modules:  # each side's fresh streams leave cached blocks behind
            sys.modules["torch"].cuda.empty_cache()


# ----------------------------------------------------------------------------- causes


def causes(args) -> list[dict]:
    """Round-to-round spread of a GEMM chain with each kind of state drawn again per round."""
    from gcexplore.device import partitions
    from gcexplore.experiments.engine import Engine, Slot

    info = gcexplore.device_info(args.device)
    out = []
    with Engine(info) as eng:
        for cond in ("nothing", "partition", "tensors", "both"):
            for k in args.cause_sizes:
                wl = build("gemm", 0.0, args.device)
                parts = partitions.split([k], device=args.device) if k < info.sm_count else None
                meds, cyc = [], []
                try:
                    for r in range(args.cause_rounds):
                        if r and cond in ("tensors", "both"):
                            wl.close()
                            wl = build("gemm", 0.0, args.device)
                        if r and cond in ("partition", "both") and parts is not None:
                            parts.close()
                            parts = partitions.split([k], device=args.device)
                        if r and cond in ("partition", "both"):
                            eng.new_round()
                        p = parts[0] if parts is not None else eng.whole
                        slot = Slot(wl, p, p.stream)
                        eng.run_group([slot])
                        c0, _ = eng.nvml.read()
                        v = [eng.run_group([slot])[0][0][0][1] for _ in range(args.cause_reps)]
                        c1, _ = eng.nvml.read()
                        meds.append(float(np.median(v)))
                        cyc.append(float(np.median(v)) * (c0 + c1) / 2.0)
                finally:
                    wl.close()
                    if parts is not None:
                        parts.close()
                lt, lc = np.log(meds), np.log(cyc)
                out.append({"condition": cond, "sm_count": k, "rounds": len(meds), "median_ms": float(np.median(meds)),
                            "round_sd": float(np.std(lt, ddof=1)),
                            "round_sd_cycles": float(np.std(lc, ddof=1)) if np.isfinite(lc).all() else math.nan})
    return out


# ---------------------------------------------------------------------------- processes


def processes(args, out: Path, device_name: str) -> tuple[list[pd.DataFrame], list[dict]]:
    """``--processes`` runs of each of ``--process-kinds``, each run its own Python process (one
    process measures every kind once: an unshifted and a shifted side); the sides are paired across
    processes and the floors taken from them by :func:`gcexplore.analysis.sequential.pair_processes`.
    A process that fails is left out (its neighbours paired)."""
    import subprocess

    kinds = [k for k in args.process_kinds.split(",") if k]
    done: list[pd.DataFrame] = []
    for n in range(args.processes):
        path = out / f"_process_{n}.parquet"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(path), "--kinds", ",".join(kinds),
               "--device", str(args.device), "--sizes", ",".join(map(str, args.sizes)), "--repeats", str(args.repeats),
               "--rounds", str(args.rounds), "--warmup", str(args.warmup), "--shift", str(args.shift)]
        cmd += ["--redraw"] if args.redraw else []
        t0 = time.perf_counter()
        try:
            subprocess.run(cmd, check=True, timeout=args.process_timeout)
            done.append(pd.read_parquet(path))
        except (subprocess.SubprocessError, OSError) as e:
            print(f"process {n} failed ({e}); left out", flush=True)
            continue
        finally:
            path.unlink(missing_ok=True)
        print(f"process {n}: {time.perf_counter() - t0:.1f} s", flush=True)
        save_raw(pair_processes(done, kinds, device_name)[0], out, "process_raw.parquet")  # kept if stopped later
    return pair_processes(done, kinds, device_name, args.batch)


# ------------------------------------------------------------------------------- main

RAW_COLUMNS = ["kind", "role", "side", "shift", "sm_count", "rep", "round", "duration_ms", "sm_clock_mhz_before",
               "power_w_before", "sm_clock_mhz", "power_w", "device_name", "run_id"]


def save_raw(raw: list[pd.DataFrame], out: Path, name: str = "compare_real_raw.parquet") -> None:
    if raw:
        pd.concat(raw, ignore_index=True)[RAW_COLUMNS].to_parquet(out / name)



def _judging(args) -> dict:
    return {"min_effect": args.min_effect, "warmup": args.warmup}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="compare_real_out")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--runs", type=int, default=5, help="unshifted (and as many shifted) runs per kind")
    ap.add_argument("--sizes", default="16,64,96,128", help="partition sizes (the whole device is added)")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--shift", type=float, default=0.03)
    ap.add_argument("--min-effect", type=float, default=0.01)
    ap.add_argument("--cause-sizes", default="64,132")
    ap.add_argument("--cause-rounds", type=int, default=6)
    ap.add_argument("--cause-reps", type=int, default=4)
    ap.add_argument("--no-causes", action="store_true")
    ap.add_argument("--recompute", metavar="RAW", help="recompute the rates from a compare_real_raw.parquet (no GPU)")
    ap.add_argument("--pool", metavar="RUNS", help="one floor pooled over the runs of several batches (a parquet "
                                                   "with set, role, side, sm_count, round, duration_ms; no GPU)")
    ap.add_argument("--use-rounds", type=int, default=0, help="with --recompute: only each side's first N rounds")
    ap.add_argument("--use-reps", type=int, default=0, help="with --recompute: only each round's first N repetitions")
    ap.add_argument("--processes", type=int, default=0,
                    help="also run --process-kind in this many separate processes (one unshifted and one shifted "
                         "side each): nulls and shifts across processes, and the floor's run part from them")
    ap.add_argument("--process-kinds", "--process-kind", dest="process_kinds", default="gemm",
                    help="comma-separated kinds for --processes (each process measures every one of them)")
    ap.add_argument("--process-timeout", type=float, default=120.0, help="seconds one process may take")
    ap.add_argument("--batch", default="", help="a name for the GPU batch, written into the floors' source")
    ap.add_argument("--no-cost", action="store_true", help="skip the default-sweep cost measurement")
    ap.add_argument("--redraw", action="store_true",
                    help="PyTorch kinds are built with from_torch(setup=): tensors allocated afresh in every round")
    ap.add_argument("--child", metavar="PARQUET", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.recompute:
        print(json.dumps(recompute_frames(pd.read_parquet(args.recompute), **_judging(args),
                                          use_rounds=args.use_rounds, use_reps=args.use_reps), indent=1))
        return 0
    if args.pool:
        print(json.dumps(pooled_floor(pd.read_parquet(args.pool)), indent=1))
        return 0
    args.sizes = [int(x) for x in args.sizes.split(",") if x]
    if args.child:  # one process of --processes: an unshifted and a shifted side, rows to a file
        new = dict(repeats=args.repeats, rounds=args.rounds, warmup=args.warmup)
        parts = []
        for kind in [k for k in args.kinds.split(",") if k]:
            side(kind, 0.0, args, repeats=3, rounds=1, warmup=1)
            parts += [side(kind, sh, args, **new)[0].assign(role=r, shift=sh, kind=kind)
                      for r, sh in (("u", 0.0), ("s", args.shift))]
        pd.concat(parts, ignore_index=True).to_parquet(args.child)
        return 0
    args.cause_sizes = [int(x) for x in args.cause_sizes.split(",") if x]
    kinds = [k for k in args.kinds.split(",") if k]
    pkinds = set(args.process_kinds.split(",")) if args.processes else set()
    needs(modules=("torch",) if TORCH_KINDS & (set(kinds) | pkinds) else ())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info = gcexplore.device_info(args.device)
    summary: dict = {"device": info.name, "args": {k: v for k, v in vars(args).items()}, "kinds": {}, "cost": {}}
    new = dict(repeats=args.repeats, rounds=args.rounds, warmup=args.warmup)
    allrows, floors, raw = [], [], []
    for kind in kinds:
        side(kind, 0.0, args, repeats=3, rounds=1, warmup=1)  # compile, allocate, load libraries: untimed
        runs, shifted, walls = [], [], []
        for i in range(args.runs):
            for sh, bucket in ((0.0, runs), (args.shift, shifted)):
                df, wall = side(kind, sh, args, **new)
                bucket.append(df)
                walls.append((wall, gpu_ms(df)))
        rows = []
        for i in range(1, len(runs)):
            rows += judge(runs[i - 1], runs[i], kind, "null", i, min_effect=args.min_effect)
        for i, (u, s) in enumerate(zip(runs, shifted)):
            rows += judge(u, s, kind, "shift", i, min_effect=args.min_effect)
        old_df, old_wall = side(kind, 0.0, args, repeats=20, rounds=1, warmup=3)
        for role, dfs in (("u", runs), ("s", shifted), ("old", [old_df])):
            raw.extend(d.assign(kind=kind, role=role, side=i, shift=args.shift if role == "s" else 0.0)
                       for i, d in enumerate(dfs))
        summary["cost"][kind] = {"new_wall_s": float(np.median([w for w, _ in walls])),
                                 "new_gpu_ms": float(np.median([g for _, g in walls])),
                                 "old_wall_s": old_wall, "old_gpu_ms": gpu_ms(old_df)}
        floors.append(floor_rows(runs, kind, info.name, args.batch))
        r = pd.DataFrame(rows)
        summary["kinds"][kind] = rates(r)
        allrows.append(r)
        print(kind, json.dumps(summary["kinds"][kind]), json.dumps(summary["cost"][kind]), flush=True)
        save_raw(raw, out)  # after every kind: a run stopped later keeps what it measured
    table = pd.concat(allrows, ignore_index=True) if allrows else pd.DataFrame()
    summary["overall"] = rates(table) if allrows else {}
    summary["floor"] = floors
    if not args.no_cost:
        summary["cost"].update(sweep_cost(args))
    if not args.no_causes and "torch" in sys.modules:
        summary["causes"] = causes(args)
    if args.processes:
        prows, pfloors = processes(args, out, info.name)
        raw.extend(prows)
        summary["processes"] = recompute_frames(pd.concat(prows, ignore_index=True), **_judging(args))
        done = {f["workload"] for f in pfloors}
        floors = [f for f in floors if f["workload"] not in done] + pfloors
        summary["floor"] = floors
    table.to_parquet(out / "compare_real.parquet")
    save_raw(raw, out)
    write_floors(floors, out / "noise_floor.csv")
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(json.dumps({"overall": summary["overall"], "cost": summary["cost"], "floor": floors,
                      "processes": summary.get("processes"), "causes": summary.get("causes")}, indent=1, default=str))
    return 0


def sweep_cost(args) -> dict:
    """The cost of a default sweep of the built-in pair: today's settings against the new defaults."""
    out = {}
    pair = {"compute": W.compute(device=args.device), "memory": W.memory(device=args.device)}
    try:
        sizes = [16, 48, 80, 112]
        gcexplore.sweep(pair, sizes, repeats=3, warmup=1, rounds=1, device=args.device, progress=False)
        for tag, kw in (("old", dict(repeats=20, warmup=3, rounds=1)), ("new", {})):
            t0 = time.perf_counter()
            df = gcexplore.sweep(pair, sizes, device=args.device, progress=False, **kw)
            out[f"sweep_{tag}"] = {"wall_s": time.perf_counter() - t0, "gpu_ms": gpu_time_ms(df),
                                   "settings": {k: df.attrs.get(k) for k in ("repeats", "warmup", "rounds")}}
    finally:
        for w in pair.values():
            w.close()
    return out


if __name__ == "__main__":
    sys.exit(main())
