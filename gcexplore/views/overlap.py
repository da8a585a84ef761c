"""Figures of an overlap result or sweep: makespan against the split, throughput per mode."""

from __future__ import annotations

from typing import cast

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .. import analysis as A
from ..results.run import require_one_run
from ..results.validate import open_run
from ._style import metric_label, mode_color, mode_label, new_figure, panel_format, require_result, stamp
from ..schema import layout_key

__all__ = ["plot_sweep", "plot_throughput"]


def plot_sweep(df: pd.DataFrame, *, summary: pd.DataFrame | None = None, chosen: str | int | None = None,
               figsize=(8.0, 5.0)) -> Figure:
    """Makespan against the first partition's SM count, on a log axis.

    Draws the median concurrent makespan of every measured split with p10-p90 error
    bars and band; the interference-free makespan of each split (the slowest workload
    alone on its partition: what the split would give if partitions shared nothing);
    the sequential and plain-streams baselines (medians over all layouts: both run on
    the whole device, so the split does not change them; drawn in two styles so the
    one on top never hides the other); the lower bound of
    :func:`gcexplore.analysis.lower_bound`, with its value and the measurement that
    sets it; and the best split (the rule of :func:`gcexplore.best_split`). The y axis
    is logarithmic so that a slow split at one end does not squeeze the region near
    the bound where the answer lies.

    Parameters
    ----------
    df : pandas.DataFrame
        Rows from :func:`gcexplore.sweep` or :func:`gcexplore.profile_overlap`
        (columns ``layout``, ``split_sm_count``, ``mode``, ``rep``, ``workload``,
        ``partition``, ``makespan_ms``).
    summary : pandas.DataFrame, optional
        ``gcexplore.summarize(df)`` if already computed; computed here otherwise.
    chosen : str or int, optional
        A split to mark (a layout such as ``"24+108"`` or the first partition's SM
        count), e.g. the one an explorer's slider stands on: a vertical line and its
        median concurrent makespan.
    figsize : tuple of float, default (8.0, 5.0)
        Figure size in inches.

    Returns
    -------
    matplotlib.figure.Figure
        One Axes; lines carry gids ``"concurrent"``, ``"interference_free"``,
        ``"sequential"``, ``"streams"``, ``"lower_bound"``, ``"best"``, ``"chosen"`` (when
        given) and the band ``"concurrent_band"``.
    """
    open_run(df, "overlap", "plot_sweep", one_run=False)  # checked once per frame
    require_result(df, ["layout", "split_sm_count", "mode", "rep", "workload", "partition",
                  "makespan_ms"], "plot_sweep",
             "the DataFrame from gcexplore.sweep() or gcexplore.profile_overlap()")
    require_one_run(df, "plot_sweep")
    if not (df["mode"] == "concurrent").any():
        raise ValueError("plot_sweep needs 'concurrent' rows; this DataFrame has modes "
                         f"{A.modes_in(df)}")
    if summary is None:
        summary = cast(pd.DataFrame, A.summarize(df))  # the lazy face's names are Any to the checker

    fig = new_figure(figsize)
    ax = fig.add_subplot()
    _sweep_concurrent(ax, df, summary)
    _sweep_baselines(ax, df)
    table = A.layout_table(summary)
    bound = summary.attrs.get("lower_bound") or A.lower_bound(df).to_dict()
    lb = table[["split_sm_count", "lower_bound_ms"]].dropna()
    if not lb.empty:
        where = ("whole device" if bound.get("mode") == "sequential" else f"{bound.get('sm_count')} SMs")
        ax.plot(lb["split_sm_count"], lb["lower_bound_ms"], color="0.2", linestyle=":", linewidth=1.5,
                label=f"lower bound: {lb['lower_bound_ms'].iloc[0]:.3f} ms ({bound.get('workload')} alone, {where})",
                gid="lower_bound")

    best = A.best_split(summary)
    vs = ""
    if pd.notna(best["speedup_vs_sequential"]):
        b = A.baseline_choice(df, best["layout"], summary=summary)
        # the line drawn is the median sequential; the summary's speedup uses the one next to the split
        vs = (f", {b['speedup_median']:.2f}x vs the sequential line"
              + (f" ({b['speedup_next']:.2f}x vs the one measured next to it)"
                 if f"{b['speedup_next']:.2f}" != f"{b['speedup_median']:.2f}" else ""))
    ax.plot([best["split_sm_count"]], [best["concurrent_ms"]], marker="*", ms=16, color="gold",
            markeredgecolor="black", linestyle="none", zorder=5,
            label=f"best split {best['layout']}: {best['concurrent_ms']:.3g} ms{vs}", gid="best")
    _mark_chosen(ax, table, chosen)

    order = A.workload_order(df)
    ax.set_xlabel(f"SMs of the first partition ({order[0]})")
    ax.set_ylabel("makespan (ms)")
    ax.set_title(f"Overlap sweep: {' + '.join(order)}")
    ax.set_xticks(table["split_sm_count"])
    ax.tick_params(axis="x", labelsize=7)
    _log_ms_axis(ax)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper center")
    stamp(fig, df)
    return fig


