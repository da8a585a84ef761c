"""Partition fit on a real GPU: spin kernels of chosen grids, whose time is their waves x the spin.

Each block of the built-in spin kernel spins a fixed time by ``%globaltimer``, so a traced
kernel's duration divided by the spin is the number of waves it really ran: the ground truth
that :func:`gcexplore.partition_fit`'s predicted waves and flags, and :func:`gcexplore.fit_table`'s
plateaus, are checked against. Needs cupti-python and a card whose limits are known
(compute capability 9.0); skipped with the reason otherwise. The GEMM, Triton and carveout
rows are in bench/partition_fit.py.
"""

from __future__ import annotations

import pandas as pd
import pytest

import gcexplore
from gcexplore import workloads as W
from gcexplore.analysis.occupancy_estimate import LIMITS

pytestmark = pytest.mark.gpu

SPIN_US = 50.0


@pytest.fixture(autouse=True)
def _cupti():
    from gcexplore.trace import collector as tracing

    try:
        tracing.require_cupti()
    except gcexplore.TraceUnavailable as e:
        pytest.skip(str(e))


def _traced_spin(info, blocks: int, sizes):
    if str(info.metadata().get("compute_capability")) not in LIMITS:
        pytest.skip(f"no occupancy limits for compute capability {info.metadata().get('compute_capability')}")
    wl = W.spin(SPIN_US, blocks=blocks, name=f"spin{blocks}")
    try:
        df, tr = gcexplore.scaling(wl, sizes, repeats=9, rounds=3, progress=False, trace=True)
    finally:
        wl.close()
    fit = gcexplore.partition_fit(tr)
    fit = fit[fit["name"].str.contains("spin")].copy()
    fit["measured_waves"] = (fit["duration_ms"] / (SPIN_US / 1e3)).round().astype(int)
    pd.set_option("display.width", 200)
    print("\n" + fit[["partition", "sm_count", "ctas", "blocks_per_sm", "resident_ctas", "waves", "measured_waves",
                      "multi_wave", "tail_fill", "wasted_sms", "duration_ms", "reason"]].to_string(index=False))
    assert (fit["reason"] == "").all(), fit["reason"].unique()
    return df, tr, fit


def _sizes(info):
    return [s for s in (64, 72, 96, 128) if s < info.sm_count]


def test_card_sized_grid_waves_and_flags(info):
    """A grid of 32 blocks per SM of the card: more than one wave on every partition, one on the card."""
    df, tr, fit = _traced_spin(info, 32 * info.sm_count, _sizes(info))
    assert list(fit["waves"].astype(int)) == list(fit["measured_waves"])
    multi = fit["measured_waves"] > 1
    assert multi.any() and (~multi).any()
    assert (fit["multi_wave"].astype(bool) == multi).all()  # every multi-wave kernel flagged, none that fits
    assert fit.loc[fit["sm_count"] < info.sm_count, "sized_for_card"].all()
    assert not fit["persistent"].astype(bool).any()  # 32 CTAs per SM, one wave on the card: a wave grid
    # plateaus: a wave more is half again the time, far beyond any interval, so no plateau spans two
    # measured wave counts (sizes of one wave count may still split where dispatch differs)
    table = gcexplore.fit_table(df, tr)
    print("\n".join(table.attrs["hints"]))
    waves = dict(zip(fit["sm_count"].astype(int), fit["measured_waves"]))
    for _, g in table[table["plateau"] >= 0].groupby("plateau"):
        assert len({waves[int(s)] for s in g["sm_count"]}) == 1, g[["sm_count", "median_ms", "low_ms", "high_ms"]]


def test_grid_that_fits_is_not_flagged(info):
    """32 blocks per SM of a 64-SM partition: one wave on 64 SMs and on every larger size."""
    df, tr, fit = _traced_spin(info, 32 * 64, _sizes(info))
    assert (fit["measured_waves"] == 1).all() and (fit["waves"] == 1).all()
    assert not fit["multi_wave"].astype(bool).any()
    table = gcexplore.fit_table(df, tr)
    print(table[["sm_count", "median_ms", "low_ms", "high_ms", "plateau", "waves"]].to_string(index=False))
    assert (table["waves"] == 1).all()
