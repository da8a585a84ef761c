"""Predict a concurrent makespan from each workload's solo profile (pure pandas/numpy, no GPU).

A *solo profile* holds one workload's alone times on partitions of every size, as the first partition (``position``
"first": 8, 16, ..., 128 SMs on an H100) and as the remainder ("last": 124, 116, ..., 4), its DRAM bytes per call
(counted, declared or missing: :mod:`.traffic_profile`), and the card's shared DRAM bandwidth and L2 size; it serves
every pair the workload is in. :func:`profile_from` makes profile rows from a scaling result or a sweep's ``alone``
rows; :func:`check_profiles` refuses bad ones.

The model (:func:`predict`), per layout: (1) **split loss**: each workload's solo time at its partition size
(between measured sizes the rate 1/T is interpolated linearly in SMs; the interval spans what "no faster on fewer
SMs, at most linearly faster on more" allows); (2) **shared DRAM bandwidth**, a fluid model: each asks for the
bandwidth it drew alone (bytes / solo time); when the asks exceed the card's, it is divided (``sharing``: by
outstanding requests, ~ SMs x per-SM rate, by default) and a workload given less than it drew progresses at that
fraction of its solo rate as far as it is memory-bound; when one finishes the others get its share (optionally the
L2's bandwidth too, ``l2_bandwidth_gbs``); below saturation an SM pulling near the per-SM limit is slowed by the
latency the others' load adds (``loaded_latency``); (3) **L2**: a workload's re-reads from L2 go to DRAM as what it
keeps there and the others' traffic exceed the usable L2 (a ramp between :data:`L2_FIT_FRACTION` and
:data:`L2_SPILL_FRACTION` of its size); (4) a small start offset from the profiles. Workloads without bytes are
assumed to draw none in the point estimate and to saturate DRAM at the interval's top; the interval also carries the
profiles' p10-p90 spread and ``model_error`` (:func:`~.prediction_check.fit_model` calibrates it). Over 500 lines:
the model's terms run together in one fluid simulation per layout.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from .saturation import (SHARE_RULES, aggression, bytes_at_size, counted_at, excess_at,
                         latency_slowdown, polite_excess, probe_points, probed_onset, reference_aggressions,
                         saturation_speeds, shared_speeds)
from .._checks import MAX_MS, MAX_SMS, Column, check_columns
from .terms import SHARING, ModelTerms, model_terms
from .traffic_profile import (PROBE_COLUMNS, TRAFFIC_PROFILE_COLUMNS, check_profile_numbers, cross_card_margins,
                              scale_profiles, with_traffic_columns)
from ..results.io import bare
from ..results.run import run_of
from ..schema import identity_name
SM_COUNT = identity_name("sm_count")  # the card's SM count, as every result names it

__all__ = ["L2_FIT_FRACTION", "l2_drawn_gbs", "L2_SPILL_FRACTION", "MODEL_ERROR", "PREDICTION_COLUMNS",
           "PREDICTION_NUMBERS", "PROFILE_COLUMNS", "SHARING", "PreparedProfiles", "ProfileError", "check_profiles",
           "predict", "predicted_layouts", "profile_from", "require_prediction"]

#: Columns of a solo profile (one row per workload x position x size x repetition).
PROFILE_COLUMNS = ["workload", "position", "sm_count", "rep", "duration_ms", "start_ms", "bytes", "flops",
                   "working_set_bytes", "shared_bandwidth_gbs", "l2_bytes", SM_COUNT, "sm_alignment", "device_name",
                   "run_id"]
#: Relative model error put around every prediction unless fitted (:func:`fit_model`): the
#: p90 of |error| of the point prediction on the recorded H100 sweeps it was built on.
MODEL_ERROR = 0.05
#: Working sets together below this fraction of the L2 size stay in L2; above
#: :data:`L2_SPILL_FRACTION` every re-read goes to DRAM (recorded H100 ``l2_sharing``: two
#: triads of 16 MiB each (32 of 50 MiB) slowed 1.26x, of 24 MiB each 2.78x).
L2_FIT_FRACTION = 0.4
L2_SPILL_FRACTION = 0.8
POSITIONS = ("first", "last")

PREDICTION_COLUMNS = ["layout", "split_sm_count", "workload", "partition", "sm_count", "alone_ms", "alone_low_ms",
                      "alone_high_ms", "alone_measured", "duration_ms", "duration_low_ms", "duration_high_ms",
                      "makespan_ms", "makespan_low_ms", "makespan_high_ms", "interference_free_ms", "interference",
                      "split_loss", "lower_bound_ms"]
#: What each numeric column of a prediction may hold (:func:`require_prediction` checks them).
_RATIO = Column("x (a ratio of times)", positive=True, high=1e6)
PREDICTION_NUMBERS = {**{c: Column("ms", positive=not c.endswith("_low_ms"), high=MAX_MS)  # a low end 0: no bound
                         for c in PREDICTION_COLUMNS if c.endswith("_ms")},
                      "split_sm_count": Column("SMs", integer=True, positive=True, high=MAX_SMS),
                      "sm_count": Column("SMs", integer=True, positive=True, high=MAX_SMS),
                      "interference": _RATIO, "split_loss": _RATIO}
LAYOUT_COLUMNS = ["layout", "split_sm_count", "makespan_ms", "makespan_low_ms", "makespan_high_ms",
                  "interference_free_ms", "interference", "split_loss", "lower_bound_ms", "all_measured"]


class ProfileError(ValueError):
    """A solo profile the model cannot use; the message says what is wrong and what is valid."""

# ------------------------------------------------------------------------ profiles


def profile_from(result: pd.DataFrame, *, bytes: Mapping[str, float] | None = None,  # noqa: A002
                 working_set_bytes: Mapping[str, float] | None = None, shared_bandwidth_gbs: float | None = None,
                 l2_bytes: float | None = None, rename: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Solo-profile rows from a scaling result or the ``alone`` rows of a sweep / overlap.

    Parameters
    ----------
    result : pandas.DataFrame
        Kind ``scaling`` (every size counts as both positions: a partition of k SMs is the
        same size whether split first or left over), or ``sweep`` / ``overlap`` (``alone``
        rows; p0 and middle partitions are "first", the remainder "last").
    bytes, working_set_bytes : mapping of workload name to bytes, optional
        DRAM bytes per call (default: the declared ``bytes`` column) and the L2 working set.
    shared_bandwidth_gbs, l2_bytes : float, optional
        The card's shared DRAM bandwidth and L2 size (default: ``result.attrs``' values).
    rename : mapping, optional
        New workload names (``{"memory~": "memory"}`` after profiling a workload beside itself).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`PROFILE_COLUMNS`; ``attrs["kind"] = "solo_profile"``.
    """
    kind = result.attrs.get("kind") or ("scaling" if "mode" not in result.columns else "sweep")
    need = ["workload", "sm_count", "rep", "duration_ms"] + ([] if kind == "scaling" else ["mode", "partition"])
    missing = [c for c in need if c not in result.columns]
    if missing:
        raise ProfileError(f"profile_from needs a scaling result or a sweep with 'alone' rows; this frame lacks "
                           f"{missing}")
    a = result.attrs
    rename = dict(rename or {})
    if kind == "scaling":
        base = result[result["requested_sm_count"].notna()] if "requested_sm_count" in result else result
        parts = [base.assign(position=p) for p in POSITIONS]
        parts.append(result.drop(base.index).assign(position="last"))  # the whole device: a remainder of all
        rows = pd.concat(parts, ignore_index=True)
        rows["start_ms"] = math.nan
    else:
        rows = result[result["mode"] == "alone"].copy()
        if rows.empty:
            raise ProfileError("profile_from: this sweep has no 'alone' rows; sweep with modes including 'alone'")
        rows["position"] = np.where(rows["partition"] == "remainder", "last", "first")
    rows["workload"] = rows["workload"].map(lambda w: rename.get(w, w))
    out = pd.DataFrame({c: rows[c].to_numpy() for c in ("workload", "position", "sm_count", "rep", "duration_ms",
                                                          "start_ms")})
    for col, given in (("bytes", bytes), ("working_set_bytes", working_set_bytes)):
        declared = rows.groupby("workload")[col].first() if col in rows.columns else pd.Series(dtype=float)
        out[col] = [float(given[w] if given and w in given else declared.get(w, math.nan)) for w in out["workload"]]
    out["flops"] = rows["flops"].to_numpy(dtype=float) if "flops" in rows else math.nan
    out["shared_bandwidth_gbs"] = float(shared_bandwidth_gbs if shared_bandwidth_gbs is not None
                                        else a.get("shared_bandwidth_gbs", math.nan) or math.nan)
    out["l2_bytes"] = float(l2_bytes if l2_bytes is not None else a.get("l2_bytes", math.nan) or math.nan)
    out[SM_COUNT] = int(a.get(SM_COUNT, 0) or 0)
    out["sm_alignment"] = int(a.get("sm_alignment", 0) or np.gcd.reduce(
        rows.loc[rows["position"] == "first", "sm_count"].astype(int).to_numpy()))
    out["device_name"] = rows["device_name"].to_numpy() if "device_name" in rows else str(a.get("device_name", ""))
    out["run_id"] = rows["run_id"].to_numpy() if "run_id" in rows else str(a.get("run_id", ""))
    out = out[PROFILE_COLUMNS]
    out.attrs.update({k: v for k, v in a.items() if k in ("device_name", SM_COUNT, "date", "recorded")})
    out.attrs["kind"] = "solo_profile"
    return check_profiles(out)


