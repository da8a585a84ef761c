"""Sweep speed: wall time of a full sweep against the GPU-busy floor.

Sweeps the built-in compute + memory pair over every valid split (20 repetitions,
3 warm-up, all four modes) and compares the wall time with the floor: the sum of
the measured makespans of every layout x mode x repetition (the time the GPU was
busy with measured work). Compilation, allocation and the launch-gap calibration
happen before the clock starts; warm-up, split creation, gates and host time count
against the sweep.

Goal (issue 3): wall time at most 1.5x the floor; issue 29: at most 1.15x.

``--later-modes rep`` runs one warm-up repetition before every later mode of a layout's first
round, ``none`` none (the default, ``auto``: one where the layout's first call ran slow); the
table then says how often each mode's first measured repetition of the layout's first round was
the largest of its round (by chance: one in the round's repetitions).

``--pair torch`` sweeps the PyTorch matmul + sigmoid pair (gcexplore.workloads.torch_pairs) instead;
``--profile FILE`` writes the sweep's cProfile (by own time and by cumulative time) to FILE,
to see where the host's time goes; ``--save FILE`` keeps the rows.

Run from the project root on the GPU machine: ``python3 bench/sweep_speed.py``.
"""

from __future__ import annotations

import argparse
import sys
import time

import pandas as pd

import gcexplore
from gcexplore import workloads as W
from gcexplore.cli.needs import needs


def first_rep_largest(df: pd.DataFrame) -> pd.DataFrame:
    """Per mode: layouts, how often the first measured repetition of a layout's first round was the largest
    of that round, the rate by chance, and the median of its excess over the round's median."""
    rep = df.groupby(["layout", "mode", "round", "rep"])["makespan_ms"].max().reset_index()
    first_round = rep.groupby("layout")["round"].transform("min")
    rep = rep[rep["round"] == first_round]
    out = []
    for mode, g in rep.groupby("mode", sort=False):
        hits, excess, n_reps = [], [], []
        for _, r in g.groupby("layout"):
            r = r.sort_values("rep")
            hits.append(r["makespan_ms"].iloc[0] >= r["makespan_ms"].max())
            excess.append(r["makespan_ms"].iloc[0] / r["makespan_ms"].median() - 1)
            n_reps.append(len(r))
        out.append({"mode": mode, "layouts": len(hits), "first largest": f"{sum(hits) / len(hits):.0%}",
                    "by chance": f"{sum(1 / n for n in n_reps) / len(n_reps):.0%}",
                    "median excess": f"{100 * float(pd.Series(excess).median()):+.2f}%",
                    "max excess": f"{100 * max(excess):+.2f}%"})
    return pd.DataFrame(out).set_index("mode")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default: the sweep's own)")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--pair", choices=("builtin", "torch"), default="builtin")
    ap.add_argument("--later-modes", choices=("auto", "rep", "none"), default="auto",
                    help="warm-up before a layout's later modes in its first round (default: auto)")
    ap.add_argument("--profile", metavar="FILE")
    ap.add_argument("--save", metavar="FILE")
    args = ap.parse_args(argv)
    needs(modules=("torch",) if args.pair == "torch" else ())

    info = gcexplore.device_info(args.device)
    if args.pair == "torch":
        from gcexplore.workloads.torch_pairs import matmul_sigmoid

        pair, owned = matmul_sigmoid(info.index), []
    else:
        owned = [W.compute(device=info.index), W.memory(device=info.index)]
        pair = {"compute": owned[0], "memory": owned[1]}
    gcexplore.launch_gap(info.index)
    from gcexplore.experiments import overlap

    overlap._LATER_MODES = args.later_modes
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
    try:
        t0 = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        df = gcexplore.sweep(pair, repeats=args.repeats, warmup=args.warmup, rounds=args.rounds, device=info.index,
                             progress=False)
        if profiler is not None:
            profiler.disable()
        wall = time.perf_counter() - t0
    finally:
        for wl in owned:
            wl.close()
    if profiler is not None:
        import io
        import pstats

        text = io.StringIO()
        for key in ("tottime", "cumulative"):
            pstats.Stats(profiler, stream=text).sort_stats(key).print_stats(40)
        with open(args.profile, "w") as f:
            f.write(f"wall {wall:.3f} s (profiled)\n{text.getvalue()}")
    if args.save:
        gcexplore.save(df, args.save)

    per_rep = df.groupby(["layout", "mode", "rep"])["makespan_ms"].max()
    floor = per_rep.sum() / 1000
    with_warmup = gcexplore.analysis.gpu_time_ms(df) / 1000  # measured + warm-up repetitions
    by_mode = per_rep.groupby(level="mode").sum() / 1000
    ratio = wall / floor
    table = pd.DataFrame([
        {"quantity": "layouts", "value": f"{df['layout'].nunique()}"},
        {"quantity": "rows", "value": f"{len(df)}"},
        {"quantity": "wall time (s)", "value": f"{wall:.2f}"},
        {"quantity": "GPU-busy floor, measured reps (s)", "value": f"{floor:.2f}"},
        {"quantity": "  of which alone / concurrent / sequential / streams (s)",
         "value": " / ".join(f"{by_mode.get(m, 0):.2f}" for m in gcexplore.MODES)},
        {"quantity": "floor incl. warm-up reps (s)", "value": f"{with_warmup:.2f}"},
        {"quantity": "wall / floor", "value": f"{ratio:.2f}x"},
        {"quantity": "wall / floor incl. warm-up", "value": f"{wall / with_warmup:.2f}x"},
        {"quantity": "gate (us), max host enqueue per rep (us)",
         "value": f"{df.attrs['gate_us']}, {df.attrs['max_enqueue_us']}"},
    ])
    print(f"sweep speed on {info.name} ({info.sm_count} SMs): {' + '.join(pair)}, every valid split, "
          f"{args.repeats} repetitions after {args.warmup} warm-up, 4 modes, "
          f"{df.attrs.get('rounds', 1)} round(s)")
    print(table.to_string(index=False))
    first = first_rep_largest(df)
    print(f"first measured repetition of a layout's first round the largest of its round (warm-up before later "
          f"modes: {args.later_modes}):")
    print(first.to_string())
    print(f"goal: wall / floor <= 1.15x -> {'pass' if ratio <= 1.15 else 'FAIL'}")
    return 0 if ratio <= 1.15 else 1


if __name__ == "__main__":
    sys.exit(main())
