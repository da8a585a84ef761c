"""What a solo profile knows about a workload's memory traffic, and where each number came from.

A profile's ``bytes`` (DRAM bytes per call) is *measured* (CUPTI counters,
:func:`gcexplore.experiments.traffic.measure_traffic`), *declared* (the workload's
``bytes=``, or ``solo_profile(bytes=...)``, which overrides a measurement), or *missing*
(the model then assumes none for its point, and DRAM saturated for its interval's top).
:func:`attach_traffic` puts counted traffic into profile rows; :func:`classify` says
whether a workload is compute-, memory- or latency-bound; :func:`profile_sources` lists
the source of every number; :func:`scale_profiles` moves profiles to another card;
:func:`shared_speeds` and :func:`latency_slowdown` are how traffic slows workloads that share
DRAM (the prediction's fluid model).

Traffic columns (:data:`TRAFFIC_PROFILE_COLUMNS`, optional in a profile: older profiles
get them filled by :func:`with_traffic_columns`):

- ``bytes_source``: "measured", "declared" or "missing" (the source of ``bytes``);
- ``dram_read_bytes`` / ``dram_write_bytes``: counted per call on the whole device;
- ``dram_cold_bytes``: counted with the L2 emptied before each call; what exceeds
  ``bytes`` is re-read from L2 across calls, which a neighbour can evict;
- ``l2_traffic_bytes``: L2 (LTS) traffic per call;
- ``small_dram_bytes`` at ``small_sm_count``: the same count on a small partition;
- ``achieved_gbs``: DRAM GB/s of one call on the whole device;
- ``bound`` / ``bound_source``: :func:`classify`'s answer and what it rested on;
- ``sm_clock_mhz``: the card's SM clock when profiled (cross-card scaling);
- ``probe_sm_count``, ``probe_ms`` / ``probe_alone_ms`` (:data:`PROBE_COLUMNS`): its median
  duration on about half the card beside the built-in copy on the rest (which saturates DRAM) /
  alone there, and the copy's (``probe_copy_ms`` / ``probe_copy_alone_ms``; its bytes per call
  ``probe_copy_bytes``): how much a saturated memory system slows it (:func:`probe_excess`,
  :func:`saturation_slowdown`); ``probe_large_*`` the same with the workload on most of the card
  (the copy on the rest still saturates DRAM), ``probe_low_*`` on more (the copy on the rest draws
  about 0.64 of DRAM's bandwidth: below saturation);
- ``probe_polite_*``: the same on half the card beside the built-in polite streamer (one 4-byte element a
  thread: few requests in flight), its bytes per call ``probe_polite_bytes``; ``probe_refcopy_*`` /
  ``probe_refpolite_*``: the copy and that streamer each on most of the card beside the copy on the rest, so
  that what every co-runner does to the copy (:func:`aggression`) is placed between the two references';
- ``requested_sm_count``: the size, so that :func:`gcexplore.summarize` reads a profile as
  the scaling it is (alone times per size).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from ..schema import identity_name

SM_COUNT = identity_name("sm_count")  # the card's SM count, as every result names it

__all__ = ["BOUNDS", "CROSS_CARD_ERROR", "MEMORY_BOUND_SHARE", "POLITE_COLUMNS", "PROBE_COLUMNS", "PROBE_LARGE_SHARE",
           "PROBE_LOW_SHARE", "SCALES_SHARE", "SATURATION_LOADS", "SATURATION_RAMPS", "SHARE_RULES",
           "TRAFFIC_PROFILE_COLUMNS", "aggression", "aggressor_weight", "attach_traffic", "bytes_at_size", "card_of",
           "check_saturation", "classify", "probed_onset", "cross_card_margins", "excess_at", "latency_slowdown",
           "polite_excess", "polite_weight", "probe_excess", "probe_points", "probe_slowdown", "probe_table", "profile_sources", "reference_aggressions", "saturation_input",
           "saturation_slowdown", "saturation_speeds", "scale_profiles", "scaling_error", "shared_speeds",
           "with_traffic_columns"]

#: The polite probe (half the card beside the built-in polite streamer, ``probe_polite_*``: ``copy`` there names that
#: streamer) and the two references' own large probes (each on PROBE_LARGE_SHARE of the card beside the copy).
POLITE_COLUMNS = ["probe_polite_sm_count", "probe_polite_ms", "probe_polite_alone_ms", "probe_polite_copy_ms",
                  "probe_polite_copy_alone_ms", "probe_polite_bytes",
                  *(f"probe_ref{r}_{c}" for r in ("copy", "polite") for c in ("sm_count", "ms", "alone_ms", "copy_ms",
                                                                                "copy_alone_ms"))]
PROBE_COLUMNS = ["probe_sm_count", "probe_ms", "probe_alone_ms", "probe_copy_ms", "probe_copy_alone_ms",
                 "probe_copy_bytes", "probe_large_sm_count", "probe_large_ms", "probe_large_alone_ms",
                 "probe_large_copy_ms", "probe_large_copy_alone_ms", "probe_low_sm_count", "probe_low_ms",
                 "probe_low_alone_ms", "probe_low_copy_ms", "probe_low_copy_alone_ms", *POLITE_COLUMNS]
#: The second probe's size: the valid size nearest this share of the card (104 of 132 SMs on an H100),
#: the workload holding most SMs beside the copy on the rest (which still saturates DRAM there).
PROBE_LARGE_SHARE = 0.8
#: The third probe's size (112 of 132 SMs on an H100): the copy on the rest (20 SMs) draws about 0.64 of
#: the card's DRAM bandwidth alone, below saturation, so the workload's slowdown there says how it fares
#: beside a co-runner that does not saturate DRAM, and the copy's says what the workload does to a neighbour.
PROBE_LOW_SHARE = 0.85
TRAFFIC_PROFILE_COLUMNS = ["bytes_source", "dram_read_bytes", "dram_write_bytes", "dram_cold_bytes",
                           "l2_traffic_bytes", "small_dram_bytes", "small_sm_count", "achieved_gbs", "bound",
                           "bound_source", "sm_clock_mhz", "requested_sm_count", *PROBE_COLUMNS]
BOUNDS = ("memory", "compute", "latency")
#: A workload drawing at least this share of the card's shared DRAM bandwidth alone is memory-bound.
MEMORY_BOUND_SHARE = 0.5
#: One that gains at least this share of linear speed-up from the small partition to the whole
#: device (and is not memory-bound) is compute-bound; one that gains less is latency-bound.
SCALES_SHARE = 0.5
_TEXT = {"bytes_source", "bound", "bound_source"}


_NEEDED = ("workload", "sm_count", "duration_ms", "bytes", "working_set_bytes", "shared_bandwidth_gbs", "l2_bytes",
           "device_name", SM_COUNT)


def _require(df, where: str) -> pd.DataFrame:
    """Profile rows (as :func:`gcexplore.analysis.prediction.check_profiles` makes them); ValueError if not."""
    if not isinstance(df, pd.DataFrame) or df.empty or not set(_NEEDED) <= set(df.columns):
        have = sorted(df.columns) if isinstance(df, pd.DataFrame) else type(df).__name__
        raise ValueError(f"{where} needs solo profile rows (gcexplore.solo_profile) with columns {list(_NEEDED)}; "
                         f"got {have}")
    return df


def with_traffic_columns(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every traffic column present: missing numbers NaN, ``bytes_source`` from
    whether ``bytes`` is there ("declared" or "missing"), the classification recomputed."""
    out = df.copy()
    for col in TRAFFIC_PROFILE_COLUMNS:
        if col not in out.columns:
            out[col] = "" if col in _TEXT else math.nan
    out["requested_sm_count"] = out["sm_count"]  # alone times per size: summarize reads a profile as a scaling
    b = out["bytes"].to_numpy(dtype=float)
    src = out["bytes_source"].astype(str).to_numpy()
    out["bytes_source"] = np.where(np.isin(src, ("measured", "declared", "missing")), src,
                                   np.where(np.isfinite(b), "declared", "missing"))
    out.attrs.update(df.attrs)
    return _with_bounds(out)


