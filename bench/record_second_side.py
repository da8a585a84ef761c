"""Record a second side for the shipped H100 sweeps, so gcexplore.compare works offline.

Writes into ``--out`` (then copy the files into gcexplore/data/ and commit them):

- ``sweep_second.parquet``: the built-in compute + memory sweep under ``--condition``;
- ``torch_sweep_second.parquet``: the PyTorch matmul + sigmoid sweep (gcexplore.workloads.torch_pairs)
  under the same condition;
- ``sweep_twice.parquet``: the built-in sweep measured twice in a row on this card (two
  ``run_id`` values: ``compare(df, by="run_id")`` should say SAME, or UNCLEAR flagged noisy).

``attrs["condition"]`` names what differs from the recorded H100 sweeps: ``card`` (this
card as it is: run it on an H200), ``graphs`` (CUDA graphs), ``l2_flush`` or ``torch_n=4096``
(a smaller matmul, which moves the PyTorch pair's best split). Prints the compare verdicts
against gcexplore/data's ``sweep`` / ``torch_sweep`` and for the repeat. About 1-2 minutes
of GPU time at the default 10 repetitions.

Run from the project root: ``python3 bench/record_second_side.py --out /tmp/second --condition card``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gcexplore  # noqa: E402
from gcexplore import results  # noqa: E402
from gcexplore import workloads as W  # noqa: E402
from gcexplore.cli.needs import needs  # noqa: E402

CONDITIONS = ("card", "graphs", "l2_flush", "torch_n=4096")


def _show(name: str, a: pd.DataFrame, b: pd.DataFrame | None = None, **kw) -> None:
    from gcexplore.views.compare_text import describe

    c = gcexplore.compare(a, b, **kw)
    cols = ["group", "layout_a", "layout_b", "median_a_ms", "median_b_ms", "ratio", "ratio_low", "ratio_high",
            "verdict", "cycles_verdict", "reason"]
    print(f"\n== compare {name}")
    print(c.table[cols].to_string(index=False, max_colwidth=80))
    for line in describe(c):
        print("-", line)


def _sweep(pair, args, **extra):
    t0 = time.perf_counter()
    kw = {"graphs": args.condition == "graphs", "l2_flush": args.condition == "l2_flush"}
    df = gcexplore.sweep(pair, repeats=args.repeats, device=args.device, progress=False, **kw, **extra)
    df.attrs["condition"] = args.condition
    print(f"swept {', '.join(pair)} in {time.perf_counter() - t0:.1f} s on {df.attrs['device_name']}")
    return df


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for the .parquet files")
    ap.add_argument("--condition", choices=CONDITIONS, default="card")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--device", type=int, default=0)
    args = ap.parse_args(argv)
    needs()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pd.set_option("display.width", 220)
    pd.set_option("display.float_format", "{:.4f}".format)
    dev = args.device

    pair = {"compute": W.compute(device=dev), "memory": W.memory(device=dev)}
    second = _sweep(pair, args)
    results.save(second, out / "sweep_second.parquet")
    twice = [second] + [_sweep(pair, args)]
    both = pd.concat(twice, ignore_index=True)
    both.attrs = dict(twice[0].attrs, condition=f"{args.condition}, measured twice")
    results.save(both, out / "sweep_twice.parquet")
    for w in pair.values():
        w.close()

    from gcexplore.workloads.torch_pairs import matmul_sigmoid

    n = 4096 if args.condition == "torch_n=4096" else 8192
    torch_second = _sweep(matmul_sigmoid(dev, n=n), args)
    torch_second.attrs["workload_notes"] = f"matmul: {n}^3 bf16 torch.matmul; sigmoid: torch.sigmoid over 512 MiB fp32"
    results.save(torch_second, out / "torch_sweep_second.parquet")

    _show("the same sweep twice on this card", both, by="run_id")
    _show(f"recorded H100 sweep vs {args.condition}", gcexplore.load_recorded("sweep"), second)
    _show(f"recorded H100 torch_sweep vs {args.condition}", gcexplore.load_recorded("torch_sweep"), torch_second)
    print(f"\nwrote {', '.join(sorted(p.name for p in out.glob('*.parquet')))} to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
