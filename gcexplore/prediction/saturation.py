"""How workloads sharing DRAM slow each other, and what the probes beside the reference co-runners say.

:func:`shared_speeds` divides saturated DRAM (the prediction's fluid model) and :func:`latency_slowdown` is
loaded latency below saturation. A probed profile (``solo_profile(probe=True)``, the ``probe_*`` columns of
:data:`~.traffic_profile.PROBE_COLUMNS`) times the workload beside the built-in copy (which saturates DRAM with
many requests in flight) on several shares of the card, and with ``probe="polite"`` beside the built-in polite
streamer too (few requests in flight): :func:`probe_excess` is the slowdown there beyond sharing,
:func:`aggression` what the workload does to the copy, :func:`polite_excess` and :func:`polite_weight` place a
co-runner between the two references, and :func:`saturation_speeds` applies it all; :func:`probe_table` lists it
per workload.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from .traffic_profile import SM_COUNT, with_traffic_columns

__all__ = ["PROBES", "PROBE_MAX_SLOWDOWN", "SATURATION_LOADS", "SATURATION_RAMPS", "SHARE_RULES", "TIMES", "aggression",
           "aggressor_weight", "bytes_at_size", "check_saturation", "counted_at", "excess_at", "latency_slowdown",
           "polite_excess", "polite_weight", "probe_excess", "probe_points", "probe_slowdown", "probe_table",
           "probed_onset", "reference_aggressions", "saturation_input", "saturation_slowdown", "saturation_speeds",
           "shared_speeds"]


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


#: A probe's four medians: the workload alone and beside the co-runner, the co-runner alone and beside it.
TIMES = ("ms", "alone_ms", "copy_ms", "copy_alone_ms")


def _times(probe: Mapping, prefix: str, to: str = "probe_") -> dict:
    """One probe's :data:`TIMES` (columns ``prefix`` + each) under the names ``to`` + each."""
    return {to + c: float(probe.get(prefix + c, math.nan)) for c in TIMES}


def probe_points(probe: Mapping, bytes_at, peak: float, total: float) -> list[tuple[float, float]]:
    """``(share of the card's SMs, excess)`` of each probe in a profile row (:data:`PROBE_COLUMNS`), by
    share; ``bytes_at(k)``: the workload's DRAM bytes per call on k SMs; ``total``: the card's SMs."""
    out = []
    for pre in ("probe_", "probe_large_"):
        k = float(probe.get(pre + "sm_count", math.nan))
        if not (math.isfinite(k) and k > 0 and total > 0):
            continue
        e = probe_excess(_times(probe, pre) | {"probe_copy_bytes": probe.get("probe_copy_bytes", math.nan)},
                         bytes_at(int(k)), peak)
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
    one = _times(probe, "probe_low_")
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
    one = _times(probe, "probe_large_", "")
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
        out.append(aggression({**_times(probe, f"probe_{ref}_", "probe_large_"),
                               "probe_copy_bytes": probe.get("probe_copy_bytes", math.nan)},
                              float(probe.get(nbytes, math.nan)), peak))
    return out[0], out[1]


def polite_excess(probe: Mapping, bytes_at, peak: float, bound: str = "") -> float:
    """The polite probe's slowdown beyond sharing DRAM (:func:`probe_excess` of the ``probe_polite_*`` columns): how
    a workload fares beside a streamer that keeps few requests in flight; NaN without that probe, or for a
    memory-bound workload (``bound``, :func:`~.traffic_profile.classify`'s): it contends for bandwidth itself, and
    what two streamers do to each other is not what the polite reference does to it (measured H100, batch m2: CuPy's
    scale beside its elementwise add 1.65x slower than alone, beside the polite streamer 1.21x beyond sharing).
    ``bytes_at(k)``: the workload's DRAM bytes per call on k SMs."""
    if bound == "memory":
        return math.nan
    one = _times(probe, "probe_polite_")
    k = float(probe.get("probe_polite_sm_count", math.nan))
    if not (math.isfinite(one["probe_ms"]) and math.isfinite(k)):
        return math.nan
    nbytes = float(probe.get("probe_polite_bytes", math.nan))
    return probe_excess({**one, "probe_copy_bytes": nbytes}, bytes_at(int(k)), peak)


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
                      scale: float | None = None, polite: list[float] | None = None,
                      refs: list[tuple[float, float]] | None = None) -> list[float]:
    """Each workload's speed (``speed``: after sharing) divided by its :func:`saturation_slowdown`: its
    probes' ``excess``, ramped by the others' DRAM ``demand`` (GB/s; everyone's by ``load``, each
    co-runner's counted by :func:`aggressor_weight` of its aggression ``aggr`` at ``scale``) over ``peak``
    from its own onset (``onsets``; NaN: the fitted ``onset``). With ``polite`` (each one's
    :func:`polite_excess`, NaN: not probed) the excess lies between that and the copy's, by where the others
    lie between the references (:func:`polite_weight` of their aggression and their ``refs``, each counted by
    its demand): beside streamers that keep few requests in flight a workload takes what it took beside the
    polite streamer, not what it took beside the copy."""
    if polite is not None:
        assert refs is not None  # given with polite
        pw = [polite_weight(a, r) for a, r in zip(aggr, refs)]
        excess = [_between(e, p, [(d, w) for k, (d, w) in enumerate(zip(demand, pw)) if k != j])
                  for j, (e, p) in enumerate(zip(excess, polite))]
    wd = [d * aggressor_weight(a, scale) for d, a in zip(demand, aggr)]
    return [sp / saturation_slowdown(e, saturation_input(d, d + sum(wd) - w, peak, load),
                                     o if math.isfinite(o) else onset)
            for sp, d, w, e, o in zip(speed, demand, wd, excess, onsets)]


