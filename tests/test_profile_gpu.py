"""The profiler on a real GPU: timings against in-kernel timers, SM ids, sweeps, isolation, torch."""

from __future__ import annotations

import pytest

import gcexplore
from gcexplore.device import driver as api
from gcexplore import workloads as W
from gcexplore.schema import columns

pytestmark = pytest.mark.gpu


def _median(df, mode, workload):
    return df[(df["mode"] == mode) & (df["workload"] == workload)]["duration_ms"].median()


def test_spin_1000us_measures_1000us_alone_and_sequential():
    wls = {"spin_a": W.spin(1000.0), "spin_b": W.spin(1000.0)}
    df = gcexplore.profile_overlap(wls, [16], repeats=10, warmup=2)
    gap_ms = df.attrs["launch_gap_us"] / 1000
    print(f"\nlaunch gap {df.attrs['launch_gap_us']:.2f} us, gate {df.attrs['gate_us']} us")
    for mode in ("alone", "sequential"):
        for w in wls:
            m = _median(df, mode, w)
            print(f"{mode:10s} {w}: {m * 1000:.1f} us")
            assert m == pytest.approx(1.0, rel=0.02), (mode, w, m)
    assert 0 < gap_ms < 0.05
    # every mode x rep x workload is there, in the contract's column order
    assert list(df.columns) == columns("overlap")
    assert len(df) == 4 * 10 * 2
    conc = df[df["mode"] == "concurrent"]
    assert (conc["makespan_ms"] >= conc["duration_ms"]).all()
    assert set(conc["partition"]) == {"p0", "remainder"}
    assert (conc["requested_sm_count"] == 16).sum() == 10
    assert conc["requested_sm_count"].isna().sum() == 10  # the remainder asked for nothing
    if df.attrs["nvml"]:  # the GPU machine has nvidia-ml-py: clock and power before and after
        for col in ("sm_clock_mhz_before", "sm_clock_mhz", "power_w_before", "power_w"):
            assert (df[col] > 0).all(), col


def test_graphs_and_l2_flush_paths_time_the_same_kernel():
    df = gcexplore.profile_overlap({"spin": W.spin(500.0)}, [8], repeats=5, warmup=1,
                                   modes=["alone", "sequential"], graphs=True, l2_flush=True)
    for mode in ("alone", "sequential"):
        assert _median(df, mode, "spin") == pytest.approx(0.5, rel=0.03)
    assert df.attrs["graphs"] is True and df.attrs["l2_flush"] is True


def test_profiling_restores_the_current_context():
    before = int(api.current_context())
    gcexplore.profile_overlap({"spin": W.spin(20.0)}, [8], repeats=2, warmup=1, modes=["concurrent"])
    assert int(api.current_context()) == before


def test_occupancy_blocks_ran_on_their_partitions_sms(info):
    compute = W.compute(iters=256)
    memory = W.memory(n=1 << 26)
    try:
        with gcexplore.split([24]) as parts:
            df = gcexplore.occupancy({"compute": compute, "memory": memory}, parts)
            seen = {p: set(g["sm_id"]) for p, g in df.groupby("partition")}
            assert seen["p0"] == set(parts[0].sm_ids())
            assert seen["remainder"] == set(parts.remainder.sm_ids())
            assert len(seen["p0"]) == parts[0].sm_count == 24
            assert len(seen["remainder"]) == parts.remainder.sm_count
        assert not seen["p0"] & seen["remainder"]
        assert df["start_ns"].min() == 0 and (df["end_ns"] >= df["start_ns"]).all()
        assert len(df) == compute.blocks + memory.blocks
        busy = gcexplore.sm_busy(df)
        assert set(busy["sm_id"]) == seen["p0"] | seen["remainder"]
        assert ((busy["busy_fraction"] > 0) & (busy["busy_fraction"] <= 1)).all()
    finally:
        compute.close()
        memory.close()


def test_sweep_covers_every_valid_size(info):
    df = gcexplore.sweep({"a": W.spin(20.0), "b": W.spin(20.0)}, repeats=2, warmup=1,
                         modes=["concurrent", "alone"], progress=False)
    expected = [k for k in info.valid_sm_counts() if k < info.sm_count]
    assert sorted(df["split_sm_count"].unique()) == expected
    for k in expected:
        assert set(df[df["split_sm_count"] == k]["layout"]) == {f"{k}+{info.sm_count - k}"}
    assert df.attrs["kind"] == "sweep"


