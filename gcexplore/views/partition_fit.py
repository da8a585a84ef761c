"""Figure of partition fit: time against SMs, with the plateaus of :func:`gcexplore.fit_table` and,
with a trace, the wave count of each size's longest kernel."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..analysis.waves import fit_table
from ._style import WORKLOAD_COLORS, new_figure, require_result, stamp

__all__ = ["plot_partition_fit"]


def plot_partition_fit(scaling_df: pd.DataFrame, trace: pd.DataFrame | None = None, *, figsize=None) -> Figure:
    """Median time against SMs per workload, the plateaus shaded, the wave count drawn.

    Parameters
    ----------
    scaling_df : pandas.DataFrame
        A :func:`gcexplore.scaling` result.
    trace : pandas.DataFrame, optional
        Its kernel trace (``scaling(..., trace=True)``): the longest kernel's waves per size
        are drawn as a step line on a second axis.
    figsize : tuple of float, optional

    Returns
    -------
    matplotlib.figure.Figure
        One Axes per workload: the median (gid ``"time:<workload>"``) with its interval, the
        linear ideal from the smallest size (``"ideal:<workload>"``), each plateau shaded
        (``"plateau:<workload>:<id>"``), and with a trace the waves (``"waves:<workload>"``).
        The title carries :func:`gcexplore.analysis.waves.fit_hints`.
    """
    require_result(scaling_df, ["workload", "sm_count", "duration_ms"], "plot_partition_fit",
                   "the DataFrame from gcexplore.scaling()")
    table = fit_table(scaling_df, trace)
    workloads = list(dict.fromkeys(table["workload"]))
    fig = new_figure(figsize or (max(6.8, 4.6 * len(workloads)), 4.8))
    axes = fig.subplots(1, len(workloads), squeeze=False)[0]
    for i, (ax, w) in enumerate(zip(axes, workloads)):
        t = table[table["workload"] == w].sort_values("sm_count")
        color = WORKLOAD_COLORS[i % len(WORKLOAD_COLORS)]
        ax.fill_between(t["sm_count"], t["low_ms"], t["high_ms"], color=color, alpha=0.2, linewidth=0)
        ax.plot(t["sm_count"], t["median_ms"], marker="o", ms=3, color=color, label=f"{w} (median)",
                gid=f"time:{w}")
        ax.plot(t["sm_count"], t["ideal_ms"], color="0.4", linestyle=":", linewidth=1, label="linear from smallest",
                gid=f"ideal:{w}")
        for pid, p in t[t["plateau"] >= 0].groupby("plateau"):
            lo, hi = p["plateau_start_sm"].iloc[0], p["plateau_end_sm"].iloc[0]
            ax.axvspan(lo, hi, color="#d62728", alpha=0.12, gid=f"plateau:{w}:{pid}",
                       label="plateau" if pid == t["plateau"][t["plateau"] >= 0].min() else None)
            ax.annotate(f"{int(p['wasted_sms'].max())} SMs\nbuy nothing", ((lo + hi) / 2, p["median_ms"].max()),
                        textcoords="offset points", xytext=(0, 10), ha="center", fontsize=8, color="#d62728")
        handles, labels = ax.get_legend_handles_labels()
        if t["waves"].notna().any():
            twin = ax.twinx()
            twin.plot(t["sm_count"], t["waves"].astype(float), drawstyle="steps-mid", color="0.2", linewidth=1.2,
                      marker="s", ms=2.5, label="waves (longest kernel)", gid=f"waves:{w}")
            twin.set_ylabel("waves of the longest kernel")
            twin.set_ylim(0, np.nanmax(t["waves"].astype(float)) * 1.3 + 0.5)
            twin.yaxis.set_major_locator(MaxNLocator(integer=True))
            h2, l2 = twin.get_legend_handles_labels()
            handles, labels = handles + h2, labels + l2
        ax.set_xlabel("SMs")
        ax.set_ylabel("time (ms), median and interval")
        top = np.nanmax(np.r_[t["median_ms"].to_numpy(float), t["high_ms"][np.isfinite(t["high_ms"])].to_numpy(float)])
        ax.set_ylim(0, top * 1.3 if np.isfinite(top) and top > 0 else None)  # room for the plateau's label
        ax.set_title(w, fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(handles, labels, fontsize=7, loc="lower left")
    hints = table.attrs["hints"]
    width = max(60, int(15 * fig.get_figwidth()))  # characters a line of the 9-point title holds
    text = "\n".join(textwrap.fill(h, width) for h in hints) if hints else "no plateau: every larger size was faster"
    stamp(fig, scaling_df, text)
    return fig
