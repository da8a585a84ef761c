"""The pair a mechanisms experiment runs, in a form another process can rebuild: built-in recipes
(``"latency"``, ``"memory:n=1048576"``) or factories ``"module:function"`` (``{"factory": ...,
"kwargs": {...}}``) as campaigns take them. A factory may make the whole pair (it returns a mapping
or sequence of two workloads) or, as a mapping's value, one workload.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping

from ..workloads.spec import resolve_factory
from ..workloads.spec import is_recipe, parse_recipe, workload_names
from ..workloads.workload import Workload

__all__ = ["build_pair", "pair_specs"]

_HOW = (
    "a pair is two built-in recipes (['latency', 'memory'] or {'name': 'recipe'}), a factory "
    "'module:function' returning two workloads, {'factory': 'module:function', 'kwargs': {...}}, or a "
    "mapping whose values are recipes or factories of one workload each"
)


def _factory(obj) -> dict | None:
    if isinstance(obj, str) and ":" in obj and not is_recipe(obj):
        module, sep, attr = obj.partition(":")
        if not (sep and module and attr):
            raise ValueError(f"{obj!r} is neither a built-in recipe nor a factory 'module:function'; {_HOW}")
        return {"factory": obj, "kwargs": {}}
    if isinstance(obj, Mapping) and "factory" in obj:
        extra = set(obj) - {"factory", "kwargs"}
        if extra:
            raise ValueError(f"a factory recipe has the keys factory and kwargs; got also {sorted(extra)}")
        kwargs = dict(obj.get("kwargs") or {})
        json.dumps(kwargs)  # TypeError now for arguments another process could not be given
        return {"factory": str(obj["factory"]), "kwargs": kwargs}
    return None


def pair_specs(pair) -> dict:
    """``{"whole": factory}`` for a factory of the pair, else ``{"each": {name: spec}}`` where a spec is
    ``{"recipe": text}`` or a factory; checked without building anything.

    Raises
    ------
    ValueError, TypeError
        What was given and what a pair may be.
    """
    whole = _factory(pair)
    if whole is not None:
        return {"whole": whole}
    if isinstance(pair, str):
        raise ValueError(f"one recipe {pair!r} is not a pair; {_HOW}")  # noqa: TRY004 (a value, not a type, is wrong)
    items = list(pair.items()) if isinstance(pair, Mapping) else [(None, p) for p in pair]
    if len(items) != 2:
        raise ValueError(f"a mechanisms experiment runs two workloads, got {len(items)}; {_HOW}")
    each, names = {}, []
    for name, obj in items:
        if isinstance(obj, Workload) or (callable(obj) and not isinstance(obj, str)):
            raise TypeError(
                f"{obj!r}: MPS runs each workload in its own process, which rebuilds it from a recipe "
                f"or factory, not from an object; {_HOW}"
            )
        fac = _factory(obj)
        if fac is not None:
            if name is None:
                raise ValueError(f"name the factory {obj!r}: pass {{'name': {obj!r}, ...}}")
            spec = fac
        elif isinstance(obj, str):
            spec = {"recipe": parse_recipe(obj).text}
        else:
            raise TypeError(f"{obj!r} is not a workload recipe; {_HOW}")
        names.append(str(name) if name is not None else parse_recipe(obj).name)
        each[names[-1]] = spec
    if len(set(names)) != len(names):
        raise ValueError(f"workload names must be unique, got {names}; pass a mapping {{name: recipe}} to name them")
    return {"each": each}


def _one(spec: dict, name: str, device: int) -> Workload:
    if "recipe" in spec:
        w = parse_recipe(spec["recipe"]).build(device=device)
        return w if w.name == name else dataclasses.replace(w, name=name)
    out = resolve_factory(spec["factory"])(device=device, **spec["kwargs"])
    if isinstance(out, Mapping):
        if len(out) != 1:
            raise ValueError(f"factory {spec['factory']} for {name!r} made {len(out)} workloads, not one")
        out = next(iter(out.values()))
    if not isinstance(out, Workload):
        raise TypeError(f"factory {spec['factory']} returned {type(out).__name__}, not a gcexplore Workload")
    return out if out.name == name else dataclasses.replace(out, name=name)


def build_pair(specs: dict, device: int = 0) -> dict[str, Workload]:
    """The pair's workloads by name, built on ``device`` (the caller closes them)."""
    if "whole" in specs:
        spec = specs["whole"]
        out = resolve_factory(spec["factory"])(device=device, **spec["kwargs"])
        if not isinstance(out, Mapping):
            out = dict(zip(workload_names(out), out))
        if len(out) != 2 or not all(isinstance(w, Workload) for w in out.values()):
            raise ValueError(f"factory {spec['factory']} must return two gcexplore Workloads, got {out!r}")
        return {str(k): v for k, v in out.items()}
    made: dict[str, Workload] = {}
    try:
        for name, spec in specs["each"].items():
            made[name] = _one(spec, name, device)
    except BaseException:
        for w in made.values():
            w.close()
        raise
    return made
