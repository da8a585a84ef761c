"""Which run a row belongs to: run identity, one-run checks, per-run application, and the stamp
text that says where a figure's numbers were measured.

A **run** is defined once, here: the rows that share the identity columns a result carries
(:data:`RUN_COLUMNS` present in it: ``run_id`` and the device's ``device_uuid``,
``device_index`` and ``device_name``). Two cards that share a run id are two runs. A result
without identity columns (an older file) is one run only if no repetition appears twice in it
(:func:`repeated_rows`): several such runs concatenated cannot be told apart, and are refused.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..schema import kind_of

__all__ = ["RUN_COLUMNS", "identity", "per_run", "repeated_rows", "require_one_run", "run_columns", "runs",
           "stamp_text"]

#: The columns that together name a run, where a result has them.
RUN_COLUMNS = ("run_id", "device_uuid", "device_index", "device_name")

# The columns one repetition's row is unique by, within one run, per result kind.
_ROW_KEYS = {
    "overlap": ("layout", "mode", "rep", "workload"),
    "sweep": ("layout", "mode", "rep", "workload"),
    "tune": ("layout", "mode", "rep", "workload"),
    "scaling": ("workload", "sm_count", "rep"),
    "trace": ("layout", "mode", "rep", "correlation_id"),
}


def run_columns(df: pd.DataFrame) -> list[str]:
    """The identity columns of :data:`RUN_COLUMNS` that ``df`` has."""
    return [c for c in RUN_COLUMNS if c in df.columns]


def _run_groups(df: pd.DataFrame):
    cols = run_columns(df)
    if not cols or not len(df):
        return cols, None
    return cols, df.groupby(cols, sort=False, dropna=False)


def _label(cols: list[str], values) -> str:
    values = dict(zip(cols, values))
    head = values.pop("run_id", None)
    rest = ", ".join(v for v in values.values() if v not in ("", "nan", "<NA>", "None"))
    if head is None:
        return rest
    return f"{head} ({rest})" if rest else str(head)


def runs(df: pd.DataFrame) -> list[str]:
    """The runs in a result, each as its run id with its device (one for a single run; none for
    frames without identity columns)."""
    cols, groups = _run_groups(df)
    if groups is None:
        return []
    return [_label(cols, map(str, k if isinstance(k, tuple) else (k,))) for k in groups.indices]


def require_one_run(df: pd.DataFrame, where: str) -> None:
    """ValueError when ``df`` holds rows of several runs (pick one first), or repeats a
    repetition (:func:`repeated_rows`)."""
    ids = runs(df)
    if len(ids) > 1:
        raise ValueError(f"{where} takes one run, but these rows hold {len(ids)} runs: {', '.join(ids)}; "
                         "select one, e.g. df[df.run_id == ...], or summarize(df) to compare them")
    found = repeated_rows(df)
    if found:
        raise ValueError(f"{where}: {found}")


def per_run(df: pd.DataFrame, one) -> pd.DataFrame:
    """``one`` applied to each run's rows (:func:`runs`), the outputs concatenated; identity
    columns that tell runs apart and that ``one`` dropped are put back on its rows."""
    cols, groups = _run_groups(df)
    if groups is None or groups.ngroups <= 1:
        return one(df)
    parts = []
    for idx in groups.indices.values():
        rows = df.iloc[idx]
        out = one(rows)
        for c in cols:
            if c not in out.columns:
                out[c] = rows[c].iloc[0]
        parts.append(out)
    out = pd.concat(parts, ignore_index=True)
    out.attrs.update(parts[0].attrs)
    return out


def repeated_rows(df: pd.DataFrame, kind: str | None = None) -> str:
    """Why ``df``'s rows are not one measurement each ("" when they are): a repetition that
    appears twice within a run (the same run concatenated twice), or, without identity
    columns, twice at all (several runs that cannot be told apart). ``kind``: default
    :func:`~gcexplore.schema.kind_of`."""
    try:
        keys = _ROW_KEYS.get(kind or kind_of(df))
    except ValueError:
        return ""
    if not keys or not set(keys) <= set(df.columns) or not len(df):
        return ""
    cols = run_columns(df)
    dup = df.duplicated([*cols, *keys], keep=False)
    if not dup.any():
        return ""
    first = df.loc[dup, list(keys)].iloc[0].to_dict()
    where = ", ".join(f"{k} {v!r}" for k, v in first.items())
    if not cols:
        return (f"{int(dup.sum())} rows repeat a repetition ({where}) and carry no run identity (run_id, "
                "device_name columns): several runs pooled cannot be told apart; summarize each file on its "
                "own, or give each its run_id column before concatenating")
    return (f"{int(dup.sum())} rows repeat a repetition within one run ({where}, run {runs(df.loc[dup])[0]}): "
            "the same run concatenated twice would count its repetitions twice; drop the copy "
            "(df.drop_duplicates()) or keep each run once")


def identity(df: pd.DataFrame) -> dict:
    if "run_id" in df.columns and len(df):
        return {"device_name": str(df["device_name"].iloc[0]) if "device_name" in df.columns else "",
                "run_id": str(df["run_id"].iloc[0])}
    return {"device_name": str(df.attrs.get("device_name", "")), "run_id": str(df.attrs.get("run_id", ""))}


def stamp_text(source: pd.DataFrame | Mapping) -> str:
    """Where a result's numbers were measured: device, recorded or live, date (one line).

    ``source`` is a result (its ``attrs`` are read) or its ``attrs``: keys ``device_name``,
    ``device_sm_count``, ``date``, ``recorded`` and ``driver_version`` when present. E.g.
    ``"NVIDIA H100 80GB HBM3 (132 SMs, driver 13.0) · recorded 2025-11-26"``. Figures carry it
    as their title (:func:`gcexplore.views.plot.figure_stamp`), text reports as their head line.
    """
    attrs = source.attrs if isinstance(source, pd.DataFrame) else source
    name = attrs.get("device_name") or "unknown device"
    details = []
    if attrs.get("device_sm_count"):
        details.append(f"{attrs['device_sm_count']} SMs")
    drv = attrs.get("driver_version")
    if isinstance(drv, (int, np.integer)) and not isinstance(drv, bool) and drv > 0:
        details.append(f"driver {drv // 1000}.{(drv % 1000) // 10}")
    elif isinstance(drv, str) and drv:
        details.append(f"driver {drv}")  # DeviceInfo.metadata() stores "13.0"
    device = f"{name} ({', '.join(details)})" if details else name
    date = str(attrs["date"])[:10] if attrs.get("date") else ", date unknown"
    how = "recorded" if attrs.get("recorded") else "measured live"
    return f"{device} · {how}{'' if date.startswith(',') else ' '}{date}"
