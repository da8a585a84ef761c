"""Start-up times of the command line and of ``import gcexplore`` (no GPU needed).

Runs each command in a fresh interpreter several times and prints the median and the
slowest wall time, against the goals: ``gcexplore --help`` under 0.3 s and
``gcexplore info`` without a GPU under 0.5 s (on the 2-core development machine).

    python bench/startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CASES = [
    ("import gcexplore", [sys.executable, "-c", "import gcexplore"], None),
    ("gcexplore --help", [sys.executable, "-m", "gcexplore.cli", "--help"], 0.3),
    ("gcexplore --version", [sys.executable, "-m", "gcexplore.cli", "--version"], 0.3),
    ("gcexplore info", [sys.executable, "-m", "gcexplore.cli", "info"], 0.5),
    ("import gcexplore; gcexplore.plot_sweep", [sys.executable, "-c", "import gcexplore; gcexplore.plot_sweep"],
     None),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args(argv)
    print(f"{'command':45} {'median s':>9} {'max s':>7} {'goal s':>7}  verdict")
    ok = True
    for name, cmd, goal in CASES:
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        verdict = "-" if goal is None else ("pass" if med < goal else "FAIL")
        ok &= verdict != "FAIL"
        print(f"{name:45} {med:9.3f} {max(times):7.3f} {goal if goal else '-':>7}  {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
