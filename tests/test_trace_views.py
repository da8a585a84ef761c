"""Estimated occupancy from a kernel trace, its figure, the explorers' trace view and the
CLI's --kernel-trace, without a GPU (synthetic rows and the recorded H100 trace)."""

from __future__ import annotations

import pandas as pd
import pytest

import _synthetic as S
import _synthetic_trace as T
import gcexplore
from gcexplore.cli import commands as cli
from gcexplore.trace import collector as tracing
from gcexplore.analysis import occupancy_estimate as E
from gcexplore import widgets as GW
from gcexplore import experiments as X

H100 = E.LIMITS["9.0"]


@pytest.fixture(autouse=True)
def _fresh_context_records(monkeypatch):
    """Each test sees only the context records it made (the collector keeps them per process)."""
    monkeypatch.setattr(tracing, "_CONTEXTS_SEEN", {})


# ------------------------------------------------------------------- blocks per SM


@pytest.mark.parametrize("threads, regs, smem, blocks, limiter", [
    (256, 64, 0, 4, "registers"),           # 64 x 32 = 2048 regs/warp; 16384 / 2048 = 8 warps per
                                            # sub-partition, 32 per SM, 8 warps a block
    (384, 168, 0, 1, "registers"),          # 5376 regs/warp: 3 warps per sub-partition, 12 per SM
    (384, 168, 188636, 1, "registers+shared memory"),  # the recorded cuBLAS kernel
    (128, 32, 48 * 1024, 4, "shared memory"),  # 48 KiB + 1 KiB reserved: 228 KiB // 49 KiB = 4
    (128, 32, 100 * 1024, 2, "shared memory"),  # 101 KiB a block: 2
    (1024, 32, 0, 2, "warps+registers"),    # 32 warps a block, 64 per SM
    (64, 0, 0, 32, "warps+blocks"),         # 2 warps a block: the 32-block limit
    (100, 0, 0, 16, "warps"),               # 100 threads round up to 4 warps: 64 // 4
])
def test_blocks_per_sm_follow_the_occupancy_calculator(threads, regs, smem, blocks, limiter):
    assert E.blocks_per_sm(threads, regs, smem, H100) == (blocks, limiter)


@pytest.mark.parametrize("threads, regs, smem, message", [
    (1025, 32, 0, "1 to 1024 threads per block"),
    (128, 256, 0, "256 registers per thread exceed"),
    (128, 32, 228 * 1024, "bytes of shared memory per block exceed"),
    (1024, 255, 0, "registers per block"),
])
def test_impossible_blocks_are_refused(threads, regs, smem, message):
    with pytest.raises(ValueError, match=message):
        E.blocks_per_sm(threads, regs, smem, H100)


def test_unknown_compute_capability_is_refused_clearly():
    with pytest.raises(ValueError, match=r"no occupancy limits for compute capability 8\.0; known: 9\.0 \(Hopper"):
        E.limits_for("8.0")
    assert E.limits_for((9, 0)) is H100


# ------------------------------------------------------------------- SMs over time


def _kernels(rows, sm_count=24, partition="p0"):
    base = {"layout": "24+108", "mode": "concurrent", "rep": 0, "workload": "w", "launch": 0,
            "partition": partition, "sm_count": sm_count, "stream_id": 7, "activity": "kernel",
            "grid_y": 1, "grid_z": 1, "block_y": 1, "block_z": 1, "static_shared_bytes": 0,
            "cluster_x": 0, "cluster_y": 0, "cluster_z": 0, "device_name": "synthetic", "run_id": "r1"}
    df = pd.DataFrame([{**base, **r} for r in rows])
    df.attrs["compute_capability"] = "9.0"
    return df


