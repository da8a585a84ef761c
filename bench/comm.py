"""Communication SMs on 2 and 4 GPUs: an NCCL collective on a partition beside a GEMM chain on the rest,
every split, with the whole-GPU baselines; the tables of the issue.

Usage (a multi-GPU machine, from the project root; nccl4py carried, see shared/gpu/README.md)::

    python3 bench/comm.py --out DIR [--gpus 2,4] [--collectives allreduce,allgather,reducescatter,alltoall]
                          [--sizes 1M,16M,256M,1G] [--repeats 10] [--timeout 120] [--compute-fit] [--zero-sm] [--pm]
                          [--pm-metrics dram_l2|dram_bytes]

For each rank count: DIR/comm-<n>gpu.parquet (kind "comm"), DIR/comm-<n>gpu-trace.parquet (the CUPTI
kernels of the traced steps), DIR/comm-<n>gpu.png (the figure of each collective at its largest size)
and, printed and in DIR/comm_bench.md:

- per collective and size: SMs -> bus bandwidth alone and step time (medians, slowest rank);
- the exhaustive answer (fewest SMs within 1% of the best step) against the baselines;
- the fewest SMs (and NCCL CTAs) reaching 95% of the peak bus bandwidth;
- the tuner's recommendation replayed over the sweep: its step against the best, its GPU-time share;
- kernel attribution (share of NCCL kernels on the comm partition) and the zero-SM status;
- with --pm: each split's DRAM and L2 use (PM sampling, device-wide; --pm-metrics dram_bytes: DRAM only)
  beside its interference;
- with --zero-sm: all-gather and all-to-all on NCCL's copy engines, what they cost the compute beside them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gcexplore.cli.needs import needs


def _md(df) -> str:
    try:
        return df.to_markdown(index=False, floatfmt=".4g")
    except ImportError:  # tabulate missing
        return "```\n" + df.to_string(index=False) + "\n```"


def _sms_table(t):
    part = t[t["setup"] != "ctas"].sort_values(["collective", "size_bytes", "setup", "comm_sm_count"],
                                               ascending=[True, True, False, True])
    part = part.assign(SMs="")
    part["SMs"] = part.apply(lambda r: "whole" if r["setup"] == "plain" else str(int(r["comm_sm_count"])), axis=1)
    cols = ["collective", "size_bytes", "SMs", "comm_alone_ms", "bus_bw_alone_gbs", "compute_alone_ms", "step_ms",
            "split_loss_ms", "interference_ms", "exposed_comm_ms"]
    return part[cols]


def run(n: int, spec, out: Path, timeout: float, lines: list[str], tag: str = "") -> None:
    import pandas as pd

    import gcexplore as gx
    from gcexplore.comm.launch import CommLaunchError

    traces: list = []
    t0 = time.perf_counter()
    try:
        df = gx.comm_sweep(spec, gpus=n, timeout_s=timeout, traces=traces)
    except CommLaunchError as e:
        print(f"{n} GPUs: FAILED after {time.perf_counter() - t0:.0f} s: {e}\n{e.details}", file=sys.stderr)
        lines.append(f"## {n} GPUs: failed: {e}\n")
        if e.rows is None or not len(e.rows):
            return
        df, name = e.rows, f"comm-{n}gpu{tag}-partial"  # the layouts finished before the failure
    else:
        name = f"comm-{n}gpu{tag}"
    wall = time.perf_counter() - t0
    trace = None
    if traces:
        trace = pd.concat(traces, ignore_index=True)
        df.attrs["attribution"] = gx.nccl_attribution(trace).to_dict("records")
        gx.save(trace, out / f"{name}-trace.parquet")
    df.attrs["wall_s"] = round(wall, 1)
    gx.save(df, out / f"{name}.parquet")
    try:
        tables(df, n, name, wall, out, lines, trace if traces else None)
    except Exception:  # a partial result may lack a part: the rows are saved, the traceback says what
        import traceback

        traceback.print_exc()


def _zero_trace(trace) -> str:
    """What ran during the traced zero-SM steps: NCCL kernels (none, where the copy engines moved the data)
    and copies."""
    if trace is None or "layout" not in trace.columns or not (trace["layout"] == "zero").any():
        return "(zero-SM steps not traced)"
    z = trace[trace["layout"] == "zero"]
    nccl = z[(z["activity"] == "kernel") & z["name"].astype(str).str.contains("nccl", case=False)]
    copies = z[z["activity"] != "kernel"]
    return (f"traced zero-SM steps (every rank): {len(nccl)} NCCL kernels"
            + (f" ({', '.join(sorted(set(nccl['name'].astype(str))))[:300]})" if len(nccl) else "")
            + f", {len(copies)} copy records ({', '.join(sorted(set(copies['activity'].astype(str))))})")


def tables(df, n: int, name: str, wall: float, out: Path, lines: list[str], att_trace=None) -> None:
    import pandas as pd

    import gcexplore as gx

    t = gx.comm_table(df)
    att = pd.DataFrame(df.attrs.get("attribution", []))
    fit = "GEMMs sized for their partition (cuBLASLt SM target)" if df.attrs.get("spec", {}).get("compute_fit") \
        else "stock cuBLAS GEMMs"
    parts = [f"## {n} GPUs, {fit} ({df.attrs['device_name']}, NCCL {df.attrs['nccl_version']}, "
             f"nccl4py {df.attrs['nccl4py_version']}; {len(df)} rows in {wall:.0f} s)",
             "### SMs -> bus bandwidth and step time", _md(_sms_table(t)),
             "### Fewest SMs within 1% of the best step (every split measured)", _md(gx.comm_answer(t, 0.01)),
             "### Fewest SMs reaching 95% of the peak bus bandwidth", _md(gx.bandwidth_table(t, 0.95)),
             "### The tuner's recommendation (replayed over the sweep)",
             _md(gx.recommend_comm(df, 0.01).drop(columns=["search_answer"])),
             "### NCCL kernels on the comm partition", _md(att) if len(att) else "(no trace)",
             *(["### DRAM use (PM sampling, the busiest card) beside the interference",
                _md(gx.comm_dram(df))] if df.attrs.get("pm") else []),
             *(["### Zero-SM collectives (copy engines: CTA policy ZERO, symmetric windows) beside the compute "
                "on the whole GPU", _md(gx.zero_sm_table(df)), _zero_trace(att_trace)]
               if (df["setup"] == "zero").any() else []),
             f"all-to-all ran as: {df.attrs.get('alltoall_recipe') or 'not measured'}", df.attrs["zero_sm"],
             "ranks: " + "; ".join(f"rank {m['rank']} gate {m.get('gate_us')} us"
                                   + (f", trace failed: {m['trace_error']}" if m.get("trace_error") else "")
                                   + (f", PM sampling failed: {m['pm_error']}" if m.get("pm_error") else "")
                                   + (f", zero-SM failed: {m['zero_error']}" if m.get("zero_error") else "")
                                   for m in df.attrs.get("ranks", [])), ""]
    text = "\n\n".join(parts)
    print(text, flush=True)
    lines.append(text)
    for coll in set(df["collective"]) - {""}:
        fig = gx.plot_comm(df, collective=coll)
        fig.savefig(out / f"{name}-{coll}.png", dpi=110)


def main() -> int:
    needs(modules=("nccl", "torch"))
    import gcexplore as gx

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--gpus", default="2,4")
    ap.add_argument("--collectives", default="allreduce,allgather,reducescatter,alltoall")
    ap.add_argument("--sizes", default="1M,16M,256M,1G")
    ap.add_argument("--comm-sms", default="8,16,24,32,40,48,56,64")
    ap.add_argument("--ctas", default="8,16,32")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--no-trace", action="store_true")
    ap.add_argument("--compute-fit", action="store_true", help="GEMMs sized for the compute partition (cuBLASLt)")
    ap.add_argument("--zero-sm", action="store_true", help="also all-gather / all-to-all on NCCL's copy engines")
    ap.add_argument("--pm", action="store_true", help="DRAM use per step from CUPTI PM sampling (attrs['pm'])")
    ap.add_argument("--pm-metrics", default="dram_l2", choices=("dram_bytes", "dram_l2"),
                    help="the PM set: DRAM %% and bytes and the L2's bytes (default), or the DRAM's alone")
    ap.add_argument("--tag", default="", help="appended to the file names (comm-2gpu<tag>.parquet); "
                                              "one starting with '-' needs the = form: --tag=-fit")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per rank count")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    spec = gx.CommSpec(collectives=a.collectives.split(","), sizes=a.sizes.split(","),
                       comm_sms=[int(x) for x in a.comm_sms.split(",")],
                       ctas=[int(x) for x in a.ctas.split(",") if x.strip()], repeats=a.repeats, warmup=a.warmup,
                       trace=not a.no_trace, compute_fit=a.compute_fit, pm=a.pm,
                       pm_metrics=a.pm_metrics, zero_sm=a.zero_sm)
    have = gx.device_count()
    lines = [f"# Communication SMs ({time.strftime('%Y-%m-%d %H:%M')}, {have} GPUs visible)", ""]
    for n in [int(x) for x in a.gpus.split(",")]:
        if n > have:
            lines.append(f"## {n} GPUs: skipped, {have} visible\n")
            continue
        run(n, spec, a.out, a.timeout, lines, a.tag)
        (a.out / f"comm_bench{a.tag}.md").write_text("\n".join(lines))  # after each rank count: a cut run keeps it
    (a.out / f"comm_bench{a.tag}.md").write_text("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
