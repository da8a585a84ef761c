"""Every derived number of a mechanisms result (pure pandas): :func:`mechanisms_table` and the
sentence per split computed from it (:func:`mechanisms_sentences`). Views and pages draw these."""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
import pandas as pd

from ..analysis.stats import finite, quantiles
from ..results.validate import ResultError, check_positive
from ..results.io import bare
from .kind import MECHANISMS

__all__ = ["TABLE_COLUMNS", "mechanisms_sentences", "mechanisms_table"]

#: The tail asked about: the critical workload's 99th percentile.
TAIL_PCT = 99

TABLE_COLUMNS = (
    "split_sm_count",
    "layout",
    "mechanism",
    "reps",
    "makespan_ms",
    "makespan_p10_ms",
    "makespan_p90_ms",
    "critical",
    "critical_ms",
    "critical_p99_ms",
    "critical_interference",
    "critical_sms",
    "other",
    "other_ms",
    "other_interference",
    "other_sms",
    "start_skew_ms",
    "clock",
)

_NEEDS = (
    "mechanism",
    "layout",
    "split_sm_count",
    "rep",
    "round",
    "workload",
    "critical",
    "sms",
    "duration_ms",
    "makespan_ms",
    "start_ms",
    "clock",
)

_LABELS = {
    "green": "green contexts",
    "mps": "MPS",
    "streams": "plain streams",
    "priority": "prioritised streams",
    "sequential": "one after another",
}


def mechanism_label(mechanism: str) -> str:
    """The words a table, sentence or figure uses for a mechanism."""
    return _LABELS.get(mechanism, mechanism)


def _check(df) -> None:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(
            f"mechanisms_table expects the DataFrame gcexplore.mechanisms() returns, got {type(df).__name__}"
        )
    missing = [c for c in _NEEDS if c not in df.columns]
    if missing:
        raise ValueError(
            f"not a mechanisms result: the columns {missing} are missing (kind "
            f"{df.attrs.get('kind', 'unknown')!r}); pass what gcexplore.mechanisms() returns"
        )
    if df.empty:
        raise ValueError("the mechanisms result has no rows: nothing was measured")
    if "run_id" in df.columns and df["run_id"].nunique() > 1:  # each run's baselines are its own
        ids = ", ".join(map(str, df["run_id"].unique()))
        raise ValueError(
            f"a mechanisms table is one run's (each has its own times alone); these rows hold "
            f"{df['run_id'].nunique()} runs ({ids}): pass df[df['run_id'] == ...], or gcexplore.summarize(df) "
            "for one table per run"
        )
    crit = df.groupby(["mechanism", "layout"])["critical"].apply(lambda s: s.astype(bool).sum() > 0)
    if not crit.all():
        raise ValueError(f"no critical workload in {list(crit[~crit].index)}: each mechanism and split needs one")


def _p(values, pct) -> float:
    v = finite(values)
    return float(np.percentile(v, pct)) if v.size else math.nan


