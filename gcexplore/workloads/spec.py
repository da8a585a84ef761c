"""Workloads as the experiments are given them: a mapping ``{name: workload}`` or a sequence of
workloads, built-in names or callables. Names are checked (:func:`workload_names`) before
anything is compiled or allocated; :func:`as_workloads` then builds them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from .builtins import BUILTINS, builtin
from .workload import Workload

__all__ = ["as_workload", "as_workloads", "unique_names", "workload_names"]


def as_workload(obj, name: str | None = None, *, device=0) -> Workload:
    """Coerce ``obj`` to a :class:`Workload`.

    A Workload passes through (renamed if ``name`` differs); a str names a built-in;
    any other callable is wrapped as ``fn(stream=...)`` with no declared work.
    """
    if isinstance(obj, Workload):
        return obj if name is None or name == obj.name else dataclasses.replace(obj, name=name)
    if isinstance(obj, str):
        wl = builtin(obj, device=device)
        return wl if name is None else dataclasses.replace(wl, name=name)
    if callable(obj):
        return Workload(name or getattr(obj, "__name__", "workload"), obj)
    raise TypeError(
        f"a workload must be a gcexplore Workload, a built-in name ({', '.join(BUILTINS)}) "
        f"or a callable fn(*, stream), got {type(obj).__name__}"
    )


def _specs(workloads) -> list[tuple[str | None, Any]]:
    if isinstance(workloads, Mapping):
        return [(str(k), w) for k, w in workloads.items()]
    if isinstance(workloads, (Workload, str)) or callable(workloads):
        return [(None, workloads)]
    try:
        return [(None, w) for w in workloads]
    except TypeError:
        raise TypeError("workloads must be a mapping {name: workload} or a sequence of workloads, "
                        f"got {type(workloads).__name__}") from None


def _spec_name(name, obj) -> str:
    if name is not None:
        return name
    if isinstance(obj, (Workload, str)):
        return obj.name if isinstance(obj, Workload) else obj
    return getattr(obj, "__name__", "workload")


def workload_names(workloads) -> list[str]:
    """The names the workloads will have, without building any (ValueError: empty or repeated).

    Used to check a request before anything is compiled or allocated.
    """
    specs = _specs(workloads)
    if not specs:
        raise ValueError("no workloads given: pass a mapping name -> workload or a sequence of them")
    for _, obj in specs:
        if not (isinstance(obj, (Workload, str)) or callable(obj)):
            raise TypeError(f"a workload must be a gcexplore Workload, a built-in name ({', '.join(BUILTINS)}) "
                            f"or a callable fn(*, stream), got {type(obj).__name__}")
        if isinstance(obj, str) and obj not in BUILTINS:
            raise ValueError(f"unknown built-in workload {obj!r}; built-ins are {', '.join(BUILTINS)}")
    names = [_spec_name(n, w) for n, w in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"workload names must be unique, got {names} ({', '.join(dupes)} repeated); "
                         "pass a mapping {name: workload} to name them")
    return names


def as_workloads(workloads, *, device=0) -> tuple[list[Workload], list[Workload]]:
    """Workloads as a list of :class:`Workload` s, and those of them built here from names.

    The caller closes the built ones (they hold device memory). Nothing is built when
    the names are empty or repeated.

    Raises
    ------
    ValueError
        Empty input or duplicate names.
    """
    workload_names(workloads)
    made: list[Workload] = []
    items: list[Workload] = []
    try:
        for name, obj in _specs(workloads):
            w = as_workload(obj, name, device=device)
            if isinstance(obj, str):
                made.append(w)
            items.append(w)
    except BaseException:
        for w in made:
            w.close()
        raise
    return items, made


def unique_names(names) -> list[str]:
    """Names in order, a repeated one suffixed ``_2``, ``_3`` ... (``compute, compute`` ->
    ``compute, compute_2``): the one scheme the command line and the explorers share, so every
    row of a result stays distinguishable."""
    out: list[str] = []
    for n in names:
        key, i = n, 2
        while key in out:
            key, i = f"{n}_{i}", i + 1
        out.append(key)
    return out
