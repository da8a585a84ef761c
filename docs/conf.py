"""Sphinx configuration of the gcexplore documentation site (built by ``python -m sphinx -W docs ...``).

The API pages and the gallery's copy of the notebooks are generated at build time by
``_ext/gcx_pages.py``; the notebooks and the course pages are executed by myst-nb over the recorded
results (``GCEXPLORE_QUICK=1``; without a GPU every notebook falls back to ``gcexplore/data``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(ROOT), str(DOCS / "_ext")]
# The kernels myst-nb starts inherit these: the source tree, small sizes, no GUI backend.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
os.environ.setdefault("GCEXPLORE_QUICK", "1")
os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
# This interpreter's own kernel: no user-level kernel spec or IPython start-up file can stand in.
os.environ["JUPYTER_DATA_DIR"] = str(DOCS / "_build" / "jupyter-data")
os.environ["IPYTHONDIR"] = str(DOCS / "_build" / "ipython")

import gcexplore  # noqa: E402

project = "gcexplore"
release = version = gcexplore.__version__
author = "the gcexplore authors"
copyright = "the gcexplore authors, Apache-2.0"

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "gcx_pages"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "_ext", "**.ipynb_checkpoints", "plots"]
root_doc = "index"

# Docstrings are numpydoc; the signature keeps its annotations, the parameter list its prose.
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
autodoc_typehints = "signature"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": False}
python_use_unqualified_type_names = True
suppress_warnings = ["myst.header"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
nb_execution_mode = "force"        # the notebooks are stored without outputs: run each every build
nb_execution_raise_on_error = True  # a cell that raises fails the build
nb_execution_timeout = 300
nb_execution_show_tb = True
nb_merge_streams = True
nb_kernel_rgx_aliases = {".*": "python3"}

html_theme = "furo"
html_title = f"gcexplore {release}"
html_static_path: list[str] = []
html_extra_path: list[str] = []