def _mark_chosen(ax, table: pd.DataFrame, chosen) -> None:
    if chosen is None:
        return
    key = "layout" if isinstance(chosen, str) else "split_sm_count"
    row = table[table[key] == chosen]
    if row.empty:
        raise ValueError(f"chosen split {chosen!r} was not measured; layouts {list(table['layout'])}")
    r = row.iloc[0]
    ax.axvline(r["split_sm_count"], color="0.35", linestyle="--", linewidth=1.0, zorder=2, gid="chosen",
               label=f"chosen split {r['layout']}: {r['concurrent_ms']:.3g} ms")


def _sweep_concurrent(ax, df: pd.DataFrame, summary: pd.DataFrame) -> None:
    per_layout = A.makespan_stats(df, "concurrent")
    x = per_layout["split_sm_count"].to_numpy()
    med, lo, hi = (per_layout[c].to_numpy(dtype=float) for c in ("median_ms", "p10_ms", "p90_ms"))
    widest = float(np.nanmax((hi - lo) / med)) if len(med) else float("nan")
    color = mode_color("concurrent")
    band = ax.fill_between(x, lo, hi, color=color, alpha=0.25, linewidth=0)
    band.set_gid("concurrent_band")
    ax.errorbar(x, med, yerr=[med - lo, hi - med], fmt="none", ecolor=color, elinewidth=1, capsize=3)
    ax.plot(x, med, marker="o", ms=4, color=color, gid="concurrent",
            label=(f"{mode_label('concurrent')}: median, p10–p90 bars "
                   f"(widest {widest:.1%} of the median)"))
    table = A.layout_table(summary)
    free = table[["split_sm_count", "interference_free_ms"]].dropna()
    if not free.empty:
        # hollow markers on top: visible also where the curve runs over them (no interference)
        ax.plot(free["split_sm_count"], free["interference_free_ms"], color="black", linestyle="none",
                marker="D", ms=7, markerfacecolor="none", markeredgewidth=0.9, zorder=4, gid="interference_free",
                label="interference-free: slowest workload alone on its partition")


def _sweep_baselines(ax, df: pd.DataFrame) -> None:
    # Sequential underneath, wide and pale; plain streams on top, thin and dashed: two
    # baselines a few percent apart stay distinguishable.
    styles = {"sequential": {"linestyle": "-", "linewidth": 4.0, "alpha": 0.35, "zorder": 1},
              "streams": {"linestyle": (0, (5, 3)), "linewidth": 1.4, "alpha": 1.0, "zorder": 3}}
    for mode in A.modes_in(df):
        if mode in ("alone", "concurrent"):
            continue  # alone is per partition, not a makespan of the pair
        med = A.baseline_ms(df, mode)
        ax.axhline(med, color=mode_color(mode), label=f"{mode_label(mode)}: {med:.3g} ms", gid=mode,
                   **styles.get(mode, {"linestyle": "-.", "linewidth": 1.2}))


def _log_ms_axis(ax) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo * 0.9, hi * 1.6)  # room for the legend above the curve


# ---------------------------------------------------------------------- throughput


