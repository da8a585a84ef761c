"""Plot functions on synthetic result frames (tests/_synthetic.py): what is drawn."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection

import _synthetic as S
import gcexplore
from gcexplore.views import plot as P


def _by_gid(fig, gid):
    """Every artist with ``gid`` in any Axes of ``fig``."""
    found = []
    for ax in fig.axes:
        for a in [*ax.lines, *ax.patches, *ax.collections]:
            if a.get_gid() == gid:
                found.append(a)
    return found


def _one(fig, gid):
    hits = _by_gid(fig, gid)
    assert len(hits) == 1, f"expected one artist with gid {gid!r}, found {len(hits)}"
    return hits[0]


# ------------------------------------------------------------------------ provenance


def test_stamp_names_device_and_live_or_recorded():
    df = S.sweep_df()
    fig = P.plot_sweep(df, summary=gcexplore.summarize(df))
    text = fig.get_suptitle()
    assert S.SYNTHETIC_DEVICE in text and "132 SMs" in text and "driver 13.0" in text
    assert "measured live 2000-01-01" in text

    rec = S.sweep_df(recorded=True)
    rec.attrs["driver_version"] = "13.0"  # DeviceInfo.metadata() writes a string
    assert "recorded 2000-01-01" in P.plot_throughput(rec).get_suptitle()
    assert "driver 13.0" in P.figure_stamp(rec.attrs)


def test_stamp_without_metadata_says_unknown():
    assert P.figure_stamp({}) == "unknown device · measured live, date unknown"


@pytest.mark.parametrize("make, fn", [
    (S.sweep_df, P.plot_throughput), (S.scaling_df, P.plot_scaling),
    (S.occupancy_df, P.plot_occupancy), (S.isolation_df, P.plot_isolation),
])
def test_every_figure_carries_the_stamp(make, fn):
    df = make()
    assert fn(df).get_suptitle().split("\n")[0] == P.figure_stamp(df.attrs)


# ---------------------------------------------------------------------------- sweep


def test_sweep_draws_curve_baselines_bound_and_best():
    df = S.sweep_df()
    fig = P.plot_sweep(df, summary=gcexplore.summarize(df))
    assert len(fig.axes) == 1
    ax = fig.axes[0]
    assert ax.get_xlabel() == "SMs of the first partition (compute)"
    assert ax.get_ylabel() == "makespan (ms)"
    assert ax.get_title() == "Overlap sweep: compute + memory"

    conc = _one(fig, "concurrent")
    splits = sorted(df["split_sm_count"].unique())
    assert list(conc.get_xdata()) == splits
    expected = (df[df["mode"] == "concurrent"].drop_duplicates(["layout", "rep"])
                .groupby("split_sm_count")["makespan_ms"].median())
    np.testing.assert_allclose(conc.get_ydata(), expected.loc[splits].to_numpy())
    _one(fig, "concurrent_band")

    for mode in ("sequential", "streams"):
        line = _one(fig, mode)
        med = df[df["mode"] == mode].drop_duplicates(["layout", "rep"])["makespan_ms"].median()
        np.testing.assert_allclose(line.get_ydata(), [med, med])

    table = gcexplore.layout_table(df)
    np.testing.assert_allclose(_one(fig, "lower_bound").get_ydata(), table["lower_bound_ms"])

    best = _one(fig, "best")
    assert best.get_xdata()[0] == expected.idxmin()
    assert f"best split {expected.idxmin()}+{132 - expected.idxmin()}" in best.get_label()


def test_sweep_lower_bound_uses_summarize_when_not_given():
    summarize = gcexplore.summarize
    df = S.sweep_df()
    fig = P.plot_sweep(df)
    lb = summarize(df).groupby("layout")["lower_bound_ms"].first()
    line = _one(fig, "lower_bound")
    layouts = [f"{k}+{132 - k}" for k in line.get_xdata()]
    np.testing.assert_allclose(line.get_ydata(), lb.loc[layouts].to_numpy())


def test_sweep_refuses_frames_it_cannot_draw():
    with pytest.raises(ValueError, match=r"plot_sweep needs an overlap result .*got a scaling result"):
        P.plot_sweep(S.scaling_df())
    df = S.sweep_df()
    with pytest.raises(ValueError, match="needs 'concurrent' rows"):
        P.plot_sweep(df[df["mode"] != "concurrent"], summary=gcexplore.summarize(df))
    with pytest.raises(TypeError, match="plot_sweep needs an overlap result .* as a pandas DataFrame, got list"):
        P.plot_sweep([1, 2, 3])
    with pytest.raises(ValueError, match="empty DataFrame"):
        P.plot_sweep(df.iloc[:0])


# ----------------------------------------------------------------------- throughput


def test_throughput_one_panel_per_workload_one_bar_per_mode():
    df = S.sweep_df(splits=[24])
    fig = P.plot_throughput(df)
    assert len(fig.axes) == 2
    assert [ax.get_ylabel() for ax in fig.axes] == ["throughput (TFLOP/s)", "bandwidth (GB/s)"]
    for ax, w, col in zip(fig.axes, ("compute", "memory"), ("throughput_tflops", "bandwidth_gbs")):
        assert len(ax.patches) == 3  # plain streams: no rate from a span that includes waiting
        assert [t.get_gid() for t in ax.texts if t.get_gid()] == [f"withheld:{w}:streams"]
        assert ax.get_title() == f"{w} — layout 24+108"
        for mode in (m for m in P.MODES if m != "streams"):
            bar = _one(fig, f"bar:{w}:{mode}")
            sel = df[(df.workload == w) & (df["mode"] == mode)]
            assert bar.get_height() == pytest.approx(sel[col].median())
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks[0] == "alone\np0\n24 SMs" and ticks[2] == "sequential\ndevice\n132 SMs"


def test_throughput_defaults_to_best_split_and_checks_layout():
    df = S.sweep_df()
    best = (df[df["mode"] == "concurrent"].drop_duplicates(["layout", "rep"])
            .groupby("layout")["makespan_ms"].median().idxmin())
    fig = P.plot_throughput(df)
    assert fig.axes[0].get_title() == f"compute — layout {best}"
    assert P.plot_throughput(df, layout="8+124").axes[0].get_title() == "compute — layout 8+124"
    with pytest.raises(ValueError, match=r"layout '9\+123' was not measured; measured layouts: "
                                         r"\['8\+124', '16\+116'"):
        P.plot_throughput(df, layout="9+123")


def test_throughput_without_declared_work_plots_calls_per_second():
    df = S.sweep_df(splits=[24])
    df[["flops", "bytes", "throughput_tflops", "bandwidth_gbs"]] = np.nan
    fig = P.plot_throughput(df)
    assert fig.axes[0].get_ylabel() == "calls per second (no declared work)"
    sel = df[(df.workload == "compute") & (df["mode"] == "alone")]
    assert _one(fig, "bar:compute:alone").get_height() == pytest.approx(
        (1e3 / sel["duration_ms"]).median())
    with pytest.raises(ValueError, match="metric 'flops_per_watt' is not available"):
        P.plot_throughput(df, metric="flops_per_watt")


# -------------------------------------------------------------------------- scaling


def test_scaling_panels_per_unit_and_efficiency():
    df = S.scaling_df()
    fig = P.plot_scaling(df)
    assert [ax.get_ylabel() for ax in fig.axes] == [
        "throughput (TFLOP/s)", "bandwidth (GB/s)", "parallel efficiency (vs smallest size)"]
    sizes = sorted(df["sm_count"].unique())
    thr = _one(fig, "throughput:compute")
    assert list(thr.get_xdata()) == sizes
    eff_c = _one(fig, "efficiency:compute").get_ydata()
    eff_m = _one(fig, "efficiency:memory").get_ydata()
    assert eff_c[0] == pytest.approx(1.0) and eff_m[0] == pytest.approx(1.0)
    # the toy compute workload scales linearly, the memory one saturates at 32 SMs
    assert np.all(np.abs(eff_c - 1) < 0.1)
    assert eff_m[-1] < 0.3


def test_scaling_one_workload_two_panels():
    fig = P.plot_scaling(S.scaling_df(workloads=("compute",)))
    assert len(fig.axes) == 2
    assert len(_by_gid(fig, "throughput:memory")) == 0


# ------------------------------------------------------------------------ occupancy


def _block_count(fig):
    return sum(len(c.get_paths()) for ax in fig.axes for c in ax.collections
               if isinstance(c, PolyCollection) and str(c.get_gid()).startswith("blocks:"))


def test_occupancy_draws_every_block_and_partition_boundary():
    df = S.occupancy_df()
    fig = P.plot_occupancy(df)
    strip, ax = fig.axes
    assert _block_count(fig) == len(df)
    assert len(_one(fig, "blocks:compute").get_paths()) == (df.workload == "compute").sum()
    assert len(_by_gid(fig, "boundary")) == 1  # p0 | remainder
    assert "no SM ran blocks of two partitions" in ax.get_title()
    assert "p0: 24, remainder: 108 SMs" in ax.get_title()
    assert [t.get_text() for t in strip.get_yticklabels()] == ["p0\n24 SMs", "remainder\n108 SMs"]
    assert ax.get_xlabel() == "time since the first block started (µs)"
    # blocks end at the latest end_ns, in µs
    assert ax.get_xlim()[1] == pytest.approx(df["end_ns"].max() / 1e3 * 1.01)


def test_occupancy_rows_group_partitions_or_keep_sm_order():
    df = S.occupancy_df()
    rows = P.occupancy_rows(df, "partition")
    p0 = sorted(df.loc[df.partition == "p0", "sm_id"].unique())
    assert list(rows["sm_id"][:24]) == p0
    assert set(rows["partition"][:24]) == {"p0"} and set(rows["partition"][24:]) == {"remainder"}
    by_id = P.occupancy_rows(df, "sm_id")
    assert list(by_id["sm_id"]) == list(range(132))
    with pytest.raises(ValueError, match="order must be 'partition' or 'sm_id'"):
        P.occupancy_rows(df, "time")
    fig = P.plot_occupancy(df, order="sm_id")
    assert fig.axes[0].get_ylabel() == "SM id (%smid)"
    assert len(_by_gid(fig, "boundary")) == 0


def test_occupancy_flags_an_sm_shared_by_two_partitions():
    df = S.occupancy_df()
    stray = df[df.partition == "remainder"].iloc[[0]].assign(  # a block of its own (a repeated one is refused)
        partition="p0", workload="compute", sm_id=int(df[df.partition == "p0"].sm_id.iloc[0]) + 1,
        block=int(df["block"].max()) + 1)
    shared = pd.concat([df, stray], ignore_index=True)
    shared.attrs = df.attrs
    fig = P.plot_occupancy(shared)
    assert "1 SMs ran blocks of more than one partition" in fig.axes[1].get_title()
    assert len(_by_gid(fig, "shared")) == 1


# ------------------------------------------------------------------------ isolation


def test_isolation_bars_and_ratios():
    df = S.isolation_df()
    fig = P.plot_isolation(df)
    crit_ax, bg_ax = fig.axes
    crit = df[df.role == "critical"]
    for s in ("alone", "streams", "partitioned"):
        bar = _one(fig, f"critical:{s}")
        # latencies under 1 ms are drawn in µs
        assert bar.get_height() == pytest.approx(
            crit[crit.scenario == s]["duration_ms"].median() * 1e3)
    assert "(µs)" in crit_ax.get_ylabel()
    ratio = (crit[crit.scenario == "streams"].duration_ms.median()
             / crit[crit.scenario == "alone"].duration_ms.median())
    texts = [t.get_text() for t in crit_ax.texts]
    assert any(f"{ratio:.2f}x alone" in t for t in texts)
    assert [t.get_text() for t in crit_ax.get_xticklabels()][2] == \
        "next to\nbackground\nown partition\n(16 SMs)"
    assert len(bg_ax.patches) == 2
    _one(fig, "background:streams")


def test_isolation_without_background_has_one_panel():
    df = S.isolation_df()
    fig = P.plot_isolation(df[df.role == "critical"])
    assert len(fig.axes) == 1
    with pytest.raises(ValueError, match="role 'critical'"):
        P.plot_isolation(df[df.role == "background"])


# --------------------------------------------------------------------- no pyplot


def test_figures_render_without_pyplot(tmp_path):
    code = (
        "import sys; sys.path.insert(0, 'tests')\n"
        "import _synthetic as S\n"
        "from gcexplore import plot as P\n"
        "fig = P.plot_occupancy(S.occupancy_df())\n"
        f"fig.savefig({str(tmp_path / 'o.png')!r})\n"
        "png = fig._repr_png_()\n"
        "assert png[:8] == b'\\x89PNG\\r\\n\\x1a\\n'\n"
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot was imported'\n"
        "assert not any(m.startswith('cuda') for m in sys.modules), 'cuda was imported'\n"
    )
    root = __import__("pathlib").Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "o.png").read_bytes()[:4] == b"\x89PNG"


def test_auto_metric_follows_arithmetic_intensity():
    import pandas as pd

    from gcexplore.analysis import rates as _metric_values

    triad = pd.DataFrame({"flops": [2.0], "bytes": [12.0], "duration_ms": [1.0],
                          "throughput_tflops": [2e-9], "bandwidth_gbs": [1.2e-5]})
    fma = triad.assign(flops=[1e12], throughput_tflops=[1.0])
    assert _metric_values(triad, "auto")[1] == "bandwidth_gbs"
    assert _metric_values(fma, "auto")[1] == "throughput_tflops"


# ------------------------------------------------------- what the issue saw, checked


def test_sweep_log_axis_bound_value_and_both_baselines_visible():
    df = S.sweep_df()
    fig = P.plot_sweep(df)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    bound = gcexplore.analysis.lower_bound(df)
    assert f"{bound['lower_bound_ms']:.3f} ms" in _one(fig, "lower_bound").get_label()
    seq, streams = _one(fig, "sequential"), _one(fig, "streams")
    # the one drawn on top is thinner and dashed, so the one beneath shows around it
    assert seq.get_linewidth() > streams.get_linewidth() and streams.get_zorder() > seq.get_zorder()
    assert "p10–p90" in _one(fig, "concurrent").get_label()
    _one(fig, "interference_free")


def test_isolation_annotations_stay_inside_their_axes_and_name_the_other_role():
    df = S.isolation_df()
    fig = P.plot_isolation(df)
    fig.canvas.draw()
    for ax in fig.axes:
        top = ax.get_window_extent().y1
        assert all(t.get_window_extent().y1 <= top + 1 for t in ax.texts), "annotation over the title"
    crit_ax, bg_ax = fig.axes
    assert "next to\nbackground" in crit_ax.get_xticklabels()[1].get_text()
    assert all("background" not in t.get_text() for t in bg_ax.get_xticklabels())
    assert "next to\ncritical launches" in bg_ax.get_xticklabels()[1].get_text()


@pytest.mark.parametrize("ratio, text", [(48.02, "48x"), (1.0134, "1.01x"), (2.345, "2.3x")])
def test_ratios_carry_the_digits_the_data_support(ratio, text):
    assert P.ratio_text(ratio) == text


def test_throughput_labels_one_format_per_panel_and_says_p10_p90():
    fig = P.plot_throughput(S.sweep_df(splits=[24]))
    for ax in fig.axes:
        labels = [t.get_text() for t in ax.texts if t.get_text() != "median; bars: p10–p90"
                  and not (t.get_gid() or "").startswith("withheld:")]
        decimals = {len(t.split(".")[1]) if "." in t else 0 for t in labels}
        assert len(decimals) == 1, labels
        assert any(t.get_text() == "median; bars: p10–p90" for t in ax.texts)


def test_scaling_panel_titles_name_their_unit():
    fig = P.plot_scaling(S.scaling_df())
    for ax in fig.axes[:-1]:
        assert ax.get_ylabel() in ax.get_title()


# ------------------------------------------------------------------- text from data


def _spoofed(df, names):
    df = df.copy()
    df["workload"] = df["workload"].map(lambda w: names.get(w, w))
    df.attrs["device_name"] = "GPU $\\alpha$ 80GB"
    return df


def _drawn_texts(fig):
    """Every text of the drawn figure as matplotlib shows it: (shown string, parsed as math)."""
    import io

    from matplotlib.text import Text

    fig.savefig(io.BytesIO(), format="png", dpi=50)  # mathtext errors raise here
    return [t._preprocess_math(t.get_text()) for t in fig.findobj(Text) if t.get_visible()]


@pytest.mark.parametrize("make, fn", [
    (S.sweep_df, P.plot_sweep), (S.sweep_df, P.plot_throughput), (S.scaling_df, P.plot_scaling),
    (S.occupancy_df, P.plot_occupancy), (S.isolation_df, P.plot_isolation),
])
def test_names_from_data_are_drawn_as_text_never_as_math(make, fn):
    names = {"compute": "$x^2$", "memory": "a$b", "critical": "$c$", "gemm": "g$"}
    fig = fn(_spoofed(make(), names))
    texts = _drawn_texts(fig)
    assert not [s for s, math in texts if math], "a text from data was parsed as mathtext"
    shown = " ".join(s for s, _ in texts)
    assert "GPU $\\alpha$ 80GB" in shown  # the device name, verbatim
    assert any(n in shown for n in names.values())


def test_trace_figures_draw_names_as_text():
    import _synthetic_trace as T

    trace, _ = T.trace_df()
    trace = _spoofed(trace, {"matmul": "$m$", "sigmoid": "s$"})
    for fn in (gcexplore.plot_timeline, gcexplore.plot_sm_usage):
        texts = _drawn_texts(fn(trace))
        assert not [s for s, math in texts if math]
        assert "$m$" in " ".join(s for s, _ in texts)


# ------------------------------------------------------------ chosen split, baselines


def test_sweep_marks_the_chosen_split_by_layout_or_size():
    df = S.sweep_df()
    table = gcexplore.layout_table(gcexplore.summarize(df))
    row = table.iloc[2]
    for chosen in (row["layout"], int(row["split_sm_count"])):
        line = _one(P.plot_sweep(df, chosen=chosen), "chosen")
        assert list(line.get_xdata()) == [row["split_sm_count"]] * 2
        assert row["layout"] in line.get_label() and f"{row['concurrent_ms']:.3g} ms" in line.get_label()
    assert _by_gid(P.plot_sweep(df), "chosen") == []
    with pytest.raises(ValueError, match="was not measured"):
        P.plot_sweep(df, chosen="7+125")


def test_sweep_explorer_marks_the_split_the_slider_stands_on():
    from gcexplore.explorers import sweep_explorer as X

    df = S.sweep_df()
    sx = gcexplore.widgets.SweepExplorer.from_results(df)
    drawn = []
    real = X.render_sweep
    X.render_sweep = lambda results, chosen=None, **kw: drawn.append(chosen) or real(results, chosen=chosen, **kw)
    try:
        options = list(sx.split_slider.options)
        sx.split_slider.value = options[0]
    finally:
        X.render_sweep = real
    assert drawn[-1] == sx.layout == df.loc[df["split_sm_count"] == options[0], "layout"].iloc[0]


def test_best_split_says_which_sequential_baseline_it_divides_by():
    from gcexplore.views import report

    df = gcexplore.load_recorded("torch_sweep")
    best = gcexplore.best_split(df)
    b = gcexplore.analysis.baseline_choice(df, best["layout"])
    assert b["speedup_next"] == pytest.approx(best["speedup_vs_sequential"])
    assert b["median_ms"] == pytest.approx(gcexplore.analysis.baseline_ms(df, "sequential"))
    label = _one(P.plot_sweep(df), "best").get_label()
    # the figure draws the median sequential line, so its star compares with that line
    assert f"{b['speedup_median']:.2f}x vs the sequential line" in label
    assert f"{b['speedup_next']:.2f}x vs the one measured next to it" in label
    first = report.verdict(df).splitlines()[0]
    assert f"{b['next_ms']:.3f} ms measured next to it" in first
    assert f"{b['speedup_median']:.2f}x vs the median of all sequential repetitions, {b['median_ms']:.3f} ms" in first
    rank = b["rank"]
    assert ("the highest" if rank == 1 else f"number {rank}") in first


# ---------------------------------------------------------------------- headlines


def _summary_rows(role_scen):
    return pd.DataFrame([{"role": r, "scenario": s, "mode": m, "workload": w, "dram_pct": v}
                         for r, s, m, w, v in role_scen])


@pytest.mark.parametrize("alone, together, verdict", [
    ((60.0, 90.0), 92.0, "no more than one alone"),
    ((30.0, 40.0), 68.0, "adds up"),
    ((60.0, 70.0), 85.0, "more than one alone, less than both"),
])
def test_dram_headline_says_what_the_sample_shows(alone, together, verdict):
    from gcexplore.analysis import dram_headline

    rows = [(None, None, "alone", "a", alone[0]), (None, None, "alone", "b", alone[1]),
            (None, None, "concurrent", "a+b", together)]
    h = dram_headline(_summary_rows(rows))
    assert h["verdict"] == verdict and h["top"] == "b" and h["added"] == pytest.approx(together - alone[1])
    assert dram_headline(_summary_rows(rows[:2])) is None


def test_isolation_headline_gives_the_slowdowns_it_draws():
    df = S.isolation_df()
    s = gcexplore.summarize(df).set_index(["role", "scenario"])
    sup = P.plot_isolation(df).get_suptitle()
    assert sup.startswith(P.figure_stamp(df.attrs))
    crit, bg = s.loc[("critical", "streams")], s.loc[("background", "partitioned")]
    assert f"critical latency: {P.ratio_text(crit['slowdown_vs_alone'])} alone next to the background" in sup
    part = s.loc[("critical", "partitioned")]
    assert f"{P.ratio_text(part['slowdown_vs_alone'])} alone in its own {int(part['sm_count'])}-SM partition" in sup
    if np.isfinite(bg["slowdown_vs_alone"]):
        assert f"the background: {P.ratio_text(bg['slowdown_vs_alone'])} its time alone, on the {int(bg['sm_count'])} SMs" in sup
    else:  # no background alone rows: no ratio to state
        assert "the background:" not in sup
    rec = gcexplore.load_recorded("isolation")
    bg = gcexplore.summarize(rec).set_index(["role", "scenario"]).loc[("background", "partitioned")]
    assert (f"the background: {P.ratio_text(bg['slowdown_vs_alone'])} its time alone, on the {int(bg['sm_count'])} SMs"
            in P.plot_isolation(rec).get_suptitle())


def test_isolation_tick_labels_do_not_touch():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = P.plot_isolation(gcexplore.load_recorded("isolation"))
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    for ax in fig.axes:
        boxes = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_text()]
        for a, b in zip(boxes, boxes[1:]):
            assert a.x1 + 4 < b.x0, f"tick labels touch: {a} {b}"


def test_scaling_headline_from_its_facts():
    from gcexplore.analysis import scaling_facts

    df = gcexplore.load_recorded("scaling")
    facts = scaling_facts(df).set_index("workload")
    sup = P.plot_scaling(df).get_suptitle()
    for w, r in facts.iterrows():
        assert f"{w}: {r['efficiency_at_largest']:.0%} parallel efficiency at {r['largest_sm']} SMs" in sup
    mem = facts.loc["memory"]
    assert mem["saturates_sm"] <= mem["largest_sm"] / 2  # the recorded triad saturates early
    assert f"already at {mem['saturates_sm']} SMs" in sup
    assert "already at" not in sup.split("\n")[1]  # compute scales to the end


def test_scaling_with_sm_counts_as_text_sorts_them_as_numbers():
    df = S.scaling_df()
    text = df.assign(sm_count=df["sm_count"].astype(str))
    text.attrs.update(df.attrs)
    fig = P.plot_scaling(text)
    for gid in ("throughput:compute", "efficiency:compute"):
        x = list(_one(fig, gid).get_xdata())
        assert x == sorted(set(df["sm_count"])), x


def test_traced_plain_streams_rates_are_marked_lower_bounds():
    import _synthetic_trace as T

    trace, df = T.trace_df()
    fig = P.plot_throughput(df, trace=trace)
    for ax in fig.axes:
        labels = [t.get_text() for t in ax.get_xticklabels()]
        for lab in labels:
            assert ("lower bound" in lab) == lab.startswith("streams"), lab
        marks = [t for t in ax.texts if (t.get_gid() or "").startswith("lower_bound:")]
        assert len(marks) == 1 and marks[0].get_text().startswith("≥ ")
    bars = [p for ax in fig.axes for p in ax.patches if (p.get_gid() or "").endswith(":streams")]
    assert bars and all(b.get_hatch() == "//" for b in bars)
    plain = P.plot_throughput(df)  # without the trace no streams rate is drawn at all
    assert not [t for ax in plain.axes for t in ax.texts if (t.get_gid() or "").startswith("lower_bound:")]


def test_a_withheld_rate_keeps_its_slot_inside_the_axes():
    fig = P.plot_throughput(S.sweep_df())
    for ax in fig.axes:
        withheld = [t for t in ax.texts if (t.get_gid() or "").startswith("withheld:")]
        assert withheld
        lo, hi = ax.get_xlim()
        for t in withheld:
            assert lo < t.get_position()[0] - 0.4 and t.get_position()[0] + 0.4 < hi
