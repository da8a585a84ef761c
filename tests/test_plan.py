"""Pure planning and API contract tests (no GPU needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import gcexplore
from gcexplore import DeviceInfo, plan_split


def test_valid_sm_counts_h100(h100_like):
    assert h100_like.valid_sm_counts() == list(range(8, 129, 8))


def test_valid_sm_counts_follow_min_partition_and_alignment():
    info = DeviceInfo(name="x", index=0, compute_capability=(8, 0), sm_count=108,
                      min_partition_size=4, alignment=2, driver_version=12080)
    valid = info.valid_sm_counts()
    assert valid[0] == 4 and valid[-1] == 108 and all(v % 2 == 0 for v in valid)


def test_round_up_matches_driver_rule(h100_like):
    plan = plan_split(h100_like, [66])
    assert plan.requested == [66] and plan.granted == [72] and plan.remainder == 60
    assert plan.label == "72+60"


def test_round_down_and_exact(h100_like):
    assert plan_split(h100_like, [66], rounding="down").granted == [64]
    assert plan_split(h100_like, [64], rounding="exact").granted == [64]
    with pytest.raises(ValueError, match=r"66 SMs is not a valid partition size.*8, 16, \.\.\., 128"):
        plan_split(h100_like, [66], rounding="exact")
    with pytest.raises(ValueError, match="rounds down below the smallest partition"):
        plan_split(h100_like, [5], rounding="down")


def test_small_counts_round_up_to_min_partition(h100_like):
    assert plan_split(h100_like, 1).granted == [8]


def test_heterogeneous_plan(h100_like):
    plan = plan_split(h100_like, [8, 24, 40])
    assert plan.granted == [8, 24, 40] and plan.remainder == 60 and plan.label == "8+24+40+60"


def test_no_remainder_label(h100_like):
    info = DeviceInfo(name="x", index=0, compute_capability=(9, 0), sm_count=128,
                      min_partition_size=8, alignment=8, driver_version=13000)
    plan = plan_split(info, [64, 64])
    assert plan.remainder == 0 and plan.label == "64+64"


@pytest.mark.parametrize("counts, pattern", [
    ([200], r"requested 200 SMs but NVIDIA H100 80GB HBM3 has 132 SMs; valid partition sizes are 8, 16, \.\.\., 128"),
    ([130], r"requested 130 SMs \(rounded up to 136\)"),
    ([0], "SM counts must be positive, got 0"),
    ([-8], "SM counts must be positive, got -8"),
    ([64, 72], r"granted \[64, 72\] = 136 SMs together, but NVIDIA H100 80GB HBM3 has 132"),
    ([], "sm_counts is empty"),
])
def test_bad_requests_say_what_is_valid(h100_like, counts, pattern):
    with pytest.raises(ValueError, match=pattern):
        plan_split(h100_like, counts)


@pytest.mark.parametrize("counts", [[True], [16.0], ["16"], "16", None, [None]])
def test_non_integers_are_type_errors(h100_like, counts):
    with pytest.raises(TypeError, match="int"):
        plan_split(h100_like, counts)


def test_bad_rounding(h100_like):
    with pytest.raises(ValueError, match="rounding must be one of 'up', 'down', 'exact'"):
        plan_split(h100_like, [8], rounding="nearest")


def test_features_by_driver_version(h100_like):
    assert h100_like.features == {"green_contexts": True, "green_context_streams": True,
                                  "structured_split": False, "workqueue_config": False}
    with pytest.raises(gcexplore.UnsupportedError, match="requires driver 13.1, found 13.0"):
        h100_like.require("workqueue_config")
    old = DeviceInfo(name="x", index=0, compute_capability=(9, 0), sm_count=132,
                     min_partition_size=8, alignment=8, driver_version=12040)
    assert old.features["green_contexts"] and not old.features["green_context_streams"]
    with pytest.raises(gcexplore.UnsupportedError, match="green-context streams requires driver 12.5, found 12.4"):
        old.require("green_context_streams")


def test_device_info_is_frozen_and_checked(h100_like):
    with pytest.raises(Exception):
        h100_like.sm_count = 10
    with pytest.raises(ValueError, match="sm_count must be a positive int"):
        DeviceInfo(name="x", index=0, compute_capability=(9, 0), sm_count=0,
                   min_partition_size=8, alignment=8, driver_version=13000)


def test_metadata_names_the_device(h100_like):
    md = h100_like.metadata()
    assert md["device_name"] == "NVIDIA H100 80GB HBM3" and md["device_sm_count"] == 132
    assert md["driver_version"] == "13.0" and md["gcexplore_version"] == gcexplore.__version__


def test_require_stream():
    with pytest.raises(TypeError, match="needs an explicit stream"):
        gcexplore.require_stream(None, "my_call")
    with pytest.raises(TypeError, match="not a CUDA stream"):
        gcexplore.require_stream(0, "my_call")

    class FakeStream:
        def __cuda_stream__(self):
            return (0, 1)

    s = FakeStream()
    assert gcexplore.require_stream(s) is s


def test_handles_come_from_factories():
    with pytest.raises(TypeError, match=r"use gcexplore\.split"):
        gcexplore.Partition()
    with pytest.raises(TypeError, match=r"use gcexplore\.split"):
        gcexplore.Partitioning()


def test_import_touches_no_gpu():
    code = ("import sys, gcexplore, gcexplore.api; "
            "sys.exit(1 if gcexplore.device.driver._initialized else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_public_surface():
    for name in gcexplore.__all__:
        assert hasattr(gcexplore, name), name


@pytest.mark.skipif(gcexplore.gpu_available(), reason="checks the no-GPU path; a GPU is present")
def test_no_gpu_errors_are_clear():
    with pytest.raises(gcexplore.UnsupportedError, match="no (NVIDIA driver found|usable CUDA GPU)"):
        gcexplore.device_info(0)
    with pytest.raises(gcexplore.UnsupportedError):
        gcexplore.split([16])
    r = subprocess.run([sys.executable, "-m", "gcexplore.cli", "info"], capture_output=True, text=True)
    assert r.returncode == 1 and "gcexplore info: no" in r.stderr


@pytest.mark.skipif(gcexplore.gpu_available(), reason="checks the no-GPU path; a GPU is present")
def test_no_gpu_error_says_what_works_instead():
    with pytest.raises(gcexplore.UnsupportedError) as exc:
        gcexplore.device_info(0)
    for hint in ("gcexplore demo", "load_recorded", "plan_split", "docs/guide.md"):
        assert hint in str(exc.value)


def test_split_reachable_in_a_fresh_interpreter():
    # gcexplore.split used to fail with a circular import when partitions loaded before api
    for code in ("import gcexplore; gcexplore.split", "import gcexplore.device.partitions",
                 "import gcexplore; gcexplore.workloads.compute"):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert r.returncode == 0, (code, r.stderr[-400:])


def test_driver_older_than_the_tested_minimum_is_refused(monkeypatch):
    import gcexplore.device.driver as api

    monkeypatch.setattr(api, "_device_index", lambda device: 0)
    monkeypatch.setattr(api, "_init", lambda: 12080)
    monkeypatch.setattr(api, "_cuda_device", lambda index: type("D", (), {"name": "old card"})())
    monkeypatch.setattr(api, "_info_cache", {})
    with pytest.raises(gcexplore.UnsupportedError, match=r"requires NVIDIA driver 13\.0 \(R580\) or newer.*found 12\.8"):
        api.device_info(0)
    assert api.MIN_DRIVER == 13000


def test_device_info_from_a_recorded_sweep_plans_like_the_card():
    import gcexplore

    df = gcexplore.load_recorded("sweep")
    info = gcexplore.DeviceInfo.from_result(df)
    assert (info.sm_count, info.min_partition_size, info.alignment, info.driver_version) == (132, 8, 8, 13000)
    assert gcexplore.plan_split(info, [66]).label == "72+60"
    with pytest.raises(ValueError, match="needs a sweep with its metadata"):
        gcexplore.DeviceInfo.from_result(df.iloc[:0].drop(columns=["split_sm_count"]))
