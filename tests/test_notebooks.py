"""Every notebook in notebooks/ runs top to bottom, so none of them rots.

nbclient executes each one in a ``python3`` kernel of this interpreter with
``GCEXPLORE_QUICK=1`` (small sizes). On a GPU the notebooks run live; without one
they fall back to the recorded results in ``gcexplore/data`` and say so. A notebook
is skipped, with the names, only while the recorded results it needs are missing
(they are recorded on the GPU by the project, see ``gcexplore.load_recorded``).
"""

from __future__ import annotations

import os
import re
import sys

import pytest

from _nbsupport import NOTEBOOK_DIR, missing_recorded, notebooks, optional_recorded, read_notebook, recorded_names

EXPECTED = ["01_quickstart.ipynb", "02_sweeping_sm_splits.ipynb", "03_sm_isolation.ipynb", "04_campaigns.ipynb",
            "05_serving_splits.ipynb"]
RECORDED_LINE = re.compile(r"recorded result '(\w+)': (.+)")


def _live() -> bool:
    import gcexplore

    return gcexplore.gpu_available() and os.environ.get("GCEXPLORE_RECORDED") != "1"


def _stdout(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.get("outputs", []) if o.get("output_type") == "stream")


def _images(nb) -> int:
    return sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code"
               for o in c.get("outputs", []))


def test_all_notebooks_are_there():
    assert set(EXPECTED) <= {p.name for p in notebooks()}


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.stem)
def test_committed_without_outputs(path):
    nb = read_notebook(path)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{path.name} cell {i} has stale outputs; regenerate with "
                "python notebooks/make_notebooks.py")
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert recorded_names(nb), f"{path.name} names no recorded results in its metadata"


@pytest.fixture
def kernel_env(monkeypatch, tmp_path):
    """A private Jupyter data dir and IPython dir, and the quick sizes."""
    pytest.importorskip("nbclient", reason="nbclient is not installed (pip install .[dev])")
    pytest.importorskip("ipykernel", reason="ipykernel is not installed (pip install .[dev])")
    monkeypatch.setenv("GCEXPLORE_QUICK", "1")
    # No user-level kernel spec can shadow the one of this environment.
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter-data"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec("python3")
    except NoSuchKernel:
        pytest.fail("no 'python3' kernel spec: ipykernel is installed but did not register one")
    # jupyter_client replaces a bare "python"/"python3" with sys.executable, so the kernel
    # runs this interpreter (where gcexplore is installed).
    exe = spec.argv[0]
    assert exe in {"python", "python3", f"python{sys.version_info[0]}.{sys.version_info[1]}",
                   sys.executable}, f"the python3 kernel would run {exe}, not {sys.executable}"


@pytest.mark.slow  # each executes a whole notebook in a kernel (notebook 04's NCCL cells alone about 80 s)
@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.stem)
def test_notebook_runs(path, kernel_env):
    from nbclient import NotebookClient

    nb = read_notebook(path)
    live = _live()
    if not live:
        missing = missing_recorded(nb)
        if missing:
            pytest.skip(f"no GPU and the recorded results {path.name} falls back to are not "
                        f"in gcexplore/data yet: {', '.join(missing)}")
    client = NotebookClient(nb, kernel_name="python3", timeout=900 if live else 180,
                            resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
    client.execute()  # raises CellExecutionError, with the traceback, if a cell fails

    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code_cells), "not every code cell ran"
    out = _stdout(nb)
    assert _images(nb) >= 1, f"{path.name} drew no figure"
    if live:
        assert "LIVE on " in out
    else:
        assert "No live GPU here" in out
        # Every recorded result shown is announced with its card and date, and the
        # notebook's metadata names exactly those it loads (the optional ones when present).
        from gcexplore.results import recorded_names as present

        announced = dict(RECORDED_LINE.findall(out))
        optional = set(optional_recorded(nb))
        assert set(announced) == set(recorded_names(nb)) | (optional & set(present()))
        for name in optional - set(present()):
            assert f"recorded result '{name}' is not in this installation yet" in out
        for name, stamp in announced.items():
            assert "recorded" in stamp and re.search(r"\d{4}-\d{2}-\d{2}", stamp), (name, stamp)
        for check in SENTENCES.get(path.name, ()):
            check(out)


# ------------------------------------------------- sentences checked against their data
# Over the recorded results (no GPU) each notebook prints sentences about them; these
# recompute the numbers from the same recordings and find them in what was printed.


def _recorded(name):
    import gcexplore

    return gcexplore.load_recorded(name)


