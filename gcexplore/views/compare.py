"""What a comparison shows: the two curves on the SM-fraction axis, the verdicts, both best
splits (:func:`plot_compare`); the verdict in words is :mod:`.compare_text`. Every number
drawn or written here comes from :func:`gcexplore.compare`."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from ..analysis.comparison import Comparison, Comparisons, compare
from ._style import figure_stamp, new_figure
from .compare_text import plain

__all__ = ["plot_compare"]

_SIDE_COLORS = {"a": "#1f77b4", "b": "#d62728"}
# A drawn over B (solid, filled), B dashed with hollow markers: equal curves stay both visible
_SIDE_STYLE = {"a": {"marker": "o", "ls": "-", "lw": 1.6, "ms": 5, "zorder": 4},
               "b": {"marker": "s", "ls": "--", "lw": 1.6, "ms": 8, "zorder": 3, "mfc": "none"}}
_VERDICT_STYLE = {"FAST": ("#2ca02c", "F"), "SLOW": ("#d62728", "S"), "SAME": ("0.45", "="),
                  "UNCLEAR": ("#ff7f0e", "?")}


def plot_compare(c, b=None, *, group: str | None = None, figsize=(8.5, 6.5), **kwargs) -> Figure:
    """The two sides' curves on the SM-fraction axis, the verdict per layout, both best splits,
    and below them the ratio B / A per layout with its interval and the equivalence band.

    Parameters
    ----------
    c : Comparison, Comparisons or result
        A :func:`gcexplore.compare` result, or side A (then ``b`` and ``kwargs`` go to compare).
        A :class:`~gcexplore.analysis.comparison.Comparisons` of one workload set is drawn; of
        several, pick one (``c.pairs["compute+memory"]``): sets are never drawn pooled.
    group : str, optional
        The mode (sweeps: default ``"concurrent"``) or workload (scaling: default the first).
    figsize : tuple of float

    Returns
    -------
    matplotlib.figure.Figure
        Top axes (log time axis): lines with gids ``"a"`` (solid, drawn over B) and ``"b"``
        (dashed, hollow markers), p10-p90 bands ``"a_band"`` / ``"b_band"``, best-split markers
        ``"best_a"`` / ``"best_b"``, verdict marks ``"verdict_<layout>"``. Bottom axes (gid
        ``"ratio"``): the ratio B / A with its interval (``"ratio_b_over_a"``) and the
        ±``min_effect`` band (``"same_band"``), on a scale that shows differences of a percent.
    """
    if not isinstance(c, (Comparison, Comparisons)):
        c = compare(c, b, **kwargs)
    if isinstance(c, Comparisons):
        if len(c.pairs) != 1:
            raise ValueError(f"plot_compare: these results measured {len(c.pairs)} workload sets on both sides "
                             f"({', '.join(c.pairs) or 'none'}); draw one: plot_compare(c.pairs[name])")
        c = next(iter(c.pairs.values()))
    groups = list(dict.fromkeys(c.curves["group"]))
    group = group or ("concurrent" if "concurrent" in groups else groups[0])
    if group not in groups:
        raise ValueError(f"plot_compare: no {group!r} rows; this comparison has {', '.join(groups)}")
    fig = new_figure(figsize)
    ax, rax = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [2.2, 1]})
    rax.set_gid("ratio")
    for side, label in zip("ab", c.labels):
        cur = c.curves[(c.curves["side"] == side) & (c.curves["group"] == group)]
        x = cur["fraction"] * 100
        style = _SIDE_STYLE[side]
        ax.plot(x, cur["median_ms"], color=_SIDE_COLORS[side], label=plain(f"{label} (median)"), gid=side, **style)
        ax.fill_between(x, cur["p10_ms"], cur["p90_ms"], color=_SIDE_COLORS[side], alpha=0.15, gid=f"{side}_band",
                        label=plain(f"{label}: p10-p90 of the repetitions"), zorder=1)
        best = c.best.get(side) if c.best and group == "concurrent" else None
        if best:
            hollow = {"mfc": "none", "ms": 22, "mew": 1.5} if side == "b" else {"ms": 14}  # both seen when equal
            ax.plot([best["fraction"] * 100], [best["median_ms"]], marker="*", color=_SIDE_COLORS[side],
                    markeredgecolor="black" if side == "a" else _SIDE_COLORS[side], ls="none", gid=f"best_{side}",
                    zorder=5, **hollow,
                    label=plain(f"best on {label}: {best['layout']}"))
    ax.set_yscale("log")
    rows = c.table[c.table["group"] == group]
    _verdict_marks(ax, rows)
    _ratio_panel(rax, rows, c)
    rax.set_xlabel("first partition's share of the SMs (%)\nletters above: B vs A per layout: F faster, "
                   "S slower, = same, ? unclear, c clock difference; A / B measured on that side only", fontsize=8)
    ax.set_ylabel(("makespan" if c.kind != "scaling" else "duration") + " (ms, log scale)")
    ax.set_title(plain(f"{group}: {c.labels[1]} against {c.labels[0]}"), fontsize=10, pad=16)
    ax.legend(fontsize=7, loc="best")
    stamps = [figure_stamp(attrs) for attrs in c.attrs]
    fig.suptitle(plain("\n".join(f"{side}: {st}" for side, st in zip(c.labels, stamps))), fontsize=8, color="0.3")
    return fig


def _ratio_panel(rax, rows: pd.DataFrame, c: Comparison) -> None:
    """B / A per layout with its interval, and the band within which a difference counts as SAME."""
    both = rows[rows["present"] == "both"]
    x = both["fraction_a"] * 100
    band = c.settings["min_effect"]
    rax.axhspan(1 - band, 1 + band, color="0.85", gid="same_band", label=f"SAME band ±{band:.1%}")
    rax.axhline(1.0, color="0.4", lw=0.8)
    err = [both["ratio"] - both["ratio_low"], both["ratio_high"] - both["ratio"]]
    rax.errorbar(x, both["ratio"], yerr=err, fmt="o", ms=4, color=_SIDE_COLORS["b"], capsize=2,
                 gid="ratio_b_over_a", label=f"B / A, {c.settings['level']:.2%} interval")
    # the scale of the ratios and the band: a wide interval runs past the panel rather than
    # squeezing a 2% difference into a few pixels
    lows = [float(both["ratio"].min()), 1 - band] if len(both) else [1 - band]
    highs = [float(both["ratio"].max()), 1 + band] if len(both) else [1 + band]
    pad = 0.5 * (max(highs) - min(lows))
    rax.set_ylim(min(lows) - pad, max(highs) + pad)
    rax.yaxis.set_major_formatter(lambda v, _pos: f"{v - 1:+.0%}" if abs(v - 1) >= 0.01 or v == 1 else f"{v - 1:+.1%}")
    rax.set_ylabel("B / A - 1", fontsize=8)
    rax.legend(fontsize=7, loc="best")


def _verdict_marks(ax, rows: pd.DataFrame) -> None:
    """One letter per aligned layout above the axes: F (B faster), S (slower), = (same), ? (unclear)."""
    trans = ax.get_xaxis_transform()
    r: Any  # a row: its fields are the columns' values (pandas-stubs types each as any scalar)
    for r in rows.itertuples():
        f = r.fraction_a if math.isfinite(r.fraction_a) else r.fraction_b
        if r.present != "both":
            ax.text(f * 100, 1.01, "A" if r.present == "A only" else "B", transform=trans, ha="center", va="bottom",
                    fontsize=8, color="0.5", gid=f"verdict_{r.layout_a or r.layout_b}")
            continue
        color, letter = _VERDICT_STYLE[r.verdict]
        ax.text(f * 100, 1.01, letter + ("c" if r.clock_difference else ""), transform=trans, ha="center",
                va="bottom", fontsize=9, fontweight="bold", color=color, gid=f"verdict_{r.layout_a}")