def test_sms_in_use_and_waves_from_grid_and_block():
    t = _kernels([
        dict(name="small", grid_x=8, block_x=256, registers_per_thread=64, dynamic_shared_bytes=0,
             start_ms=0.0, end_ms=1.0),                      # 4 blocks/SM: ceil(8 / 4) = 2 SMs
        dict(name="big", grid_x=1000, block_x=256, registers_per_thread=64, dynamic_shared_bytes=0,
             start_ms=0.5, end_ms=2.0),                      # 1000 blocks: all 24 SMs, 11 waves
        dict(name="cublas", grid_x=2, grid_y=66, block_x=384, registers_per_thread=168,
             dynamic_shared_bytes=188636, cluster_x=2, cluster_y=1, cluster_z=1, start_ms=3.0, end_ms=4.0),
    ])
    est = E.estimate_occupancy(t)
    assert list(est.columns) == E.ESTIMATE_COLUMNS and set(est["source"]) == {"estimated"}
    assert est.attrs["source"] == "estimated" and "estimated" in est.attrs["estimate"]
    got = est.set_index("name")
    assert got.loc["small", "sms_in_use"] == 2 and got.loc["small", "waves"] == 1
    assert got.loc["big", "sms_in_use"] == 24 and got.loc["big", "waves"] == 11  # ceil(1000 / 96)
    assert got.loc["cublas", "blocks"] == 132 and got.loc["cublas", "cluster_size"] == 2
    assert got.loc["cublas", "sms_in_use"] == 24 and got.loc["cublas", "waves"] == 6  # ceil(132 / 24)
    assert got.loc["cublas", "occupancy"] == pytest.approx(12 / 64)

    usage = E.sm_usage(t)
    assert list(usage.columns) == E.SM_USAGE_COLUMNS
    steps = list(zip(usage["time_ms"], usage["sms_in_use"], usage["kernels"]))
    # 2 SMs, then both running (2 + 24 capped at 24), then big alone, idle, cublas, idle
    assert steps == [(0.0, 2, 1), (0.5, 24, 2), (1.0, 24, 1), (2.0, 0, 0), (3.0, 24, 1), (4.0, 0, 0)]


def test_clusters_use_whole_clusters_only():
    t = _kernels([dict(name="c", grid_x=2, grid_y=66, block_x=384, registers_per_thread=168,
                       dynamic_shared_bytes=188636, cluster_x=2, cluster_y=1, cluster_z=1,
                       start_ms=0.0, end_ms=1.0)], sm_count=25)
    assert E.estimate_occupancy(t)["sms_in_use"].tolist() == [24]  # 12 clusters of 2 on 25 SMs


def test_recorded_trace_never_exceeds_the_partition():
    trace = gcexplore.load_recorded("trace")
    usage = gcexplore.sm_usage(trace)
    assert len(usage) and (usage["sms_in_use"] <= usage["sm_count"]).all()
    est = gcexplore.estimate_occupancy(trace)
    assert (est["sms_in_use"] <= est["sm_count"]).all()
    mm = est[(est["workload"] == "matmul") & (est["mode"] == "concurrent")].iloc[0]
    assert (mm["blocks"], mm["cluster_size"], mm["blocks_per_sm"], mm["sm_count"], mm["waves"]) == (132, 2, 1, 24, 6)


# ------------------------------------------------------------------------- figure


def test_sm_usage_figure_is_labelled_estimated():
    tr, _ = T.trace_df()
    fig = gcexplore.plot_sm_usage(tr)
    assert "estimated from grid, block and resources" in fig.get_suptitle()
    gids = {line.get_gid() for ax in fig.axes for line in ax.get_lines()}
    assert {"sm_usage:p0", "sm_usage:remainder", "sm_usage:device"} <= gids


def test_sm_usage_names_the_workloads_of_each_partition():
    tr, _ = T.trace_df()
    fig = gcexplore.plot_sm_usage(tr)
    labels = {line.get_gid(): line.get_label() for ax in fig.axes for line in ax.get_lines()}
    for part, wls in tr[tr["rep"] == 0].groupby("partition")["workload"]:
        assert all(w in labels[f"sm_usage:{part}"] for w in set(wls)), labels[f"sm_usage:{part}"]


