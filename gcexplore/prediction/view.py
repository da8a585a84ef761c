"""The figure of a prediction: the predicted makespan curve with its interval over the
measured one, and the decomposition (split loss, interference), predicted and measured.
Every number comes from :mod:`gcexplore.prediction.model`; this module only draws."""

from __future__ import annotations

from typing import Any, cast

import pandas as pd
from matplotlib.figure import Figure

from ..analysis.overlap import makespan_stats
from .model import predicted_layouts
from .check import predict_error, prediction_facts
from ..views._style import figure_stamp, new_figure

__all__ = ["plot_predict"]


def _curve(ax, lay: pd.DataFrame, measured, facts) -> None:
    x = lay["split_sm_count"]
    ax.fill_between(x, lay["makespan_low_ms"], lay["makespan_high_ms"], color="tab:orange", alpha=0.25,
                    lw=0, label="predicted interval", gid="interval")
    ax.plot(x, lay["makespan_ms"], "-", color="tab:orange", label="predicted", gid="predicted")
    ax.plot(x, lay["interference_free_ms"], ":", color="0.4", lw=1, label="predicted interference-free",
            gid="interference_free")
    if measured is not None:
        ms = makespan_stats(measured, "concurrent")
        ax.errorbar(ms["split_sm_count"], ms["median_ms"], yerr=[ms["median_ms"] - ms["p10_ms"],
                    ms["p90_ms"] - ms["median_ms"]], fmt="o", ms=3.5, color="tab:blue", capsize=2,
                    label="measured (median, p10-p90)", gid="measured")
    best = lay.loc[cast(Any, lay["makespan_ms"].idxmin())]  # pandas-stubs: idxmin gives a Hashable, not a label
    ax.plot([best["split_sm_count"]], [best["makespan_ms"]], "*", ms=12, color="tab:orange", mec="k",
            gid="predicted_best")
    ax.set_yscale("log")
    ax.set_xlabel("SMs of the first partition")
    ax.set_ylabel("concurrent makespan (ms)")
    if facts:
        ax.text(0.02, 0.02, f"median |error| {facts['median_abs_error']:.1%} over {facts['layouts']} layouts\n"
                f"predicted best {facts['predicted_best']}: measured {facts['best_gap']:+.1%} vs best "
                f"{facts['measured_best']}", transform=ax.transAxes, fontsize=8, va="bottom", gid="facts")
    ax.legend(fontsize=7, loc="upper right")


def _decomposition(ax, lay: pd.DataFrame, err) -> None:
    x = lay["split_sm_count"]
    ax.plot(x, lay["split_loss"], "-", color="tab:green", label="split loss (predicted)", gid="split_loss")
    ax.plot(x, lay["interference"], "-", color="tab:red", label="interference (predicted)", gid="interference")
    if err is not None and err["measured_interference"].notna().any():
        ax.plot(err["split_sm_count"], err["measured_interference"], "o", ms=3.5, color="tab:red",
                label="interference (measured)", gid="measured_interference")
    ax.axhline(1.0, color="0.6", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("SMs of the first partition")
    ax.set_ylabel("factor (1 = no loss)")
    ax.legend(fontsize=7, loc="upper center")


def plot_predict(prediction: pd.DataFrame, measured: pd.DataFrame | None = None, *,
                 figsize=(11.0, 4.4)) -> Figure:
    """Predicted concurrent makespan per layout (with interval) over the measured one, and its parts.

    Parameters
    ----------
    prediction : pandas.DataFrame
        :func:`gcexplore.predict`'s result (two workloads: one curve over the first size).
    measured : pandas.DataFrame, optional
        A sweep of the same pair (its concurrent medians with p10-p90 are drawn, and the
        error facts of :func:`~gcexplore.prediction.check.prediction_facts` written).
    figsize : tuple, default (11.0, 4.4)

    Returns
    -------
    matplotlib.figure.Figure
        Two Axes; artists carry gids ``predicted``, ``interval``, ``measured``,
        ``predicted_best``, ``split_loss``, ``interference``, ``measured_interference``, ``facts``.
    """
    lay = predicted_layouts(prediction)
    facts = prediction_facts(prediction, measured) if measured is not None else None
    err = predict_error(prediction, measured) if measured is not None else None
    fig = new_figure(figsize)
    left, right = fig.subplots(1, 2, width_ratios=[1.3, 1.0])
    _curve(left, lay, measured, facts)
    _decomposition(right, lay, err)
    a = prediction.attrs
    src = a.get("bytes_source") or {}
    said = f"; bytes {', '.join(f'{w} {s}' for w, s in src.items())}" if src else ""
    fig.suptitle(f"Predicted from solo profiles: {' + '.join(a.get('workloads', []))} "
                 f"(DRAM shared by {a.get('sharing')}, {a.get('shared_bandwidth_gbs', float('nan')):,.0f} GB/s"
                 f"{said})\n"
                 f"{figure_stamp(measured.attrs if measured is not None else a)}", fontsize=9, color="0.2")
    return fig