def _whole_times(rows: pd.DataFrame) -> pd.Series:
    return rows.groupby("sm_count")["duration_ms"].median().sort_index()


def classify(rows: pd.DataFrame) -> tuple[str, str]:
    """``(bound, source)`` of one workload's profile rows.

    Memory-bound when its DRAM GB/s on the largest profiled partition reaches
    :data:`MEMORY_BOUND_SHARE` of the card's shared bandwidth; else compute-bound when it
    gains at least :data:`SCALES_SHARE` of a linear speed-up from its smallest to its
    largest profiled partition; else latency-bound. ``source`` says what it rested on:
    "measured" (counted bytes and measured times), "declared" (declared bytes), or
    "assumed" (no bytes: taken as not memory-bound).
    """
    times = _whole_times(rows)
    big, small = int(times.index[-1]), int(times.index[0])
    b = float(rows["bytes"].iloc[0])
    peak = float(rows["shared_bandwidth_gbs"].max())
    src = str(rows["bytes_source"].iloc[0]) if "bytes_source" in rows else ("declared" if math.isfinite(b) else "")
    source = {"measured": "measured", "declared": "declared"}.get(src, "assumed")
    drawn = b / (times.iloc[-1] * 1e6) if math.isfinite(b) else 0.0  # GB/s on the largest partition
    if math.isfinite(peak) and peak > 0 and drawn >= MEMORY_BOUND_SHARE * peak:
        return "memory", source
    if big > small and (times[small] / times[big]) / (big / small) >= SCALES_SHARE:
        return "compute", source
    return "latency", source


