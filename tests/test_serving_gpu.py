"""Serving splits on a real GPU: a short run per split whose decode gaps and request TTFTs (read from
``%globaltimer`` stamps) agree with a CUPTI kernel trace of the same run, and whose CUDA-graph
decode kernels ran on the decode partition.

Needs PyTorch and cupti-python (skipped with the reason where either is missing). Prints the
per-split numbers, so a failure on the GPU machine says why without a second run.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd
import pytest

import gcexplore
from gcexplore.analysis import serving as S

pytestmark = pytest.mark.gpu

SPLITS = [32, 96]


@pytest.fixture(scope="module")
def model():
    pytest.importorskip("torch")
    from gcexplore.trace import collector

    try:
        collector.require_cupti()
    except gcexplore.TraceUnavailable as e:
        pytest.skip(str(e))
    m = gcexplore.decoder_stack(gcexplore.workloads.ModelShape(layers=2), batch=16, kv_len=1024, prompt=1024,
                                chunk=256)
    yield m
    m.close()


def _cupti_steps(tr: pd.DataFrame, partition: str):
    """Per tick kernel on ``partition``, in order: its CUPTI start, and the end of the last other
    kernel before it (the step or request it closes)."""
    k = tr[(tr["partition"] == partition) & (tr["activity"] == "kernel")].sort_values("start_ms")
    ticks, ends, last = [], [], np.nan
    for r in k.itertuples():
        if "gcx_tick" in r.name:
            ticks.append(r.start_ms)
            ends.append(last)
        elif "gcx_arrive" not in r.name:
            last = r.end_ms
    return np.asarray(ticks), np.asarray(ends)


def test_serving_clocks_agree_with_a_cupti_trace(model):
    frames = []

    @contextlib.contextmanager
    def traced(parts):
        with gcexplore.kernel_trace(parts) as t:
            yield t
        frames.append(t.frame())

    df = gcexplore.serve(model, SPLITS, rates=[40.0], duration_s=0.3, modes=("partitioned",), trace=traced,
                         pattern="burst", burst=4, seed=3)
    table = S.serving_table(df)
    print(table.to_string())
    assert len(frames) == len(SPLITS)
    for layout, tr in zip(table["layout"], frames):
        rows = df[df["layout"] == layout]
        gaps = rows[rows["record"] == "gap"].sort_values("index")
        reqs = rows[(rows["record"] == "request") & rows["ttft_ms"].notna()].sort_values("index")
        # decode: every kernel of the captured step ran on the decode partition (p0)
        graph = tr[(tr["activity"] == "kernel") & (tr["graph_id"] > 0)]
        print(layout, "graph kernels per partition:", graph["partition"].value_counts().to_dict())
        assert len(graph) and set(graph["partition"]) == {"p0"}
        # the first tick on each partition is the clock's warm-up (it loads the kernels there)
        ticks, ends = (x[1:] for x in _cupti_steps(tr, "p0"))
        assert len(ticks) >= len(gaps) + 1
        cupti = np.diff(ends)[gaps["index"].to_numpy()[1:]]  # the first step has no previous step's end
        mine = gaps["itl_ms"].to_numpy()[1:]
        for q in (0.5, 0.99):
            a, b = np.quantile(mine, q), np.quantile(cupti, q)
            print(f"{layout} ITL p{int(q * 100)}: stamps {a:.4f} ms, CUPTI {b:.4f} ms")
            assert abs(a / b - 1) <= 0.03
        # prefill: each request's end (its tick) against the last prefill kernel's end before it
        rticks, rends = (x[1:] for x in _cupti_steps(tr, "remainder"))
        base = ticks[0]
        ttft_cupti = rends[reqs["index"].to_numpy()] - base - reqs["arrival_ms"].to_numpy()
        diff = reqs["ttft_ms"].to_numpy() - ttft_cupti
        print(f"{layout} TTFT p50 {np.median(reqs['ttft_ms']):.3f} ms; stamps - CUPTI: max |{np.abs(diff).max():.4f}| ms")
        assert np.all(np.abs(diff) <= 0.01 * reqs["ttft_ms"].to_numpy() + 0.02)


def test_baselines_and_alone_run(model):
    df = gcexplore.serve(model, [64], rates=[30.0], duration_s=0.2, seed=1)
    t = S.serving_table(df)
    print(t.to_string())
    assert set(t["mode"]) == {"alone", "partitioned", "streams", "time_sliced"}
    loaded = t[t["mode"] != "alone"]
    assert (loaded["gaps"] > 0).all() and (loaded["served"] > 0).all()
    # the three loaded runs saw the same arrivals
    reqs = df[(df["record"] == "request") & (df["mode"] != "alone")]
    arr = {m: tuple(g.sort_values("index")["arrival_ms"]) for m, g in reqs.groupby("mode")}
    assert len(set(arr.values())) == 1
