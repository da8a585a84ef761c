"""What a comparison shows: the two curves on the SM-fraction axis, the verdicts, both best
splits (:func:`plot_compare`), and the verdict in words (:func:`describe`). Every number
drawn or written here comes from :func:`gcexplore.compare`."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

# Old-layout imports, collected here so they can be re-pointed in one place.
from ..analysis.comparison import Comparison, compare
from ._style import figure_stamp, new_figure

__all__ = ["describe", "plot_compare", "plain"]

_SIDE_COLORS = {"a": "#1f77b4", "b": "#d62728"}
_VERDICT_STYLE = {"FAST": ("#2ca02c", "F"), "SLOW": ("#d62728", "S"), "SAME": ("0.45", "="),
                  "UNCLEAR": ("#ff7f0e", "?")}


def plain(text) -> str:
    """``text`` as matplotlib draws it literally: a ``$`` from the data starts no mathtext."""
    return str(text).replace("$", r"\$")


def _pct(r: float) -> str:
    return f"{r - 1:+.1%}"


def describe(c: Comparison) -> list[str]:
    """The comparison in sentences, each computed from ``c``."""
    a, b = c.labels
    n = c.counts()
    s = c.settings
    lines = [f"{b} against {a}: {n['SAME']} of {s['compared']} layout x {'workload' if c.kind == 'scaling' else 'mode'} "
             f"pairs SAME within ±{s['min_effect']:.1%}, {n['FAST']} FAST, {n['SLOW']} SLOW, {n['UNCLEAR']} UNCLEAR "
             f"(each interval at {s['level']:.2%}, {s['confidence']:.0%} jointly)"]
    if n["one-sided"]:
        lines.append(f"{n['one-sided']} layout(s) were measured on one side only")
    if n["clock differences"]:
        lines.append(f"{n['clock differences']} of the FAST/SLOW verdicts are SAME in clock-normalised time: "
                     "clock differences")
    decided = c.table[c.table["verdict"].isin(["FAST", "SLOW"])]
    if len(decided):
        worst = decided.loc[(np.log(decided["ratio"])).abs().idxmax()]
        lines.append(f"largest decided difference: {worst['group']} at {worst['layout_a']}"
                     f"{'' if worst['layout_b'] == worst['layout_a'] else ' / ' + worst['layout_b']}: "
                     f"{_pct(worst['ratio'])} ({worst['verdict']}, interval {_pct(worst['ratio_low'])} "
                     f"to {_pct(worst['ratio_high'])})")
    lines.extend(_best_lines(c))
    lines.extend(_slo_lines(c))
    diff = c.identity[~c.identity["same"]]
    if len(diff):
        lines.append("differs: " + "; ".join(f"{r.field} {r.a or '-'} -> {r.b or '-'}" for r in diff.head(8).itertuples())
                     + (f" (+{len(diff) - 8} more)" if len(diff) > 8 else ""))
    return lines


def _best_lines(c: Comparison) -> list[str]:
    if not c.best:
        return []
    a, b = c.labels
    ba, bb = c.best["a"], c.best["b"]
    out = [f"best split on {a}: {ba['layout']} ({ba['fraction']:.0%} of the SMs), {ba['median_ms']:.4g} ms "
           f"[{ba['ci_low_ms']:.4g}, {ba['ci_high_ms']:.4g}]; on {b}: {bb['layout']} ({bb['fraction']:.0%}), "
           f"{bb['median_ms']:.4g} ms [{bb['ci_low_ms']:.4g}, {bb['ci_high_ms']:.4g}]"]
    if not c.best["moved"]:
        out.append("the best split did not move")
        return out
    for key, here, there in (("a_best_on_b", a, b), ("b_best_on_a", b, a)):
        cost = c.best[key]
        if cost["layout"] is None:
            out.append(f"{here}'s best split was not measured on {there}")
        else:
            meaning = {"SLOW": "a real cost", "SAME": "no cost beyond the band",
                       "UNCLEAR": "too close to call"}.get(cost["verdict"], "")
            out.append(f"the best split moved: {here}'s best ({cost['layout']} there) costs {_pct(cost['ratio'])} "
                       f"on {there} against its own best (interval {_pct(cost['low'])} to {_pct(cost['high'])}: "
                       f"{meaning})")
    return out


def _slo_lines(c: Comparison) -> list[str]:
    if not c.slo:
        return []
    s, (a, b) = c.slo, c.labels
    target = f"p{s['percentile']:g} of {s['workload']} <= {s['slo_ms']:.4g} ms"

    def ans(x):
        return f"{x['layout']} ({x['how']})" if x["layout"] else "not met"

    out = [f"latency target {target}: {a} {ans(s['a'])}, {b} {ans(s['b'])}"
           + ("; the answer moved" if s["moved"] else "; the answer did not move")]
    if s["moved"] and s["a"]["layout"]:
        out.append(f"{a}'s answer on {b}: {s['a_answer_on_b']['status']}")
    return out


def plot_compare(c, b=None, *, group: str | None = None, figsize=(8.5, 5.0), **kwargs) -> Figure:
    """The two sides' curves on the SM-fraction axis, the verdict per layout, both best splits.

    Parameters
    ----------
    c : Comparison or result
        A :func:`gcexplore.compare` result, or side A (then ``b`` and ``kwargs`` go to compare).
    group : str, optional
        The mode (sweeps: default ``"concurrent"``) or workload (scaling: default the first).
    figsize : tuple of float

    Returns
    -------
    matplotlib.figure.Figure
        Lines with gids ``"a"`` and ``"b"``, bands ``"a_band"`` / ``"b_band"``, best-split
        markers ``"best_a"`` / ``"best_b"``, verdict marks ``"verdict_<layout>"``.
    """
    if not isinstance(c, Comparison):
        c = compare(c, b, **kwargs)
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