@pytest.mark.parametrize("rep", [0, 1])
def test_timeline_says_which_cluster_of_repetitions_it_shows(rep):
    from gcexplore.analysis import rep_mode, trace_modes

    trace = gcexplore.load_recorded("trace")
    fig = gcexplore.plot_timeline(trace, rep=rep)
    titles = {ax.get_title().split(" — ")[0]: ax.get_title() for ax in fig.axes}
    mine = rep_mode(trace_modes(trace), rep)
    split = mine[mine["clusters"] > 1]
    assert len(split), "the recorded plain-streams sigmoid start is bimodal"
    for r in split.itertuples():
        title = next(t for t in titles.values() if t.startswith(gcexplore.views.plot.mode_label(r.mode)))
        assert f"{r.workload}'s first kernel at {r.median:.3f} ms here, as in {r.count} of {r.reps_total}" in title
        n, med = r.others[0]
        assert f"{n} at {med:.3f} ms" in title
    # a mode whose starts form one cluster gets no note
    single = mine[mine["clusters"] == 1]
    for mode in set(single["mode"]) - set(split["mode"]):
        title = next(t for t in titles.values() if t.startswith(gcexplore.views.plot.mode_label(mode)))
        assert "first kernel" not in title


# ------------------------------------------------------------------ waves on the timeline

def _wave_bars(fig, mode_title):
    """{gid: [segments per collection]} of the wave shadings in the panel whose title starts so."""
    ax = next(a for a in fig.axes if a.get_title().startswith(mode_title))
    out = {}
    for c in ax.collections:
        gid = str(c.get_gid())
        if "waves:" in gid:
            out.setdefault(gid, []).append(c)
    return out


def _legend_texts(fig):
    return [t.get_text() for leg in fig.legends for t in leg.get_texts()]


def test_timeline_shades_the_waves_of_multi_wave_kernels():
    from gcexplore.analysis.waves import partition_fit

    # 256 threads, 32 registers, 1 KiB shared: 8 CTAs per SM. matmul's 500 CTAs on p0's 24 SMs (192 at
    # once): 3 waves, the last 116 of 192 full; sigmoid's 1000 on the remainder's 108 (864): 2 waves;
    # on the whole card (1056 at once) both run one wave.
    trace, _ = T.trace_df(grids={"matmul": 500, "sigmoid": 1000})
    fig = gcexplore.plot_timeline(trace)
    mode = gcexplore.views.plot.mode_label
    conc = _wave_bars(fig, mode("concurrent"))
    assert set(conc) == {"waves:matmul", "waves:sigmoid"}
    assert [len(c.get_paths()) for c in conc["waves:matmul"]] == [3]          # one launch, 3 waves
    assert [len(c.get_paths()) for c in conc["waves:sigmoid"]] == [2, 2, 2]   # three launches, 2 waves each
    fit = partition_fit(trace)  # the counts drawn are partition_fit's
    assert set(fit.loc[fit["partition"] == "p0", "waves"]) == {3}
    assert set(fit.loc[fit["partition"] == "remainder", "waves"]) == {2}
    # the segments cut the bar into equal parts; the tail paler the emptier it is
    (mm,) = conc["waves:matmul"]
    xs = [p.vertices[:, 0] for p in mm.get_paths()]
    widths = [x.max() - x.min() for x in xs]
    assert widths == pytest.approx([widths[0]] * 3) and sum(widths) == pytest.approx(0.9)
    alphas = [rgba[3] for rgba in mm.get_facecolors()]
    assert alphas[:2] == pytest.approx([0.0, 0.22]) and alphas[2] == pytest.approx(0.75 * (1 - 116 / 192))
    assert _wave_bars(fig, mode("streams")) == {}  # one wave on 132 SMs: drawn plain
    assert any(t.startswith("waves on its partition") for t in _legend_texts(fig))
    assert not any(t.startswith("persistent") for t in _legend_texts(fig))


