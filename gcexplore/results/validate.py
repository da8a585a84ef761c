"""Checks that a result is what a function was given it for, before any number is derived.

:func:`check_result` raises :class:`ResultError` (a ValueError) naming what is wrong
and what would be valid: the wrong kind of result, durations that are not finite
positive numbers, blocks, kernels or PM samples that end before they start or whose
times are not finite, negative kernel resources (registers, shared memory, grid),
split sizes that are missing, metadata that contradicts the rows, one workload name on
two partitions, rows that repeat within a run (one run concatenated twice, or several
runs without identity columns). Summaries, plots and explorers call it, so a bad
frame never reaches pandas or matplotlib. :func:`check_trace_matches` checks that a
kernel trace belongs to the result it is joined with.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import pandas as pd

from ..schema import IDENTITY, parse_layout
from . import kinds as _kinds
from .kinds import kind_of
from .run import Run, repeated_rows, require_one_run, run_columns, run_of, runs

__all__ = ["ResultError", "open_run", "check_isolation_rows", "check_not_negative", "check_occupancy_rows",
           "check_overlap_rows", "check_pm_matches", "check_pm_rows", "check_positive", "check_result",
           "check_scaling_rows", "check_trace_matches", "check_trace_rows", "require_columns"]


_SM_COUNT = next(f.name for f in IDENTITY if f.source == "sm_count")


class ResultError(ValueError):
    """A result DataFrame that cannot be used as asked (the message says why)."""


def _a(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"


def _maker(name: str) -> str:
    try:
        return _kinds.get(name).maker
    except ValueError:
        return name


def _kind_text(kinds) -> str:
    return " or ".join(f"{_a(k)} result ({_maker(k)})" for k in kinds)


def _bad_values(series: pd.Series, *, positive: bool) -> pd.Series:
    v = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(v)
    if positive:
        bad |= np.nan_to_num(v, nan=1.0) <= 0
    return pd.Series(bad, index=series.index)


def check_positive(df: pd.DataFrame, col: str, where: str) -> None:
    """ResultError unless every value of ``col`` (where present) is a finite positive number."""
    if col not in df.columns:
        return
    bad = _bad_values(df[col], positive=True)
    if bad.any():
        examples = ", ".join(map(repr, df.loc[bad, col].head(3).tolist()))
        raise ResultError(f"{where}: {int(bad.sum())} of {len(df)} rows have a {col} that is not a finite "
                          f"positive number ({examples}); measured times are > 0 ms — drop or re-measure "
                          "those rows")


def check_overlap_rows(df: pd.DataFrame, where: str) -> None:
    """ResultError unless overlap, sweep or tune rows have positive times, repetitions, split sizes,
    one partition per workload and layouts that add up to the card."""
    check_positive(df, "duration_ms", where)
    check_positive(df, "makespan_ms", where)
    if "start_ms" in df.columns and _bad_values(df["start_ms"], positive=False).any():
        raise ResultError(f"{where}: some rows have a start_ms that is not a finite number; a start event's "
                          "time after the repetition's start is finite — drop or re-measure those rows")
    if "rep" in df.columns and _bad_count(df["rep"]).any():
        raise ResultError(f"{where}: {int(_bad_count(df['rep']).sum())} rows have no repetition number (rep is "
                          "missing or not a whole number >= 0); every measured row belongs to a repetition")
    if "split_sm_count" in df.columns and _bad_values(df["split_sm_count"], positive=True).any():
        raise ResultError(f"{where}: some rows have no split size (split_sm_count is missing or not positive)")
    if {"layout", "mode", "rep", "workload", "partition"} <= set(df.columns):
        per = df.groupby(["layout", "mode", "rep", "workload"], sort=False)["partition"].nunique()
        if (per > 1).any():
            (lay, mode, _, wl) = per[per > 1].index[0]
            raise ResultError(f"{where}: workload {wl!r} ran on two partitions in {lay} {mode}; give each "
                              "partition's workload its own name")
    total = df.attrs.get(_SM_COUNT)
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


def _bad_count(series: pd.Series) -> pd.Series:
    """Rows whose value is not a whole number >= 0 (NaN included): a repetition or an SM id."""
    v = pd.to_numeric(series, errors="coerce").astype(float)
    return cast(pd.Series, ~(np.isfinite(v) & (v >= 0) & (v == np.floor(v))))  # numpy's ufuncs keep a Series


def check_occupancy_rows(df: pd.DataFrame, where: str) -> None:
    """ResultError unless every block has an SM id and ends at or after its start."""
    if "sm_id" in df.columns and _bad_count(df["sm_id"]).any():
        raise ResultError(f"{where}: {int(_bad_count(df['sm_id']).sum())} blocks have no SM id (sm_id is missing or "
                          "not a whole number >= 0); %smid records it for every block")
    if {"start_ns", "end_ns"} <= set(df.columns):
        bad = df["end_ns"] < df["start_ns"]
        if bad.any():
            raise ResultError(f"{where}: {int(bad.sum())} blocks end before they start (end_ns < start_ns)")


def check_scaling_rows(df: pd.DataFrame, where: str) -> None:
    """ResultError unless durations are positive and no size exceeds the card."""
    check_positive(df, "duration_ms", where)
    total = df.attrs.get(_SM_COUNT)
    if total and "sm_count" in df.columns and (pd.to_numeric(df["sm_count"]) > int(total)).any():
        raise ResultError(f"{where}: sizes above the device's {total} SMs; the rows and attrs disagree")


def _check_times(df: pd.DataFrame, start: str, end: str, where: str, what: str) -> None:
    """Finite start and end times, the end not before the start (what CUPTI reports)."""
    if not {start, end} <= set(df.columns):
        return
    df = pd.DataFrame(df, copy=False)  # no attrs: each column read would deep-copy them
    s = pd.to_numeric(df[start], errors="coerce").to_numpy(dtype=float)
    e = pd.to_numeric(df[end], errors="coerce").to_numpy(dtype=float)
    bad = ~(np.isfinite(s) & np.isfinite(e))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ResultError(f"{where}: {int(bad.sum())} of {len(df)} {what} have a {start} or {end} that is not a "
                          f"finite number (e.g. row {i}: {start} {s[i]!r}, {end} {e[i]!r}); recorded times are "
                          "finite — drop those rows or record again")
    back = e < s
    if back.any():
        i = int(np.flatnonzero(back)[0])
        raise ResultError(f"{where}: {int(back.sum())} of {len(df)} {what} end before they start (e.g. row {i}: "
                          f"{start} {s[i]:.6g}, {end} {e[i]:.6g}); recorded intervals have {end} >= {start}")


def check_not_negative(df: pd.DataFrame, cols, where: str, what: str, *, allow_nan: bool = False) -> None:
    """ResultError unless every value of ``cols`` (those present) is a number >= 0 (NaN too with
    ``allow_nan``)."""
    df = pd.DataFrame(df, copy=False)  # no attrs: each column read would deep-copy them
    for col in (c for c in cols if c in df.columns):
        v = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float)
        bad = (np.isnan(v) & (not allow_nan)) | np.isinf(v) | (np.nan_to_num(v) < 0)
        if bad.any():
            examples = ", ".join(map(repr, df.loc[bad, col].head(3).tolist()))
            raise ResultError(f"{where}: {int(bad.sum())} of {len(df)} {what} have a {col} that is not a "
                              f"non-negative number ({examples}); {col} is a count or size >= 0")


#: Kernel-record columns that are counts or sizes (never negative).
_TRACE_COUNTS = ("sm_count", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "cluster_x",
                 "cluster_y", "cluster_z", "registers_per_thread", "static_shared_bytes", "dynamic_shared_bytes")


def check_trace_rows(trace: pd.DataFrame, where: str) -> None:
    """ResultError unless every kernel record has finite times, ends at or after its start, has
    non-negative counts and sizes (grid, block, registers, shared memory, SMs), and appears
    once in its run."""
    _check_times(trace, "start_ms", "end_ms", where, "kernel records")
    check_not_negative(trace, _TRACE_COUNTS, where, "kernel records")
    _check_unique(trace, where, "trace")


def check_pm_rows(samples: pd.DataFrame, where: str) -> None:
    """ResultError unless every PM sample has finite times in order and no negative or infinite
    counter value (NaN marks a counter not in the sample's metric set)."""
    _check_times(samples, "start_ms", "end_ms", where, "PM samples")
    check_not_negative(samples, ("dram_pct", "dram_read_gbs", "dram_write_gbs", "sm_active_pct"), where,
                        "PM samples", allow_nan=True)


def _check_unique(df: pd.DataFrame, where: str, kind: str | None = None) -> None:
    found = repeated_rows(df, kind)
    if found:
        raise ResultError(f"{where}: {found}")


def check_isolation_rows(df: pd.DataFrame, where: str) -> None:
    """ResultError unless every duration is a finite positive number."""
    check_positive(df, "duration_ms", where)


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
        if df.attrs.get("kind") in _kinds.names():  # a label that contradicts the rows: the message says which
            raise ResultError(f"{where}: {e}") from None
        raise ResultError(f"{where} needs {_kind_text(kinds)}; {e}") from None
    accepted = set().union(*(_kinds.get(k).accepts() for k in kinds if k in _kinds.names()), kinds)
    if kind not in accepted:
        raise ResultError(f"{where} needs {_kind_text(kinds)}, got {_a(kind)} result")
    declared = _kinds.get(kind)
    if declared.check is not None:
        _kinds.resolve(declared.check)(df, where)
    if kind != "trace":  # check_trace_rows did
        _check_unique(df, where, kind)
    return kind


def open_run(df, kinds, where: str, *, columns=(), one_run: bool = True) -> Run:
    """The door every reader of a result goes through: ``df`` checked once (:func:`check_result`
    for ``kinds``, the ``columns`` it needs, one run unless ``one_run=False``) and its
    :class:`~gcexplore.results.run.Run` returned. A frame that passed once is not checked again
    while it is unchanged; ``where`` names the caller in the message of a frame that fails."""
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    if not isinstance(df, pd.DataFrame):
        check_result(df, kinds, where)  # the TypeError that says what was expected
    run = run_of(df)
    key = ("checked", kinds, tuple(columns), one_run)  # the kind is read after the check: a bad label fails there
    if key not in run._memo:
        check_result(df, kinds, where)
        require_columns(df, columns, where)
        if one_run:
            require_one_run(df, where)
        run.memo(key, lambda: True)
    return run


def _same_run(df: pd.DataFrame, trace: pd.DataFrame, where: str, what: str) -> None:
    require_one_run(df, f"{where} with a trace")
    require_one_run(trace, f"{where}(trace=...)")
    cols = [c for c in run_columns(df) if c in trace.columns]  # traces carry the run key only
    mine, theirs = (runs(x[cols]) if cols else [] for x in (df, trace))
    if mine and theirs and mine != theirs:
        raise ResultError(f"{where}: the trace is of run {theirs[0]}, the {what} of run {mine[0]}; pass the trace "
                          f"recorded with these {what}s (the run returns both)")


def check_pm_matches(samples: pd.DataFrame, trace: pd.DataFrame, where: str) -> None:
    """ResultError unless ``samples`` (kind ``"pm"``) and ``trace`` are usable and of one and
    the same run: the samples of two runs are never averaged together."""
    check_result(samples, "pm", where)
    check_result(trace, "trace", f"{where}(trace=...)")
    _same_run(samples, trace, where, "PM sample")


def check_trace_matches(df: pd.DataFrame, trace: pd.DataFrame, where: str, kind: str = "overlap") -> None:
    """ResultError unless ``trace`` can be the kernel trace of ``df`` (a result of ``kind``): an
    overlap or sweep result, one run each, the same run (run id and device, where both have
    them), and some of ``df``'s repetitions traced. A trace of other workloads is left to
    :func:`gcexplore.analysis.trace.require_trace_of`, which names them."""
    if kind not in ("overlap", "sweep"):
        raise ResultError(f"{where} takes trace= with an overlap or sweep result (its rates come from the "
                          f"trace's GPU-busy time), not with {_a(kind)} result; summarize the trace on its own")
    check_result(trace, "trace", f"{where}(trace=...)")
    if not set(map(str, trace["workload"])) & set(map(str, df["workload"])):
        return  # other workloads altogether: require_trace_of says which
    _same_run(df, trace, where, "result")
    keys = ["layout", "mode", "rep", "workload"]
    common = trace[keys].drop_duplicates().merge(df[keys].drop_duplicates(), on=keys)
    if trace.shape[0] and common.empty:
        raise ResultError(f"{where}: the trace covers none of the result's repetitions (trace layouts "
                          f"{sorted(set(map(str, trace['layout'])))}, modes {sorted(set(map(str, trace['mode'])))}; "
                          f"result layouts {sorted(set(map(str, df['layout'])))}); pass the trace recorded with "
                          "this result")


def require_columns(df: pd.DataFrame, needed, where: str) -> None:
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise ValueError(f"{where} needs columns {missing}, which this DataFrame lacks "
                         f"(it has {list(df.columns)})")
