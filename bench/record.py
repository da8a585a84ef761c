"""Record the results that ship in gcexplore/data/ (run on the GPU, then commit the files).

Writes, with :func:`gcexplore.results.save`, into the folder given on the command line:

- ``sweep.parquet``: the built-in compute + memory pair over every valid split;
- ``scaling.parquet``: scaling curves of both built-ins (every valid size and the whole device);
- ``occupancy.parquet``: per-block SM ids and times of the pair on 24 + 108 SMs;
- ``isolation.parquet``: the latency kernel on a 16-SM partition next to the compute kernel;
- ``torch_sweep.parquet``: an 8192^3 bf16 PyTorch matmul + sigmoid over 512 MiB, every split;
- ``trace.parquet`` and ``trace_overlap.parquet``: that pair at 24+108 in all four modes with
  the CUPTI kernel trace on (needs cupti-python): the trace, and the event rows of the same run.
- ``pm.parquet`` and ``pm_trace.parquet``: two memory kernels on 24 SMs and the 108-SM
  remainder, alone and together, with CUPTI PM sampling every 20 us (DRAM % of peak, SMs
  active) and the kernel trace of the same run (``gcexplore.dram_timeline``).
- ``occupancy_best.parquet``: per-block SM ids and times of the pair at the sweep's best
  split (what ``gcexplore demo`` draws next to the sweep);
- ``primary_sms.parquet``: the SM ids (``Partition.sm_ids()``) of a 24-SM partition, its
  remainder and the primary context's whole device, probed while the split exists;
- ``bandwidth_sharing.parquet``: two STREAM triads (3 GiB each) alone and concurrently on
  disjoint partitions of 64 and 68 SMs (memory bandwidth is shared);
- ``l2_sharing.parquet``: two triads that each pass 50 times over a working set of 4 to
  64 MiB, alone and concurrently on 64 + 68 SMs, without an L2 flush: sets that fit in L2
  alone but not together (one run per size; ``attrs["working_set_mib"]`` maps run_id to MiB).

Total GPU time is about two minutes on an H100. Each result's summary is printed.
``--only NAME[,NAME]`` records only those results (the others in the folder are kept).

Run from the project root: ``python3 bench/record.py gcexplore/data`` (``--only trace`` records
just the trace).
"""

from __future__ import annotations

from gcexplore.trace.collector import preload_cupti

# PyTorch ships CUPTI 13.0; cupti-python's 13.4 must be loaded first to report green
# contexts (the first libcupti a process loads serves it).
preload_cupti()

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

import gcexplore
from gcexplore.results import io as results
from gcexplore import workloads as W
from gcexplore.cli.needs import needs  # noqa: E402


def _say(name: str, df: pd.DataFrame, t0: float) -> None:
    print(f"\n== {name}: {len(df)} rows in {time.perf_counter() - t0:.1f} s on {df.attrs['device_name']}")


def _torch_pair(dev: int):
    from gcexplore.workloads.torch_pairs import matmul_sigmoid

    return matmul_sigmoid(dev)


_TORCH_NOTES = "matmul: 8192^3 bf16 torch.matmul; sigmoid: torch.sigmoid over 512 MiB fp32"


def _record_trace(out: Path, ext: str, dev: int, reps: int) -> None:
    """The torch pair at 24+108, all four modes, with the kernel trace."""
    t0 = time.perf_counter()
    df, tr = gcexplore.profile_overlap(_torch_pair(dev), [24], repeats=reps, device=dev, trace=True)
    for frame in (df, tr):
        frame.attrs["workload_notes"] = _TORCH_NOTES
    results.save(tr, out / ("trace" + ext))
    results.save(df, out / ("trace_overlap" + ext))
    _say("trace", tr, t0)
    print("diagnostics:", tr.attrs["trace_diagnostics"])
    s = gcexplore.summarize(df, trace=tr)
    print(s[["mode", "workload", "partition", "median_ms", "event_median_ms", "busy_span_median_ms",
             "gpu_busy_median_ms", "wait_median_ms", "kernels_per_rep", "throughput_tflops",
             "bandwidth_gbs"]].to_string(index=False))
    k = tr.drop_duplicates(["mode", "workload", "name"])
    print(k[["mode", "workload", "partition", "name", "grid_x", "grid_y", "block_x", "cluster_x",
             "max_active_clusters", "registers_per_thread"]].to_string(index=False, max_colwidth=70))