def test_timeline_marks_a_persistent_grid_and_leaves_one_wave_kernels_plain():
    # 264 CTAs = 2 x the card's 132 SMs, which hold 1056 at once: a persistent grid; 2 waves on p0's 192
    trace, _ = T.trace_df(grids={"matmul": 264})
    fig = gcexplore.plot_timeline(trace)
    conc = _wave_bars(fig, gcexplore.views.plot.mode_label("concurrent"))
    assert set(conc) == {"persistent_waves:matmul"}  # sigmoid's 132 CTAs fit the remainder: one wave
    (mm,) = conc["persistent_waves:matmul"]
    assert len(mm.get_paths()) == 2 and mm.get_hatch() == "////"
    assert any(t.startswith("persistent grid's waves") for t in _legend_texts(fig))
    one = gcexplore.plot_timeline(T.trace_df()[0])  # 132 CTAs everywhere: one wave, nothing shaded
    assert all(_wave_bars(one, a.get_title().split(" — ")[0]) == {} for a in one.axes)
    assert not any("waves" in t for t in _legend_texts(one))


def test_timeline_of_kernels_without_resource_fields_is_drawn_as_before():
    trace, _ = T.trace_df(grids={"matmul": 500})
    bare = trace.drop(columns=["grid_x", "grid_y", "grid_z", "registers_per_thread"])
    fig = gcexplore.plot_timeline(bare)
    gids = [str(c.get_gid()) for ax in fig.axes for c in ax.collections]
    assert "kernel:matmul" in gids and not any("waves:" in g for g in gids)
    assert not any("waves" in t for t in _legend_texts(fig))


# ------------------------------------------------------------------------ widgets


def _pngs(out):
    return [o["data"]["image/png"] for o in out.outputs if "image/png" in o.get("data", {})]


def _texts(out):
    return [o["data"]["text/plain"] for o in out.outputs if "image/png" not in o.get("data", {})]


def test_offline_explorer_shows_the_kernel_timeline_of_a_traced_split():
    tr, df = T.trace_df()
    ex = GW.Explorer.from_results(df, trace=tr)
    assert ex.layout == "24+108" and ex.last_error is None
    assert len(_pngs(ex.occupancy_output)) == 2  # timeline, estimated SMs in use
    timeline, usage = ex.figures["occupancy"]
    assert any(str(c.get_gid()).startswith("kernel:") for ax in timeline.axes for c in ax.collections)
    assert "estimated" in usage.get_suptitle()


def test_offline_explorer_over_the_recorded_trace():
    ex = GW.Explorer.from_results("trace_overlap", trace="trace")
    assert ex.last_error is None and len(_pngs(ex.occupancy_output)) == 2


def _trace_of_sweep(sweep):
    """The synthetic trace (at 24+108) relabelled as a trace of ``sweep``: its workloads, its run."""
    tr, _ = T.trace_df()
    return tr.assign(workload=tr["workload"].map({"matmul": "compute", "sigmoid": "memory"}),
                     run_id=sweep["run_id"].iloc[0])


def test_sweep_explorer_shows_the_trace_only_where_it_was_recorded():
    df = S.sweep_df()
    sx = GW.SweepExplorer.from_results(df, occupancy=S.occupancy_df(), trace=_trace_of_sweep(df))
    sx.split_slider.value = 24
    assert len(_pngs(sx.occupancy_output)) == 3  # measured %smid map, timeline, estimate
    sx.split_slider.value = 40
    (note,) = _texts(sx.occupancy_output)
    assert note.startswith("SM occupancy was recorded at 24+108, not at 40+92")


def test_from_results_refuses_a_trace_that_is_not_one():
    with pytest.raises(ValueError, match=r"trace=...\)"):
        GW.Explorer.from_results(S.sweep_df(), trace=S.sweep_df())


