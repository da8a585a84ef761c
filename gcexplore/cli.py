"""The ``gcexplore`` command line.

Each subcommand is one ``_cmd_<name>(args) -> int`` function registered in
:func:`_parser`.
"""

from __future__ import annotations

import argparse
import sys


def _cmd_info(args) -> int:
    from .api import UnsupportedError, device_count, device_info

    try:
        n = device_count()
    except UnsupportedError as e:
        print(f"gcexplore info: {e}", file=sys.stderr)
        return 1
    if n == 0:
        print("gcexplore info: the driver sees no CUDA device", file=sys.stderr)
        return 1
    for i in range(n):
        try:
            info = device_info(i)
        except UnsupportedError as e:
            print(f"device {i}: {e}")
            continue
        feats = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in info.features.items())
        print(f"device {info.index}: {info.name}")
        print(f"  compute capability  {info.compute_capability[0]}.{info.compute_capability[1]}")
        print(f"  SMs                 {info.sm_count}")
        print(f"  min partition size  {info.min_partition_size}")
        print(f"  alignment           {info.alignment}")
        print(f"  valid sizes         {', '.join(map(str, info.valid_sm_counts()))}")
        print(f"  driver              {info.driver_version_str} ({info.driver_version})")
        print(f"  cuda.core           {info.cuda_core_version}")
        print(f"  cuda.bindings       {info.cuda_bindings_version}")
        print(f"  features            {feats}")
    return 0


def _cmd_demo(args) -> int:
    from ._demo import run_demo

    try:
        run_demo(args.out, device=args.device, repeats=args.repeats, recorded=args.recorded)
    except FileNotFoundError as e:  # no GPU and no recorded results in this installation
        print(f"gcexplore demo: {e}", file=sys.stderr)
        return 1
    return 0


def _add_demo(sub) -> None:
    s = sub.add_parser(
        "demo", help="sweep the built-in compute + memory pair (or, without a GPU, show the "
                     "recorded results): summary table, PNG plots and the results file")
    s.add_argument("--out", default="gcexplore-out",
                   help="folder for the plots and the results file (default: %(default)s)")
    s.add_argument("--device", type=int, default=0, help="GPU index (default: %(default)s)")
    s.add_argument("--repeats", type=int, default=5,
                   help="repetitions per mode and split of the live sweep (default: %(default)s)")
    s.add_argument("--recorded", action="store_true",
                   help="show the recorded results even when a GPU is present")
    s.set_defaults(func=_cmd_demo)


def _parse_workload(spec: str, device: int):
    """``name`` or ``name:key=value,...`` (e.g. ``spin:us=100``) -> a built-in Workload."""
    from .workloads import BUILTINS, builtin

    name, _, params = spec.partition(":")
    kwargs = {}
    for item in filter(None, params.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"bad workload option {item!r} in {spec!r}; write name:key=value,...")
        try:
            kwargs[key] = int(value)
        except ValueError:
            try:
                kwargs[key] = float(value)
            except ValueError:
                kwargs[key] = value
    if name not in BUILTINS:
        raise ValueError(f"unknown built-in workload {name!r}; built-ins are {', '.join(BUILTINS)}")
    return builtin(name, device=device, **kwargs)


def _workload_map(specs, device: int) -> dict:
    out = {}
    for spec in specs:
        w = _parse_workload(spec, device)
        key, i = w.name, 2
        while key in out:
            key, i = f"{w.name}_{i}", i + 1
        out[key] = w
    return out


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.replace("+", ",").split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated SM counts such as 24 or 8,16, got {text!r}")


def _print_overlap_summary(df) -> None:
    import pandas as pd

    from .profile import _layout_table, best_split, summarize

    s = summarize(df)
    cols = ["layout", "mode", "workload", "partition", "sm_count", "median_ms", "p10_ms", "p90_ms",
            "noisy", "makespan_median_ms"]
    with pd.option_context("display.width", 200, "display.max_rows", 500, "display.float_format", "{:.4f}".format):
        if df["layout"].nunique() == 1:
            print(s[cols].to_string(index=False))
        table = _layout_table(s)
        print()
        print(table.to_string(index=False))
    if (s["mode"] == "concurrent").any():
        b = best_split(s)
        print(f"\nbest split {b['layout']}: concurrent {b['concurrent_ms']:.3f} ms, "
              f"{b['speedup_vs_sequential']:.2f}x vs sequential, {b['speedup_vs_streams']:.2f}x vs streams, "
              f"efficiency {b['efficiency']:.2f} of the lower bound {b['lower_bound_ms']:.3f} ms")
    a = df.attrs
    print(f"{a.get('device_name')} ({a.get('device_sm_count')} SMs), driver {a.get('driver_version')}, "
          f"{a.get('repeats')} repetitions after {a.get('warmup')} warm-up, "
          f"launch gap {a.get('launch_gap_us', float('nan')):.1f} us (included in every duration)")


