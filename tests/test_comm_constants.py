"""The SM counts engines ship, read off comm sweeps (issue 48): vLLM's 20 at the size the driver grants,
TransformerEngine's 8, DeepEP V2's count only where it is given, NCCL's default on plain streams, the best
partition; each gap with its interval; the figure. On the synthetic model and on the recorded sweeps."""

from __future__ import annotations

import math

import pandas as pd
import pytest

import gcexplore as gx
from gcexplore.analysis.stats import round_ratio_ci, run_floor
from gcexplore.comm.analysis import comm_steps

from _comm_synth import SM, comm_result


@pytest.fixture(scope="module")
def synth():
    return comm_result()


@pytest.fixture(scope="module")
def table(synth):
    return gx.comm_constants(synth)


def _steps(s, coll, size, setup, k=None):
    """The overlapped comm steps of one point, from ``s`` = comm_steps of a run (computed once by the caller)."""
    s = s[(s["mode"] == "overlapped") & (s["workload"] == "comm") & (s["collective"] == coll)
          & (s["size_bytes"] == size) & (s["setup"] == setup)]
    return s["step_ms"] if k is None else s[s["comm_sm_count"] == k]["step_ms"]


def test_public_name_and_one_row_per_constant(synth, table):
    assert "comm_constants" in gx.__all__ and gx.comm.WHERE["comm_constants"] == "constants"
    points = synth[synth["collective"] != ""].groupby(["collective", "size_bytes"]).ngroups
    assert len(table) == 6 * points
    assert set(table["constant"]) == {"vllm", "transformer_engine", "deepep_v2", "nccl_default", "best",
                                      "best_measured"}


def test_vllms_20_is_read_at_the_granted_24(table):
    v = table[table["constant"] == "vllm"]
    assert (v["requested_sm_count"] == 20).all() and (v["sm_count"] == 24).all()
    assert v["reason"].str.contains("20 SMs is not a partition size").all()
    assert v["reason"].str.contains("grants 24").all() and (v["layout"] == f"24+{SM - 24}").all()
    te = table[table["constant"] == "transformer_engine"]
    assert (te["sm_count"] == 8).all() and te["reason"].str.contains("a valid partition size").all()


def test_gap_is_the_ratio_of_medians_with_the_comparisons_interval(synth, table):
    floor = run_floor(synth)
    steps = comm_steps(synth)  # the same for every row: computed once
    for r in table.dropna(subset=["gap"]).itertuples():
        best = _steps(steps, r.collective, r.size_bytes, "partition", r.best_sm_count)
        s = steps
        s = s[(s["mode"] == "overlapped") & (s["workload"] == "comm") & (s["collective"] == r.collective)
              & (s["size_bytes"] == r.size_bytes)]
        mine = s[s["layout"] == r.layout]["step_ms"]
        assert r.step_ms == pytest.approx(float(mine.median()))
        assert r.gap == pytest.approx(r.step_ms / r.best_step_ms - 1.0)
        ci = round_ratio_ci(best.to_numpy(), mine.to_numpy(), confidence=0.9, floor=floor)
        assert (r.gap_low, r.gap_high) == pytest.approx((ci["low"] - 1.0, ci["high"] - 1.0))
        assert r.gap_low <= r.gap <= r.gap_high


def test_best_is_the_sweeps_best_and_no_constant_beats_it_by_its_median(synth, table):
    ans = gx.comm_answer(synth).set_index(["collective", "size_bytes"])
    best = table[table["constant"] == "best"]
    for r in best.itertuples():
        assert r.sm_count == ans.loc[(r.collective, r.size_bytes), "best_sm_count"] and r.gap == 0.0
    part = table[table["constant"].isin(["vllm", "transformer_engine"])].dropna(subset=["gap"])
    assert (part["gap"] >= 0).all()  # partitions of the same sweep: the best is the fastest median


def test_the_models_gap_at_8_sms_is_inside_the_interval(table):
    from _comm_synth import INTERFERE, SLOWER, comm_ms, compute_ms

    def step(coll, size, k):  # the synthetic model's step (noise aside): the later of the two, plus the gap
        return max(comm_ms(coll, size, 2, k) * SLOWER, compute_ms(SM - k) * INTERFERE) + 0.005

    te = table[(table["constant"] == "transformer_engine") & (table["size_bytes"] == 1 << 30)]
    for r in te.itertuples():
        want = step(r.collective, r.size_bytes, 8) / step(r.collective, r.size_bytes, r.best_sm_count) - 1.0
        assert want > 0.3 and r.gap_low <= want <= r.gap_high