def _between(copy_excess: float, polite: float, others: list[tuple[float, float]]) -> float:
    """The excess beside ``others`` ((demand, polite weight) each): the polite probe's at weight 0, the copy's at 1."""
    if not (math.isfinite(polite) and math.isfinite(copy_excess)):
        return copy_excess
    od = sum(d for d, _ in others)
    w = sum(d * x for d, x in others) / od if od > 0 else 1.0
    return polite + (copy_excess - polite) * w


def check_saturation(onset, share: str, load: str, scale, ramp: str, polite: bool = False) -> None:
    """Refuse settings of the saturation term that do not exist, before any prediction."""
    if not isinstance(polite, bool):
        raise ValueError(f"saturation_polite must be True or False, got {polite!r}")
    if onset is not None and not (isinstance(onset, (int, float)) and 0 <= onset < 1):
        raise ValueError(f"saturation_onset must be a fraction in [0, 1) or None, got {onset!r}")
    excess_at([], 0.0, share), saturation_input(0, 0, 1, load)  # each raises on an unknown rule
    if scale is not None and not (isinstance(scale, (int, float)) and 0 < scale <= 4):
        raise ValueError(f"saturation_aggression must be a scale in (0, 4] or None, got {scale!r}")
    if ramp not in SATURATION_RAMPS:
        raise ValueError(f"saturation_ramp must be one of {SATURATION_RAMPS}, got {ramp!r}")


def bytes_at_size(total: float, small: tuple[float, float] | None, k_big: float, n: int,
                  mid: tuple[float, float] | None = None) -> float:
    """DRAM bytes per call on ``n`` SMs: ``total`` (counted on the whole device, ``k_big`` SMs) or, with counts
    ``small`` (and ``mid``) = (SMs, bytes) on smaller partitions, piecewise linear in SMs through them (a GEMM's
    count falls steeply, then flattens: measured H100, 5.19 GB on 16 SMs, 2.35 on 64, 1.39 on 132, so a line
    through the ends alone says 3.62 GB on 64)."""
    if small is None or not math.isfinite(total):
        return total
    pts: list[tuple[float, float]] = sorted({small, *([mid] if mid is not None and small[0] < mid[0] < k_big else []),
                                             (k_big, total)})
    return float(np.interp(n, [k for k, _ in pts], [b for _, b in pts]))


def counted_at(row, which: str, k_big: float) -> tuple[float, float] | None:
    """``(SMs, bytes)`` counted on the ``which`` ("small" or "mid") partition of a profile row; None where not."""
    k, b = float(row.get(f"{which}_sm_count", math.nan)), float(row.get(f"{which}_dram_bytes", math.nan))
    return (k, b) if math.isfinite(k) and math.isfinite(b) and k < k_big else None


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
        r: Any = g.iloc[0]  # a row passed on as a mapping of its columns
        peak, cb, k_big = float(r["shared_bandwidth_gbs"]), float(r["probe_copy_bytes"]), float(r[SM_COUNT])
        small, mid = (counted_at(r, which, k_big) for which in ("small", "mid"))
        at = lambda n: bytes_at_size(float(r["bytes"]), small, k_big, n, mid)  # noqa: E731
        k_large = float(r["probe_large_sm_count"])
        aggr = aggression(r, at(int(k_large)) if math.isfinite(k_large) else math.nan, peak)
        onset = probed_onset(r, at, peak, k_big, rule)
        for probe, pre in PROBES:
            k = float(r[pre + "sm_count"])
            if not math.isfinite(k):
                continue
            one = _times(r, pre)
            rows.append({"workload": name, "probe": probe, "sm_count": int(k), "share": k / k_big,
                         "copy_load": cb / (one["probe_copy_alone_ms"] * 1e6) / peak,
                         "slowdown": one["probe_ms"] / one["probe_alone_ms"],
                         "excess": probe_excess({**one, "probe_copy_bytes": cb}, at(int(k)), peak),
                         "copy_slowdown": probe_slowdown(one["probe_copy_ms"], one["probe_copy_alone_ms"],
                                                         one["probe_ms"]),
                         "aggression": aggr, "probed_onset": onset})
    return pd.DataFrame(rows, columns=["workload", "probe", "sm_count", "share", "copy_load", "slowdown", "excess",
                                       "copy_slowdown", "aggression", "probed_onset"])
