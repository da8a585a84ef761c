"""The comm recommendation replayed over sweeps measured after its rule was fixed (batch e1, 4 x H200 of one host:
bench/comm.py on 4 GPUs with the NCCL CTA baselines, and on 2 of them; stock cuBLAS GEMMs, 8 steps per point;
batch e2, 4 x H100: the GEMMs fitted to their partition, 16 MiB and 1 GiB). The rule (2-step first visits with a
tie-break, spread pooled) was chosen on the shipped runs; these are fresh."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import gcexplore as gx

DATA = Path(__file__).parent / "data"


# name -> (ranks, card)
FRESH = {"comm_e1_4gpu": (4, "NVIDIA H200"), "comm_e1_2gpu": (2, "NVIDIA H200"),
         "comm_e2_4gpu_fit": (4, "NVIDIA H100 80GB HBM3")}


@pytest.fixture(scope="module", params=sorted(FRESH))
def fresh(request):
    return request.param, gx.load(DATA / f"{request.param}.parquet")


def test_fresh_runs_name_their_cards_and_attribute_every_nccl_kernel(fresh):
    name, df = fresh
    n, card = FRESH[name]
    assert df.attrs["nranks"] == n and {r["device_name"] for r in df.attrs["ranks"]} == {card}
    assert len({r["device_uuid"] for r in df.attrs["ranks"]}) == n
    att = pd.DataFrame(df.attrs["attribution"])
    assert len(att) == n * 8 and (att["share"] == 1.0).all() and (att["other_on_comm"] == 0).all()
    spec = df.attrs["spec"]
    assert (att["nccl_kernels"] == len(spec["collectives"]) * len(spec["sizes"])).all()  # one traced step each


def test_fresh_recommendation_within_3_percent_at_a_quarter_of_the_sweep(fresh):
    name, df = fresh
    r = gx.recommend_comm(df, 0.01)
    spec = df.attrs["spec"]
    assert len(r) == len(spec["collectives"]) * len(spec["sizes"]) and (r["within"] <= 0.03).all()
    over = r[r["gpu_share"] > 0.25]
    if FRESH[name][0] == 4:
        assert over.empty, over
    else:
        # all-reduce 1 GiB: 40..64 SMs' medians within 0.5% of each other, step spread 0.5%: confirming no rival beats the
        # best by 1% at 90% took second and third rounds (20 of 64 steps, 25.8%); its answer is the sweep's
        assert list(zip(over["collective"], over["size_bytes"])) == [("allreduce", 1 << 30)]
        row = over.iloc[0]
        assert row["recommended_sm_count"] == row["sweep_sm_count"] and row["gpu_share"] < 0.27


def test_fresh_fit_run_on_four_gpus_moves_the_answer_to_eight_sms():
    """e2 (4 x H100, GEMMs fitted): at 16 MiB every collective's fewest SMs within 1% is 8, as on two GPUs (d2)."""
    df = gx.load(DATA / "comm_e2_4gpu_fit.parquet")
    assert df.attrs["spec"]["compute_fit"]
    a = gx.comm_answer(df, 0.01)
    assert (a[a["size_bytes"] == 16 << 20]["answer_sm_count"] == 8).all()