def _bad(what: str) -> ProfileError:
    return ProfileError(f"not a usable solo profile: {what} (make one with gcexplore.solo_profile, or "
                        "gcexplore.prediction.model.profile_from(scaling or sweep result))")


def check_profiles(profiles, *, bandwidth_given: bool = False) -> pd.DataFrame:
    """One profile frame from a frame, a sequence or a mapping of them; :class:`ProfileError` if unusable.

    Checks: the columns of :data:`PROFILE_COLUMNS`; positive finite durations; positive
    sizes; one card (device name, SM count, shared bandwidth) for all workloads; each
    workload with at least one measured size; bytes and working sets >= 0 or missing.
    """
    if isinstance(profiles, Mapping):
        profiles = list(profiles.values())
    if isinstance(profiles, (list, tuple)):
        if not profiles:
            raise _bad("no profiles given")
        frames = [check_profiles(p, bandwidth_given=bandwidth_given) for p in profiles]
        seen: dict[str, int] = {}
        for i, f in enumerate(frames):
            for w in dict.fromkeys(f["workload"].astype(str)):
                if w in seen:  # pooled, two measurements would make one curve of both
                    raise _bad(f"workload {w!r} is in profiles {seen[w]} and {i}; give one profile per workload "
                               "(or rename one: profile.assign(workload='other name'))")
                seen[w] = i
        attrs = frames[0].attrs
        df = pd.concat([bare(f) for f in frames], ignore_index=True)
    elif isinstance(profiles, pd.DataFrame):
        attrs, df = profiles.attrs, bare(profiles)
    else:
        raise _bad(f"expected a DataFrame, a list or a dict of them, got {type(profiles).__name__}")
    missing = [c for c in PROFILE_COLUMNS if c not in df.columns]
    if missing:
        raise _bad(f"columns {missing} are missing")
    if df.empty:
        raise _bad("it has no rows")
    d = df["duration_ms"].to_numpy(dtype=float)
    if not np.all(np.isfinite(d) & (d > 0)):
        raise _bad(f"{int(np.sum(~(np.isfinite(d) & (d > 0))))} duration(s) (column 'duration_ms') are not positive "
                   "finite ms")
    if not np.all(df["sm_count"].to_numpy(dtype=float) > 0):
        raise _bad("sm_count must be positive")
    if not set(df["position"]) <= set(POSITIONS):
        raise _bad(f"position must be one of {POSITIONS}, found {sorted(set(df['position']) - set(POSITIONS))}")
    for col in ("bytes", "working_set_bytes"):
        v = df[col].to_numpy(dtype=float)
        if np.any(v[np.isfinite(v)] < 0):
            raise _bad(f"{col} must be >= 0 or missing")
    for col in ("device_name", SM_COUNT):
        if df[col].nunique() > 1:
            raise _bad(f"profiles of different cards ({col}: {sorted(map(str, df[col].unique()))}); "
                       "predict pairs from profiles measured on one card")
    bw = df["shared_bandwidth_gbs"].to_numpy(dtype=float)
    if np.any(bw[np.isfinite(bw)] <= 0):
        raise _bad("shared_bandwidth_gbs must be a positive bandwidth in GB/s, or missing")
    try:  # every number the model reads (after the older checks): NaN, infinite, negative or absurd, by name
        check_profile_numbers(df, "the profiles")
    except ValueError as e:
        raise _bad(str(e)) from None
    if len(set(bw[np.isfinite(bw)])) > 1 and not bandwidth_given:
        bws = ", ".join(f"{v:g}" for v in sorted(set(bw[np.isfinite(bw)])))
        raise _bad(f"profiles measured at different shared bandwidths ({bws} GB/s); profile on one card, "
                   "or pass predict(..., shared_bandwidth_gbs=) to say which holds")
    if ((runs := df.groupby("workload", sort=False)["run_id"].nunique()) > 1).any():
        raise _bad(f"workload {runs[runs > 1].index[0]!r} was profiled in {int(runs.max())} runs; give one profile "
                   "per workload (or rename one: profile.assign(workload='other name'))")
    out = df[PROFILE_COLUMNS + [c for c in TRAFFIC_PROFILE_COLUMNS if c in df.columns]].reset_index(drop=True)
    out.attrs.update(attrs)
    out.attrs["kind"] = "solo_profile"
    return out


