"""Shared by the notebook tests: where the notebooks are and which recorded data they need.

Each notebook names the recorded results it falls back to in its metadata,
``metadata["gcexplore"]["recorded"]`` (written by ``notebooks/make_notebooks.py``), so
the tests can skip with a precise reason while those files do not exist yet.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = REPO_ROOT / "notebooks"


def notebooks() -> list[Path]:
    return sorted(NOTEBOOK_DIR.glob("*.ipynb"))


def read_notebook(path: Path):
    import nbformat

    return nbformat.read(path, as_version=4)


def recorded_names(nb) -> list[str]:
    return list(nb.metadata.get("gcexplore", {}).get("recorded", []))


def optional_recorded(nb) -> list[str]:
    """Recorded results the notebook shows when present and says are missing otherwise."""
    return list(nb.metadata.get("gcexplore", {}).get("optional", []))


def missing_recorded(nb) -> list[str]:
    """The recorded results (``gcexplore/data/<name>.parquet``) the notebook needs but lacks."""
    from gcexplore.results import recorded_names as present

    have = set(present())
    return [n for n in recorded_names(nb) if n not in have]