def _record_pm(out: Path, ext: str, dev: int) -> None:
    """Two memory kernels on 24 SMs and the 108-SM remainder, alone and together, PM-sampled."""
    t0 = time.perf_counter()
    t = gcexplore.dram_timeline({"m24": "memory", "m108": "memory"}, [24], repeats=3, device=dev)
    results.save(t.samples, out / ("pm" + ext))
    results.save(t.trace, out / ("pm_trace" + ext))
    _say("pm", t.samples, t0)
    print(gcexplore.dram_summary(t.samples, t.trace).to_string(index=False))


def _record_primary_sms(path: Path, dev: int) -> None:
    """SM ids of a 24-SM partition, its remainder, and the primary context while they exist."""
    t0 = time.perf_counter()
    info = gcexplore.device_info(dev)
    with gcexplore.split([24], device=dev) as parts:
        with gcexplore.whole_device(dev) as whole:
            probes = {"p0": parts[0].sm_ids(), "remainder": parts.remainder.sm_ids(), "device": whole.sm_ids()}
        label = parts.label
    rows = [{"partition": name, "workload": "sm_ids probe", "sm_id": int(sm), "block": i, "start_ns": 0, "end_ns": 0}
            for name, ids in probes.items() for i, sm in enumerate(sorted(ids))]
    attrs = {**info.metadata(), "kind": "occupancy", "run_id": gcexplore.schema.new_run_id(), "repeats": 1,
             "warmup": 0, "layout": label, "probe": "Partition.sm_ids() of p0, remainder and whole_device() "
             "while the split exists; start_ns/end_ns are not measured (0)"}
    df = gcexplore.schema.frame(rows, "occupancy", attrs)
    results.save(df, path)
    _say("primary_sms", df, t0)
    print({k: len(v) for k, v in probes.items()}, "device & p0:", len(probes["device"] & probes["p0"]))


def _record_bandwidth_sharing(path: Path, dev: int, reps: int) -> None:
    """Two memory-bound triads on disjoint partitions: alone, concurrently, one after the other."""
    t0 = time.perf_counter()
    pair = {"triad_a": W.memory(device=dev, name="triad_a"), "triad_b": W.memory(device=dev, name="triad_b")}
    df = gcexplore.profile_overlap(pair, [64], repeats=reps, device=dev,
                                   modes=("alone", "concurrent", "sequential"))
    for w in pair.values():
        w.close()
    results.save(df, path)
    _say("bandwidth_sharing", df, t0)
    s = gcexplore.summarize(df)
    print(s[["mode", "workload", "sm_count", "median_ms", "bandwidth_gbs", "slowdown_vs_alone"]].to_string(index=False))


def _passes(inner, k: int, name: str):
    """A workload that runs ``inner`` ``k`` times back to back on its stream."""
    def fn(*, stream):
        for _ in range(k):
            inner(stream=stream)
    return gcexplore.Workload(name, fn, flops=inner.flops * k, bytes=inner.bytes * k, device=inner.device)