# ------------------------------------------------------------------------ solo curve


def _size_quantiles(ks: np.ndarray, ds: np.ndarray) -> dict[int, tuple[float, float, float]]:
    """Per size, the (median, p10, p90) of its durations (one quantile call where sizes repeat alike)."""
    sizes, counts = np.unique(ks, return_counts=True)
    if len(sizes) and (counts == counts[0]).all():
        q = np.quantile(ds[np.argsort(ks, kind="stable")].reshape(len(sizes), -1), (0.5, 0.1, 0.9), axis=1)
        return {int(k): (float(q[0, i]), float(q[1, i]), float(q[2, i])) for i, k in enumerate(sizes)}
    return {int(k): (float(m), float(lo), float(hi))
            for k in sizes for m, lo, hi in [np.quantile(ds[ks == k], (0.5, 0.1, 0.9))]}


class _Curve:
    """One workload's alone time at any size: median, p10, p90 where measured; bounds between."""

    def __init__(self, rows: pd.DataFrame):
        first = rows.iloc[0].to_dict()  # the per-workload columns, read once (a column read per value is slow)
        self.name = str(first["workload"])
        self.pts = {}
        pos_, k_, d_ = (rows[c].to_numpy() for c in ("position", "sm_count", "duration_ms"))
        for pos in POSITIONS:  # numpy, not pandas per group: fit_model builds these thousands of times
            ks, ds = k_[pos_ == pos].astype(int), d_[pos_ == pos].astype(float)
            self.pts[pos] = _size_quantiles(ks, ds)
        self.any = {**self.pts["last"], **self.pts["first"]}
        num = lambda c: math.nan if pd.isna(v := first.get(c, math.nan)) else float(v)  # noqa: E731
        self.bytes, self.working_set = num("bytes"), num("working_set_bytes")
        cold = num("dram_cold_bytes")
        # counted with the L2 emptied before each call: what exceeds the back-to-back count is
        # re-read from L2 across calls, and a neighbour's traffic can evict it
        self.cold = cold if math.isfinite(cold) and math.isfinite(self.bytes) and cold > self.bytes else math.nan
        self.l2 = num("l2_traffic_bytes")
        # counted on smaller partitions too: bytes per call between the sizes, piecewise linear in SMs
        k_big = num(SM_COUNT)
        self.small, self.mid = (counted_at(first, w, k_big) for w in ("small", "mid"))
        self.k_big = k_big
        probe = {c: num(c) for c in PROBE_COLUMNS}
        peak = num("shared_bandwidth_gbs")
        # beside the DRAM-saturating copy on half the card and on most of it (none: not probed)
        self.probes = probe_points(probe, self.bytes_at, peak, k_big)
        self.onsets = {r: probed_onset(probe, self.bytes_at, peak, k_big, r)
                       for r in SHARE_RULES}  # its own ramp, from its probe below saturation
        k_large = probe["probe_large_sm_count"]  # what it does to the copy beside it (see aggression)
        self.aggression = aggression(probe, self.bytes_at(int(k_large)) if math.isfinite(k_large) else math.nan, peak)
        self.polite = polite_excess(probe, self.bytes_at, peak, str(first.get("bound", "")))
        self.refs = reference_aggressions(probe, peak)
        starts = rows.loc[rows["position"] == "first", "start_ms"].to_numpy(dtype=float)
        self.offset = float(np.nanmedian(starts)) if np.isfinite(starts).any() else 0.0
        # the highest DRAM GB/s it drew alone at any size (its access pattern's share of the card's bandwidth),
        # and per SM at the least saturated size (NaN without bytes); read at every step of every fluid model
        self.ceiling_gbs, self.per_sm_gbs = self._drawn_gbs(per_sm=False), self._drawn_gbs(per_sm=True)

    def at(self, n: int, position: str) -> tuple[float, float, float, bool]:
        """(point, low, high, measured) alone time on ``n`` SMs as ``position``."""
        for table in (self.pts[position], self.any):
            if n in table:
                return (*table[n], True)
        sizes = sorted(self.any)
        below = [k for k in sizes if k < n]
        above = [k for k in sizes if k > n]
        if below and above:
            a, b = below[-1], above[0]
            ta, tb = self.any[a][0], self.any[b][0]
            rate = 1 / ta + (1 / tb - 1 / ta) * (n - a) / (b - a)
            if tb <= ta:  # no faster on fewer SMs, at most linearly faster on more
                lo, hi = max(tb, ta * a / n), min(ta, tb * b / n)
            else:  # a curve that rises with SMs: anywhere between its neighbours
                lo, hi = ta, tb
            point = min(max(1 / rate, lo), hi)
            return point, min(lo, point), max(hi, point), False
        if above:  # fewer SMs than any measured: at most linearly slower, no faster
            b = above[0]
            tb = self.any[b][0]
            return tb * b / n, tb, tb * b / n, False
        a = below[-1]  # more SMs than any measured: no slower, at most linearly faster
        ta = self.any[a][0]
        return ta, ta * a / n, ta, False

    def bytes_at(self, n: int) -> float:
        """DRAM bytes per call on ``n`` SMs: the whole device's count, or between the counted sizes."""
        return bytes_at_size(self.bytes, self.small, self.k_big, n, self.mid)

    def fastest(self) -> float:
        return min(v[0] for v in self.any.values())

    def l2_gbs(self) -> float:
        """The highest L2 GB/s it drew alone at any size (NaN without counted L2 traffic)."""
        return self.l2 / (self.fastest() * 1e6) if math.isfinite(self.l2) else math.nan

    def _drawn_gbs(self, *, per_sm: bool) -> float:
        return max((self.bytes_at(k) / (t[0] * 1e6) / (k if per_sm else 1) for k, t in self.any.items()),
                   default=math.nan) if math.isfinite(self.bytes) else math.nan


