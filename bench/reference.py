"""Reference measurement: hand-written green contexts (cuda.bindings) and PyTorch events vs gcexplore.

The way FlashInfer users do it: split the SMs with ``cuDevSmResourceSplitByCount``,
make a green context per group with ``cuGreenCtxCreate`` and a stream with
``cuGreenCtxStreamCreate``, wrap the streams with
``torch.cuda.get_stream_from_external``, and time with ``torch.cuda.Event``. A
``torch.cuda._sleep`` on a side stream holds the GPU while the host enqueues each
repetition (so host latency stays out of the events), and every stream of the
repetition waits on one start event recorded after it.

The workloads are the design's example: an 8192^3 bf16 matmul (first partition,
24 SMs) and a sigmoid over 512 MiB (the remainder). Both measurements run twice,
alternating, with 3 warm-up and 20 measured repetitions per mode each; the table
gives the medians and the ratio gcexplore / reference.

Goal (issue 3): every ratio within 3% of 1.

Run from the project root on the GPU machine: ``python3 bench/reference.py``.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

import gcexplore
from gcexplore.cli.needs import needs


def _ck(result):
    from cuda.bindings import driver

    err, *rest = result
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver error {err}")
    return rest[0] if len(rest) == 1 else rest


def _green_streams(torch, device: int, first_sms: int):
    """Two torch streams: one on a green context of ``first_sms`` SMs, one on the rest."""
    from cuda.bindings import driver

    _ck(driver.cuInit(0))
    dev = _ck(driver.cuDeviceGet(device))
    res = _ck(driver.cuDeviceGetDevResource(dev, driver.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM))
    groups, _, remaining = _ck(driver.cuDevSmResourceSplitByCount(1, res, 0, first_sms))
    streams, counts = [], []
    for r in (groups[0], remaining):
        desc = _ck(driver.cuDevResourceGenerateDesc([r], 1))
        gctx = _ck(driver.cuGreenCtxCreate(desc, dev, driver.CUgreenCtxCreate_flags.CU_GREEN_CTX_DEFAULT_STREAM))
        s = _ck(driver.cuGreenCtxStreamCreate(gctx, driver.CUstream_flags.CU_STREAM_NON_BLOCKING, 0))
        streams.append(torch.cuda.get_stream_from_external(int(s), device=device))
        counts.append(int(r.sm.smCount))
    return streams, counts


def _reference(torch, work, green, plain, *, repeats, warmup, sleep_cycles):
    """Rows (mode, rep, workload, duration_ms, makespan_ms) timed with torch events."""
    side = torch.cuda.Stream()
    names = list(work)

    def rep(pairs, chain):
        with torch.cuda.stream(side):
            torch.cuda._sleep(sleep_cycles)
        start = torch.cuda.Event(enable_timing=True)
        start.record(side)
        evs, prev = [], None
        for s, fn in pairs:
            s.wait_event(start)
            if chain and prev is not None:
                s.wait_event(prev)
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(s):
                e0.record(s)
                fn()
                e1.record(s)
            evs.append((e0, e1))
            prev = e1
        for _, e1 in evs:
            e1.synchronize()
        return [e0.elapsed_time(e1) for e0, e1 in evs], max(start.elapsed_time(e1) for _, e1 in evs)

    modes = {
        "alone": [([(green[i], work[n])], False) for i, n in enumerate(names)],
        "concurrent": [([(green[i], work[n]) for i, n in enumerate(names)], False)],
        "sequential": [([(plain[0], work[n]) for n in names], True)],
        "streams": [([(plain[i], work[n]) for i, n in enumerate(names)], False)],
    }
    rows = []
    for mode, groups in modes.items():
        for r in range(warmup + repeats):
            for pairs, chain in groups:
                durs, span = rep(pairs, chain)
                if r < warmup:
                    continue
                group_names = [n for n in names if any(fn is work[n] for _, fn in pairs)]
                for n, d in zip(group_names, durs):
                    rows.append({"mode": mode, "rep": r - warmup, "workload": n, "duration_ms": d,
                                 "makespan_ms": span})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--split", type=int, default=24)
    ap.add_argument("--n", type=int, default=8192, help="matmul size")
    ap.add_argument("--mib", type=int, default=512, help="sigmoid input size in MiB")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    needs(modules=("torch",))

    import torch
    from gcexplore.workloads.torch_pairs import matmul_sigmoid_calls

    device = 0
    info = gcexplore.device_info(device)
    n = args.n
    work, declared = matmul_sigmoid_calls(device, n=n, mib=args.mib)  # the same calls, timed both ways
    wls = {k: gcexplore.from_torch(fn, name=k, **declared[k]) for k, fn in work.items()}
    green, counts = _green_streams(torch, device, args.split)
    plain = [torch.cuda.Stream(), torch.cuda.Stream()]
    sleep_cycles = 1_000_000  # ~0.5 ms at 2 GHz: longer than enqueueing one repetition

    ref, gcx = [], []
    for _ in range(args.rounds):
        ref.append(_reference(torch, work, green, plain, repeats=args.repeats, warmup=args.warmup,
                              sleep_cycles=sleep_cycles))
        gcx.append(gcexplore.profile_overlap(wls, [args.split], repeats=args.repeats, warmup=args.warmup))
    ref_df, gcx_df = pd.concat(ref), pd.concat(gcx)
    layout = gcx[0]["layout"].iloc[0]

    rows = []
    for (mode, wl), g in gcx_df.groupby(["mode", "workload"], sort=False):
        r = ref_df[(ref_df["mode"] == mode) & (ref_df["workload"] == wl)]
        rm, gm = float(np.median(r["duration_ms"])), float(np.median(g["duration_ms"]))
        rows.append({"mode": mode, "what": f"{wl} duration", "reference_ms": rm, "gcexplore_ms": gm})
    for mode in ("concurrent", "sequential", "streams"):
        r = ref_df[ref_df["mode"] == mode].drop_duplicates(["rep", "makespan_ms"])["makespan_ms"]
        g = gcx_df[gcx_df["mode"] == mode].drop_duplicates(["rep", "makespan_ms"])["makespan_ms"]
        rows.append({"mode": mode, "what": "makespan", "reference_ms": float(np.median(r)),
                     "gcexplore_ms": float(np.median(g))})
    table = pd.DataFrame(rows)
    table["ratio"] = table["gcexplore_ms"] / table["reference_ms"]
    table["within_3pct"] = (table["ratio"] - 1).abs() <= 0.03
    print(f"reference vs gcexplore on {info.name} ({info.sm_count} SMs): {n}^3 bf16 matmul on "
          f"{counts[0]} SMs (reference) / layout {layout} (gcexplore), sigmoid over {args.mib} MiB on the "
          f"rest; {args.rounds} alternating rounds x {args.repeats} repetitions after {args.warmup} warm-up")
    with pd.option_context("display.width", 160, "display.float_format", "{:.4f}".format):
        print(table.to_string(index=False))
    ok = bool(table["within_3pct"].all())
    print(f"goal: every ratio within 3% -> {'pass' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
