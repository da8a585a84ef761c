"""The split tuner's search and stopping rules, in pure Python (no GPU, no pandas).

:func:`search` finds, among candidate layouts (the SM count of each workload, the remainder's last), either the
layout with the lowest median concurrent makespan or the smallest first partition whose latency percentile meets
a target, by calling ``measure(layout, n) -> [(makespan_ms, (duration_ms of each workload, ...)), ...]`` for
``n`` more repetitions of the layouts it chooses. :mod:`gcexplore.tune` gives it a measure that runs on the GPU;
the tests give it synthetic curves.

How it decides
--------------
- **Bounds instead of a curve model.** Every concurrent repetition times each workload, and two mild facts about
  one workload's duration bound it at layouts not measured: it is no shorter on fewer SMs (``placement_slack``
  allowed) and at most linearly faster on more (``slack`` allowed). The makespan of an unmeasured layout is then
  at least the largest workload bound plus the smallest start offset measured. The search measures the
  unmeasured layout with the lowest bound next (a prediction that is optimistic by construction) and stops when
  no unmeasured layout can beat the answer by more than ``tolerance``. Where the measurements break a fact (a
  workload faster on fewer SMs, or more than linearly faster), that workload's slack grows to 1.5 times the
  largest breach seen, so the bounds loosen and more layouts are measured: a curve with two minima is not taken
  for one.
- **Neighbours always.** The answer's neighbours (one SM chunk moved between two workloads) are measured
  whatever the bounds say.
- **Rounds until decided.** Every measurement of a layout is one round (a fresh split, ``repeats`` repetitions).
  The answer is confirmed against a measured rival when the lower confidence bound of rival / answer is at least
  ``1 / (1 + tolerance)``: the rival is not faster by more than the tolerance. The bound's unit is the round
  (:func:`~gcexplore.analysis.stats.round_ratio_ci`): a layout measured in one round carries the card's
  run-to-run floor (``Settings.floor``), so a close pair is not decided by the repetitions of one round
  (``Settings.settle``: a rival within the tolerance by its median is also decided once the bound keeps it from
  being faster by more than ``settle``). Until it is decided both get another round, up to ``max_repeats``
  repetitions, after which the pair is recorded as too close to call and the lower median wins. Medians are
  reported with distribution-free intervals (order statistics, :func:`quantile_ci`).
- **Latency targets.** With ``slo_ms`` the search looks for the smallest first partition whose ``percentile`` of
  the first workload's duration is at most the target: a layout *meets* when the interval's top is under the
  target, *fails* when its bottom is over it; repetitions are added until one holds. Probes alternate between
  the size predicted by interpolating the measured latencies and bisection; sizes whose latency bound exceeds
  the target are not measured; the answer's smaller neighbour is always measured and must fail. A target not met
  even on the largest partition is an answer (``met=False``) with the best latency measured.

Over 500 lines: one pure search whose stopping rules share its state; split, each part would reach
into the others.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import cast

from ..analysis.stats import disagree, pooled_pair_sd, quantile, quantile_ci, round_ratio_ci
from .search_settings import Settings

__all__ = ["Outcome", "Settings", "label", "search"]

Layout = tuple[int, ...]
Rep = tuple[float, tuple[float, ...]]


def label(layout: Sequence[int]) -> str:
    """``(24, 108)`` -> ``"24+108"`` (the layout labels of every result)."""
    return "+".join(str(int(s)) for s in layout)


# ------------------------------------------------------------------------ outcome


@dataclasses.dataclass
class Outcome:
    """What :func:`search` found and why (plain values, ready for ``df.attrs``).

    Attributes
    ----------
    answer : str or None
        Label of the chosen layout; None for an unreachable target.
    met : bool
        The latency target was met (always True for the makespan objective).
    value_ms : float
        Median makespan (makespan) or the latency percentile (slo) at the answer; for an unreachable target, the
        best (lowest) latency percentile measured.
    best_measured : str or None
        Where ``value_ms`` was measured.
    reason : list of str
        Sentences, each computed from the measurements: why this layout.
    comparisons : list of dict
        The answer against each measured rival (makespan) or each measured layout's verdict against the target
        (slo), with medians, intervals and margins.
    unmeasured : dict of str to dict
        Layouts not measured: ``{"bound_ms": the bound that ruled it out (NaN if none was needed), "why": a
        sentence}``.
    visits : list of dict
        ``{"step", "layout", "reps"}`` in search order.
    notes : list of str
        Assumptions the measurements broke, and the slack used instead.
    """

    objective: str
    answer: str | None
    met: bool
    value_ms: float
    best_measured: str | None
    reason: list[str]
    comparisons: list[dict]
    unmeasured: dict[str, dict]
    visits: list[dict]
    notes: list[str]

    def metadata(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "objective"}  # copies, in field order


# ------------------------------------------------------------------------ search state


class _State:
    """Candidates, measurements so far, and the bounds they imply."""

    def __init__(self, candidates: Sequence[Sequence[int]], measure, settings: Settings,
                 names: Sequence[str] = (), prior=None):
        cands = [tuple(int(s) for s in c) for c in candidates]
        if not cands:
            raise ValueError("no candidate layouts to search")
        widths = {len(c) for c in cands}
        if len(widths) != 1 or min(widths) < 2:
            raise ValueError(f"candidate layouts need one SM count per workload (2 or more), got {cands[:3]}...")
        self.cands = list(dict.fromkeys(cands))
        self.n = widths.pop()
        self.measure, self.s, self.names = measure, settings, [str(n) for n in names]
        self.data: dict[Layout, list[Rep]] = {}
        self.round_of: dict[Layout, list[int]] = {}  # the round (visit of the layout) of each repetition
        self.visits: list[dict] = []
        values = [sorted({c[i] for c in self.cands}) for i in range(self.n)]
        self.rank = {c: tuple(values[i].index(c[i]) for i in range(self.n)) for c in self.cands}
        self.q = settings.percentile / 100.0
        # predictions: layout -> {"makespan": (point, low), "first": (point, low)}
        self.prior = {tuple(int(x) for x in k): v for k, v in (prior or {}).items()}

    def first_repeats(self, layout: Layout, best: Layout) -> int:
        """Repetitions of ``layout``'s first visit: ``confirm_repeats`` where its prediction is slower than the
        answer's by more than the tolerance, else ``repeats``."""
        mine, theirs = (self.prior.get(c, {}).get("makespan") for c in (layout, best))
        if (self.s.confirm_repeats is None or self.s.objective != "makespan" or mine is None or theirs is None
                or not mine[0] > theirs[0] * (1.0 + self.s.tolerance)):
            return self.s.repeats
        return self.s.confirm_repeats

    def prior_low(self, layout: Layout, what: str) -> float:
        """The predicted interval's bottom (0 without a prediction): no layout is measured that
        its prediction says cannot beat the answer."""
        return float(self.prior.get(layout, {}).get(what, (0.0, 0.0))[1])

    # -- measuring --------------------------------------------------------------
    def visit(self, layout: Layout, n: int) -> None:
        n = min(n, self.s.max_repeats - len(self.data.get(layout, [])))
        if n <= 0:
            return
        reps = [self._rep(r, layout) for r in self.measure(layout, n)]
        rnd = len(set(self.round_of.get(layout, [])))
        if (len(reps) == n == 2 and rnd == 0 and self.s.spread == "pooled" and self.s.max_repeats > 2
                and disagree(*cast("tuple[float, float]", tuple(m if self.s.objective == "makespan" else d[0]
                                                              for m, d in reps)), self.s.tolerance)):
            # a median of 3 outvotes a stray
            n, reps = 3, reps + [self._rep(r, layout) for r in self.measure(layout, 1)]
        if len(reps) != n:
            raise ValueError(f"measure({label(layout)}, ...) returned {len(reps)} repetitions, expected {n}")
        self.visits.append({"step": len(self.visits), "layout": label(layout), "reps": n, "round": rnd})
        self.data.setdefault(layout, []).extend(reps)
        self.round_of.setdefault(layout, []).extend([rnd] * n)

    def _rep(self, r, layout) -> Rep:
        makespan, durations = r
        makespan, durations = float(makespan), tuple(float(d) for d in durations)
        if len(durations) != self.n:
            raise ValueError(f"measure({label(layout)}, ...) gave {len(durations)} durations per repetition, "
                             f"expected one per workload ({self.n})")
        # A NaN sorts anywhere and a negative time beats every real one: either would pick the answer.
        if not (math.isfinite(makespan) and makespan > 0 and all(math.isfinite(d) and d >= 0 for d in durations)):
            raise ValueError(f"measure({label(layout)}, ...) gave makespan {makespan!r} ms and durations "
                             f"{list(durations)!r} ms in one repetition; the search decides only on finite "
                             "times (makespan > 0, durations >= 0): a timing failed, so no answer is given "
                             "from it (the rows measured so far are kept)")
        return makespan, durations

    def reps(self, layout: Layout) -> int:
        return len(self.data.get(layout, []))

    def rounds(self, layout: Layout) -> int:
        return len(set(self.round_of.get(layout, [])))

    def more(self, layout: Layout) -> bool:
        """Add a round of ``repeats`` repetitions; False when the layout is at ``max_repeats``."""
        if self.reps(layout) >= self.s.max_repeats:
            return False
        self.visit(layout, self.s.repeats)
        return True

    def bound(self, best: Layout, rival: Layout) -> tuple[float, float]:
        """(estimate, lower bound) of rival / best at the confidence, the round as the unit."""
        within = pooled_pair_sd([self.samples(c) for c in self.measured()]) if self.s.spread == "pooled" else None
        r = round_ratio_ci(self.samples(best), self.samples(rival), self.round_of[best], self.round_of[rival],
                           self.s.confidence, floor=self.s.floor, within_sd=within)
        return r["ratio"], r["low"]

    # -- values -----------------------------------------------------------------
    def samples(self, layout: Layout) -> list[float]:
        """The objective's samples: makespans, or the first workload's durations (slo)."""
        if self.s.objective == "makespan":
            return [m for m, _ in self.data[layout]]
        return [d[0] for _, d in self.data[layout]]

    def value(self, layout: Layout) -> float:
        return quantile(self.samples(layout), 0.5 if self.s.objective == "makespan" else self.q)

    def ci(self, layout: Layout) -> tuple[float, float]:
        q = 0.5 if self.s.objective == "makespan" else self.q
        return quantile_ci(self.samples(layout), q, self.s.confidence)

    def median_duration(self, layout: Layout, i: int) -> float:
        return quantile([d[i] for _, d in self.data[layout]], 0.5)

    def measured(self) -> list[Layout]:
        return [c for c in self.cands if c in self.data]

    def neighbours(self, layout: Layout) -> list[Layout]:
        """Layouts one SM chunk away: two workloads' sizes each one step apart, the rest equal."""
        r = self.rank[layout]
        return [c for c in self.cands
                if c != layout and sum(abs(a - b) for a, b in zip(self.rank[c], r)) == 2
                and sum(a != b for a, b in zip(self.rank[c], r)) == 2]

    # -- bounds -----------------------------------------------------------------
    def slacks(self) -> list[tuple[float, float]]:
        """Per workload (placement slack, linear slack), grown where measurements break them."""
        out = []
        for i in range(self.n):
            pts = sorted((c[i], self.median_duration(c, i)) for c in self.measured())
            mono = lin = 0.0
            for a, (s1, d1) in enumerate(pts):
                for s2, d2 in pts[a + 1:]:
                    if s1 < s2 and d1 > 0 and d2 > 0:
                        mono = max(mono, 1.0 - d1 / d2)            # faster on fewer SMs
                        lin = max(lin, 1.0 - (d2 * s2) / (d1 * s1))  # more than linearly faster
            out.append((min(1.0, max(self.s.placement_slack, 1.5 * mono)),
                        min(1.0, max(self.s.slack, 1.5 * lin))))
        return out

    def workload_bound(self, i: int, sms: int, slacks) -> float:
        """Lowest duration workload ``i`` can have on ``sms`` SMs, given the measurements."""
        mono, lin = slacks[i]
        lb = 0.0
        for c in self.measured():
            d = self.median_duration(c, i)
            if c[i] >= sms:
                lb = max(lb, d * (1.0 - mono))
            else:
                lb = max(lb, d * c[i] / sms * (1.0 - lin))
        return lb

    def offset(self) -> float:
        """Smallest median (makespan - longest workload) over the measured layouts, >= 0."""
        offs = [quantile([m - max(d) for m, d in self.data[c]], 0.5) for c in self.measured()]
        return max(0.0, min(offs)) if offs else 0.0

    def makespan_bound(self, layout: Layout, slacks, offset: float) -> float:
        measured = max(self.workload_bound(i, layout[i], slacks) for i in range(self.n)) + offset
        return max(measured, self.prior_low(layout, "makespan"))

    def notes(self) -> list[str]:
        out = []
        for i, (mono, lin) in enumerate(self.slacks()):
            name = self.names[i] if i < len(self.names) else f"workload {i}"
            if mono > self.s.placement_slack:
                out.append(f"{name} ran up to {mono / 1.5:.1%} faster on fewer SMs in these measurements; "
                           f"its bounds allow {mono:.1%}")
            if lin > self.s.slack:
                out.append(f"{name} sped up up to {lin / 1.5:.1%} more than linearly in these measurements; "
                           f"its bounds allow {lin:.1%}")
        return out

    def nearest(self, shares: Sequence[float]) -> Layout:
        """The candidate closest to the given SM shares (fractions of the device)."""
        total = sum(self.cands[0])
        return min(self.cands, key=lambda c: (sum(abs(s - f * total) for s, f in zip(c, shares)), c))

    def start(self) -> Layout:
        """The most balanced layout (closest to equal shares)."""
        return self.nearest([1.0 / self.n] * self.n)

    def probes(self) -> list[Layout]:
        """The balanced layout, then each workload on half its balanced share (the others
        sharing the rest): a coarse look at both sides before the bounds are trusted. With
        predictions: the predicted best only (its neighbours are measured anyway)."""
        ranked = [c for c in self.cands if "makespan" in self.prior.get(c, {})]
        if ranked:
            return [min(ranked, key=lambda c: (self.prior[c]["makespan"][0], c))]
        out = [self.start()]
        for i in range(self.n):
            half = 0.5 / self.n
            out.append(self.nearest([half if j == i else (1.0 - half) / (self.n - 1) for j in range(self.n)]))
        return list(dict.fromkeys(out))