def _line(out: str, start: str) -> str:
    lines = [ln for ln in out.splitlines() if ln.startswith(start)]
    assert lines, f"no printed line starts with {start!r}"
    return lines[0]


def _bimodal_waits_are_both_named(out):
    """02 §4: every cluster of the plain-streams waits, and which one the timeline shows."""
    import gcexplore

    waits = gcexplore.analysis.trace_modes(_recorded("trace"), _recorded("trace_overlap"),
                                           also=("event_ms", "busy_span_ms"))
    streams = waits[waits["mode"] == "streams"]
    assert (streams["clusters"] > 1).any(), "the recorded plain-streams waits are bimodal"
    for workload, g in streams.groupby("workload"):
        line = _line(out, f"plain streams, {workload}:")
        assert ("bimodal" in line) == (len(g) > 1)
        for r in g.itertuples():
            assert (f"in {r.count} of {r.reps_total} repetitions it waited {r.median:.3f} ms before its first kernel "
                    f"ran (event span {r.event_ms_median:.3f} ms") in line
    for r in gcexplore.analysis.rep_mode(streams, 0).itertuples():
        if r.clusters > 1:
            assert (f"the timeline below shows repetition 0: there {r.workload} is in the mode that waited "
                    f"{r.median:.3f} ms ({r.count} of {r.reps_total} repetitions)") in out


def _torch_baseline_is_named(out):
    """02 §2: which sequential run the PyTorch pair's speedup divides by, and the other."""
    import gcexplore

    df = _recorded("torch_sweep")
    b = gcexplore.analysis.baseline_choice(df, gcexplore.best_split(df)["layout"])
    line = _line(out, "the sequential baseline itself ranges")
    assert f"{b['low_ms']:.3f}-{b['high_ms']:.3f} ms" in line
    assert f"at {b['layout']} that is {b['next_ms']:.3f} ms" in line and f"giving {b['speedup_next']:.2f}x" in line
    assert f"({b['median_ms']:.3f} ms, the line in the figure) it is {b['speedup_median']:.2f}x" in line


def _alone_makespan_is_explained(out, layouts):
    import gcexplore

    for layout, df in layouts:
        s = gcexplore.summarize(df[df["layout"] == layout])
        alone = s[s["mode"] == "alone"]
        line = _line(out, f"the alone makespan {alone['makespan_median_ms'].iloc[0]:.3f} ms")
        for r in alone.itertuples():
            assert f"{r.workload} on {r.partition} ({r.sm_count} SMs, median {r.median_ms:.3f} ms)" in line
        seq = s[s["mode"] == "sequential"]
        assert f"on all {int(seq['sm_count'].iloc[0])} SMs: {seq['makespan_median_ms'].iloc[0]:.3f} ms" in line


def _alone_01(out):
    import gcexplore

    sweep = _recorded("sweep")
    layout = "24+108" if (sweep["split_sm_count"] == 24).any() else gcexplore.best_split(sweep)["layout"]
    _alone_makespan_is_explained(out, [(layout, sweep)])


def _alone_02(out):
    sweep = _recorded("sweep")
    conc = sweep[(sweep["mode"] == "concurrent") & (sweep["workload"] == "memory")]
    side = conc.drop_duplicates("layout").set_index("layout")["sm_count"]
    _alone_makespan_is_explained(out, [((side - 24).abs().sort_values(kind="stable").index[0], sweep)])


def _busy_is_a_share_of_the_run(out):
    """03 §1: busy_fraction is a share of the whole run; the share of the own span beside it."""
    import gcexplore

    occ = _recorded("occupancy")
    busy = gcexplore.sm_busy(occ)
    for r in gcexplore.analysis.busy_shares(occ).itertuples():
        mine = busy[(busy["partition"] == r.partition) & (busy["workload"] == r.workload)]
        assert mine["busy_fraction"].mean() == pytest.approx(r.of_run_mean)  # the same number as sm_busy's
        line = _line(out, f"{r.workload} on {r.partition} ({r.sms} SMs): busy {r.of_run_mean:.0%} of the whole")
        assert f"{r.run_span_ms:.2f} ms run" in line and f"{r.of_own_mean:.0%} of its own {r.own_span_ms:.2f} ms" in line


