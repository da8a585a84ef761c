"""Statistics of raw repetitions, shared by every analysis and by the tuner's search (pure numpy,
vectorised): medians and spread with the noisy flag, quantiles and their distribution-free
intervals, and the Hodges-Lehmann shift / ratio interval from the Mann-Whitney distribution.

Costs: :func:`quantile_ci` is O(n log n); :func:`shift_ci` sorts the n*m pairwise
differences up to :data:`PAIRS_SORTED` of them and selects its three order statistics
beyond, in O(n + m) memory (:func:`pairwise_order_stats`); the exact Mann-Whitney null distribution is built with
O(n) vectorised polynomial steps (O(n^2 m) operations) up to :data:`EXACT_MAX_PAIRS`
pairs, the normal approximation (continuity-corrected) beyond.
"""

from __future__ import annotations

import functools
import math
import sys
from statistics import NormalDist

import numpy as np

__all__ = ["EXACT_MAX_PAIRS", "NOISY_FRACTION", "NOISY_RANGE_FRACTION", "STAT_COLUMNS", "finite", "finite_positive",
           "mann_whitney_cdf", "mann_whitney_k", "nanmedian", "quantile", "quantile_ci", "quantiles", "ratio",
           "ratio_bound", "ratio_ci", "shift_ci", "stats"]

#: Largest n*m for which the exact Mann-Whitney distribution is built (200 x 200 reps).
EXACT_MAX_PAIRS = 40_000


def finite(values) -> np.ndarray:
    v = np.asarray(values, dtype=float).ravel()
    return v[np.isfinite(v)]


def finite_positive(values) -> np.ndarray:
    """The finite, positive values (times that may be logged)."""
    v = finite(values)
    return v[v > 0]


def quantile(values, q: float) -> float:
    """The ``q`` quantile (0..1), linear interpolation (numpy's default); NaN if empty."""
    v = finite(values)
    return float(np.quantile(v, q)) if v.size else math.nan


def _binom_cdf(n: int, p: float) -> np.ndarray:
    """P(B <= j), j = 0..n, B ~ Binomial(n, p) (log-space pmf, one cumulative sum)."""
    j = np.arange(n + 1)
    if p <= 0.0 or p >= 1.0:
        return np.ones(n + 1) if p <= 0.0 else (j >= n).astype(float)
    lg = np.vectorize(math.lgamma, otypes=[float])
    logpmf = lg(n + 1.0) - lg(j + 1.0) - lg(n - j + 1.0) + j * math.log(p) + (n - j) * math.log1p(-p)
    return np.minimum(1.0, np.cumsum(np.exp(logpmf)))


def quantile_ci(values, q: float = 0.5, confidence: float = 0.9) -> tuple[float, float]:
    """Distribution-free interval of the ``q`` quantile from order statistics.

    ``(x_(l), x_(u))`` of the sorted samples, ``l`` and ``u`` chosen so that each tail has
    probability at most ``(1 - confidence) / 2`` under Binomial(n, q). A side that ``n``
    samples cannot bound is infinite (at 90%, the median needs 5 samples).
    """
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile_ci: q must be a quantile between 0 and 1 (0.5: the median), got {q!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"quantile_ci: confidence must be between 0 and 1 (0.9: 90%), got {confidence!r}")
    v = np.sort(finite(values))
    n, alpha = v.size, (1.0 - confidence) / 2.0
    if n == 0:
        return -math.inf, math.inf
    cdf = _binom_cdf(n, q)  # cdf[j] = P(B <= j)
    # lower: the largest l (1-based) with P(B <= l - 1) <= alpha
    lo = int(np.searchsorted(cdf, alpha, side="right"))
    # upper: the smallest u with P(B >= u) = 1 - P(B <= u - 1) <= alpha (u = n + 1: none)
    hi = int(np.searchsorted(cdf, 1.0 - alpha - 1e-12, side="left")) + 1
    return (float(v[lo - 1]) if lo >= 1 else -math.inf, float(v[hi - 1]) if hi <= n else math.inf)


