"""Green contexts, MPS or streams? Two pairs under every mechanism at three splits, on one GPU.

1. The seed's PyTorch pair: an 8192^3 bf16 matmul (critical) beside a sigmoid over 512 MiB of fp32
   (a factory the MPS clients rebuild as ``gcexplore.workloads.torch_pairs:matmul_sigmoid``).
2. The built-in ``latency`` kernel (critical) beside the ``memory`` streamer.

Each pair runs under green contexts, MPS (one client process per workload, gcexplore's own daemon in
private folders, ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` at each share), plain streams, prioritised
streams and one after another, at ``--splits`` SMs for the critical workload
(:func:`gcexplore.compare_mechanisms`). Prints the table and the sentence per split of each pair,
what ``%smid`` showed per mechanism, and a check: the plain-stream makespan measured in the
mechanisms experiment against a separate single-process ``profile_overlap`` of the same pair on
plain streams (exit 1 where the 95% interval of their ratio lies wholly beyond 2%: plain streams can be
bimodal, so their medians alone may differ by more by chance). Writes ``mechanisms.parquet`` (both runs; it
ships as ``gcexplore/data/mechanisms.parquet``) and ``mechanisms.png`` per pair to OUT.

Run from the project root on the GPU machine (as a user allowed to start an MPS daemon; the card in
Default compute mode, no other MPS daemon running): ``PYTHONPATH=$PWD python bench/mechanisms.py OUT``
(about 2-3 minutes of GPU time).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

import gcexplore
from gcexplore.analysis.stats import ratio_ci

TOLERANCE = 0.02


PAIRS = {
    "matmul+sigmoid": "gcexplore.workloads.torch_pairs:matmul_sigmoid",
    "latency+memory": {"latency": "latency", "memory": "memory"},
}


def _smid_lines(df: pd.DataFrame) -> list[str]:
    out = []
    for key, ids in sorted(df.attrs.get("sm_ids", {}).items()):
        mech, layout, name = key.split("|")
        span = f"{min(ids)}-{max(ids)}" if ids else "-"
        out.append(f"  {mech:>8} {layout:>7} {name:>8}: {len(ids):3d} SMs (ids {span})")
    return out


def _streams_check(df: pd.DataFrame, pair, split: int, repeats: int) -> tuple[bool, str]:
    """The mechanisms run's plain-stream makespan against a separate single-process measurement."""
    from gcexplore.mechanisms.pair import build_pair, pair_specs

    wls = build_pair(pair_specs(pair))
    try:
        critical = df.attrs["critical"]
        ordered = {critical: wls[critical], **{n: w for n, w in wls.items() if n != critical}}
        ref = gcexplore.profile_overlap(ordered, split, modes=("streams",), repeats=repeats, rounds=1)
    finally:
        for w in wls.values():
            w.close()
    mine = df[(df["mechanism"] == "streams") & (df["split_sm_count"] == split)].drop_duplicates("rep")["makespan_ms"]
    theirs = ref.drop_duplicates("rep")["makespan_ms"]
    a, b = float(mine.median()), float(theirs.median())
    # Plain streams can be bimodal (which stream reaches the SMs first), so two medians of 50 may sit in
    # different modes: the check fails only a difference beyond the tolerance that the 95% interval decides.
    est, lo, hi = ratio_ci(theirs, mine, 0.95)
    ok = lo <= 1 + TOLERANCE and hi >= 1 - TOLERANCE
    spread = "; ".join(f"{n} p10-p90 {s.quantile(0.1):.4f}-{s.quantile(0.9):.4f} ms" for n, s in
                       (("mechanisms", mine), ("profile_overlap", theirs)))
    return ok, (f"plain streams at {split}: mechanisms {a:.4f} ms, single-process profile_overlap {b:.4f} ms "
                f"(medians {100 * (a - b) / b:+.2f}%; {spread}); ratio {est:.4f}, 95% interval "
                f"[{lo:.4f}, {hi:.4f}]: {'no' if ok else 'a'} difference beyond {100 * TOLERANCE:.0f}% decided")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="folder for mechanisms.parquet and the figures")
    p.add_argument("--splits", default="24,64,104", help="SMs of the critical workload")
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--pairs", default=",".join(PAIRS), help=f"which of {', '.join(PAIRS)}")
    args = p.parse_args(argv)
    from gcexplore.cli.needs import needs

    needs(modules=("torch",) if "matmul+sigmoid" in args.pairs else ())
    why = gcexplore.mechanisms.mps_refusal()
    if why:
        print(f"bench/mechanisms.py: {why}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    splits = tuple(int(s) for s in args.splits.split(","))
    frames, ok = [], True
    for label in args.pairs.split(","):
        pair = PAIRS[label]
        t0 = time.perf_counter()
        df = gcexplore.compare_mechanisms(pair, splits, repeats=args.repeats, warmup=3)
        print(f"\n== {label}: {time.perf_counter() - t0:.1f} s, run {df['run_id'].iloc[0]} on "
              f"{df['device_name'].iloc[0]}")
        table = gcexplore.mechanisms_table(df)
        print(table.drop(columns=["critical", "other", "clock"]).to_string(index=False,
                                                                       float_format=lambda v: f"{v:.3f}"))
        for s in gcexplore.mechanisms_sentences(table):
            print("-", s)
        print("%smid per mechanism (plain streams: the same at every split):")
        print("\n".join(_smid_lines(df)))
        good, line = _streams_check(df, pair, int(table["split_sm_count"].iloc[0]), args.repeats)
        ok &= good
        print(line)
        gcexplore.plot_mechanisms(df).savefig(out / f"mechanisms_{label.replace('+', '_')}.png", dpi=110)
        frames.append(df)
    both = pd.concat(frames, ignore_index=True)
    both.attrs.update({k: v for k, v in frames[0].attrs.items() if k not in ("run_id", "sm_ids", "critical")})
    both.attrs["runs"] = [{"run_id": f["run_id"].iloc[0], "critical": f.attrs["critical"], "sm_ids": f.attrs["sm_ids"]}
                          for f in frames]
    gcexplore.save(both, out / "mechanisms.parquet")
    print(f"\nwrote {out / 'mechanisms.parquet'} ({len(both)} rows)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
