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


def test_a_serve_in_two_rounds_keeps_each_rounds_rows_and_clocks(model):
    """rounds=2: every run measured twice, round after round, on fresh partitions and decode graphs; the rows
    carry rounds 0 and 1, each round's clocks agree with its own CUPTI trace, and the table pools both."""
    frames: list = []
    df = gcexplore.serve(model, [64], rates=[30.0], duration_s=0.2, seed=1, rounds=2,
                         modes=("partitioned", "streams"), trace=traced_splits(frames))
    assert sorted(df["round"].unique()) == [0, 1] and df.attrs["rounds"] == 2
    assert (df.groupby(["mode", "layout", "load"])["round"].nunique() == 2).all()
    t = S.serving_table(df)
    print(t[["mode", "layout", "rounds", "gaps", "served", "itl_p50_ms", "itl_p99_ms", "itl_p99_spread_ms",
             "ttft_p50_ms", "ttft_p50_spread_ms"]].to_string())
    assert (t["rounds"] == 2).all() and (t["gaps"] > 0).all() and (t["served"] > 0).all()
    keys = ["mode", "layout", "load"]
    per = [S.serving_table(df[df["round"] == r]).set_index(keys) for r in (0, 1)]
    for key, row in t.set_index(keys).iterrows():
        assert row["gaps"] == sum(p.loc[key, "gaps"] for p in per)  # every round's gaps pooled
        p99 = [p.loc[key, "itl_p99_ms"] for p in per]
        assert row["itl_p99_spread_ms"] == pytest.approx(max(p99) - min(p99))
    assert len(frames) == 2  # the split traced once per round, round 0 first
    for r, tr in enumerate(frames):
        rows = df[(df["mode"] == "partitioned") & (df["round"] == r)]
        agree = S.clock_agreement(rows, tr)
        print("round", r, agree)
        assert abs(agree["itl_p50_ratio"] - 1) <= 0.03 and agree["itl_within"] == 1.0
