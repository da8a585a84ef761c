"""Figure of an isolation result: the critical latency and the background time per scenario."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .. import analysis as A
from ..results.run import require_one_run
from ..results.validate import check_result
from ._style import fmt_value, mode_color, new_figure, ratio_text, require_result, stamp
from ..schema import SCENARIOS

__all__ = ["plot_isolation"]


def plot_isolation(df: pd.DataFrame, *, figsize=(9.0, 4.2)) -> Figure:
    """The critical workload's latency alone, next to the background on plain streams,
    and in its own partition; and the background's time in each case.

    Parameters
    ----------
    df : pandas.DataFrame
        Rows from :func:`gcexplore.isolation` (columns ``scenario``, ``role``,
        ``workload``, ``rep``, ``sm_count``, ``duration_ms``).
    figsize : tuple of float, default (9.0, 4.2)
        Figure size in inches.

    Returns
    -------
    matplotlib.figure.Figure
        Axes ``[critical, background]`` (only the first if no background rows); bars
        (Rectangles) have gids ``"critical:<scenario>"`` / ``"background:<scenario>"``;
        the critical bars are annotated with their ratio to ``alone``.
    """
    check_result(df, "isolation", "plot_isolation")
    require_result(df, ["scenario", "role", "sm_count", "duration_ms"], "plot_isolation",
             "the DataFrame from gcexplore.isolation()")
    require_one_run(df, "plot_isolation")
    crit = df[df["role"] == "critical"]
    if crit.empty:
        raise ValueError("plot_isolation needs rows with role 'critical'")
    summary = A.summarize(df)
    slowdown = {(r.role, r.scenario): r.slowdown_vs_alone for r in summary.itertuples()}
    bg = df[df["role"] == "background"]
    fig = new_figure(figsize)
    axes = fig.subplots(1, 2 if not bg.empty else 1, squeeze=False)[0]
    colors = {"alone": "#7f7f7f", "streams": mode_color("streams"),
              "partitioned": mode_color("concurrent")}

    def bars(ax, rows, role, scale):
        # each panel names the *other* role: the critical kernel runs next to the
        # background, the background next to the critical launches
        other = "background" if role == "critical" else "critical launches"
        captions = {"alone": "alone", "streams": f"next to\n{other}\nplain streams",
                    "partitioned": f"next to\n{other}\nown partition"}
        scen = [s for s in SCENARIOS if s in set(rows["scenario"])]
        scen += [s for s in dict.fromkeys(rows["scenario"]) if s not in scen]
        meds, tops, labels = {}, {}, []
        for i, s in enumerate(scen):
            srows = rows[rows["scenario"] == s]
            med, lo, hi = (v * scale for v in A.quantiles(srows["duration_ms"]))
            cont = ax.bar([i], [med], yerr=[[med - lo], [hi - med]], capsize=4,
                          color=colors.get(s, "#2ca02c"))
            cont.patches[0].set_gid(f"{role}:{s}")
            meds[s] = med
            tops[s] = max(med, hi)
            labels.append(f"{captions.get(s, s)}\n({int(srows['sm_count'].iloc[0])} SMs)")
        ax.set_xticks(range(len(scen)), labels, fontsize=7)
        # headroom for two lines of annotation above the tallest bar, inside the axes
        ax.set_ylim(0, max(tops.values()) * 1.28)
        ax.grid(True, axis="y", alpha=0.3)
        return scen, meds, tops

    crit_ms = A.quantiles(crit["duration_ms"])[0]
    scale, unit = (1e3, "µs") if crit_ms < 1.0 else (1.0, "ms")
    scen, meds, tops = bars(axes[0], crit, "critical", scale)
    for i, s in enumerate(scen):
        text = f"{fmt_value(meds[s])} {unit}"
        ratio = slowdown.get(("critical", s), np.nan)
        if s != "alone" and np.isfinite(ratio):
            text += f"\n{ratio_text(ratio)} alone"
        axes[0].annotate(text, (i, tops[s]), textcoords="offset points", xytext=(0, 3),
                         ha="center", va="bottom", fontsize=7)
    name = crit["workload"].iloc[0] if "workload" in crit else "critical"
    axes[0].set_ylabel(f"critical latency, launch to completion ({unit})")
    axes[0].set_title(f"critical workload ({name}): median, p10–p90 bars", fontsize=10)
    if not bg.empty:
        bscen, bmeds, btops = bars(axes[1], bg, "background", 1.0)
        for i, s in enumerate(bscen):
            text = f"{fmt_value(bmeds[s])} ms"
            ratio = slowdown.get(("background", s), np.nan)
            if s != "alone" and np.isfinite(ratio):
                text += f"\n{ratio_text(ratio)} alone"
            axes[1].annotate(text, (i, btops[s]), textcoords="offset points",
                             xytext=(0, 3), ha="center", va="bottom", fontsize=7)
        bname = bg["workload"].iloc[0] if "workload" in bg else "background"
        axes[1].set_ylabel("background time per launch (ms)")
        axes[1].set_title(f"background ({bname}): median, p10–p90 bars", fontsize=10)
    stamp(fig, df, _headline(summary))
    return fig


def _headline(summary: pd.DataFrame) -> str:
    """The takeaway: the critical latency's slowdown per scenario and what the background pays."""
    # rows by (role, scenario); pandas-stubs types a row's fields as any scalar
    by: dict[Any, Any] = {(r.role, r.scenario): r for r in summary.itertuples()}
    parts = []
    crit = [by[("critical", s)] for s in ("streams", "partitioned") if ("critical", s) in by]
    if crit:
        where = {"streams": "next to the background on plain streams",
                 "partitioned": "in its own {n}-SM partition"}
        parts.append("critical latency: " + ", ".join(
            f"{ratio_text(r.slowdown_vs_alone)} alone {where[r.scenario].format(n=int(r.sm_count))}"
            for r in crit if np.isfinite(r.slowdown_vs_alone)))
    bg = by.get(("background", "partitioned"))
    if bg is not None and np.isfinite(bg.slowdown_vs_alone):
        parts.append(f"the background: {ratio_text(bg.slowdown_vs_alone)} its time alone, on the "
                     f"{int(bg.sm_count)} SMs left to it")
    return "\n".join(p for p in parts if not p.endswith("latency: "))
