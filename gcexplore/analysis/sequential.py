"""Compare until decided: measure the undecided rows again, as new runs, until compare decides them.

:func:`compare_until_decided` takes two callables that each measure one side once more (a new
run: its own engine, partitions and run id) and returns the :class:`~gcexplore.analysis.comparison.Comparison`
of everything measured. After each look, the rows still UNCLEAR are measured again on both sides
(only their layouts), up to ``max_runs`` runs per side. A run adds what rounds cannot: the card's
run-to-run offset (``Floor.run_sd``) averages over the runs a side pools, so a GEMM chain whose
single run is UNCLEAR at a 3% shift can be decided by two or three. The sides take turns at being
measured first (A B, then B A, ...): whatever the first run after a pause pays is paid by both.

The stopping rule is fixed in advance and safe under optional stopping: every look is made at
confidence ``1 - (1 - confidence) / max_runs`` (Bonferroni over the at most ``max_runs`` looks, on
top of compare's Bonferroni over the rows), and a row keeps the verdict of the look that first
decided it. So the chance that any row is ever called FAST / SLOW wrongly, at any look, stays
below ``1 - confidence``, however the looks turned out. Pure: the measuring is the callables'.
"""

from __future__ import annotations

import dataclasses
import time
from typing import cast

import pandas as pd

from .comparison import Comparison, compare
from .stats import Floor

__all__ = ["compare_until_decided"]

DECIDED = ("FAST", "SLOW", "SAME")


def _sizes(undecided: pd.DataFrame) -> list[int]:
    """The first partition's SMs of the undecided rows, as scaling and sweep take them."""
    return sorted({int(v) for v in undecided["sm_a"].dropna()})


def compare_until_decided(measure_a, measure_b, *, max_runs: int = 4, min_effect: float = 0.01,
                          confidence: float = 0.95, floor: Floor | None = None, budget_s: float | None = None,
                          labels=("A", "B")) -> Comparison:
    """Compare two sides, measuring the undecided rows again (new runs) until each is decided.

    Parameters
    ----------
    measure_a, measure_b : callable
        ``measure(sizes)`` measures its side once more and returns the result (a scaling, sweep or
        overlap frame): ``sizes`` is ``None`` for the first run (everything), then the sorted first
        partition SM counts of the rows still undecided (what :func:`gcexplore.scaling` and
        :func:`gcexplore.sweep` take as ``sizes``; a scaling's whole-device row appears as the
        card's SM count). Each call must be a new run (its own run id).
    max_runs : int, default 4
        Most runs per side, and the number of looks the error rate is split over.
    min_effect, confidence, floor
        As :func:`gcexplore.compare`; ``confidence`` holds jointly over all rows and all looks.
    budget_s : float, optional
        Wall-clock seconds after which no further run starts (stopping early keeps the guarantee).
    labels : tuple of str

    Returns
    -------
    Comparison
        Of all runs measured, with each row's verdict from the look that first decided it;
        ``settings["looks"]`` lists per look the runs per side and the verdict counts,
        ``settings["runs_per_side"]``, ``settings["look_confidence"]``; the table gains a ``look``
        column (the look that decided the row, the last look for rows still UNCLEAR).
    """
    if isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1:
        raise ValueError(f"compare_until_decided: max_runs must be a whole number >= 1, got {max_runs!r}")
    if not (callable(measure_a) and callable(measure_b)):
        raise ValueError("compare_until_decided: measure_a and measure_b must be callables measure(sizes) -> result")
    if budget_s is not None and not (isinstance(budget_s, (int, float)) and budget_s > 0):
        raise ValueError(f"compare_until_decided: budget_s must be a positive number of seconds, got {budget_s!r}")
    if not 0.5 < confidence < 1:
        raise ValueError(f"compare_until_decided: confidence must be in (0.5, 1), got {confidence!r}")
    level = 1.0 - (1.0 - confidence) / max_runs
    t0 = time.perf_counter()
    sides: tuple[list, list] = ([], [])
    frozen: dict[tuple, dict] = {}  # (group, layout_a, layout_b) -> the row as first decided, with its look
    looks, sizes, c = [], None, None
    for look in range(1, max_runs + 1):
        # A then B at odd looks, B then A at even ones: on an H100 the side measured first after the
        # pause for a look's comparison ran 0.6% slower (GEMM chain, batch d1), a bias more runs would
        # only sharpen; alternating cancels it at every even look
        first = 0 if look % 2 else 1
        for i in (first, 1 - first):
            df = (measure_a, measure_b)[i](sizes)
            if not isinstance(df, pd.DataFrame) or df.empty:
                raise ValueError(f"compare_until_decided: measure({sizes!r}) returned no result rows")
            sides[i].append(df)
        a, b = (pd.concat(s, ignore_index=True) for s in sides)
        a.attrs, b.attrs = dict(sides[0][0].attrs), dict(sides[1][0].attrs)
        c = compare(a, b, labels=labels, min_effect=min_effect, confidence=level, floor=floor)
        if not isinstance(c, Comparison):
            raise ValueError("compare_until_decided: the sides measured several workload sets; "
                             "compare one set at a time")
        t = c.table[c.table["present"] == "both"]
        for r in t.itertuples():
            key = (r.group, r.layout_a, r.layout_b)
            if key not in frozen and r.verdict in DECIDED:
                frozen[key] = {**r._asdict(), "look": look}
        undecided = t[[(r.group, r.layout_a, r.layout_b) not in frozen for r in t.itertuples()]]
        looks.append({"look": look, "first": labels[first], "runs_per_side": look,
                      "elapsed_s": time.perf_counter() - t0, "undecided": len(undecided),
                      **{v.lower(): sum(1 for f in frozen.values() if f["verdict"] == v) for v in DECIDED}})
        sizes = _sizes(undecided)
        if undecided.empty or not sizes or (budget_s is not None and time.perf_counter() - t0 >= budget_s):
            break
    c = cast(Comparison, c)  # max_runs >= 1 looks, each one workload set a side: one Comparison
    table = c.table.copy()
    table["look"] = looks[-1]["look"]
    for i, r in enumerate(table.itertuples()):
        f = frozen.get((r.group, r.layout_a, r.layout_b))
        if f is not None:
            for col in table.columns:
                if col in f:
                    table.at[i, col] = f[col]
            table.at[i, "look"] = f["look"]
    settings = {**c.settings, "confidence": confidence, "look_confidence": level, "max_runs": max_runs,
                "runs_per_side": looks[-1]["runs_per_side"], "looks": looks}
    return dataclasses.replace(c, table=table, settings=settings)