def test_deepep_needs_its_count_and_never_gets_an_invented_one(synth, table):
    d = table[table["constant"] == "deepep_v2"]
    assert d["step_ms"].isna().all() and d["gap"].isna().all() and d["sm_count"].isna().all()
    assert d["reason"].str.contains("experts, top-k").all() and d["reason"].str.contains("deepep_sms=").all()
    given = gx.comm_constants(synth, deepep_sms=40)
    g = given[given["constant"] == "deepep_v2"]
    assert (g["sm_count"] == 40).all() and g["gap"].notna().all()
    per = gx.comm_constants(synth, deepep_sms={("allreduce", 1 << 30): 17})
    p = per[per["constant"] == "deepep_v2"].set_index(["collective", "size_bytes"])
    assert p.loc[("allreduce", 1 << 30), "sm_count"] == 24  # 17 granted as 24
    assert math.isnan(p.loc[("allgather", 1 << 30), "gap"])  # not given for that point
    with pytest.raises(ValueError, match="deepep_sms is the SM count"):
        gx.comm_constants(synth, deepep_sms=0)


def test_a_size_the_sweep_lacks_is_said_not_filled(table):
    small = comm_result(collectives=("allreduce",), sizes=(1 << 30,), comm_sms=(8, 16, 32, 48), ctas=(), repeats=4)
    t = gx.comm_constants(small)
    v = t[t["constant"] == "vllm"].iloc[0]
    assert math.isnan(v["step_ms"]) and math.isnan(v["gap"]) and v["sm_count"] == 24
    assert "no 24-SM partition" in v["reason"] and "8, 16, 32, 48" in v["reason"]
    coarse = gx.DeviceInfo(name="a 16-SM-granular card", index=0, compute_capability=(9, 0), sm_count=SM,
                           min_partition_size=16, alignment=16, driver_version=13000)
    t = gx.comm_constants(small, device=coarse)  # the card's granularity, not the sweep's, rounds the requests
    v = t[t["constant"] == "vllm"].iloc[0]
    assert v["sm_count"] == 32 and "grants 32" in v["reason"] and v["gap"] == v["gap"]
    assert (t.loc[t["constant"] == "transformer_engine", "sm_count"] == 16).all()


def test_best_measured_is_the_fastest_layout_of_any_setup(synth, table):
    s = comm_steps(synth)
    s = s[(s["mode"] == "overlapped") & (s["workload"] == "comm") & (s["collective"] != "")]
    med = s.groupby(["collective", "size_bytes", "layout"])["step_ms"].median()
    for r in table[table["constant"] == "best_measured"].itertuples():
        m = med.loc[(r.collective, r.size_bytes)]
        assert r.layout == m.idxmin() and r.step_ms == pytest.approx(m.min())
        assert r.gap <= 0.0  # never slower than the best partition: it is one of the layouts


def test_nccl_default_is_the_plain_streams(synth, table):
    n = table[table["constant"] == "nccl_default"]
    assert (n["layout"] == "plain").all() and (n["sm_count"] == SM).all()
    nop = synth[synth["setup"] != "plain"]
    nop.attrs.update(synth.attrs)
    t = gx.comm_constants(nop)
    assert t[t["constant"] == "nccl_default"]["reason"].str.contains("no plain-streams rows").all()


@pytest.mark.parametrize("name", ["comm", "comm_4gpu"])
def test_recorded_sweeps_offline(name):
    df = gx.load_recorded(name)
    t = gx.comm_constants(df)
    spec = df.attrs["spec"]
    assert len(t) == 6 * len(spec["collectives"]) * len(spec["sizes"])
    read = t[t["constant"].isin(["vllm", "transformer_engine", "nccl_default", "best", "best_measured"])]
    assert read["gap"].notna().all() and (read["gap_low"] <= read["gap"]).all() and (read["gap"] <= read["gap_high"]).all()
    assert (t.loc[t["constant"] == "vllm", "sm_count"] == 24).all()
    assert df.attrs["device_name"] in t.attrs["granularity"] and "8, 16" in t.attrs["granularity"]
    assert df.attrs["device_name"] in t.attrs["floor"]


def test_figure_draws_a_bar_per_constant_with_a_number(synth, table):
    fig = gx.plot_comm_constants(table)
    gids = {p.get_gid() for ax in fig.axes for p in ax.patches}
    want = {f"gap:{r.collective}:{r.size_bytes}:{r.constant}" for r in table.dropna(subset=["gap"]).itertuples()}
    assert gids == want and not any(g.endswith(":deepep_v2") for g in gids)
    texts = {t.get_text() for ax in fig.axes for t in ax.texts}
    assert "n/a" in texts
    assert len(fig.axes) == table.groupby(["collective", "size_bytes"]).ngroups
    fig2 = gx.plot_comm_constants(synth, deepep_sms=32)  # from the result: the table computed inside
    assert any(p.get_gid().endswith(":deepep_v2") for ax in fig2.axes for p in ax.patches)
    pd.testing.assert_frame_equal(table, gx.comm_constants(synth))  # pure: the same table again