def _with_bounds(df: pd.DataFrame) -> pd.DataFrame:
    for w, rows in df.groupby("workload", sort=False):
        bound, source = classify(rows)
        df.loc[rows.index, "bound"] = bound
        df.loc[rows.index, "bound_source"] = source
        b = float(rows["bytes"].iloc[0])
        df.loc[rows.index, "achieved_gbs"] = b / (_whole_times(rows).iloc[-1] * 1e6) if math.isfinite(b) else math.nan
    return df


def attach_traffic(profiles: pd.DataFrame, traffic: pd.DataFrame, *, declared: Iterable[str] = ()) -> pd.DataFrame:
    """Profiles with counted traffic: ``bytes`` becomes the measured DRAM bytes per call.

    Parameters
    ----------
    profiles : pandas.DataFrame
        Solo profile rows (:func:`gcexplore.solo_profile`).
    traffic : pandas.DataFrame
        :func:`~gcexplore.experiments.traffic.measure_traffic` rows (any workloads; those
        without a profile are ignored, profiles without traffic keep their bytes).
    declared : iterable of str
        Workloads whose declared bytes override the measurement (``solo_profile(bytes=)``).
    """
    out = with_traffic_columns(_require(profiles, "attach_traffic"))
    keep = set(declared)
    for w, t in traffic.groupby("workload", sort=False):
        rows = out.index[out["workload"] == w]
        if not len(rows) or w in keep:
            continue
        whole = t[~t["flushed"].astype(bool)].sort_values("sm_count")
        if whole.empty:
            continue
        big, small = whole.iloc[-1], whole.iloc[0]
        cold = t[t["flushed"].astype(bool)]
        read, write = float(big["dram_read_bytes"]), float(big["dram_write_bytes"])
        if not (math.isfinite(read) and math.isfinite(write)):
            continue
        out.loc[rows, "bytes"] = read + write
        out.loc[rows, "bytes_source"] = "measured"
        out.loc[rows, "dram_read_bytes"] = read
        out.loc[rows, "dram_write_bytes"] = write
        out.loc[rows, "l2_traffic_bytes"] = float(big["l2_bytes"])
        if len(cold):
            c = cold.iloc[-1]
            out.loc[rows, "dram_cold_bytes"] = float(c["dram_read_bytes"] + c["dram_write_bytes"])
        if len(whole) > 1:
            out.loc[rows, "small_dram_bytes"] = float(small["dram_read_bytes"] + small["dram_write_bytes"])
            out.loc[rows, "small_sm_count"] = int(small["sm_count"])
    out.attrs.update(profiles.attrs)
    out.attrs["traffic_metric_set"] = traffic.attrs.get("metric_set", str(traffic["metric_set"].iloc[0])
                                                        if "metric_set" in traffic and len(traffic) else "")
    return _with_bounds(out)


def profile_sources(profiles: pd.DataFrame) -> pd.DataFrame:
    """The source of every number the model reads, per workload.

    Returns
    -------
    pandas.DataFrame
        One row per workload: ``duration`` ("measured"), ``bytes`` (measured / declared /
        missing), ``working_set`` (measured: the flushed count; declared; or missing),
        ``bound`` (measured / declared / assumed), ``shared_bandwidth`` and ``l2``
        ("measured" / "device property", or "missing"), ``card``.
    """
    df = with_traffic_columns(profiles)
    rows = []
    for w, g in df.groupby("workload", sort=False):
        r = g.iloc[0]
        ws = ("measured" if math.isfinite(float(r["dram_cold_bytes"])) else
              "declared" if math.isfinite(float(r["working_set_bytes"])) else "missing")
        rows.append({"workload": w, "duration": "measured", "bytes": r["bytes_source"], "working_set": ws,
                     "bound": r["bound_source"],
                     "shared_bandwidth": "measured" if math.isfinite(float(r["shared_bandwidth_gbs"])) else "missing",
                     "l2": "device property" if math.isfinite(float(r["l2_bytes"])) else "missing",
                     "card": str(r["device_name"])})
    return pd.DataFrame(rows)


CARD_KEYS = ("device_name", SM_COUNT, "shared_bandwidth_gbs", "sm_clock_mhz", "l2_bytes")
#: How far alone times scaled to another card miss that card's own: the p90 of |scaled / measured - 1|
#: over every workload and size, H100 profiles scaled to an H200 and back (:func:`scaling_error` on
#: the shipped ``predict_profiles`` and ``predict_profiles_h200``; 0.14 on the recorded runs b2, c1,
#: c2, d1 against b1). Always the same way: a card with more bandwidth speeds kernels up less than
#: its bandwidth ratio (their latency-bound parts do not scale), so the truth lies on the slow side.
CROSS_CARD_ERROR = 0.15


def card_of(profiles: pd.DataFrame) -> dict:
    """The card a profile frame was measured on, as :func:`scale_profiles` takes it."""
    df = with_traffic_columns(profiles)
    clk = float(df["sm_clock_mhz"].max())
    return {SM_COUNT: int(df[SM_COUNT].iloc[0]), "shared_bandwidth_gbs": float(df["shared_bandwidth_gbs"].max()),
            "sm_clock_mhz": clk if math.isfinite(clk) else None, "l2_bytes": float(df["l2_bytes"].max()),
            "device_name": str(df["device_name"].iloc[0])}


