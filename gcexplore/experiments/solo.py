"""Solo profiles: each workload measured once by itself, reusable in every pair it joins.

:func:`solo_profile` times one workload alone on the first partition and on the
remainder of every split (a concurrent-free sweep of the workload beside a copy of
itself, ``alone`` mode only: one layout gives both sizes), adds the card's shared DRAM
bandwidth (:func:`card_bandwidth`, measured once per card and passed on) and the L2
size, and returns profile rows (:data:`gcexplore.analysis.prediction.PROFILE_COLUMNS`) that
:func:`gcexplore.predict` reads. :func:`save_profiles` / :func:`load_profiles` keep them.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..analysis import prediction as model
from ..analysis.summaries import summarize
from ..analysis.tuning import gpu_time_ms
from ..results.io import load, save
from ..workloads.spec import as_workload
from .measure_scaling import scaling
from .overlap import sweep

__all__ = ["card_bandwidth", "load_profiles", "save_profiles", "solo_profile"]

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
    s = summarize(scaling("memory", [32], repeats=repeats, warmup=1, device=device, progress=False))
    return float(s["bandwidth_gbs"].max())


def solo_profile(workload, *, device=0, repeats: int = 6, warmup: int = 1, rounds: int | None = None, sm_counts=None,
                 bytes: float | None = None, working_set_bytes: float | None = None,  # noqa: A002
                 shared_bandwidth_gbs: float | None = None, progress: bool = False):
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
        DRAM bytes per call (default the workload's declared ``bytes``) and its L2 working set.
    shared_bandwidth_gbs : float, optional
        The card's shared DRAM bandwidth; default :func:`card_bandwidth` (measured now:
        measure it once and pass it to every profile of the card).
    progress : bool, default False

    Returns
    -------
    pandas.DataFrame
        Profile rows (:data:`~gcexplore.analysis.prediction.PROFILE_COLUMNS`); ``attrs`` has
        ``kind="solo_profile"``, the card and ``gpu_time_ms`` (the measured repetitions'
        time, for comparison with a sweep's).

    Raises
    ------
    ValueError
        Bad sizes or settings, before any GPU work; a negative ``bytes``.
    """
    for name, v in (("bytes", bytes), ("working_set_bytes", working_set_bytes)):
        if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
            raise ValueError(f"solo_profile: {name} must be a finite number >= 0 or None, got {v!r}")
    wl = as_workload(workload, device=device)
    name = wl.name
    twin = {name: wl, name + _COPY: wl}
    try:
        df = sweep(twin, sm_counts=sm_counts, modes=("alone",), repeats=repeats, warmup=warmup, rounds=rounds,
                   device=device, progress=progress)
    finally:
        if isinstance(workload, str):  # a built-in made here from its name holds device memory
            wl.close()
    peak = shared_bandwidth_gbs if shared_bandwidth_gbs is not None else card_bandwidth(device)
    df.attrs["sm_alignment"] = min(int(k) for k in df["split_sm_count"])  # the smallest valid size
    prof = model.profile_from(df, bytes={name: bytes} if bytes is not None else None,
                              working_set_bytes={name: working_set_bytes} if working_set_bytes is not None else None,
                              shared_bandwidth_gbs=peak, l2_bytes=_l2_bytes(device), rename={name + _COPY: name})
    prof.attrs["gpu_time_ms"] = gpu_time_ms(df)
    return prof


def save_profiles(profiles, path) -> Path:
    """Write profiles (one frame, or a list / dict of them) to one parquet or CSV file."""
    return save(model.check_profiles(profiles), path)


def load_profiles(path):
    """Read profiles written by :func:`save_profiles`; :class:`~gcexplore.analysis.prediction.ProfileError`
    if the file holds something else."""
    return model.check_profiles(load(path))
