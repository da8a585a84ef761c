"""Serving splits on a real GPU: a short run per split whose decode gaps and request TTFTs (read from
``%globaltimer`` stamps) agree with a CUPTI kernel trace of the same run, and whose CUDA-graph
decode kernels ran on the decode partition.

Needs PyTorch and cupti-python (skipped with the reason where either is missing). Prints the
per-split numbers, so a failure on the GPU machine says why without a second run.
"""

from __future__ import annotations

import pytest

import gcexplore
from gcexplore.serving import analysis as S
from gcexplore.serving.experiment import traced_splits

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
    m = gcexplore.decoder_stack(gcexplore.serving.ModelShape(layers=2), batch=16, kv_len=1024, prompt=1024,
                                chunk=256)
    yield m
    m.close()


def test_serving_clocks_agree_with_a_cupti_trace(model):
    frames: list = []
    df = gcexplore.serve(model, SPLITS, rates=[40.0], duration_s=0.3, modes=("partitioned",),
                         trace=traced_splits(frames),
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
        agree = S.clock_agreement(rows, tr)
        print(layout, agree)
        assert abs(agree["itl_p50_ratio"] - 1) <= 0.03 and abs(agree["itl_p99_ratio"] - 1) <= 0.03
        assert agree["itl_within"] == 1.0  # every gap, not only its quantiles: each stamp follows its step
        assert agree["requests"] == len(reqs) > 0 and agree["ttft_within"] == 1.0


def test_baselines_and_alone_run(model):
    df = gcexplore.serve(model, [64], rates=[30.0], duration_s=0.2, seed=1)
    import socket

    import torch

    # the identity of the card and of the process (it once left host and torch_version empty)
    assert set(df["host"]) == {socket.gethostname()} and set(df["torch_version"]) == {torch.__version__}
    t = S.serving_table(df)
    print(t.to_string())
    assert set(t["mode"]) == {"alone", "paired", "partitioned", "streams", "time_sliced"}
    paired = t[t["mode"] == "paired"]
    assert (paired["served"] == paired["requests"]).all() and (paired["gaps"] > 0).all()
    loaded = t[~t["mode"].isin(S.PROFILE_MODES)]
    assert (loaded["gaps"] > 0).all() and (loaded["served"] > 0).all()
    # the three loaded runs saw the same arrivals
    reqs = df[(df["record"] == "request") & ~df["mode"].isin(S.PROFILE_MODES)]
    arr = {m: tuple(g.sort_values("index")["arrival_ms"]) for m, g in reqs.groupby("mode")}
    assert len(set(arr.values())) == 1