def _l2_limits_are_said(out):
    """03 §5: the sets limited by launching are named with their time per launch."""
    import gcexplore

    from gcexplore.results import recorded_names as present

    if "l2_sharing" not in present():
        return
    l2 = _recorded("l2_sharing")
    ls = gcexplore.summarize(l2)
    ls["working_set_mib"] = ls["run_id"].map({k: float(v) for k, v in l2.attrs["working_set_mib"].items()})
    lim = gcexplore.analysis.launch_limits(ls, passes=int(l2.attrs["passes_per_call"]),
                                           launch_gap_us=float(l2.attrs["launch_gap_us"]))
    bound = lim[lim["launch_bound"]]
    for w, r in bound.iterrows():
        assert f"at {w:.1f} MiB a launch takes {r.us_per_launch:.2f} µs ({r.gaps:.2f}x the" in out
    for w in lim.index[~lim["launch_bound"]]:
        assert f"at {w:.1f} MiB a launch takes" not in out
    # the L2 sentence compares only sets that are not launch-bound
    l2_line = _line(out, "* The L2 cache stays shared")
    assert not any(f"at {w:.1f} MiB each" in l2_line for w in bound.index)


def _dram_sentence_from_its_medians(out):
    """03 §4: together set beside the larger alone median, never "do not add up"."""
    import gcexplore

    from gcexplore.results import recorded_names as present

    if not {"pm", "pm_trace"} <= set(present()):
        return
    pm_sum = gcexplore.dram_summary(_recorded("pm"), _recorded("pm_trace"))
    med = pm_sum.groupby(["mode", "workload"])[["dram_pct", "sm_active_pct"]].median()
    h = gcexplore.analysis.dram_headline(med.reset_index())
    line = _line(out, "sampled every")
    assert f"(medians over {pm_sum['rep'].nunique()} repetitions)" in line
    assert f"together {h['together']:.0f}%" in line
    if h["verdict"] == "no more than one alone":
        assert f"no more than {h['top']} alone" in line
    assert "add up" not in line


def _compare_headline_counts_what_is_shown(out):
    """02 §6: the headline counts the concurrent rows the table and figure show; each mode's finding."""
    import gcexplore

    from gcexplore.results import recorded_names as present

    if "sweep_second" not in present():
        return
    c = gcexplore.compare(_recorded("sweep"), _recorded("sweep_second"))
    n = c.counts("concurrent")
    line = _line(out, f"{c.labels[1]} against {c.labels[0]}, concurrent:")
    assert f"{n['SAME']} of {n['compared']} layouts SAME" in line and f"{n['UNCLEAR']} UNCLEAR" in line
    for r in c.by_group().itertuples():
        said = _line(out, f"{r.group}: ")
        if r.FAST == r.compared:
            assert f"faster at all {r.compared} layouts, by {1 - r.median_ratio:.1%}" in said


def _campaign_edges_and_dask_are_said(out):
    """04: the tasks whose best split sits at the edge of their split set; whether Dask is here."""
    import importlib.util

    import gcexplore

    best = gcexplore.campaigns.task_best_splits(_recorded("campaign"))
    edge = best[best["at_edge"]]
    assert len(edge), "the recorded campaign has best splits at the edge of their sets"
    line = _line(out, f"{len(edge)} of {len(best)} tasks have their best split at the edge")
    assert all(f"{r.pair} {r.best_split} in {r.split_set}" in line for r in edge.itertuples())
    if importlib.util.find_spec("distributed") is None:
        assert "campaigns run on Dask distributed, which this environment lacks" in out
    else:
        assert "Dask distributed is installed" in out


SENTENCES = {
    "01_quickstart.ipynb": (_alone_01,),
    "04_campaigns.ipynb": (_campaign_edges_and_dask_are_said,),
    "02_sweeping_sm_splits.ipynb": (_bimodal_waits_are_both_named, _torch_baseline_is_named, _alone_02,
                                    _compare_headline_counts_what_is_shown),
    "03_sm_isolation.ipynb": (_busy_is_a_share_of_the_run, _l2_limits_are_said, _dram_sentence_from_its_medians),
}


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.stem)
def test_optional_recordings_present(path):
    """The measurements a notebook shows only when recorded (bench/record.py on the GPU)."""
    from gcexplore.results import load_recorded

    names = optional_recorded(read_notebook(path))
    missing = [n for n in names if n not in _present()]
    for name in set(names) - set(missing):  # what is there is a whole recording the notebook can show
        df = load_recorded(name)
        assert len(df) > 0 and df.attrs.get("kind"), f"{path.name}: the recorded {name!r} is empty or has no kind"
    if missing:
        pytest.skip(f"{path.name} shows these measurements only once recorded on a GPU "
                    f"(python3 bench/record.py gcexplore/data --only {','.join(missing)}): {', '.join(missing)}")


def _present():
    from gcexplore.results import recorded_names as present

    return set(present())