def l2_drawn_gbs(profiles) -> float:
    """The highest L2 GB/s any profiled workload drew alone (NaN without counted L2 traffic)."""
    curves = _curves(with_traffic_columns(check_profiles(profiles))).values()
    vals = [v for c in curves if math.isfinite(v := c.l2_gbs())]
    return max(vals) if vals else math.nan


class PreparedProfiles:
    """Solo profiles checked and read into curves once, for many predictions (:func:`~.check.fit_model`'s grid):
    ``predict(PreparedProfiles(p), ...)`` equals ``predict(p, ...)``; later changes to the frame do not reach it."""

    def __init__(self, profiles, *, bandwidth_given: bool = False):
        self.frame = with_traffic_columns(check_profiles(profiles, bandwidth_given=bandwidth_given))
        self.curves, self.bandwidth_given = _curves(self.frame), bandwidth_given


def _curves(profiles: pd.DataFrame) -> dict[str, _Curve]:
    return {str(w): _Curve(g) for w, g in bare(profiles).groupby("workload", sort=False)}


# ------------------------------------------------------------------------ fluid model


def _dram_bytes(c: _Curve, spill: float, worst: bool, peak: float, t: float, n: int) -> float:
    """Bytes the workload pulls from DRAM per call on ``n`` SMs (``spill``: share of L2 re-reads that miss)."""
    if not math.isfinite(c.bytes):
        return peak * t * 1e6 if worst else 0.0  # unknown: as if it saturated DRAM alone (worst case)
    if math.isfinite(c.cold):  # counted: back to back, and with the L2 emptied before each call
        warm = c.bytes_at(n)
        return warm + spill * max(c.cold - warm, 0.0)
    if math.isfinite(c.working_set) and c.working_set < c.bytes:
        return c.working_set + spill * (c.bytes - c.working_set)
    return c.bytes_at(n)


