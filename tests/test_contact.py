"""First contact, fourth pass (issue 29): what a newcomer trips on in the front ends and docs.

Comparison text and figure, the compare command, old import paths, ``python -m gcexplore``,
GPU-less commands that leave nothing behind, and the explorers' small faults."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import _synthetic as S
import pandas as pd
import pytest

import gcexplore
from gcexplore import gpu_available
from gcexplore.analysis.comparison import compare
from gcexplore.views.compare_text import describe

ROOT = Path(__file__).resolve().parents[1]
needs_no_gpu = pytest.mark.skipif(gpu_available(), reason="checks what happens without a GPU")


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gcexplore", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})


# ------------------------------------------------------------------ comparison text


@pytest.fixture(scope="module")
def cards():
    return compare("sweep", "sweep_second")  # recorded names, as the explorer takes them


def test_the_headline_counts_the_rows_the_figure_shows(cards):
    conc = cards.counts("concurrent")
    assert conc["compared"] == 16 and conc["FAST"] == 0  # the partitions: no difference
    head = describe(cards, "concurrent")[0]
    assert head.startswith(f"{cards.labels[1]} against {cards.labels[0]}, concurrent: {conc['SAME']} of 16 layouts")
    assert f"{conc['UNCLEAR']} UNCLEAR" in head and f"{cards.counts()['FAST']} FAST" not in head


def test_the_finding_per_mode_is_said(cards):
    lines = describe(cards)
    per = cards.by_group().set_index("group")
    seq = per.loc["sequential"]
    assert seq["FAST"] == seq["compared"]  # the second card is faster on the whole device
    said = next(s for s in lines if s.startswith("sequential:"))
    assert f"faster at all {int(seq['compared'])} layouts, by {1 - seq['median_ratio']:.1%}" in said
    conc = per.loc["concurrent"]  # no FAST or SLOW: what is said depends on how many were decided SAME
    want = ("concurrent: no difference beyond ±1.0%" if conc["SAME"] == conc["compared"] else
            f"concurrent: undecided at all {int(conc['compared'])} layouts" if conc["UNCLEAR"] == conc["compared"] else
            f"concurrent: no decided difference: {int(conc['SAME'])} of {int(conc['compared'])} layouts SAME")
    assert conc["FAST"] == conc["SLOW"] == 0 and any(s.startswith(want) for s in lines), lines


def test_sides_are_named_with_their_cards_and_recorded_names_work(cards):
    assert cards.labels == ("sweep (NVIDIA H100 80GB HBM3)", "sweep_second (NVIDIA H200)")
    same = compare("sweep_twice", by="run_id")
    assert "(" not in same.labels[0]  # one card: no card name added


def test_identity_values_are_formatted_and_every_difference_can_be_seen(cards):
    text = "\n".join(describe(cards))
    assert "3.4239977598190308" not in text and "launch_gap_us 3.424 -> 2.912" in text
    diff = cards.identity[~cards.identity["same"]]
    assert len(diff) > 8 and f"(+{len(diff) - 8} more: all in Comparison.identity, or gcexplore compare --all)" in text
    full = "\n".join(describe(cards, all_differences=True))
    assert all(f"{f} " in full for f in diff["field"]) and "more:" not in full


def test_a_split_by_run_id_names_the_run_once():
    c = compare("sweep_twice", by="run_id")
    fields = list(c.identity["field"])
    assert fields.count("run_id") == 1 and "run" not in fields


def test_intervals_and_spreads_are_labelled_apart(cards):
    best = next(s for s in describe(cards) if s.startswith("best split on"))
    assert "95% interval of the median" in best and "[" not in best
    fig = gcexplore.plot_compare(cards)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("p10-p90 of the repetitions" in t for t in labels)
    assert any("99.92% interval" in t.get_text() for t in fig.axes[1].get_legend().get_texts())


def test_side_a_is_not_hidden_under_b_and_small_differences_show(cards):
    fig = gcexplore.plot_compare(cards)
    ax, rax = fig.axes
    a, b = (next(line for line in ax.lines if line.get_gid() == g) for g in "ab")
    assert a.get_zorder() > b.get_zorder() and a.get_linestyle() != b.get_linestyle()
    assert b.get_markerfacecolor() == "none"  # A shows through B's hollow markers
    assert ax.get_yscale() == "log"
    assert rax.get_gid() == "ratio"
    low, high = rax.get_ylim()
    conc = cards.table[(cards.table["group"] == "concurrent") & (cards.table["present"] == "both")]
    assert low < conc["ratio"].min() and conc["ratio"].max() < high  # every point in view
    # scaled to the ratios and the band, not to intervals (a one-round recording's are floor-wide):
    # a 2% difference is a good part of the panel, not a pixel
    assert high - low < 0.1


# ------------------------------------------------------------------ compare's edges


def test_compare_refuses_a_split_by_what_was_measured():
    with pytest.raises(ValueError, match="by='layout' splits what was measured"):
        compare("sweep_twice", by="layout")


def test_compare_refuses_three_labels():
    with pytest.raises(ValueError, match="labels must be two names"):
        compare("sweep", "sweep_second", labels=("a", "b", "c"))


@pytest.mark.parametrize("col", ["rep", "makespan_ms"])
def test_compare_names_a_missing_column(col):
    t = gcexplore.load_recorded("sweep")
    with pytest.raises(ValueError, match=f"side A .* has no {col} column"):
        compare(t.drop(columns=[col]), t)


def test_sides_with_no_layout_in_common_do_not_claim_the_best_moved():
    t = gcexplore.load_recorded("sweep")
    a, b = t[t["layout"] == "8+124"].copy(), t[t["layout"] == "16+116"].copy()
    a.attrs = b.attrs = dict(t.attrs)
    c = compare(a, b)
    assert c.best["moved"] is None and c.counts()["compared"] == 0
    text = "\n".join(describe(c))
    assert "the best split moved:" not in text and "cannot be told" in text


# ------------------------------------------------------------------ the command line


def test_cli_compare_takes_recorded_names_labels_mode_and_names_its_flags(tmp_path):
    out = tmp_path / "deep" / "cmp.png"
    r = _cli("compare", "sweep", "sweep_second", "--plot", str(out), "--mode", "sequential", "--labels", "H100,H200")
    assert r.returncode == 0, r.stderr
    assert out.exists() and "sequential: H200 against H100" in r.stdout
    r = _cli("compare", "sweep_twice", "--by", "mode")
    assert r.returncode == 2
    assert "compare: compare:" not in r.stderr and "by=" not in r.stderr and "--by 'mode'" in r.stderr
    r = _cli("compare", "sweep_twice", "--by", "run_id", "--labels", "x,y")
    assert r.returncode == 2 and "--labels must name" in r.stderr and "labels=" not in r.stderr


@needs_no_gpu
@pytest.mark.parametrize("args", [["profile", "compute", "memory", "--split", "24"],
                                  ["sweep", "compute", "memory"], ["tune", "compute", "memory"],
                                  ["profile", "compute", "memory", "--split", "24", "--out", "a/b/r.parquet"]])
def test_gpu_less_measuring_commands_leave_no_folder(args, tmp_path):
    r = _cli(*args, cwd=tmp_path)
    assert r.returncode == 1 and "no NVIDIA driver found" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_profile_checks_the_csv_sidecar_name_before_measuring(tmp_path):
    (tmp_path / "r.json").write_text('{"mine": true}')
    r = _cli("profile", "compute", "memory", "--split", "24", "--out", "r.csv", cwd=tmp_path)
    assert r.returncode == 2 and "is not its metadata sidecar" in r.stderr
    assert "no NVIDIA driver" not in r.stderr  # refused before the GPU was asked


@needs_no_gpu
def test_gpu_less_campaign_opens_like_every_gpu_less_error(tmp_path):
    pytest.importorskip("distributed")
    spec = tmp_path / "s.toml"
    spec.write_text('workloads = ["compute", "memory"]\nsplits = [[24]]\n')
    r = _cli("campaign", str(spec), "--out", str(tmp_path / "c"), cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.startswith("gcexplore campaign: UnsupportedError: no NVIDIA driver found"), r.stderr
    assert "client=" not in r.stderr and "pass --scheduler 'tcp://host:8786' to" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]  # no campaign folder, no lock file
    r = _cli("campaign", str(spec), cwd=tmp_path)  # the default folder is not made either
    assert r.returncode == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]


def test_python_dash_m_gcexplore_is_the_command():
    r = _cli("--help")
    assert r.returncode == 0 and "usage: gcexplore" in r.stdout


# ------------------------------------------------------------------ old import paths


def test_old_import_paths_import_with_a_deprecation_warning():
    code = """
