"""What a solo profile knows about a workload's memory traffic, and where each number came from.

A profile's ``bytes`` (DRAM bytes per call) is *measured* (CUPTI counters,
:func:`gcexplore.prediction.traffic.measure_traffic`), *declared* (the workload's
``bytes=``, or ``solo_profile(bytes=...)``, which overrides a measurement), or *missing*
(the model then assumes none for its point, and DRAM saturated for its interval's top).
:func:`attach_traffic` puts counted traffic into profile rows; :func:`classify` says
whether a workload is compute-, memory- or latency-bound; :func:`profile_sources` lists
the source of every number; :func:`scale_profiles` moves profiles to another card;
:func:`~.saturation.shared_speeds` and :func:`~.saturation.latency_slowdown` are how traffic slows workloads that share
DRAM (the prediction's fluid model).

Traffic columns (:data:`TRAFFIC_PROFILE_COLUMNS`, optional in a profile: older profiles
get them filled by :func:`with_traffic_columns`):

- ``bytes_source``: "measured", "declared" or "missing" (the source of ``bytes``);
- ``dram_read_bytes`` / ``dram_write_bytes``: counted per call on the whole device;
- ``dram_cold_bytes``: counted with the L2 emptied before each call; what exceeds
  ``bytes`` is re-read from L2 across calls, which a neighbour can evict;
- ``l2_traffic_bytes``: L2 (LTS) traffic per call;
- ``small_dram_bytes`` at ``small_sm_count``: the same count on a small partition, ``mid_dram_bytes`` at
  ``mid_sm_count`` on about half the card (where counted: between them the bytes are piecewise linear in SMs);
- ``achieved_gbs``: DRAM GB/s of one call on the whole device;
- ``bound`` / ``bound_source``: :func:`classify`'s answer and what it rested on;
- ``sm_clock_mhz``: the card's SM clock when profiled (cross-card scaling);
- ``probe_sm_count``, ``probe_ms`` / ``probe_alone_ms`` (:data:`PROBE_COLUMNS`): its median
  duration on about half the card beside the built-in copy on the rest (which saturates DRAM) /
  alone there, and the copy's (``probe_copy_ms`` / ``probe_copy_alone_ms``; its bytes per call
  ``probe_copy_bytes``): how much a saturated memory system slows it (:func:`~.saturation.probe_excess`,
  :func:`~.saturation.saturation_slowdown`); ``probe_large_*`` the same with the workload on most of the card
  (the copy on the rest still saturates DRAM), ``probe_low_*`` on more (the copy on the rest draws
  about 0.64 of DRAM's bandwidth: below saturation);
- ``probe_polite_*``: the same on half the card beside the built-in polite streamer (one 4-byte element a
  thread: few requests in flight), its bytes per call ``probe_polite_bytes``; ``probe_refcopy_*`` /
  ``probe_refpolite_*``: the copy and that streamer each on most of the card beside the copy on the rest, so
  that what every co-runner does to the copy (:func:`~.saturation.aggression`) is placed between the two references';
- ``requested_sm_count``: the size, so that :func:`gcexplore.summarize` reads a profile as
  the scaling it is (alone times per size).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from .._checks import MAX_BYTES, MAX_GBS, MAX_MS, MAX_SMS, Column, check_columns
from ..results.io import bare
from ..schema import identity_name

SM_COUNT = identity_name("sm_count")  # the card's SM count, as every result names it

__all__ = ["PROFILE_NUMBERS", "TRAFFIC_NUMBERS", "check_profile_numbers", "check_traffic_numbers",
           "BOUNDS", "CROSS_CARD_ERROR", "MEMORY_BOUND_SHARE", "MID_SHARE", "POLITE_COLUMNS", "PROBE_COLUMNS",
           "PROBE_LARGE_SHARE", "PROBE_LOW_SHARE", "SCALES_SHARE", "TRAFFIC_PROFILE_COLUMNS", "attach_traffic",
           "card_of", "classify", "cross_card_margins", "profile_sources", "scale_profiles", "scaling_error",
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
#: Traffic is also counted on the size nearest this share of the card (64 of 132 SMs on an H100): a GEMM's bytes
#: per call fall steeply with SMs, then flatten, so a line between the small count and the card's misses the middle.
MID_SHARE = 0.5
TRAFFIC_PROFILE_COLUMNS = ["bytes_source", "dram_read_bytes", "dram_write_bytes", "dram_cold_bytes",
                           "l2_traffic_bytes", "small_dram_bytes", "small_sm_count", "mid_dram_bytes", "mid_sm_count",
                           "achieved_gbs", "bound", "bound_source", "sm_clock_mhz", "requested_sm_count",
                           *PROBE_COLUMNS]
BOUNDS = ("memory", "compute", "latency")
#: A workload drawing at least this share of the card's shared DRAM bandwidth alone is memory-bound.
MEMORY_BOUND_SHARE = 0.5
#: One that gains at least this share of linear speed-up from the small partition to the whole
#: device (and is not memory-bound) is compute-bound; one that gains less is latency-bound.
SCALES_SHARE = 0.5
_TEXT = {"bytes_source", "bound", "bound_source"}


_SMS = Column("SMs", integer=True, positive=True, high=MAX_SMS)
_MS = Column("ms", positive=True, high=MAX_MS)
_BYTES = Column("bytes per call", high=MAX_BYTES, missing=True)
#: What each numeric column of a solo profile may hold (:func:`check_profile_numbers`): the model reads every one
#: of them, so a NaN where a number is needed, an infinity, a negative or an absurd value would move the predicted
#: best split silently.
PROFILE_NUMBERS = {
    "sm_count": _SMS, "rep": Column("repetitions", integer=True, high=1e6), "duration_ms": _MS,
    "start_ms": Column("ms", high=MAX_MS, missing=True), "bytes": _BYTES, "working_set_bytes": _BYTES,
    "flops": Column("flops per call", high=1e21, missing=True),
    "shared_bandwidth_gbs": Column("GB/s", positive=True, high=MAX_GBS, missing=True),
    "l2_bytes": Column("bytes of L2", positive=True, high=2.0 ** 36, missing=True),
    SM_COUNT: Column("SMs", integer=True, positive=True, high=MAX_SMS, missing=True),
    "sm_alignment": Column("SMs", integer=True, positive=True, high=MAX_SMS, missing=True),
    **{c: _BYTES for c in ("dram_read_bytes", "dram_write_bytes", "dram_cold_bytes", "l2_traffic_bytes",
                           "small_dram_bytes", "mid_dram_bytes", "probe_copy_bytes", "probe_polite_bytes")},
    **{c: Column("SMs", integer=True, positive=True, high=MAX_SMS, missing=True)
       for c in ("small_sm_count", "mid_sm_count", "requested_sm_count",
                 *(c for c in PROBE_COLUMNS if c.endswith("sm_count")))},
    **{c: Column("ms", positive=True, high=MAX_MS, missing=True) for c in PROBE_COLUMNS if c.endswith("_ms")},
    "achieved_gbs": Column("GB/s", high=MAX_GBS, missing=True),
    "sm_clock_mhz": Column("MHz", positive=True, high=1e4, missing=True),
}
#: What each numeric column of :func:`~gcexplore.prediction.traffic.measure_traffic` rows may hold
#: (:func:`check_traffic_numbers`; a count CUPTI could not make is NaN and leaves the profile's bytes).
TRAFFIC_NUMBERS = {"sm_count": _SMS, "dram_read_bytes": _BYTES, "dram_write_bytes": _BYTES,
                   "l2_bytes": _BYTES, "calls": Column("calls", integer=True, positive=True, high=1e9, missing=True),
                   "duration_ms": Column("ms", positive=True, high=MAX_MS, missing=True),
                   "achieved_gbs": Column("GB/s", high=MAX_GBS, missing=True),
                   "peak_gbs": Column("GB/s", high=MAX_GBS, missing=True)}


def check_profile_numbers(df: pd.DataFrame, where: str = "solo profile") -> None:
    """ValueError naming the first numeric column of a profile (:data:`PROFILE_NUMBERS`) holding a value no
    measurement gives (NaN where a number is needed, infinite, negative, absurd, fractional SMs, not numeric)."""
    check_columns(df, PROFILE_NUMBERS, where)


def check_traffic_numbers(df: pd.DataFrame, where: str = "traffic rows") -> None:
    """As :func:`check_profile_numbers` for ``measure_traffic`` rows (:data:`TRAFFIC_NUMBERS`); ``flushed`` must
    be true or false, and the columns attach_traffic reads must be there."""
    need = ["workload", "sm_count", "flushed", "dram_read_bytes", "dram_write_bytes", "l2_bytes"]
    if not isinstance(df, pd.DataFrame) or (missing := [c for c in need if c not in df.columns]):
        raise ValueError(f"{where}: measure_traffic rows need the columns {need}; missing "
                         f"{missing if isinstance(df, pd.DataFrame) else type(df).__name__}")
    check_columns(df, TRAFFIC_NUMBERS, where)
    if not pd.api.types.is_bool_dtype(df["flushed"]):
        raise ValueError(f"{where}: column 'flushed' has dtype {df['flushed'].dtype}; valid: True or False (whether "
                         "the L2 was emptied before each call)")


_NEEDED = ("workload", "sm_count", "duration_ms", "bytes", "working_set_bytes", "shared_bandwidth_gbs", "l2_bytes",
           "device_name", SM_COUNT)


def _require(df, where: str) -> pd.DataFrame:
    """Profile rows (as :func:`gcexplore.prediction.model.check_profiles` makes them); ValueError if not."""
    if not isinstance(df, pd.DataFrame) or df.empty or not set(_NEEDED) <= set(df.columns):
        have = sorted(df.columns) if isinstance(df, pd.DataFrame) else type(df).__name__
        raise ValueError(f"{where} needs solo profile rows (gcexplore.solo_profile) with columns {list(_NEEDED)}; "
                         f"got {have}")
    return df


def with_traffic_columns(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every traffic column present: missing numbers NaN, ``bytes_source`` from
    whether ``bytes`` is there ("declared" or "missing"), the classification recomputed."""
    out = bare(df).copy()  # attrs set once, at the end (see bare)
    for col in TRAFFIC_PROFILE_COLUMNS:
        if col not in out.columns:
            out[col] = "" if col in _TEXT else math.nan
    out["requested_sm_count"] = out["sm_count"]  # alone times per size: summarize reads a profile as a scaling
    b = out["bytes"].to_numpy(dtype=float)
    src = out["bytes_source"].astype(str).to_numpy()
    out["bytes_source"] = np.where(np.isin(src, ("measured", "declared", "missing")), src,
                                   np.where(np.isfinite(b), "declared", "missing"))
    out = _with_bounds(out)
    out.attrs.update(df.attrs)
    return out


