"""What differs between two results and what is the same: card, UUID, SM count, driver and
library versions, measured clocks and power, measurement options, declared work."""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
import pandas as pd

from ..results.run import identity_fields, run_of
from ..schema import IDENTITY, identity_name

__all__ = ["IDENTITY_FIELDS", "identity_diff"]

#: Fields compared first, in this order: (name, key): the run's identity
#: (:data:`gcexplore.schema.IDENTITY`, its one spelling), then the context a result records.
IDENTITY_FIELDS = (
    *((f.label, f.name) for f in IDENTITY if f.name != "run_id"),
    ("compute capability", "compute_capability"),
    ("gcexplore", "gcexplore_version"),
    ("run", "run_id"),
    ("campaign", "campaign_id"),
    ("date", "date"),
)
_SM_COUNT = identity_name("sm_count")
# attrs that are results or bookkeeping, not identity or options
_SKIP = {"recorded", "lower_bound", "rate_notes", "summary_of", "resumed_layouts", "reason", "notes",
         "comparisons", "unmeasured", "visits", "answer", "trace_diagnostics", "rep_origins", "max_enqueue_us",
         "fit_notes", "hints"}
_MEASURED = (("SM clock (MHz, median)", "sm_clock_mhz"), ("board power (W, median)", "power_w"))


def _text(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, (list, tuple)):
        return ", ".join(map(_text, v))
    return str(v)


def _value(df: pd.DataFrame, key: str, recorded: dict) -> str:
    vals = recorded.get(key)
    if vals is None and key in df.columns and len(df):  # context columns (campaign_id)
        vals = [v for v in map(str, pd.unique(df[key])) if v not in ("", "nan", "<NA>", "None")]
    if vals:
        vals = list(dict.fromkeys(map(_text, vals)))
        return ", ".join(vals[:4]) + (f" (+{len(vals) - 4} more)" if len(vals) > 4 else "")
    return _text(df.attrs.get(key))


def _sm_total(df: pd.DataFrame, recorded: dict) -> str:
    if "layout" in df.columns and len(df):
        totals = sorted({sum(int(p) for p in str(lay).split("+")) for lay in pd.unique(df["layout"])})
        return ", ".join(map(str, totals))
    if "sm_count" in df.columns and len(df):
        return str(int(df["sm_count"].max()))
    return _value(df, _SM_COUNT, recorded)


def _declared(df: pd.DataFrame) -> dict[str, str]:
    out = {}
    for col, unit in (("flops", "FLOP"), ("bytes", "bytes")):
        if col in df.columns:
            for wl, v in df.groupby("workload", sort=True)[col].median().items():
                if np.isfinite(v):
                    out[f"{wl}: declared {unit} per call"] = f"{v:.4g}"
    return out


def _fields(df: pd.DataFrame) -> dict[str, str]:
    recorded = identity_fields(df)
    out = {name: (_sm_total(df, recorded) if key == _SM_COUNT else _value(df, key, recorded))
           for name, key in IDENTITY_FIELDS}
    for name, col in _MEASURED:
        if col in df.columns and df[col].notna().any():
            out[name] = f"{float(df[col].median()):.0f}"
    out.update(_declared(df))
    known = {k for _, k in IDENTITY_FIELDS}
    for key in sorted(cast("dict[str, Any]", df.attrs)):  # gcexplore's attrs keys are str (pandas-stubs: Hashable)
        v = df.attrs[key]
        if key in known or key in _SKIP or isinstance(v, dict):
            continue
        out[key] = _text(v)
    return out


def identity_diff(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """What differs between two results and what is the same.

    Reads each side's identity (every field of :data:`gcexplore.schema.IDENTITY`) where the
    rows carry it, else ``df.attrs``; the SM count
    from the layouts; the median SM clock and power measured; the declared work of each
    workload; and every other plain attrs entry (options such as ``repeats``,
    ``l2_flush``, ``graphs``, ``workload_notes``).

    Returns
    -------
    pandas.DataFrame
        ``field``, ``a``, ``b``, ``same`` (bool); fields known on neither side are left out;
        the identity fields first, then the others by name.
    """
    # once per unchanged frame (a calibration diffs each recorded side two or three times); read, never changed
    fa, fb = (run_of(df).memo("identity fields", lambda df=df: _fields(df)) for df in (a, b))
    rows = [{"field": k, "a": fa.get(k, ""), "b": fb.get(k, ""), "same": fa.get(k, "") == fb.get(k, "")}
            for k in dict.fromkeys([*fa, *fb]) if fa.get(k, "") or fb.get(k, "")]
    return pd.DataFrame(rows, columns=["field", "a", "b", "same"])