@functools.lru_cache(maxsize=512)
def mann_whitney_cdf(n: int, m: int) -> np.ndarray:
    """P(U <= u), u = 0..n*m, of the Mann-Whitney U of samples of sizes n and m under H0.

    The counts are the coefficients of the Gaussian binomial [n+m choose n]_q, built by
    multiplying by (1 - q^(m+i)) and dividing by (1 - q^i) for i = 1..n, each step one
    vectorised shift (the division is a strided cumulative sum).
    """
    n, m = min(n, m), max(n, m)
    size = n * m + 1
    c = np.zeros(size)
    c[0] = 1.0
    for i in range(1, n + 1):
        s = m + i
        if s < size:
            c[s:] -= c[:-s].copy()
        pad = (-size) % i
        c = np.cumsum(np.concatenate([c, np.zeros(pad)]).reshape(-1, i), axis=0).ravel()[:size]
    c = np.maximum(c, 0.0)
    return np.minimum(1.0, np.cumsum(c) / c.sum())


def mann_whitney_k(n: int, m: int, alpha: float) -> int:
    """The largest ``k`` with P(U <= k - 1) <= ``alpha`` under H0 (0: no bound possible).

    ``[d_(k), d_(nm+1-k)]`` of the sorted pairwise differences is then a two-sided
    interval at level at least ``1 - 2 alpha``. Exact up to :data:`EXACT_MAX_PAIRS`
    pairs, the normal approximation with continuity correction beyond.
    """
    if n < 1 or m < 1:
        return 0
    if n * m <= EXACT_MAX_PAIRS:
        return int(np.searchsorted(mann_whitney_cdf(n, m), alpha, side="right"))
    sd = math.sqrt(n * m * (n + m + 1) / 12.0)
    return max(0, int(math.floor(n * m / 2.0 + 0.5 + NormalDist().inv_cdf(alpha) * sd)))


