"""Compare two results: which differences are beyond the noise, and does the best split move.

:func:`compare` takes two sweeps, overlaps, tuner results or scaling curves (frames,
files, or one frame split in two by a column such as ``run_id``, ``device_uuid`` or
``driver``) and returns a :class:`Comparison`, the one owner of every number a
comparison shows (the CLI, :func:`gcexplore.plot_compare` and the explorer draw it).

How it decides (docs/guide.md, "Comparing two results")
--------------------------------------------------------
Per layout and mode, the ratio B / A of the median times with a confidence interval whose unit
is the round (:func:`row_verdict`, :func:`gcexplore.analysis.stats.round_ratio_ci`): the mean of
each side's log round medians, a t interval from their between-round variance (each row's own,
shrunk toward the variance pooled over all rows compared), plus the card's run-to-run excess
(:func:`gcexplore.analysis.stats.noise_floor`). Repetitions of one run agree more closely than
runs do, so an interval from one run's repetitions alone is too narrow. A side measured in one
round (results from before rounds, or ``rounds=1``) has no between-round variance of its own:
the recorded floor stands in, so a small difference there is UNCLEAR, with the number of rounds
per side that would decide it. Every interval is at level ``1 - min(1%, (1 - confidence) / m)``
for ``m`` layout x mode pairs compared (Bonferroni), so all of them hold together with
probability at least ``confidence``. The verdict is FAST (B faster) or SLOW (B slower) only when
the whole interval lies beyond the practical-equivalence band ``±min_effect``, SAME when it lies
inside it, UNCLEAR otherwise, with the reason (too few repetitions, the interval straddles the
band's edge, a side flagged noisy). Where both sides recorded the SM clock, the same test on
time x clock (cycles) confirms it; a FAST / SLOW that is SAME in cycles is labelled a clock
difference.

Cards with different SM counts are aligned by the fraction of SMs of each partition
(nearest within half a partition step); sizes stay absolute in the table, and layouts
measured on one side only are kept as such.

Over 500 lines: one comparison: its table, verdicts per mode and whether the best split moved.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, cast
from pathlib import Path

import numpy as np
import pandas as pd

from ..results.io import bare, load, load_recorded, recorded_names
from ..results.validate import check_result
from ..results import kinds as _kinds
from ..results.kinds import kind_of
from ..results.run import rep_keys, run_of
from ..schema import IDENTITY, parse_layout
from .display import placement
from .compare_sets import Comparisons, set_pairs, split_by
from .identity import identity_diff
from .stats import Floor, quantile, quantile_ci, round_median_ci, round_ratio_ci
from .verdict import decide, prior_variance, row_verdict, side_floor

__all__ = ["COMPARE_COLUMNS", "Comparison", "Comparisons", "VERDICTS", "compare", "identity_diff", "load_side",
           "row_verdict"]

IDENTITY_LABELS = {f.name: f.label for f in IDENTITY}
VERDICTS = ("FAST", "SLOW", "SAME", "UNCLEAR")
#: No single interval is wider than this error rate, however few pairs are compared.
MAX_ALPHA_EACH = 0.01

COMPARE_COLUMNS = [
    "group", "present", "layout_a", "layout_b", "sm_a", "sm_b", "fraction_a", "fraction_b", "reps_a", "reps_b",
    "median_a_ms", "median_b_ms", "ratio", "ratio_low", "ratio_high", "noisy_a", "noisy_b", "verdict",
    "clock_a_mhz", "clock_b_mhz", "cycles_ratio", "cycles_low", "cycles_high", "cycles_verdict",
    "clock_difference", "rounds_a", "rounds_b", "rounds_needed", "reason",
]
CURVE_COLUMNS = ["side", "group", "layout", "sm", "fraction", "reps", "median_ms", "p10_ms", "p90_ms"]

_VALID = "two sweep/overlap results, two tune results or two scaling results"


@dataclasses.dataclass(frozen=True)
class Comparison:
    """What :func:`compare` found; every front end draws these fields.

    Attributes
    ----------
    kind : str
        ``"overlap"`` (sweeps and overlaps), ``"tune"`` or ``"scaling"``.
    labels : tuple of str
        Names of side A (the reference) and side B.
    table : pandas.DataFrame
        One row per aligned layout and group (mode; workload for scaling), columns
        :data:`COMPARE_COLUMNS`: ``present`` is ``"both"``, ``"A only"`` or ``"B only"``;
        ``ratio`` is median B / median A, ``ratio_low`` / ``ratio_high`` its interval;
        ``verdict`` one of :data:`VERDICTS` (empty for one-sided rows); ``cycles_*`` the
        same in clock-normalised time where the SM clock was recorded on both sides;
        ``reason`` says why.
    curves : pandas.DataFrame
        Per side, group and layout: median, p10 and p90 in ms (:data:`CURVE_COLUMNS`).
    best : dict
        Per side (``"a"``, ``"b"``): the best split (lowest median concurrent makespan) with
        its interval; ``moved``, decided over the layouts both sides measured (``common``
        of them; their bests ``a_common`` / ``b_common``; None with ``note`` saying why when
        there is none, and ``note`` naming a best measured on one side only);
        ``a_best_on_b`` / ``b_best_on_a``: what one side's best among the common layouts costs
        on the other (ratio to that side's best, interval, verdict). Empty for scaling results.
    slo : dict or None
        The latency-target answer per side when ``slo_ms`` was given (see :func:`compare`).
    identity : pandas.DataFrame
        :func:`identity_diff` of the two sides.
    settings : dict
        ``min_effect``, ``confidence``, ``compared`` (m), ``level`` (of each interval).
    attrs : tuple of dict
        Each side's ``df.attrs`` (for provenance stamps).
    """

    kind: str
    labels: tuple[str, str]
    table: pd.DataFrame
    curves: pd.DataFrame
    best: dict
    slo: dict | None
    identity: pd.DataFrame
    settings: dict
    attrs: tuple = ({}, {})

    def counts(self, group: str | None = None) -> dict[str, int]:
        """How many compared rows got each verdict (and how many rows are one-sided); only
        ``group``'s rows (a mode; a workload for scaling) when given."""
        table = self.table if group is None else self.table[self.table["group"] == group]
        both = table[table["present"] == "both"]
        out = {v: int((both["verdict"] == v).sum()) for v in VERDICTS}
        out["compared"] = len(both)
        out["one-sided"] = int((table["present"] != "both").sum())
        out["clock differences"] = int(both["clock_difference"].sum())
        return out

    def by_group(self) -> pd.DataFrame:
        """Per group (mode; workload for scaling): rows compared, the count of each verdict,
        and the median over its layouts of the ratio B / A (``median_ratio``)."""
        both = self.table[self.table["present"] == "both"]
        rows = []
        for g, t in both.groupby("group", sort=False):
            rows.append({"group": g, "compared": len(t), **{v: int((t["verdict"] == v).sum()) for v in VERDICTS},
                         "median_ratio": float(np.median(t["ratio"])) if len(t) else math.nan})
        return pd.DataFrame(rows, columns=["group", "compared", *VERDICTS, "median_ratio"])

    def regressions(self, threshold: float = 0.0) -> pd.DataFrame:
        """Rows where even the interval's low end exceeds ``1 + threshold``, whatever the verdict (a
        noisy 2x slowdown is UNCLEAR and still a regression): what ``--fail-on-regression`` fails on."""
        from .gate import regression_rows

        return regression_rows(self.table, threshold)


# --------------------------------------------------------------------------- inputs


def load_side(x, name: str) -> tuple[pd.DataFrame, str | None]:
    """One side of a comparison and its label: a frame, a saved result's path or a recorded name."""
    if isinstance(x, pd.DataFrame):
        return x, None
    if isinstance(x, (str, Path)):
        p = Path(x)
        if not p.exists():
            if isinstance(x, str) and x in recorded_names():  # as the explorers take them
                return load_recorded(x), x
            raise FileNotFoundError(f"compare: {name} {str(p)!r} does not exist and is not a recorded result "
                                    f"(recorded: {', '.join(recorded_names())})")
        return load(p), p.stem
    raise TypeError(f"compare: {name} must be a result DataFrame, a path to a saved result or a recorded name, "
                    f"got {type(x).__name__}")


# columns that say what was measured, not which run measured it: no by= of these makes two sides
_MEASUREMENT_COLUMNS = ("layout", "mode", "rep", "workload", "partition", "sm_count", "split_sm_count",
                        "requested_sm_count", "step", "group")


def _with_card(label: str, df: pd.DataFrame) -> str:
    names = list(dict.fromkeys(df["device_name"].astype(str))) if "device_name" in df.columns else []
    name = names[0] if len(names) == 1 else df.attrs.get("device_name")
    return f"{label} ({name})" if name else label


def _workloads(df: pd.DataFrame, family: str) -> tuple:
    if family == "scaling":
        return tuple(sorted(set(df["workload"])))
    try:
        return tuple(w for _, w in placement(df))
    except ValueError:
        return tuple(sorted(set(df["workload"])))


def _sides(a, b, by, labels) -> tuple[pd.DataFrame, pd.DataFrame, tuple[str, str], str, str | None]:
    """The two sides, their labels, their kind family and the column that split them (``by``)."""
    fa, na = load_side(a, "A")
    col = None
    if b is None:
        if by is None:
            raise ValueError("compare needs two results, or one result and by= a column that splits it in two "
                             "(run_id, device_uuid, driver, ...)")
        if by in _MEASUREMENT_COLUMNS:
            raise ValueError(f"compare: by={by!r} splits what was measured, not who measured it: the two sides "
                             "would share no layout x mode pair; split by a column that tells runs apart (run_id, "
                             "device_uuid, device_name, host, driver, campaign_id)")
        fa, fb, labels, col = split_by(fa, by, labels)
    else:
        if by is not None:
            raise ValueError("compare: pass either two results or one result with by=, not both")
        fb, nb = load_side(b, "B")
        if labels is None:
            labels = (na or "A", nb or "B")
            cards = [_with_card("", f) for f in (fa, fb)]
            if cards[0] != cards[1]:  # different cards: say which side ran on which
                labels = (_with_card(labels[0], fa), _with_card(labels[1], fb))
        labels = tuple(map(str, labels))
        if len(labels) != 2:
            raise ValueError(f"compare: labels must be two names (A, B), got {len(labels)}: {list(labels)}")
        if labels[0] == labels[1]:
            labels = (f"A ({labels[0]})", f"B ({labels[1]})")
    for df, side in ((fa, "A"), (fb, "B")):
        if len(df) == 0:
            raise ValueError(f"compare: side {side} ({labels['AB'.index(side)]}) has no rows; {_VALID} are "
                             "compared, each with measured rows")
    kinds = []
    for df, side in ((fa, "A"), (fb, "B")):
        try:
            kinds.append(kind_of(df))
        except ValueError as e:
            raise ValueError(f"compare: side {side} is not a gcexplore result ({e})") from None
    fams = [_kinds.get(k).compare_group for k in kinds]  # which kinds compare with which: their declaration
    if None in fams:
        bad = kinds[fams.index(None)]
        raise ValueError(f"compare: side {'AB'[fams.index(None)]} is {'an' if bad[0] in 'aeiou' else 'a'} {bad} "
                         f"result; compare takes {_VALID}")
    if fams[0] != fams[1]:
        raise ValueError(f"compare: side A is a {kinds[0]} result and side B a {kinds[1]} result; compare takes "
                         f"{_VALID}")
    for df, side in ((fa, "A"), (fb, "B")):
        want, where = kinds["AB".index(side)], f"compare (side {side})"  # checked once per unchanged frame:
        run_of(df).memo(("compare checked", want), lambda: check_result(df, want, where))  # calibrations reuse sides
        needed = _kinds.get(kinds["AB".index(side)]).compare
        missing = [c for c in needed if c not in df.columns]
        if missing:
            raise ValueError(f"compare: side {side} ({labels['AB'.index(side)]}) has no {', '.join(missing)} "
                             f"column; a {kinds['AB'.index(side)]} result compares with "
                             f"{', '.join(needed)}")
    return fa, fb, labels, cast(str, fams[0]), col  # None is refused above


def _same_workloads(fa: pd.DataFrame, fb: pd.DataFrame, family: str) -> None:
    wa, wb = _workloads(fa, family), _workloads(fb, family)
    if wa != wb:
        what = "in partition order " if family != "scaling" and set(wa) == set(wb) else ""
        raise ValueError(f"compare: the two sides time different workloads {what}(A: {', '.join(wa)}; "
                         f"B: {', '.join(wb)}); compare results of the same workloads in the same placement")


# ------------------------------------------------------------------------- samples


def _clock(df: pd.DataFrame) -> pd.Series:
    cols = [c for c in ("sm_clock_mhz_before", "sm_clock_mhz") if c in df.columns]
    if not cols:
        return pd.Series(np.nan, index=df.index)
    return df[cols].astype(float).mean(axis=1, skipna=True)


def _samples(df: pd.DataFrame, family: str) -> pd.DataFrame:
    """One row per repetition: group, layout, sm, fractions, value (ms), clock (MHz), round (a run's
    rounds told apart from another run's: results measured before rounds are one round per run)."""
    run = ["run_id"] if "run_id" in df.columns else []
    d = bare(df).assign(_clock=_clock(df), _round=_round_key(df))  # no attrs deep-copied into d
    if family == "scaling":
        keys = [*run, "workload", "sm_count", "rep"]  # grouped once, three reductions: a named agg costs 2x
        per = pd.DataFrame({"value": (g := d.groupby(keys, sort=False))["duration_ms"].max(),
                            "clock": g["_clock"].mean(), "round": g["_round"].first()}).reset_index()
        total = float(per["sm_count"].max())
        per["group"], per["layout"], per["sm"] = per["workload"], per["sm_count"].astype(str), per["sm_count"]
        per["fractions"] = [(s / total,) for s in per["sm_count"]]
    else:  # the run's per-repetition makespans (its one owner), each with its repetition's clock and round
        spans = run_of(df).rep_makespans()
        per = spans[["layout", "mode"]].assign(value=spans["makespan_ms"].to_numpy())
        per["clock"] = d.groupby(rep_keys(df), sort=False, dropna=False)["_clock"].mean().to_numpy()
        ids = spans["run_id"].astype(str) if "run_id" in spans.columns else pd.Series("", index=spans.index)
        per["round"] = (ids + "/" + spans["round"].astype(str)).to_numpy()
        lays = per["layout"].tolist()  # sizes and fractions once per layout, not once per repetition
        sizes = {lay: (p[0], tuple(s / sum(p) for s in p)) for lay in dict.fromkeys(lays) for p in [parse_layout(lay)]}
        per["group"], per["sm"] = per["mode"], [sizes[x][0] for x in lays]
        per["fractions"] = [sizes[x][1] for x in lays]
    return per[["group", "layout", "sm", "fractions", "value", "clock", "round"]]


def _round_key(df: pd.DataFrame) -> pd.Series:
    run = df["run_id"].astype(str) if "run_id" in df.columns else pd.Series("", index=df.index)
    rnd = df["round"].astype(str) if "round" in df.columns else pd.Series("0", index=df.index)
    return run + "/" + rnd


def _runs(round_keys) -> int:
    """How many separate runs a row's round keys (:func:`_round_key`) come from."""
    return max(1, len({str(k).rpartition("/")[0] for k in round_keys}))


def _step(fracs) -> float:
    first = np.unique([f[0] for f in fracs])
    gaps = np.diff(first)
    return float(gaps[gaps > 0].min()) if (gaps > 0).any() else math.inf


def _align(sa: pd.DataFrame, sb: pd.DataFrame) -> list[tuple[str, str | None, str | None]]:
    """(group, layout A, layout B) pairs: nearest SM fractions within half a step, one to one."""
    la = sa.drop_duplicates(["group", "layout"])
    lb = sb.drop_duplicates(["group", "layout"])
    steps = [s for s in (_step(la["fractions"]), _step(lb["fractions"])) if math.isfinite(s)]
    tol = 0.5 * min(steps) if steps else 0.05
    out = []
    for group in dict.fromkeys([*la["group"], *lb["group"]]):
        ga, gb = la[la["group"] == group], lb[lb["group"] == group]
        cand = sorted((max(abs(x - y) for x, y in zip(fa, fb)), i, j)
                      for i, fa in enumerate(ga["fractions"]) for j, fb in enumerate(gb["fractions"])
                      if len(fa) == len(fb))
        used_a, used_b, pairs = set(), set(), {}
        for dist, i, j in cand:
            if dist <= tol + 1e-12 and i not in used_a and j not in used_b:
                used_a.add(i), used_b.add(j)
                pairs[i] = j
        for i, lay in enumerate(ga["layout"]):
            out.append((group, lay, gb["layout"].iloc[pairs[i]] if i in pairs else None))
        out.extend((group, None, lay) for j, lay in enumerate(gb["layout"]) if j not in used_b)
    return out


# ------------------------------------------------------------------------- verdicts


def _row(group, lay_a, lay_b, a, b, info_a, info_b, decide_row) -> dict:
    row: dict[str, Any] = dict.fromkeys(COMPARE_COLUMNS, math.nan)
    row.update(group=group, layout_a=lay_a or "", layout_b=lay_b or "", verdict="", reason="",
               clock_difference=False, cycles_verdict="", noisy_a=False, noisy_b=False)
    for side, lay, x, info in (("a", lay_a, a, info_a), ("b", lay_b, b, info_b)):
        if lay is not None:
            row.update({f"sm_{side}": info[lay][0], f"fraction_{side}": info[lay][1][0], f"reps_{side}": len(x[0]),
                        f"median_{side}_ms": float(np.median(x[0])), f"rounds_{side}": len(set(x[1]))})
    if lay_a is None or lay_b is None:
        row["present"] = "A only" if lay_b is None else "B only"
        row["reason"] = f"measured on {row['present'].split()[0]} only"
        return row
    row["present"] = "both"
    row["ratio"] = row["median_b_ms"] / row["median_a_ms"]
    row.update(decide_row(a, b))
    return row


def _groups(s: pd.DataFrame, keys) -> dict:  # key -> row positions, groupby(sort=False)'s order, no frame per group
    return dict(sorted(s.groupby(keys, sort=False).indices.items(), key=lambda kv: kv[1][0]))


def _arrays(s: pd.DataFrame) -> dict:  # (group, layout) -> values, round keys, clocks: each column read once
    v, r, c = s["value"].to_numpy(float), s["round"].tolist(), s["clock"].to_numpy(float)
    return {k: (v[i], [r[j] for j in i], c[i]) for k, i in _groups(s, ["group", "layout"]).items()}


def _table(sa, sb, pairs, min_effect, confidence, floor: Floor) -> tuple[pd.DataFrame, dict]:
    m = sum(1 for _, x, y in pairs if x is not None and y is not None)
    alpha_each = min(MAX_ALPHA_EACH, (1.0 - confidence) / max(1, m))
    level = 1.0 - alpha_each
    ga, gb, none = _arrays(sa), _arrays(sb), (np.array([]), [], np.array([]))
    info_a = {r.layout: (r.sm, r.fractions) for r in sa.drop_duplicates("layout").itertuples()}
    info_b = {r.layout: (r.sm, r.fractions) for r in sb.drop_duplicates("layout").itertuples()}
    data = [(g, la, lb, ga.get((g, la), none), gb.get((g, lb), none)) for g, la, lb in pairs]
    both = [(a, b) for _, la, lb, a, b in data if la is not None and lb is not None]
    prior, prior_c = prior_variance(both), prior_variance(both, cycles=True)

    def decide_row(a, b):
        return row_verdict(a[0], b[0], a[1], b[1], a[2], b[2], level=level, min_effect=min_effect, floor=floor,
                           prior=prior, prior_cycles=prior_c, runs=(_runs(a[1]), _runs(b[1])))

    rows = [_row(g, la, lb, a, b, info_a, info_b, decide_row) for g, la, lb, a, b in data]
    t = pd.DataFrame(rows, columns=COMPARE_COLUMNS)
    t["_f"] = t["fraction_a"].fillna(t["fraction_b"])
    order = {g: i for i, g in enumerate(dict.fromkeys(t["group"]))}
    t = t.sort_values(["group", "_f"], key=lambda s: s.map(order) if s.name == "group" else s, kind="stable")
    t = t.drop(columns="_f").reset_index(drop=True)
    return t, {"min_effect": min_effect, "confidence": confidence, "compared": m, "alpha_each": alpha_each,
               "level": level, "floor": dataclasses.asdict(floor), "floor_text": floor.text(),
               "round_sd": math.sqrt(prior[0]) if prior[1] else math.nan, "round_df": prior[1]}


def _curves(sa: pd.DataFrame, sb: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for side, s in (("a", sa), ("b", sb)):
        values, sm, fracs = s["value"].to_numpy(float), s["sm"].to_numpy(), s["fractions"].tolist()
        for (group, lay), i in _groups(s, ["group", "layout"]).items():
            v = values[i]
            p10, med, p90 = np.quantile(v, [0.1, 0.5, 0.9])
            rows.append({"side": side, "group": group, "layout": lay, "sm": int(sm[i[0]]),
                         "fraction": float(fracs[i[0]][0]), "reps": len(v), "median_ms": float(med),
                         "p10_ms": float(p10), "p90_ms": float(p90)})
    out = pd.DataFrame(rows, columns=CURVE_COLUMNS)
    return out.sort_values(["side", "group", "fraction"], kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------- best splits


def _by_layout(s: pd.DataFrame, group: str) -> dict[str, tuple[np.ndarray, list]]:
    v, r = s["value"].to_numpy(float), s["round"].tolist()
    return {lay: (v[i], [r[j] for j in i]) for (g, lay), i in _groups(s, ["group", "layout"]).items() if g == group}


def _best_of(s: pd.DataFrame, confidence: float, floor: Floor) -> dict | None:
    per = _by_layout(s, "concurrent")
    if not per:
        return None
    frac = {r.layout: r.fractions[0] for r in s.drop_duplicates("layout").itertuples()}
    lay = min(per, key=lambda k: (float(np.median(per[k][0])), frac[k]))
    _, lo, hi = round_median_ci(per[lay][0], per[lay][1], confidence, floor=floor)
    return {"layout": lay, "fraction": frac[lay], "median_ms": float(np.median(per[lay][0])), "ci_low_ms": lo,
            "ci_high_ms": hi, "reps": len(per[lay][0]), "rounds": len(set(per[lay][1]))}


def _cost(s: pd.DataFrame, best: str, other: str | None, confidence: float, min_effect: float,
          floor: Floor) -> dict:
    """What running ``other`` instead of this side's ``best`` costs on this side (one run: the
    rounds carry the noise; both layouts share the run, so the floor's run part cancels)."""
    if other is None:
        return {"layout": None, "ratio": math.nan, "low": math.nan, "high": math.nan, "verdict": "",
                "reason": "that layout was not measured on this side"}
    per = _by_layout(s, "concurrent")
    if other == best:
        return {"layout": other, "ratio": 1.0, "low": 1.0, "high": 1.0, "verdict": "SAME",
                "reason": "the same layout is best here"}
    ratio = float(np.median(per[other][0]) / np.median(per[best][0]))
    r = round_ratio_ci(per[best][0], per[other][0], per[best][1], per[other][1], confidence,
                       floor=dataclasses.replace(floor, run_sd=0.0))
    verdict, reason = decide(r["low"], r["high"], min_effect)
    return {"layout": other, "ratio": ratio, "low": r["low"], "high": r["high"], "verdict": verdict, "reason": reason}


def _best(sa, sb, pairs, settings) -> dict:
    """Each side's best split, and whether it moved: decided only over the concurrent layouts both
    sides measured (``common``); ``moved`` is None, with ``note`` saying why, where there is none."""
    floor = Floor(**settings["floor"])
    a, b = _best_of(sa, settings["confidence"], floor), _best_of(sb, settings["confidence"], floor)
    if a is None or b is None:
        return {}
    common = [(x, y) for g, x, y in pairs if g == "concurrent" and x is not None and y is not None]
    out = {"a": a, "b": b, "common": len(common), "note": ""}
    if not common:
        out.update(moved=None, note="no concurrent layout was measured on both sides, so whether the best split "
                                    "moved cannot be told")
        return out
    a_to_b, b_to_a = dict(common), {y: x for x, y in common}
    ca = _best_of(sa[sa["layout"].isin(a_to_b)], settings["confidence"], floor)
    cb = _best_of(sb[sb["layout"].isin(b_to_a)], settings["confidence"], floor)
    assert ca is not None and cb is not None  # each side measured the common layouts, concurrent ones
    outside = [f"{side}'s best overall, {x['layout']}, was measured on that side only"
               for side, x, c in (("A", a, ca), ("B", b, cb)) if x["layout"] != c["layout"]]
    if outside:
        out["note"] = (f"decided over the {len(common)} layouts both sides measured ({ca['layout']} on A, "
                       f"{cb['layout']} on B best among them); " + "; ".join(outside))
    conf, eff = settings["confidence"], settings["min_effect"]
    out.update(a_common=ca, b_common=cb, moved=a_to_b[ca["layout"]] != cb["layout"],
               a_best_on_b=_cost(sb, cb["layout"], a_to_b[ca["layout"]], conf, eff, floor),
               b_best_on_a=_cost(sa, ca["layout"], b_to_a[cb["layout"]], conf, eff, floor))
    return out


# ------------------------------------------------------------------ latency target


def _latencies(df: pd.DataFrame, slo_ms: float, q: float, confidence: float) -> pd.DataFrame:
    first = placement(df)[0][1]
    conc = df[(df["mode"] == "concurrent") & (df["workload"] == first)]
    rows = []
    for lay, g in conc.groupby("layout", sort=False):
        v = g["duration_ms"].to_numpy(float)
        lo, hi = quantile_ci(v, q, confidence)
        sizes = parse_layout(lay)
        status = "meets" if hi <= slo_ms else ("fails" if lo > slo_ms else "undecided")
        rows.append({"layout": lay, "sm": sizes[0], "fraction": sizes[0] / sum(sizes), "latency_ms": quantile(v, q),
                     "ci_low_ms": lo, "ci_high_ms": hi, "status": status})
    return pd.DataFrame(rows).sort_values("fraction", kind="stable").reset_index(drop=True)


def _slo_answer(lat: pd.DataFrame, slo_ms: float) -> tuple[str | None, str]:
    meets = lat[lat["status"] == "meets"]
    if len(meets):
        return str(meets["layout"].iloc[0]), "meets"
    ok = lat[(lat["latency_ms"] <= slo_ms) & (lat["status"] != "fails")]
    return (str(ok["layout"].iloc[0]), "undecided") if len(ok) else (None, "not met")


def _slo(fa, fb, pairs, slo_ms, percentile, confidence) -> dict:
    q = percentile / 100.0
    la, lb = _latencies(fa, slo_ms, q, confidence), _latencies(fb, slo_ms, q, confidence)
    (ans_a, how_a), (ans_b, how_b) = _slo_answer(la, slo_ms), _slo_answer(lb, slo_ms)
    a_to_b = {x: y for g, x, y in pairs if g == "concurrent" and x is not None}
    b_to_a = {y: x for g, x, y in pairs if g == "concurrent" and y is not None}

    def status(lat, lay):
        row = lat[lat["layout"] == lay]
        return "not measured" if lay is None or row.empty else str(row["status"].iloc[0])

    return {"slo_ms": slo_ms, "percentile": percentile, "workload": placement(fa)[0][1],
            "a": {"layout": ans_a, "how": how_a}, "b": {"layout": ans_b, "how": how_b},
            "moved": a_to_b.get(ans_a) != ans_b,
            "a_answer_on_b": {"layout": a_to_b.get(ans_a), "status": status(lb, a_to_b.get(ans_a))},
            "b_answer_on_a": {"layout": b_to_a.get(ans_b), "status": status(la, b_to_a.get(ans_b))},
            "latencies": pd.concat([la.assign(side="a"), lb.assign(side="b")], ignore_index=True)}


# ------------------------------------------------------------------------ entry


def _check_settings(min_effect, confidence, slo_ms, percentile) -> None:
    for name, v, lo, hi in (("min_effect", min_effect, 0.0, 1.0), ("confidence", confidence, 0.5, 0.9999),
                            ("percentile", percentile, 0.0, 100.0)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo < float(v) < hi:
            raise ValueError(f"compare: {name} must be a number in ({lo:g}, {hi:g}), got {v!r}")
    if slo_ms is not None and (isinstance(slo_ms, bool) or not isinstance(slo_ms, (int, float))
                               or not 0 < slo_ms < math.inf):
        raise ValueError(f"compare: slo_ms must be a positive number of milliseconds, got {slo_ms!r}")


def compare(a, b=None, *, by: str | None = None, labels=None, min_effect: float = 0.01,
            confidence: float = 0.95, slo_ms: float | None = None, percentile: float = 50.0,
            floor: Floor | None = None) -> Comparison | Comparisons:
    """Compare two results layout by layout; say which differences are real and whether the best split moved.

    Parameters
    ----------
    a, b : pandas.DataFrame or path
        Side A (the reference) and side B: sweep / overlap, tune or scaling results of
        the same workloads, as frames or saved files. Omit ``b`` and pass ``by``.
    by : str, optional
        A column (``run_id``, ``device_uuid``, ``driver``, ...) that splits ``a`` into two sides.
    labels : tuple of str, optional
        Names of the sides (with ``by``: which two values of the column, in order).
    min_effect : float, default 0.01
        The practical-equivalence band: differences within ±1% count as the same.
    confidence : float, default 0.95
        Joint level of all the layout intervals (Bonferroni over the pairs compared;
        no single interval is below 99%).
    slo_ms : float, optional
        A latency target of the first workload: each side's smallest first partition
        whose ``percentile`` duration meets it (sweeps and overlaps; a tune result's
        own ``slo_ms`` when it has one).
    percentile : float, default 50
    floor : Floor, optional
        Run-to-run noise standing in for a side measured in one round; default the larger
        recorded floor of the two sides' cards and workloads
        (:func:`gcexplore.analysis.stats.noise_floor`), shown in ``settings["floor_text"]``.

    Returns
    -------
    Comparison or Comparisons
        A :class:`Comparison` where both sides measured one and the same workload set; where
        they measured several (a campaign's pairs), a :class:`Comparisons` with one comparison
        per set measured on both sides and the sets measured on one side only: different
        workload sets are never pooled.

    Raises
    ------
    ValueError
        Different kinds or workloads, an empty side, a bad ``by``, a kind that cannot be
        compared; the message names what is valid.
    """
    _check_settings(min_effect, confidence, slo_ms, percentile)
    fa, fb, labels, family, by = _sides(a, b, by, labels)
    both, one_sided = set_pairs(fa, fb)
    if len(both) == 1 and not one_sided:
        return _compare_pair(both[0][1], both[0][2], labels, family, by, min_effect=min_effect,
                             confidence=confidence, slo_ms=slo_ms, percentile=percentile, floor=floor)
    if not both and len(one_sided) == 2:  # one set a side, different ones: say so as before
        _same_workloads(fa, fb, family)
    # set by set; a set with no layout in common is kept (each side's best, one-sided rows), and
    # Comparisons says that nothing there was compared: no verdict is invented for it
    pairs = {k: _compare_pair(x, y, labels, family, by, min_effect=min_effect, confidence=confidence,
                              slo_ms=slo_ms, percentile=percentile, floor=floor)
             for k, x, y in both}
    return Comparisons(cast("tuple[str, str]", tuple(labels)), pairs, one_sided, by, tuple(COMPARE_COLUMNS))


def _compare_pair(fa, fb, labels, family, by, *, min_effect, confidence, slo_ms, percentile,
                  floor: Floor | None = None) -> Comparison:
    """The comparison of two sides that measured the same workload set (the grouping is done)."""
    _same_workloads(fa, fb, family)
    # once per unchanged frame: a calibration compares each recorded side with two or three others
    sa, sb = (run_of(f).memo(("compare samples", family), lambda f=f: _samples(f, family)) for f in (fa, fb))
    pairs = _align(sa, sb)
    table, settings = _table(sa, sb, pairs, float(min_effect), float(confidence), floor or side_floor(fa, fb))
    best = _best(sa, sb, pairs, settings) if family != "scaling" else {}
    if slo_ms is None and family == "tune":
        slo_ms = fa.attrs.get("slo_ms") or None
    slo = (_slo(fa, fb, pairs, float(slo_ms), float(percentile), float(confidence))
           if slo_ms is not None and family != "scaling" else None)
    ident = identity_diff(fa, fb)
    if by is not None:  # the column that made the two sides differs by construction (named once)
        ident = ident[ident["field"] != IDENTITY_LABELS.get(by, by)]
        ident = pd.concat([pd.DataFrame([{"field": by, "a": labels[0], "b": labels[1], "same": False}]), ident],
                          ignore_index=True)
    return Comparison(family, tuple(labels), table, _curves(sa, sb), best, slo, ident, settings,
                      (dict(fa.attrs), dict(fb.attrs)))
