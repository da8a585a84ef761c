"""How long the recorded files take through the faces users touch most (no GPU needed): ``gcexplore
compare sweep sweep_second`` in a fresh interpreter, and the sweep explorer's redraw (a slider move over
the recorded sweep, in this process). Give ``--tree`` another checkout to time its code the same way:
the ratio row compares the two (issue 43: the families move must make neither slower).

    python bench/face_speed.py [--runs 5] [--tree ../old-checkout]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# the redraw, timed inside one interpreter of the tree named by PYTHONPATH (prints seconds per redraw)
REDRAW = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
import matplotlib; matplotlib.use("Agg")
import gcexplore
ex = gcexplore.SweepExplorer.from_results(gcexplore.load_recorded("sweep"))
times = []
for v in [24, 40, 56, 72, 88, 104] * int(sys.argv[1]):
    t = time.perf_counter(); ex.split_slider.value = v; times.append(time.perf_counter() - t)
print(json.dumps(times))
"""


def _compare_s(tree: Path, runs: int) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "gcexplore", "compare", "sweep", "sweep_second"], cwd=tree, env=env,
                       check=True, capture_output=True)
        out.append(time.perf_counter() - t)
    return out


def _redraw_s(tree: Path, runs: int) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(tree), "MPLBACKEND": "Agg"}
    done = subprocess.run([sys.executable, "-c", REDRAW, str(runs)], cwd=tree, env=env, check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tree", type=Path, help="another checkout to time the same way (the ratio is this / that)")
    args = ap.parse_args(argv)
    trees = {"this": ROOT, **({"other": args.tree.resolve()} if args.tree else {})}
    rows = {name: {"compare_s": statistics.median(_compare_s(t, args.runs)),
                   "redraw_s": statistics.median(_redraw_s(t, args.runs))} for name, t in trees.items()}
    print(f"{'tree':>8} {'compare (median s)':>20} {'redraw (median s)':>20}")
    for name, r in rows.items():
        print(f"{name:>8} {r['compare_s']:>20.3f} {r['redraw_s']:>20.4f}")
    if "other" in rows:
        print(f"{'ratio':>8} {rows['this']['compare_s'] / rows['other']['compare_s']:>20.3f} "
              f"{rows['this']['redraw_s'] / rows['other']['redraw_s']:>20.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