def scaling_error(profiles: pd.DataFrame, target: pd.DataFrame) -> pd.Series:
    """Per workload, position and size measured on both cards: ``profiles``' alone time scaled to
    ``target``'s card (:func:`scale_profiles`) / ``target``'s own median - 1 (positive: scaled too slow)."""
    there = _require(target, "scaling_error")
    scaled = scale_profiles(profiles, card_of(there))
    key = ["workload", "position", "sm_count"]
    both = pd.concat([scaled.groupby(key)["duration_ms"].median().rename("scaled"),
                      there.groupby(key)["duration_ms"].median().rename("measured")], axis=1).dropna()
    if both.empty:
        raise ValueError("scaling_error: no workload is profiled at the same size on both cards")
    return (both["scaled"] / both["measured"] - 1).rename("error")


def scale_profiles(profiles: pd.DataFrame, card: Mapping) -> pd.DataFrame:
    """Profiles moved to another card: each alone time scaled by that card's bandwidth and clock.

    A workload drawing a share m of the profiled card's shared bandwidth at a size
    (counted or declared bytes / its time there / that bandwidth, at most 1) takes
    ``t x (m x bw_from / bw_to + (1 - m) x clock_from / clock_to)`` there; sizes keep
    their SM counts (the target's SM count sets the layouts; sizes beyond the profiled
    ones are the model's bounds). ``attrs["assumed"]`` lists what was assumed, in sentences.

    Parameters
    ----------
    card : mapping
        The target: ``device_sm_count`` and ``shared_bandwidth_gbs`` (measured with
        :func:`gcexplore.card_bandwidth`, or a datasheet value: then say so), optional
        ``sm_clock_mhz``, ``l2_bytes``, ``device_name``.
    """
    df = with_traffic_columns(_require(profiles, "scale_profiles"))
    unknown = sorted(set(card) - set(CARD_KEYS))
    if unknown:
        raise ValueError(f"card has unknown keys {unknown}; valid: {', '.join(CARD_KEYS)}")
    for key in (SM_COUNT, "shared_bandwidth_gbs"):
        v = card.get(key)
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise ValueError(f"card needs a positive {key}, got {v!r}")
    assumed = []
    bw_from, bw_to = float(df["shared_bandwidth_gbs"].max()), float(card["shared_bandwidth_gbs"])
    if not (math.isfinite(bw_from) and bw_from > 0):
        raise ValueError("the profiles record no shared bandwidth of their card: cannot scale by bandwidth")
    clk_from = float(df["sm_clock_mhz"].max())
    clk_to = float(card.get("sm_clock_mhz") or math.nan)
    if not (math.isfinite(clk_from) and math.isfinite(clk_to) and clk_from > 0 and clk_to > 0):
        clk_from = clk_to = 1.0
        assumed.append("the same SM clock on both cards (a clock was not recorded)")
    out = df.copy()
    for w, g in df.groupby("workload", sort=False):
        b = float(g["bytes"].iloc[0])
        if not math.isfinite(b):
            assumed.append(f"{w} draws no DRAM bandwidth (no bytes): scaled by the clock only")
            b = 0.0
        t = g["duration_ms"].to_numpy(dtype=float)
        m = np.minimum(1.0, b / (t * 1e6) / bw_from)
        out.loc[g.index, "duration_ms"] = t * (m * bw_from / bw_to + (1 - m) * clk_from / clk_to)
    out["shared_bandwidth_gbs"] = bw_to
    out[SM_COUNT] = int(card[SM_COUNT])
    out["device_name"] = str(card.get("device_name", "target card"))
    if card.get("l2_bytes"):
        out["l2_bytes"] = float(card["l2_bytes"])
    else:
        assumed.append("the profiled card's L2 size")
    out["sm_clock_mhz"] = clk_to if clk_to != 1.0 else math.nan
    if int(card[SM_COUNT]) != int(df[SM_COUNT].iloc[0]):
        assumed.append(f"sizes above the {int(df['sm_count'].max())} profiled SMs run no slower and at most "
                       "linearly faster (the model's bounds)")
    assumed.append("the same DRAM bytes per call (the same kernels)")
    out.attrs.update(df.attrs)
    out.attrs.update(assumed=assumed, scaled_from=str(df["device_name"].iloc[0]))
    return _with_bounds(out)


