"""Which memory-traffic counters the loaded CUPTI offers, each checked against known bytes.

On the GPU machine (``python3 bench/traffic_probe.py --out DIR``, about 30 s on an H100):

1. the loaded CUPTI and, from CUPTI's host API, the PM-sampling base metrics of this chip
   whose names start with ``dram__`` or ``lts__t`` (``base_metrics.json``);
2. each counter set of :data:`gcexplore.prediction.traffic.METRIC_SETS`, **in its own
   child process** (a crash in CUPTI's profiler ends that child only): the built-in memory
   kernel (a triad: reads 8n, writes 4n bytes per call) and copy kernel (reads 4n, writes
   4n) on the whole device and on 16 SMs, back to back and with the L2 flushed between
   calls; the error of the measured DRAM bytes against the known ones (and of the L2
   traffic: a streaming kernel moves all its bytes through L2 once).

Writes ``probe.json`` (every set: configured or refused, bytes, errors) and
``probe.parquet`` (one row per set x kernel x partition); prints the first set whose
DRAM bytes are within 5% of the known bytes on every row (the one to use), or says none.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

KNOWN = {"memory": (8, 4), "copy": (4, 4)}  # bytes read, written per element


def _base_metrics(out: Path) -> None:
    from gcexplore.trace.collector import preload_cupti

    preload_cupti()
    from cupti import cupti, profiler_host

    import gcexplore as gx
    from gcexplore.trace.features import describe

    gx.device_info(0)
    p = cupti.DeviceGetChipNameParams()
    p.struct_size = cupti.DEVICE_GET_CHIP_NAME_PARAMS_STRUCT_SIZE
    p.device_index = 0
    cupti.device_get_chip_name(p.ptr)
    chip = p.p_chip_name
    host = profiler_host.ProfilerHost(chip, profiler_host.ProfilerType.PM_SAMPLING)
    host.initialize()
    found = {}
    try:
        for mt in profiler_host.MetricType:
            if mt.name.endswith("COUNT"):
                continue
            try:
                names = host.get_base_metrics(mt)
            except ValueError:
                continue
            found[mt.name] = [n for n in names if n.startswith(("dram__", "lts__t", "lts__d", "sm__cycles", "gpc__"))]
        subs = {}
        for m in ("dram__bytes_read", "dram__bytes_write", "lts__t_bytes", "lts__t_sectors"):
            try:
                subs[m] = host.get_sub_metrics(m, profiler_host.MetricType.COUNTER)
            except Exception as e:  # noqa: BLE001 - recorded
                subs[m] = f"{type(e).__name__}: {e}"
    finally:
        host.deinitialize()
    (out / "base_metrics.json").write_text(json.dumps({"chip": chip, "cupti": describe(cupti).as_dict(),
                                                       "base": found, "sub": subs}, indent=1, default=str))
    print(f"chip {chip}; {describe(cupti).label}; PM-sampling counters: "
          + ", ".join(n for n in found.get("COUNTER", []) if n.startswith(("dram__bytes", "lts__t_b", "lts__t_s"))))


def _one(name: str, out: Path) -> None:
    import pandas as pd

    import gcexplore as gx
    from gcexplore.prediction.traffic import measure_traffic
    from gcexplore.workloads import builtins as B

    info = gx.device_info(0)
    frames = []
    for kind in KNOWN:
        w = B.builtin(kind, device=0)
        try:
            n = w.items
            df = measure_traffic(w, sm_counts=(None, 16), flush=True, metric_set=name, device=0)
            frames.append(df.assign(known_read=KNOWN[kind][0] * n, known_write=KNOWN[kind][1] * n,
                                    gpu_time_ms=df.attrs["gpu_time_ms"], refused=str(df.attrs["refused_sets"])))
        finally:
            w.close()
    df = pd.concat(frames, ignore_index=True)
    df["read_error"] = df["dram_read_bytes"] / df["known_read"] - 1
    df["write_error"] = df["dram_write_bytes"] / df["known_write"] - 1
    df["error"] = (df["dram_read_bytes"] + df["dram_write_bytes"]) / (df["known_read"] + df["known_write"]) - 1
    df["l2_error"] = df["l2_bytes"] / (df["known_read"] + df["known_write"]) - 1  # a streaming kernel: all via L2
    df["device_name"] = info.name
    df.to_parquet(out / f"probe_{name}.parquet")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="gcexplore-out/traffic_probe")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, default=90)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.one:
        _base_metrics(out) if args.one == "__base__" else _one(args.one, out)
        return 0
    import pandas as pd

    from gcexplore.prediction.traffic import METRIC_SETS

    try:  # in a child too: the host API is CUPTI's profiler
        r = subprocess.run([sys.executable, __file__, "--out", str(out), "--one", "__base__"], capture_output=True,
                           text=True, timeout=args.timeout)
        print((r.stdout + r.stderr).strip()[-3000:] or f"listing base metrics: rc {r.returncode}")
    except subprocess.TimeoutExpired:
        print("listing base metrics timed out")
    report, frames = {}, []
    for name in METRIC_SETS:
        try:
            r = subprocess.run([sys.executable, __file__, "--out", str(out), "--one", name], capture_output=True,
                               text=True, timeout=args.timeout)
            tail = " | ".join((r.stdout + r.stderr).strip().splitlines()[-4:])[-800:]
            rc = r.returncode
        except subprocess.TimeoutExpired:
            rc, tail = "timeout", ""
        path = out / f"probe_{name}.parquet"
        if rc == 0 and path.exists():
            df = pd.read_parquet(path)
            frames.append(df)
            worst = float(df["error"].abs().max())
            report[name] = {"ok": True, "worst_abs_error": worst, "within_5pct": worst <= 0.05,
                            "l2_counted": bool(df["l2_bytes"].notna().any())}
            print(f"{name}: worst |error| of DRAM bytes against the known bytes {worst:.2%}")
            with pd.option_context("display.width", 250, "display.max_columns", 30):
                print(df[["workload", "sm_count", "flushed", "calls", "duration_ms", "dram_read_bytes",
                          "dram_write_bytes", "l2_bytes", "achieved_gbs", "peak_gbs", "samples", "decoded", "window",
                          "read_error", "write_error", "error", "l2_error"]].to_string(index=False))
        else:
            report[name] = {"ok": False, "rc": rc, "tail": tail}
            print(f"{name}: failed (rc {rc}): {tail}")
    good = [n for n, v in report.items() if v.get("within_5pct")]
    best = next((n for n in good if report[n]["l2_counted"]), good[0] if good else None)
    report["best"] = best
    (out / "probe.json").write_text(json.dumps(report, indent=1))
    if frames:
        pd.concat(frames, ignore_index=True).to_parquet(out / "probe.parquet")
    print(f"counter set to use: {best}" if best else "no counter set measured the known bytes within 5%")
    return 0 if best else 1


if __name__ == "__main__":
    sys.exit(main())
