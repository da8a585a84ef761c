"""What a comparison shows: the two curves on the SM-fraction axis, the verdicts, both best
splits (:func:`plot_compare`); the verdict in words is :mod:`.compare_text`. Every number
drawn or written here comes from :func:`gcexplore.compare`."""

from __future__ import annotations

import math

import pandas as pd
from matplotlib.figure import Figure

from ..analysis.comparison import Comparison, Comparisons, compare
from ._style import figure_stamp, new_figure
from .compare_text import plain

__all__ = ["plot_compare"]

_SIDE_COLORS = {"a": "#1f77b4", "b": "#d62728"}
_VERDICT_STYLE = {"FAST": ("#2ca02c", "F"), "SLOW": ("#d62728", "S"), "SAME": ("0.45", "="),
                  "UNCLEAR": ("#ff7f0e", "?")}


def plot_compare(c, b=None, *, group: str | None = None, figsize=(8.5, 5.0), **kwargs) -> Figure:
    """The two sides' curves on the SM-fraction axis, the verdict per layout, both best splits.

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
        Lines with gids ``"a"`` and ``"b"``, bands ``"a_band"`` / ``"b_band"``, best-split
        markers ``"best_a"`` / ``"best_b"``, verdict marks ``"verdict_<layout>"``.
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
    ax = fig.add_subplot()
    for side, label in zip("ab", c.labels):
        cur = c.curves[(c.curves["side"] == side) & (c.curves["group"] == group)]
        x = cur["fraction"] * 100
        ax.plot(x, cur["median_ms"], "o-", color=_SIDE_COLORS[side], label=plain(f"{label} (median)"), gid=side)
        ax.fill_between(x, cur["p10_ms"], cur["p90_ms"], color=_SIDE_COLORS[side], alpha=0.18, gid=f"{side}_band",
                        label=plain(f"{label} p10-p90"))
        best = c.best.get(side) if c.best and group == "concurrent" else None
        if best:
            ax.plot([best["fraction"] * 100], [best["median_ms"]], marker="*", ms=16, color=_SIDE_COLORS[side],
                    markeredgecolor="black", ls="none", gid=f"best_{side}",
                    label=plain(f"best on {label}: {best['layout']}"))
    _verdict_marks(ax, c.table[c.table["group"] == group])
    ax.set_xlabel("first partition's share of the SMs (%)\nletters above: B vs A per layout: F faster, "
                  "S slower, = same, ? unclear, c clock difference; A / B measured on that side only", fontsize=8)
    ax.set_ylabel("makespan (ms)" if c.kind != "scaling" else "duration (ms)")
    ax.set_title(plain(f"{group}: {c.labels[1]} against {c.labels[0]}"), fontsize=10, pad=16)
    ax.legend(fontsize=8, loc="best")
    stamps = [figure_stamp(attrs) for attrs in c.attrs]
    fig.suptitle(plain("\n".join(f"{side}: {st}" for side, st in zip(c.labels, stamps))), fontsize=8, color="0.3")
    return fig


def _verdict_marks(ax, rows: pd.DataFrame) -> None:
    """One letter per aligned layout above the axes: F (B faster), S (slower), = (same), ? (unclear)."""
    trans = ax.get_xaxis_transform()
    for r in rows.itertuples():
        f = r.fraction_a if math.isfinite(r.fraction_a) else r.fraction_b
        if r.present != "both":
            ax.text(f * 100, 1.01, "A" if r.present == "A only" else "B", transform=trans, ha="center", va="bottom",
                    fontsize=8, color="0.5", gid=f"verdict_{r.layout_a or r.layout_b}")
            continue
        color, letter = _VERDICT_STYLE[r.verdict]
        ax.text(f * 100, 1.01, letter + ("c" if r.clock_difference else ""), transform=trans, ha="center",
                va="bottom", fontsize=9, fontweight="bold", color=color, gid=f"verdict_{r.layout_a}")
