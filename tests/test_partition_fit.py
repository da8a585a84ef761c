"""Partition fit on the CPU: wave arithmetic on hand-made traces, plateaus on recorded scaling curves,
and the sentences summarize and the figure carry (gcexplore.analysis.waves)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import gcexplore
from gcexplore.analysis import stats as ST
from gcexplore.analysis.waves import FIT_COLUMNS, LAUNCH_WAVE_COLUMNS, fit_notes, fit_table, launch_waves, partition_fit

H = {"device_name": "hand-made (not a measurement)", "device_sm_count": 132, "compute_capability": "9.0",
     "kind": "trace", "run_id": "hand"}


def kernel(name="k", *, sms=24, grid=(132, 1, 1), block=(256, 1, 1), regs=32, smem=0, cluster=(0, 0, 0),
           mac=0, workload="w", partition="p0", start=0.0, dur=1.0, rep=0, layout="L"):
    return {"layout": layout, "mode": "alone", "rep": rep, "workload": workload, "launch": 0, "partition": partition,
            "sm_count": sms, "stream_id": 1, "activity": "kernel", "name": name, "start_ms": start,
            "end_ms": start + dur, "grid_x": grid[0], "grid_y": grid[1], "grid_z": grid[2], "block_x": block[0],
            "block_y": block[1], "block_z": block[2], "cluster_x": cluster[0], "cluster_y": cluster[1],
            "cluster_z": cluster[2], "registers_per_thread": regs, "static_shared_bytes": smem,
            "dynamic_shared_bytes": 0, "max_active_clusters": mac, "bytes": np.nan, "graph_id": 0, "context_id": 3,
            "correlation_id": int(start * 1e3) + 7919 * sms + rep, "group": rep, "device_name": H["device_name"],
            "run_id": "hand"}


def trace(*rows, drop=()) -> pd.DataFrame:
    df = pd.DataFrame(list(rows)).drop(columns=list(drop))
    df.attrs.update(H)
    return df


def one(df, **kw) -> pd.Series:
    out = partition_fit(df, **kw)
    assert len(out) == 1, out
    return out.iloc[0]


# ---------------------------------------------------------------------------
# Wave arithmetic (expected numbers worked by hand from Hopper's limits)
# ---------------------------------------------------------------------------


def test_blocks_limit_partial_wave():
    # 256 threads = 8 warps; 64 warps per SM -> 8 blocks per SM; 16 SMs hold 128; 300 CTAs: 128 + 128 + 44
    r = one(trace(kernel(sms=16, grid=(300, 1, 1), regs=0)))
    assert (r.blocks_per_sm, r.resident_ctas, r.waves) == (8, 128, 3)
    assert r.tail_fill == pytest.approx(44 / 128)
    # the busiest of 16 SMs carries ceil(300 / 16) = 19 CTAs: 16 x 19 - 300 = 4 CTA times idle
    assert r.idle_sm_share == pytest.approx(1 - 300 / 304)
    assert r.multi_wave and r.reason == ""
    # 13 SMs hold 3 waves too, but their busiest SM would carry 24 CTAs: no SM buys nothing
    assert (r.same_waves_sm, r.wasted_sms) == (16, 0)


def test_one_wave_grid_smaller_than_the_partition():
    # 40 CTAs of 8 per SM on 64 SMs: one wave on 40 SMs, 24 idle
    r = one(trace(kernel(sms=64, grid=(40, 1, 1), regs=0)))
    assert (r.waves, r.same_waves_sm, r.wasted_sms) == (1, 40, 24) and not r.multi_wave
    assert r.idle_sm_share == pytest.approx(24 / 64) and r.tail_fill == pytest.approx(40 / 512)


def test_registers_limit_one_full_wave():
    # 128 regs x 32 lanes = 4096 per warp; 16384 per sub-partition -> 4 warps each, 16 per SM -> 2 blocks
    r = one(trace(kernel(sms=10, grid=(20, 1, 1), regs=128)))
    assert "registers" in r.limited_by and r.blocks_per_sm == 2
    assert (r.resident_ctas, r.waves, r.tail_fill, r.idle_sm_share) == (20, 1, 1.0, 0.0)
    assert not r.multi_wave and r.wasted_sms == 0


def test_shared_memory_limit():
    # 100 KiB + 1 KiB reserved per block against 228 KiB per SM -> 2 blocks
    r = one(trace(kernel(sms=8, grid=(40, 1, 1), block=(128, 1, 1), regs=0, smem=100 * 1024)))
    assert r.limited_by == "shared memory" and r.blocks_per_sm == 2
    assert (r.resident_ctas, r.waves) == (16, 3)
    assert r.tail_fill == pytest.approx(8 / 16)


def test_clusters_whole_only_and_cupti_cross_check():
    # the recorded nvjet shape: 384 threads, 168 regs, 188,636 B shared -> 1 block per SM; clusters of 2
    nv = {"grid": (2, 66, 1), "block": (384, 1, 1), "regs": 168, "smem": 188636, "cluster": (2, 1, 1), "mac": 66}
    r = one(trace(kernel(sms=25, **nv)))
    assert (r.blocks_per_sm, r.cluster_size) == (1, 2)
    assert r.resident_ctas == 24  # 25 SMs hold 12 whole clusters of 2
    assert r.waves == 6 and r.tail_fill == pytest.approx((132 - 5 * 24) / 24)
    assert (r.card_resident_ctas, r.cupti_card_ctas, r.cupti_agrees) == (132, 132, True)
    assert r.sized_for_card
    wrong = one(trace(kernel(sms=25, **{**nv, "mac": 60})))
    assert wrong.cupti_agrees is False or wrong.cupti_agrees == False


def test_grid_for_card_on_partitions():
    """132 CTAs of one block per SM: 2 waves on 120 SMs with a 10% tail, the same waves on 66 (72 at a
    granularity of 8); 128 CTAs are not sized for a 132-SM card; on the card itself nothing is flagged."""
    big = {"block": (384, 1, 1), "regs": 168, "smem": 188636}
    r = one(trace(kernel(sms=120, grid=(132, 1, 1), **big)))
    assert (r.waves, r.same_waves_sm, r.wasted_sms) == (2, 66, 54) and r.sized_for_card
    assert r.tail_fill == pytest.approx(12 / 120)
    assert one(trace(kernel(sms=120, grid=(132, 1, 1), **big)), granularity=8).same_waves_sm == 72
    assert not one(trace(kernel(sms=120, grid=(128, 1, 1), **big))).sized_for_card
    assert one(trace(kernel(sms=64, grid=(264, 1, 1), **big))).sized_for_card
    card = one(trace(kernel(sms=132, partition="device", grid=(132, 1, 1), **big)))
    assert not card.multi_wave and not card.sized_for_card and card.wasted_sms == 0


def test_rows_per_name_and_partition():
    rows = [kernel("a", sms=24, rep=i, start=i) for i in range(3)] + [kernel("a", sms=108, partition="rem")]
    out = partition_fit(trace(*rows, kernel("b", sms=24, grid=(10, 1, 1))))
    assert list(out.columns) == FIT_COLUMNS
    assert sorted(zip(out["name"], out["partition"], out["launches"])) == [("a", "p0", 3), ("a", "rem", 1),
                                                                           ("b", "p0", 1)]


def test_kernels_without_resource_fields_say_so():
    out = partition_fit(trace(kernel(), drop=("registers_per_thread", "static_shared_bytes")))
    assert len(out) == 1 and "no resource fields" in out["reason"].iloc[0]
    assert "registers_per_thread" in out["reason"].iloc[0] and pd.isna(out["waves"].iloc[0])
    nan = partition_fit(trace(kernel(regs=np.nan), kernel("ok")))
    assert set(nan["reason"].map(bool)) == {True, False}
    unwatched = one(trace(kernel(sms=0)))
    assert "unknown size" in unwatched.reason
    odd = one(trace(kernel()), compute_capability="7.0")
    assert "no occupancy limits" in odd.reason
    assert any("not estimated" in s for s in fit_notes(trace(kernel(sms=0))))


def test_each_launch_carries_its_partition_fit_row():
    memset = {**kernel("m", start=5.0), "activity": "memset"}
    rows = [kernel("a", sms=16, grid=(300, 1, 1), regs=0, start=float(i), rep=i) for i in range(2)]
    df = trace(*rows, memset, kernel("a", sms=108, partition="rem", start=3.0), kernel("b", grid=(10, 1, 1)))
    out = launch_waves(df)
    assert list(out.columns) == LAUNCH_WAVE_COLUMNS and list(out.index) == [0, 1, 3, 4]  # no memset row
    # 300 CTAs on 16 SMs of 8 each: 3 waves, the last 44 of 128; 300 on 108 SMs (864): one wave; b: one
    assert [int(w) for w in out["waves"]] == [3, 3, 1, 1]
    assert out.loc[0, "tail_fill"] == pytest.approx(44 / 128) and list(out["multi_wave"]) == [True, True, False, False]
    fit = partition_fit(df).set_index(["name", "partition"])
    for i, (name, part) in zip(out.index, [("a", "p0"), ("a", "p0"), ("a", "rem"), ("b", "p0")]):
        assert out.loc[i, "waves"] == fit.loc[(name, part), "waves"]
    bare = launch_waves(trace(kernel(), drop=("registers_per_thread",)))
    assert pd.isna(bare["waves"].iloc[0]) and "no resource fields" in bare["reason"].iloc[0]


def test_bad_input_is_refused_with_the_reason():
    with pytest.raises(TypeError, match="kernel trace"):
        partition_fit([1, 2])
    with pytest.raises(ValueError, match="partition"):
        partition_fit(pd.DataFrame({"name": ["k"]}))
    with pytest.raises(ValueError, match="scaling result"):
        fit_table(pd.DataFrame({"sm_count": [8]}))


# ---------------------------------------------------------------------------
# Recorded traces read offline
# ---------------------------------------------------------------------------


def test_recorded_trace_offline():
    t = gcexplore.load_recorded("trace")
    out = gcexplore.partition_fit(t)
    nv = out[out["name"].str.startswith("nvjet") & (out["partition"] == "p0")].iloc[0]
    # 2 x 66 CTAs, one per SM, clusters of 2 on 24 SMs: 12 clusters at once, 6 waves, the last half full
    assert (int(nv.ctas), int(nv.sm_count), int(nv.waves), nv.tail_fill) == (132, 24, 6, 0.5)
    assert nv.sized_for_card and nv.cupti_agrees
    card = out[out["name"].str.startswith("nvjet") & (out["partition"] == "device")].iloc[0]
    assert int(card.waves) == 1 and not card.multi_wave


@pytest.mark.parametrize("name", ["comm_fit_trace", "comm_zero_trace", "pm_trace"])
def test_recorded_comm_traces_offline(name):
    t = gcexplore.load_recorded(name)
    out = partition_fit(t)
    k = t[t["activity"] == "kernel"] if "activity" in t else t
    assert out["launches"].sum() == len(k)
    done = out[out["reason"] == ""]
    assert len(done) and (done["waves"] >= 1).all()
    assert (done["multi_wave"] == (done["waves"] > 1)).all()
    assert ((done["tail_fill"] > 0) & (done["tail_fill"] <= 1)).all()


# ---------------------------------------------------------------------------
# Plateaus on recorded scaling curves
# ---------------------------------------------------------------------------


def _check_plateaus(df: pd.DataFrame, table: pd.DataFrame) -> None:
    """Every plateau size is not faster than the plateau's first size beyond their intervals (recomputed
    here from round_median_ci), the size after a plateau is, and sizes off plateaus are each faster."""
    for (rid, w), g in table.groupby(["run_id", "workload"]):
        mine = df[(df["workload"] == w) & (df["run_id"].astype(str) == rid)]
        floor = ST.noise_floor(str(mine["device_name"].iloc[0]), [w])
        ci = {int(sm): ST.round_median_ci(x["duration_ms"], x.get("round"), 0.9, floor=floor)
              for sm, x in mine.groupby("sm_count")}
        g = g.sort_values("sm_count").reset_index(drop=True)
        for i, r in g.iterrows():
            assert r.low_ms == pytest.approx(ci[int(r.sm_count)][1])
            if r.on_plateau:
                start = ci[int(r.plateau_start_sm)]
                assert ci[int(r.sm_count)][2] >= start[1]
                assert r.wasted_sms == r.sm_count - r.plateau_start_sm
            nxt = g.iloc[i + 1] if i + 1 < len(g) else None
            if nxt is not None and not (r.on_plateau and nxt.on_plateau and nxt.plateau == r.plateau):
                base = ci[int(r.plateau_start_sm)] if r.on_plateau else ci[int(r.sm_count)]
                assert ci[int(nxt.sm_count)][2] < base[1], (w, r.sm_count, nxt.sm_count)


def test_plateaus_of_recorded_scaling():
    df = gcexplore.load_recorded("scaling")
    table = gcexplore.fit_table(df)
    _check_plateaus(df, table)
    mem = table[table["workload"] == "memory"]
    assert mem["on_plateau"].any() and not table[table["workload"] == "compute"]["on_plateau"].any()
    start = int(mem["plateau_start_sm"].dropna().iloc[0])
    assert any(h.startswith("memory takes") and f"beyond {start} buy nothing" in h for h in table.attrs["hints"])


@pytest.mark.parametrize("name", ["predict_profiles", "predict_profiles_h200"])
def test_plateaus_of_recorded_profiles(name):
    df = gcexplore.load_recorded(name)
    df = df[df["position"] == "first"]
    table = fit_table(df)
    _check_plateaus(df, table)
    assert len(table.attrs["hints"]) == table.groupby(["run_id", "workload"])["plateau"].apply(
        lambda p: p[p >= 0].nunique()).sum()


# ---------------------------------------------------------------------------
# A GEMM-like run with its trace: waves explain the plateau, the sentences come from the table
# ---------------------------------------------------------------------------

SIZES = [64, 72, 80, 96, 112, 120, 128, 132]
WAVE_MS = 0.1


def _gemm_run(rounds: int = 3, reps: int = 5):
    rng = np.random.default_rng(3)
    rows, kern = [], []
    for sm in SIZES:
        waves = math.ceil(132 / sm)
        for rnd in range(rounds):
            for rep in range(reps):
                rows.append({"workload": "gemm", "sm_count": sm, "requested_sm_count": sm, "rep": rnd * reps + rep,
                             "round": rnd, "duration_ms": WAVE_MS * waves * float(rng.lognormal(0, 0.003)),
                             "device_name": H["device_name"], "run_id": "hand"})
        part = "device" if sm == 132 else "p0"
        kern.append(kernel("nvjet", workload="gemm", sms=sm, partition=part, layout=str(sm), grid=(132, 1, 1),
                           block=(384, 1, 1), regs=168, smem=188636, dur=WAVE_MS * waves))
    df = pd.DataFrame(rows)
    df.attrs.update({**H, "kind": "scaling"})
    return df, trace(*kern)


def test_fit_table_with_trace_and_hint_sentence():
    df, tr = _gemm_run()
    table = fit_table(df, tr)
    by = table.set_index("sm_count")
    assert list(by["waves"].astype(int)) == [math.ceil(132 / s) for s in SIZES]
    on = by[by["on_plateau"]]
    assert (on.index.min(), on.index.max()) == (72, 128)  # 2 waves from 72 to 128 SMs
    assert by.loc[128, "wasted_sms"] == 56
    hint = table.attrs["hints"][0]
    first, last = by.loc[72], by.loc[128]
    assert hint.startswith(f"gemm takes the same time on 72 SMs as on 128 ({first.median_ms:.3g} ms against "
                           f"{last.median_ms:.3g} ms")
    assert "the 56 SMs beyond 72 buy nothing" in hint
    assert "132 CTAs in the same waves (2)" in hint
    assert hint.endswith(f"132 SMs bring it to {by.loc[132, 'median_ms']:.3g} ms")


def test_a_size_without_samples_is_on_no_plateau():
    df, _ = _gemm_run()
    df.loc[df["sm_count"] == 96, "duration_ms"] = np.nan
    by = fit_table(df).set_index("sm_count")
    assert not by.loc[96, "on_plateau"] and np.isnan(by.loc[96, "median_ms"])
    assert (by.loc[72, "plateau_end_sm"], by.loc[112, "plateau_start_sm"]) == (80, 112)


def test_summarize_scaling_carries_the_hints():
    df, tr = _gemm_run()
    assert gcexplore.summarize(df).attrs["fit_notes"] == fit_table(df).attrs["hints"]
    assert gcexplore.summarize(df, trace=tr).attrs["fit_notes"] == fit_table(df, tr).attrs["hints"]
    rec = gcexplore.load_recorded("scaling")
    assert gcexplore.summarize(rec).attrs["fit_notes"] == fit_table(rec).attrs["hints"]


def test_summarize_traced_result_names_the_wasting_kernel():
    ov = gcexplore.load_recorded("trace_overlap")
    tr = gcexplore.load_recorded("trace").copy()
    assert gcexplore.summarize(ov, trace=tr).attrs["fit_notes"][0].startswith("no traced kernel at 24+108 leaves")
    # the matmul's grid made 26 CTAs: 2 waves on 24 SMs, the second 2 CTAs
    nv = tr["name"].str.startswith("nvjet")
    tr.loc[nv, ["grid_x", "grid_y", "cluster_x", "max_active_clusters"]] = [26, 1, 1, 0]
    tr = tr.copy()  # a new frame: the run's memo keys a trace by identity
    notes = gcexplore.summarize(ov, trace=tr).attrs["fit_notes"]
    fit = partition_fit(tr[tr["layout"] == "24+108"])
    r = fit[fit["name"].str.startswith("nvjet") & (fit["partition"] == "p0")].iloc[0]
    assert (int(r.waves), int(r.same_waves_sm), int(r.wasted_sms)) == (2, 13, 11)
    (note,) = [n for n in notes if "nvjet" in n and "p0's" in n]
    assert note.startswith("matmul's nvjet")
    assert f"runs 26 CTAs in 2 waves on p0's 24 SMs at 24+108 (last wave {r.tail_fill:.0%} full)" in note
    assert f"same waves on 13, so 11 SMs buy it nothing; {r.idle_sm_share:.0%} of its SM time" in note
    assert f"about {r.idle_ms:.3g} ms of its {r.duration_ms:.3g} ms" in note


def test_figure_draws_plateaus_and_waves(tmp_path):
    pytest.importorskip("matplotlib")
    df, tr = _gemm_run()
    fig = gcexplore.plot_partition_fit(df, tr)
    gids = {a.get_gid() for ax in fig.axes for a in [*ax.lines, *ax.patches, *ax.collections] if a.get_gid()}
    assert {"time:gemm", "ideal:gemm", "plateau:gemm:0", "waves:gemm"} <= gids
    waves = next(ln for ax in fig.axes for ln in ax.lines if ln.get_gid() == "waves:gemm")
    assert list(waves.get_ydata()) == [float(math.ceil(132 / s)) for s in SIZES]
    assert fit_table(df, tr).attrs["hints"][0].split()[:6] == fig._suptitle.get_text().split("\n", 1)[1].split()[:6]
    assert " ".join(fit_table(df, tr).attrs["hints"][0].split()) in " ".join(fig._suptitle.get_text().split())
    fig.savefig(tmp_path / "fit.png")


# ---------------------------------------------------------------------------
# Plateaus the waves do not explain (a DRAM-bound triad), persistent grids (cuBLAS's nvjet)
# ---------------------------------------------------------------------------


def _flat_run(ctas: int, block: int, regs: int, smem: int = 0, ms: float = 0.75, name: str = "triad"):
    """Time flat on every size (a bandwidth-bound kernel), one kernel of ``ctas`` CTAs per size."""
    rng = np.random.default_rng(5)
    rows = [{"workload": "memory", "sm_count": sm, "rep": rnd * 5 + rep, "round": rnd,
             "duration_ms": ms * float(rng.lognormal(0, 0.002)), "device_name": H["device_name"], "run_id": "hand"}
            for sm in SIZES for rnd in range(3) for rep in range(5)]
    df = pd.DataFrame(rows)
    df.attrs.update({**H, "kind": "scaling"})
    kern = [kernel(name, workload="memory", sms=sm, partition="device" if sm == 132 else "p0", layout=str(sm),
                   grid=(ctas, 1, 1), block=(block, 1, 1), regs=regs, smem=smem, dur=ms) for sm in SIZES]
    return df, trace(*kern)


def test_flat_time_while_waves_change_is_not_put_on_the_waves():
    # 32768 CTAs of 8 per SM: 64 waves on 64 SMs, 32 on 132, the time flat throughout
    df, tr = _flat_run(32768, 256, 0)
    table = fit_table(df, tr)
    by = table.set_index("sm_count")
    assert list(by["waves"].astype(int)) == [math.ceil(32768 / (8 * s)) for s in SIZES]
    assert by["on_plateau"].all() and by["plateau"].nunique() == 1
    assert not by["from_waves"].astype(bool).any() and not by["persistent"].astype(bool).any()
    (hint,) = table.attrs["hints"]
    assert "the time flat while its waves fall from 64 to 32: something other than waves bounds it" in hint
    assert "same wave" not in hint


def test_one_wave_count_across_a_plateau_is_put_on_the_waves():
    df, tr = _gemm_run()
    by = fit_table(df, tr).set_index("sm_count")
    on = by[by["on_plateau"]]
    assert on["from_waves"].astype(bool).all()
    assert by[~by["on_plateau"]]["from_waves"].isna().all()
    assert fit_table(df)["from_waves"].isna().all()  # without a trace nothing is said


def test_persistent_grid_is_told_from_a_one_wave_card_grid():
    rows = [kernel("nvjet", sms=120, grid=(132, 1, 1), block=(384, 1, 1), regs=168, smem=188636),  # 1 per SM
            kernel("spin", sms=120, grid=(32 * 132, 1, 1), block=(32, 1, 1), regs=16, start=2.0),  # 32 per SM
            kernel("tri", sms=120, grid=(264, 1, 1), block=(128, 1, 1), regs=0, smem=100 * 1024, start=4.0)]
    fit = partition_fit(trace(*rows)).set_index("name")
    assert fit.loc["nvjet", "persistent"] and fit.loc["tri", "persistent"]  # 132 of 132, 264 of 2 x 132
    assert fit.loc["spin", "sized_for_card"] and not fit.loc["spin", "persistent"]
    assert (int(fit.loc["nvjet", "waves"]), int(fit.loc["spin", "waves"])) == (2, 2)


def test_persistent_hint_and_note_claim_no_time_from_waves():
    df, tr = _gemm_run()
    table = fit_table(df, tr)
    assert table[table["on_plateau"]]["persistent"].astype(bool).all()
    hint = table.attrs["hints"][0]
    assert "132 CTAs in the same waves (2) there (persistent: waves set the plateau, not the time)" in hint
    at = tr[tr["sm_count"] == 120].copy()
    at.attrs.update(tr.attrs)
    (note, *_) = fit_notes(at)
    assert note.startswith("gemm's nvjet runs 132 CTAs (a persistent grid sized for the card) in 2 waves on p0's 120")
    assert "persistent: waves set the plateau, not the time, so no idle time is claimed" in note
    assert "idle," not in note and " ms" not in note


# ---------------------------------------------------------------------------
# The predictor and the plateau (gcexplore.prediction.check.plateau_residuals)
# ---------------------------------------------------------------------------


def test_predictor_plateau_residuals_on_the_recorded_sweep_and_the_guides_sentence():
    from pathlib import Path

    from gcexplore.prediction.check import plateau_residuals, plateau_sentence

    prof, sweep = gcexplore.load_recorded("predict_profiles"), gcexplore.load_recorded("predict_sweep")
    r = plateau_residuals(prof, sweep)
    f = r.attrs["facts"]
    # recomputed by hand: the plateau sizes of each workload's curve at the position it is predicted from
    for pos, w in (("first", "fft"), ("last", "conv")):
        t = fit_table(prof[(prof["position"] == pos) & (prof["workload"] == w)])
        on = set(t.loc[t["on_plateau"], "sm_count"].astype(int))
        mine = r[r["workload"] == w]
        assert set(mine.loc[mine["on_plateau"], "sm_count"]) == on & set(mine["sm_count"])
    conc = sweep[sweep["mode"] == "concurrent"]
    m = conc.groupby(["layout", "workload"])["duration_ms"].median()
    got = r.set_index(["layout", "workload"])
    assert np.allclose(got["measured_ms"], [m[k] for k in got.index])
    res = (got["predicted_ms"] / got["measured_ms"] - 1).abs()
    assert f["median_on"] == pytest.approx(res[got["on_plateau"].to_numpy()].median())
    assert f["top_on_plateau"] == int(got["on_plateau"].to_numpy()[np.argsort(-res.to_numpy())[:5]].sum())
    assert f["on_plateau"] > 0 and f["alone_measured"] == f["pairs"] == len(r)
    guide = " ".join((Path(__file__).resolve().parents[1] / "docs" / "guide.md").read_text().split())
    assert plateau_sentence(r) in guide


def test_predictor_plateau_refuses_runs_it_cannot_predict():
    from gcexplore.prediction.check import plateau_residuals

    sweep = gcexplore.load_recorded("predict_sweep").assign(workload=lambda d: d["workload"].replace("fft", "nope"))
    with pytest.raises(ValueError, match="no run of the measurement has all its workloads profiled"):
        plateau_residuals(gcexplore.load_recorded("predict_profiles"), sweep)