# ------------------------------------------------------------------------ makespan


def _fmt_ci(ci: tuple[float, float]) -> str:
    return f"[{ci[0]:.4g}, {ci[1]:.4g}]"


def _next_makespan(st: _State, best: Layout) -> Layout | None:
    """The unmeasured layout to measure next: the lowest bound, else a neighbour of the answer."""
    slacks, off = st.slacks(), st.offset()
    limit = st.value(best) * (1.0 - st.s.tolerance)
    open_ = [(st.makespan_bound(c, slacks, off), c) for c in st.cands if c not in st.data]
    open_ = [(b, c) for b, c in open_ if b < limit]
    if open_:
        low = min(b for b, _ in open_)
        near = [c for b, c in open_ if b <= low * 1.01]
        return min(near, key=lambda c: (sum(abs(a - b) for a, b in zip(st.rank[c], st.rank[best])), c))
    # A neighbour predicted unable to beat the answer is not measured (without predictions
    # prior_low is 0 and every neighbour is).
    todo = [c for c in st.neighbours(best) if c not in st.data and st.prior_low(c, "makespan") < limit]
    return todo[0] if todo else None


def _settled(st: _State, est: float, low: float) -> bool:
    """Rival / answer within the tolerance by the medians and, at the confidence, not below 1 - settle."""
    return st.s.settle is not None and est * (1.0 + st.s.tolerance) >= 1.0 and low * (1.0 + st.s.settle) >= 1.0


