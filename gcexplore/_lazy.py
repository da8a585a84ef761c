"""Lazy faces: a package names its public parts and imports a part only when first used.

Each subpackage's ``__init__`` calls :func:`face` with ``{module: names}``; ``import gcexplore``
then reads those tables (cheap) and never loads matplotlib, ipywidgets, pyarrow, CUPTI or Dask
until a name that needs them is used.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping, Sequence
from typing import Any


def face(package: str, public: Mapping[str, Sequence[str]], extra: Mapping[str, Sequence[str]] = {},
         moved: Mapping[str, str] = {}):
    """Return ``(__all__, __getattr__, __dir__, where)`` for ``package``.

    ``public`` maps a module of the package to the names it contributes to ``__all__`` (and so to
    ``gcexplore.<name>``); ``extra`` to names reachable as package attributes only
    (``gcexplore.workloads.compute``). ``where`` maps every such name to its module. ``moved`` maps a
    name the package offered in an earlier version to the module (absolute) it lives in now: it still
    resolves, with a DeprecationWarning naming that module (the name is given as a string, so the
    package imports nothing of it until it is used).
    """
    where: dict[str, str] = {}
    for table in (public, extra):
        for module, names in table.items():
            for name in names:
                if name in where:
                    raise RuntimeError(f"{package}: {name!r} is named by {where[name]} and {module}")
                where[name] = module
    all_ = sorted(n for names in public.values() for n in names)

    def __getattr__(name: str) -> Any:  # a lazy name is whatever its module defines
        module = where.get(name)
        if module is None and name in moved:
            warnings.warn(f"{package}.{name} moved to {moved[name]}.{name}; the old name goes in the next release",
                          DeprecationWarning, stacklevel=2)
            return getattr(importlib.import_module(moved[name]), name)
        if module is None:
            try:  # a submodule of the package (gcexplore.views.overlap)
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as e:
                if e.name != f"{package}.{name}":
                    raise
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    def __dir__():
        return sorted(set(where) | set(all_))

    return all_, __getattr__, __dir__, where