def _whole_times(rows: pd.DataFrame) -> pd.Series:
    return rows.groupby("sm_count")["duration_ms"].median().sort_index()


def classify(rows: pd.DataFrame, times: pd.Series | None = None) -> tuple[str, str]:
    """``(bound, source)`` of one workload's profile rows.

    Memory-bound when its DRAM GB/s on the largest profiled partition reaches
    :data:`MEMORY_BOUND_SHARE` of the card's shared bandwidth; else compute-bound when it
    gains at least :data:`SCALES_SHARE` of a linear speed-up from its smallest to its
    largest profiled partition; else latency-bound. ``source`` says what it rested on:
    "measured" (counted bytes and measured times), "declared" (declared bytes), or
    "assumed" (no bytes: taken as not memory-bound). ``times``: its median per size, where known.
    """
    times = _whole_times(rows) if times is None else times
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
    per = {}
    medians = df.groupby(["workload", "sm_count"], sort=True)["duration_ms"].median()  # every workload's, at once
    for w, rows in df.groupby("workload", sort=False):
        b, times = float(rows["bytes"].iloc[0]), medians.loc[w]
        per[w] = (*classify(rows, times), b / (times.iloc[-1] * 1e6) if math.isfinite(b) else math.nan)
    keys = df["workload"].astype(object)
    has = keys.isin(list(per))
    for i, col in enumerate(("bound", "bound_source", "achieved_gbs")):  # one write per column, not per workload
        new = keys.map({w: v[i] for w, v in per.items()})
        df[col] = new.where(has, df[col]).astype(df[col].dtype) if col in df.columns else new
    return df


