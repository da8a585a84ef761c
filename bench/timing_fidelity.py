"""Timing fidelity: event durations of spin kernels against their in-kernel %globaltimer spans.

For spin kernels of 10 us, 100 us and 1 ms, on the whole device and on a 16-SM green
partition, print the median event duration, the median in-kernel span, their
difference, and that difference minus the calibrated launch gap
(``gcexplore.launch_gap``).

Goals (issue 3): for 1 ms kernels the event time is within 1.5% of the span; at every
length the difference is within 3 us of the calibrated gap.

Run from the project root on the GPU machine: ``python3 bench/timing_fidelity.py``.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

import gcexplore
from gcexplore.experiments.engine import Engine, spin_samples
from gcexplore.cli.needs import needs


def _own_stream_gate(engine, part, us: float, repeats: int, warmup: int = 3):
    """Diagnostic: the gate spin on the measured stream itself (no cross-stream wait)."""
    from gcexplore.workloads import spin

    rec = spin(us, device=engine.info.index).instrumented()
    s, ev, span = part.stream, [], []
    try:
        for r in range(warmup + repeats):
            engine.launch_spin(s, 100_000)
            e0 = s.record(options=engine.event_options)
            rec.workload(stream=s)
            e1 = s.record(options=engine.event_options)
            e1.sync()
            if r >= warmup:
                ev.append((e1 - e0) * 1000.0)
                span.append(rec.span_ns(stream=s) / 1000.0)
    finally:
        rec.close()
    return np.array(ev), np.array(span)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--device", type=int, default=0)
    args = ap.parse_args(argv)
    needs()

    info = gcexplore.device_info(args.device)
    gap = gcexplore.launch_gap(info.index)
    rows = []
    with Engine(info) as engine, gcexplore.split([16], device=info.index) as parts:
        cases = [("device", engine.whole, spin_samples), ("16-SM partition", parts[0], spin_samples),
                 ("device, own-stream gate", engine.whole, _own_stream_gate),
                 ("partition, own-stream gate", parts[0], _own_stream_gate)]
        for where, part, sample in cases:
            for us in (10.0, 100.0, 1000.0):
                ev, span = sample(engine, part, us, args.repeats)
                e, s = float(np.median(ev)), float(np.median(span))
                diff = float(np.median(ev - span))
                p10, p90 = np.percentile(ev - span, [10, 90])
                rows.append({
                    "stream": where, "spin_us": us, "event_us": e, "span_us": s,
                    "event_minus_span_us": diff, "p10_us": p10, "p90_us": p90, "minus_gap_us": diff - gap,
                    "rel_err_pct": 100 * (e - s) / s,
                    "goal": "pass" if abs(diff - gap) <= 3.0 and (us < 1000 or abs(e - s) / s <= 0.015)
                    else "FAIL",
                })
    df = pd.DataFrame(rows)
    print(f"timing fidelity on {info.name} ({info.sm_count} SMs), driver {info.driver_version_str}, "
          f"{args.repeats} repetitions each")
    print(f"calibrated launch gap: {gap:.2f} us (median event minus span of a 100 us spin)")
    with pd.option_context("display.width", 160, "display.float_format", "{:.2f}".format):
        print(df.to_string(index=False))
    print("goals: 1 ms within 1.5% of the span; every length within 3 us of the calibrated gap "
          "(the own-stream-gate rows are a diagnostic of the cross-stream start, not gcexplore's method)")
    main_rows = df[~df["stream"].str.contains("own-stream")]
    return 0 if (main_rows["goal"] == "pass").all() else 1


if __name__ == "__main__":
    sys.exit(main())