def cross_card_margins(err: tuple[float, float], prof: pd.DataFrame, card: Mapping) -> tuple[tuple[float, float], str]:
    """The interval's margins widened on the side where alone times scaled to another card err
    (:data:`CROSS_CARD_ERROR`), and the sentence that says so."""
    e = CROSS_CARD_ERROR
    faster = float(card.get("shared_bandwidth_gbs") or 0) >= float(prof["shared_bandwidth_gbs"].max())
    below, above = err
    if faster:  # more bandwidth there: kernels speed up less than the ratio, the truth on the slow side
        above = (1 + above) * (1 + e) - 1
    else:
        below = 1 - (1 - below) / (1 + e)
    return (min(below, 0.99), min(above, 0.99)), (
        f"alone times scaled to this card err by up to {e:.0%} (p90 measured H100 <-> H200), on the "
        f"{'slow' if faster else 'fast'} side toward a card with {'more' if faster else 'less'} bandwidth: the interval's "
        f"{'upper' if faster else 'lower'} end is widened by that")


# ------------------------------------------------------------------------ sharing (the prediction's fluid model)


def _waterfill(total: float, caps: list[float], weights: list[float]) -> list[float]:
    """Divide ``total`` in proportion to ``weights``, nobody above its cap, leftovers passed on."""
    share = [0.0] * len(caps)
    open_ = [i for i in range(len(caps)) if caps[i] > 0]
    left = total
    while open_ and left > 1e-12:
        wsum = sum(max(weights[i], 1e-12) for i in open_)
        offer = {i: left * max(weights[i], 1e-12) / wsum for i in open_}
        full = [i for i in open_ if share[i] + offer[i] >= caps[i]]
        if not full:
            for i in open_:
                share[i] += offer[i]
            break
        for i in full:
            left -= caps[i] - share[i]
            share[i] = caps[i]
        open_ = [i for i in open_ if i not in full]
    return share


def shared_speeds(cap: float, demand: list[float], weights: list[float]) -> list[float]:
    """Speed (1 = as alone) of each workload when ``demand`` GB/s share ``cap`` GB/s, divided by ``weights``
    (never less than any one of them drew alone: no workload is slowed by itself)."""
    cap = max([cap, *demand]) if math.isfinite(cap) else cap
    if not (math.isfinite(cap) and sum(demand) > cap):
        return [1.0] * len(demand)
    got = _waterfill(cap, demand, weights)
    # a workload drawing a share m of the bandwidth alone is bound by it to that degree
    bound = [min(1.0, d / cap) for d in demand]
    return [1.0 / ((1.0 - m) + m * d / g) if d > 0 and g > 0 else (1.0 if d <= 0 else 0.0)
            for g, d, m in zip(got, demand, bound)]


def latency_slowdown(kappa: float, per_sm: float, others: float) -> float:
    """Loaded latency: an SM pulling near the most DRAM GB/s per SM any profiled workload drew (``per_sm``,
    that fraction) is bound by the requests it keeps in flight, so its time grows with their latency, which
    grows with the others' DRAM demand (``others``, a fraction of what DRAM gives); ``kappa``: fitted."""
    return 1.0 + kappa * min(max(per_sm, 0.0), 1.0) * min(max(others, 0.0), 1.0)


#: The most a probe may say a saturated memory system slows a workload (a rate factor).
PROBE_MAX_SLOWDOWN = 4.0


def probe_slowdown(probe_ms: float, alone_ms: float, copy_ms: float) -> float:
    """How much slower a workload runs while beside the DRAM-saturating copy (a rate factor, >= 1;
    NaN without a probe): its probe duration ``probe_ms`` against ``alone_ms`` on the same SMs,
    counting only the time the copy (``copy_ms`` beside it) overlapped it: a workload that
    outlasts the copy ran alone for the rest, ``probe = copy + alone x (1 - copy / (slowdown x alone))``."""
    if not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in (probe_ms, alone_ms, copy_ms)):
        return math.nan
    if probe_ms <= copy_ms:  # overlapped throughout
        s = probe_ms / alone_ms
    else:
        extra = (probe_ms - alone_ms) / copy_ms
        s = 1.0 / (1.0 - extra) if extra < 1.0 else PROBE_MAX_SLOWDOWN
    return float(min(max(s, 1.0), PROBE_MAX_SLOWDOWN))


def probe_excess(probe: Mapping, own_bytes: float, peak: float) -> float:
    """The probe's slowdown (:func:`probe_slowdown`) that bandwidth sharing does not explain: divided by
    what its DRAM demand (``own_bytes`` per call on the probe's SMs, alone there) and the copy's
    (``probe_copy_bytes`` in ``probe_copy_alone_ms``) sharing ``peak`` GB/s would cost it (the fluid
    model counts that part already); the whole probe slowdown where the bytes are unknown."""
    s = probe_slowdown(probe["probe_ms"], probe["probe_alone_ms"], probe["probe_copy_ms"])
    mine = own_bytes / (probe["probe_alone_ms"] * 1e6)
    copy = probe.get("probe_copy_bytes", math.nan) / (probe.get("probe_copy_alone_ms", math.nan) * 1e6)
    if not (math.isfinite(s) and math.isfinite(mine) and math.isfinite(copy) and math.isfinite(peak)):
        return s
    return max(1.0, s * shared_speeds(peak, [mine, copy], [mine, copy])[0])


