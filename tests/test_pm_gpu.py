"""PM sampling on a real GPU: the samples line up with the kernels and count what ran.

Two memory kernels, one on 24 SMs and one on the 108-SM remainder, alone and together.
The counters are device-wide, so while the 24-SM kernel runs alone about 24/132 of
the SM cycles are active, the samples just before a repetition's first kernel read an
idle DRAM, and both kernels together keep every SM active.
"""

from __future__ import annotations

import pandas as pd
import pytest

import gcexplore
from gcexplore.experiments import pm

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def timeline():
    from gcexplore.trace import collector as tracing

    try:
        tracing.require_cupti()
    except gcexplore.TraceUnavailable as e:
        pytest.skip(str(e))
    try:
        t = gcexplore.dram_timeline({"m24": "memory", "m108": "memory"}, [24], repeats=2, warmup=1)
    except gcexplore.TraceUnavailable as e:  # an older CUPTI: tests/test_cupti_features_gpu.py checks the sentence
        pytest.skip(str(e))
    pd.set_option("display.width", 200)
    print("\n", gcexplore.dram_summary(t.samples, t.trace).to_string(), "\n", t.samples.attrs)
    return t


def test_samples_count_the_sms_each_kernel_had(timeline):
    summ = gcexplore.dram_summary(timeline.samples, timeline.trace)
    assert (summ["samples"] >= 20).all()  # kernels of 1 ms or more, 20 us samples
    by = summ.groupby(["mode", "workload"])["sm_active_pct"].median()
    total = gcexplore.device_info(0).sm_count
    assert by[("alone", "m24")] == pytest.approx(100 * 24 / total, abs=3)
    assert by[("alone", "m108")] == pytest.approx(100 * (total - 24) / total, abs=3)
    assert by[("concurrent", "m108+m24")] > 90  # both partitions busy: every SM


def test_dram_is_busy_inside_the_kernels_and_idle_before_them(timeline):
    s, tr = timeline.samples, timeline.trace
    summ = gcexplore.dram_summary(s, tr)
    assert (summ["dram_pct"] > 50).all()  # a streaming kernel draws most of the bandwidth even on 24 SMs
    first = tr.groupby(["mode", "rep"])["start_ms"].min()
    before = pd.concat([s[(s["mode"] == m) & (s["rep"] == r) & (s["end_ms"] <= t)] for (m, r), t in first.items()])
    assert len(before) >= 4 and before["dram_pct"].max() < 10


def test_the_three_results_are_one_run(timeline):
    ids = {timeline.samples["run_id"].iloc[0], timeline.trace["run_id"].iloc[0], timeline.result["run_id"].iloc[0]}
    assert len(ids) == 1
    assert timeline.samples.attrs["metrics"] == list(pm.METRIC_SETS["dram_sm"])
    assert timeline.samples["device_name"].iloc[0] == gcexplore.device_info(0).name
