"""PM sampling: does it disturb what it watches, and does every verified metric set work?

For the built-in compute + memory pair at 24+108 (concurrent mode), alternate event-timed
runs in this process with ``dram_timeline`` runs (a child process with the sampler on
and the kernel trace on); print the median concurrent makespan of each and their ratio.
Then run each metric set of ``gcexplore.pm.METRIC_SETS`` a few times and print whether
it finished and what it read while the memory kernel ran alone.

Goal (issue 9 stretch): makespans with sampling within 1% of without; every metric set
finishes every time.

Run from the project root on the GPU machine: ``python3 bench/pm_sampling.py``.
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

import gcexplore
from gcexplore.experiments import pm
from gcexplore.cli.needs import needs


def _makespan(df: pd.DataFrame) -> float:
    conc = df[df["mode"] == "concurrent"]
    return float(conc.groupby("rep")["makespan_ms"].first().median())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args(argv)
    needs()
    info = gcexplore.device_info(0)
    print(f"{info.name}, driver {info.driver_version_str}; {pm.VERIFIED}")
    pair = {"compute": "compute", "memory": "memory"}
    rows = []
    for r in range(args.rounds):
        off = gcexplore.profile_overlap(pair, [24], repeats=args.repeats, modes=("concurrent",))
        on = gcexplore.dram_timeline(pair, [24], repeats=args.repeats, modes=("concurrent",))
        rows.append({"round": r, "off_ms": _makespan(off), "sampled_ms": _makespan(on.result),
                     "samples": len(on.samples)})
    t = pd.DataFrame(rows)
    t["ratio"] = t["sampled_ms"] / t["off_ms"]
    print("\nconcurrent makespan, medians of", args.repeats, "repetitions (ms)")
    print(t.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    ratio = t["sampled_ms"].median() / t["off_ms"].median()
    ok = abs(ratio - 1) <= 0.01
    print(f"median ratio {ratio:.4f}: overhead goal (within 1%) {'met' if ok else 'NOT met'}")

    print("\nmetric sets: the memory kernel alone on the 108-SM remainder, means while it ran")
    sets = []
    for name in pm.METRIC_SETS:
        for r in range(args.rounds):
            try:
                t = gcexplore.dram_timeline(pair, [24], repeats=3, modes=("alone",), metrics=name)
                s = gcexplore.dram_summary(t.samples, t.trace)
                m = s[(s["mode"] == "alone") & (s["workload"] == "memory")].median(numeric_only=True)
                sets.append({"set": name, "round": r, "finished": True, "dram_pct": m["dram_pct"],
                             "sm_active_pct": m["sm_active_pct"], "read_gbs": m["dram_read_gbs"],
                             "write_gbs": m["dram_write_gbs"]})
            except pm.PmSamplingError as e:
                sets.append({"set": name, "round": r, "finished": False, "error": str(e)[:120]})
    sets = pd.DataFrame(sets)
    print(sets.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    ok &= bool(sets["finished"].all())
    print(f"\ngoals: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