import warnings
warnings.simplefilter("error", DeprecationWarning)
for stmt in ("from gcexplore.runner import Checkpoint", "import gcexplore.report", "import gcexplore.tracing"):
    try:
        exec(stmt)
    except DeprecationWarning as w:
        print("warned:", w)
    else:
        raise SystemExit(f"no warning: {stmt}")
warnings.simplefilter("ignore", DeprecationWarning)
from gcexplore.runner import Checkpoint
import gcexplore.report, gcexplore.tracing
from gcexplore.experiments.runner import Checkpoint as New
assert Checkpoint is New and callable(gcexplore.report.layout_report) and callable(gcexplore.tracing.kernel_trace)
import gcexplore.views.report as r
assert r.__spec__.name == "gcexplore.views.report"
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("warned: gcexplore.") == 3 and "moved to gcexplore.experiments.runner" in r.stdout


def test_the_stats_function_of_earlier_versions_is_still_callable():
    from gcexplore.analysis import stats

    with pytest.warns(DeprecationWarning, match=r"call gcexplore.analysis.stats.stats\(values\)"):
        out = stats([1.0, 2.0, 3.0])
    assert out == stats.stats([1.0, 2.0, 3.0]) and out["median_ms"] == 2.0


def test_no_pandas_4_deprecation_in_the_trace_groups():
    from gcexplore import schema

    df = pd.DataFrame({"layout": ["8+124"] * 2, "mode": ["alone"] * 2, "rep": [0, 0], "workload": ["a", "b"]})
    df.attrs["rep_origins"] = [{"layout": "8+124", "mode": "alone", "rep": 0, "workloads": ["a", "b"]}]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        schema._derive_groups(df)
    assert list(df["group"]) == [0, 0]