def mechanisms_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per split and mechanism: makespan (median, p10, p90), each workload's median time, the
    critical workload's p99, interference, the SMs each workload got, and the start skew.

    ``*_interference`` is a workload's median time under the mechanism over its median time run alone
    on the whole card (the ``sequential`` rows of the same split; NaN without them). ``start_skew_ms``
    is the median over repetitions of the latest workload start: near 0 where the streams start from
    one event, the host barrier's spread between MPS clients (NaN one after another). Rows are ordered by split, then
    :data:`~.kind.MECHANISMS`.
    """
    _check(df)
    out = []
    for (k, layout), at in bare(df).groupby(["split_sm_count", "layout"], sort=True):  # no attrs per slice
        alone = at[at["mechanism"] == "sequential"].groupby("workload")["duration_ms"].median()
        for mech in [m for m in MECHANISMS if m in set(at["mechanism"])] + sorted(
            set(at["mechanism"]) - set(MECHANISMS)
        ):
            m = at[at["mechanism"] == mech]
            reps = m.drop_duplicates(["round", "rep"])
            med, p10, p90 = quantiles(reps["makespan_ms"])
            crit = m[m["critical"].astype(bool)]
            other = m[~m["critical"].astype(bool)]
            cname = str(crit["workload"].iloc[0])
            oname = str(other["workload"].iloc[0]) if len(other) else ""
            c_ms, o_ms = (
                float(crit["duration_ms"].median()),
                float(other["duration_ms"].median()) if len(other) else math.nan,
            )
            out.append(
                {
                    "split_sm_count": int(cast(int, k)),  # pandas-stubs: a group key is Hashable
                    "layout": layout,
                    "mechanism": mech,
                    "reps": len(reps),
                    "makespan_ms": med,
                    "makespan_p10_ms": p10,
                    "makespan_p90_ms": p90,
                    "critical": cname,
                    "critical_ms": c_ms,
                    "critical_p99_ms": _p(crit["duration_ms"], TAIL_PCT),
                    "critical_interference": c_ms / alone.get(cname, math.nan),
                    "critical_sms": int(crit["sms"].iloc[0]),
                    "other": oname,
                    "other_ms": o_ms,
                    "other_interference": o_ms / alone.get(oname, math.nan),
                    "other_sms": int(other["sms"].iloc[0]) if len(other) else 0,
                    "start_skew_ms": math.nan
                    if mech == "sequential"
                    else float(m.groupby(["round", "rep"])["start_ms"].max().median()),
                    "clock": str(m["clock"].iloc[0]),
                }
            )
    return pd.DataFrame(out, columns=list(TABLE_COLUMNS))


def _best(rows: pd.DataFrame, col: str) -> pd.Series:
    return rows.loc[cast(Any, rows[col].idxmin())]  # pandas-stubs: idxmin gives a Hashable, not a label


def mechanisms_sentences(table: pd.DataFrame) -> list[str]:
    """One sentence per split from :func:`mechanisms_table`: the shortest makespan, the lowest tail of
    the critical workload among the mechanisms that share the card (one after another is the
    reference, not a way of sharing), and where green contexts and MPS stand against them."""
    missing = [c for c in TABLE_COLUMNS if c not in getattr(table, "columns", ())]
    if missing:
        raise ValueError(f"mechanisms_sentences takes mechanisms_table(df); the columns {missing} are missing")
    out = []
    for k, rows in table.groupby("split_sm_count", sort=True):
        rows = rows.dropna(subset=["makespan_ms"])
        if rows.empty:
            continue
        shared = rows[rows["mechanism"] != "sequential"].dropna(subset=["critical_p99_ms"])  # alone is the reference
        fast, calm = _best(rows, "makespan_ms"), _best(shared if len(shared) else rows, "critical_p99_ms")
        s = (
            f"With {fast['critical']} given {int(cast(int, k))} SMs ({fast['layout']}), the pair finishes first under "
            f"{mechanism_label(fast['mechanism'])} ({fast['makespan_ms']:.3g} ms) and {calm['critical']}'s p99 is "
            f"lowest under {mechanism_label(calm['mechanism'])} ({calm['critical_p99_ms']:.3g} ms"
            + (
                f"; its median {calm['critical_interference']:.2f}x its time alone)"
                if calm["critical_interference"] == calm["critical_interference"]
                else ")"
            )
        )
        rest = []
        for mech in ("green", "mps"):
            r = rows[rows["mechanism"] == mech]
            if len(r) and mech not in (fast["mechanism"], calm["mechanism"]):
                r = r.iloc[0]
                rest.append(
                    f"under {mechanism_label(mech)} it takes {r['makespan_ms']:.3g} ms with a p99 of "
                    f"{r['critical_p99_ms']:.3g} ms"
                )
        mps = rows[rows["mechanism"] == "mps"]
        if len(mps):
            rest.append(
                f"the MPS clients saw {int(mps['critical_sms'].iloc[0])} and {int(mps['other_sms'].iloc[0])} SMs"
            )
        out.append(s + ("; " + "; ".join(rest) if rest else "") + ".")
    return out


def check_mechanisms_rows(df, where: str) -> None:
    """ResultError unless every span is a positive duration and every mechanism is a known one."""
    for col in ("duration_ms", "makespan_ms"):
        check_positive(df, col, where)
    unknown = sorted(set(df["mechanism"].astype(str)) - set(MECHANISMS))
    if unknown:
        raise ResultError(
            f"{where}: unknown mechanism {', '.join(map(repr, unknown))}; mechanisms are {', '.join(MECHANISMS)}"
        )