def shift_ci(base, other, confidence: float = 0.95) -> tuple[float, float, float]:
    """Hodges-Lehmann shift of ``other`` against ``base`` with its interval.

    Returns ``(estimate, low, high)``: the median of the pairwise differences
    ``other_j - base_i`` and the ``k``-th smallest and largest of them, ``k`` from the
    Mann-Whitney distribution (:func:`mann_whitney_k` at ``(1 - confidence) / 2``). The
    interval is distribution-free for a shift of one continuous distribution against
    the other; ``(-inf, inf)`` when the samples are too few to bound it.
    """
    x, y = finite(base), finite(other)
    if x.size == 0 or y.size == 0:
        return math.nan, -math.inf, math.inf
    nm = x.size * y.size
    k = mann_whitney_k(x.size, y.size, (1.0 - confidence) / 2.0)
    ranks = [nm // 2] if nm % 2 else [nm // 2, nm // 2 + 1]
    if k >= 1:
        ranks += [k, nm + 1 - k]
    values = pairwise_order_stats(y, x, ranks)
    est = float(np.mean(values[: 1 if nm % 2 else 2]))  # np.median's middle (or mean of the two middle)
    if k < 1:
        return est, -math.inf, math.inf
    return est, values[-2], values[-1]


#: Up to this many pairwise differences are sorted outright; beyond, they are selected in O(n + m) memory.
PAIRS_SORTED = 1 << 21


def pairwise_order_stats(y, x, ranks, *, sorted_max: int = PAIRS_SORTED) -> list[float]:
    """The ``r``-th smallest (1-based) of the differences ``y_i - x_j`` for each ``r`` in ``ranks``,
    the same floats a sort of all ``n * m`` of them gives, in O(n + m) memory past ``sorted_max``
    pairs (a randomized selection over the implicit sorted matrix; seeded, so repeatable)."""
    ys, xr = np.sort(np.asarray(y, float)), np.sort(np.asarray(x, float))[::-1]  # each row ys[i] - xr rises
    n, m = ys.size, xr.size
    if n * m <= sorted_max:
        d = np.sort((ys[:, None] - xr[None, :]).ravel())
        return [float(d[r - 1]) for r in ranks]
    return [_select(ys, xr, int(r), min(sorted_max, 1 << 18)) for r in ranks]


def _count(ys, xr, p: float, strict: bool) -> np.ndarray:
    """Per row i: how many j have ``ys[i] - xr[j]`` < p (strict) or <= p; a vectorised bisection
    on the differences as computed, so rounding is the same as in a full sort."""
    lo, hi = np.zeros(ys.size, np.int64), np.full(ys.size, xr.size, np.int64)
    while True:
        active = lo < hi
        if not active.any():
            return lo
        mid = (lo + hi) // 2
        v = ys - xr[np.minimum(mid, xr.size - 1)]
        below = (v < p) if strict else (v <= p)
        lo = np.where(active & below, mid + 1, lo)
        hi = np.where(active & ~below, mid, hi)


def _select(ys, xr, k: int, small: int) -> float:
    rng = np.random.default_rng(k)
    low, high = np.zeros(ys.size, np.int64), np.full(ys.size, xr.size, np.int64)  # candidates [low, high) per row
    while True:
        sizes = high - low
        total = int(sizes.sum())
        if total <= small:  # few enough left: take them out and partition
            rows = np.repeat(np.arange(ys.size), sizes)
            cols = low[rows] + np.arange(total) - np.repeat(np.cumsum(sizes) - sizes, sizes)
            vals = ys[rows] - xr[cols]
            return float(np.partition(vals, k - 1)[k - 1])
        r = int(rng.integers(total))
        ends = np.cumsum(sizes)
        row = int(np.searchsorted(ends, r, side="right"))
        pivot = ys[row] - xr[low[row] + r - (ends[row] - sizes[row])]
        lt = np.clip(_count(ys, xr, pivot, True), low, high)
        le = np.clip(_count(ys, xr, pivot, False), low, high)
        n_lt, n_le = int((lt - low).sum()), int((le - low).sum())
        if k <= n_lt:
            high = lt
        elif k <= n_le:
            return float(pivot)
        else:
            k -= n_le
            low = le


def ratio_ci(base, other, confidence: float = 0.95) -> tuple[float, float, float]:
    """How many times larger ``other`` is than ``base``: :func:`shift_ci` on the logarithms,
    exponentiated: ``(estimate, low, high)``; ``(nan, 0, inf)`` without positive samples."""
    est, lo, hi = shift_ci(np.log(finite_positive(base)), np.log(finite_positive(other)), confidence)
    return (math.exp(est) if math.isfinite(est) else math.nan), math.exp(lo), math.exp(hi)


#: A configuration is flagged noisy when its IQR exceeds this fraction of its median ...
NOISY_FRACTION = 0.10


#: ... or when its p10-p90 range exceeds this fraction of its median. Two clusters of
#: samples (say 14 repetitions at 1.95 ms and 6 at 1.17 ms: which stream reached the SMs
#: first) can leave the IQR near zero; the p10-p90 range sees them.
NOISY_RANGE_FRACTION = 0.25


STAT_COLUMNS = ["reps", "median_ms", "p10_ms", "p90_ms", "iqr_ms", "noisy"]


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


def ratio_bound(base, other, confidence: float = 0.9) -> tuple[float, float]:
    """How much larger ``other`` is than ``base``: (estimate, lower confidence bound) of the ratio,
    one side of :func:`ratio_ci` at ``confidence``; the bound is 0 when the samples are too few
    to give one (5 each at 90%: k = 5 of 25 ratios)."""
    est, low, _ = ratio_ci(base, other, confidence)
    return est, low


class _CallableModule(type(functools)):
    """Earlier versions had a function ``gcexplore.analysis.stats``; calling the module still
    works for one release, with a DeprecationWarning."""

    def __call__(self, values) -> dict:
        import warnings

        warnings.warn("gcexplore.analysis.stats is a module now; call gcexplore.analysis.stats.stats(values) "
                      "(calling the module goes in the next release)", DeprecationWarning, stacklevel=2)
        return stats(values)


sys.modules[__name__].__class__ = _CallableModule
