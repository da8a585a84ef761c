"""Workloads as the experiments are given them: a mapping ``{name: workload}`` or a sequence of
workloads, built-in recipes or callables. Names are checked (:func:`workload_names`) before
anything is compiled or allocated; :func:`as_workloads` then builds them.

A **recipe** is the one text form of a built-in workload, the same everywhere a workload is
accepted (library calls, the command line, campaigns, the PM child process): ``"name"`` or
``"name:key=value,..."`` (``"memory:n=1048576"``, ``"spin:us=100"``). :func:`parse_recipe` checks it
(the name, each option against the built-in's signature, positive numbers) before anything is
built; :func:`is_recipe` tells it from a factory ``"module:function"``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from . import builtins as _core
from .builtins import BUILTINS, builtin
from .workload import Workload

__all__ = ["Recipe", "as_workload", "as_workloads", "is_recipe", "parse_builtin", "parse_recipe", "recipes_of",
           "unique_names", "workload_names"]


@dataclasses.dataclass(frozen=True)
class Recipe:
    """A checked built-in recipe: the built-in's ``name``, its ``options`` and the ``text`` it came from."""

    name: str
    options: tuple[tuple[str, Any], ...]
    text: str

    def build(self, *, device=0) -> Workload:
        """The workload (compiles and allocates on ``device``)."""
        return builtin(self.name, device=device, **dict(self.options))


def _value(text: str):
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            continue
    return text


def parse_recipe(text: str) -> Recipe:
    """``"name"`` or ``"name:key=value,..."`` -> :class:`Recipe`, checked without a GPU.

    Values are ints, floats, or else strings; each option must be one the built-in takes, of its
    type, and positive where it is a number.

    Raises
    ------
    ValueError
        An unknown built-in, a malformed option, an option the built-in does not take, or a bad value;
        the message names what is valid.
    """
    import inspect

    if not isinstance(text, str):
        raise TypeError(f"a workload recipe is a str such as 'memory:n=1048576', got {type(text).__name__}")
    name, _, params = text.strip().partition(":")
    if name not in BUILTINS:
        raise ValueError(f"unknown built-in workload {name!r}; built-ins are {', '.join(BUILTINS)} "
                         "(a recipe is name or name:key=value,..., e.g. 'memory:n=1048576')")
    sig = {k: p for k, p in inspect.signature(getattr(_core, name)).parameters.items() if k != "device"}
    options = []
    for item in filter(None, (i.strip() for i in params.split(","))):
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ValueError(f"bad workload option {item!r} in {text!r}; write name:key=value,...")
        if key not in sig:
            raise ValueError(f"workload {text!r}: {name} has no option {key!r}; its options are {', '.join(sig)}")
        value, kind = _value(raw.strip()), str(sig[key].annotation).split(" | ")
        if "int" in kind and "float" not in kind and not isinstance(value, int):
            raise ValueError(f"workload {text!r}: {key} must be a positive integer, got {raw}")
        if "float" in kind and not isinstance(value, (int, float)):
            raise ValueError(f"workload {text!r}: {key} must be a positive number, got {raw}")
        if isinstance(value, (int, float)) and not value > 0:
            raise ValueError(f"workload {text!r}: {key} must be positive, got {raw}")
        options.append((key, value))
    return Recipe(name, tuple(options), text.strip())


def parse_builtin(spec: str) -> tuple[str, dict]:
    """:func:`parse_recipe` as ``(name, options)`` (the form of earlier versions)."""
    r = parse_recipe(spec)
    return r.name, dict(r.options)


def is_recipe(obj) -> bool:
    """Whether ``obj`` is a built-in recipe (a str whose part before ``:`` names a built-in), as
    opposed to a factory ``"module:function"`` or any other object."""
    return isinstance(obj, str) and obj.strip().partition(":")[0] in BUILTINS


def recipes_of(workloads) -> dict[str, str]:
    """The recipe text of each workload given as one, by the name it will have (for the result's
    attrs: two runs of one built-in with different options are different measurements)."""
    try:
        specs = _specs(workloads)
    except TypeError:
        return {}
    names = [_spec_name(n, w) for n, w in specs]
    return {n: parse_recipe(w).text for n, (_, w) in zip(names, specs) if is_recipe(w)}


def as_workload(obj, name: str | None = None, *, device=0) -> Workload:
    """Coerce ``obj`` to a :class:`Workload`.

    A Workload passes through (renamed if ``name`` differs); a str is a built-in recipe
    (:func:`parse_recipe`: ``"memory"`` or ``"memory:n=1048576"``);
    any other callable is wrapped as ``fn(stream=...)`` with no declared work.
    """
    if isinstance(obj, Workload):
        return obj if name is None or name == obj.name else dataclasses.replace(obj, name=name)
    if isinstance(obj, str):
        wl = parse_recipe(obj).build(device=device)
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
    if isinstance(obj, Workload):
        return obj.name
    if isinstance(obj, str):
        return obj.strip().partition(":")[0]  # a recipe is named by its built-in
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
        if isinstance(obj, str):
            parse_recipe(obj)  # the one grammar, checked before anything is built
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
