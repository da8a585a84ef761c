"""The mechanisms explorer: controls set from code, and what was redrawn checked against
``mechanisms_table`` / ``mechanisms_sentences`` of the chosen run's rows (the view computes nothing)."""

from __future__ import annotations

import html

import pandas as pd
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("matplotlib")

import gcexplore  # noqa: E402
from gcexplore.explorers import mechanisms_explorer as ME  # noqa: E402
from gcexplore.mechanisms.analysis import mechanism_label, mechanisms_sentences, mechanisms_table  # noqa: E402
from test_mechanisms import synthetic  # noqa: E402


def two_runs() -> pd.DataFrame:
    """Two runs of one card: the synthetic pair at three splits, and a second run (another id) without
    the 64-SM split."""
    a = synthetic()
    b = synthetic(seed=9)
    b = b[b["split_sm_count"] != 64].copy()
    b["run_id"] = "synth02"
    out = pd.concat([a, b], ignore_index=True)
    out.attrs.update(a.attrs)
    return out


def _words(e) -> list[str]:
    """The sentences the view shows, as text."""
    body = e.words.value.removeprefix("<ul>").removesuffix("</ul>")
    return [html.unescape(s.removesuffix("</li>")) for s in body.split("<li>")[1:]]


def _run(df, run_id):
    return df[df["run_id"] == run_id]


def test_it_is_public_and_opens_on_the_first_run_at_every_split():
    df = two_runs()
    e = gcexplore.MechanismsExplorer(df)
    assert gcexplore.MechanismsExplorer is ME.MechanismsExplorer
    assert [label.split(" · ")[1].split()[0] for label, _ in e.run_picker.options] == ["synth01", "synth02"]
    expected = mechanisms_table(_run(df, "synth01"))
    pd.testing.assert_frame_equal(e.table, expected)
    assert _words(e) == mechanisms_sentences(expected) and len(_words(e)) == 3
    assert e.redraws["mechanisms"] == 1 and e.redraws["summary"] == 1 and e.last_error is None


def test_choosing_a_split_redraws_that_split_from_the_table():
    df = two_runs()
    e = gcexplore.MechanismsExplorer(df)
    e.split_picker.value = 64
    assert e.split == 64 and e.redraws["mechanisms"] == 2 and e.redraws["summary"] == 2
    at = _run(df, "synth01")
    table = mechanisms_table(at[at["split_sm_count"] == 64])
    pd.testing.assert_frame_equal(e.table, table)
    fast = table.loc[table["makespan_ms"].idxmin()]
    (sentence,) = _words(e)
    assert sentence.startswith(f"With {fast['critical']} given 64 SMs ({fast['layout']})")
    assert f"under {mechanism_label(fast['mechanism'])} ({fast['makespan_ms']:.3g} ms)" in sentence
    fig = e.figures["mechanisms"]
    makespan = fig.axes[0]
    assert [t.get_text() for t in makespan.get_xticklabels()] == ["64 SMs\n(64+68)"]
    assert sorted(round(p.get_height(), 9) for p in makespan.patches) == sorted(
        round(v, 9) for v in table["makespan_ms"])
    assert e.table_output.outputs[0]["data"]["text/plain"] == table.to_string(index=False)


def test_choosing_a_run_keeps_the_split_where_measured_else_every_split():
    df = two_runs()
    e = gcexplore.MechanismsExplorer(df, split=24)
    e.run_picker.value = 1
    assert e.split == 24 and e.redraws["mechanisms"] == 2  # options and value changed: one redraw
    b = _run(df, "synth02")
    pd.testing.assert_frame_equal(e.table, mechanisms_table(b[b["split_sm_count"] == 24]))
    e.run_picker.value = 0
    e.split_picker.value = 64
    e.run_picker.value = 1  # the second run has no 64-SM split
    assert e.split is None and [v for _, v in e.split_picker.options] == [ME.EVERY_SPLIT, 24, 104]
    assert _words(e) == mechanisms_sentences(mechanisms_table(b))


def test_the_shipped_run_shows_each_pair_on_its_own():
    try:
        df = gcexplore.load_mechanisms()
    except FileNotFoundError as exc:
        pytest.skip(f"the recorded mechanisms run is not shipped ({exc})")
    e = gcexplore.MechanismsExplorer.from_results("mechanisms", run=1, split=104)
    run = e.rows["run_id"].iloc[0]
    assert e.rows["run_id"].nunique() == 1
    at = df[(df["run_id"] == run) & (df["split_sm_count"] == 104)]
    assert _words(e) == mechanisms_sentences(mechanisms_table(at))
    assert "NVIDIA H200" in e.status.value


def test_bad_input_is_refused_with_what_is_valid():
    df = two_runs()
    with pytest.raises(ValueError, match="run 5 is not one of the 2 runs"):
        gcexplore.MechanismsExplorer(df, run=5)
    with pytest.raises(ValueError, match=r"split 64 was not measured in this run; its splits are \[24, 104\]"):
        ME.render_mechanisms(_run(df, "synth02"), 64)
    with pytest.raises(ValueError, match="takes one run"):
        ME.render_mechanisms_table(df)
    refusal = r"needs a mechanisms result \(gcexplore.compare_mechanisms\(\)\), got a sweep"
    with pytest.raises(ValueError, match=refusal):
        gcexplore.MechanismsExplorer(gcexplore.load_recorded("sweep"))


def test_a_drawing_error_is_shown_in_the_widget_not_raised(monkeypatch):
    e = gcexplore.MechanismsExplorer(two_runs())

    def broken(rows, split=None):
        raise RuntimeError("no figure today")

    monkeypatch.setattr(ME, "render_mechanisms", broken)
    e.split_picker.value = 104
    assert isinstance(e.last_error, RuntimeError) and "no figure today" in e.error_box.value
    assert e.redraws["mechanisms"] == 1 and e.redraws["summary"] == 2  # the table still follows
