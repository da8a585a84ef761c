"""Communication SMs on two GPUs: an all-reduce on a 16-SM partition beside a GEMM chain on the rest,
one process per GPU, every NCCL kernel attributed to the partition by CUPTI, each card's DRAM use
and L2 use sampled in every step (CUPTI PM sampling), the numbers saved and read back. Needs two GPUs,
nccl4py and PyTorch (skipped with the reason otherwise). With ``GCEXPLORE_COMM_OUT`` set, the result and
its trace are also written there; ``GCEXPLORE_COMM_PM=dram_bytes`` samples the DRAM alone (default dram_l2)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pandas as pd
import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.multigpu]


@pytest.fixture(scope="module")
def run():
    for m, pip in (("nccl", "nccl4py"), ("torch", "torch"), ("cupti", "cupti-python")):
        if importlib.util.find_spec(m) is None:
            pytest.skip(f"needs {pip}")
    import gcexplore as gx

    traces: list = []
    spec = gx.CommSpec(collectives=["allreduce", "allgather"], sizes=["64M"], comm_sms=[16], ctas=[16], repeats=5,
                       warmup=2, gemms=4, trace=True, pm=True, zero_sm=True,
                       pm_metrics=os.environ.get("GCEXPLORE_COMM_PM", "dram_l2"))
    df = gx.comm_sweep(spec, gpus=2, timeout_s=240, traces=traces)
    return df, pd.concat(traces, ignore_index=True)


def test_every_nccl_kernel_ran_on_the_16_sm_partition(run):
    import gcexplore as gx

    df, trace = run
    trace = trace[trace["layout"] != "zero"]
    att = gx.nccl_attribution(trace)
    assert set(att["rank"]) == {0, 1}
    assert (att["nccl_kernels"] > 0).all()
    assert (att["share"] == 1.0).all(), att.to_string()
    assert (att["sm_count"] == 16).all() and (att["other_on_comm"] == 0).all()
    gemm = trace[(trace["workload"] == "compute") & (trace["activity"] == "kernel")]
    assert len(gemm) and (gemm["partition"] == "remainder").all() and (gemm["sm_count"] == 116).all()


def test_numbers_are_saved_and_read_back(run, tmp_path):
    import gcexplore as gx

    df, trace = run
    assert set(df["rank"]) == {0, 1} and set(df["setup"]) == {"partition", "plain", "ctas", "zero"}
    for r in (0, 1):  # each rank's rows carry its own card, and the run spans both
        mine = df[df["rank"] == r]
        assert set(mine["device_index"]) == {r} and set(mine["device_uuid"]) == {gx.device_info(r).uuid}
        assert set(mine["torch_version"]) == {df.attrs["ranks"][r]["torch_version"]} != {""}
    assert len(gx.results.run.runs(df)) == 1
    t = gx.comm_table(df)
    part = t[(t["setup"] == "partition") & (t["collective"] == "allreduce")].iloc[0]
    assert part["comm_sm_count"] == 16 and part["bus_bw_alone_gbs"] > 1.0
    assert part["step_ms"] >= max(part["compute_alone_ms"], part["comm_alone_ms"]) * 0.9
    assert df.attrs["nccl_version"] and "zero-SM" in df.attrs["zero_sm"]
    out = Path(os.environ.get("GCEXPLORE_COMM_OUT") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    df.attrs["attribution"] = gx.nccl_attribution(trace).to_dict("records")
    back = gx.load(gx.save(df, out / "comm-test-2gpu.parquet"))
    gx.save(trace, out / "comm-test-2gpu-trace.parquet")
    pd.testing.assert_frame_equal(gx.comm_table(back), t, check_like=True)
    # the zero-SM layout has no NCCL kernel: its share is NaN, equal only as frames
    pd.testing.assert_frame_equal(pd.DataFrame(back.attrs["attribution"]), pd.DataFrame(df.attrs["attribution"]))


def test_pm_samples_fall_in_every_step(run):
    import gcexplore as gx

    df, _ = run
    errors = [m["pm_error"] for m in df.attrs["ranks"] if m.get("pm_error")]
    assert not errors, errors
    pm = pd.DataFrame(df.attrs["pm"])
    assert set(pm["rank"]) == {0, 1} and set(pm["mode"]) == {"alone", "overlapped"}
    split = pm[pm["layout"] == "16+116"]
    assert len(split) == 2 * 5 * 3  # ranks x (compute alone, 2 collectives alone and overlapped) x 3 steps
    assert (pm["samples"] > 0).all() and pm["dram_pct"].between(0, 100).all()
    d = gx.comm_dram(df)
    assert set(d["layout"]) >= {"16+116"} and (d["dram_both_pct"] > 0).all()
    if df.attrs["spec"]["pm_metrics"] == "dram_l2":  # the L2's bytes: every GEMM re-reads its tiles from L2
        assert (pm["l2_gbs"] > 0).all(), pm[["layout", "collective", "mode", "l2_gbs"]].to_string()
        gemm = pm[pm["collective"] == ""]
        assert (gemm["l2_gbs"] > gemm["dram_read_gbs"] + gemm["dram_write_gbs"]).all()
        assert (d["l2_both_gbs"] > 0).all() and (d["l2_compute_gbs"] > 0).all()


def test_zero_sm_allgather_runs_on_copy_engines(run):
    import gcexplore as gx

    df, trace = run
    errors = [m["zero_error"] for m in df.attrs["ranks"] if m.get("zero_error")]
    assert not errors, errors
    assert "measured (setup 'zero')" in df.attrs["zero_sm"]
    z = gx.zero_sm_table(df)
    assert list(z["collective"]) == ["allgather"] and z["bus_bw_alone_gbs"].iloc[0] > 1.0
    assert z["slowdown_low"].iloc[0] <= z["compute_slowdown"].iloc[0] <= z["slowdown_high"].iloc[0]
    zt = trace[trace["layout"] == "zero"]
    nccl = zt[(zt["activity"] == "kernel") & zt["name"].astype(str).str.contains("nccl", case=False)]
    assert len(zt) and nccl.empty, sorted(set(nccl["name"]))  # no NCCL kernel: the copy engines moved the data
