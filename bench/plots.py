"""Draw every figure from the recorded results into a folder, to look at them (no GPU).

    python bench/plots.py docs/plots --suffix after
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import gcexplore  # noqa: E402
from gcexplore import results  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--suffix", default="after")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rec = {n: results.load_recorded(n) for n in results.recorded_names()}
    figures = {
        "sweep": lambda: gcexplore.plot_sweep(rec["sweep"]),
        "torch-sweep": lambda: gcexplore.plot_sweep(rec["torch_sweep"]),
        "throughput": lambda: gcexplore.plot_throughput(rec["sweep"]),
        "scaling": lambda: gcexplore.plot_scaling(rec["scaling"]),
        "isolation": lambda: gcexplore.plot_isolation(rec["isolation"]),
        "occupancy": lambda: gcexplore.plot_occupancy(rec["occupancy_best"] if "occupancy_best" in rec
                                                      else rec["occupancy"]),
        "timeline": lambda: gcexplore.plot_timeline(rec["trace"]),
        "sm-usage": lambda: gcexplore.plot_sm_usage(rec["trace"]),
        "throughput-traced": lambda: gcexplore.plot_throughput(rec["trace_overlap"], trace=rec["trace"]),
        "dram-timeline": lambda: gcexplore.plot_dram_timeline(rec["pm"], rec["pm_trace"]),
        "comm": lambda: gcexplore.plot_comm(rec["comm"], collective="allreduce"),
        "comm-fit": lambda: gcexplore.plot_comm(rec["comm_fit"], collective="allreduce", size_bytes=16 << 20),
    }
    for name, make in figures.items():
        try:
            fig = make()
        except KeyError as e:
            print(f"{name}: recorded result {e} missing")
            continue
        path = out / f"{name}-{args.suffix}.png"
        fig.savefig(path, dpi=100)
        print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