def _run_measurement(args, what: str, measure) -> int:
    from pathlib import Path

    from .api import UnsupportedError
    from .profile import MeasurementAborted
    from .results import save, to_chrome_trace

    try:
        df = measure()
        code = 0
    except (ValueError, TypeError) as e:
        print(f"gcexplore {what}: {e}", file=sys.stderr)
        return 2
    except UnsupportedError as e:
        print(f"gcexplore {what}: {e}", file=sys.stderr)
        return 1
    except MeasurementAborted as e:
        df = e.partial
        code = 130 if isinstance(e, KeyboardInterrupt) else 1
        print(f"gcexplore {what}: {e}", file=sys.stderr)
        if df.empty:
            return code
    out = Path(args.out)
    save(df, out)
    if not df.empty:
        _print_overlap_summary(df)
    print(f"\nwrote {out}" + (" (partial)" if code else ""))
    if args.trace:
        print(f"wrote {to_chrome_trace(df, args.trace)}")
    return code


def _cmd_profile(args) -> int:
    from .profile import profile_overlap

    def measure():
        wls = _workload_map(args.workloads, args.device)
        return profile_overlap(wls, args.split, repeats=args.repeats, warmup=args.warmup,
                               device=args.device, modes=args.modes.split(","), l2_flush=args.l2_flush,
                               graphs=args.graphs)

    return _run_measurement(args, "profile", measure)


def _cmd_sweep(args) -> int:
    from .profile import sweep

    def measure():
        wls = _workload_map(args.workloads, args.device)
        return sweep(wls, args.sizes, others=args.others or (), repeats=args.repeats, warmup=args.warmup,
                     device=args.device, modes=args.modes.split(","), l2_flush=args.l2_flush,
                     graphs=args.graphs, checkpoint=args.checkpoint, progress=not args.quiet)

    return _run_measurement(args, "sweep", measure)


def _add_profile(sub) -> None:
    from .profile import MODES

    def common(s, default_out):
        s.add_argument("workloads", nargs="+", metavar="WORKLOAD",
                       help="built-in workloads in partition order: compute, memory, copy, spin, latency, "
                            "optionally with options, e.g. spin:us=100 or memory:n=67108864")
        s.add_argument("--repeats", type=int, default=20, help="measured repetitions per mode (default: %(default)s)")
        s.add_argument("--warmup", type=int, default=3, help="warm-up repetitions (default: %(default)s)")
        s.add_argument("--device", type=int, default=0, help="GPU index (default: %(default)s)")
        s.add_argument("--modes", default=",".join(MODES), help="comma-separated modes (default: %(default)s)")
        s.add_argument("--l2-flush", action="store_true", help="flush L2 before every repetition")
        s.add_argument("--graphs", action="store_true", help="time CUDA-graph launches of each workload")
        s.add_argument("--out", default=default_out, help="results file, .parquet or .csv (default: %(default)s)")
        s.add_argument("--trace", help="also write a Perfetto / chrome://tracing timeline to this .json file")

    s = sub.add_parser("profile", help="time built-in workloads on one split in every mode; "
                                       "print a summary and write the results file")
    common(s, "gcexplore-out/profile.parquet")
    s.add_argument("--split", type=_int_list, required=True,
                   help="SM counts of the partitions, e.g. 24 (the remainder takes the last workload)")
    s.set_defaults(func=_cmd_profile)

    s = sub.add_parser("sweep", help="profile the first workload on every valid partition size, the last on "
                                     "the rest; print the layouts and the best split, write the results file")
    common(s, "gcexplore-out/sweep.parquet")
    s.add_argument("--sizes", type=_int_list, help="first-partition sizes (default: every valid size)")
    s.add_argument("--others", type=_int_list, help="fixed sizes of middle workloads (3 or more workloads)")
    s.add_argument("--checkpoint", help="JSON-lines file: rows appended per layout; a rerun skips finished layouts")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=_cmd_sweep)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gcexplore", description="Explore and profile CUDA green contexts.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("info", help="print what each visible GPU allows for green contexts")
    s.set_defaults(func=_cmd_info)
    _add_profile(sub)
    _add_demo(sub)
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