def _footprint(c: _Curve) -> float:
    """What it moves through L2 per call: its counted cold bytes, else its declared working set or bytes."""
    return next((v for v in (c.cold, c.working_set, c.bytes) if math.isfinite(v)), 0.0)


def _kept(c: _Curve) -> float:
    """What the workload keeps in L2 across calls: counted, the cold bytes above the back-to-back ones."""
    return c.cold - c.bytes if math.isfinite(c.cold) else _footprint(c)


def _spill(curves: list[_Curve], l2: float) -> list[float]:
    """Per workload, the share of its L2 re-reads that miss: what it keeps in L2 and what the others
    move through it, against the L2 size (a ramp from L2_FIT_FRACTION to L2_SPILL_FRACTION)."""
    if not (math.isfinite(l2) and l2 > 0) or len(curves) < 2:
        return [0.0] * len(curves)
    feet = [_footprint(c) for c in curves]
    lo, hi = L2_FIT_FRACTION * l2, L2_SPILL_FRACTION * l2
    return [float(np.clip((_kept(c) + sum(feet) - f - lo) / (hi - lo), 0.0, 1.0)) for c, f in zip(curves, feet)]


def _fluid(curves: list[_Curve], times: list[float], sms: list[int], peak: float, l2: float, sharing: str,
           worst: bool, l2_peak: float = math.nan, gain: float = 1.0,
           lat: tuple = (0.0, math.nan, math.nan, "flat", "others", None, "fitted", False)) -> list[float]:
    """Finish time (ms) of each workload started together, sharing ``peak`` GB/s of DRAM (and
    ``l2_peak`` GB/s of L2 bandwidth where given)."""
    n = len(curves)
    left, end, now = [1.0] * n, [math.nan] * n, 0.0
    while any(math.isnan(e) for e in end):
        act = [i for i in range(n) if math.isnan(end[i])]
        spill = _spill([curves[i] for i in act], l2)
        demand = [_dram_bytes(curves[i], sp, worst, peak, times[i], sms[i]) / (times[i] * 1e6)
                  for i, sp in zip(act, spill)]
        # a bandwidth-bound workload's best pattern present sets what DRAM gives (48 MiB triads
        # reached 2.63 TB/s alone and 2.67 together); workloads far below the peak say nothing of it
        ceilings = [c for c in (curves[i].ceiling_gbs for i in act) if math.isfinite(c) and c >= 0.5 * peak]
        cap = (min(peak, max(ceilings)) if ceilings else peak) * gain
        if sharing == "equal":
            weights = [1.0] * len(act)
        elif sharing == "demand":
            weights = demand
        else:
            per_sm = [curves[i].per_sm_gbs for i in act]
            weights = [sms[i] * (p if math.isfinite(p) else 4 * peak / max(sms)) for i, p in zip(act, per_sm)]
        speed = shared_speeds(cap, demand, weights)
        if math.isfinite(l2_peak):  # the L2's own bandwidth, shared the same way
            l2d = [curves[i].l2 / (times[i] * 1e6) if math.isfinite(curves[i].l2) else 0.0 for i in act]
            l2w = l2d if sharing == "demand" else weights
            speed = [min(a, b) for a, b in zip(speed, shared_speeds(l2_peak, l2d, l2w))]
        kappa, per_sm_top, onset, rule, load, agg, ramp, pol = lat
        if kappa > 0 and math.isfinite(per_sm_top):  # loaded latency: see latency_slowdown
            speed = [min(sp, 1.0 / latency_slowdown(kappa, d / sms[i] / per_sm_top, (sum(demand) - d) / cap))
                     for sp, d, i in zip(speed, demand, act)]
        if math.isfinite(onset):  # the others near the card's bandwidth: see saturation_speeds (beyond sharing)
            speed = saturation_speeds(speed, demand, [excess_at(curves[i].probes, sms[i] / curves[i].k_big, rule)
                                                      for i in act], [curves[i].aggression for i in act],
                                      [curves[i].onsets[rule] if ramp == "probed" else onset for i in act],
                                      peak, onset, load, agg, [curves[i].polite for i in act] if pol else None,
                                      [curves[i].refs for i in act])
        rates = [sp / times[i] for sp, i in zip(speed, act)]
        dt = min(left[i] / r for i, r in zip(act, rates))
        now += dt
        for i, r in zip(act, rates):
            left[i] -= r * dt
            if left[i] <= 1e-9:
                end[i] = now
    return end


