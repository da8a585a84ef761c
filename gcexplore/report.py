"""Text reports of results, shared by ``gcexplore demo`` and ``gcexplore sweep/profile``.

Every number printed here comes from :mod:`gcexplore.analysis`; this module only lays
it out, so the demo and the command line print the same table for the same data.
"""

from __future__ import annotations

import math

import pandas as pd

from . import analysis as A
from .plot import figure_stamp

__all__ = ["layout_report", "verdict"]


def _x(v) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}x"


def verdict(best: pd.Series) -> str:
    """The closing line about the best split, every number taken from ``best``."""
    pays = best["speedup_vs_sequential"] > 1.0
    return (f"best split {best['layout']}: concurrent {best['concurrent_ms']:.3f} ms, "
            f"{_x(best['speedup_vs_sequential'])} vs sequential ({best['sequential_ms']:.3f} ms), "
            f"{_x(best['speedup_vs_streams'])} vs plain streams ({best['streams_ms']:.3f} ms), "
            f"lower bound {best['lower_bound_ms']:.3f} ms (efficiency {best['efficiency']:.2f}) — "
            f"{'overlap pays' if pays else 'overlap does not pay here'}")


def layout_report(df: pd.DataFrame) -> str:
    """Heading (workloads, device, recorded or live, date), one line per layout with the
    best marked, and the :func:`verdict` line.

    Parameters
    ----------
    df : pandas.DataFrame
        A :func:`gcexplore.sweep` or :func:`gcexplore.profile_overlap` result of one run.
    """
    summary = A.summarize(df)
    table = A.layout_table(summary)
    head = f"{' + '.join(A.workload_order(df))} — {figure_stamp(df.attrs)}"
    if not (summary["mode"] == "concurrent").any():
        return f"{head}\n{table.drop(columns='split_sm_count').to_string(index=False)}"
    best = A.best_split(summary)
    shown = table.drop(columns="split_sm_count")
    shown.insert(0, "best", ["*" if lay == best["layout"] else "" for lay in shown["layout"]])
    text = shown.to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep="-")
    return f"{head}\n{text}\n{verdict(best)}"