#: How a workload's excess beyond sharing (:func:`probe_excess`) depends on its share of the card's SMs
#: between its probes (half the card, :data:`PROBE_LARGE_SHARE`): "flat" (the half probe's at every
#: share), "interp" (linear in the share between the probes, each probe's outside them), "extrap" (the
#: line through both, extended, within [1, PROBE_MAX_SLOWDOWN]); with one probe all three are "flat".
SHARE_RULES = ("flat", "interp", "extrap")


def probe_points(probe: Mapping, bytes_at, peak: float, total: float) -> list[tuple[float, float]]:
    """``(share of the card's SMs, excess)`` of each probe in a profile row (:data:`PROBE_COLUMNS`), by
    share; ``bytes_at(k)``: the workload's DRAM bytes per call on k SMs; ``total``: the card's SMs."""
    out = []
    for pre in ("probe_", "probe_large_"):
        k = float(probe.get(pre + "sm_count", math.nan))
        if not (math.isfinite(k) and k > 0 and total > 0):
            continue
        one = {c: probe.get(pre + c, math.nan) for c in ("ms", "alone_ms", "copy_ms", "copy_alone_ms")}
        e = probe_excess({"probe_" + c: v for c, v in one.items()} | {"probe_copy_bytes": probe.get(
            "probe_copy_bytes", math.nan)}, bytes_at(int(k)), peak)
        if math.isfinite(e):
            out.append((k / total, e))
    return sorted(out)


def excess_at(points: list[tuple[float, float]], share: float, rule: str = "flat") -> float:
    """The excess beyond sharing at ``share`` of the card's SMs from :func:`probe_points` by ``rule``
    (:data:`SHARE_RULES`; NaN without a probe): a victim holding most SMs keeps more of its requests in
    flight against the copy's, so a saturated memory system slows it less (measured H100: a GEMM beside
    the copy 2.7x beyond sharing on 64 SMs, 1.5x on 104)."""
    if rule not in SHARE_RULES:
        raise ValueError(f"the saturation term's share rule must be one of {SHARE_RULES}, got {rule!r}")
    if not points:
        return math.nan
    if rule == "flat" or len(points) < 2:
        return points[0][1]
    (a, ea), (b, eb) = points[0], points[-1]
    x = (share - a) / (b - a) if b > a else 0.0
    if rule == "interp":
        x = min(max(x, 0.0), 1.0)
    return float(min(max(ea + x * (eb - ea), 1.0), PROBE_MAX_SLOWDOWN))


#: What drives the saturation term's ramp (:func:`saturation_input`): "others" (the others' DRAM demand)
#: or "total" (the workload's own demand too: DRAM saturates only when everyone together asks for more
#: than it gives; the copy probe's copy alone nearly does, so the probe is at saturation either way).
SATURATION_LOADS = ("others", "total")


def saturation_input(own: float, everyone: float, peak: float, basis: str = "others") -> float:
    """The saturation ramp's input, a fraction of DRAM's ``peak`` GB/s: by ``basis``
    (:data:`SATURATION_LOADS`) the others' demand (``everyone - own``) or everyone's."""
    if basis not in SATURATION_LOADS:
        raise ValueError(f"the saturation term's load must be one of {SATURATION_LOADS}, got {basis!r}")
    return (everyone if basis == "total" else everyone - own) / peak


#: Where the saturation ramp starts (:func:`saturation_slowdown`'s ``onset``): "fitted" (one onset for every
#: workload, fit_model's) or "probed" (each workload's own, from its probe below saturation: :func:`probed_onset`;
#: the fitted one where it has none).
SATURATION_RAMPS = ("fitted", "probed")


def probed_onset(probe: Mapping, bytes_at, peak: float, total: float, rule: str = "flat") -> float:
    """A workload's own saturation onset, from its low probe (``probe_low_*``: on most of the card beside the
    copy drawing x < 1 of ``peak`` alone on the rest): the fraction r of its saturated excess (:func:`excess_at`
    of its other probes at that share, by ``rule``) that it took there puts the linear ramp through (x, r):
    onset ``(x - r) / (1 - r)`` within [0, x]; NaN without a low probe, its bytes, or a saturated excess
    above 1.02 (nothing to scale)."""
    k = float(probe.get("probe_low_sm_count", math.nan))
    one = {"probe_" + c: float(probe.get("probe_low_" + c, math.nan)) for c in ("ms", "alone_ms", "copy_ms",
                                                                                 "copy_alone_ms")}
    if not (math.isfinite(k) and total > 0 and math.isfinite(peak)):
        return math.nan
    cb = float(probe.get("probe_copy_bytes", math.nan))
    x = cb / (one["probe_copy_alone_ms"] * 1e6) / peak
    low = probe_excess({**one, "probe_copy_bytes": cb}, bytes_at(int(k)), peak)
    sat = excess_at(probe_points(probe, bytes_at, peak, total), k / total, rule)
    if not (math.isfinite(x) and 0 < x < 1 and math.isfinite(low) and math.isfinite(sat)) or sat <= 1.02:
        return math.nan
    r = min(max((low - 1.0) / (sat - 1.0), 0.0), 1.0)
    return float(min(max((x - r) / (1.0 - r), 0.0), x)) if r < 1 else 0.0