# ------------------------------------------------------------------------ layouts


def _layouts(profiles: pd.DataFrame, n: int) -> list[tuple[int, ...]]:
    total = int(profiles[SM_COUNT].iloc[0])
    step = int(profiles["sm_alignment"].iloc[0])
    if total <= 0 or step <= 0:
        raise _bad("device_sm_count and sm_alignment are unknown; pass layouts= explicitly")
    valid = range(step, total, step)
    out = [(*c, total - sum(c)) for c in itertools.product(valid, repeat=n - 1) if total - sum(c) > 0]
    return sorted(out)


def _as_layouts(layouts, n: int, profiles: pd.DataFrame) -> list[tuple[int, ...]]:
    if layouts is None:
        return _layouts(profiles, n)
    out = []
    total = int(profiles[SM_COUNT].iloc[0])
    for lay in layouts:
        t = tuple(int(x) for x in (lay.split("+") if isinstance(lay, str) else lay))
        if len(t) != n or min(t) <= 0:
            raise ValueError(f"layout {lay!r} must give {n} positive SM counts (one per workload, remainder "
                             f"last), e.g. '24+108'")
        if total > 0 and sum(t) > total:
            raise ValueError(f"layout {lay!r} needs {sum(t)} SMs; the profiled card "
                             f"({profiles['device_name'].iloc[0]}) has {total}")
        out.append(t)
    return out


def _error_pair(model_error) -> tuple[float, float]:
    pair = tuple(model_error) if isinstance(model_error, (tuple, list)) else (model_error, model_error)
    if len(pair) != 2 or not all(isinstance(e, (int, float)) and 0 <= e < 1 for e in pair):
        raise ValueError(f"model_error must be a fraction in [0, 1) or a (below, above) pair of them, "
                         f"got {model_error!r}")
    return float(pair[0]), float(pair[1])