def _confirmed(st: _State, best: Layout, rival: Layout) -> bool:
    """The rival is not faster than the answer by more than the tolerance (at the confidence), or settled."""
    est, low = st.bound(best, rival)
    return low * (1.0 + st.s.tolerance) >= 1.0 or _settled(st, est, low)


def _makespan_search(st: _State) -> set:
    for c in st.probes():
        st.visit(c, st.s.repeats)
    close: set = set()  # pairs at max_repeats still too close to call
    while True:
        best = min(st.measured(), key=lambda c: (st.value(c), c))
        nxt = _next_makespan(st, best)
        if nxt is not None:
            st.visit(nxt, st.first_repeats(nxt, best))
            continue
        rivals = sorted((c for c in st.measured() if c != best and not _confirmed(st, best, c)
                         and frozenset((best, c)) not in close), key=st.value)
        if not rivals:
            return close
        grown = [st.more(c) for c in (best, rivals[0])]
        if not any(grown):
            close.add(frozenset((best, rivals[0])))


def _makespan_outcome(st: _State, close: set) -> Outcome:
    best = min(st.measured(), key=lambda c: (st.value(c), c))
    v, ci, tol = st.value(best), st.ci(best), st.s.tolerance
    comps, reason = [], [f"{label(best)} has the lowest median concurrent makespan measured: {v:.4g} ms, "
                         f"{st.s.confidence:.0%} interval {_fmt_ci(ci)} over {st.reps(best)} repetitions"]
    for c in sorted(st.measured(), key=st.value):
        if c == best:
            continue
        rv, rci = st.value(c), st.ci(c)
        est, low = st.bound(best, c)
        if frozenset((best, c)) in close:
            decision = (f"too close to call at {st.reps(c)} repetitions in {st.rounds(c)} rounds "
                        f"(median +{rv / v - 1:.2%})")
        elif low > 1.0:
            decision = f"slower by at least {low - 1:.2%} (estimate {est - 1:.2%})"
        elif low * (1.0 + tol) < 1.0 and _settled(st, est, low):
            decision = (f"within the {tol:.1%} tolerance by the medians (estimate {est - 1:+.2%}) and not faster "
                        f"by more than {st.s.settle:.1%} (at least {low - 1:+.2%}): settled")
        else:
            decision = f"within the {tol:.1%} tolerance (estimate {est - 1:+.2%}, at least {low - 1:+.2%})"
        comps.append({"layout": label(c), "split_sm_count": c[0], "median_ms": rv, "ci_low_ms": rci[0],
                      "ci_high_ms": rci[1], "reps": st.reps(c), "rounds": st.rounds(c), "margin": est - 1.0,
                      "margin_low": low - 1.0,
                      "decision": decision, "neighbour": c in st.neighbours(best)})
    nb = [d for d in comps if d["neighbour"]]
    if nb:
        reason.append("neighbours measured: " + "; ".join(f"{d['layout']} {d['decision']}" for d in nb))
    slacks, off = st.slacks(), st.offset()
    unmeasured = {}
    for c in st.cands:
        if c not in st.data:
            b = st.makespan_bound(c, slacks, off)
            what = "predicted at least" if b == st.prior_low(c, "makespan") > 0 else "makespan bound"
            unmeasured[label(c)] = {"bound_ms": b, "why": f"{what} {b:.4g} ms >= {v * (1 - tol):.4g} ms "
                                                          f"(the answer less {tol:.1%})"}
    if unmeasured:
        reason.append(f"{len(unmeasured)} layout(s) not measured: no workload is faster on fewer SMs or more "
                      f"than linearly faster on more (within the slack)"
                      f"{' and none is predicted to' if st.prior else ''}"
                      f", so none can beat {v:.4g} ms by more than {tol:.1%}")
    for d in comps:
        if d["decision"].startswith("too close"):
            reason.append(f"{d['layout']} is {d['decision']}; the lower median wins")
    single = sum(1 for c in st.measured() if st.rounds(c) < 2)
    if single:
        reason.append(f"each visit of a layout is a round (a fresh split); {single} layout(s) measured in one round "
                      f"carry the {st.s.floor.text()}")
    return Outcome("makespan", label(best), True, v, label(best), reason, comps, unmeasured,
                   st.visits, st.notes())


