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
    assert fn(df).get_suptitle() == P.figure_stamp(df.attrs)


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
    stray = df[df.partition == "remainder"].iloc[[0]].assign(
        partition="p0", workload="compute", sm_id=int(df[df.partition == "p0"].sm_id.iloc[0]) + 1)
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
        "next to background\nown partition\n(16 SMs)"
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
    assert "next to background" in crit_ax.get_xticklabels()[1].get_text()
    assert all("next to background" not in t.get_text() for t in bg_ax.get_xticklabels())
    assert "next to critical launches" in bg_ax.get_xticklabels()[1].get_text()


@pytest.mark.parametrize("ratio, text", [(48.02, "48x"), (1.0134, "1.01x"), (2.345, "2.3x")])
def test_ratios_carry_the_digits_the_data_support(ratio, text):
    assert P._ratio_text(ratio) == text


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