def predict(profiles, workloads: Sequence[str] | None = None, layouts=None, *,
            terms: ModelTerms | Mapping | None = None, model_error=MODEL_ERROR, card: Mapping | None = None,
            shared_bandwidth_gbs: float | None = None, l2_bytes: float | None = None, **old_terms) -> pd.DataFrame:
    """Predicted concurrent makespan and per-workload durations at every layout, with intervals.

    Parameters
    ----------
    profiles : DataFrame, sequence or mapping of DataFrames, or PreparedProfiles
        Solo profiles (:func:`gcexplore.solo_profile`, :func:`profile_from`; a frame is read once while it is
        unchanged), or :class:`PreparedProfiles` of them.
    workloads : sequence of str, optional
        Which profiled workloads, in partition order (first on p0, last on the remainder); ``"name=profiled"``
        runs a profiled workload under another name (``["memory_a=memory", "memory_b=memory"]``). Default: all.
    layouts : sequence of str or tuple, optional
        SM counts per workload, remainder last (``"24+108"``). Default: every valid layout.
    terms : ModelTerms or mapping, optional
        The model's terms (:class:`~gcexplore.prediction.terms.ModelTerms`: the DRAM sharing rule, the L2's
        bandwidth, the loaded latency, the saturation term), or a mapping of some of its fields
        (``{"sharing": "equal"}``); default the ModelTerms defaults. ``fit_model`` decides them:
        ``predict(profiles, **predict_kwargs(profiles.attrs["fit"]))``.
    model_error : float or (float, float), default :data:`MODEL_ERROR`
        Relative error added to both ends of every interval, or (below, above) as :func:`fit_model` calibrates.
    card : mapping, optional
        Predict for another card (:func:`~gcexplore.prediction.traffic_profile.scale_profiles`: its SM count,
        shared bandwidth, SM clock, L2); ``attrs["assumed"]`` says what was assumed. The interval widens by
        :data:`~gcexplore.prediction.traffic_profile.CROSS_CARD_ERROR` on the side where scaled alone times err.
    shared_bandwidth_gbs, l2_bytes : float, optional
        Override the card's values in the profiles.
    **old_terms
        The terms as keywords (``sharing=``, ``saturation_onset=``, ...: :data:`~.terms.TERMS`), as before
        :class:`~.terms.ModelTerms`: deprecated (a DeprecationWarning), pass ``terms=`` instead.

    Returns
    -------
    pandas.DataFrame
        One row per layout x workload, columns :data:`PREDICTION_COLUMNS`:
        ``alone_*`` (solo time on its partition; ``alone_measured`` False where
        interpolated), ``duration_*`` (predicted concurrent duration and interval),
        ``makespan_*`` (predicted concurrent makespan and interval), and the decomposition
        as in :func:`gcexplore.summarize`: ``interference_free_ms`` (slowest alone time),
        ``interference`` (makespan / that), ``split_loss`` (that / ``lower_bound_ms``),
        ``lower_bound_ms`` (the slowest workload's fastest solo time).
        ``attrs["kind"] = "prediction"`` with the settings.
    """
    t, given, frame = model_terms(terms, old_terms), shared_bandwidth_gbs is not None, profiles
    if isinstance(frame, pd.DataFrame):  # read once while the frame is unchanged (its run's memo)
        profiles = run_of(frame).memo(("prepared", given), lambda: PreparedProfiles(frame, bandwidth_given=given))
    elif not isinstance(profiles, PreparedProfiles):
        profiles = PreparedProfiles(profiles, bandwidth_given=given)
    elif profiles.bandwidth_given and shared_bandwidth_gbs is None:
        check_profiles(profiles.frame)  # prepared for a given bandwidth: without one, the check it skipped
    prof, curves = profiles.frame, profiles.curves
    err = _error_pair(model_error)
    if card is not None:
        err, widened = cross_card_margins(err, prof, card)
        prof = scale_profiles(prof, card)
        prof.attrs["assumed"] = [*prof.attrs.get("assumed", []), widened]
        curves = _curves(prof)
    assumed, prof = list(prof.attrs.get("assumed", [])), bare(prof)  # the reads below copy no attrs
    names, sources = [], []
    for w in (workloads or list(curves)):
        name, _, src = str(w).partition("=")
        src = src or name
        if src not in curves:
            raise ValueError(f"no profile for workload {src!r}; profiled: {', '.join(curves)}")
        names.append(name)
        sources.append(curves[src])
    if len(names) < 2 or len(set(names)) != len(names):
        raise ValueError(f"predict needs two or more distinct workload names, got {names}")
    peak = float(shared_bandwidth_gbs if shared_bandwidth_gbs is not None else prof["shared_bandwidth_gbs"].max())
    if shared_bandwidth_gbs is not None and not (math.isfinite(peak) and peak > 0):
        raise ValueError(f"shared_bandwidth_gbs must be a positive bandwidth in GB/s, got {shared_bandwidth_gbs!r}")
    notes = []
    if not math.isfinite(peak):
        notes.append("the profiles carry no shared DRAM bandwidth, so DRAM sharing is not modelled (interference "
                     "1.0 wherever only DRAM is shared); pass shared_bandwidth_gbs= (the card's DRAM bandwidth)")
        warnings.warn(notes[-1], stacklevel=2)
    l2 = float(l2_bytes if l2_bytes is not None else prof["l2_bytes"].max())
    bound = max(c.fastest() for c in sources)
    l2_peak = float(t.l2_bandwidth_gbs) if t.l2_bandwidth_gbs is not None else math.nan
    gain = float(t.bandwidth_gain)
    tops = [v for v in (c.per_sm_gbs for c in curves.values()) if math.isfinite(v)]
    lat = (float(t.loaded_latency), max(tops) if tops else math.nan, math.nan if t.saturation_onset is None else
           float(t.saturation_onset), t.saturation_share, t.saturation_load, t.saturation_aggression,
           t.saturation_ramp, t.saturation_polite)
    rows = []
    for lay in _as_layouts(layouts, len(names), prof):
        rows.extend(_predict_layout(lay, names, sources, peak, l2, t.sharing, err, bound, (l2_peak, gain, lat)))
    out = pd.DataFrame(rows, columns=PREDICTION_COLUMNS)
    src = prof.groupby("workload", sort=False)["bytes_source"].first()
    out.attrs.update(kind="prediction", workloads=names, sharing=t.sharing,
                     model_error=err[0] if err[0] == err[1] else list(err),
                     shared_bandwidth_gbs=peak, l2_bytes=l2, device_name=str(prof["device_name"].iloc[0]),
                     unknown_bytes=[n for n, c in zip(names, sources) if not math.isfinite(c.bytes)],
                     bytes_source={n: str(src.get(c.name, "missing")) for n, c in zip(names, sources)},
                     l2_bandwidth_gbs=t.l2_bandwidth_gbs, bandwidth_gain=gain, loaded_latency=lat[0],
                     per_sm_top_gbs=lat[1], saturation_onset=t.saturation_onset, saturation_share=t.saturation_share,
                     saturation_load=t.saturation_load, saturation_aggression=t.saturation_aggression,
                     saturation_ramp=t.saturation_ramp, saturation_polite=t.saturation_polite,
                     assumed=assumed, notes=notes)
    return out


