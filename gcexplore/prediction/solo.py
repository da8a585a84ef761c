"""Solo profiles: each workload measured once by itself, reusable in every pair it joins.

:func:`solo_profile` times one workload alone on the first partition and on the
remainder of every split (a concurrent-free sweep of the workload beside a copy of
itself, ``alone`` mode only: one layout gives both sizes), adds the card's shared DRAM
bandwidth (:func:`card_bandwidth`, measured once per card and passed on) and the L2
size, counts its DRAM and L2 traffic per call with CUPTI where the loaded CUPTI can
(:mod:`gcexplore.prediction.traffic`; else one sentence and the declared bytes), and
returns profile rows (:data:`gcexplore.prediction.model.PROFILE_COLUMNS` with the traffic
columns of :mod:`gcexplore.prediction.traffic_profile`) that :func:`gcexplore.predict` reads.
:func:`save_profiles` / :func:`load_profiles` keep them.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from . import model as model
from .traffic_profile import MID_SHARE, PROBE_LARGE_SHARE, PROBE_LOW_SHARE, attach_traffic, with_traffic_columns
from ..analysis.summaries import summarize
from ..analysis.tuning import gpu_time_ms
from ..results.io import load, save
from ..schema import identity_name
from ..workloads.spec import as_workload
from ..experiments.measure_scaling import scaling
from ..experiments.overlap import sweep

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["card_bandwidth", "load_profiles", "save_profiles", "solo_profile"]

SM_COUNT = identity_name("sm_count")  # the card's SM count, as every result names it
_COPY = "~"  # suffix of the copy that runs on the remainder


def _l2_bytes(device: int) -> float:
    try:
        from cuda.core import Device

        return float(Device(device).properties.l2_cache_size)
    except Exception:  # an older cuda.core without the property: the model then ignores L2
        return math.nan


def card_bandwidth(device=0, *, repeats: int = 5) -> float:
    """The card's shared DRAM bandwidth in GB/s: the best median of the built-in memory
    kernel (a STREAM triad) on 32 SMs and on the whole device (about 3,050 on an H100)."""
    s = summarize(cast("pd.DataFrame", scaling("memory", [32], repeats=repeats, warmup=1, device=device,
                                               progress=False)))  # trace=False: a frame
    return float(s["bandwidth_gbs"].max())


def _sm_clock_mhz(device: int) -> float:
    try:
        from cuda.core import Device

        return float(Device(device).properties.clock_rate) / 1000.0  # kHz
    except Exception:  # noqa: BLE001 - an older cuda.core: cross-card scaling then assumes equal clocks
        return math.nan


def _traffic(wl, traffic, device: int, small: int, mid: int | None = None):
    """Counted traffic rows, or None with a warning of one sentence where CUPTI cannot count."""
    if traffic is False or traffic is None:
        return None
    if not isinstance(traffic, str):
        return traffic  # measure_traffic rows given by the caller
    from .traffic import TrafficUnavailable, measure_traffic

    try:
        return measure_traffic(wl, sm_counts=(None, small, *([mid] if mid else [])), flush=True, device=device)
    except TrafficUnavailable as e:
        if traffic == "required":
            raise
        warnings.warn(str(e), stacklevel=3)
        return None


def solo_profile(workload, *, device=0, repeats: int = 6, warmup: int = 1, rounds: int | None = None, sm_counts=None,
                 bytes: float | None = None, working_set_bytes: float | None = None,  # noqa: A002
                 shared_bandwidth_gbs: float | None = None, traffic="auto", probe: bool | str = False,
                 progress: bool = False):
    """Measure one workload's solo profile.

    Parameters
    ----------
    workload : workload or str
        A :class:`~gcexplore.workloads.Workload`, a built-in name or ``fn(*, stream)``.
    device : int, default 0
    repeats, warmup, rounds : int, default 6, 1, 2
        Repetitions per size over all rounds (each repetition runs it once on the first
        partition and once on the remainder, one after the other), warm-up per round, and
        rounds (default ``min(5, repeats // 3)``: 2 rounds of 3, each splitting afresh, so
        the profile carries a between-round spread for the predictor's calibration).
    sm_counts : sequence of int, optional
        First-partition sizes (default every valid size; the remainders are the rest).
    bytes, working_set_bytes : float, optional
        DRAM bytes per call and its L2 working set, declared: ``bytes`` overrides the
        counted traffic (default: counted where CUPTI can, else the workload's declared ``bytes``).
    shared_bandwidth_gbs : float, optional
        The card's shared DRAM bandwidth; default :func:`card_bandwidth` (measured now:
        measure it once and pass it to every profile of the card).
    traffic : {"auto", "required", False} or DataFrame, default "auto"
        Count the DRAM and L2 traffic per call with CUPTI
        (:func:`~gcexplore.prediction.traffic.measure_traffic`, on the whole device, on the
        smallest profiled size and the one nearest half the card, back to back and with the L2
        flushed): "auto" falls back
        to the declared bytes with a one-sentence warning where the loaded CUPTI cannot
        count, "required" raises instead, False does not count; or rows measured earlier.
    probe : {False, True, "polite"}, default False
        Also time it beside the built-in copy on the rest of the card, on about half, 0.8 and 0.85 of
        the card (one sweep of three layouts): the ``probe_*`` columns the predictor's saturation term uses.
        "polite" also times it on half the card beside the built-in polite streamer and each reference beside
        the copy (three one-layout sweeps more): the columns ``predict`` reads (``saturation_polite``, default on)
        so that a workload not memory-bound takes less beside a streamer that keeps few requests in flight
        (four H100 runs, batch n5: 430 against 424 of 512 best splits, the worst pair 6.5-8.4% against 8.2-9.3%).
    progress : bool, default False

    Returns
    -------
    pandas.DataFrame
        Profile rows (:data:`~gcexplore.prediction.model.PROFILE_COLUMNS` and the traffic
        columns of :mod:`gcexplore.prediction.traffic_profile`, ``bytes_source`` saying where
        ``bytes`` came from); ``attrs`` has ``kind="solo_profile"``, the card and
        ``gpu_time_ms`` (the measured repetitions' time and the counted calls', for
        comparison with a sweep's).

    Raises
    ------
    ValueError
        Bad sizes or settings, before any GPU work; a negative ``bytes``.
    """
    for name, v in (("bytes", bytes), ("working_set_bytes", working_set_bytes)):
        if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
            raise ValueError(f"solo_profile: {name} must be a finite number >= 0 or None, got {v!r}")
    if probe not in (False, True, "polite"):
        raise ValueError(f"solo_profile: probe must be False, True or 'polite', got {probe!r}")
    if not (traffic in ("auto", "required", False, None) or hasattr(traffic, "columns")):
        raise ValueError(f"solo_profile: traffic must be 'auto', 'required', False or measure_traffic rows, "
                         f"got {traffic!r}")
    wl = as_workload(workload, device=device)
    name = wl.name
    twin = {name: wl, name + _COPY: wl}
    try:
        df = cast("pd.DataFrame", sweep(twin, sm_counts=sm_counts, modes=("alone",), repeats=repeats, warmup=warmup,
                                        rounds=rounds, device=device, progress=progress))  # trace=False: a frame
        sizes = sorted({int(k) for k in df.loc[df["partition"] != "remainder", "sm_count"]})
        total = int(df[SM_COUNT].iloc[0]) if SM_COUNT in df else None
        mid = min(sizes[1:], key=lambda k: abs(k - MID_SHARE * total), default=None) if total else None
        counted = _traffic(wl, traffic, device, sizes[0], mid) if bytes is None else None
        probed = _probe(wl, device, repeats, warmup, sorted({int(k) for k in df["split_sm_count"]}), total,
                        with_polite=probe == "polite") if probe else {}
    finally:
        if isinstance(workload, str):  # a built-in made here from its name holds device memory
            wl.close()
    peak = shared_bandwidth_gbs if shared_bandwidth_gbs is not None else card_bandwidth(device)
    df.attrs["sm_alignment"] = min(int(k) for k in df["split_sm_count"])  # the smallest valid size
    prof = model.profile_from(df, bytes={name: bytes} if bytes is not None else None,
                              working_set_bytes={name: working_set_bytes} if working_set_bytes is not None else None,
                              shared_bandwidth_gbs=peak, l2_bytes=_l2_bytes(device), rename={name + _COPY: name})
    prof["sm_clock_mhz"] = _sm_clock_mhz(device)
    attrs = cast("dict[str, Any]", dict(prof.attrs))  # gcexplore's attrs keys are str (pandas-stubs: Hashable)
    prof = with_traffic_columns(prof)
    if counted is not None and len(counted):
        prof = attach_traffic(prof, counted.assign(workload=name))
    for col, v in probed.items():
        if col.startswith("probe_"):
            prof[col] = v
    prof.attrs.update(attrs, gpu_time_ms=gpu_time_ms(df) + float(
        counted.attrs.get("gpu_time_ms", 0.0) if counted is not None else 0.0) + probed.get("_gpu_ms", 0.0))
    return prof


def _probe(wl, device: int, repeats: int, warmup: int, sizes: list[int], total: int | None = None, *,
           with_polite: bool = False) -> dict:
    """The workload on the valid size nearest half the card, on the one nearest
    :data:`~gcexplore.prediction.traffic_profile.PROBE_LARGE_SHARE` of it and on the one nearest
    :data:`~gcexplore.prediction.traffic_profile.PROBE_LOW_SHARE` (the copy on the rest then draws less than
    DRAM gives), beside the built-in copy on the rest, alone and together (medians; one sweep of those
    layouts): the ``probe_*``, ``probe_large_*`` and ``probe_low_*`` profile columns (a size equal to an
    earlier probe's is not probed again: its columns stay NaN); ``with_polite``: also on half the card beside the
    built-in :func:`~gcexplore.workloads.builtins.polite` streamer (``probe_polite_*``), with the two references'
    own large probes (``probe_refcopy_*``, ``probe_refpolite_*``: what each does to the copy beside it)."""
    from ..workloads.builtins import copy, polite

    total = total or sizes[-1] + sizes[0]  # the card's SMs (a split and its remainder)
    half = min(sizes, key=lambda k: (abs(2 * k - total), k))
    large = min(sizes, key=lambda k: (abs(k - PROBE_LARGE_SHARE * total), -k))
    low = min(sizes, key=lambda k: (abs(k - PROBE_LOW_SHARE * total), -k))
    other = wl.name + "~copy"
    cp = copy(device=device, name=other)
    try:
        df = cast("pd.DataFrame", sweep({wl.name: wl, other: cp}, sm_counts=sorted({half, large, low}),
                                        modes=("alone", "concurrent"), repeats=repeats, warmup=warmup, device=device,
                                        progress=False))  # trace=False: a frame
    finally:
        cp.close()
    if "split_sm_count" not in df:  # one layout
        df = df.assign(split_sm_count=half)
    out = {"probe_copy_bytes": float(cp.bytes or math.nan), "_gpu_ms": gpu_time_ms(df)}
    done = set()
    for prefix, k in (("probe_", half), ("probe_large_", large), ("probe_low_", low)):
        if k in done:  # a size probed already: no second column for it
            continue
        done.add(k)
        out.update(_probe_columns(df[df["split_sm_count"] == k], prefix, k, wl.name, other))
    if not with_polite:
        return out
    pol = polite(device=device, name=wl.name + "~polite")
    try:
        pdf = cast("pd.DataFrame", sweep({wl.name: wl, pol.name: pol}, sm_counts=[half], modes=("alone", "concurrent"),
                                         repeats=repeats, warmup=warmup, device=device, progress=False))  # a frame
        out["_gpu_ms"] += gpu_time_ms(pdf)
        assert pol.bytes is not None  # the polite kernel declares its bytes
        out.update(_probe_columns(pdf, "probe_polite_", half, wl.name, pol.name), probe_polite_bytes=float(pol.bytes))
        refs = _references(device, repeats, warmup, large, pol)
        out["_gpu_ms"] += refs.pop("_gpu_ms")
        out.update(refs)
    finally:
        pol.close()
    return out


def _probe_columns(df, prefix: str, k: int, name: str, other: str) -> dict:
    med = df.groupby(["mode", "workload"])["duration_ms"].median()
    if med.empty:
        return {}
    return {prefix + "sm_count": float(k), prefix + "ms": float(med["concurrent", name]),
            prefix + "alone_ms": float(med["alone", name]), prefix + "copy_ms": float(med["concurrent", other]),
            prefix + "copy_alone_ms": float(med["alone", other])}


def _references(device: int, repeats: int, warmup: int, large: int, pol) -> dict:
    """Each reference co-runner (the copy, the polite streamer) on ``large`` SMs beside the copy on the rest:
    what it does to the copy, as a profiled workload's large probe says it (its aggression)."""
    from ..workloads.builtins import copy

    out = {"_gpu_ms": 0.0}
    for prefix, ref in (("probe_refcopy_", None), ("probe_refpolite_", pol)):
        mine = ref if ref is not None else copy(device=device, name="reference~copy")
        side = copy(device=device, name="reference~side")
        try:
            df = cast("pd.DataFrame", sweep({mine.name: mine, side.name: side}, sm_counts=[large],
                                            modes=("alone", "concurrent"), repeats=repeats, warmup=warmup,
                                            device=device, progress=False))  # trace=False: a frame
        finally:
            side.close()
            if ref is None:
                mine.close()
        out["_gpu_ms"] += gpu_time_ms(df)
        out.update(_probe_columns(df, prefix, large, mine.name, side.name))
    return out


def save_profiles(profiles, path) -> Path:
    """Write profiles (one frame, or a list / dict of them) to one parquet or CSV file."""
    return save(model.check_profiles(profiles), path)


def load_profiles(path):
    """Read profiles written by :func:`save_profiles`; :class:`~gcexplore.prediction.model.ProfileError`
    if the file holds something else."""
    return model.check_profiles(load(path))