def aggression(probe: Mapping, own_bytes: float, peak: float) -> float:
    """What a workload does to a small neighbour: the copy's rate slowdown in its large probe (the copy on
    the rest of the card, beside it on ``probe_large_sm_count`` SMs) divided by what DRAM sharing explains
    (both drawing alone: ``own_bytes`` per call in ``probe_large_alone_ms``, the copy's bytes in its time);
    NaN without a large probe or its bytes. Measured H100 (batch h1): copy 2.34, sigmoid 2.19, fft 1.79,
    sort 1.24, layer norm 1.09, elementwise 0.99: at the same DRAM demand some co-runners starve a
    neighbour's requests and some do not, which the bytes do not say."""
    one = {c: float(probe.get("probe_large_" + c, math.nan)) for c in ("ms", "alone_ms", "copy_ms", "copy_alone_ms")}
    rate = probe_slowdown(one["copy_ms"], one["copy_alone_ms"], one["ms"])  # only while it ran beside the copy
    mine = own_bytes / (one["alone_ms"] * 1e6)
    copy = float(probe.get("probe_copy_bytes", math.nan)) / (one["copy_alone_ms"] * 1e6)
    if not all(math.isfinite(v) for v in (rate, mine, copy, peak)):
        return math.nan
    return float(rate * shared_speeds(peak, [mine, copy], [mine, copy])[1])


def reference_aggressions(probe: Mapping, peak: float) -> tuple[float, float]:
    """``(copy, polite)``: what each reference co-runner does to the copy beside it (:func:`aggression` of its own
    large probe, ``probe_refcopy_*`` / ``probe_refpolite_*``, its bytes known); NaN where not probed."""
    out = []
    for ref, nbytes in (("refcopy", "probe_copy_bytes"), ("refpolite", "probe_polite_bytes")):
        one = {"probe_large_" + c: float(probe.get(f"probe_{ref}_{c}", math.nan))
               for c in ("ms", "alone_ms", "copy_ms", "copy_alone_ms")}
        out.append(aggression({**one, "probe_copy_bytes": probe.get("probe_copy_bytes", math.nan)},
                              float(probe.get(nbytes, math.nan)), peak))
    return out[0], out[1]


def polite_excess(probe: Mapping, own_bytes: float, peak: float) -> float:
    """The polite probe's slowdown beyond sharing DRAM (:func:`probe_excess` of the ``probe_polite_*`` columns): how
    a workload fares beside a streamer that keeps few requests in flight; NaN without that probe."""
    one = {"probe_" + c: float(probe.get("probe_polite_" + c, math.nan)) for c in ("ms", "alone_ms", "copy_ms",
                                                                                   "copy_alone_ms")}
    if not math.isfinite(one["probe_ms"]):
        return math.nan
    return probe_excess({**one, "probe_copy_bytes": float(probe.get("probe_polite_bytes", math.nan))}, own_bytes, peak)


def polite_weight(aggr: float, refs: tuple[float, float]) -> float:
    """Where a co-runner of aggression ``aggr`` lies between the polite reference (0) and the copy (1), from the
    references' own aggressions ``refs`` = (copy, polite), within [0, 1]; 1 (the copy's) where either is unknown."""
    a_copy, a_polite = refs
    if not all(math.isfinite(v) for v in (aggr, a_copy, a_polite)) or a_copy - a_polite < 0.1:
        return 1.0
    return float(min(max((aggr - a_polite) / (a_copy - a_polite), 0.0), 1.0))


def aggressor_weight(aggr: float, scale: float | None) -> float:
    """How much of a co-runner's DRAM demand drives a neighbour's saturation ramp: ``(aggr - 1) / scale``
    within [0, 1] (:func:`aggression`); 1 (all of it) where ``scale`` is None or the aggression unknown."""
    if scale is None or not math.isfinite(aggr):
        return 1.0
    return float(min(max((aggr - 1.0) / scale, 0.0), 1.0))


def saturation_slowdown(probe: float, others: float, onset: float) -> float:
    """Saturation term: beside others drawing ``others`` of the card's DRAM bandwidth (a fraction), a
    workload is slowed toward its probe's slowdown beyond bandwidth sharing (``probe``,
    :func:`probe_excess`; the prediction multiplies it with the sharing's): none below ``onset``,
    all of it at saturation, linear between (queues fill as DRAM saturates: a memory system full of
    the others' misses delays even L2 hits, which its counted bytes do not say); ``onset``: fitted."""
    if not (math.isfinite(probe) and math.isfinite(onset)) or onset >= 1:
        return 1.0
    ramp = min(max((others - onset) / (1.0 - onset), 0.0), 1.0)
    return 1.0 + (probe - 1.0) * ramp