@pytest.fixture
def fake_traced_gpu(monkeypatch, h100_like):
    import gcexplore.device.driver as api

    calls = []
    monkeypatch.setattr(api, "device_info", lambda device=0: h100_like)
    state = {"cupti": True}

    def profile_overlap(workloads, split, *, repeats, device, trace=False):
        calls.append(("profile_overlap", list(split), trace))
        if trace and not state["cupti"]:
            raise tracing.TraceUnavailable("trace=True needs cupti-python, which cannot be imported here")
        tr, df = T.trace_df()
        df = df.assign(workload=df["workload"].map({"matmul": "mine", "sigmoid": "memory"}))
        tr = tr.assign(workload=tr["workload"].map({"matmul": "mine", "sigmoid": "memory"}))
        return tracing.TracedResult(df, tr) if trace else df

    def occupancy(workloads, split, *, device):
        raise ValueError("workload 'mine' cannot be instrumented")

    monkeypatch.setattr(X, "profile_overlap", profile_overlap)
    monkeypatch.setattr(X, "occupancy", occupancy)
    return calls, state


def _mine(*, stream):
    pass


def test_live_trace_shows_the_timeline_for_a_user_callable(fake_traced_gpu):
    calls, _ = fake_traced_gpu
    ex = GW.Explorer({"mine": _mine, "memory": "memory"}, trace=True)
    ex.run()
    assert calls == [("profile_overlap", [24], True)]
    assert ex.error_box.layout.display == "none" and len(_pngs(ex.occupancy_output)) == 2


def test_live_trace_unavailable_is_one_line_and_the_run_goes_on(fake_traced_gpu):
    calls, state = fake_traced_gpu
    state["cupti"] = False
    ex = GW.Explorer({"mine": _mine, "memory": "memory"}, trace=True)
    ex.run()
    assert [c[2] for c in calls] == [True, False]  # retried without the trace
    (note,) = _texts(ex.occupancy_output)
    assert note == ("no SM occupancy: ValueError: workload 'mine' cannot be instrumented; no kernel trace: "
                    "trace=True needs cupti-python, which cannot be imported here")
    assert ex.error_box.layout.display == "none" and len(_pngs(ex.plot_output)) == 1


# ---------------------------------------------------------------------------- CLI


@pytest.mark.parametrize("extra, message", [
    (["--kernel-trace", "k.txt"], "--kernel-trace 'k.txt' must end in .parquet or .csv"),
    (["--out", "r.parquet", "--kernel-trace", "r.parquet"], "would overwrite each other or share a metadata"),
    (["--out", "r.parquet", "--kernel-trace", "r.csv"], "would overwrite each other or share a metadata"),
    (["--kernel-trace", "k.parquet", "--trace", "k.json"], "--trace 'k.json' would overwrite --kernel-trace"),
])
def test_kernel_trace_argument_is_checked_before_the_gpu(tmp_path, monkeypatch, capsys, extra, message):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["profile", "compute", "memory", "--split", "24", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_kernel_trace_without_cupti_is_one_line(tmp_path, monkeypatch, capsys):
    def no_cupti():
        raise tracing.TraceUnavailable("trace=True needs cupti-python, which cannot be imported here")

    monkeypatch.setattr(tracing, "require_cupti", no_cupti)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["profile", "compute", "memory", "--split", "24", "--kernel-trace", "k.parquet"]) == 1
    err = capsys.readouterr().err
    assert err == "gcexplore profile: --kernel-trace: trace=True needs cupti-python, which cannot be imported here\n"


def test_kernel_trace_is_saved_beside_the_results(tmp_path, monkeypatch, capsys):
    tr, df = T.trace_df()
    monkeypatch.setattr(tracing, "require_cupti", lambda: None)
    monkeypatch.setattr(cli, "_build_workloads", lambda parsed, device: {})
    seen = {}

    def profile_overlap(wls, split, **kw):
        seen.update(kw)
        return tracing.TracedResult(df, tr)

    import gcexplore.experiments.overlap as prof
    monkeypatch.setattr(prof, "profile_overlap", profile_overlap)
    out, kt = tmp_path / "r.parquet", tmp_path / "k.parquet"
    assert cli.main(["profile", "compute", "memory", "--split", "24", "--out", str(out),
                     "--kernel-trace", str(kt)]) == 0
    assert seen["trace"] is True
    assert len(gcexplore.load(kt)) == len(tr) and len(gcexplore.load(out)) == len(df)
    assert f"wrote {kt} ({len(tr)} kernel records)" in capsys.readouterr().out