def attach_traffic(profiles: pd.DataFrame, traffic: pd.DataFrame, *, declared: Iterable[str] = ()) -> pd.DataFrame:
    """Profiles with counted traffic: ``bytes`` becomes the measured DRAM bytes per call.

    Parameters
    ----------
    profiles : pandas.DataFrame
        Solo profile rows (:func:`gcexplore.solo_profile`).
    traffic : pandas.DataFrame
        :func:`~gcexplore.prediction.traffic.measure_traffic` rows (any workloads; those
        without a profile are ignored, profiles without traffic keep their bytes).
    declared : iterable of str
        Workloads whose declared bytes override the measurement (``solo_profile(bytes=)``).
    """
    out = with_traffic_columns(_require(profiles, "attach_traffic"))
    check_profile_numbers(out, "attach_traffic: the profiles")
    check_traffic_numbers(traffic, "attach_traffic: the traffic rows")
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
        if len(whole) > 2:  # the partition nearest MID_SHARE of the card between them
            inner = whole.iloc[1:-1]
            gap = np.abs(inner["sm_count"].to_numpy(dtype=float) - MID_SHARE * big["sm_count"])
            mid = inner.iloc[int(np.argmin(gap))]
            out.loc[rows, "mid_dram_bytes"] = float(mid["dram_read_bytes"] + mid["dram_write_bytes"])
            out.loc[rows, "mid_sm_count"] = int(mid["sm_count"])
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
        f"{'slow' if faster else 'fast'} side toward a card with {'more' if faster else 'less'} bandwidth: "
        f"the interval's "
        f"{'upper' if faster else 'lower'} end is widened by that")
