"""The mechanisms figure: makespan and the critical workload's p99 per mechanism and split, drawn
from :func:`.analysis.mechanisms_table` (this module computes no number)."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd

from ..views._style import WORKLOAD_COLORS, new_figure, plain_text, stamp
from .analysis import mechanism_label, mechanisms_sentences, mechanisms_table

__all__ = ["plot_mechanisms"]


def plot_mechanisms(df: pd.DataFrame):
    """Two panels, grouped bars per split: the pair's median makespan (p10-p90 whiskers) and the
    critical workload's p99, one colour per mechanism; the first split's sentence on top.

    Parameters
    ----------
    df : pandas.DataFrame
        What :func:`gcexplore.mechanisms` returns (or ``load_mechanisms()``).

    Returns
    -------
    matplotlib.figure.Figure
    """
    table = mechanisms_table(df)
    splits = sorted(table["split_sm_count"].unique())
    mechs = list(dict.fromkeys(table["mechanism"]))
    fig = new_figure(figsize=(10.0, 4.8))
    axes = fig.subplots(1, 2)
    width = 0.8 / max(1, len(mechs))
    x = np.arange(len(splits))
    for i, mech in enumerate(mechs):
        rows = table[table["mechanism"] == mech].set_index("split_sm_count").reindex(splits)
        colour = WORKLOAD_COLORS[i % len(WORKLOAD_COLORS)]
        pos = x - 0.4 + width * (i + 0.5)
        err = np.vstack([rows["makespan_ms"] - rows["makespan_p10_ms"], rows["makespan_p90_ms"] - rows["makespan_ms"]])
        axes[0].bar(pos, rows["makespan_ms"], width, yerr=err, color=colour, label=mechanism_label(mech), capsize=2)
        axes[1].bar(pos, rows["critical_p99_ms"], width, color=colour, label=mechanism_label(mech))
    layouts = table.drop_duplicates("split_sm_count").set_index("split_sm_count")["layout"].reindex(splits)
    critical = plain_text(table["critical"].iloc[0])
    for ax, title in ((axes[0], "makespan of the pair (median, p10-p90)"), (axes[1], f"{critical}: p99 time")):
        ax.set_xticks(x, [f"{k} SMs\n({lay})" for k, lay in layouts.items()])
        ax.set_xlabel(f"{critical}'s share")
        ax.set_ylabel("ms")
        ax.set_title(title, fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(mechs), fontsize=8, frameon=False)
    sentences = mechanisms_sentences(table)
    stamp(fig, df, textwrap.fill(sentences[0], 150) if sentences else "")
    return fig
