"""A recorded sweep or scaling measured again, as new runs: the sides of ``compare --until-decided``.

:func:`measure_again` turns a result into the ``measure(sizes)`` callable that
:func:`gcexplore.compare_until_decided` takes: its first call returns the recorded run, each later
call measures the same built-in recipes with the same options once more (a new run) at the sizes
asked. Only a result that can be measured again *as itself* qualifies: every workload a built-in
recipe, measured on this card, driver and cuda-core/bindings versions; otherwise a new run here
would measure something else under the old name, and the refusal says which field differs.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, cast

from ..schema import IDENTITY, RECIPES_ATTR, partition_key

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["measure_again", "recipes_and_options"]

#: What a new run must share with the recorded one: every identity field the card gives (the result's
#: column or attrs, DeviceInfo's attribute) but its index, which CUDA_VISIBLE_DEVICES may renumber.
_SAME = tuple((f.name, f.source) for f in IDENTITY if f.source and f.source != "index")
_OPTIONS = {"sweep": ("repeats", "warmup", "rounds", "modes", "l2_flush", "graphs", "rounding"),
            "scaling": ("repeats", "warmup", "rounds", "l2_flush", "graphs")}


def _recorded(df, field: str) -> str:
    if field in df.columns and len(df) and df[field].notna().any():
        return str(df[field].dropna().iloc[0])
    v = df.attrs.get(field)
    return "" if v is None else str(v)


def recipes_and_options(df, label: str = "result") -> tuple[str, list[tuple[str, str]], dict]:
    """``(kind, [(workload, recipe) in placement order], options)`` of a result that can be measured
    again; ValueError naming what is missing otherwise."""
    kind = df.attrs.get("kind")
    if kind not in _OPTIONS:
        raise ValueError(f"{label}: only a sweep or scaling result can be measured again, this is {kind!r}")
    specs = df.attrs.get(RECIPES_ATTR) or {}
    if kind == "sweep":
        parts = df.loc[df["partition"] != "device", ["partition", "workload"]].drop_duplicates()
        names = [w for _, w in sorted(zip(parts["partition"], parts["workload"]), key=lambda pw: partition_key(pw[0]))]
        if len(names) != 2:
            raise ValueError(f"{label}: a sweep of two workloads can be measured again, this one has {len(names)}")
    else:
        names = sorted(set(map(str, df["workload"])))
    missing = [n for n in names if not specs.get(n)]
    if missing:
        raise ValueError(f"{label}: workload(s) {', '.join(missing)} have no built-in recipe recorded (results of "
                         "`gcexplore sweep` and of built-ins by name have one); measure such sides with "
                         "gcexplore.compare_until_decided(measure_a, measure_b) and your own callables")
    opts = {k: df.attrs[k] for k in _OPTIONS[kind] if df.attrs.get(k) is not None}
    if "modes" in opts:
        opts["modes"] = tuple(opts["modes"])
    return kind, [(n, str(specs[n])) for n in names], opts


def measure_again(df, *, device: int = 0, label: str = "result", info=None):
    """``measure(sizes)`` for :func:`gcexplore.compare_until_decided`: the recorded run first, then
    new runs of the same recipes and options on ``device`` (``info``: its DeviceInfo, for tests).

    Raises ValueError (before anything is measured) when the result cannot be measured again as
    itself: not a sweep or scaling, a workload without a built-in recipe, or another card, host,
    driver or cuda-core/bindings version than the recording's (named, with both values)."""
    kind, recipes, opts = recipes_and_options(df, label)
    smallest = int(df["sm_count"].min()) if "sm_count" in df.columns and len(df) else None
    if info is None:
        from ..device import device_info

        info = device_info(device)
    now = {f: str(getattr(info, a, "")) for f, a in _SAME}
    now["host"] = socket.gethostname()
    for field, value in now.items():
        was = _recorded(df, field)
        if was and value and was != value:
            raise ValueError(f"{label} was measured with {field} {was!r}, this machine has {value!r}: a new run "
                             "here would not be the same side")
    calls = [0]

    def measure(sizes):
        calls[0] += 1
        if calls[0] == 1:
            return df
        out = cast("pd.DataFrame", _measure(kind, recipes, opts, sizes, info, smallest))  # no trace: a frame
        out.attrs[RECIPES_ATTR] = dict(recipes)  # the same set as the recording (built here, not by name)
        return out
    return measure


def _measure(kind, recipes, opts, sizes, info, smallest):
    from ..workloads.spec import parse_recipe

    wls = {n: parse_recipe(r).build(device=info.index) for n, r in recipes}
    try:
        if kind == "sweep":
            from .overlap import sweep

            return sweep(wls, sizes, device=info.index, progress=False, **opts)
        from .measure_scaling import scaling

        part = None if sizes is None else [k for k in sizes if k < info.sm_count] or [smallest]  # one size at least
        return scaling(next(iter(wls.values())), part, device=info.index, progress=False,
                       whole_device_too=sizes is None or info.sm_count in sizes, **opts)
    finally:
        for w in wls.values():
            if hasattr(w, "close"):
                w.close()
