"""A serving run's GPU clocks checked: its ``%globaltimer`` ITLs and TTFTs against an independent
CUPTI kernel trace of the same run (:func:`clock_agreement`; :func:`gcexplore.serving.experiment.traced_splits`
makes the trace)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..analysis.stats import quantile

__all__ = ["clock_agreement"]


def _tick_times(trace: pd.DataFrame, partition: str) -> tuple[np.ndarray, np.ndarray]:
    """Per clock tick kernel on ``partition``, in order: its CUPTI start, and the end of the last
    other kernel before it (the decode step or request the tick closes)."""
    k = trace[(trace["partition"] == partition) & (trace["activity"] == "kernel")].sort_values("start_ms")
    ticks, ends, last = [], [], math.nan
    for name, start, end in k[["name", "start_ms", "end_ms"]].itertuples(index=False):
        if "gcx_tick" in name:
            ticks.append(start)
            ends.append(last)
        elif "gcx_arrive" not in name:
            last = end
    return np.asarray(ticks, dtype=float), np.asarray(ends, dtype=float)


def clock_agreement(rows: pd.DataFrame, trace: pd.DataFrame) -> dict:
    """A partitioned run's GPU-clock numbers against a CUPTI kernel trace of it
    (:func:`gcexplore.kernel_trace` around the split, as ``serve(trace=...)`` makes it).

    ``rows``: one split's rows of a serving result (one load, one round). The CUPTI ITL of a gap is the time
    between the ends of the decode steps' last kernels on the decode partition (``p0``); a
    request's CUPTI TTFT runs from its arrival to the end of the last prefill kernel before its
    tick on the remainder. The first tick on each partition is the clock's warm-up. Returns the
    ITL p50 / p99 of both and their ratios, the largest |gap stamps - CUPTI| and the share of gaps
    within 1% + 20 us (gap by gap: a stamp late behind its step shows here even where the
    quantiles hide it), and the same two for the TTFTs."""
    gaps = rows[rows["record"] == "gap"].sort_values("index")
    reqs = rows[(rows["record"] == "request") & rows["ttft_ms"].notna()].sort_values("index")
    ticks, ends = (x[1:] for x in _tick_times(trace, "p0"))
    if len(ticks) < len(gaps) + 1:
        raise ValueError(f"the trace holds {len(ticks)} decode ticks for {len(gaps)} gaps: not a trace of this run")
    cupti = np.diff(ends)[gaps["index"].to_numpy()[1:]]  # the first step has no previous step's end
    mine = gaps["itl_ms"].to_numpy(float)[1:]
    off = np.abs(mine - cupti)
    out = {}
    for q in (0.5, 0.99):
        a, b = quantile(mine, q), quantile(cupti, q)
        out.update({f"itl_p{int(q * 100)}_stamps_ms": a, f"itl_p{int(q * 100)}_cupti_ms": b,
                    f"itl_p{int(q * 100)}_ratio": a / b})
    out.update(itl_max_abs_diff_ms=float(off.max()) if len(off) else math.nan,
               itl_within=float(np.mean(off <= 0.01 * cupti + 0.02)) if len(off) else math.nan)
    _, rends = (x[1:] for x in _tick_times(trace, "remainder"))
    ttft = reqs["ttft_ms"].to_numpy(float)
    diff = ttft - (rends[reqs["index"].to_numpy()] - ticks[0] - reqs["arrival_ms"].to_numpy(float))
    out.update(requests=len(reqs), ttft_p50_ms=quantile(ttft, 0.5) if len(ttft) else math.nan,
               ttft_max_abs_diff_ms=float(np.abs(diff).max()) if len(diff) else math.nan,
               ttft_within=float(np.mean(np.abs(diff) <= 0.01 * ttft + 0.02)) if len(diff) else math.nan)
    return out