def _predict_layout(lay, names, curves, peak, l2, sharing, err, bound, extra) -> list[dict]:
    l2_peak, gain, lat = extra
    last = len(lay) - 1
    alone = [c.at(k, "last" if i == last else "first") for i, (c, k) in enumerate(zip(curves, lay))]
    offset = max(c.offset for c in curves)
    kw = {"l2_peak": l2_peak, "gain": gain, "lat": lat}
    mid = _fluid(curves, [a[0] for a in alone], list(lay), peak, l2, sharing, worst=False, **kw)
    low = _fluid(curves, [a[1] for a in alone], list(lay), peak, l2, sharing, worst=False, **kw)
    if math.isfinite(l2_peak) or lat[0] > 0 or math.isfinite(lat[2]):  # fitted: the low end also allows none
        low = [min(a, b) for a, b in zip(low, _fluid(curves, [a[1] for a in alone], list(lay), peak, l2, sharing,
                                                      worst=False, gain=gain))]
    high = _fluid(curves, [a[2] for a in alone], list(lay), peak, l2, sharing, worst=True, **kw)
    low = [min(a, b) for a, b in zip(low, mid)]  # shorter solo times can mean more contention
    high = [max(a, b) for a, b in zip(high, mid)]
    make, make_lo, make_hi = max(mid) + offset, max(low) + offset, max(high) + offset
    free = max(a[0] for a in alone)
    label = "+".join(map(str, lay))
    below, above = err
    per_layout = {"makespan_ms": make, "makespan_low_ms": make_lo * (1 - below),
                  "makespan_high_ms": make_hi * (1 + above), "interference_free_ms": free,
                  "interference": make / free, "split_loss": free / bound, "lower_bound_ms": bound}
    return [{"layout": label, "split_sm_count": lay[0], "workload": name,
             "partition": "remainder" if i == last else f"p{i}", "sm_count": lay[i], "alone_ms": a[0],
             "alone_low_ms": a[1], "alone_high_ms": a[2], "alone_measured": a[3], "duration_ms": mid[i],
             "duration_low_ms": low[i] * (1 - below), "duration_high_ms": high[i] * (1 + above), **per_layout}
            for i, (name, a) in enumerate(zip(names, alone))]


def predicted_layouts(prediction: pd.DataFrame) -> pd.DataFrame:
    """One row per layout of a :func:`predict` result (columns ``LAYOUT_COLUMNS``), by first size."""
    require_prediction(prediction, "predicted_layouts")
    g = prediction.groupby("layout", sort=False)
    out = g.first()[LAYOUT_COLUMNS[1:-1]].assign(all_measured=g["alone_measured"].all()).reset_index()
    return out.sort_values("split_sm_count", kind="stable").reset_index(drop=True)[LAYOUT_COLUMNS]


def require_prediction(df, where: str) -> None:
    """ValueError unless ``df`` is a :func:`predict` result (``where`` names the caller) whose numbers are
    ones :func:`predict` gives (each column by name: :data:`PREDICTION_NUMBERS`)."""
    if not isinstance(df, pd.DataFrame) or df.attrs.get("kind") != "prediction":
        raise ValueError(f"{where} needs the result of gcexplore.predict(profiles) "
                         f"(attrs kind 'prediction'), got {getattr(df, 'attrs', {}).get('kind', type(df).__name__)!r}")
    check_columns(df, PREDICTION_NUMBERS, f"{where}: the prediction", required=True)