def saturation_speeds(speed: list[float], demand: list[float], excess: list[float], aggr: list[float],
                      onsets: list[float], peak: float, onset: float, load: str = "others",
                      scale: float | None = None) -> list[float]:
    """Each workload's speed (``speed``: after sharing) divided by its :func:`saturation_slowdown`: its
    probes' ``excess``, ramped by the others' DRAM ``demand`` (GB/s; everyone's by ``load``, each
    co-runner's counted by :func:`aggressor_weight` of its aggression ``aggr`` at ``scale``) over ``peak``
    from its own onset (``onsets``; NaN: the fitted ``onset``)."""
    wd = [d * aggressor_weight(a, scale) for d, a in zip(demand, aggr)]
    return [sp / saturation_slowdown(e, saturation_input(d, d + sum(wd) - w, peak, load),
                                     o if math.isfinite(o) else onset)
            for sp, d, w, e, o in zip(speed, demand, wd, excess, onsets)]


def check_saturation(onset, share: str, load: str, scale, ramp: str) -> None:
    """Refuse settings of the saturation term that do not exist, before any prediction."""
    if onset is not None and not (isinstance(onset, (int, float)) and 0 <= onset < 1):
        raise ValueError(f"saturation_onset must be a fraction in [0, 1) or None, got {onset!r}")
    excess_at([], 0.0, share), saturation_input(0, 0, 1, load)  # each raises on an unknown rule
    if scale is not None and not (isinstance(scale, (int, float)) and 0 < scale <= 4):
        raise ValueError(f"saturation_aggression must be a scale in (0, 4] or None, got {scale!r}")
    if ramp not in SATURATION_RAMPS:
        raise ValueError(f"saturation_ramp must be one of {SATURATION_RAMPS}, got {ramp!r}")


def bytes_at_size(total: float, small: tuple[float, float] | None, k_big: float, n: int) -> float:
    """DRAM bytes per call on ``n`` SMs: ``total`` (counted on the whole device, ``k_big`` SMs) or, with a count
    ``small`` = (SMs, bytes) on a small partition, linear in SMs between the two."""
    if small is None or not math.isfinite(total):
        return total
    k, b = small
    x = min(max((n - k) / (k_big - k), 0.0), 1.0)
    return b + x * (total - b)


PROBES = (("half", "probe_"), ("large", "probe_large_"), ("low", "probe_low_"))


def probe_table(profiles: pd.DataFrame, *, rule: str = "interp") -> pd.DataFrame:
    """Per probed workload and probe (``solo_profile(probe=True)``: half the card, most of it, more beside a copy
    below saturation): its SMs, the copy's DRAM demand alone there (``copy_load``, a fraction of the card's),
    the workload's slowdown and its excess beyond sharing (:func:`probe_excess`), the copy's rate slowdown beside
    it (``copy_slowdown``); and per workload its :func:`aggression` and :func:`probed_onset` (by ``rule``): what
    the predictor's saturation term reads."""
    prof = with_traffic_columns(profiles)
    rows = []
    for name, g in prof.groupby("workload", sort=False):
        r = g.iloc[0]
        peak, cb, k_big = float(r["shared_bandwidth_gbs"]), float(r["probe_copy_bytes"]), float(r[SM_COUNT])
        ks, kb = float(r["small_sm_count"]), float(r["small_dram_bytes"])
        small = (ks, kb) if math.isfinite(ks) and math.isfinite(kb) and ks < k_big else None
        at = lambda n: bytes_at_size(float(r["bytes"]), small, k_big, n)  # noqa: E731
        k_large = float(r["probe_large_sm_count"])
        aggr = aggression(r, at(int(k_large)) if math.isfinite(k_large) else math.nan, peak)
        onset = probed_onset(r, at, peak, k_big, rule)
        for probe, pre in PROBES:
            k = float(r[pre + "sm_count"])
            if not math.isfinite(k):
                continue
            one = {"probe_" + x: float(r[pre + x]) for x in ("ms", "alone_ms", "copy_ms", "copy_alone_ms")}
            rows.append({"workload": name, "probe": probe, "sm_count": int(k), "share": k / k_big,
                         "copy_load": cb / (one["probe_copy_alone_ms"] * 1e6) / peak,
                         "slowdown": one["probe_ms"] / one["probe_alone_ms"],
                         "excess": probe_excess({**one, "probe_copy_bytes": cb}, at(int(k)), peak),
                         "copy_slowdown": probe_slowdown(one["probe_copy_ms"], one["probe_copy_alone_ms"],
                                                         one["probe_ms"]),
                         "aggression": aggr, "probed_onset": onset})
    return pd.DataFrame(rows, columns=["workload", "probe", "sm_count", "share", "copy_load", "slowdown", "excess",
                                       "copy_slowdown", "aggression", "probed_onset"])
