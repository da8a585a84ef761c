"""Widget wiring without a GPU or a browser: set control values from code, assert on
what was redrawn. Live paths run against stand-ins for the profiler calls (the GPU
seams); offline paths over synthetic results (tests/_synthetic.py)."""

from __future__ import annotations

import base64
import html
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import _synthetic as S
import gcexplore
from gcexplore.explorers import _base as WB
from gcexplore.explorers import explorer as GW
from gcexplore import experiments as X

ROOT = Path(__file__).resolve().parents[1]


def _pngs(out):
    return [base64.b64decode(o["data"]["image/png"]) for o in out.outputs
            if "image/png" in o.get("data", {})]


def _texts(out):
    return [o["data"].get("text/plain", "") for o in out.outputs]


def _figure_title(out):
    """The suptitle of the figure shown in ``out`` (kept in its text/plain)."""
    (text,) = _texts(out)
    return text


# ------------------------------------------------------------------------ import


def test_importing_widgets_touches_no_gpu():
    """In a fresh interpreter: importing gcexplore.widgets and building an offline
    explorer calls no device function and imports no CUDA binding."""
    code = (
        "import sys; sys.path.insert(0, 'tests')\n"
        "import gcexplore.device.driver as api\n"
        "called = []\n"
        "for n in ('device_info', 'device_count', 'gpu_available', 'split', 'whole_device',"
        " '_init', '_cuda_device'):\n"
        "    def trap(*a, _n=n, **k): called.append(_n); raise AssertionError(_n)\n"
        "    setattr(api, n, trap)\n"
        "import gcexplore.explorers.explorer as W\n"
        "import _synthetic as S\n"
        "assert not any(m == 'cuda' or m.startswith('cuda.') for m in sys.modules), "
        "sorted(m for m in sys.modules if m.startswith('cuda'))\n"
        "W.render_throughput(S.sweep_df(splits=[24]))\n"
        "assert called == [], called\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


# ----------------------------------------------------------------------- offline


def test_offline_explorer_starts_at_best_split_and_draws():
    df = S.sweep_df(recorded=True)
    ex = GW.Explorer.from_results(df, occupancy=S.occupancy_df(recorded=True))
    best = (df[df["mode"] == "concurrent"].drop_duplicates(["layout", "rep"])
            .groupby("split_sm_count")["makespan_ms"].median().idxmin())
    assert len(ex.sliders) == 1
    assert list(ex.sliders[0].options) == sorted(df.split_sm_count.unique())
    assert ex.sliders[0].value == best
    assert ex.sliders[0].description == "p0 SMs"
    assert [p.value for p in ex.workload_pickers] == ["compute", "memory"]
    assert all(p.disabled for p in ex.workload_pickers)
    assert ex.repeats.value == 5 and ex.repeats.disabled
    assert ex.run_button.layout.display == "none"  # offline, the slider redraws
    assert f"{132 - best} SMs" in ex.remainder_label.value
    assert ex.redraws == {"throughput": 1, "occupancy": 1, "summary": 1, "sweep": 0}
    assert len(_pngs(ex.plot_output)) == 1
    assert _pngs(ex.plot_output)[0][:4] == b"\x89PNG"
    assert "recorded 2000-01-01" in _figure_title(ex.plot_output)
    assert "recorded" in ex.status.value and ex.error_box.layout.display == "none"
    html_table = ex.table_output.outputs[0]["data"]["text/html"]
    assert "concurrent" in html_table and "median_ms" in html_table


def test_offline_slider_move_redraws_in_place():
    df = S.sweep_df()
    ex = GW.Explorer.from_results(df, occupancy=S.occupancy_df())
    before = _pngs(ex.plot_output)[0]
    ex.sliders[0].value = 24
    # one output each, replaced (not appended), showing the new split
    assert len(ex.plot_output.outputs) == 1 and len(ex.table_output.outputs) == 1
    assert _pngs(ex.plot_output)[0] != before
    assert ex.redraws["throughput"] == 2
    assert ex.layout == "24+108"
    assert "24 SMs" in ex.remainder_label.value or "108 SMs" in ex.remainder_label.value
    # the synthetic occupancy was recorded at 24+108: now it is drawn
    assert len(_pngs(ex.occupancy_output)) == 1
    ex.sliders[0].value = 40
    (note,) = _texts(ex.occupancy_output)
    assert note == "SM occupancy was recorded at 24+108, not at 40+92; choose 24+108 to see it"


def _three_way(splits):
    """Synthetic rows of three partitions (p0, p1, remainder) for each (a, b) in splits."""
    parts = []
    for a, b in splits:
        base = S.sweep_df(splits=[a]).assign(layout=f"{a}+{b}+{132 - a - b}")
        spin = base[base.workload == "memory"].assign(
            workload="spin", partition=lambda d: d.partition.replace({"remainder": "p1"}))
        parts += [base, spin]
    df = pd.concat(parts, ignore_index=True)
    df.attrs = parts[0].attrs
    return df


def test_offline_unmeasured_split_is_an_error_in_the_widget():
    ex = GW.Explorer.from_results(_three_way([(8, 16), (16, 16), (16, 24)]))
    assert [s.description for s in ex.sliders] == ["p0 SMs", "p1 SMs"]
    assert [list(s.options) for s in ex.sliders] == [[8, 16], [16, 24]]
    assert [p.value for p in ex.workload_pickers] == ["compute", "spin", "memory"]
    ex.sliders[0].value, ex.sliders[1].value = 16, 24
    assert ex.error_box.layout.display == "none" and ex.layout == "16+24+92"
    assert "remainder: <b>92 SMs</b> → memory" in ex.remainder_label.value
    draws = ex.redraws["throughput"]
    ex.sliders[0].value = 8  # 8+24 was never measured
    assert ex.error_box.layout.display is None
    assert ("showing this split failed</b> — ValueError: split 8+24+100 was not measured; "
            "measured splits: 8+16+108, 16+16+100, 16+24+92") in ex.error_box.value
    assert ex.redraws["throughput"] == draws  # the old picture stays
    assert isinstance(ex.last_error, ValueError)
    ex.sliders[1].value = 16  # back to a measured split: the error goes away
    assert ex.error_box.layout.display == "none" and ex.redraws["throughput"] == draws + 1


def test_offline_drawing_error_is_shown_not_raised(monkeypatch):
    ex = GW.Explorer.from_results(S.sweep_df())

    def broken(df, layout=None, *, trace=None):
        raise RuntimeError("boom <b>")

    monkeypatch.setattr(GW, "render_throughput", broken)
    ex.sliders[0].value = 32  # no exception escapes
    assert "drawing the throughput failed" in ex.error_box.value
    assert "RuntimeError: boom &lt;b&gt;" in ex.error_box.value  # escaped, one line
    assert "Traceback" not in ex.error_box.value


def test_from_results_rejects_wrong_frames():
    with pytest.raises(ValueError, match=r"Explorer.from_results needs an overlap result "
                                         r"\(gcexplore.profile_overlap\(\)\), got a scaling result"):
        GW.Explorer.from_results(S.scaling_df())
    with pytest.raises(ValueError, match=r"occupancy=...\) needs an occupancy result .*got an isolation result"):
        GW.Explorer.from_results(S.sweep_df(), occupancy=S.isolation_df())
    with pytest.raises(TypeError, match="expected a results DataFrame or a recorded name"):
        GW.Explorer.from_results(42)


def test_widgets_carry_css_classes_and_stable_descriptions():
    ex = GW.Explorer.from_results(S.sweep_df())
    assert WB.CSS["root"] in ex.widget._dom_classes
    assert WB.CSS["split"] in ex.sliders[0]._dom_classes
    assert WB.CSS["run"] in ex.run_button._dom_classes
    assert WB.CSS["throughput"] in ex.plot_output._dom_classes
    assert WB.CSS["error"] in ex.error_box._dom_classes
    assert ex.run_button.description == "Run"
    assert ex.repeats.description == "repeats"
    # the split slider comes first, so a browser finds it as the first slider
    first = ex.widget.children[0].children[0]
    assert first is ex.sliders[0]
    bundle = ex._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle


# -------------------------------------------------------------------------- live


@pytest.fixture
def fake_gpu(monkeypatch, h100_like):
    """The GPU seams replaced: device_info gives the H100's facts, profile_overlap and
    occupancy return synthetic rows for the split asked and record their calls."""
    import gcexplore.device.driver as api

    calls = []
    monkeypatch.setattr(api, "device_info", lambda device=0: h100_like)

    def profile_overlap(workloads, split, *, repeats, device):
        calls.append(("profile_overlap", list(workloads), list(split), repeats))
        names = list(workloads)
        df = S.sweep_df(splits=[split[0]], repeats=repeats)
        df["workload"] = df["workload"].map({"compute": names[0], "memory": names[-1]})
        return df

    def occupancy(workloads, split, *, device):
        calls.append(("occupancy", list(workloads), list(split)))
        if any(callable(w) for w in workloads.values()):
            raise ValueError("workload 'mine' cannot be instrumented")
        p0 = list(range(split[0]))
        return S.occupancy_df(p0_sms=p0)

    monkeypatch.setattr(X, "profile_overlap", profile_overlap)
    monkeypatch.setattr(X, "occupancy", occupancy)
    return calls


def test_live_sliders_stop_only_on_valid_sizes(fake_gpu, h100_like):
    ex = GW.Explorer()
    assert ex.run_button.layout.display is None
    assert list(ex.sliders[0].options) == list(range(8, 125, 8))  # leaves >= 8 SMs
    assert ex.sliders[0].value == 24
    assert [p.value for p in ex.workload_pickers] == ["compute", "memory"]
    assert set(WB.with_builtins({})) <= set(ex.workload_pickers[0].options)
    assert ex.redraws["throughput"] == 0 and fake_gpu == []  # nothing measured yet
    ex.sliders[0].value = 64
    assert fake_gpu == [] and "68 SMs" in ex.remainder_label.value


def test_live_run_measures_and_draws(fake_gpu):
    ex = GW.Explorer(repeats=3)
    ex.sliders[0].value = 32
    ex.workload_pickers[1].value = "copy"
    ex.run_button.click()
    assert fake_gpu[0] == ("profile_overlap", ["compute", "copy"], [32], 3)
    assert fake_gpu[1] == ("occupancy", ["compute", "copy"], [32])
    assert ex.redraws == {"throughput": 1, "occupancy": 1, "summary": 1, "sweep": 0}
    assert ex.figures["throughput"].axes[1].get_title() == "copy — layout 32+100"
    assert "measured live" in _figure_title(ex.plot_output)
    assert list(ex.figures["summary"]["workload"].unique()) == ["compute", "copy"]
    assert len(_pngs(ex.plot_output)) == 1 and len(_pngs(ex.occupancy_output)) == 1
    assert ex.results["workload"].unique().tolist() == ["compute", "copy"]
    assert ex.progress.layout.visibility == "hidden"
    assert ex.progress.value == ex.progress.max == 2


def test_live_several_partitions_show_remainder_and_block_overflow(fake_gpu):
    ex = GW.Explorer(["compute", "memory", "spin"])
    assert len(ex.sliders) == 2 and ex.workload_pickers[-1].description == "remainder"
    assert list(ex.sliders[0].options)[-1] == 112  # 132 - 2 x 8 = 116, rounded to 8s
    ex.sliders[0].value = 64
    ex.sliders[1].value = 64
    assert "remainder: 4 SMs" in ex.remainder_label.value
    assert ex.run_button.disabled
    ex.sliders[1].value = 40
    assert "remainder: <b>28 SMs</b> → spin" in ex.remainder_label.value
    assert not ex.run_button.disabled


def test_live_measurement_error_is_shown_in_the_widget(fake_gpu, monkeypatch):
    def fail(*a, **k):
        raise gcexplore.GreenContextError("cuGreenCtxCreate failed: CUDA_ERROR_INVALID_VALUE")

    monkeypatch.setattr(X, "profile_overlap", fail)
    ex = GW.Explorer()
    ex.run_button.click()
    assert "measuring 24+108 failed" in ex.error_box.value
    assert "GreenContextError: cuGreenCtxCreate failed" in ex.error_box.value
    assert ex.redraws["throughput"] == 0
    assert ex.progress.layout.visibility == "hidden"


def test_live_user_callable_without_occupancy_says_why(fake_gpu):
    def mine(*, stream):
        pass

    ex = GW.Explorer({"mine": mine, "memory": "memory"})
    assert ex.workload_pickers[0].value == "mine"
    ex.run()
    (note,) = _texts(ex.occupancy_output)
    assert note == ("no SM occupancy: ValueError: workload 'mine' cannot be instrumented")
    assert ex.error_box.layout.display == "none"  # the measurement itself worked
    assert len(_pngs(ex.plot_output)) == 1


def test_workload_catalog_checks_its_input():
    with pytest.raises(ValueError, match="give the workload .* a name"):
        WB.catalog([lambda stream: None, "memory"])
    with pytest.raises(TypeError, match="must be a mapping"):
        WB.catalog("compute")
    with pytest.raises(TypeError, match="must be callable as fn"):
        WB.catalog({"a": 3})
    # the CLI's scheme (gcexplore/cli/commands.py): a repeated name gets _2, _3, ...
    assert WB.unique_names(["compute", "compute", "memory", "compute"], {"compute": "c", "memory": "m"}) == {
        "compute": "c", "compute_2": "c", "memory": "m", "compute_3": "c"}


# ------------------------------------------------------------------------- sweep


def test_sweep_explorer_offline_marks_best_and_follows_the_split():
    df = S.sweep_df(recorded=True)
    sx = GW.SweepExplorer.from_results(df, occupancy=S.occupancy_df())
    best = (df[df["mode"] == "concurrent"].drop_duplicates(["layout", "rep"])
            .groupby("split_sm_count")["makespan_ms"].median().idxmin())
    assert sx.split_slider.value == best
    assert list(sx.split_slider.options) == sorted(df.split_sm_count.unique())
    assert sx.run_button.disabled and sx.redraws["sweep"] == 1
    assert len(_pngs(sx.sweep_output)) == 1
    assert sx.layout == f"{best}+{132 - best}"
    sx.split_slider.value = 24
    assert sx.layout == "24+108"
    assert sx.redraws["throughput"] == 2 and len(_pngs(sx.occupancy_output)) == 1
    assert WB.CSS["sweep_root"] in sx.widget._dom_classes


def test_sweep_explorer_live_keeps_partial_rows_on_error(fake_gpu, monkeypatch):
    partial = S.sweep_df(splits=[8, 16, 24, 32])

    seen = {}

    def sweep(workloads, *, repeats, device):
        seen.update(workloads=list(workloads), repeats=repeats)
        raise gcexplore.MeasurementFailed("RuntimeError while measuring (layout 40+92); 4 of "
                                          "15 layout(s) finished", partial)

    monkeypatch.setattr(X, "sweep", sweep)
    sx = GW.SweepExplorer(repeats=2)
    sx.run_button.click()
    assert seen == {"workloads": ["compute", "memory"], "repeats": 2}
    assert "the sweep failed" in sx.error_box.value and "40+92" in sx.error_box.value
    assert list(sx.split_slider.options) == [8, 16, 24, 32]
    assert sx.redraws["sweep"] == 1
    assert sx.progress.layout.visibility == "hidden"
    assert isinstance(sx.last_error, gcexplore.MeasurementFailed)
    # choosing a split measures its occupancy once, then reuses it
    def occ_splits():
        return [c[2] for c in fake_gpu if c[0] == "occupancy"]

    best = occ_splits()
    assert len(best) == 1 and sx.split_slider.value == best[0][0]
    sx.split_slider.value = 8
    sx.split_slider.value = 24
    sx.split_slider.value = 8
    assert occ_splits() == best + [[8], [24]]
    assert sx.redraws["occupancy"] == 4 and len(_pngs(sx.occupancy_output)) == 1


# ------------------------------------------------------- one summary for plot and table


@pytest.mark.parametrize("cls", ["Explorer", "SweepExplorer"])
def test_table_shows_the_runs_bound_and_efficiency_like_best_split(cls):
    """At 104+28 on the recorded sweep the explorer's table shows the run's lower bound and
    the layout's efficiency: best_split's (and the sweep plot's), not a bound of 104+28 alone."""
    df = gcexplore.load_recorded("sweep")
    best = gcexplore.best_split(df)
    assert best["layout"] == "104+28"
    ex = getattr(GW, cls).from_results(df)
    assert ex.layout == "104+28" and ex.last_error is None
    table = ex.figures["summary"]
    conc = table[table["mode"] == "concurrent"]
    assert len(conc) == 2
    assert (conc["lower_bound_ms"] == best["lower_bound_ms"]).all()
    assert (conc["efficiency"] == best["efficiency"]).all()
    # the bound of 104+28's rows alone is another number: the table must not be that one
    alone_bound = gcexplore.analysis.lower_bound(df[df["layout"] == "104+28"])["lower_bound_ms"]
    assert alone_bound != pytest.approx(best["lower_bound_ms"], rel=1e-3)


@pytest.mark.parametrize("cls", ["SweepExplorer", "Explorer"])
def test_sweep_plot_and_table_come_from_one_summary(monkeypatch, cls):
    """The sweep figure, the best split and every split's table draw one summary of the whole run.

    Counted where every summary is made (``summarize_overlap``, whichever front door called
    it: summarize, best_split, baseline_choice), not at one of the doors."""
    from gcexplore.analysis import overlap as O

    calls = []
    real = O.summarize_overlap

    def counting(df):
        calls.append(len(df))
        return real(df)

    monkeypatch.setattr(O, "summarize_overlap", counting)  # summarize resolves the kind's summary by its name
    df = S.sweep_df(recorded=True)
    ex = getattr(GW, cls).from_results(df)
    if cls == "SweepExplorer":
        ex.split_slider.value = 24
        ex.split_slider.value = 40
    else:
        ex.sliders[0].value = 24
    assert calls == [len(df)] and ex.redraws["summary"] == (3 if cls == "SweepExplorer" else 2)


def test_live_one_workload_on_two_partitions_is_named_as_the_cli_names_it(fake_gpu):
    ex = GW.Explorer()
    ex.workload_pickers[1].value = "compute"
    ex.run_button.click()
    assert fake_gpu[0][:2] == ("profile_overlap", ["compute", "compute_2"])
    assert ex.error_box.layout.display == "none"


def test_offline_sweep_explorer_says_why_measuring_is_disabled():
    sx = GW.SweepExplorer.from_results(S.sweep_df())
    assert sx.run_button.disabled and sx.tune_button.disabled and sx.repeats.disabled
    assert sx.run_button.button_style == ""  # not drawn as the primary action
    assert "needs an NVIDIA GPU" in sx.run_button.tooltip and "needs an NVIDIA GPU" in sx.status.value


def test_summary_table_leads_with_the_bound_and_efficiency():
    from gcexplore.explorers.render import render_summary

    table = render_summary(S.sweep_df())
    assert {"lower_bound_ms", "efficiency"} <= set(table.columns[:8])


def test_dollar_signs_from_data_reach_the_page_as_text(monkeypatch):
    from gcexplore.explorers import _base as B

    df = S.sweep_df()
    df["workload"] = df["workload"].map({"compute": "a$x$", "memory": "memory"}).fillna(df["workload"])
    assert "$" not in B.display_data(df[["workload"]].drop_duplicates())["data"]["text/html"]
    ex = GW.Explorer.from_results(S.sweep_df())
    ex._show_error(ValueError("bad name a$x^2$"), "drawing")
    assert "$" not in ex.error_box.value and "&#36;x^2&#36;" in ex.error_box.value


# ------------------------------------------------------------------ partition fit


def test_fit_notes_of_a_traced_run_show_under_the_figure():
    ov = gcexplore.load_recorded("trace_overlap")
    tr = gcexplore.load_recorded("trace").copy()
    nv = tr["name"].str.startswith("nvjet")  # a grid of 26 CTAs: 2 waves on 24 SMs
    tr.loc[nv, ["grid_x", "grid_y", "cluster_x", "max_active_clusters"]] = [26, 1, 1, 0]
    tr = tr.copy()
    ex = GW.Explorer.from_results(ov, trace=tr)
    notes = gcexplore.summarize(ov, trace=tr).attrs["fit_notes"]
    shown = html.unescape(ex.fit_label.value)
    assert ex.fit_label.layout.display == "" and WB.CSS["fit"] in ex.fit_label._dom_classes
    assert [n for n in notes if "nvjet" in n] and all(n in shown for n in notes)
    assert "runs 26 CTAs in 2 waves on p0's 24 SMs at 24+108" in shown
    kids = list(ex.widget.children)
    assert kids.index(ex.fit_label) == kids.index(ex.plot_output) + 1  # the line under the figure
    ex.sliders[0].value = ex.sliders[0].options[0]  # another split: the run's notes stay
    assert html.unescape(ex.fit_label.value) == shown
    plain = GW.Explorer.from_results(ov)  # no trace: nothing said, the line hidden
    assert plain.fit_label.value == "" and plain.fit_label.layout.display == "none"


def test_sweep_explorer_shows_the_fit_notes_of_its_trace():
    import _synthetic_trace as T

    df = S.sweep_df(splits=[24])  # the trace's split, so the best layout is the traced one
    tr, _ = T.trace_df()
    tr = tr.assign(workload=tr["workload"].map({"matmul": "compute", "sigmoid": "memory"}), run_id=df["run_id"].iloc[0])
    sx = GW.SweepExplorer.from_results(df, trace=tr)
    notes = gcexplore.summarize(df, trace=tr).attrs["fit_notes"]
    assert notes and all(n in html.unescape(sx.fit_label.value) for n in notes)
    kids = list(sx.widget.children)
    assert kids.index(sx.fit_label) == kids.index(sx.plot_output) + 1
    assert sx.fit_label.layout.display == ""
