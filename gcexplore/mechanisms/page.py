"""The course page "Green contexts, MPS or streams?", written from a recorded run: every number and
sentence on it comes from :func:`.analysis.mechanisms_table` of that run.

The run ships as ``gcexplore/data/mechanisms.parquet`` (``bench/mechanisms.py`` records it on a GPU);
:func:`load_mechanisms` reads it.
"""

from __future__ import annotations

import pandas as pd

from ..results.io import load_recorded
from .analysis import mechanism_label, mechanisms_sentences, mechanisms_table
from .kind import CLOCKS, KIND

__all__ = ["load_mechanisms", "mechanisms_page"]

#: The name of the shipped run (``load_recorded(RECORDED_NAME)``).
RECORDED_NAME = "mechanisms"


def load_mechanisms() -> pd.DataFrame:
    """The mechanisms run recorded on the project's GPU (FileNotFoundError until it ships)."""
    try:
        return load_recorded(RECORDED_NAME)
    except FileNotFoundError as e:
        raise FileNotFoundError(
            f"{e}; for this run: PYTHONPATH=. python bench/mechanisms.py OUT on a GPU, then copy "
            "OUT/mechanisms.parquet to gcexplore/data/"
        ) from None


def _table_md(table: pd.DataFrame) -> str:
    head = (
        "| split | mechanism | makespan ms (p10-p90) | critical median ms | critical p99 ms | "
        "critical slowdown | other median ms | other slowdown | SMs (critical / other) |"
    )
    lines = [head, "|" + "---|" * 9]
    for r in table.itertuples(index=False):
        lines.append(
            f"| {r.layout} | {mechanism_label(str(r.mechanism))} | {r.makespan_ms:.3f} ({r.makespan_p10_ms:.3f}-"
            f"{r.makespan_p90_ms:.3f}) | {r.critical_ms:.3f} | {r.critical_p99_ms:.3f} | "
            f"{r.critical_interference:.2f}x | {r.other_ms:.3f} | {r.other_interference:.2f}x | "
            f"{r.critical_sms} / {r.other_sms} |"
        )
    return "\n".join(lines)


def mechanisms_page(df: pd.DataFrame | None = None) -> str:
    """The course page as Markdown, over ``df`` (default the shipped run, :func:`load_mechanisms`).

    One section per run in ``df`` (one pair each; a recorded file holds several): the table, a sentence per
    split, and how the MPS clients' times were put on one clock.
    """
    if df is None:
        df = load_mechanisms()
    if df.attrs.get("kind") not in (None, KIND):
        raise ValueError(f"mechanisms_page takes a mechanisms result, got kind {df.attrs.get('kind')!r}")
    device = str(df["device_name"].iloc[0]) if "device_name" in df.columns and len(df) else "the GPU"
    out = [
        "# Green contexts, MPS or streams?",
        "",
        (
            f"The same pair of workloads, on {device}, under every way of sharing the card: green contexts "
            "(a partition each), MPS (a client process each, its active-thread percentage set to its share), "
            "two plain streams, plain streams with the critical workload's at the highest priority, and one "
            "after another. Slowdown is a workload's median time over its time alone on the whole card."
        ),
        "",
    ]
    for _, part in df.groupby("run_id", sort=False):  # one run per pair
        table = mechanisms_table(part)
        title = f"{table['critical'].iloc[0]} beside {table['other'].iloc[0]}"
        out += [f"## {title}", "", _table_md(table), ""]
        out += [f"- {s}" for s in mechanisms_sentences(table)] + [""]
    used = sorted(set(df["clock"]))
    out += ["## One clock", ""] + [f"- `{c}`: {CLOCKS.get(c, c)}." for c in used] + [""]
    return "\n".join(out)
