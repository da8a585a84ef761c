"""The ``gcexplore`` command line.

Each subcommand is one ``_cmd_<name>(args) -> int`` function registered in
:func:`_parser`. Every argument is checked before the GPU is touched; every failure
is one line on stderr and a non-zero exit (2: bad arguments, 1: no GPU or a failed
measurement, 130: interrupted), never a traceback. A measurement that fails or is
interrupted still writes the rows it measured to ``--out``.

Importing this module loads nothing heavy, so ``gcexplore --help`` answers at once. Argument
types and the checks of the files a run writes are in :mod:`.args`.

Over 500 lines: the core's subcommands, each a short parser and handler (the families keep theirs in
their own cli modules).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from .._registry import COMMANDS, resolve
from .._version import __version__
from ._text import escape_controls, one_line, print_lines
from .args import (RESULT_SUFFIXES, Usage, check_checkpoint, float_arg, int_arg, int_list, kernel_trace_file,
                   mode_list, percent_arg, workload_names, writable_file)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (the usage block is one ``--help`` away)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


# Advice in library errors names Python arguments; on the command line, the flags that do the same.
_CLI_WORDS = (("pass labels=(first, second) to pick", "pass --labels FIRST,SECOND to pick"),
              ("labels must name", "--labels must name"), ("labels must be", "--labels must be"),
              ("by=", "--by "), ("pass client= or scheduler=", "pass --scheduler "), ("slo_ms", "--slo-ms"))


def _fail(cmd: str, message: str, code: int, cause: BaseException | None = None) -> int:
    """One line on stderr; with ``cause`` (--verbose) also the chain of errors behind it."""
    message = message.removeprefix(f"{cmd}: ")  # "gcexplore compare: compare: ..." says it twice
    for python, flag in _CLI_WORDS:
        message = message.replace(python, flag)
    print(one_line(f"gcexplore {cmd}: {message}"), file=sys.stderr)
    while cause is not None and (cause := cause.__cause__ or cause.__context__) is not None:
        print(one_line(f"  caused by {type(cause).__name__}: {cause}"), file=sys.stderr)
    return code


# ------------------------------------------------------------------------ commands


def _cmd_info(args) -> int:
    from ..device.driver import UnsupportedError, device_count, device_info

    try:
        n = device_count()
    except UnsupportedError as e:
        return _fail("info", str(e), 1, e if args.verbose else None)  # it says what works without a GPU
    if n == 0:
        return _fail("info", "the driver sees no CUDA device", 1)
    indices = range(n) if args.device is None else [args.device]
    if args.device is not None and args.device >= n:
        return _fail("info", f"device {args.device} does not exist: this machine has {n} CUDA device(s) "
                             f"(0..{n - 1})", 2)
    for i in indices:
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
    from .demo import out_folder, run_demo

    try:
        out_folder(args.out)  # before anything is measured or printed
    except ValueError as e:
        raise Usage(f"--out: {e}") from None
    run_demo(args.out, device=args.device, repeats=args.repeats, recorded=args.recorded,
             overwrite=args.overwrite)
    return 0


def _build_workloads(parsed, device: int) -> dict:
    from ..workloads.builtins import builtin

    return {key: builtin(name, device=device, **kwargs) for key, name, kwargs in parsed}


def _print_overlap(df) -> None:
    import pandas as pd

    from ..analysis import summarize
    from ..views.report import layout_report

    if df["layout"].nunique() == 1:
        cols = ["mode", "workload", "partition", "sm_count", "median_ms", "p10_ms", "p90_ms", "noisy",
                "makespan_median_ms"]
        with pd.option_context("display.width", 200, "display.max_rows", 500,
                               "display.float_format", "{:.4f}".format):
            print(summarize(df)[cols].to_string(index=False))
        print()
    print(layout_report(df))
    a = df.attrs
    later = a.get("warmup_later_rounds")
    calls = a.get("warmup_calls") or []
    slow = f" (one call of each workload first at {len(calls)} layout(s) whose first call ran slow)" if calls else ""
    warm = (f"{a.get('warmup')} warm-up in a layout's first round, {max(later)} in its later ones" + slow
            if isinstance(later, list) and later and a.get("rounds", 1) > 1
            else f"each after {a.get('warmup')} warm-up")
    print(f"{a.get('repeats')} repetitions in {a.get('rounds', 1)} round(s), {warm}, launch gap "
          f"{a.get('launch_gap_us', float('nan')):.1f} us (included in every duration)")


def _save_rows(cmd: str, df, out: Path, trace: str | None, partial: bool, kernels=None) -> tuple[int, list[str]]:
    """Write the results file first, then the kernel trace and the timeline, each on its own:
    one that fails is reported and does not stop the others. (exit code, lines to print)."""
    from ..results.chrome_trace import to_chrome_trace
    from ..results.io import save
    from ..trace.collector import TracedResult

    result, kernel_df = (df.result, df.trace) if isinstance(df, TracedResult) else (df, None)
    code, done = 0, []
    files = [("the results", lambda: save(result, out, overwrite=True),
              " (partial: the rows measured before the failure)" if partial else f" ({len(result)} rows)")]
    if kernel_df is not None and kernels is not None:
        files.append(("the kernel trace", lambda: save(kernel_df, kernels, overwrite=True),
                      f" ({len(kernel_df)} kernel records)"))
    if trace:
        files.append(("the timeline", lambda: to_chrome_trace(result, trace), ""))
    for what, write, note in files:
        try:
            done.append(f"wrote {write()}{note}")
        except (OSError, ValueError) as e:
            kept = f" ({out} is written)" if what != "the results" and done else ""
            code = _fail(cmd, f"measured {len(result)} rows but could not write {what}: {e}{kept}", 1)
    return code, done


def _measure(args, cmd: str, measure) -> int:
    out = writable_file(args.out, RESULT_SUFFIXES, "--out")
    if args.trace:
        trace = writable_file(args.trace, (".json",), "--trace")
        if trace.resolve() == out.with_suffix(".json").resolve():
            raise Usage(f"--trace {args.trace!r} would overwrite the metadata sidecar of --out {args.out!r}")
    kernels = kernel_trace_file(args, out)
    if getattr(args, "checkpoint", None):
        check_checkpoint(args, out, kernels)
    from ..schema import Options, auto_rounds

    Options(repeats=args.repeats, warmup=args.warmup, rounds=auto_rounds(args.repeats, args.rounds), modes=args.modes,
            l2_flush=args.l2_flush, graphs=args.graphs)  # every option checked before the GPU is asked
    parsed = workload_names(args.workloads)
    if kernels is not None:
        from ..trace.collector import TraceUnavailable, require_cupti

        try:
            require_cupti()
        except TraceUnavailable as e:
            return _fail(cmd, f"--kernel-trace: {e}", 1)
    return _run_and_save(cmd, parsed, args.device, measure, _print_overlap, out, args.trace, kernels)


def _run_and_save(cmd: str, parsed, device: int, measure, show, out: Path, trace: str | None,
                  kernels: Path | None = None) -> int:
    """Build the workloads, ``measure(wls)``, ``show(df)`` and save; keep rows of an aborted run."""
    from ..experiments.runner import MeasurementAborted

    from ..schema import RECIPES_ATTR
    from .decide import recipes_text

    aborted, partial = 0, False
    wls = _build_workloads(parsed, device)
    try:
        df = measure(wls)
        if hasattr(df, "attrs"):  # the recipes, so that it can be measured again (compare --until-decided)
            df.attrs.setdefault(RECIPES_ATTR, recipes_text(parsed))
    except MeasurementAborted as e:
        df, partial = e.partial, True
        aborted = 130 if isinstance(e, KeyboardInterrupt) else 1
        print(f"gcexplore {cmd}: {e}", file=sys.stderr)
        if df is None or df.empty:
            return aborted
    finally:
        for w in wls.values():
            w.close()
    code, done = _save_rows(cmd, df, out, trace, partial, kernels)
    code = aborted or code
    if not partial:
        try:
            show(getattr(df, "result", df))
        except (ValueError, TypeError, KeyError) as e:  # the rows are on disk; only the summary failed
            code = _fail(cmd, f"the summary of the measured rows failed ({type(e).__name__}: {e}); the rows are "
                              f"saved in {out}", 1)
    for line in done:
        print(line)
    return code


def _cmd_profile(args) -> int:
    from ..experiments.overlap import profile_overlap

    return _measure(args, "profile", lambda wls: profile_overlap(
        wls, args.split, repeats=args.repeats, warmup=args.warmup, rounds=args.rounds, device=args.device,
        modes=args.modes,
        l2_flush=args.l2_flush, graphs=args.graphs, **_trace_kw(args)))


def _trace_kw(args) -> dict:
    return {"trace": True} if args.kernel_trace else {}


def _cmd_sweep(args) -> int:
    from ..experiments.overlap import sweep

    return _measure(args, "sweep", lambda wls: sweep(
        wls, args.sizes, others=args.others or (), repeats=args.repeats, warmup=args.warmup, rounds=args.rounds,
        device=args.device, modes=args.modes, l2_flush=args.l2_flush, graphs=args.graphs,
        checkpoint=args.checkpoint, progress=not args.quiet, **_trace_kw(args)))


def _print_tune(df) -> None:
    import pandas as pd

    from ..analysis import summarize, tune_table

    a = df.attrs
    with pd.option_context("display.width", 200, "display.max_rows", 500, "display.float_format", "{:.4f}".format):
        print(tune_table(df).to_string(index=False))
        if a.get("answer"):
            cols = ["workload", "partition", "sm_count", "median_ms", "throughput_tflops", "bandwidth_gbs"]
            print(f"\nat {a['answer']}:")
            print(summarize(df[df["layout"] == a["answer"]])[cols].to_string(index=False))
    print()
    print_lines([*a.get("reason", []), *a.get("notes", [])])


def _cmd_tune(args) -> int:
    from ..schema import Options
    from ..experiments.search import Settings

    out = writable_file(args.out, RESULT_SUFFIXES, "--out")
    kw = dict(slo_ms=args.slo_ms, percentile=args.percentile, tolerance=args.tolerance,
              repeats=args.repeats, max_repeats=args.max_repeats)
    Settings(**kw)  # every setting checked before the GPU is asked
    Options(repeats=args.repeats, warmup=args.warmup, modes=("concurrent",), l2_flush=args.l2_flush)
    parsed = workload_names(args.workloads)
    if args.slo_ms is not None and len(parsed) > 2 and not args.others:
        raise Usage(f"--slo-ms with {len(parsed)} workloads needs --others (the middle workloads' sizes)")
    if len(parsed) > 2 and not args.others:  # count the size combinations before any workload is built
        from ..device.driver import device_info
        from ..experiments.request import check_enumeration

        info = device_info(args.device)
        check_enumeration(info, len(parsed), len(args.sizes or info.valid_sm_counts()), None)
    from ..experiments.tuner import tune

    return _run_and_save("tune", parsed, args.device, lambda wls: tune(
        wls, others=args.others, sm_counts=args.sizes, warmup=args.warmup, device=args.device,
        l2_flush=args.l2_flush, progress=not args.quiet, **kw), _print_tune, out, None)


def _add_tune(sub) -> None:
    from ..schema import MAX_TUNE_REPEATS

    s = sub.add_parser("tune", help="find the split with the lowest concurrent makespan (or, with --slo-ms, the "
                                    "smallest first partition meeting a latency target) measuring few layouts")
    s.add_argument("workloads", nargs="+", metavar="WORKLOAD",
                   help="built-in workloads in partition order (the first's size is searched, the last gets "
                        "the rest), e.g. compute memory, or latency:blocks=528 compute")
    s.add_argument("--slo-ms", type=float_arg, help="latency target of the first workload in ms")
    s.add_argument("--percentile", type=float_arg, default=50.0,
                   help="percentile of the first workload's latency that must meet --slo-ms (default: %(default)s)")
    s.add_argument("--tolerance", type=float_arg, default=0.01,
                   help="the answer within this fraction of the best makespan (default: %(default)s)")
    s.add_argument("--repeats", type=int_arg(1), default=5,
                   help="repetitions at a layout's first measurement (default: %(default)s)")
    s.add_argument("--max-repeats", type=int_arg(1, MAX_TUNE_REPEATS, " (the tuner's limit)"), default=40,
                   help=f"most repetitions of one layout, up to {MAX_TUNE_REPEATS} (default: %(default)s)")
    s.add_argument("--warmup", type=int_arg(0), default=1,
                   help="warm-up repetitions the first time a layout is measured; later visits warm their fresh "
                        "streams with a 1 us spin (and one call of each workload where its first ran slow) "
                        "(default: %(default)s)")
    s.add_argument("--sizes", type=int_list, help="first-partition sizes to choose from (default: every valid size)")
    s.add_argument("--others", type=int_list, help="fixed sizes of middle workloads (default: searched too)")
    s.add_argument("--device", type=int_arg(0), default=0, help="GPU index (default: %(default)s)")
    s.add_argument("--l2-flush", action="store_true", help="flush L2 before every repetition")
    s.add_argument("--out", default="gcexplore-out/tune.parquet",
                   help="results file, .parquet or .csv (default: %(default)s)")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=_cmd_tune)


def _cmd_compare(args) -> int:
    from ..analysis.comparison import Comparisons, compare
    from ..views.compare_text import describe_sets

    labels = None
    if args.labels is not None:
        labels = [x.strip() for x in args.labels.split(",")]
        if len(labels) != 2 or not all(labels):
            raise Usage(f"--labels takes two names separated by a comma, got {args.labels!r}")
    try:
        if args.out is not None and not args.until_decided:
            raise Usage("--out names the folder of the new runs --until-decided measures; without it compare "
                        "measures nothing (use --plot for a figure)")
        if args.until_decided:
            from .decide import compare_until_decided_cli

            c, written = compare_until_decided_cli(args)
            for look in c.settings["looks"]:
                print(f"look {look['look']}: {look['runs_per_side']} run(s) per side, {look['undecided']} undecided")
            print(f"wrote {len(written)} new run(s): {', '.join(str(p) for p in written)}" if written else
                  "no new run was needed (the recorded sides decided every row)")
        else:
            c = compare(args.a, args.b, by=args.by, labels=labels, min_effect=args.threshold / 100.0,
                        confidence=args.confidence, slo_ms=args.slo_ms)  # paths or recorded names
    except FileNotFoundError as e:  # a wrong argument, not a failed run
        raise Usage(str(e)) from None
    sets = list(c) if isinstance(c, Comparisons) else [("", c)]
    for name, one in sets:
        if name:
            print(f"== {one_line(name)} ==")
        _print_comparison(one, all_differences=args.all)
    if isinstance(c, Comparisons):
        print_lines(describe_sets(c))
    if args.plot:
        from ..views.compare import plot_compare

        target = writable_file(args.plot, (".png", ".svg", ".pdf"), "--plot")
        from ..results.files import write_figure

        fig = plot_compare(c, group=args.mode)
        write_figure(fig, target)  # a symlink at --plot is replaced, never written through
        print(f"wrote {target} ({fig.axes[0].get_title()})")
    if args.fail_on_regression is not None:
        return _gate(c, args.fail_on_regression)
    return 0


def _gate(c, pct: float) -> int:
    """``--fail-on-regression PCT``: the exit code of :func:`gcexplore.analysis.gate.gate` (the contract in
    its ``GATE_EXIT_CODES``), its reason on stderr (naming a default noise floor where one was used)."""
    from ..analysis.comparison import Comparisons
    from ..analysis.gate import gate
    from ..analysis.stats import Floor

    ones = [one for _, one in c] if isinstance(c, Comparisons) else [c]
    code, why = gate(c.table, pct, [Floor(**one.settings["floor"]) for one in ones if "floor" in one.settings])
    return _fail("compare", why, code) if code else 0


def _print_comparison(c, *, all_differences: bool = False) -> None:
    import pandas as pd

    from ..views.compare_text import describe

    cols = ["group", "layout_a", "layout_b", "median_a_ms", "median_b_ms", "ratio", "ratio_low", "ratio_high",
            "verdict", "cycles_verdict", "reason"]
    with pd.option_context("display.width", 220, "display.max_rows", 1000, "display.max_colwidth", 90,
                           "display.float_format", "{:.4f}".format):
        print(c.table[cols].to_string(index=False))
    print()
    print_lines(describe(c, all_differences=all_differences))
    print()


def _add_compare(sub) -> None:
    from ..analysis.gate import GATE_EXIT_CODES

    s = sub.add_parser("compare", help="compare two results layout by layout: which differences are beyond the "
                                       "noise (FAST/SLOW/SAME/UNCLEAR) and whether the best split moved")
    s.add_argument("a", metavar="A", help="reference result: a file (.parquet or .csv) or a recorded name "
                                           "(sweep, sweep_second, ...)")
    s.add_argument("b", metavar="B", nargs="?", help="the result compared with it (or use --by)")
    s.add_argument("--by", help="a column that splits A into two sides (run_id, device_uuid, driver, ...)")
    s.add_argument("--labels", metavar="A,B", help="names of the two sides (with --by: which two values "
                                                   "of the column, in order)")
    s.add_argument("--threshold", type=float_arg, default=1.0,
                   help="differences within this many percent count as SAME (default: %(default)s)")
    s.add_argument("--confidence", type=float_arg, default=0.95,
                   help="joint level of the intervals over all layouts (default: %(default)s)")
    s.add_argument("--slo-ms", type=float_arg, help="also compare the latency-target answer for this target")
    s.add_argument("--fail-on-regression", type=percent_arg, metavar="PCT",
                   help="the CI gate; its exit codes are a contract: "
                        + "; ".join(f"{k}: {v}" for k, v in sorted(GATE_EXIT_CODES.items())).replace("%", "%%"))
    s.add_argument("--until-decided", type=int_arg(1), metavar="N",
                   help="measure both sides again (new runs of their built-in recipes and options, on --device) "
                        "where undecided, up to N runs per side; needs results this card measured")
    s.add_argument("--device", type=int_arg(0), default=0, help="GPU index for --until-decided (default: %(default)s)")
    s.add_argument("--out", metavar="DIR", help="with --until-decided: folder for the new runs, each saved as it is "
                                                "measured (default: gcexplore-out/until-decided-<time>)")
    s.add_argument("--plot", help="also save plot_compare to this .png/.svg/.pdf")
    s.add_argument("--all", action="store_true", help="list every field that differs between the two sides "
                                                       "(default: the first eight)")
    s.add_argument("--mode", metavar="MODE", help="the mode the plot shows (sweeps: default concurrent; "
                                                  "scaling: a workload, default the first)")
    s.set_defaults(func=_cmd_compare)


# -------------------------------------------------------------------------- parser


def _add_measuring(sub) -> None:
    from ..schema import MAX_REPEATS, MODES

    def common(s, default_out):
        s.add_argument("workloads", nargs="+", metavar="WORKLOAD",
                       help="built-in workloads in partition order: compute, memory, copy, spin, latency, "
                            "optionally with options, e.g. spin:us=100 or memory:n=67108864")
        s.add_argument("--repeats", type=int_arg(1), default=15,
                       help=f"measured repetitions per mode over all rounds, 1..{MAX_REPEATS} (default: %(default)s)")
        s.add_argument("--warmup", type=int_arg(0), default=1,
                       help="warm-up repetitions in a layout's first round; its later rounds warm their fresh "
                            "streams with a 1 us spin (and one call of each workload where its first ran slow) "
                            "(default: %(default)s)")
        s.add_argument("--rounds", type=int_arg(1), default=None,
                       help="rounds the repetitions are split into, each splitting afresh in a new order "
                            "(default: min(5, repeats // 3))")
        s.add_argument("--device", type=int_arg(0), default=0, help="GPU index (default: %(default)s)")
        s.add_argument("--modes", type=mode_list, default=MODES,
                       help=f"comma-separated modes (default: {','.join(MODES)})")
        s.add_argument("--l2-flush", action="store_true", help="flush L2 before every repetition")
        s.add_argument("--graphs", action="store_true", help="time CUDA-graph launches of each workload")
        s.add_argument("--out", default=default_out, help="results file, .parquet or .csv (default: %(default)s)")
        s.add_argument("--trace", help="also write a Perfetto / chrome://tracing timeline to this .json file")
        s.add_argument("--kernel-trace", metavar="FILE",
                       help="also record every kernel with CUPTI (trace=True) and save that kernel trace "
                            "to this .parquet or .csv file (needs cupti-python)")

    s = sub.add_parser("profile", help="time built-in workloads on one split in every mode; "
                                       "print a summary and write the results file")
    common(s, "gcexplore-out/profile.parquet")
    s.add_argument("--split", type=int_list, required=True,
                   help="SM counts of the partitions, e.g. 24 (the remainder takes the last workload)")
    s.set_defaults(func=_cmd_profile)

    s = sub.add_parser("sweep", help="profile the first workload on every valid partition size, the last on "
                                     "the rest; print the layouts and the best split, write the results file")
    common(s, "gcexplore-out/sweep.parquet")
    s.add_argument("--sizes", type=int_list, help="first-partition sizes (default: every valid size)")
    s.add_argument("--others", type=int_list, help="fixed sizes of middle workloads (3 or more workloads)")
    s.add_argument("--checkpoint", help="JSON-lines file: rows appended per layout; a rerun skips finished layouts")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=_cmd_sweep)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="gcexplore", description="Explore and profile CUDA green contexts.")
    p.add_argument("--version", action="version", version=f"gcexplore {__version__}")
    p.add_argument("--verbose", action="store_true", help="after an error, also print what caused it")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("info", help="print what each visible GPU allows for green contexts")
    s.add_argument("--device", type=int_arg(0), help="only this GPU index")
    s.set_defaults(func=_cmd_info)
    _add_measuring(sub)
    _add_tune(sub)
    _add_compare(sub)
    for add in COMMANDS.values():  # the families' subcommands (campaign, serve, comm)
        resolve(add)(sub)
    s = sub.add_parser(
        "demo", help="sweep the built-in compute + memory pair (or, without a GPU, show the "
                     "recorded results): summary table, PNG plots and the results file")
    s.add_argument("--out", default="gcexplore-out",
                   help="folder for the plots and the results file (default: %(default)s)")
    s.add_argument("--device", type=int_arg(0), default=0, help="GPU index (default: %(default)s)")
    s.add_argument("--repeats", type=int_arg(1), default=5,
                   help="repetitions per mode and split of the live sweep (default: %(default)s)")
    s.add_argument("--recorded", action="store_true",
                   help="show the recorded results even when a GPU is present")
    s.add_argument("--overwrite", action="store_true",
                   help="replace a results file already in --out (default: keep it, write a new name)")
    s.set_defaults(func=_cmd_demo)
    return p


class _PipeSafe:
    """stdout that, once the reader has gone (``gcexplore demo | head -3``), drops further
    output instead of raising, so the command still writes its files and exits quietly."""

    def __init__(self, stream):
        self._stream, self.broken = stream, False

    def _closed(self) -> None:
        self.broken = True
        with contextlib.suppress(OSError, ValueError):  # later flushes (at exit too) go nowhere
            os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                self._stream.write(escape_controls(text))
                return len(text)
            except BrokenPipeError:
                self._closed()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._closed()

    def __getattr__(self, name):
        return getattr(self._stream, name)


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    cmd = args.command
    stdout, sys.stdout = sys.stdout, _PipeSafe(sys.stdout)
    try:
        return _run(args, cmd)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        sys.stdout = stdout


def _run(args, cmd: str) -> int:
    try:
        return args.func(args)
    except Usage as e:
        return _fail(cmd, str(e), 2)
    except KeyboardInterrupt:
        return _fail(cmd, "interrupted", 130)
    except (ValueError, TypeError) as e:
        return _fail(cmd, str(e), 2)
    except (FileNotFoundError, PermissionError) as e:
        return _fail(cmd, str(e), 1)
    except Exception as e:  # GreenContextError, UnsupportedError, driver errors: one line
        return _fail(cmd, f"{type(e).__name__}: {e}", 1, e if args.verbose else None)


if __name__ == "__main__":
    sys.exit(main())