def _raising_at(call_index):
    calls = []
    inner = W.spin(20.0)

    def fn(*, stream):
        calls.append(1)
        if len(calls) == call_index:
            raise RuntimeError("boom at the fifth layout")
        inner(stream=stream)

    return fn, calls


def test_a_workload_raising_at_the_fifth_layout_keeps_four_layouts(info):
    # concurrent only, 1 warm-up + 2 repetitions: 3 calls per layout; call 13 is layout 5's first.
    fn, _ = _raising_at(13)
    with pytest.raises(gcexplore.MeasurementFailed) as ei:
        gcexplore.sweep({"a": W.spin(20.0), "b": fn}, repeats=2, warmup=1, modes=["concurrent"],
                        progress=False)
    part = ei.value.partial
    assert isinstance(ei.value.__cause__, RuntimeError)
    assert sorted(part["split_sm_count"].unique()) == info.valid_sm_counts()[:4]
    assert len(part) == 4 * 2 * 2


def test_checkpointed_sweep_resumes_without_remeasuring(tmp_path, info):
    path = tmp_path / "sweep.jsonl"
    sizes = [8, 16, 24]
    fn, _ = _raising_at(7)  # first call of the third layout
    with pytest.raises(gcexplore.MeasurementFailed):
        gcexplore.sweep({"a": W.spin(20.0), "b": fn}, sizes, repeats=2, warmup=1,
                        modes=["concurrent"], checkpoint=path, progress=False)
    calls = []
    inner = W.spin(20.0)

    def counting(*, stream):
        calls.append(1)
        inner(stream=stream)

    df = gcexplore.sweep({"a": W.spin(20.0), "b": counting}, sizes, repeats=2, warmup=1,
                         modes=["concurrent"], checkpoint=path, progress=False)
    assert len(calls) == 3  # only the third layout was measured
    assert sorted(df["split_sm_count"].unique()) == sizes
    assert df.attrs["resumed_layouts"] == [f"{k}+{info.sm_count - k}" for k in (8, 16)]


def test_scaling_compute_gets_faster_with_more_sms():
    compute = W.compute(iters=512)
    try:
        df = gcexplore.scaling(compute, [16, 64], repeats=5, warmup=1, progress=False)
    finally:
        compute.close()
    s = gcexplore.summarize(df).set_index("sm_count")
    print("\n" + s[["median_ms", "speedup", "parallel_efficiency"]].to_string())
    assert s.loc[64, "speedup"] > 3.0
    assert set(s.index) == {16, 64, df.attrs["device_sm_count"]}


def test_isolation_partition_protects_the_critical_latency():
    crit = W.latency()
    bg = W.compute()
    try:
        df = gcexplore.isolation(crit, bg, 16, repeats=10, warmup=2)
    finally:
        crit.close()
        bg.close()
    s = gcexplore.summarize(df).set_index(["scenario", "role"])
    print("\n" + s[["sm_count", "median_ms", "p10_ms", "p90_ms", "slowdown_vs_alone"]].to_string())
    print("critical launches inside the background:", df.attrs["critical_within_background"])
    streams = s.loc[("streams", "critical"), "median_ms"]
    part = s.loc[("partitioned", "critical"), "median_ms"]
    assert part < streams
    assert s.loc[("partitioned", "critical"), "sm_count"] == 16


def test_torch_matmul_and_sigmoid_through_the_adapter():
    torch = pytest.importorskip("torch")
    n = 4096
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(32 << 20, device="cuda", dtype=torch.float32)  # 128 MiB
    y = torch.empty_like(x)
    torch.cuda.synchronize()
    mm = W.from_torch(lambda: torch.matmul(a, b, out=c), name="matmul", flops=2.0 * n ** 3)
    sg = W.from_torch(lambda: torch.sigmoid(x, out=y), name="sigmoid", bytes=2.0 * x.nbytes)
    df = gcexplore.profile_overlap({"matmul": mm, "sigmoid": sg}, [24], repeats=5, warmup=2)
    torch.cuda.synchronize()
    assert set(df["mode"]) == set(gcexplore.MODES)
    assert (df["duration_ms"] > 0).all()
    s = gcexplore.summarize(df)
    print("\n" + s[["mode", "workload", "sm_count", "median_ms", "makespan_median_ms"]].to_string())
    # the work really happened
    assert torch.allclose(y[:1000], torch.sigmoid(x[:1000]))
    ref = (a[:64].float() @ b.float())
    assert torch.allclose(c[:64].float(), ref, rtol=0.05, atol=1.0)
    # on 24 SMs the matmul is slower than on the whole device
    assert _median(df, "alone", "matmul") > _median(df, "sequential", "matmul")
