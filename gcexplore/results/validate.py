"""Checks that a result is what a function was given it for, before any number is derived.

:func:`check_result` raises :class:`ResultError` (a ValueError) naming what is wrong
and what would be valid: the wrong kind of result, durations that are not finite
positive numbers, blocks that end before they start, split sizes that are missing,
metadata that contradicts the rows, one workload name on two partitions. Summaries,
plots and explorers call it, so a bad frame never reaches pandas or matplotlib.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..schema import kind_of, parse_layout

__all__ = ["ResultError", "check_result", "require_columns"]

_MAKERS = {"overlap": "gcexplore.profile_overlap()", "sweep": "gcexplore.sweep()",
           "scaling": "gcexplore.scaling()", "isolation": "gcexplore.isolation()",
           "occupancy": "gcexplore.occupancy()", "tune": "gcexplore.tune()", "trace": "trace=True",
           "pm": "gcexplore.dram_timeline()"}


class ResultError(ValueError):
    """A result DataFrame that cannot be used as asked (the message says why)."""


def _a(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"


def _kind_text(kinds) -> str:
    return " or ".join(f"{_a(k)} result ({_MAKERS.get(k, k)})" for k in kinds)


def _bad_values(series: pd.Series, *, positive: bool) -> pd.Series:
    v = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(v)
    if positive:
        bad |= np.nan_to_num(v, nan=1.0) <= 0
    return pd.Series(bad, index=series.index)


def _check_positive(df: pd.DataFrame, col: str, where: str) -> None:
    if col not in df.columns:
        return
    bad = _bad_values(df[col], positive=True)
    if bad.any():
        examples = ", ".join(map(repr, df.loc[bad, col].head(3).tolist()))
        raise ResultError(f"{where}: {int(bad.sum())} of {len(df)} rows have a {col} that is not a finite "
                          f"positive number ({examples}); measured times are > 0 ms — drop or re-measure "
                          "those rows")


def _check_overlap(df: pd.DataFrame, where: str) -> None:
    _check_positive(df, "duration_ms", where)
    _check_positive(df, "makespan_ms", where)
    if "split_sm_count" in df.columns and _bad_values(df["split_sm_count"], positive=True).any():
        raise ResultError(f"{where}: some rows have no split size (split_sm_count is missing or not positive)")
    if {"layout", "mode", "rep", "workload", "partition"} <= set(df.columns):
        per = df.groupby(["layout", "mode", "rep", "workload"], sort=False)["partition"].nunique()
        if (per > 1).any():
            (lay, mode, _, wl) = per[per > 1].index[0]
            raise ResultError(f"{where}: workload {wl!r} ran on two partitions in {lay} {mode}; give each "
                              "partition's workload its own name")
    total = df.attrs.get("device_sm_count")
    if total and "layout" in df.columns:
        for lay in dict.fromkeys(df["layout"]):
            try:
                sizes = parse_layout(lay)
            except ValueError as e:
                raise ResultError(f"{where}: {e}") from None
            if sum(sizes) != int(total):
                raise ResultError(f"{where}: layout {lay} adds up to {sum(sizes)} SMs but the metadata says "
                                  f"the device ({df.attrs.get('device_name', '?')}) has {total}; the rows and "
                                  "attrs come from different runs")


def _check_occupancy(df: pd.DataFrame, where: str) -> None:
    if {"start_ns", "end_ns"} <= set(df.columns):
        bad = df["end_ns"] < df["start_ns"]
        if bad.any():
            raise ResultError(f"{where}: {int(bad.sum())} blocks end before they start (end_ns < start_ns)")


def _check_scaling(df: pd.DataFrame, where: str) -> None:
    _check_positive(df, "duration_ms", where)
    total = df.attrs.get("device_sm_count")
    if total and "sm_count" in df.columns and (pd.to_numeric(df["sm_count"]) > int(total)).any():
        raise ResultError(f"{where}: sizes above the device's {total} SMs; the rows and attrs disagree")


_CHECKS = {"overlap": _check_overlap, "sweep": _check_overlap, "tune": _check_overlap, "scaling": _check_scaling,
           "isolation": lambda df, where: _check_positive(df, "duration_ms", where),
           "occupancy": _check_occupancy}


def check_result(df, kinds, where: str) -> str:
    """The kind of ``df`` if it is one of ``kinds`` and its rows are usable; else ResultError.

    Parameters
    ----------
    df : pandas.DataFrame
    kinds : str or sequence of str
        The kinds ``where`` accepts (``"overlap"`` also accepts ``"sweep"`` and back).
    where : str
        The caller, for the message.
    """
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{where} needs {_kind_text(kinds)} as a pandas DataFrame, got {type(df).__name__}")
    try:
        kind = kind_of(df)
    except ValueError as e:
        raise ResultError(f"{where} needs {_kind_text(kinds)}; {e}") from None
    overlap_like = {"overlap", "sweep", "tune"}  # a tune result holds concurrent overlap rows
    accepted = set(kinds) | (overlap_like if overlap_like & set(kinds) else set())
    if kind not in accepted:
        raise ResultError(f"{where} needs {_kind_text(kinds)}, got {_a(kind)} result")
    if kind in _CHECKS:
        _CHECKS[kind](df, where)
    return kind



def require_columns(df: pd.DataFrame, needed, where: str) -> None:
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise ValueError(f"{where} needs columns {missing}, which this DataFrame lacks "
                         f"(it has {list(df.columns)})")