# ------------------------------------------------------- the explorer passes its trace on


@pytest.mark.parametrize("cls", ["Explorer", "SweepExplorer"])
def test_a_trace_of_other_workloads_is_refused(cls):
    """The recorded trace (matmul, sigmoid) under the recorded sweep (compute, memory): refused,
    saying both sides, instead of a timeline drawn under bars of other workloads."""
    with pytest.raises(ValueError, match=r"the kernel trace is of workloads \['matmul', 'sigmoid'\], but the "
                                         r"results are of \['compute', 'memory'\]; give the trace recorded "
                                         r"with these results"):
        getattr(GW, cls).from_results(gcexplore.load_recorded("sweep"), trace="trace")


def test_a_trace_of_another_run_or_layout_is_refused():
    df = S.sweep_df()
    tr = _trace_of_sweep(df)
    with pytest.raises(ValueError, match=r"the kernel trace is of run \['synthetic-trace'\], the results of run "
                                         r"\['synthetic-0'\]"):
        GW.Explorer.from_results(df, trace=tr.assign(run_id="synthetic-trace"))
    with pytest.raises(ValueError, match=r"covers layouts \['24\+108'\] that the results did not measure"):
        GW.SweepExplorer.from_results(df[df["layout"] != "24+108"], trace=tr)


def _bars(fig):
    return {p.get_gid() for ax in fig.axes for p in ax.patches}


def _withheld(fig):
    return {t.get_gid() for ax in fig.axes for t in ax.texts if str(t.get_gid()).startswith("withheld:")}


def test_offline_explorer_draws_plain_streams_rates_from_its_trace():
    """With the recorded trace, the plain-streams bars are drawn from GPU-busy time (no
    'withheld' note), and the table's rates come from the same traced summary."""
    ex = GW.Explorer.from_results("trace_overlap", trace="trace")
    fig = ex.figures["throughput"]
    assert {"bar:matmul:streams", "bar:sigmoid:streams"} <= _bars(fig) and not _withheld(fig)
    assert "GPU-busy" in fig.axes[0].get_ylabel()
    table = ex.figures["summary"].set_index(["mode", "workload"])
    traced = gcexplore.summarize(gcexplore.load_recorded("trace_overlap"), trace=gcexplore.load_recorded("trace"))
    want = traced.set_index(["mode", "workload"]).loc[("streams", "sigmoid"), "bandwidth_gbs"]
    assert table.loc[("streams", "sigmoid"), "bandwidth_gbs"] == want and want > 0
    without = GW.Explorer.from_results("trace_overlap")
    assert _withheld(without.figures["throughput"]) == {"withheld:matmul:streams", "withheld:sigmoid:streams"}
    assert without.figures["summary"].set_index(["mode", "workload"])["bandwidth_gbs"].isna()[
        ("streams", "sigmoid")]


def test_sweep_explorer_passes_the_trace_where_it_covers_the_split():
    df = S.sweep_df()
    sx = GW.SweepExplorer.from_results(df, trace=_trace_of_sweep(df))
    sx.split_slider.value = 40  # no trace here: the streams rate is withheld, as without one
    assert "withheld:memory:streams" in _withheld(sx.figures["throughput"])
    sx.split_slider.value = 24  # the trace has concurrent and streams only: the alone bars stay, from events
    assert "withheld:memory:streams" in _withheld(sx.figures["throughput"])
    assert "bar:memory:alone" in _bars(sx.figures["throughput"])
    assert sx.run_summary().attrs["rate_notes"]["streams"].startswith("rates from GPU-busy time")


def test_live_trace_rates_reach_the_throughput_plot(fake_traced_gpu):
    ex = GW.Explorer({"mine": _mine, "memory": "memory"}, trace=True)
    ex.run()
    fig = ex.figures["throughput"]
    assert {"bar:mine:streams", "bar:memory:streams"} <= _bars(fig) and not _withheld(fig)
