"""The user's step on GPUs (issue 48): on one GPU, the compute factory built with its partition's stream
current in PyTorch; on two, a sweep of the user's attention + MLP block beside an all-reduce and a bucketed
all-reduce in bf16, every NCCL kernel on the communication partition and the user's kernels on the rest."""

from __future__ import annotations

import importlib.util

import pytest

import _comm_user_step_gpu as user


def _needs(*mods):
    for m in mods:
        if importlib.util.find_spec(m) is None:
            pytest.skip(f"needs {m}")


@pytest.mark.gpu
def test_the_factory_is_built_on_its_partitions_stream():
    _needs("torch")
    import torch

    import gcexplore as gx
    from gcexplore.comm.compute import build_compute

    with gx.split([16], rounding="exact") as parts:
        s = parts.remainder.stream
        wl = build_compute("_comm_user_step_gpu:records_stream", {}, device=0, stream=s,
                           sm_count=int(parts.remainder.sm_count), torch=torch)
        assert user.BUILT_ON[-1] == int(s.handle)
        assert user.BUILT_ON[-1] != int(torch.cuda.current_stream(0).cuda_stream)  # only while building
        assert wl.name == "compute"
        wl(stream=s)
        torch.cuda.synchronize(0)


@pytest.mark.gpu
@pytest.mark.multigpu
def test_a_user_step_sweep_on_two_gpus():
    _needs("torch", "nccl", "cupti")
    import pandas as pd

    import gcexplore as gx

    traces: list = []
    spec = gx.CommSpec(collectives=["allreduce"], sizes=["64M"], buckets=[["16M", "16M", "8M"]], dtype="bfloat16",
                       comm_sms=[16, 32], ctas=[], repeats=5, warmup=2, trace=True,
                       compute="_comm_user_step_gpu:attention_mlp", compute_kwargs={"tokens": 2048})
    df = gx.comm_sweep(spec, gpus=2, timeout_s=300, traces=traces)
    assert {int(s) for s in df.loc[df["workload"] == "comm", "size_bytes"]} == {64 << 20, 40 << 20}
    assert df.loc[df["workload"] == "compute", "flops"].gt(0).all()  # the user's block, its declared flops
    trace = pd.concat(traces, ignore_index=True)
    att = gx.nccl_attribution(trace)
    assert (att["share"] == 1.0).all() and (att["other_on_comm"] == 0).all(), att.to_string()
    mine = trace[(trace["workload"] == "compute") & (trace["activity"] == "kernel")]
    assert len(mine) and (mine["partition"] == "remainder").all()
    c = gx.comm_constants(df)
    assert c.loc[c["constant"] == "vllm", "sm_count"].eq(24).all()  # 24 not swept here: said, not filled
    assert c.loc[c["constant"] == "vllm", "reason"].str.contains("no 24-SM partition").all()
