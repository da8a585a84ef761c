"""Statistics of raw repetitions, shared by every analysis and by the tuner's search (pure numpy,
vectorised): medians and spread with the noisy flag, quantiles and their distribution-free
intervals, and the Hodges-Lehmann shift / ratio interval from the Mann-Whitney distribution.

Costs: :func:`quantile_ci` is O(n log n); :func:`shift_ci` sorts the n*m pairwise
differences up to :data:`PAIRS_SORTED` of them and selects its three order statistics
beyond, in O(n + m) memory (:func:`pairwise_order_stats`); the exact Mann-Whitney null distribution is built with
O(n) vectorised polynomial steps (O(n^2 m) operations) up to :data:`EXACT_MAX_PAIRS`
pairs, the normal approximation (continuity-corrected) beyond.

Over 500 lines: every statistic a decision uses, in one module, so no second copy of an interval exists.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from statistics import NormalDist

import numpy as np

from ..results.floor_table import floor_rows, largest_run_parts

__all__ = ["DEFAULT_FLOOR", "DEFAULT_SOURCE", "EXACT_MAX_PAIRS", "FLOOR_COLUMNS", "Floor", "NOISY_FRACTION",
           "NOISY_RANGE_FRACTION", "disagree", "PRIOR_WEIGHT", "STAT_COLUMNS", "default_floor", "finite",
           "finite_positive", "mann_whitney_cdf", "mann_whitney_k", "nanmedian", "noise_floor", "pooled_pair_sd",
           "pooled_variance", "quantile", "quantile_ci", "quantiles", "ratio", "ratio_ci", "round_median_ci",
           "round_medians", "round_ratio_ci", "round_variance", "rounds_needed", "run_floor", "shift_ci", "stats",
           "steady_rounds", "t_cdf", "t_quantile"]

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


# ----------------------------------------------------------------------------- rounds
# The run is the unit of noise: repetitions of one round agree more closely than rounds and runs
# do, so an interval that decides something is built from round medians (a t interval whose unit
# is the round), with the between-round variance of a row shrunk toward the pooled variance of
# all rows compared (one run's layouts share their noise), plus the known run-to-run excess of the
# card (:class:`Floor`). A side with a single round has no between-round variance of its own: the
# floor stands in for it.


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-13:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) of Student's t with ``df`` degrees of freedom (normal for infinite df)."""
    if not math.isfinite(df):
        return NormalDist().cdf(t)
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


@functools.lru_cache(maxsize=1024)  # every row of a comparison asks the same (p, df)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t (bisection on :func:`t_cdf`; normal beyond 1e6 df)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"t_quantile: p must be in (0, 1), got {p!r}")
    if df <= 0:
        return math.inf if p > 0.5 else -math.inf
    if df > 1e6:
        return NormalDist().inv_cdf(p)
    lo, hi = -1.0, 1.0
    while t_cdf(lo, df) > p:
        lo *= 2.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
        if hi - lo < 1e-10 * max(1.0, abs(mid)):
            break
    return 0.5 * (lo + hi)


