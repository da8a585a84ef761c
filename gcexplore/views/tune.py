"""The tuner's figure: what it measured, in search order and per layout, the answer marked."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from .. import analysis as A
from ..results.run import require_one_run, run_of
from ._style import figure_stamp, mode_color, new_figure, require_result

__all__ = ["plot_tune"]


def _tune_search_order(ax, df: pd.DataFrame, table: pd.DataFrame, slo: bool) -> None:
    first = A.placement(df)[0][1]
    answer = df.attrs.get("answer")
    spans = run_of(df).rep_makespans()
    for step, g in df.groupby("step", sort=True):
        lay = g["layout"].iloc[0]
        vals = g[g["workload"] == first]["duration_ms"] if slo else spans[spans["step"] == step]["makespan_ms"]
        color = "goldenrod" if lay == answer else mode_color("concurrent")
        ax.plot(np.full(len(vals), step), vals, "o", ms=3.5, alpha=0.6, color=color, gid=f"step:{step}")
        ax.annotate(lay, (step, float(vals.max())), textcoords="offset points", xytext=(0, 4), ha="center",
                    fontsize=6.5, rotation=90 if len(table) > 8 else 0, va="bottom")
    if slo:
        ax.axhline(float(df.attrs["slo_ms"]), color="#d62728", linestyle="--", linewidth=1.2)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("search step (each a measurement of one layout)")
    ax.set_ylabel(("latency of the first workload" if slo else "concurrent makespan") + " (ms)")
    ax.set_title("measured repetitions in search order")
    ax.set_ylim(bottom=0, top=ax.get_ylim()[1] * 1.12)
    ax.grid(True, alpha=0.3)


def _tune_layouts(ax, df: pd.DataFrame, table: pd.DataFrame, slo: bool) -> None:
    col = "latency" if slo else "makespan"
    two = all(len(lay.split("+")) == 2 for lay in table["layout"])
    x = table["split_sm_count"].to_numpy() if two else np.arange(len(table))
    y = table[f"{col}_ms"].to_numpy(dtype=float)
    lo = np.where(np.isfinite(table[f"{col}_ci_low_ms"]), y - table[f"{col}_ci_low_ms"], np.nan)
    hi = np.where(np.isfinite(table[f"{col}_ci_high_ms"]), table[f"{col}_ci_high_ms"] - y, np.nan)
    ax.errorbar(x, y, yerr=[np.nan_to_num(lo), np.nan_to_num(hi)], fmt="o", ms=4, capsize=2,
                color=mode_color("concurrent"), label=f"measured: median, {df.attrs.get('confidence', 0.9):.0%} "
                                                       "interval", gid="measured")
    bounds = {k: v.get("bound_ms") for k, v in (df.attrs.get("unmeasured") or {}).items()}
    finite = [(int(k.split("+")[0]), b) for k, b in bounds.items() if b is not None and np.isfinite(b)]
    if two and finite and not slo:
        bx, by = zip(*sorted(finite))
        ax.plot(bx, by, "v", ms=4, color="0.55", linestyle="none", gid="bounds",
                label=f"not measured ({len(bounds)}): lower bound")
    if slo:
        ax.axhline(float(df.attrs["slo_ms"]), color="#d62728", linestyle="--", linewidth=1.2, gid="target",
                   label=f"target p{df.attrs.get('percentile', 50):g} <= {float(df.attrs['slo_ms']):.3g} ms")
    ans = table[table["answer"]]
    if len(ans):
        i = int(ans.index[0])
        ax.plot([x[i]], [y[i]], marker="*", ms=16, color="gold", markeredgecolor="black", linestyle="none",
                gid="answer", label=f"answer {ans['layout'].iloc[0]}: {y[i]:.3g} ms")
    elif df.attrs.get("best_measured") in set(table["layout"]):  # a target not met: the best latency
        i = int(table.index[table["layout"] == df.attrs["best_measured"]][0])
        ax.plot([x[i]], [y[i]], marker="X", ms=11, color="#d62728", linestyle="none", gid="best_measured",
                label=f"target not met; lowest: {y[i]:.3g} ms at {df.attrs['best_measured']}")
    if not two:
        ax.set_xticks(x, table["layout"], rotation=90, fontsize=7)
    ax.set_xlabel(f"SMs of the first partition ({A.workload_order(df)[0]})" if two else "layout")
    ax.set_ylabel(f"{col} (ms)")
    ax.set_title("layouts measured")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7.5, loc="best")


def plot_tune(df: pd.DataFrame, *, figsize=(11.0, 4.6)) -> Figure:
    """What the tuner measured, in search order and per layout, with the answer marked.

    Left: every measured repetition (makespan, or the first workload's latency for a
    latency target) at its search step, labelled with the layout. Right: the median and
    confidence interval of each measured layout (:func:`gcexplore.analysis.tune_table`),
    the lower bounds that ruled out the layouts not measured, the target if there is
    one, and the answer (a star; none when the target was not met).

    Parameters
    ----------
    df : pandas.DataFrame
        A :func:`gcexplore.tune` result.
    figsize : tuple of float, default (11.0, 4.6)

    Returns
    -------
    matplotlib.figure.Figure
        Two Axes; artists carry gids ``"step:<n>"``, ``"measured"``, ``"bounds"``,
        ``"target"`` and ``"answer"``.
    """
    require_result(df, ["layout", "split_sm_count", "step", "rep", "workload", "partition", "duration_ms",
                        "makespan_ms"], "plot_tune", "the DataFrame from gcexplore.tune()")
    require_one_run(df, "plot_tune")
    slo = df.attrs.get("slo_ms") is not None
    table = A.tune_table(df)
    fig = new_figure(figsize)
    left, right = fig.subplots(1, 2, width_ratios=[1.1, 1.0])
    _tune_search_order(left, df, table, slo)
    _tune_layouts(right, df, table, slo)
    a = df.attrs
    what = (f"smallest partition meeting p{a.get('percentile', 50):g} <= {float(a['slo_ms']):.3g} ms" if slo
            else "lowest concurrent makespan")
    answer = a.get("answer") or ("target not met" if slo and "answer" in a else "unfinished")
    fig.suptitle(f"Tuner: {' + '.join(A.workload_order(df))}, {what}: {answer} "
                 f"({len(table)} layouts, {table['reps'].sum()} repetitions)\n{figure_stamp(a)}",
                 fontsize=9, color="0.2")
    return fig
