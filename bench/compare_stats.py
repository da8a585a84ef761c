"""Error rates of gcexplore.compare on synthetic repetitions with known truth (CPU only).

Draws sweeps of 16 layouts x 4 modes (64 compared pairs, as a 132-SM sweep has) with
log-normal repetition noise, and prints, per spread: the share of pairs called FAST or
SLOW when both sides come from one distribution (false decisions), and the share called
SLOW when side B is truly 3% slower (power). The spread column includes this project's
typical spread (median over the recorded H100 sweeps' configurations) and wider ones.

Run from the project root: ``python3 bench/compare_stats.py [--seeds 40] [--reps 20]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gcexplore.analysis.comparison import compare  # noqa: E402
from gcexplore.results.synthetic import sweep, typical_spread  # noqa: E402


def rates(seeds: int, reps: int, sigma: float, shift: float) -> dict:
    counts = {"FAST": 0, "SLOW": 0, "SAME": 0, "UNCLEAR": 0}
    for s in range(seeds):
        c = compare(sweep(2 * s, sigma=sigma, reps=reps), sweep(2 * s + 1, sigma=sigma, reps=reps, shift=shift))
        for k in counts:
            counts[k] += c.counts()[k]
    n = sum(counts.values())
    return {k: v / n for k, v in counts.items()} | {"pairs": n}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=40, help="synthetic comparisons per row (64 pairs each)")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args(argv)
    typical = typical_spread()
    print(f"typical spread (median sd of log makespan over the recorded sweeps' configurations): {typical:.3%}")
    print(f"{'spread':>8} {'pairs':>6} {'false FAST/SLOW':>16} {'null SAME':>10} {'3% shift SLOW':>14} {'shift UNCLEAR':>14}")
    for sigma in sorted({typical, 0.005, 0.01, 0.0122, 0.02, 0.03}):
        null = rates(args.seeds, args.reps, sigma, 1.0)
        alt = rates(args.seeds, args.reps, sigma, 1.03)
        print(f"{sigma:>8.2%} {null['pairs']:>6} {null['FAST'] + null['SLOW']:>16.2%} {null['SAME']:>10.1%} "
              f"{alt['SLOW']:>14.1%} {alt['UNCLEAR']:>14.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
