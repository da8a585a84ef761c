"""Text reports of results, shared by ``gcexplore demo`` and ``gcexplore sweep/profile``.

Every number printed here comes from :mod:`gcexplore.analysis`, and so does every
judgement (whether overlap pays is :func:`gcexplore.analysis.verdict_facts`' call, made
from the spread of the repetitions); this module only lays them out, so the demo and
the command line print the same table and the same sentences for the same data.
"""

from __future__ import annotations

import math

import pandas as pd

from .. import analysis as A
from ..results.run import stamp_text

__all__ = ["alone_sentence", "layout_report", "verdict", "outcome_sentence", "bound_sentence"]

#: The columns of the layout table the report prints (the lower bound, one value per
#: run, is printed once under it).
REPORT_COLUMNS = ["layout", "concurrent_ms", "sequential_ms", "streams_ms", "interference_free_ms",
                  "speedup_vs_sequential", "speedup_vs_streams", "interference", "split_loss", "efficiency"]


def _x(v) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}x"


def _ms(v) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f} ms"


def bound_sentence(bound: dict) -> str:
    """What the lower bound is and which measurement sets it, from :func:`~gcexplore.analysis.lower_bound`."""
    if not math.isfinite(bound["lower_bound_ms"]):
        return "no lower bound (the run has no alone or sequential rows)"
    where = ("on the whole device" if bound["mode"] == "sequential" else f"alone on {bound['sm_count']} SMs")
    text = (f"no layout can beat {_ms(bound['lower_bound_ms'])}: {bound['workload']} {where} "
            f"(its fastest solo time at any measured size; p10-p90 {bound['p10_ms']:.3f}-{bound['p90_ms']:.3f} ms)")
    if math.isfinite(bound["resource_ms"]) and bound["resource_ms"] >= bound["measured_ms"]:
        text = f"no layout can beat {_ms(bound['lower_bound_ms'])}: {bound['resource_note']}"
    return text


def outcome_sentence(facts: dict) -> str:
    """Whether overlap pays at the best split, as :func:`~gcexplore.analysis.verdict_facts` judged it."""
    seq, streams = facts["vs_sequential"], facts["vs_streams"]
    if seq == "does not pay":
        return "overlap does not pay here: even the best split is slower than running one after the other"
    if seq == "even":
        return ("overlap is about even with running one after the other here "
                "(the p10-p90 ranges of the repetitions overlap)")
    if seq == "unknown":
        return "no verdict: the run lacks sequential rows"
    tail = {"pays": "and than two plain streams",
            "even": "but two plain streams do as well within the spread of the repetitions",
            "does not pay": "but two plain streams are faster still",
            "unknown": "(no plain-streams rows to compare)"}[streams]
    return f"overlap pays: the best split is faster than running one after the other beyond the spread, {tail}"


def verdict(df: pd.DataFrame) -> str:
    """Three lines about the best split, every number and judgement computed from ``df``."""
    f = A.verdict_facts(df)
    b, c = f["best"], f["concurrent"]
    first = (f"best split {b['layout']}: concurrent {_ms(c['median_ms'])} (p10-p90 {c['p10_ms']:.3f}-"
             f"{c['p90_ms']:.3f}), {_x(b['speedup_vs_sequential'])} vs sequential "
             f"({_baseline_text(df, b['layout'], b['sequential_ms'])}), "
             f"{_x(b['speedup_vs_streams'])} vs plain streams ({_ms(b['streams_ms'])})")
    takes = _x(1 / b["efficiency"] if b["efficiency"] else math.nan)
    second = (f"{bound_sentence(f['bound'])}; the best split takes {takes} "
              f"that = split loss {_x(b['split_loss'])} (interference-free {_ms(b['interference_free_ms'])}) "
              f"x interference {_x(b['interference'])}")
    return f"{first}\n{second}\n{outcome_sentence(f)}"


def _baseline_text(df: pd.DataFrame, layout: str, next_ms: float) -> str:
    """Which sequential run a speedup divides by: the one measured next to the split (the
    guide's ``speedup_vs_sequential``), and against the run's median where they differ."""
    if not (df["mode"] == "sequential").any() or df["layout"].nunique() < 2:
        return _ms(next_ms)
    b = A.baseline_choice(df, layout)
    place = ("the highest" if b["rank"] == 1 else "the lowest" if b["rank"] == b["layouts"]
             else f"number {b['rank']} from the highest")
    return (f"{_ms(b['next_ms'])} measured next to it, {place} of the {b['layouts']} layouts' sequential medians; "
            f"{_x(b['speedup_median'])} vs the median of all sequential repetitions, {_ms(b['median_ms'])}")


def alone_sentence(summary: pd.DataFrame, layout: str) -> str:
    """What the ``alone`` rows' makespan is: the workloads' solo runs one after the other,
    each on its own partition, set beside the sequential makespan on the whole device."""
    s = summary[summary["layout"] == layout]
    alone = s[s["mode"] == "alone"]
    if alone.empty:
        return f"layout {layout} has no alone rows"
    parts = " then ".join(f"{r.workload} on {r.partition} ({r.sm_count} SMs, median {r.median_ms:.3f} ms)"
                          for r in alone.itertuples())
    text = (f"the alone makespan {_ms(alone['makespan_median_ms'].iloc[0])} is not a way to run the pair: each "
            f"repetition runs {parts} one after the other, each alone on its own partition")
    seq = s[s["mode"] == "sequential"]
    if not seq.empty:
        text += (f"; sequential runs the same one after the other on all {int(seq['sm_count'].iloc[0])} SMs: "
                 f"{_ms(seq['makespan_median_ms'].iloc[0])}")
    return text


def layout_report(df: pd.DataFrame) -> str:
    """Heading (workloads, device, recorded or live, date), one line per layout with the
    best marked, and the :func:`verdict` lines.

    Parameters
    ----------
    df : pandas.DataFrame
        A :func:`gcexplore.sweep` or :func:`gcexplore.profile_overlap` result of one run.
    """
    summary = A.summarize(df)
    table = A.layout_table(summary)
    head = f"{' + '.join(A.workload_order(df))} — {stamp_text(df)}"
    if not (summary["mode"] == "concurrent").any():
        return f"{head}\n{table.drop(columns='split_sm_count').to_string(index=False)}"
    best = A.best_split(summary)
    shown = table[REPORT_COLUMNS].copy()
    shown.insert(0, "best", ["*" if lay == best["layout"] else "" for lay in shown["layout"]])
    text = shown.to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep="-")
    return f"{head}\n{text}\n{verdict(df)}"
