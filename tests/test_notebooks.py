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

EXPECTED = ["01_quickstart.ipynb", "02_sweeping_sm_splits.ipynb", "03_sm_isolation.ipynb", "04_campaigns.ipynb"]
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


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.stem)
def test_optional_recordings_present(path):
    """The measurements a notebook shows only when recorded (bench/record.py on the GPU)."""
    missing = [n for n in optional_recorded(read_notebook(path)) if n not in _present()]
    if missing:
        pytest.skip(f"{path.name} shows these measurements only once recorded on a GPU "
                    f"(python3 bench/record.py gcexplore/data --only {','.join(missing)}): {', '.join(missing)}")


def _present():
    from gcexplore.results import recorded_names as present

    return set(present())
