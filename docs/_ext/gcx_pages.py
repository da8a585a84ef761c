"""Pages generated at build time, so they follow the package and the notebooks without a hand list.

- ``api/``: one page per public namespace. The namespaces are found by importing ``gcexplore`` and
  every subpackage of it that declares ``__all__`` (the core's layers and the families, whatever the
  package holds on the day of the build). Each public object is documented once, on the page of the
  namespace that defines it; ``api/index`` lists every name of ``gcexplore.__all__`` with a link.
- ``gallery/``: a copy of ``notebooks/`` (the notebooks and the helper modules they import), which
  myst-nb executes over the recorded results.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import shutil
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
ROOT = DOCS.parent


def namespaces() -> dict[str, object]:
    """``gcexplore`` and each of its subpackages that declares a non-empty ``__all__``."""
    import gcexplore

    found = {"gcexplore": gcexplore}
    for info in sorted(pkgutil.iter_modules(gcexplore.__path__), key=lambda i: i.name):
        if info.ispkg and not info.name.startswith("_"):
            module = importlib.import_module(f"gcexplore.{info.name}")
            if getattr(module, "__all__", None):
                found[module.__name__] = module
    return found


def _first_line(obj) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.strip().split("\n\n", 1)[0].replace("\n", " ").replace("|", "\\|")


def _directive(obj) -> str:
    if inspect.isclass(obj):
        return "autoexception" if issubclass(obj, BaseException) else "autoclass"
    if inspect.isfunction(obj) or inspect.isbuiltin(obj) or callable(obj):
        return "autofunction"
    return "autodata"


def owners(spaces: dict[str, object]) -> dict[int, str]:
    """id(object) -> the one namespace that documents it: the deepest subpackage its defining module
    lies in, else the first subpackage whose ``__all__`` lists it, else the core."""
    listed: dict[int, list[str]] = {}
    for ns, module in spaces.items():
        for name in module.__all__:
            listed.setdefault(id(getattr(module, name)), []).append(ns)
    owner = {}
    for ns, module in spaces.items():
        for name in module.__all__:
            obj = getattr(module, name)
            where = getattr(obj, "__module__", None) or ""
            subs = [n for n in listed[id(obj)] if n != "gcexplore"]
            inside = [n for n in subs if where == n or where.startswith(n + ".")]
            owner[id(obj)] = max(inside, key=len) if inside else (subs[0] if subs else "gcexplore")
    return owner


def _title(ns: str) -> str:
    return f"``{ns}``"


def write_api(out: Path) -> list[str]:
    spaces = namespaces()
    owner = owners(spaces)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    pages = []
    for ns, module in spaces.items():
        slug = ns.replace(".", "_")
        pages.append(slug)
        head = (inspect.getdoc(module) or "").strip()
        lines = [_title(ns), "=" * (len(_title(ns)) + 4), "", f".. module:: {ns}", "    :no-index:", "", head, ""]
        own, elsewhere = [], []
        for name in module.__all__:
            obj = getattr(module, name)
            (own if owner[id(obj)] == ns else elsewhere).append((name, obj))
        lines += [".. list-table::", "   :header-rows: 1", "   :widths: 30 70", "", "   * - name", "     - what it is"]
        for name in module.__all__:
            obj = getattr(module, name)
            target = f"{owner[id(obj)]}.{name}"
            lines += [f"   * - :py:obj:`{name} <{target}>`", f"     - {_first_line(obj) or '(a value)'}"]
        lines.append("")
        for name, obj in own:
            lines += [f".. {_directive(obj)}:: {ns}.{name}", ""]
        (out / f"{slug}.rst").write_text("\n".join(lines) + "\n")
    index = ["API reference", "=============", "",
             "One page per public namespace, generated from the docstrings when the site is built: the core",
             "``gcexplore`` and each subpackage that declares ``__all__`` (its layers and its families).", "",
             ".. toctree::", "   :maxdepth: 1", ""] + [f"   {p}" for p in pages]
    (out / "index.rst").write_text("\n".join(index) + "\n")
    return pages


def copy_gallery(out: Path) -> list[str]:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    names = []
    for src in sorted((ROOT / "notebooks").iterdir()):
        if src.suffix == ".ipynb" or (src.suffix == ".py" and src.name != "make_notebooks.py"):
            shutil.copy2(src, out / src.name)
            if src.suffix == ".ipynb":
                names.append(src.stem)
    return names


def generate(app) -> None:
    write_api(DOCS / "api")
    copy_gallery(DOCS / "gallery" / "notebooks")


def setup(app):
    app.connect("builder-inited", generate)
    return {"parallel_read_safe": True, "version": "1"}
