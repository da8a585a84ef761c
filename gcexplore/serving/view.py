"""Serving figures: ITL and TTFT tails against the decode share, goodput per split against both
baselines, the advised split marked. The numbers come from :mod:`gcexplore.serving.analysis`."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from . import analysis as S
from ..results.validate import check_result
from ..views._style import new_figure, stamp

__all__ = ["plot_serving"]

#: The legend entry of a point whose tail is infinite (no request finished), drawn at the panel's top.
INF_LABEL = "infinite: no request finished"

_BASELINES = {"streams": ("plain streams (whole GPU)", "--"), "time_sliced": ("time-sliced (whole GPU)", ":")}


def _plain_number(v: float, _pos=None) -> str:
    """A log axis's tick as a plain number (``2``, ``0.5``, ``200``), not ``2x10^0``."""
    return f"{v:g}" if v > 0 else ""


def _readable_log_axis(ax) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    lo, hi = ax.get_ylim()
    few = hi / lo < 100  # within two decades: ticks at 1, 2, 5 of each, labelled
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if few else (1.0,)))
    ax.yaxis.set_major_formatter(FuncFormatter(_plain_number))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _tail_panel(ax, table: pd.DataFrame, col: str, label: str, colors, slo_line=None) -> int:
    """One tail panel; the number of points whose tail is infinite (marked at the panel's top)."""
    part = table[table["mode"] == "partitioned"]
    marked = 0
    for (load, g), c in zip(part.groupby("load", sort=False), colors):
        g = g.sort_values("decode_sm_count")
        y = g[col].to_numpy(float)
        ax.plot(g["decode_sm_count"], np.where(np.isinf(y), np.nan, y), "o-", color=c, ms=4, label=load,
                gid=f"{col}:{load}")
        inf = np.isinf(y)
        if inf.any():  # no request finished there: a mark at the top of the panel, not a silent gap
            ax.plot(g["decode_sm_count"].to_numpy()[inf], np.full(int(inf.sum()), 0.97), "^", color=c, ms=7,
                    markeredgecolor="black", transform=ax.get_xaxis_transform(), clip_on=False,
                    gid=f"{col}:{load}:inf", label="_nolegend_" if marked else INF_LABEL)
            marked += int(inf.sum())
        for mode, (name, ls) in _BASELINES.items():
            b = table[(table["mode"] == mode) & (table["load"] == load)]
            if len(b) and np.isfinite(b[col].iloc[0]):
                ax.axhline(float(b[col].iloc[0]), color=c, linestyle=ls, linewidth=1, alpha=0.8,
                           gid=f"{mode}:{col}:{load}")
    if slo_line is not None:
        ax.axhline(slo_line, color="#d62728", linewidth=1.4, gid=f"slo:{col}", label=f"SLO {slo_line:.3g} ms")
    ax.set_yscale("log")
    _readable_log_axis(ax)
    ax.set_xlabel("decode partition (SMs)")
    ax.set_ylabel(label)
    ax.grid(True, alpha=0.3, which="both")
    return marked


def plot_serving(df: pd.DataFrame, slo: S.ServingSLO | None = None, *, advised: str | None = None,
                 figsize=(13.0, 4.4)) -> Figure:
    """ITL p99 and TTFT p50 against the decode share (one line per load; the baselines at the same
    load dashed: plain streams, dotted: time-sliced), and with ``slo`` the goodput per split against
    both baselines, ``advised`` (a layout such as ``"64+68"``) starred.

    Parameters
    ----------
    df : pandas.DataFrame
        A ``"serving"`` result (:func:`gcexplore.serve`, or ``load_recorded("serving")``).
    slo : ServingSLO, optional
    advised : str, optional
        The advisor's layout (:func:`gcexplore.advise_split`).
    """
    check_result(df, "serving", "plot_serving")
    table = S.serving_table(df, slo)
    facts = S.trade_facts(table)
    panels = 3 if slo is not None else 2
    fig = new_figure(figsize=figsize if panels == 3 else (figsize[0] * 2 / 3, figsize[1]))
    axes = fig.subplots(1, panels)
    colors = [f"C{i}" for i in range(10)]
    _tail_panel(axes[0], table, "itl_p99_ms", "ITL p99 (ms)", colors, slo.itl_p99_ms if slo else None)
    axes[0].set_title("decode: inter-token latency p99")
    axes[0].legend(fontsize=7, title="load", title_fontsize=7)
    if _tail_panel(axes[1], table, "ttft_p50_ms", "TTFT p50 (ms)", colors, None):  # the loads: panel 1's legend
        handles = [h for h, lab in zip(*axes[1].get_legend_handles_labels()) if lab == INF_LABEL]
        axes[1].legend(handles=handles, fontsize=7, loc="lower right")
    axes[1].set_title("prefill: time to first token p50")
    if slo is not None:
        good = S.goodput_table(table, slo)
        ax = axes[2]
        part = good[good["mode"] == "partitioned"].sort_values("decode_sm_count")
        ax.bar(part["decode_sm_count"], part["goodput_rps"], width=6, color="C0", gid="goodput",
               label="split (partitioned)")
        for mode, (name, ls) in _BASELINES.items():
            b = good[good["mode"] == mode]
            if len(b):
                ax.axhline(float(b["goodput_rps"].iloc[0]), color="0.3", linestyle=ls, gid=f"goodput:{mode}",
                           label=f"{name}: {float(b['goodput_rps'].iloc[0]):.3g}/s")
        if advised is not None and advised in set(part["layout"]):
            r = part[part["layout"] == advised].iloc[0]
            ax.plot([r["decode_sm_count"]], [r["goodput_rps"]], "*", ms=16, color="gold", markeredgecolor="black",
                    gid="advised", label=f"advised {advised}: {r['goodput_rps']:.3g}/s")
        ax.set_xlabel("decode partition (SMs)")
        ax.set_ylabel("goodput (requests/s meeting the SLO)")
        ax.set_title(slo.text(), fontsize=8)
        ax.legend(fontsize=7)
        ax.grid(True, alpha=0.3)
    stamp(fig, df, facts["text"])
    return fig