# ------------------------------------------------------------------------ latency target


def _verdict(st: _State, layout: Layout) -> tuple[bool, bool]:
    """(meets, decided): add repetitions until the interval is on one side of the target."""
    slo = st.s.slo_ms
    assert slo is not None  # the slo objective has a target
    while True:
        lo, hi = st.ci(layout)
        if hi <= slo or lo > slo:
            return hi <= slo, True
        if not st.more(layout):
            return st.value(layout) <= slo, False


def _pick_slo(st: _State, open_: list[Layout], verdicts: dict, turn: int) -> Layout:
    """Alternately the size the measured latencies predict, and bisection of what is open."""
    if turn % 2 == 1:
        return open_[len(open_) // 2]
    assert st.s.slo_ms is not None  # the slo objective has a target
    slo, pts = st.s.slo_ms, sorted((c[0], st.value(c)) for c in verdicts if st.value(c) > 0)
    fails = [p for p in pts if p[1] > slo]
    meets = [p for p in pts if p[1] <= slo]
    a, b = (max(fails) if fails else None), (min(meets) if meets else None)
    if a and b and b[1] < a[1]:  # log-log interpolation between the bracket's ends
        k = math.exp(math.log(a[0]) + (math.log(slo) - math.log(a[1])) * math.log(b[0] / a[0])
                     / math.log(b[1] / a[1]))
    else:  # perfect scaling from the point nearest the target
        k0, v0 = min(pts, key=lambda p: abs(math.log(p[1] / slo)))
        k = k0 * v0 / slo
    above = [c for c in open_ if c[0] >= k]
    return above[0] if above else open_[-1]


def _slo_search(st: _State) -> dict:
    assert st.s.slo_ms is not None  # the slo objective has a target
    order = sorted(st.cands, key=lambda c: (c[0], c))
    if len({c[0] for c in order}) != len(order):
        raise ValueError("a latency target needs one candidate per first-partition size "
                         "(fix the middle workloads' sizes)")
    verdicts: dict[Layout, tuple[bool, bool]] = {}

    def probe(c):
        st.visit(c, st.s.repeats)
        verdicts[c] = _verdict(st, c)

    guess = [c for c in order if "first" in st.prior.get(c, {}) and st.prior[c]["first"][0] <= st.s.slo_ms]
    probe(guess[0] if guess else st.start())  # the smallest size predicted to meet the target
    turn = 0
    while True:
        meeting = [c for c in order if c in verdicts and verdicts[c][0]]
        m = meeting[0] if meeting else None
        slacks = st.slacks()
        region = order[:order.index(m)] if m else order
        open_ = [c for c in region if c not in st.data and st.workload_bound(0, c[0], slacks) <= st.s.slo_ms
                 and st.prior_low(c, "first") <= st.s.slo_ms]
        if open_:
            probe(_pick_slo(st, open_, verdicts, turn))
            turn += 1
        elif m is None and order[-1] not in st.data:
            probe(order[-1])  # "not met" is said only after the largest partition was measured
        elif (m is not None and order.index(m) > 0 and order[order.index(m) - 1] not in st.data
              and st.prior_low(order[order.index(m) - 1], "first") <= st.s.slo_ms):
            probe(order[order.index(m) - 1])  # the answer's smaller neighbour, unless predicted to fail
        else:
            return verdicts


def _slo_outcome(st: _State, verdicts: dict) -> Outcome:
    s, pct = st.s, f"p{st.s.percentile:g}"
    assert s.slo_ms is not None  # the slo objective has a target
    meeting = sorted((c for c in verdicts if verdicts[c][0]), key=lambda c: c[0])
    comps = []
    for c in sorted(verdicts, key=lambda c: c[0]):
        meets, decided = verdicts[c]
        lo, hi = st.ci(c)
        comps.append({"layout": label(c), "split_sm_count": c[0], "latency_ms": st.value(c), "ci_low_ms": lo,
                      "ci_high_ms": hi, "reps": st.reps(c), "margin": st.value(c) / s.slo_ms - 1.0, "meets": meets,
                      "decided": decided})
    slacks = st.slacks()
    if not meeting:
        best = min(verdicts, key=lambda c: (st.value(c), c))
        reason = [f"target {s.slo_ms:.4g} ms not met: the lowest {pct} latency of the first workload measured "
                  f"is {st.value(best):.4g} ms at {label(best)}, including the largest partition "
                  f"({label(max(st.cands, key=lambda c: c[0]))})"]
        unmeasured = {label(c): _latency_bound(st, c, slacks) for c in st.cands if c not in st.data}
        return Outcome("slo", None, False, st.value(best), label(best), reason, comps, unmeasured,
                       st.visits, st.notes())
    m = meeting[0]
    lo, hi = st.ci(m)
    how = "" if verdicts[m][1] else f" (undecided at {st.reps(m)} repetitions; by the point estimate)"
    reason = [f"{label(m)} is the smallest first partition measured whose {pct} latency meets "
              f"{s.slo_ms:.4g} ms: {st.value(m):.4g} ms, interval {_fmt_ci((lo, hi))}{how}"]
    below = [d for d in comps if d["split_sm_count"] < m[0]]
    if below:
        d = max(below, key=lambda d: d["split_sm_count"])
        reason.append(f"the next smaller measured, {d['layout']}, fails: {d['latency_ms']:.4g} ms "
                      f"({d['margin']:+.1%} over the target)")
    unmeasured = {label(c): ({"bound_ms": math.nan, "why": "larger than the answer"} if c[0] > m[0]
                             else _latency_bound(st, c, slacks)) for c in st.cands if c not in st.data}
    return Outcome("slo", label(m), True, st.value(m), label(m), reason, comps, unmeasured,
                   st.visits, st.notes())


def _latency_bound(st: _State, c: Layout, slacks) -> dict:
    b = st.workload_bound(0, c[0], slacks)
    return {"bound_ms": b, "why": f"latency bound {b:.4g} ms > the target {st.s.slo_ms:.4g} ms"}


# ------------------------------------------------------------------------ entry point


def search(candidates: Sequence[Sequence[int]], measure: Callable[[Layout, int], list],
           settings: Settings | None = None, *, names: Sequence[str] = (), prior=None) -> Outcome:
    """Find the best layout (or the smallest meeting a latency target) by measuring few.

    Parameters
    ----------
    candidates : sequence of tuple of int
        Layouts to choose from: each workload's SM count in order, the remainder last.
    measure : callable
        ``measure(layout, n)`` runs ``n`` more concurrent repetitions of ``layout`` and
        returns one ``(makespan_ms, (duration_ms per workload))`` per repetition.
    settings : Settings, optional
    names : sequence of str, optional
        Workload names, for the notes.
    prior : mapping, optional
        Predictions per layout: ``{layout: {"makespan": (point, low), "first": (point,
        low)}}`` (the first workload's duration, for a latency target). The search starts
        at the predicted best (or the smallest size predicted to meet the target) and does
        not measure layouts whose predicted low end cannot beat the answer; the answer is
        still confirmed against its measured neighbours.

    Returns
    -------
    Outcome
    """
    settings = settings or Settings()
    st = _State(candidates, measure, settings, names, prior)
    if settings.objective == "makespan":
        return _makespan_outcome(st, _makespan_search(st))
    return _slo_outcome(st, _slo_search(st))
