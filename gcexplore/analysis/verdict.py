"""Compare's verdict on one row, the one place a comparison decides (pure numpy / pandas).

:func:`row_verdict` takes one compared row's repetitions (times, round keys, SM clocks) of both
sides and returns its interval, verdict and reason: the ratio B / A with an interval whose unit
is the round (:func:`gcexplore.analysis.stats.round_ratio_ci`), FAST / SLOW / SAME against the
practical-equivalence band (:func:`decide`), UNCLEAR with the rounds per side that would decide
it, a side flagged noisy, and the clock-normalised confirmation. :func:`prior_variance` pools the
between-round variance over the rows compared (each row's own is shrunk toward it);
:func:`side_floor` picks the run-to-run floor of the two sides' cards and workloads.
:mod:`gcexplore.analysis.comparison` groups, pairs and aligns the rows and calls these.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .stats import (Floor, pooled_variance, round_medians, round_ratio_ci, round_variance, rounds_needed, run_floor,
                    steady_rounds)
from .stats import stats as sample_stats

__all__ = ["decide", "prior_variance", "row_verdict", "side_floor"]


def _pct(r: float) -> str:
    return f"{r - 1:+.2%}"


def decide(low: float, high: float, min_effect: float) -> tuple[str, str]:
    """(verdict, reason) of a ratio interval against the band ``[1/(1+e), 1+e]``."""
    if not (math.isfinite(low) and math.isfinite(high)) or low <= 0:
        return "UNCLEAR", "too few repetitions to bound the ratio at this level"
    up, down = 1.0 + min_effect, 1.0 / (1.0 + min_effect)
    span = f"interval [{_pct(low)}, {_pct(high)}]"
    if high < down:
        return "FAST", f"{span} lies below -{min_effect:.1%}"
    if low > up:
        return "SLOW", f"{span} lies above +{min_effect:.1%}"
    if low >= down and high <= up:
        return "SAME", f"{span} lies within ±{min_effect:.1%}"
    return "UNCLEAR", f"{span} straddles the ±{min_effect:.1%} band's edge"


def _noise(v: np.ndarray, side: str) -> str:
    s = sample_stats(v)
    if not s["noisy"]:
        return ""
    return (f"{side} flagged noisy (IQR {s['iqr_ms'] / s['median_ms']:.0%}, p10-p90 "
            f"{(s['p90_ms'] - s['p10_ms']) / s['median_ms']:.0%} of its median)")


def row_verdict(va, vb, ra, rb, ca, cb, *, level: float, min_effect: float, floor: Floor,
                prior: tuple[float, int] | None = None, prior_cycles: tuple[float, int] | None = None,
                runs: tuple[int, int] = (1, 1)) -> dict:
    """The verdict of one compared row, its interval and why: the one place compare decides.

    ``va``/``vb`` are the repetitions' times (ms) of side A and B, ``ra``/``rb`` their round keys,
    ``ca``/``cb`` their SM clocks (MHz, NaN where unrecorded). The interval of B / A is
    :func:`~gcexplore.analysis.stats.round_ratio_ci` (the round is the unit; a side of one round
    carries ``floor``); FAST / SLOW / SAME against the ``±min_effect`` band, UNCLEAR otherwise with
    the number of rounds per side that would decide it. ``runs``: the separate runs each side pools
    (their run offsets average out). Where both sides recorded the clock, the
    same test on time x clock (cycles) confirms a FAST / SLOW or names it a clock difference.
    """
    out = {"ratio_low": math.nan, "ratio_high": math.nan, "noisy_a": False, "noisy_b": False,
           "clock_difference": False, "cycles_verdict": ""}
    r = round_ratio_ci(va, vb, ra, rb, level, floor=floor, prior=prior, runs=runs)
    out.update(ratio_low=r["low"], ratio_high=r["high"], rounds_a=r["rounds_a"], rounds_b=r["rounds_b"],
               rounds_needed=math.nan)
    verdict, reason = decide(r["low"], r["high"], min_effect)
    aside = [f"{n} of {side}'s {total}" for n, side, total in ((r["aside_a"], "A", r["rounds_a"]),
                                                              (r["aside_b"], "B", r["rounds_b"])) if n]
    if aside:
        reason += f"; {' and '.join(aside)} rounds set aside, far from the side's other rounds"
    if r["floor_used"]:
        # the floor's own sentence (its numbers and sources, ~600 characters) is said once per table
        # (settings["floor_text"], the summary's first line), not in every row
        reason += f"; a side measured in one round: between-round spread {r['sd_round']:.2%} from the noise floor"
    if verdict == "UNCLEAR" and math.isfinite(r["ratio"]):
        need = rounds_needed(r["ratio"], r["sd_round"], min_effect, r["z"] if math.isfinite(r["z"]) else 3.0,
                             run_sd=floor.run_sd * math.sqrt(sum(1.0 / max(1, n) for n in runs) / 2.0))
        out["rounds_needed"] = need
        reason += (f"; about {int(need)} rounds per side would decide it" if math.isfinite(need) else
                   "; no number of rounds decides it at this spread (more runs per side: "
                   "compare_until_decided, or a wider min_effect)")
    said = (_noise(va, "A"), _noise(vb, "B"))  # once per side: each is a percentile pass
    noisy = [n for n in said if n]
    out["noisy_a"], out["noisy_b"] = bool(said[0]), bool(said[1])
    if noisy:
        verdict, reason = "UNCLEAR", f"{'; '.join(noisy)}; {reason}"
    if np.isfinite(ca).all() and np.isfinite(cb).all() and len(ca) and len(cb):
        out["clock_a_mhz"], out["clock_b_mhz"] = float(np.median(ca)), float(np.median(cb))
        c = round_ratio_ci(va * ca, vb * cb, ra, rb, level, floor=floor, prior=prior_cycles, runs=runs)
        out["cycles_low"], out["cycles_high"] = c["low"], c["high"]
        out["cycles_ratio"] = float(np.median(vb * cb) / np.median(va * ca))
        out["cycles_verdict"] = decide(c["low"], c["high"], min_effect)[0]
        if verdict in ("FAST", "SLOW"):
            if out["cycles_verdict"] == "SAME":
                out["clock_difference"] = True
                reason += (f"; SAME in clock-normalised time (SM clock {out['clock_a_mhz']:.0f} -> "
                           f"{out['clock_b_mhz']:.0f} MHz): a clock difference")
            elif out["cycles_verdict"] == verdict:
                reason += "; confirmed in clock-normalised time"
    out["verdict"], out["reason"] = verdict, reason
    return out


def prior_variance(rows, cycles: bool = False) -> tuple[float, int]:
    """The between-round variance pooled over every row compared (each row's own is shrunk toward it),
    rounds far off set aside as in the rows' own intervals."""
    parts = []
    for (va, ra, ca), (vb, rb, cb) in rows:
        x, y = (va * ca, vb * cb) if cycles else (va, vb)
        parts.append(round_variance(steady_rounds(round_medians(x, ra))[0], steady_rounds(round_medians(y, rb))[0]))
    return pooled_variance(parts)


def side_floor(fa: pd.DataFrame, fb: pd.DataFrame) -> Floor:
    """The larger recorded run-to-run floor of the two sides' cards for these workloads."""
    floors = [run_floor(df) for df in (fa, fb)]
    return max(floors, key=lambda f: (math.hypot(f.round_sd, f.run_sd), f.source))
