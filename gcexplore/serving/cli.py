"""``gcexplore serve``: decode and prefill of a synthetic decoder stack on one GPU, per split and
load; prints the per-run tails and, with SLOs, the goodput per split against both baselines (or,
with ``--advise``, the advisor's split and what it cost). ``--recorded`` shows the recorded
run without a GPU. Every argument is checked before the GPU is touched."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from ..cli.args import RESULT_SUFFIXES, Usage, float_arg, int_arg, int_list, writable_file
from ..cli._text import one_line

_COLS = ["mode", "layout", "load", "itl_p50_ms", "itl_p99_ms", "ttft_p50_ms", "ttft_p99_ms", "served", "requests",
         "decode_tokens_per_s", "prefill_tokens_per_s"]


def _rates(text: str) -> list[float]:
    try:
        rates = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated requests per second such as 20,40, got {text!r}")
    if not rates or any(not (math.isfinite(r) and r > 0) for r in rates):
        raise argparse.ArgumentTypeError(f"rates must be positive numbers of requests per second, got {text!r}")
    return rates


def add_serve(sub) -> None:
    s = sub.add_parser("serve", help="decode and prefill of a synthetic decoder stack on one GPU: ITL and TTFT "
                                     "tails per decode share and load, goodput at SLOs against plain streams and "
                                     "time slicing")
    s.add_argument("--decode-sms", type=int_list, default=[32, 64, 96],
                   help="decode partition sizes; prefill gets the rest (default: 32,64,96)")
    s.add_argument("--rates", type=_rates, default=[20.0], help="requests per second (default: 20)")
    s.add_argument("--pattern", choices=("poisson", "burst"), default="poisson")
    s.add_argument("--burst", type=int_arg(1), default=8, help="requests per burst (default: %(default)s)")
    s.add_argument("--duration", type=float_arg, default=1.0, help="seconds of arrivals (default: %(default)s)")
    s.add_argument("--seed", type=int_arg(0), default=0)
    s.add_argument("--rounds", type=int_arg(1), default=1,
                   help="measure every split this many times, interleaved in shuffled rounds (default: 1)")
    s.add_argument("--layers", type=int_arg(1), default=4)
    s.add_argument("--batch", type=int_arg(1), default=32, help="sequences per decode step")
    s.add_argument("--kv-len", type=int_arg(1), default=2048)
    s.add_argument("--prompt", type=int_arg(1), default=2048, help="tokens per prefill request")
    s.add_argument("--chunk", type=int_arg(1), default=512, help="prefill chunk of the time-sliced baseline")
    s.add_argument("--no-graphs", action="store_true", help="launch the decode step without a CUDA graph")
    s.add_argument("--ttft-ms", type=float_arg, help="SLO: TTFT bound (with --itl-p99-ms)")
    s.add_argument("--itl-p99-ms", type=float_arg, help="SLO: ITL p99 bound (with --ttft-ms)")
    s.add_argument("--attainment", type=float_arg, default=0.9, help="SLO: share of requests within --ttft-ms")
    s.add_argument("--advise", action="store_true", help="run the advisor (needs the SLO) instead of the full grid")
    s.add_argument("--recorded", action="store_true", help="show the recorded run (no GPU needed)")
    s.add_argument("--device", type=int_arg(0), default=0)
    s.add_argument("--out", default="serving.parquet", help="results file (.parquet or .csv)")
    s.set_defaults(func=cmd_serve)


def _slo(args):
    if (args.ttft_ms is None) != (args.itl_p99_ms is None):
        raise Usage("give both --ttft-ms and --itl-p99-ms, or neither")
    if args.ttft_ms is None:
        if args.advise:
            raise Usage("--advise needs the SLO: --ttft-ms and --itl-p99-ms")
        return None
    from .analysis import ServingSLO

    return ServingSLO(args.ttft_ms, args.itl_p99_ms, args.attainment)


def _require_gpu() -> None:
    """The driver asked before PyTorch is: without a GPU, "no NVIDIA driver found" as every command says,
    and what runs without one (``--recorded``), not an install hint for a library that cannot help."""
    from ..device.driver import UnsupportedError, device_count

    try:
        n = device_count()
    except UnsupportedError as e:
        raise UnsupportedError(f"{str(e).split(';')[0]}; without a GPU, `gcexplore serve --recorded` shows the "
                               "recorded serving run") from e
    if n == 0:
        raise UnsupportedError("the driver sees no CUDA device; `gcexplore serve --recorded` shows the recorded "
                               "serving run")


def cmd_serve(args) -> int:
    slo = _slo(args)
    from . import analysis as S

    if args.recorded:
        from ..results.io import load_recorded

        df = load_recorded("serving")
        if slo is None:
            slo = S.ServingSLO(df.attrs["slo_ttft_ms"], df.attrs["slo_itl_p99_ms"], df.attrs["slo_attainment"])
        _show(df, slo, "poisson")
        return 0
    out = writable_file(args.out, RESULT_SUFFIXES, "--out")
    if args.chunk > args.prompt:
        raise Usage(f"--chunk ({args.chunk}) must not exceed --prompt ({args.prompt})")
    from ..experiments.runner import MeasurementAborted
    from .advisor import advise_split
    from .experiment import serve
    from ..results.io import save
    from .roles import ModelShape, arrivals, decoder_stack

    for r in args.rates:  # the load is checked before the model takes GPU memory
        arrivals(r, args.duration, seed=args.seed, pattern=args.pattern, burst=args.burst)
    _require_gpu()

    model = decoder_stack(ModelShape(layers=args.layers), batch=args.batch, kv_len=args.kv_len, prompt=args.prompt,
                          chunk=args.chunk, device=args.device)
    kw: dict[str, Any] = dict(rates=args.rates, pattern=args.pattern, burst=args.burst, duration_s=args.duration,
                              seed=args.seed, graphs=not args.no_graphs, device=args.device, progress=print,
                              rounds=getattr(args, "rounds", 1))
    try:
        if args.advise:
            advice, df = advise_split(model, args.decode_sms, slo, **kw)
            save(df, out)
            print(f"advised split: {advice.reason}; GPU time {advice.cost_ms / 1e3:.2f} s "
                  f"({len(advice.measured)} loaded runs measured)")
            print(f"wrote {out}")
            return 0
        df = serve(model, args.decode_sms, **kw)
    except MeasurementAborted as e:  # the rows measured before the failure or Ctrl-C are kept
        print(f"gcexplore serve: {e}", file=sys.stderr)
        if e.partial is not None and len(e.partial):
            save(e.partial, out)
            print(f"wrote the {len(e.partial)} rows measured so far to {out}", file=sys.stderr)
        return 130 if isinstance(e, KeyboardInterrupt) else 1
    finally:
        model.close()
    save(df, out)
    _show(df, slo, args.pattern)
    print(f"wrote {out}")
    return 0


def _show(df, slo, pattern: str) -> None:
    from . import analysis as S

    t = S.serving_table(df, slo)
    cols = _COLS if t["rounds"].max() <= 1 else [*_COLS[:7], "itl_p99_spread_ms", "ttft_p50_spread_ms", *_COLS[7:]]
    print(t[~t["mode"].isin(S.PROFILE_MODES)][cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if t["rounds"].max() > 1:
        print(f"tails pooled over {int(t['rounds'].max())} rounds; *_spread_ms: largest minus smallest of the "
              "rounds' own tails")
    print(one_line(S.trade_facts(t)["text"]))  # layouts and names from a recorded file: one line
    if slo is not None:
        print(f"goodput at {slo.text()} ({pattern} loads):")
        g = S.goodput_table(t, slo, pattern)
        print(g[["mode", "layout", "goodput_rps", "loads_met", "loads"]].to_string(index=False))