@dataclasses.dataclass(frozen=True)
class Floor:
    """Run-to-run noise of one card and workload, as standard deviations of log time.

    ``round_sd``: between the round medians of one run (stands in for a side measured in a single
    round); ``run_sd``: what runs add beyond their rounds (a run's mean over many rounds still moves
    by this much), 0 where rounds catch all of it; ``source``: where the numbers come from.
    """

    round_sd: float
    run_sd: float = 0.0
    source: str = "default"

    def __post_init__(self):
        for name in ("round_sd", "run_sd"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= float(v) < 1.0:
                raise ValueError(f"Floor.{name} must be a standard deviation of log time in [0, 1), got {v!r}")

    def text(self) -> str:
        extra = f" + {self.run_sd:.2%} per run" if self.run_sd > 0 else ""
        return f"noise floor {self.round_sd:.2%} per round{extra} ({self.source})"

    @property
    def default(self) -> bool:
        """Whether this is a default floor (no floor recorded for the card), not a measured one."""
        return self.source.startswith(DEFAULT_SOURCE)


#: Round part: about the largest round-to-round spread the issue's H100 runs showed (2% at some sizes of a
#: PyTorch GEMM chain). Alone where no floor table is readable; a card not in it gets :func:`default_floor`.
DEFAULT_FLOOR = Floor(0.02, 0.0, "default: no recorded floor for this card and workload")
DEFAULT_SOURCE = "default"  # how every default floor's source begins (Floor.default)

FLOOR_COLUMNS = ["device_name", "workload", "round_sd", "run_sd", "rounds", "runs", "source"]


def noise_floor(device_name: str, workloads=(), *, table: str | None = None) -> Floor:
    """The recorded run-to-run floor of ``workloads`` on the card ``device_name``.

    Looks up ``gcexplore/data/noise_floor.csv`` (written by ``bench/compare_real.py`` from measurements)
    and the CSV ``GCEXPLORE_NOISE_FLOOR`` names (:mod:`gcexplore.results.floor_table`); ``table`` names
    another file to read instead. A workload recorded twice takes each part's largest.
    Several workloads (a pair's rows): the largest round part (a stand-in for a one-round side), and
    the run parts in quadrature: independent run effects, each moving the pair's time by at most
    itself, so ``sqrt(a^2 + b^2)`` bounds what the noisier one alone does not. For names not
    measured, the largest floor of any workload measured on that card (a conservative stand-in);
    :func:`default_floor` for a card never measured.
    """
    rows = [r for r in floor_rows(table) if r[0] == str(device_name)]
    if not rows:
        return default_floor(workloads, table=table)
    per: dict[str, tuple[float, float, list[str]]] = {}
    for _, w, rnd, run, src in rows:
        old = per.get(w, (0.0, 0.0, []))
        per[w] = (max(old[0], rnd), max(old[1], run), old[2] + ([src] if src else []))
    names = {str(w) for w in workloads}
    if names and names <= set(per):
        picked = sorted(names)
        round_sd = max(per[w][0] for w in picked)
        run_sd = math.sqrt(sum(per[w][1] ** 2 for w in picked))
        if len(picked) == 1:
            return Floor(round_sd, run_sd, f"{device_name}, {picked[0]}, {'; '.join(per[picked[0]][2])}".rstrip(", "))
        what = " + ".join(f"{w} ({'; '.join(per[w][2]) or 'recorded'})" for w in picked)
        return Floor(round_sd, run_sd, f"{device_name}: {what}; run parts in quadrature")
    w, (rnd, run, src) = max(per.items(), key=lambda kv: math.hypot(kv[1][0], kv[1][1]))
    return Floor(rnd, run, f"{device_name}: largest of {len(per)} measured workloads ({w}), "
                           f"{', '.join(sorted(names - set(per))) or 'these workloads'} not measured")


def default_floor(workloads=(), *, table: str | None = None) -> Floor:
    """A card never measured: :data:`DEFAULT_FLOOR`'s round part; as run part, per workload, the largest any
    recorded card has (a name none recorded: the largest row), several in quadrature as :func:`noise_floor`
    takes a pair: a new card's runs differ as the measured cards' do. No table readable: :data:`DEFAULT_FLOOR`."""
    rows = floor_rows(table)
    if not rows:
        return DEFAULT_FLOOR
    parts = largest_run_parts(workloads, rows)
    said = ", ".join(f"{w} {r[3]:.2%} ({r[0]}{'' if r[1] == w else ', ' + r[1] + ': recorded on no card'})"
                     for w, r in parts)
    return Floor(DEFAULT_FLOOR.round_sd, math.sqrt(sum(r[3] ** 2 for _, r in parts)),
                 f"{DEFAULT_SOURCE}: no recorded floor for this card; run part the largest of the "
                 f"{len({r[0] for r in rows})} recorded cards': {said}{'; in quadrature' if len(parts) > 1 else ''}")


def run_floor(df=None, *, device_name: str = "", workloads=()) -> Floor:
    """The one lookup of a run's floor: :func:`noise_floor` of its card (its rows' ``device_name``, else its attrs')
    and its rows' workloads, memoised on the frame; no frame (a run about to measure): ``device_name``'s."""
    if df is None:
        return noise_floor(str(device_name), sorted({str(w) for w in workloads}))
    from ..results.run import run_of
    name = df["device_name"].iloc[0] if "device_name" in df.columns and len(df) else df.attrs.get("device_name", "")
    names = (lambda: sorted({str(w) for w in df["workload"].unique()})) if "workload" in df.columns else list
    return run_of(df).memo("noise_floor", lambda: noise_floor(str(name), names()))  # names read only when not memoised


def round_medians(values, rounds=None) -> np.ndarray:
    """Log of each round's median (rounds in order of first appearance; one round without labels)."""
    v = np.asarray(values, dtype=float).ravel()
    r = np.zeros(v.size, dtype=np.int64) if rounds is None else np.asarray(rounds).ravel()
    ok = np.isfinite(v) & (v > 0)
    v, r = v[ok], r[ok]
    codes: dict = {}  # one sort for every round, not a scan per round (compare asks this per row)
    inv = np.asarray([codes.setdefault(k, len(codes)) for k in r.tolist()], dtype=np.int64)
    n, sv = np.bincount(inv, minlength=len(codes)), v[np.lexsort((v, inv))]
    lo, hi = sv[np.cumsum(n) - n + (n - 1) // 2], sv[np.cumsum(n) - n + n // 2]
    med = np.where(n % 2 == 1, hi, (lo + hi) / 2.0)  # np.median's middle (mean of the two)
    return np.log(np.where([k == k for k in codes], med, np.nan))  # a NaN label matches no value


#: A round whose log median lies further than this many robust standard deviations (1.4826 x the
#: median absolute deviation) from its side's median round ...
OUTLIER_MADS = 5.0
#: ... and further than this (log time, about 2%) is set aside: on a shared host a whole round now
#: and then runs 1.5-3x slower (measured on an H100 beside another card's job), and one such round
#: would make every interval of the comparison as wide as itself.
OUTLIER_MIN = 0.02
#: Fewest rounds a side needs before any is set aside.
OUTLIER_MIN_ROUNDS = 4


def steady_rounds(log_medians: np.ndarray) -> tuple[np.ndarray, int]:
    """The rounds of one side not far off (:data:`OUTLIER_MADS`, :data:`OUTLIER_MIN`) and how many were set
    aside: fewer than a third (two of six rounds 2x slower are the side's behaviour, not strays)."""
    x = np.asarray(log_medians, dtype=float)
    if x.size < OUTLIER_MIN_ROUNDS:
        return x, 0
    med = float(np.median(x))
    dev = np.abs(x - med)
    far = dev > max(OUTLIER_MADS * 1.4826 * float(np.median(dev)), OUTLIER_MIN)
    if far.sum() * 3 >= x.size:  # that many far off is the side's spread, not a stray round
        return x, 0
    return x[~far], int(far.sum())


def round_variance(a_rounds: np.ndarray, b_rounds: np.ndarray) -> tuple[float, int]:
    """Pooled between-round variance of two sides' log round medians and its degrees of freedom."""
    df = max(0, a_rounds.size - 1) + max(0, b_rounds.size - 1)
    if df == 0:
        return math.nan, 0
    ss = sum(float(((x - x.mean()) ** 2).sum()) for x in (a_rounds, b_rounds) if x.size > 1)
    return ss / df, df


def pooled_variance(parts) -> tuple[float, int]:
    """Pool ``(variance, df)`` pairs (rows of one comparison): the prior a row's own estimate is shrunk toward."""
    parts = [(s, d) for s, d in parts if d > 0 and math.isfinite(s)]
    df = sum(d for _, d in parts)
    return (sum(s * d for s, d in parts) / df, df) if df else (math.nan, 0)


def pooled_pair_sd(groups) -> float:
    """Robust standard deviation of log repetitions pooled over groups (layouts): 1.0483 x the median of
    ``|log a - log b|`` over every pair of repetitions within one group (Shamos' estimator, consistent for normal
    noise). A group's level does not enter, and one stray repetition among three moves only two of the pooled
    pairs, so it cannot widen the estimate as it widens its group's own variance. NaN without a pair."""
    diffs = []
    for g in groups:
        x = np.log(finite_positive(g))
        i, j = np.triu_indices(x.size, 1)
        diffs.append(np.abs(x[i] - x[j]))
    d = np.concatenate(diffs) if diffs else np.zeros(0)
    return 1.0483 * float(np.median(d)) if d.size else math.nan


def disagree(a: float, b: float, tolerance: float) -> bool:
    """Two repetitions differ by more than the tolerance (a median of the two cannot be trusted)."""
    return a > 0 and b > 0 and abs(math.log(a / b)) > math.log1p(tolerance)


#: A row's own between-round variance gets at most this many times its own weight from the pooled
#: prior (the rows of one comparison need not share one noise level exactly).
PRIOR_WEIGHT = 1.0


def round_ratio_ci(base, other, base_rounds=None, other_rounds=None, confidence: float = 0.99, *,
                   floor: Floor = DEFAULT_FLOOR, prior: tuple[float, int] | None = None,
                   runs: tuple[int, int] = (1, 1), within_sd: float | None = None) -> dict:
    """Ratio ``other / base`` with an interval whose unit is the round.

    The estimate is exp(mean log round median of ``other`` - that of ``base``). Its variance: the between-round
    variance (pooled over both sides' rounds, shrunk toward ``prior`` = (variance, df) of all rows compared, weight at
    most :data:`PRIOR_WEIGHT` times the row's own) over each side's round count, plus
    ``floor.run_sd**2 * (1/runs_a + 1/runs_b)`` (``runs``: how many separate runs each side's rounds come from; a side
    pooled from n runs averages n run offsets); a side measured in one round uses ``floor.round_sd`` (or the estimate,
    if larger) plus its median's sampling variance (pi/2 x the variance of its log repetitions / their count; with
    ``within_sd``, that standard deviation of log repetitions instead, e.g. :func:`pooled_pair_sd` over the layouts
    compared). Student's t with the variance's degrees of freedom (normal where the floor alone carries it).

    Rounds far from the rest of their side are set aside first (:func:`steady_rounds`).

    Returns a dict: ``ratio``, ``low``, ``high``, ``rounds_a``, ``rounds_b``, ``aside_a``,
    ``aside_b`` (rounds set aside), ``sd_round`` (the between-round standard deviation used),
    ``df``, ``floor_used`` (a side had a single round), ``z`` (the quantile used).
    """
    (a, aside_a), (b, aside_b) = (steady_rounds(round_medians(v, r)) for v, r in
                                  ((base, base_rounds), (other, other_rounds)))
    out = {"ratio": math.nan, "low": 0.0, "high": math.inf, "rounds_a": int(a.size + aside_a),
           "rounds_b": int(b.size + aside_b), "aside_a": aside_a, "aside_b": aside_b,
           "sd_round": math.nan, "df": 0.0, "floor_used": False, "z": math.inf}
    if a.size == 0 or b.size == 0:
        return out
    est = float(b.mean() - a.mean())
    s2, df = round_variance(a, b)
    if prior is not None and prior[1] > 0 and math.isfinite(prior[0]):
        w = min(float(prior[1]), PRIOR_WEIGHT * df) if df else float(prior[1])
        if df and math.isfinite(s2):
            s2, df = (w * prior[0] + df * s2) / (w + df), df + w
        elif w > 0:
            s2, df = float(prior[0]), w
    single = a.size < 2 or b.size < 2
    var = floor.run_sd ** 2 * sum(1.0 / max(1, int(n)) for n in runs)
    for n, raw in ((a.size, base), (b.size, other)):
        if n < 2:  # the floor for the round's offset, plus the round median's own sampling variance
            logs = np.log(finite_positive(raw))
            spread = float(np.var(logs, ddof=1)) if within_sd is None or not math.isfinite(within_sd) \
                else float(within_sd) ** 2
            within = spread * (math.pi / 2.0) / logs.size if logs.size > 1 else 0.0
            var += max(floor.round_sd ** 2, s2 if math.isfinite(s2) else 0.0) + within
        else:
            var += (s2 if math.isfinite(s2) else floor.round_sd ** 2) / n
    dfe = df if (not single and df > 0 and math.isfinite(s2)) else math.inf
    z = t_quantile(0.5 + confidence / 2.0, dfe)
    half = z * math.sqrt(var)
    sd = math.sqrt(s2) if math.isfinite(s2) else floor.round_sd
    out.update(ratio=math.exp(est), low=math.exp(est - half), high=math.exp(est + half),
               sd_round=max(sd, floor.round_sd) if single else sd, df=dfe, floor_used=single, z=z)
    return out


def rounds_needed(ratio: float, sd_round: float, min_effect: float, z: float, *, run_sd: float = 0.0,
                  limit: int = 1000) -> float:
    """Rounds per side that would take the interval clear of the band's edge at this estimate and spread
    (normal quantile ``z``): inf where the run-to-run excess alone keeps it straddling, or beyond ``limit``."""
    if not (ratio > 0 and math.isfinite(sd_round) and math.isfinite(z)):
        return math.inf
    gap = abs(abs(math.log(ratio)) - math.log1p(min_effect))
    room = (gap / z) ** 2 - 2.0 * run_sd ** 2
    if room <= 0:
        return math.inf
    r = math.ceil(2.0 * sd_round ** 2 / room)
    return float(max(2, r)) if r <= limit else math.inf


def round_median_ci(values, rounds=None, confidence: float = 0.9, *, floor: Floor = DEFAULT_FLOOR) -> tuple:
    """(median, low, high) of a run's typical time with the between-round component in it.

    The centre is exp(mean log round median); the interval a t interval over the round medians
    (their spread divided by the round count), widened by the floor's ``run_sd``; with a single
    round, the floor's ``round_sd`` and the round median's sampling variance stand in.
    """
    m = steady_rounds(round_medians(values, rounds))[0]  # a round far off set aside, as in compare
    if m.size == 0:
        return math.nan, -math.inf, math.inf
    var = floor.run_sd ** 2
    if m.size > 1:
        var += float(np.var(m, ddof=1)) / m.size
        z = t_quantile(0.5 + confidence / 2.0, m.size - 1)
    else:
        logs = np.log(finite_positive(values))
        var += floor.round_sd ** 2 + (float(np.var(logs, ddof=1)) * math.pi / 2.0 / logs.size if logs.size > 1 else 0.0)
        z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    c, h = float(m.mean()), z * math.sqrt(var)
    return math.exp(c), math.exp(c - h), math.exp(c + h)


class _CallableModule(type(functools)):
    """Earlier versions had a function ``gcexplore.analysis.stats``; calling the module still
    works for one release, with a DeprecationWarning."""

    def __call__(self, values) -> dict:
        import warnings

        warnings.warn("gcexplore.analysis.stats is a module now; call gcexplore.analysis.stats.stats(values) "
                      "(calling the module goes in the next release)", DeprecationWarning, stacklevel=2)
        return stats(values)


sys.modules[__name__].__class__ = _CallableModule
