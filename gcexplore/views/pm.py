"""DRAM throughput and SM activity over time (PM samples) under each repetition's kernels."""

from __future__ import annotations

import math
import textwrap

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..analysis.pm import dram_headline
from ..analysis.pm import dram_summary
from ..results.run import require_one_run
from ._style import WORKLOAD_COLORS, figure_stamp, mode_label, new_figure
from ..results.validate import check_result

__all__ = ["plot_dram_timeline"]


def plot_dram_timeline(samples: pd.DataFrame, trace: pd.DataFrame, *, rep: int = 0, figsize=None) -> Figure:
    """One panel per mode (its repetition group): device-wide counters over time above the kernels.

    DRAM throughput (% of peak) is a solid step line, the share of SMs active (where
    the metric set has it) a dashed one; under them, each workload's kernels (CUPTI
    spans) as bars. Counters are device-wide: with two partitions busy they count
    both. Each panel's title gives the device-wide means while each workload ran and
    while all ran together (:func:`gcexplore.dram_summary`); the figure's title says
    what the sample shows (:func:`gcexplore.analysis.dram_headline`: together against
    the larger alone mean) when the run has each workload alone and all concurrently.

    Parameters
    ----------
    samples : pandas.DataFrame
        Kind ``"pm"`` from :func:`gcexplore.dram_timeline`.
    trace : pandas.DataFrame
        The trace of the same run.
    rep : int, default 0
        Which repetition.
    figsize : tuple of float, optional

    Returns
    -------
    matplotlib.figure.Figure
        DRAM lines carry gid ``"dram:<mode>:<workloads>"``, SM lines ``"sm_active:..."``,
        kernel bars ``"kernel:<workload>"``.
    """

    check_result(samples, "pm", "plot_dram_timeline")
    require_one_run(samples, "plot_dram_timeline")
    summary = dram_summary(samples, trace)
    summary = summary[summary["rep"] == rep]
    if summary.empty:
        raise ValueError(f"no repetition {rep} in these samples; repetitions are {sorted(set(samples['rep']))}")
    groups = summary.drop_duplicates(["layout", "mode", "workloads"])
    wls = list(dict.fromkeys(trace["workload"]))
    colors = {w: WORKLOAD_COLORS[i % len(WORKLOAD_COLORS)] for i, w in enumerate(wls)}
    fig = new_figure(figsize or (11.0, 1.2 + 2.4 * len(groups)))
    axes = fig.subplots(len(groups), 1, squeeze=False, sharex=True)[:, 0]
    for ax, g in zip(axes, groups.itertuples()):
        s = samples[(samples["mode"] == g.mode) & (samples["rep"] == rep) & (samples["workloads"] == g.workloads)
                    & (samples["layout"] == g.layout)].sort_values("start_ms")
        x = [*s["start_ms"], s["end_ms"].iloc[-1]]
        ax.step(x, [*s["dram_pct"], s["dram_pct"].iloc[-1]], where="post", color="#1f3b73", linewidth=1.4,
                label="DRAM throughput, % of peak", gid=f"dram:{g.mode}:{g.workloads}")
        if s["sm_active_pct"].notna().any():
            ax.step(x, [*s["sm_active_pct"], s["sm_active_pct"].iloc[-1]], where="post", color="#2ca02c",
                    linestyle="--", linewidth=1.2, label="SMs active, % of all SMs",
                    gid=f"sm_active:{g.mode}:{g.workloads}")
        names = g.workloads.split("+")
        k = trace[(trace["layout"] == g.layout) & (trace["mode"] == g.mode) & (trace["rep"] == rep)
                  & trace["workload"].isin(names)]
        for i, (wl, kw) in enumerate(k.groupby("workload", sort=False)):
            part = f"{kw['partition'].iloc[0]}, {int(kw['sm_count'].iloc[0])} SMs"
            ax.broken_barh(list(zip(kw["start_ms"], kw["end_ms"] - kw["start_ms"])), (-9 - 9 * i, 7),
                           facecolors=colors[wl], gid=f"kernel:{wl}")
            ax.text(float(kw["start_ms"].min()), -5.5 - 9 * i, f" {wl} ({part})", fontsize=7, va="center")
        ax.set_ylim(-2 - 9 * max(len(names), 1), 105)
        ax.set_yticks([0, 25, 50, 75, 100])
        ax.set_ylabel("% (device-wide)", fontsize=8)
        ax.grid(True, alpha=0.3)
        rows = summary[(summary["mode"] == g.mode) & (summary["workloads"] == g.workloads)
                       & (summary["layout"] == g.layout)]
        ax.set_title("\n".join(textwrap.wrap(f"{mode_label(g.mode)} — " + "; ".join(
            _means_text(r) for r in rows.itertuples()), 110)), fontsize=8.5)
    axes[0].legend(handles=[*axes[0].get_legend_handles_labels()[0],
                            *[Patch(color=c, label=w) for w, c in colors.items()]], fontsize=7,
                   loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[-1].set_xlabel("time since the repetition's common start (ms; PM samples and CUPTI kernel records)")
    fig.suptitle(f"{figure_stamp(samples.attrs)}\nPM sampling every {samples.attrs.get('interval_us', '?')} µs, "
                 f"layout {groups['layout'].iloc[0]}, repetition {rep}{_headline(summary)}", fontsize=9, color="0.2")
    return fig


def _headline(summary: pd.DataFrame) -> str:
    """What this sample shows about sharing DRAM (:func:`gcexplore.analysis.dram_headline`)."""
    h = dram_headline(summary)
    if h is None:
        return ""
    parts = " and ".join(f"{w} {v:.0f}%" for w, v in h["alone"].items())
    text = f"device DRAM while each ran alone: {parts} of peak; while all ran together {h['together']:.0f}%"
    top = f"{h['top']} alone ({h['alone'][h['top']]:.0f}%)"
    return ":\n" + "\n".join(textwrap.wrap(text + {
        "no more than one alone": f", no more than {top}: the SMs were split, DRAM bandwidth was not",
        "adds up": f", the sum of the alone means ({h['sum']:.0f}%): DRAM had room for both",
        "more than one alone, less than both": f", {h['added']:.0f} points over {top}, short of "
                                               f"{min(h['sum'], 100.0):.0f}%: both drew on one DRAM",
    }[h["verdict"]], 120))


def _means_text(r) -> str:
    # counters are device-wide: a mean "while X ran" counts whatever else ran then too
    who = f"while {r.workload.replace('+', ' and ')} ran together" if "+" in r.workload else f"while {r.workload} ran"
    sm = "" if math.isnan(r.sm_active_pct) else f", SMs active {r.sm_active_pct:.0f}%"
    return f"{who}: device DRAM {r.dram_pct:.0f}% of peak{sm}"


