"""Rounds on the GPU: two runs of the same work, each its own run, never compare FAST or SLOW and
most of their rows compare SAME;
every result kind carries its rounds and the clock and power of each round."""

from __future__ import annotations

import numpy as np
import pytest

import gcexplore
from gcexplore.analysis.comparison import compare


def _no_false_difference(a, b, decide_at=None):
    """No row FAST or SLOW at compare's default band, and most rows SAME there or, for work whose run-to-run
    spread is wider than that band (a PyTorch chain's: +-1-2%), at the band ``decide_at``."""
    t = compare(a, b).table
    decided = t[t["verdict"].isin(["FAST", "SLOW"])]
    cols = ["group", "layout_a", "ratio", "ratio_low", "ratio_high", "verdict", "reason"]
    assert decided.empty, "a false difference between two runs of the same work:\n" + decided[cols].to_string()
    assert set(t["verdict"]) <= {"SAME", "UNCLEAR"}
    # and it decides: a compare that calls every row UNCLEAR would pass the line above
    if decide_at is not None:
        t = compare(a, b, min_effect=decide_at).table
        assert not t["verdict"].isin(["FAST", "SLOW"]).any(), t[cols].to_string()
    same = int((t["verdict"] == "SAME").sum())
    print("\n" + t[cols].to_string())
    assert same * 2 > len(t), f"only {same} of {len(t)} rows decided SAME:\n" + t[cols].to_string()
    return t


@pytest.mark.gpu
def test_two_runs_of_a_builtin_compare_same_never_fast_or_slow(info):
    sizes = [16, 64, 96]
    runs = []
    for _ in range(2):
        wl = gcexplore.workloads.compute(device=info.index)  # built afresh for each run
        try:
            runs.append(gcexplore.scaling(wl, sizes, device=info.index, progress=False))
        finally:
            wl.close()
    for df in runs:
        assert sorted(set(df["round"])) == [0, 1, 2, 3, 4]  # 15 repetitions in 5 rounds by default
        per = df.groupby(["sm_count", "round"]).size()
        assert (per == 3).all()
        if df.attrs.get("nvml"):
            assert np.isfinite(df["sm_clock_mhz"]).all() and np.isfinite(df["power_w_before"]).all()
    _no_false_difference(*runs)


@pytest.mark.gpu
def test_two_runs_of_pytorch_work_compare_never_fast_or_slow_and_same_at_3_percent(info):
    torch = pytest.importorskip("torch")

    def gemm_chain():
        a = torch.randn(2048, 2048, device=f"cuda:{info.index}", dtype=torch.bfloat16) / 45.0
        x = torch.randn(2048, 2048, device=f"cuda:{info.index}", dtype=torch.bfloat16)
        torch.cuda.synchronize()

        def fn():
            t = x
            for _ in range(16):
                t = torch.matmul(t, a)
        return gcexplore.workloads.from_torch(fn, name="gemm_chain", device=info.index)

    runs = [gcexplore.scaling(gemm_chain(), [16, 64, 96], device=info.index, progress=False) for _ in range(2)]
    # on an H200 its intervals at +-1% were [-1.1, +1.1]% to [-0.7, +2.0]%: UNCLEAR at +-1%, SAME at +-3%
    _no_false_difference(*runs, decide_at=0.03)


@pytest.mark.gpu
def test_sweep_rounds_split_afresh_in_shuffled_order(info):
    pair = {"compute": gcexplore.workloads.compute(device=info.index),
            "memory": gcexplore.workloads.memory(device=info.index)}
    try:
        df = gcexplore.sweep(pair, [16, 32, 48], repeats=6, rounds=3, modes=("concurrent", "streams"),
                             device=info.index, progress=False)
    finally:
        for w in pair.values():
            w.close()
    assert sorted(set(df["round"])) == [0, 1, 2]
    reps = df.groupby(["layout", "mode"])["rep"].nunique()
    assert (reps == 6).all()
    order = [list(dict.fromkeys(g["layout"])) for _, g in df.groupby("round", sort=True)]
    assert all(sorted(o) == sorted(order[0]) for o in order)


@pytest.mark.gpu
def test_setup_inputs_are_allocated_afresh_in_every_round(info):
    torch = pytest.importorskip("torch")
    made = []

    def make():
        x = torch.randn(1 << 20, device=f"cuda:{info.index}")
        made.append(x.data_ptr())
        return lambda: torch.mul(x, 2.0)

    wl = gcexplore.from_torch(setup=make, name="mul", device=info.index)
    try:
        df = gcexplore.scaling(wl, [32], repeats=6, rounds=3, warmup=1, device=info.index, progress=False,
                               whole_device_too=False)
    finally:
        wl.close()
    assert sorted(set(df["round"])) == [0, 1, 2]
    # one allocation per round; each is made while the previous round's inputs are still held, so it lands
    # elsewhere than the round before (a round two back may reuse freed memory: d2 H100 gave round 2 round 0's)
    assert len(made) == 3
    assert all(a != b for a, b in zip(made, made[1:])), made
