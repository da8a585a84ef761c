"""``gcexplore comm``: how many SMs a collective needs beside compute, on the GPUs of this host (one
process per GPU, started here). Every argument is checked before a process starts."""

from __future__ import annotations

import os

from ..cli.args import Usage, int_arg, int_list, writable_file

_SUFFIXES = (".parquet", ".csv")


def _names(text: str) -> list[str]:
    return [t for t in (p.strip() for p in text.split(",")) if t]


def _ctas(text: str) -> list[int]:
    if text.strip().lower() in ("", "none"):
        return []
    try:
        return [int(t) for t in _names(text)]
    except ValueError:
        raise ValueError(f"--ctas takes comma-separated whole numbers 1..32 or 'none', got {text!r}") from None


def add_comm(sub) -> None:
    s = sub.add_parser("comm", help="communication SMs: an NCCL collective on a partition beside a GEMM chain on "
                                    "the rest, every split, on 2+ GPUs of this host (one process per GPU)")
    s.add_argument("--gpus", type=int_arg(2), help="ranks, GPUs 0..N-1 (default: every GPU, at least 2)")
    s.add_argument("--collectives", type=_names, default=["allreduce"],
                   help="comma-separated: allreduce, allgather, reducescatter, alltoall (default: allreduce)")
    s.add_argument("--sizes", type=_names, default=["1M", "16M", "256M", "1G"],
                   help="message sizes, K/M/G = powers of 1024 (default: 1M,16M,256M,1G)")
    s.add_argument("--comm-sms", type=int_list, default=[8, 16, 24, 32, 40, 48, 56, 64],
                   help="SMs of the collective's partition at each split (default: 8,16,...,64)")
    s.add_argument("--ctas", type=_ctas, default=[8, 16, 32],
                   help="NCCL max_ctas of the whole-GPU baselines, comma-separated, or 'none' (default: 8,16,32)")
    s.add_argument("--repeats", type=int_arg(3), default=10, help="measured steps per point (default: %(default)s)")
    s.add_argument("--warmup", type=int_arg(1), default=2, help="discarded steps per point (default: %(default)s)")
    s.add_argument("--gemms", type=int_arg(1), default=8, help="matrix products per step (default: %(default)s)")
    s.add_argument("--gemm-n", type=int_arg(128), default=4096, help="their size, bf16 N^3 (default: %(default)s)")
    s.add_argument("--no-trace", action="store_true", help="skip the CUPTI attribution steps")
    s.add_argument("--compute-fit", action="store_true", help="size the GEMMs for the compute partition "
                                                               "(cuBLASLt SM-count target) instead of the whole GPU")
    s.add_argument("--compute", default=None, metavar="RECIPE|MODULE:FACTORY",
                   help="the user's compute instead of the GEMM chain: a built-in recipe or 'package.module:factory'")
    s.add_argument("--compute-kwargs", default="{}", metavar="JSON",
                   help="the factory's keyword arguments, a JSON object")
    s.add_argument("--dtype", default="float32", help="the collective's element type: float32, bfloat16, float16")
    s.add_argument("--timeout", type=int_arg(10), default=900, help="seconds for the whole run (default: %(default)s)")
    s.add_argument("--tolerance", type=float, default=0.01, help="the answer's tolerance (default: %(default)s)")
    s.add_argument("--out", required=True, metavar="FILE", help="results file (.parquet or .csv); the kernel "
                                                                "trace goes beside it as FILE-trace.parquet")
    s.set_defaults(func=cmd_comm)


def spec_from(args):
    """The CommSpec of the arguments (ValueError in one sentence)."""
    import json

    from .rank import CommSpec

    try:
        kwargs = json.loads(getattr(args, "compute_kwargs", "{}") or "{}")
    except ValueError as e:
        raise ValueError(f"--compute-kwargs must be a JSON object such as '{{\"width\": 8}}', got "
                         f"{args.compute_kwargs!r} ({e})") from None
    return CommSpec(collectives=args.collectives, sizes=args.sizes, comm_sms=args.comm_sms, ctas=args.ctas,
                    repeats=args.repeats, warmup=args.warmup, gemms=args.gemms, gemm_n=args.gemm_n,
                    trace=not args.no_trace, compute_fit=args.compute_fit, compute=getattr(args, "compute", None),
                    compute_kwargs=kwargs, dtype=getattr(args, "dtype", "float32"))


def cmd_comm(args) -> int:
    import sys

    import pandas as pd

    out = writable_file(args.out, _SUFFIXES, "--out")
    trace_out = out.with_name(out.stem + "-trace.parquet")
    if not args.no_trace:  # checked before measuring: the trace must not replace a file of the user's
        from ..results.io import is_saved_result

        writable_file(str(trace_out), (".parquet",), "the kernel trace beside --out")
        if os.path.lexists(trace_out) and not is_saved_result(trace_out):
            raise Usage(f"{str(trace_out)!r} exists and is not a result gcexplore saved; the run's kernel trace "
                        "would replace it: choose another --out, move that file, or pass --no-trace")
    if not 0 <= args.tolerance < 1:
        raise Usage(f"--tolerance is a fraction in [0, 1), got {args.tolerance}")
    spec = spec_from(args)
    from .analysis import bandwidth_table, comm_answer, nccl_attribution
    from .launch import CommLaunchError, comm_sweep
    from .tune import recommend_comm
    from ..results.io import save

    traces: list = []
    try:
        df = comm_sweep(spec, gpus=args.gpus, timeout_s=args.timeout, traces=traces)
    except CommLaunchError as e:
        if e.rows is not None and len(e.rows):
            save(e.rows, out)
            print(f"gcexplore comm: {len(e.rows)} rows measured before the failure are in {out}", file=sys.stderr)
        raise
    if traces:
        trace = pd.concat(traces, ignore_index=True)
        df.attrs["attribution"] = nccl_attribution(trace).to_dict("records")
        save(trace, trace_out)
    save(df, out)
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(comm_answer(df, args.tolerance).to_string(index=False))
        print(bandwidth_table(df).to_string(index=False))
        print(recommend_comm(df, args.tolerance).drop(columns=["search_answer"]).to_string(index=False))
        from .constants import comm_constants

        print(comm_constants(df).drop(columns=["source", "reason"]).to_string(index=False))
    print(df.attrs["zero_sm"])
    print(f"results: {out}")
    return 0