def _record_l2_sharing(path: Path, dev: int, reps: int, sizes_mib=(4, 8, 16, 24, 32, 48, 64), k: int = 50) -> None:
    """Pairs of triads over working sets that fit in L2 alone but not together (no L2 flush)."""
    t0 = time.perf_counter()
    runs, mib_of = [], {}
    for mib in sizes_mib:
        n = max(8192, (mib << 20) // 12 // 8192 * 8192)  # three float arrays, whole blocks
        inner = {x: W.memory(n=n, device=dev, name=f"triad_{x}_inner") for x in "ab"}
        pair = {f"triad_{x}": _passes(inner[x], k, f"triad_{x}") for x in "ab"}
        df = gcexplore.profile_overlap(pair, [64], repeats=reps, device=dev, l2_flush=False,
                                       modes=("alone", "concurrent", "sequential"))
        for w in inner.values():
            w.close()
        mib_of[str(df["run_id"].iloc[0])] = 12 * n / 2**20
        runs.append(df)
    out = pd.concat(runs, ignore_index=True)
    out.attrs = dict(runs[0].attrs, working_set_mib=mib_of, passes_per_call=k)
    results.save(out, path)
    _say("l2_sharing", out, t0)
    s = gcexplore.summarize(out)
    s["working_set_mib"] = s["run_id"].map(mib_of)
    print(s[s["mode"] != "sequential"][["working_set_mib", "mode", "workload", "median_ms", "bandwidth_gbs"]]
          .to_string(index=False))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="folder for the .parquet files (e.g. gcexplore/data)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--skip-torch", action="store_true", help="leave out torch_sweep and the trace")
    ap.add_argument("--only", default="", help="comma-separated names to record (default: all)")
    ap.add_argument("--format", choices=("parquet", "csv"), default="parquet",
                    help="csv where pyarrow is absent (convert with results.load + results.save)")
    args = ap.parse_args(argv)
    needs()
    out = Path(args.out)
    ext = "." + args.format
    out.mkdir(parents=True, exist_ok=True)
    dev, reps = args.device, args.repeats
    pd.set_option("display.width", 200)
    pd.set_option("display.float_format", "{:.4f}".format)
    only = {n.strip() for n in args.only.split(",") if n.strip()}

    def want(name: str) -> bool:
        return not only or name in only

    compute, memory = W.compute(device=dev), W.memory(device=dev)
    pair = {"compute": compute, "memory": memory}

    t0 = time.perf_counter()
    kept = out / ("sweep" + ext)
    if want("occupancy_best") and not want("sweep") and kept.exists():
        # the best split of the sweep already in the folder, so the two files agree
        best_k = int(gcexplore.best_split(results.load(kept))["split_sm_count"])
        occ_best = gcexplore.occupancy(pair, [best_k], device=dev)
        results.save(occ_best, out / ("occupancy_best" + ext))
        _say(f"occupancy_best ({occ_best.attrs['layout']}, best of the kept {kept.name})", occ_best, t0)
    elif want("sweep") or want("occupancy_best"):
        sweep = gcexplore.sweep(pair, repeats=reps, device=dev, progress=False)
        if want("sweep"):
            results.save(sweep, out / ("sweep" + ext))
        _say("sweep", sweep, t0)
        best = gcexplore.best_split(sweep)
        print(best.to_string())
        if want("occupancy_best"):
            t0 = time.perf_counter()
            occ_best = gcexplore.occupancy(pair, [int(best["split_sm_count"])], device=dev)
            results.save(occ_best, out / ("occupancy_best" + ext))
            _say(f"occupancy_best ({occ_best.attrs['layout']})", occ_best, t0)

    t0 = time.perf_counter()
    if want("scaling"):
        curves = [gcexplore.scaling(w, repeats=reps, device=dev, progress=False) for w in (compute, memory)]
        scaling = pd.concat(curves, ignore_index=True)
        scaling.attrs = dict(curves[0].attrs, workloads=["compute", "memory"])
        results.save(scaling, out / ("scaling" + ext))
        _say("scaling", scaling, t0)
        s = gcexplore.summarize(scaling)
        print(s[["workload", "sm_count", "median_ms", "speedup", "parallel_efficiency"]].to_string(index=False))

    t0 = time.perf_counter()
    if want("occupancy"):
        occ = gcexplore.occupancy(pair, [24], device=dev)
        results.save(occ, out / ("occupancy" + ext))
        _say("occupancy", occ, t0)
        print(occ.groupby("partition")["sm_id"].nunique().to_string())

    t0 = time.perf_counter()
    if want("isolation"):
        latency = W.latency(device=dev)
        iso = gcexplore.isolation(latency, compute, 16, repeats=reps, device=dev)
        latency.close()
        results.save(iso, out / ("isolation" + ext))
        _say("isolation", iso, t0)
        print(gcexplore.summarize(iso)[["scenario", "role", "sm_count", "median_ms", "p10_ms", "p90_ms",
                                        "slowdown_vs_alone"]].to_string(index=False))
    compute.close()
    memory.close()

    if want("primary_sms"):
        _record_primary_sms(out / ("primary_sms" + ext), dev)
    if want("bandwidth_sharing"):
        _record_bandwidth_sharing(out / ("bandwidth_sharing" + ext), dev, reps)
    if want("l2_sharing"):
        _record_l2_sharing(out / ("l2_sharing" + ext), dev, reps)

    if not args.skip_torch and want("torch_sweep"):
        t0 = time.perf_counter()
        ts = gcexplore.sweep(_torch_pair(dev), repeats=reps, device=dev, progress=False)
        ts.attrs["workload_notes"] = _TORCH_NOTES
        results.save(ts, out / ("torch_sweep" + ext))
        _say("torch_sweep", ts, t0)
        print(gcexplore.best_split(ts).to_string())
    if not args.skip_torch and want("trace"):
        _record_trace(out, ext, dev, reps)
    if want("pm"):
        _record_pm(out, ext, dev)
    print(f"\nwrote {', '.join(sorted(p.name for p in out.glob('*' + ext)))} to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
