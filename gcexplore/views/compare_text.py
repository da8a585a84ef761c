"""A comparison in words (:func:`describe`): what :func:`gcexplore.compare` decided, for the
command line, the explorer and the notebooks. No matplotlib here: ``gcexplore compare`` prints it."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..analysis.comparison import Comparison, Comparisons

__all__ = ["describe", "describe_sets", "plain"]


def plain(text) -> str:
    """``text`` as matplotlib draws it literally: a ``$`` from the data starts no mathtext."""
    return str(text).replace("$", r"\$")


def _pct(r: float) -> str:
    return f"{r - 1:+.1%}"


def _noise_lines(c: Comparison) -> list[str]:
    """The rounds each side measured, the between-round spread and the floor used; the rounds
    that would decide what is UNCLEAR."""
    s = c.settings
    if "floor_text" not in s:
        return []
    t = c.table[c.table["present"] == "both"]
    ra, rb = (int(t[f"rounds_{x}"].min()) if len(t) else 0 for x in "ab")
    spread = f"between-round spread {s['round_sd']:.2%}; " if s.get("round_df") else ""
    lines = [f"intervals from round medians ({ra} round(s) on A, {rb} on B; {spread}{s['floor_text']})"]
    need = t["rounds_needed"].dropna()
    if len(need) and np.isfinite(need).any():
        fin = need[np.isfinite(need)]
        lines.append(f"{len(fin)} UNCLEAR row(s) would be decided by about {int(fin.median())} rounds per side "
                     f"(median; up to {int(fin.max())})")
    return lines


def describe(c: Comparison, group: str | None = None, *, all_differences: bool = False) -> list[str]:
    """The comparison in sentences, each computed from ``c``.

    ``group`` (a mode; a workload for scaling): the headline counts only that group's rows,
    as a figure or table of that group shows them. ``all_differences``: list every identity
    field that differs (by default the first eight, then how many more and where they are).
    """
    a, b = c.labels
    s = c.settings
    unit = "workload" if c.kind == "scaling" else "mode"
    n = c.counts(group)
    where = (f"{group}: {n['SAME']} of {n['compared']} layouts" if group is not None
             else f"{n['SAME']} of {s['compared']} layout x {unit} pairs")
    jointly = f"{s['confidence']:.0%} jointly" + (f" over all {s['compared']} pairs" if group is not None else "")
    lines = [f"{b} against {a}, {where} SAME within ±{s['min_effect']:.1%}, {n['FAST']} FAST, {n['SLOW']} SLOW, "
             f"{n['UNCLEAR']} UNCLEAR (each interval at {s['level']:.2%}, {jointly})"]
    lines.extend(_noise_lines(c))
    lines.extend(_finding_lines(c))
    if n["one-sided"]:
        lines.append(f"{n['one-sided']} layout(s) were measured on one side only")
    if n["clock differences"]:
        lines.append(f"{n['clock differences']} of the FAST/SLOW verdicts are SAME in clock-normalised time: "
                     "clock differences")
    table = c.table if group is None else c.table[c.table["group"] == group]
    decided = table[table["verdict"].isin(["FAST", "SLOW"])]
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
        shown = diff if all_differences else diff.head(8)
        more = len(diff) - len(shown)
        lines.append("differs: " + "; ".join(f"{r.field} {_value(r.a)} -> {_value(r.b)}" for r in shown.itertuples())
                     + (f" (+{more} more: all in Comparison.identity, or gcexplore compare --all)" if more else ""))
    return lines


def _value(text: str) -> str:
    """An identity value as text; a float with more digits than it means (3.4239977598190308) to 4."""
    if not text:
        return "-"
    try:
        v = float(text)
    except ValueError:
        return text
    return text if text.lstrip("-").replace(".", "", 1).isdigit() and len(text) <= 8 else f"{v:.4g}"


def _finding_lines(c: Comparison) -> list[str]:
    """Per group, what its layouts say together: B faster / slower at every layout and by how
    much (the median of the layout ratios), or no difference beyond the band."""
    per = c.by_group()
    if len(per) < 2:
        return []
    b, band = c.labels[1], c.settings["min_effect"]
    out = []
    r: Any  # a row: its fields are the columns' values (pandas-stubs types each as any scalar)
    for r in per.itertuples():
        if r.FAST == r.compared:
            out.append(f"{r.group}: {b} faster at all {r.compared} layouts, by {1 - r.median_ratio:.1%} "
                       "(median of the layout ratios)")
        elif r.SLOW == r.compared:
            out.append(f"{r.group}: {b} slower at all {r.compared} layouts, by {r.median_ratio - 1:.1%} "
                       "(median of the layout ratios)")
        elif r.SAME == r.compared:
            out.append(f"{r.group}: no difference beyond ±{band:.1%} at any of its {r.compared} layouts "
                       f"(all {r.SAME} SAME)")
        elif r.UNCLEAR == r.compared:  # "no difference" would claim what none of the intervals shows
            out.append(f"{r.group}: undecided at all {r.compared} layouts (all UNCLEAR): no interval is narrow "
                       f"enough to tell a difference beyond ±{band:.1%} from none")
        elif r.FAST == 0 and r.SLOW == 0:
            out.append(f"{r.group}: no decided difference: {r.SAME} of {r.compared} layouts SAME within "
                       f"±{band:.1%}, {r.UNCLEAR} UNCLEAR (too noisy to tell)")
        else:
            out.append(f"{r.group}: {r.FAST} FAST, {r.SLOW} SLOW, {r.SAME} SAME, {r.UNCLEAR} UNCLEAR of "
                       f"{r.compared} layouts; median ratio {_pct(r.median_ratio)}")
    return out


def describe_sets(cs: Comparisons) -> list[str]:
    """What a comparison of several workload sets found, set by set, in sentences computed from ``cs``:
    which sets were compared, which were measured on one side only, and, where nothing was measured
    on both sides, that there is nothing like-for-like to decide on."""
    a, b = cs.labels
    lines = []
    if cs.pairs:
        lines.append(f"{len(cs.pairs)} workload set(s) measured on both {a} and {b}, compared each on its own: "
                     + ", ".join(cs.pairs))
    for side, name in (("A only", a), ("B only", b)):
        sets = [k for k, v in cs.one_sided.items() if v == side]
        if sets:
            lines.append(f"measured on {name} only, not compared: {', '.join(sets)}")
    if not cs.compared():
        lines.append(f"nothing like-for-like: no layout of any workload set was measured on both {a} and {b}, "
                     "so no verdict is given")
    return lines


def _best_lines(c: Comparison) -> list[str]:
    if not c.best:
        return []
    a, b = c.labels
    ba, bb = c.best["a"], c.best["b"]
    ci = f"{c.settings['confidence']:.0%} interval of the median"  # not the p10-p90 spread the plot shades
    out = [f"best split on {a}: {ba['layout']} ({ba['fraction']:.0%} of the SMs), median {ba['median_ms']:.4g} ms "
           f"({ci} {ba['ci_low_ms']:.4g} to {ba['ci_high_ms']:.4g}); on {b}: {bb['layout']} ({bb['fraction']:.0%}), "
           f"median {bb['median_ms']:.4g} ms ({ci} {bb['ci_low_ms']:.4g} to {bb['ci_high_ms']:.4g})"]
    if c.best.get("moved") is None:
        out.append(c.best.get("note") or "whether the best split moved cannot be told")
        return out
    if c.best.get("note"):
        out.append(c.best["note"])
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
