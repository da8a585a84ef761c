"""PM sampling on a real GPU: the samples line up with the kernels and count what ran.

Two memory kernels, one on 24 SMs and one on the 108-SM remainder, alone and together.
The counters are device-wide, so while the 24-SM kernel runs alone about 24/132 of
the SM cycles are active and the samples just before it read an idle DRAM; both
kernels together keep every SM active.
"""

from __future__ import annotations

import pandas as pd
import pytest

import gcexplore
from gcexplore import pm

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def timeline():
    from gcexplore import tracing

    try:
        tracing.require_cupti()
    except gcexplore.TraceUnavailable as e:
        pytest.skip(str(e))
    t = gcexplore.dram_timeline({"m24": "memory", "m108": "memory"}, [24], repeats=2, warmup=1)
    pd.set_option("display.width", 200)
    print("\n", pm.dram_summary(t.samples, t.trace).to_string(), "\n", t.samples.attrs)
    return t


def test_samples_count_the_sms_each_kernel_had(timeline):
    summ = pm.dram_summary(timeline.samples, timeline.trace)
    assert (summ["samples"] >= 20).all()  # 1 ms kernels, 20 us samples
    by = summ.groupby(["mode", "workloads"])["sm_active_pct"].median()
    total = gcexplore.device_info(0).sm_count
    assert by[("alone", "m24")] == pytest.approx(100 * 24 / total, abs=3)
    assert by[("alone", "m108")] == pytest.approx(100 * (total - 24) / total, abs=3)
    assert by[("concurrent", "m108+m24")] > 90


def test_dram_is_busy_inside_the_kernels_and_idle_before_them(timeline):
    s, tr = timeline.samples, timeline.trace
    summ = pm.dram_summary(s, tr)
    assert (summ["dram_pct"] > 50).all()  # a streaming kernel draws most of the bandwidth even on 24 SMs
    # the first group of each repetition follows the host's per-repetition work: an idle DRAM
    # (the second alone group can start within 40 us of the first one's end)
    first = tr[tr["workload"] == "m24"].groupby(["mode", "rep"])["start_ms"].min()
    before = [s[(s["mode"] == m) & (s["rep"] == r) & s["workloads"].isin(["m24", "m108+m24"])
                & (s["end_ms"] <= t)] for (m, r), t in first.items()]
    before = pd.concat(before)
    assert len(before) >= 4 and before["dram_pct"].max() < 10


def test_the_three_results_are_one_run(timeline):
    ids = {timeline.samples["run_id"].iloc[0], timeline.trace["run_id"].iloc[0], timeline.result["run_id"].iloc[0]}
    assert len(ids) == 1
    assert timeline.samples.attrs["metrics"] == list(pm.METRIC_SETS["dram_sm"])
    assert timeline.samples["device_name"].iloc[0] == gcexplore.device_info(0).name
