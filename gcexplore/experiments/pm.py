"""Memory bandwidth over time during an overlap, from CUPTI PM sampling.

Green contexts partition SMs; they do not partition DRAM bandwidth. PM sampling reads
device-wide hardware counters at a fixed interval on the GPU's clock, so while two
partitions run, it shows how much of the DRAM's peak the device drew and what share
of the SMs was active, sample by sample, next to each kernel's span from the trace.

:func:`dram_timeline` measures an overlap (:func:`gcexplore.profile_overlap` with the
kernel trace on) while the sampler runs, **in a child process**: decoding one metric
set crashed the process with a segfault on this project's GPU machine, so a failure
in CUPTI's profiler becomes :class:`PmSamplingError` here and never ends the caller's
process. The child builds the workloads itself: built-in names, or a factory
``"module:function"`` it can import.

Only the metric sets of :data:`METRIC_SETS` are offered: each was configured, sampled
and decoded on the GPU named in :data:`VERIFIED`. Sample timestamps share CUPTI's
activity clock (checked there: the samples before a lone memory kernel read 0% DRAM,
those inside it 84%), so they line up with the trace's rows through each repetition
group's time zero (``trace.attrs["rep_origins"]``, joined to the rows by their ``group`` column).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, cast

import numpy as np

from ..device.driver import UnsupportedError

__all__ = ["MAX_SAMPLES", "METRIC_SETS", "VERIFIED", "DramTimeline", "PmSamplingError", "dram_timeline",
           "rep_rounds", "samples_frame"]

#: Metric sets offered (name -> CUPTI metrics), each verified on the GPU named in VERIFIED.
METRIC_SETS = {
    # DRAM throughput as % of peak; SM-active share = sm__cycles_active.avg / gpc__cycles_elapsed.max
    "dram_sm": ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "sm__cycles_active.avg",
                "gpc__cycles_elapsed.max"),
    # DRAM throughput as % of peak and in bytes per second, read and write
    "dram_bytes": ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram__bytes_read.sum.per_second",
                   "dram__bytes_write.sum.per_second"),
}
VERIFIED = ("NVIDIA H100 80GB HBM3, driver 580 (CUDA 13.0), cupti-python 13.4.0 with nvidia-cuda-cupti "
            "13.4.92, 20 us interval (2026-11-26)")
INTERVAL_RANGE_US = (10, 10_000)
MAX_SAMPLES = 200_000  # decoded per run: 4 s of samples at 20 us
_DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"


class PmSamplingError(RuntimeError):
    """PM sampling failed in its child process (the message says how; the caller's process is intact)."""


class DramTimeline(NamedTuple):
    """What :func:`dram_timeline` returns.

    ``samples`` (kind ``"pm"``): one row per PM sample inside a repetition; ``result``:
    the overlap's event-timed rows; ``trace``: its kernel trace (kind ``"trace"``).
    """

    samples: Any
    result: Any
    trace: Any


# ---------------------------------------------------------------------------
# Request checks (in the caller's process, before anything starts)
# ---------------------------------------------------------------------------


def _workload_spec(workloads) -> dict:
    from ..workloads.builtins import BUILTINS
    from ..workloads.spec import is_recipe, workload_names

    if isinstance(workloads, str) and ":" in workloads and not is_recipe(workloads):
        module, _, func = workloads.partition(":")
        if not module or not func.isidentifier():
            raise ValueError(f"a workload factory is 'module:function', got {workloads!r}")
        return {"factory": workloads}
    names = workload_names(workloads)
    objs = list(workloads.values()) if isinstance(workloads, Mapping) else (
        [workloads] if isinstance(workloads, str) else list(workloads))
    for name, obj in zip(names, objs):
        if not isinstance(obj, str):
            raise TypeError(
                f"dram_timeline runs the workloads in a child process (so a crash in CUPTI cannot end "
                f"yours) and builds them there: give built-in names ({', '.join(BUILTINS)}; recipes such as "
                f"'memory:n=1048576' too) or a factory "
                f"'module:function' that returns the workloads; {name!r} is a {type(obj).__name__}")
    return {"names": dict(zip(names, objs))}


def _check_request(split, metrics, interval_us, timeout_s) -> tuple[list[int], str, int]:
    from .._checks import as_seconds_like
    from .request import as_sizes

    sizes = as_sizes("split", split)
    if not isinstance(metrics, str) or metrics not in METRIC_SETS:
        raise ValueError(f"metrics must name a verified metric set ({', '.join(map(repr, METRIC_SETS))}), "
                         f"got {metrics!r}")
    lo, hi = INTERVAL_RANGE_US
    interval = as_seconds_like("interval_us", interval_us, unit="microseconds", maximum=hi)
    if interval < lo:
        raise ValueError(f"interval_us must be a number of microseconds in [{lo}, {hi}], got {interval_us!r}")
    as_seconds_like("timeout_s", timeout_s, unit="seconds", maximum=86_400)
    return sizes, metrics, int(round(interval * 1000))


def _cupti_present() -> None:
    """Refuse before the child starts where the installed cupti-python has no PM sampling."""
    from ..trace.collector import TraceUnavailable, newest_pip_cupti
    from ..trace.features import LoadedCupti, refusal

    if importlib.util.find_spec("cupti") is None:
        raise TraceUnavailable(
            "dram_timeline needs cupti-python 13.3 or newer with a CUPTI of at least its version (pip install "
            "'cupti-python>=13.4' 'nvidia-cuda-cupti>=13.4', Linux x86_64 and aarch64); event timing works without it")
    if importlib.util.find_spec("cupti.pm_sampling") is None:
        from importlib import metadata

        version, path = newest_pip_cupti() or ("", "")
        parts = tuple(int(p) for p in version.split(".")[:3] if p.isdigit())
        info = LoadedCupti(library=path, version=parts if len(parts) == 3 else None, how="newest pip CUPTI",
                           package=metadata.version("cupti-python"), pm_module=False)
        raise TraceUnavailable(refusal("pm_sampling", info))


# ---------------------------------------------------------------------------
# The child process
# ---------------------------------------------------------------------------


def _child_command(spec_path: Path, out_dir: Path) -> list[str]:
    return [sys.executable, "-m", "gcexplore.experiments._pm_child", str(spec_path), str(out_dir)]


def _child_env() -> dict:
    env = dict(os.environ)
    # the child imports what this process imports (a source checkout, a --target folder)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _relay_error(out_dir: Path, proc: subprocess.CompletedProcess | None, timeout_s: float) -> Exception:
    tail = ""
    if proc is not None:
        tail = " ".join((proc.stderr or "").strip().splitlines()[-3:])[-400:]
    err = out_dir / "error.json"
    if err.exists():
        e = json.loads(err.read_text())
        cls = {"ValueError": ValueError, "TypeError": TypeError}.get(e.get("type"))
        if cls is not None:
            return cls(e["message"])
        if e.get("type") == "TraceUnavailable":
            from ..trace.collector import TraceUnavailable

            return TraceUnavailable(e["message"])
        if e.get("type") == "UnsupportedError":
            return UnsupportedError(e["message"])
        return PmSamplingError(f"PM sampling failed in its child process ({e.get('type')}: {e.get('message')})")
    if proc is None:
        return PmSamplingError(f"the PM sampling child process ran past timeout_s={timeout_s:g} s and was "
                               "stopped; pass a larger timeout_s, fewer repeats or a longer interval_us")
    rc = proc.returncode
    how = (f"died from signal {signal.Signals(-rc).name} (a crash, as inside CUPTI's profiler)" if rc < 0
           else f"exited with status {rc} before writing its results")
    return PmSamplingError(
        f"the PM sampling child process {how}; your process is unaffected and event timing and trace=True "
        "still work" + (f"; its last output: {tail}" if tail else ""))


def dram_timeline(workloads, split, *, modes: Sequence[str] = ("alone", "concurrent"), repeats: int = 3,
                  warmup: int = 2, metrics: str = "dram_sm", interval_us: float = 20, device: int = 0,
                  timeout_s: float = 600.0) -> DramTimeline:
    """Sample DRAM throughput and SM activity every ``interval_us`` during an overlap.

    Parameters
    ----------
    workloads : mapping of str to built-in name, sequence of built-in names, or "module:function"
        Built in the child process; a factory is imported there and called with no
        arguments, returning what :func:`gcexplore.profile_overlap` accepts.
    split : int or sequence of int
        As for :func:`gcexplore.profile_overlap`.
    modes : sequence of str, default ("alone", "concurrent")
    repeats, warmup : int
        Repetitions measured and discarded (sampling covers all of them).
    metrics : {"dram_sm", "dram_bytes"}, default "dram_sm"
        A verified set of :data:`METRIC_SETS`: DRAM % of peak with the share of SMs
        active, or DRAM % of peak with read and write GB/s.
    interval_us : float, default 20
        Time between samples, 10 to 10,000 us (20 us verified).
    device : int, default 0
    timeout_s : float, default 600
        The child is stopped after this long.

    Returns
    -------
    DramTimeline
        ``(samples, result, trace)``. ``samples`` (kind ``"pm"``) has one row per
        sample inside a repetition (from two intervals before its first kernel to two
        after its last): ``layout``, ``mode``, ``rep``, ``workloads`` (those of the
        repetition, joined by "+"), ``start_ms`` / ``end_ms`` on the trace's time axis,
        ``dram_pct``, ``dram_read_gbs``, ``dram_write_gbs``, ``sm_active_pct`` (NaN
        where the metric set has no such counter). Counters are device-wide: all
        partitions together.

    Raises
    ------
    TypeError, ValueError
        A request that cannot run (checked before the child starts where possible).
    TraceUnavailable
        cupti-python is not installed.
    PmSamplingError
        The child failed or crashed; the message says how.
    """
    from ..schema import Options

    spec = _workload_spec(workloads)
    sizes, metrics, interval_ns = _check_request(split, metrics, interval_us, timeout_s)
    opts = Options(repeats=repeats, warmup=warmup,  # a str: Options checks and converts it (check_modes)
                   modes=tuple(modes) if not isinstance(modes, str) else cast("tuple[str, ...]", modes))
    _cupti_present()
    spec.update(split=sizes, modes=list(opts.modes), repeats=opts.repeats, warmup=opts.warmup,
                metrics=list(METRIC_SETS[metrics]), interval_ns=interval_ns, device=int(device))
    with tempfile.TemporaryDirectory(prefix="gcexplore-pm-") as tmp:
        out = Path(tmp)
        (out / "spec.json").write_text(json.dumps(spec))
        try:
            proc = subprocess.run(_child_command(out / "spec.json", out), env=_child_env(), capture_output=True,
                                  text=True, timeout=float(timeout_s))
        except subprocess.TimeoutExpired:
            raise _relay_error(out, None, float(timeout_s)) from None
        if proc.returncode != 0 or not (out / "samples.npz").exists():
            raise _relay_error(out, proc, float(timeout_s))
        from ..results.io import load

        result, trace = load(out / "result.parquet"), load(out / "trace.parquet")
        raw = np.load(out / "samples.npz")
        samples = samples_frame(raw["start"], raw["end"], raw["values"], list(raw["metrics"]), trace,
                                rounds=rep_rounds(result))
        if int(raw["populated"]) >= MAX_SAMPLES:
            warnings.warn(f"PM sampling kept its first {MAX_SAMPLES:,} samples "
                          f"({MAX_SAMPLES * interval_ns / 1e9:.1f} s); "
                          "later repetitions have none: use fewer repeats or a longer interval_us", stacklevel=2)
    for df in (result, trace, samples):
        df.attrs["recorded"] = False
    samples.attrs.update(metric_set=metrics, interval_us=interval_ns / 1000)
    return DramTimeline(samples, result, trace)


# ---------------------------------------------------------------------------
# Samples -> rows (pure; tested on synthetic samples)
# ---------------------------------------------------------------------------


def rep_rounds(result) -> dict[tuple, int]:
    """``(layout, mode, rep) -> round`` of an overlap result's repetitions (each repetition
    belongs to one round; repetitions are numbered across rounds)."""
    if result is None or not {"layout", "mode", "rep", "round"} <= set(result.columns):
        return {}
    keys = result[["layout", "mode", "rep", "round"]].drop_duplicates(["layout", "mode", "rep"])
    return {(str(lay), str(mode), int(rep)): int(rnd) for lay, mode, rep, rnd in keys.itertuples(index=False)}


def samples_frame(starts, ends, values, metrics: list[str], trace, *, rounds: dict | None = None):
    """PM samples (absolute ns on CUPTI's clock) as rows of kind ``"pm"``, per repetition of ``trace``.

    A sample belongs to a repetition when its midpoint lies between two intervals
    before the repetition's origin and two intervals after its last kernel ends;
    samples outside every repetition (set-up, host work) are left out. ``rounds`` maps
    ``(layout, mode, rep)`` to the repetition's round (:func:`rep_rounds` of the measured
    result); a repetition it does not name is round 0 (one round, as results from before
    rounds load).
    """
    from ..schema import frame, trace_groups

    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    values = np.asarray(values, dtype=float).reshape(len(starts), len(metrics))
    ok = (starts > 0) & (ends > starts)
    starts, ends, values = starts[ok], ends[ok], values[ok]
    col = {m: values[:, i] for i, m in enumerate(metrics)}
    nan = np.full(len(starts), math.nan)
    derived = {
        "dram_pct": col.get(_DRAM_PCT, nan),
        "dram_read_gbs": col.get("dram__bytes_read.sum.per_second", nan * 1e9) / 1e9,
        "dram_write_gbs": col.get("dram__bytes_write.sum.per_second", nan * 1e9) / 1e9,
        "sm_active_pct": nan,
    }
    if "sm__cycles_active.avg" in col and "gpc__cycles_elapsed.max" in col:
        with np.errstate(divide="ignore", invalid="ignore"):
            derived["sm_active_pct"] = np.where(col["gpc__cycles_elapsed.max"] > 0, 100.0 * col[
                "sm__cycles_active.avg"] / col["gpc__cycles_elapsed.max"], math.nan)
    interval = float(np.median(ends - starts)) if len(starts) else 0.0
    mid = (starts + ends) / 2
    rows = []
    for o, kernels in trace_groups(trace):
        if "origin_ns" not in o:
            continue  # no time zero on the GPU clock: nothing to place the samples against
        t0, last_ms = o["origin_ns"], float(kernels["end_ms"].max())
        inside = np.flatnonzero((mid >= t0 - 2 * interval) & (mid <= t0 + last_ms * 1e6 + 2 * interval))
        for i in inside:
            rows.append({"layout": o["layout"], "mode": o["mode"], "rep": o["rep"],
                         "round": (rounds or {}).get((str(o["layout"]), str(o["mode"]), int(o["rep"])), 0),
                         "workloads": "+".join(o["workloads"]), "start_ms": (starts[i] - t0) / 1e6,
                         "end_ms": (ends[i] - t0) / 1e6, **{k: float(v[i]) for k, v in derived.items()}})
    attrs = {k: v for k, v in trace.attrs.items() if k not in ("kind", "rep_origins", "green_contexts",
                                                               "trace_diagnostics", "trace_of")}
    attrs.update(kind="pm", metrics=list(metrics), verified=VERIFIED, samples_total=len(starts),
                 samples_kept=len(rows))
    return frame(rows, "pm", attrs)


