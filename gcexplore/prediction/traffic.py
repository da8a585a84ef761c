"""Measured memory traffic of one workload per call: DRAM read and write bytes and L2 traffic.

A user does not know how many bytes a cuFFT plan, a radix sort or a cuDNN convolution
moves, and should not have to: the card counts them. :func:`measure_traffic` runs a
workload alone, ``calls`` times back to back on a partition (the whole device, or a
green context of ``k`` SMs), while CUPTI's PM sampler reads device-wide counters every
``interval_us``; the samples inside the run, summed and divided by the calls, are the
bytes per call. cupti-python 13.4 has no range profiler API (only ``pm_sampling`` and
``profiler_host``), so sampling is the way: counters of the ``.sum`` kind add up over
contiguous samples; rates (``.per_second``) are integrated over each sample's span.

``flush=True`` also measures with the L2 emptied before each call (a copy of twice the
L2 size between calls, its own traffic measured alone and taken off): the difference
to the back-to-back bytes is what the workload re-reads from L2 across calls, which a
neighbour's traffic can evict (the model's L2 contention).

Counter sets (:data:`METRIC_SETS`) are tried in order; the first that CUPTI configures
is used, and the result says which. Where the loaded CUPTI cannot count, one sentence
(:class:`TrafficUnavailable`) says why, and :func:`gcexplore.solo_profile` falls back
to the declared bytes. Counters are device-wide: nothing else may run on the card.

:func:`traffic_from_samples` (pure) turns samples into bytes per call and is tested on
synthetic samples.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from ..device.driver import UnsupportedError

__all__ = ["METRIC_SETS", "TRAFFIC_COLUMNS", "TrafficUnavailable", "counters_refusal", "measure_traffic",
           "traffic_from_samples", "traffic_refusal"]

#: Counter sets, tried in this order: DRAM read / write bytes, then L2 traffic where the set has it.
METRIC_SETS = {
    "dram_l2": ("dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum"),
    "dram_l2_sectors": ("dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_sectors.sum"),
    "dram": ("dram__bytes_read.sum", "dram__bytes_write.sum"),
    # the counters of pm.py's verified "dram_bytes" set, integrated over each sample
    "dram_rate": ("dram__bytes_read.sum.per_second", "dram__bytes_write.sum.per_second"),
}
TRAFFIC_COLUMNS = ["workload", "sm_count", "flushed", "calls", "duration_ms", "dram_read_bytes", "dram_write_bytes",
                   "l2_bytes", "achieved_gbs", "peak_gbs", "dram_gbs_deciles", "l2_gbs_deciles", "samples", "decoded",
                   "window", "metric_set", "source"]
_ROLE = {"dram__bytes_read": "dram_read_bytes", "dram__bytes_write": "dram_write_bytes", "lts__t_bytes": "l2_bytes",
         "lts__t_sectors": "l2_bytes"}
_SECTOR = 32  # bytes per L2 sector
_BUFFER_BYTES = 128 << 20


class TrafficUnavailable(UnsupportedError):
    """The loaded CUPTI cannot count memory traffic here; the message says why in one sentence."""


def traffic_refusal(reason: str) -> str:
    """The one sentence that says the counters are unavailable and what happens instead."""
    return (f"measured DRAM and L2 traffic needs CUPTI's PM sampler (cupti-python 13.4 with nvidia-cuda-cupti "
            f"13.4), which cannot count here ({reason}); the profile uses the declared bytes instead, or none")


# ---------------------------------------------------------------------------
# Samples -> bytes per call (pure)
# ---------------------------------------------------------------------------


def traffic_from_samples(starts, ends, values, metrics: Sequence[str], t0: int, t1: int, calls: int) -> dict:
    """Bytes per call from PM samples (ns on CUPTI's clock) over the run ``[t0, t1]``.

    A sample counts in proportion to its overlap with the run. Where no sample overlaps
    but the samples span about as long as the run (a clock mismatch), every sample counts
    and ``window`` says so; otherwise nothing is known (NaN). Returns
    ``dram_read_bytes``, ``dram_write_bytes``, ``l2_bytes`` (NaN without such a counter),
    ``peak_gbs`` (p90 of the DRAM GB/s of the samples inside), ``dram_gbs_deciles`` and
    ``l2_gbs_deciles`` (p10, p20, ..., p90 of the samples' GB/s, weighted by their span: how
    the draw varies over a call, its phases; empty where unknown), ``samples`` and ``window``.
    """
    if calls <= 0:
        raise ValueError(f"calls must be positive, got {calls!r}")
    starts = np.asarray(starts, dtype=float)
    ends = np.asarray(ends, dtype=float)
    vals = np.asarray(values, dtype=float).reshape(len(starts), len(metrics))
    ok = (ends > starts) & np.all(np.isfinite(vals), axis=1)
    starts, ends, vals = starts[ok], ends[ok], vals[ok]
    span = ends - starts
    frac = np.clip((np.minimum(ends, t1) - np.maximum(starts, t0)) / np.where(span > 0, span, 1), 0, 1)
    window = "run"
    if len(frac) and not (frac > 0).any():
        # none inside: another clock? Only where the samples span about this run (not an older one's too)
        if ends.max() - starts.min() <= 3 * (t1 - t0) + 2 * float(np.median(span)):
            frac, window = np.ones_like(frac), "all samples (none inside the run's CUPTI timestamps)"
        else:
            return {"dram_read_bytes": math.nan, "dram_write_bytes": math.nan, "l2_bytes": math.nan,
                    "peak_gbs": math.nan, "dram_gbs_deciles": [], "l2_gbs_deciles": [], "samples": 0,
                    "window": "no sample inside the run"}
    out: dict[str, Any] = {"dram_read_bytes": math.nan, "dram_write_bytes": math.nan, "l2_bytes": math.nan}
    if not len(starts):  # nothing was sampled: nothing is known (never zero bytes)
        return {**out, "peak_gbs": math.nan, "dram_gbs_deciles": [], "l2_gbs_deciles": [], "samples": 0,
                "window": "no samples"}
    dram_per_sample = np.zeros(len(starts))
    l2_per_sample = np.full(len(starts), math.nan)
    for i, m in enumerate(metrics):
        base = m.split(".")[0]
        role = _ROLE.get(base)
        if role is None:
            continue
        v = vals[:, i] * (span / 1e9 if m.endswith(".per_second") else 1.0)
        if base == "lts__t_sectors":
            v = v * _SECTOR
        out[role] = float(np.sum(v * frac)) / calls
        if role.startswith("dram"):
            dram_per_sample += v
        else:
            l2_per_sample = v
    inside = frac > 0.5
    rates = dram_per_sample[inside] / span[inside] if inside.any() else np.array([])
    out["peak_gbs"] = float(np.quantile(rates, 0.9)) if len(rates) else math.nan
    out["dram_gbs_deciles"] = _deciles(rates, span[inside])
    out["l2_gbs_deciles"] = _deciles(l2_per_sample[inside] / span[inside], span[inside]) if inside.any() else []
    out["samples"] = int((frac > 0).sum())
    out["window"] = window
    return out


def _deciles(rates: np.ndarray, weights: np.ndarray) -> list[float]:
    """p10..p90 of ``rates`` (GB/s), each sample weighted by its span; [] where none is finite."""
    ok = np.isfinite(rates)
    if not ok.any():
        return []
    order = np.argsort(rates[ok])
    r, w = rates[ok][order], weights[ok][order]
    cum = (np.cumsum(w) - w / 2) / np.sum(w)
    return [float(v) for v in np.interp(np.arange(1, 10) / 10, cum, r)]


# ---------------------------------------------------------------------------
# On the GPU
# ---------------------------------------------------------------------------


def counters_refusal() -> str | None:
    """None where the loaded CUPTI offers the PM sampler; else the one sentence that says why not.

    Call it with the driver loaded (:func:`gcexplore.device_info` first): the CUPTI
    version is asked of the loaded library.
    """
    from ..trace.collector import preload_cupti

    preload_cupti()
    try:
        from cupti import cupti
        from cupti import pm_sampling  # noqa: F401 - cupti-python 13.3+
    except (ImportError, OSError) as e:
        return traffic_refusal(f"cupti-python with pm_sampling cannot be imported: {e}")
    from ..trace.features import describe, refusal

    refused = refusal("pm_sampling", describe(cupti))  # an older CUPTI gave ERROR_INVALID_PARAMETER
    return traffic_refusal(refused.rstrip(".")) if refused else None


class _Sampler:
    """A configured PM sampling collector with the first counter set CUPTI accepts."""

    def __init__(self, device: int, metric_set: str | None, interval_us: float):
        refused = counters_refusal()
        if refused:  # before CUPTI's profiler is touched
            raise TrafficUnavailable(refused)
        from cupti import cupti, pm_sampling

        self.cupti = cupti
        self.col = pm_sampling.Collector(device)
        try:
            self.col.enable()
        except Exception as e:  # noqa: BLE001 - any refusal becomes one sentence
            raise TrafficUnavailable(traffic_refusal(f"enabling PM sampling failed: {type(e).__name__}: {e}")) from e
        names = [metric_set] if metric_set else list(METRIC_SETS)
        errors = []
        for name in names:
            if name not in METRIC_SETS:
                self.close()
                raise ValueError(f"metric_set must be one of {', '.join(METRIC_SETS)}, got {name!r}")
            try:
                self.col.configure(metrics=list(METRIC_SETS[name]), sampling_interval=int(interval_us * 1000),
                                   hardware_buffer_size=_BUFFER_BYTES)
            except Exception as e:  # noqa: BLE001 - the next set may work
                errors.append(f"{name}: {type(e).__name__}: {e}")
                continue
            self.name, self.metrics = name, list(METRIC_SETS[name])
            self.refused = errors
            return
        self.close()
        raise TrafficUnavailable(traffic_refusal("no counter set was accepted: " + "; ".join(errors)))

    def run(self, fn, stream, calls: int, interval_us: float) -> dict:
        self.col.start()
        try:
            stream.sync()
            t0 = int(self.cupti.get_timestamp())
            w0 = time.perf_counter()
            for _ in range(calls):
                fn(stream=stream)
            stream.sync()
            wall = time.perf_counter() - w0
            t1 = int(self.cupti.get_timestamp())
        finally:
            self.col.stop()
        gpu_ns = max(t1 - t0, 1)
        data = self.col.decode(max_samples=int(gpu_ns / (interval_us * 1000)) + 4096)
        # cupti's CounterData.__getitem__ is unannotated (a slice gives a list); iterating it yields Samples
        s = [(x.start_timestamp, x.end_timestamp, list(x.metric_values)) for x in data]  # pyright: ignore[reportAttributeAccessIssue]
        out = traffic_from_samples([a for a, _, _ in s], [b for _, b, _ in s], [v for _, _, v in s] or
                                   np.zeros((0, len(self.metrics))), self.metrics, t0, t1, calls)
        out["duration_ms"] = (gpu_ns / 1e6 if out["window"] == "run" else wall * 1e3) / calls
        out["decoded"] = len(s)
        return out

    def close(self) -> None:
        try:
            self.col.disable()
        except Exception:  # noqa: BLE001, S110 - closing what may not have opened
            pass


def _calls_for(fn, stream, min_ms: float) -> int:
    """Calls that take at least ``min_ms`` (timed once on the host after a warm-up)."""
    fn(stream=stream)
    stream.sync()
    t = time.perf_counter()
    for _ in range(2):
        fn(stream=stream)
    stream.sync()
    per = max((time.perf_counter() - t) / 2 * 1e3, 1e-3)
    return int(min(max(math.ceil(min_ms / per), 3), 5000))


def measure_traffic(workload, *, sm_counts: Sequence[int | None] = (None,), flush: bool = False,
                    min_ms: float = 10.0, interval_us: float = 20.0, metric_set: str | None = None,
                    device=0):
    """Measure a workload's DRAM and L2 traffic per call with CUPTI's PM sampler.

    Parameters
    ----------
    workload : workload or str
        Anything :func:`gcexplore.profile_overlap` runs (a built-in name, a Workload, ``fn(*, stream)``).
    sm_counts : sequence of int or None, default (None,)
        Partitions to measure on: None is the whole device, k a green context of k SMs.
    flush : bool, default False
        On the whole device (None in ``sm_counts``), also measure with the L2 emptied
        before every call (rows with ``flushed`` True).
    min_ms : float, default 10
        Each measurement repeats the call back to back for at least this long (at least 3 calls).
    interval_us : float, default 20
        PM sampling interval (20 us: the interval pm.py's sets were verified at).
    metric_set : str, optional
        One of :data:`METRIC_SETS`; default the first CUPTI accepts.
    device : int, default 0

    Returns
    -------
    pandas.DataFrame
        Columns :data:`TRAFFIC_COLUMNS` (``sm_count`` is the device's SM count for the
        whole device; ``source`` is "measured"); attrs: ``metric_set``, ``metrics``,
        ``refused_sets``, ``device_name``, ``interval_us``, ``gpu_time_ms`` (the calls
        run, warm-ups included).

    Raises
    ------
    TrafficUnavailable
        CUPTI cannot count here (one sentence); nothing was measured.
    """
    import pandas as pd

    from ..device.driver import device_info
    from ..device.partitions import split, whole_device
    from ..workloads.builtins import copy as copy_kernel
    from ..workloads.spec import as_workload

    sizes = list(sm_counts)
    if not sizes or not all(k is None or (isinstance(k, (int, np.integer)) and k > 0) for k in sizes):
        raise ValueError(f"sm_counts must name partitions to measure on (None: the whole device, or SM counts > 0), "
                         f"got {sm_counts!r}")
    info = device_info(device)
    refused = counters_refusal()
    if refused:  # before anything is built
        raise TrafficUnavailable(refused)
    wl = as_workload(workload, device=info.index)
    sampler, rows, flusher, gpu_ms = None, [], None, 0.0
    try:
        if flush:
            l2 = _l2_size(info.index)
            flusher = copy_kernel(n=max(int(2 * l2 // 4), 1 << 20), device=info.index)
        for k in sizes:
            part = whole_device(info.index) if k is None else split([int(k)], device=info.index)
            try:
                p: Any = part if k is None else cast(Any, part)[0]  # the whole device, or split's first group
                stream = p.stream
                kinds = [False, True] if flush and k is None else [False]
                for flushed in kinds:
                    fn = wl.fn
                    if flushed:
                        assert flusher is not None  # flushed only with flush, which made it
                        def fn(*, stream, _f=flusher.fn, _w=wl.fn):
                            _f(stream=stream)
                            _w(stream=stream)
                    calls = _calls_for(fn, stream, min_ms)
                    if sampler is None:  # with a context current and the workload warm
                        sampler = _Sampler(info.index, metric_set, interval_us)
                    r = sampler.run(fn, stream, calls, interval_us)
                    gpu_ms += r["duration_ms"] * (calls + 3)
                    if flushed:  # take the flush's own traffic and time off
                        assert flusher is not None
                        c = sampler.run(flusher.fn, stream, calls, interval_us)
                        gpu_ms += c["duration_ms"] * calls
                        for col in ("dram_read_bytes", "dram_write_bytes", "l2_bytes", "duration_ms"):
                            r[col] = max(r[col] - c[col], 0.0)
                    dram = r["dram_read_bytes"] + r["dram_write_bytes"]
                    rows.append({"workload": wl.name, "sm_count": int(k) if k is not None else info.sm_count,
                                 "flushed": flushed, "calls": calls, "duration_ms": r["duration_ms"],
                                 "dram_read_bytes": r["dram_read_bytes"], "dram_write_bytes": r["dram_write_bytes"],
                                 "l2_bytes": r["l2_bytes"], "achieved_gbs": dram / (r["duration_ms"] * 1e6),
                                 "peak_gbs": r["peak_gbs"], "dram_gbs_deciles": r["dram_gbs_deciles"],
                                 "l2_gbs_deciles": r["l2_gbs_deciles"], "samples": r["samples"],
                                 "decoded": r["decoded"],
                                 "window": r["window"], "metric_set": sampler.name,
                                 "source": "measured"})
            finally:
                part.close()
    finally:
        if sampler is not None:
            sampler.close()
        if flusher is not None:
            flusher.close()
        if isinstance(workload, str):
            wl.close()
    df = pd.DataFrame(rows, columns=TRAFFIC_COLUMNS)
    assert sampler is not None  # made at the first size measured
    df.attrs.update(kind="traffic", metric_set=sampler.name, metrics=list(sampler.metrics),
                    refused_sets=list(sampler.refused), device_name=info.name, interval_us=float(interval_us),
                    gpu_time_ms=gpu_ms)
    return df


def _l2_size(device: int) -> int:
    try:
        from cuda.core import Device

        return int(Device(device).properties.l2_cache_size)
    except Exception:  # noqa: BLE001 - an older cuda.core: the H100's 50 MiB
        return 50 << 20
