"""Statistics of raw samples, shared by every analysis and by the tuner's search (pure numpy):
medians and spread with the noisy flag, quantiles and their distribution-free intervals, the
Hodges-Lehmann ratio bound, and the union of time intervals."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

__all__ = ["NOISY_FRACTION", "NOISY_RANGE_FRACTION", "STAT_COLUMNS", "finite", "nanmedian", "quantile",
           "quantile_ci", "quantiles", "ratio", "ratio_bound", "stats"]



#: A configuration is flagged noisy when its IQR exceeds this fraction of its median ...
NOISY_FRACTION = 0.10


#: ... or when its p10-p90 range exceeds this fraction of its median. Two clusters of
#: samples (say 14 repetitions at 1.95 ms and 6 at 1.17 ms: which stream reached the SMs
#: first) can leave the IQR near zero; the p10-p90 range sees them.
NOISY_RANGE_FRACTION = 0.25


STAT_COLUMNS = ["reps", "median_ms", "p10_ms", "p90_ms", "iqr_ms", "noisy"]


def finite(values) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    return v[np.isfinite(v)]


def stats(values) -> dict:
    """Count, median, p10, p90, IQR and the noisy flag of raw samples in ms (NaN ignored).

    ``noisy`` is True when the IQR exceeds :data:`NOISY_FRACTION` (10%) of the median or
    the p10-p90 range exceeds :data:`NOISY_RANGE_FRACTION` (25%) of it; the second test
    catches bimodal samples, whose IQR can be tiny while p10 and p90 lie far apart.
    """
    v = finite(values)
    if v.size == 0:
        return {"reps": 0, "median_ms": math.nan, "p10_ms": math.nan, "p90_ms": math.nan,
                "iqr_ms": math.nan, "noisy": False}
    q10, q25, q50, q75, q90 = np.percentile(v, [10, 25, 50, 75, 90])
    iqr = float(q75 - q25)
    return {"reps": int(v.size), "median_ms": float(q50), "p10_ms": float(q10), "p90_ms": float(q90),
            "iqr_ms": iqr, "noisy": bool(iqr > NOISY_FRACTION * q50 or (q90 - q10) > NOISY_RANGE_FRACTION * q50)}


def quantiles(values) -> tuple[float, float, float]:
    """(median, p10, p90) of raw samples; NaNs when there are none."""
    s = stats(values)
    return s["median_ms"], s["p10_ms"], s["p90_ms"]


def nanmedian(values) -> float:
    v = finite(values)
    return float(np.median(v)) if v.size else math.nan


def ratio(a: float, b: float) -> float:
    return a / b if (b > 0 and math.isfinite(a)) else math.nan



def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) with linear interpolation (numpy's default); NaN if empty."""
    v = sorted(float(x) for x in values if math.isfinite(x))
    if not v:
        return math.nan
    h = (len(v) - 1) * q
    lo = math.floor(h)
    return v[lo] + (h - lo) * (v[min(lo + 1, len(v) - 1)] - v[lo])


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(B <= k) for B ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    return min(1.0, sum(math.comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(min(k, n) + 1)))


def quantile_ci(values: Sequence[float], q: float = 0.5, confidence: float = 0.9) -> tuple[float, float]:
    """Distribution-free confidence interval of the ``q`` quantile from order statistics.

    ``(x_(l), x_(u))`` of the sorted samples, with ``l`` and ``u`` chosen so that each
    tail has probability at most ``(1 - confidence) / 2`` under Binomial(n, q). A side
    that ``n`` samples cannot bound is infinite (at 90%, the median needs 5 samples;
    the 90th percentile's upper side needs 29).
    """
    v = sorted(float(x) for x in values if math.isfinite(x))
    n, alpha = len(v), (1.0 - confidence) / 2.0
    lo_idx = 0  # 1-based order statistic; 0 means unbounded
    for j in range(1, n + 1):
        if _binom_cdf(j - 1, n, q) <= alpha:
            lo_idx = j
        else:
            break
    hi_idx = n + 1
    for j in range(n, 0, -1):
        if 1.0 - _binom_cdf(j - 1, n, q) <= alpha:
            hi_idx = j
        else:
            break
    return (v[lo_idx - 1] if lo_idx >= 1 else -math.inf, v[hi_idx - 1] if hi_idx <= n else math.inf)


@functools.lru_cache(maxsize=256)
def _rank_sum_cdf(n: int, m: int) -> tuple[float, ...]:
    """P(U <= u), u = 0..n*m, for the Mann-Whitney U of samples of sizes n and m under H0
    (coefficients of the Gaussian binomial [n+m choose n]_q)."""
    c = [1] + [0] * (n * m)
    for i in range(1, n + 1):
        for j in range(n * m, m + i - 1, -1):  # times (1 - q^(m+i))
            c[j] -= c[j - m - i]
        for j in range(i, n * m + 1):  # divided by (1 - q^i)
            c[j] += c[j - i]
    total, acc, out = math.comb(n + m, n), 0, []
    for v in c:
        acc += v
        out.append(acc / total)
    return tuple(out)


def ratio_bound(base: Sequence[float], other: Sequence[float], confidence: float = 0.9) -> tuple[float, float]:
    """How much larger ``other`` is than ``base``: (estimate, lower confidence bound) of the ratio.

    Hodges-Lehmann on the logarithms: the estimate is the median of the pairwise ratios
    ``other_j / base_i``; the bound is the ``k``-th smallest of them, ``k`` from the exact
    Mann-Whitney distribution so that ``P(U < k) <= (1 - confidence) / 2``. Distribution-
    free for a shift of one distribution against the other. The bound is 0 when the
    samples are too few to give one (5 each at 90%: k = 5 of 25 ratios).
    """
    b = [math.log(x) for x in base if math.isfinite(x) and x > 0]
    o = [math.log(x) for x in other if math.isfinite(x) and x > 0]
    if not b or not o:
        return math.nan, 0.0
    d = sorted(y - x for x in b for y in o)
    cdf, alpha = _rank_sum_cdf(len(b), len(o)), (1.0 - confidence) / 2.0
    k = 0
    while k < len(d) and cdf[k] <= alpha:
        k += 1
    return math.exp(quantile(d, 0.5)), (math.exp(d[k - 1]) if k >= 1 else 0.0)