# ------------------------------------------------------------------ explorers


def test_compare_explorer_headline_counts_the_mode_shown_and_its_label_fits():
    from gcexplore.widgets import CompareExplorer

    ex = CompareExplorer("sweep", "sweep_second")
    n = ex.comparison.counts("concurrent")
    assert f"concurrent: {n['SAME']} of 16 layouts SAME" in ex.words.value
    assert f"{ex.comparison.counts()['SAME']} of 64" not in ex.words.value
    assert ex.band.style.description_width == "initial"  # "same within ±%" is not cut to "same wit…"


def test_offline_sweep_explorer_shows_the_recordings_repetitions():
    from gcexplore.widgets import SweepExplorer

    df = gcexplore.load_recorded("sweep")
    sx = SweepExplorer.from_results(df)
    assert sx.repeats.disabled and sx.repeats.value == df["rep"].nunique() == 20


def test_explorer_tables_are_as_wide_as_their_area():
    from gcexplore.explorers._base import display_data

    html = display_data(S.sweep_df().head(3))["data"]["text/html"]
    assert "table.gcexplore-table{width:100%;table-layout:fixed" in html and "white-space:normal" in html


# ------------------------------------------------------------------ campaigns and the test command


def test_a_campaign_script_without_the_main_guard_gets_one_sentence(tmp_path):
    pytest.importorskip("distributed")
    script = tmp_path / "noguard.py"
    script.write_text("import gcexplore\n"
                      f"gcexplore.campaign([['compute', 'memory']], [[24]], folder={str(tmp_path / 'c')!r}, "
                      "progress=False)\n")
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "0"}
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env,
                       timeout=300)
    assert r.returncode == 1
    assert 'call campaign() under `if __name__ == "__main__":`' in r.stderr
    assert r.stderr.count("Traceback") <= 1 and "Nanny failed" not in r.stderr, r.stderr


def test_the_test_command_says_when_the_browser_test_did_not_run(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if k != "GCEXPLORE_REQUIRE_BROWSER"}
    env.update(PYTHONPATH=str(ROOT), GCEXPLORE_CHROMIUM=str(tmp_path / "no-chromium"))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "tests/test_browser.py::test_quickstart_explorer_in_chromium"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert "the real-browser test did not run" in r.stdout and ".ci/browser-setup installs" in r.stdout, r.stdout


def test_the_recorded_campaign_is_a_folder_that_load_campaign_and_status_read(tmp_path):
    df = gcexplore.load_recorded("campaign")
    folder = Path(df.attrs["folder"])
    assert folder == ROOT / "gcexplore" / "data" / "campaign"
    assert "campaign-2gpu" not in str(df.attrs)  # the recording machine's temporary folder is not carried
    assert "folder" not in gcexplore.load(ROOT / "gcexplore" / "data" / "campaign.parquet").attrs  # nor stored
    assert len(gcexplore.load_campaign(folder)) == len(df) and df.attrs["done"] == df["task_key"].nunique() == 8
    status = gcexplore.campaign_status(folder)
    assert (status["status"] == "done").all() and len(status) == 8
    r = _cli("campaign", "status", str(folder), cwd=tmp_path)
    assert r.returncode == 0 and "8 of 8 tasks done" in r.stdout, r.stderr
