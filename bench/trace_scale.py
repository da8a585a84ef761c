"""Kernel traces at scale: summarize(trace) (busy_time) and to_chrome_trace, before and after
they were built from whole columns. No GPU: the trace is synthetic (and says so).

The "before" code is the row-by-row implementation read from git (``--before``, the last
commit that had it); it runs on a subset only (each pandas step it takes per group or
repetition deep-copies the trace's attrs, which list every repetition, so its time grows
with the square of the size), the new code on the subset and on the full size. Both
outputs are compared on the subset (kernel_gaps too).

    python bench/trace_scale.py --out bench-out/trace_scale
    python bench/trace_scale.py --rows 480000 --chrome-rows 96000 --subset 20000 --out DIR

Prints one row per (function, code, rows) with rows/s, and the speed-up; writes
``trace_scale.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gcexplore.analysis import kernel_gaps, summarize  # noqa: E402
from gcexplore.results.chrome_trace import to_chrome_trace  # noqa: E402
from gcexplore.schema import conform  # noqa: E402

BEFORE = "1c1ab1f"  # the last commit with the row-by-row busy_time and to_chrome_trace
MODES = ("alone", "sequential", "streams", "concurrent")


def synthetic_trace(rows: int, kernels: int = 3, seed: int = 0) -> pd.DataFrame:
    """A kernel trace of about ``rows`` kernels: 16 layouts x 4 modes x reps x 2 workloads of
    ``kernels`` kernels each, the second on two streams whose kernels overlap, with launch gaps;
    its attrs list every repetition's origin, as a collector's do."""
    rng = np.random.default_rng(seed)
    per_rep, layouts = 2 * kernels, [f"{k}+{132 - k}" for k in range(8, 136, 8)][:16]
    reps = max(1, rows // (per_rep * len(layouts) * len(MODES)))
    recs = []
    for layout in layouts:
        k = int(layout.split("+")[0])
        for mode in MODES:
            for rep in range(reps):
                for w, (wl, part, sm, streams) in enumerate((("matmul", "p0", k, 1), ("sigmoid", "remainder", 132 - k, 2))):
                    t = rng.uniform(0.001, 0.01)
                    for i in range(per_rep // 2):
                        dur = rng.uniform(0.005, 0.05)
                        stream = 10 + 2 * w + (i % streams)
                        recs.append((layout, mode, rep, wl, i, part, sm, stream, f"void kernel<{w}>(float*)", t, t + dur))
                        t += dur * (0.5 if streams == 2 else 1.0) + rng.uniform(0.0, 0.004)
    df = pd.DataFrame(recs, columns=["layout", "mode", "rep", "workload", "launch", "partition", "sm_count",
                                     "stream_id", "name", "start_ms", "end_ms"])
    n = len(df)
    for col, value in (("grid_x", 132), ("grid_y", 1), ("grid_z", 1), ("block_x", 256), ("block_y", 1), ("block_z", 1),
                       ("cluster_x", 0), ("cluster_y", 1), ("cluster_z", 1), ("registers_per_thread", 32),
                       ("static_shared_bytes", 0), ("dynamic_shared_bytes", 1024), ("max_active_clusters", 0),
                       ("graph_id", 0), ("context_id", 3)):
        df[col] = np.full(n, value, dtype=np.int64)
    df["activity"] = "kernel"
    df["bytes"] = np.where(df["workload"] == "sigmoid", 1e6, np.nan)
    df["correlation_id"] = np.arange(n, dtype=np.int64)
    df["device_name"], df["run_id"] = "synthetic GPU (not a measurement)", "synthetic-scale"
    df.attrs.update(kind="trace", device_name="synthetic GPU (not a measurement)", run_id="synthetic-scale",
                    device_sm_count=132, trace_of="overlap", repeats=reps,
                    rep_origins=[{"layout": la, "mode": m, "rep": r, "origin_ns": 10**9 + r,
                                  "workloads": ["matmul", "sigmoid"]}
                                 for la in layouts for m in MODES for r in range(reps)])
    return conform(df, "trace")


def _before_module(path: str, name: str, rev: str):
    """``path`` as it was at ``rev``, imported inside its package (its relative imports resolve there)."""
    try:
        src = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        return None, f"no git history for the before code ({rev}:{path}): {getattr(e, 'stderr', e)!s}".strip()
    package = ".".join(path.removesuffix(".py").split("/")[:-1])
    spec = importlib.util.spec_from_loader(f"{package}.{name}", loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = package
    exec(compile(src, f"{rev}:{path}", "exec"), mod.__dict__)  # our own file from our own history
    return mod, None


def _timed(fn, *args) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def _chrome_json(write, df, path: Path):
    write(df, path, reps=None)
    return json.loads(path.read_text())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=480_000, help="kernel rows for summarize(trace) (default: %(default)s)")
    p.add_argument("--chrome-rows", type=int, default=96_000, help="kernel rows for to_chrome_trace")
    p.add_argument("--subset", type=int, default=1_000,
                   help="rows both versions run on and are compared on (the old code's time grows with the square "
                        "of the repetitions; default: %(default)s)")
    p.add_argument("--kernels", type=int, default=3, help="kernels per workload and repetition (default: %(default)s)")
    p.add_argument("--before", default=BEFORE, help="git revision of the row-by-row code (default: %(default)s)")
    p.add_argument("--out", required=True, help="folder for trace_scale.json and the exported traces")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    old_trace, why = _before_module("gcexplore/analysis/trace.py", "_before_trace", args.before)
    old_io, why_io = _before_module("gcexplore/results/io.py", "_before_io", args.before)
    small, full, chrome = (synthetic_trace(n, args.kernels) for n in (args.subset, args.rows, args.chrome_rows))
    results = []

    def row(fn, code, df, seconds):
        results.append({"function": fn, "code": code, "rows": len(df), "seconds": seconds,
                        "rows_per_s": len(df) / seconds})

    t, new_small = _timed(summarize, small)
    row("summarize(trace)", "after", small, t)
    t, _ = _timed(summarize, full)
    row("summarize(trace)", "after", full, t)
    new_json = _chrome_json(to_chrome_trace, small, out / "after-small.json")
    t, _ = _timed(to_chrome_trace, small, out / "after-small.json")
    row("to_chrome_trace", "after", small, t)
    t, _ = _timed(lambda: to_chrome_trace(chrome, out / "after-full.json", reps=None))
    row("to_chrome_trace", "after", chrome, t)
    same = {}
    if old_trace is not None:
        t, old_small = _timed(old_trace.busy_time, small)
        row("summarize(trace)", "before", small, t)
        pd.testing.assert_frame_equal(new_small, old_small, check_exact=False, rtol=1e-12)
        pd.testing.assert_frame_equal(kernel_gaps(small), old_trace.kernel_gaps(small), check_exact=False, rtol=1e-12)
        same["summarize(trace)"] = True  # and kernel_gaps
    if old_io is not None:
        t, old_json = _timed(_chrome_json, old_io.to_chrome_trace, small, out / "before-small.json")
        row("to_chrome_trace", "before", small, t)
        same["to_chrome_trace"] = old_json == new_json
    print(f"{'function':18} {'code':7} {'rows':>8} {'seconds':>9} {'rows/s':>12}")
    for r in sorted(results, key=lambda r: (r["function"], r["code"] != "before", r["rows"])):
        print(f"{r['function']:18} {r['code']:7} {r['rows']:8d} {r['seconds']:9.3f} {r['rows_per_s']:12,.0f}")
    for fn in ("summarize(trace)", "to_chrome_trace"):
        rate = {r["code"]: r["rows_per_s"] for r in results if r["function"] == fn and r["rows"] == len(small)
                or (r["function"] == fn and r["code"] == "before")}
        if "before" in rate:
            after = max(r["rows_per_s"] for r in results if r["function"] == fn and r["code"] == "after")
            print(f"{fn}: {after / rate['before']:.0f}x the rows per second of the row-by-row code; "
                  f"same output on {len(small)} rows: {same.get(fn)}")
        else:
            print(f"{fn}: no before numbers ({why or why_io})")
    (out / "trace_scale.json").write_text(json.dumps({"results": results, "same_output": same,
                                                      "before": args.before}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