def plot_throughput(df: pd.DataFrame, *, layout: str | None = None, metric: str = "auto",
                    figsize=None, trace: pd.DataFrame | None = None) -> Figure:
    """Throughput of each workload on its partition, one bar per mode.

    One panel per workload (workloads declare different units: TFLOP/s for FLOPs,
    GB/s for bytes, calls per second when nothing was declared); in each panel a bar
    per mode at the median with a p10/p90 error bar, labelled with the partition and
    its SM count.

    Parameters
    ----------
    df : pandas.DataFrame
        Rows from :func:`gcexplore.profile_overlap` or :func:`gcexplore.sweep`.
    layout : str, optional
        Which layout (e.g. ``"24+108"``) to draw; default the only one, or for a sweep
        the best split (lowest median concurrent makespan).
    metric : str, default "auto"
        ``"auto"`` (declared FLOPs, else bytes, else calls per second; GB/s when
        both are declared at under 1 FLOP per byte),
        ``"throughput_tflops"``, ``"bandwidth_gbs"``, ``"calls_per_s"`` or
        ``"duration_ms"``.
    figsize : tuple of float, optional
        Figure size in inches; default scales with the number of workloads.
    trace : pandas.DataFrame, optional
        The kernel trace of the same run (``trace=True``): rates come from each
        workload's GPU-busy time in every mode. Without it, a mode whose event span
        may include waiting for SMs (plain streams) gets no rate bar but a note why.

    Returns
    -------
    matplotlib.figure.Figure
        One Axes per workload; each bar (a Rectangle) has gid ``"bar:<workload>:<mode>"``;
        a withheld rate is a text with gid ``"withheld:<workload>:<mode>"``. With ``trace``, a
        plain-streams rate is a lower bound (a kernel's CUPTI span can still hold part of its
        wait for SMs): its bar is hatched, its tick says "lower bound" and its value, a text
        with gid ``"lower_bound:<workload>:<mode>"``, reads "≥ value".
    """
    open_run(df, "overlap", "plot_throughput", one_run=False)
    require_result(df, ["layout", "mode", "workload", "partition", "sm_count", "duration_ms"],
             "plot_throughput",
             "the DataFrame from gcexplore.profile_overlap() or gcexplore.sweep()")
    require_one_run(df, "plot_throughput")
    layouts = list(dict.fromkeys(df["layout"]))
    if layout is None:
        layout = layouts[0] if len(layouts) == 1 else A.best_layout(df)
    elif layout not in layouts:
        raise ValueError(f"layout {layout!r} was not measured; measured layouts: "
                         f"{sorted(layouts, key=layout_key)}")
    rows = df[df["layout"] == layout]
    if trace is not None:
        from ..analysis.trace import trace_rates

        rows = trace_rates(rows, trace)
    workloads = list(dict.fromkeys(rows["workload"]))
    if figsize is None:
        figsize = (max(4.0, 3.6 * len(workloads)), 4.2)
    fig = new_figure(figsize)
    axes = fig.subplots(1, len(workloads), squeeze=False)[0]
    for ax, workload in zip(axes, workloads):
        wrows = rows[rows["workload"] == workload]
        _, metric_used = A.rates(wrows, metric)
        labels, drawn = [], []
        for i, mode in enumerate(A.modes_in(wrows)):
            mrows = wrows[wrows["mode"] == mode]
            part = mrows["partition"].iloc[0]
            labels.append(f"{mode}\n{part}\n{int(mrows['sm_count'].iloc[0])} SMs")
            if trace is None and mode in A.SPAN_INCLUDES_WAIT and metric_used != "duration_ms":
                ax.text(i, 0.03, "no rate:\nspan includes\nwait for SMs", ha="center", va="bottom",
                        transform=ax.get_xaxis_transform(), fontsize=6.5, color=mode_color(mode),
                        bbox={"facecolor": "white", "edgecolor": "none", "pad": 1},
                        gid=f"withheld:{workload}:{mode}")
                continue
            values, _ = A.rates(mrows, metric_used)
            med, lo, hi = A.quantiles(values)
            # from a trace, a plain-streams kernel's CUPTI span can still hold part of its
            # wait for SMs (guide: "Kernel traces"), so its rate is a lower bound
            floor = trace is not None and mode in A.SPAN_INCLUDES_WAIT and metric_used != "duration_ms"
            cont = ax.bar([i], [med], yerr=[[med - lo], [hi - med]], capsize=4, color=mode_color(mode),
                          label=mode_label(mode), hatch="//" if floor else None,
                          edgecolor="white" if floor else None, linewidth=0)
            cont.patches[0].set_gid(f"bar:{workload}:{mode}")
            if floor:
                labels[-1] += "\nlower bound"
            drawn.append((i, med, hi, floor))
        fmt = panel_format([d[1] for d in drawn])
        for i, med, hi, floor in drawn:
            ax.annotate(("≥ " if floor else "") + fmt.format(med), (i, max(med, hi)), textcoords="offset points",
                        xytext=(0, 3), ha="center", va="bottom", fontsize=7,
                        gid=f"lower_bound:{workload}:{A.modes_in(wrows)[i]}" if floor else None)
        ax.text(0.99, 0.99, "median; bars: p10–p90", transform=ax.transAxes, ha="right", va="top",
                fontsize=7, color="0.3")
        ax.set_xticks(range(len(labels)), labels, fontsize=7)
        ax.set_xlim(-0.6, len(labels) - 0.4)  # a withheld rate has no bar but keeps its slot inside the axes
        ax.set_ylabel(metric_label(metric_used) + (", from GPU-busy time" if trace is not None else ""))
        ax.set_title(f"{workload} — layout {layout}", fontsize=10)
        ax.set_ylim(0, max((d[2] for d in drawn if np.isfinite(d[2])), default=1.0) * 1.18)
        ax.grid(True, axis="y", alpha=0.3)
    stamp(fig, df)
    return fig
