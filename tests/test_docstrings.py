"""Every public name is documented, and its docstring's Parameters section names only parameters
its signature has (a renamed or removed parameter leaves a stale line the API reference would show).

The public names are ``gcexplore.__all__`` and the ``__all__`` of every subpackage (the layers and
the families), found by importing them, so a package added or moved is checked without a list here.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest

import gcexplore

SECTION = re.compile(r"^(\w[\w ]*)\n-{3,}\s*$", re.M)
ENTRY = re.compile(r"^([*\w][\w, *]*?)\s*(?::.*)?$")


def namespaces() -> dict[str, object]:
    """``gcexplore`` and each subpackage that declares ``__all__``, by dotted name."""
    found = {"gcexplore": gcexplore}
    for info in pkgutil.iter_modules(gcexplore.__path__):
        if info.ispkg and not info.name.startswith("_"):
            module = importlib.import_module(f"gcexplore.{info.name}")
            if getattr(module, "__all__", None):
                found[module.__name__] = module
    return found


def public_names() -> list[tuple[str, str]]:
    return [(ns, name) for ns, module in namespaces().items() for name in module.__all__]


def documented_parameters(doc: str) -> list[str]:
    """The names a numpydoc ``Parameters`` (or ``Other Parameters``) section lists."""
    names = []
    heads = list(SECTION.finditer(doc))
    for i, head in enumerate(heads):
        if head.group(1).strip() not in ("Parameters", "Other Parameters"):
            continue
        body = doc[head.end():heads[i + 1].start() if i + 1 < len(heads) else len(doc)]
        for line in body.splitlines():
            if not line.strip() or line[0].isspace():
                continue  # a description line, indented under its entry
            m = ENTRY.match(line.rstrip())
            if m:
                names += [n.strip().lstrip("*") for n in m.group(1).split(",") if n.strip()]
    return names


def signature_parameters(obj) -> set[str] | None:
    target = obj
    if inspect.isclass(obj):
        target = obj.__init__ if "__init__" in vars(obj) or not hasattr(obj, "__dataclass_fields__") else obj
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    return {p.name for p in sig.parameters.values()} - {"self"}


@pytest.mark.parametrize("ns,name", public_names(), ids=lambda v: v)
def test_every_public_name_has_a_docstring(ns, name):
    obj = getattr(namespaces()[ns], name)
    if not callable(obj) and not inspect.ismodule(obj) and not inspect.isclass(obj):
        return  # a constant (a version string, a table): documented where its namespace is
    assert (inspect.getdoc(obj) or "").strip(), f"{ns}.{name} has no docstring"


@pytest.mark.parametrize("ns,name", public_names(), ids=lambda v: v)
def test_documented_parameters_are_in_the_signature(ns, name):
    obj = getattr(namespaces()[ns], name)
    if not callable(obj):
        return
    params = signature_parameters(obj)
    if params is None:
        pytest.skip(f"{ns}.{name} has no signature to compare with")
    stale = [p for p in documented_parameters(inspect.getdoc(obj) or "") if p not in params]
    assert stale == [], f"{ns}.{name}'s docstring names {stale}; its signature has {sorted(params)}"


def test_the_section_reader_reads_numpydoc():
    doc = "Run it.\n\nParameters\n----------\na, b : int\n    Sizes.\n*args\n    More.\n\nReturns\n-------\nx : int\n"
    assert documented_parameters(doc) == ["a", "b", "args"]
