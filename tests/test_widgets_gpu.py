"""The explorer live on a GPU: the Run button measures with the real profiler and redraws."""

from __future__ import annotations

import pytest

import gcexplore
from gcexplore import widgets as GW

pytestmark = pytest.mark.gpu


def test_live_explorer_measures_the_chosen_split(info):
    ex = GW.Explorer(repeats=3)
    assert list(ex.sliders[0].options)[0] == info.valid_sm_counts()[0]
    ex.sliders[0].value = 32
    ex.run_button.click()
    assert ex.last_error is None, ex.error_box.value
    df = ex.results
    assert set(df["layout"]) == {f"32+{info.sm_count - 32}"}
    assert set(df["mode"]) == {"alone", "concurrent", "sequential", "streams"}
    assert df.attrs["device_name"] == info.name and not df.attrs["recorded"]
    assert ex.redraws["throughput"] == 1 and ex.redraws["occupancy"] == 1
    # the occupancy it drew ran on the partitions' own SMs: 32 and the rest
    per = ex.occupancy.groupby("partition")["sm_id"].nunique().to_dict()
    assert per == {"p0": 32, "remainder": info.sm_count - 32}


def test_live_sweep_explorer_marks_the_best_split(info):
    sx = GW.SweepExplorer(repeats=2, sm_counts=[16, 64, 104])
    sx.run_button.click()
    assert sx.last_error is None, sx.error_box.value
    best = gcexplore.best_split(sx.results)
    assert sx.split_slider.value == int(best["split_sm_count"])
    assert sorted(sx.results["split_sm_count"].unique()) == [16, 64, 104]
