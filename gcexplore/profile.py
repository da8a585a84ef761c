"""Event timing of workloads on partitions, into tidy pandas DataFrames.

What it measures
----------------
- :func:`profile_overlap`: workloads on the partitions of one split, in four modes
  (``alone``, ``concurrent``, ``sequential``, ``streams``).
- :func:`sweep`: :func:`profile_overlap` over every valid size of the first
  partition; :func:`best_split` picks the layout with the lowest concurrent makespan.
- :func:`scaling`: one workload alone on each partition size.
- :func:`isolation`: a latency-critical workload next to a background one, on plain
  streams and on complementary partitions.
- :func:`occupancy`: per-block SM ids and times of built-in kernels run concurrently;
  :func:`sm_busy` turns them into per-SM busy fractions.
- :func:`summarize`: medians and spread from the raw samples, speedups, slowdowns,
  and the lower bound of the makespan.

How it times
------------
Every repetition is one *group*: a short spin kernel on a gate stream holds the
GPU while the host enqueues the whole repetition, then a common start event is
recorded on the gate stream; every stream of the repetition waits on it, runs a 1 us
settling spin (so its start event follows work on its own stream rather than a
cross-stream wait, which would add 4-11 us of jitter), records its own start event,
launches its workload, and records its end event. The host
synchronises once per repetition. ``start_ms`` is a workload's start relative to the
common start, ``duration_ms`` its own event span, ``makespan_ms`` the common start to
the last end. Warm-up repetitions run first and are discarded.

Event spans include a launch gap of a few microseconds that the kernel itself does
not see (about 8 us on the H100): :func:`launch_gap` measures it once per device as
the event time minus the ``%globaltimer`` span of a spin kernel, and every result
carries it in ``df.attrs["launch_gap_us"]``. Subtract it mentally for kernels of a few
tens of microseconds; it is below 1% of a 1 ms kernel.

Keeping data
------------
When a workload raises or the user interrupts (Ctrl-C), every repetition completed so
far is kept: the call raises :class:`MeasurementFailed` (a :class:`GreenContextError`,
chained ``from`` the workload's exception) or :class:`MeasurementInterrupted` (a
``KeyboardInterrupt``); both carry the rows as ``exc.partial`` (a DataFrame with the
usual columns and attrs, ``attrs["partial"] = True``). Catch
:class:`MeasurementAborted` to get either. ``sweep(..., checkpoint=path)`` also
appends each finished layout to ``path`` (JSON lines) and a rerun with the same path
skips the layouts already there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .api import GreenContextError, DeviceInfo, device_info, plan_split, use, whole_device
from .api import split as _split
from .workloads import Recorder, Workload, as_workload, as_workloads

__all__ = [
    "MODES",
    "MeasurementAborted",
    "MeasurementFailed",
    "MeasurementInterrupted",
    "best_split",
    "isolation",
    "launch_gap",
    "occupancy",
    "profile_overlap",
    "scaling",
    "sm_busy",
    "summarize",
    "sweep",
]

MODES = ("alone", "concurrent", "sequential", "streams")
SCENARIOS = ("alone", "streams", "partitioned")
#: A configuration is flagged noisy when its IQR exceeds this fraction of its median.
NOISY_FRACTION = 0.10

OVERLAP_COLUMNS = [
    "layout", "split_sm_count", "mode", "rep", "workload", "partition", "sm_count",
    "requested_sm_count", "start_ms", "duration_ms", "makespan_ms", "flops", "bytes",
    "throughput_tflops", "bandwidth_gbs", "sm_clock_mhz_before", "power_w_before",
    "sm_clock_mhz", "power_w",
]
SCALING_COLUMNS = [
    "workload", "sm_count", "requested_sm_count", "rep", "duration_ms", "flops", "bytes",
    "throughput_tflops", "bandwidth_gbs",
]
ISOLATION_COLUMNS = ["scenario", "role", "workload", "rep", "sm_count", "duration_ms"]
OCCUPANCY_COLUMNS = ["partition", "workload", "sm_id", "block", "start_ns", "end_ns"]

_GATE_US_START = 60.0
_GATE_US_MAX = 20_000.0
_SETTLE_NS = 1_000  # the tiny spin each stream runs after its waits, before its start event


# ---------------------------------------------------------------------------
# Exceptions that keep what was measured
# ---------------------------------------------------------------------------


class MeasurementAborted(BaseException):
    """Base of the two ways a measurement stops early; ``.partial`` holds the rows so far.

    Not raised itself: see :class:`MeasurementFailed` and :class:`MeasurementInterrupted`.
    """

    def __init__(self, message: str, partial: pd.DataFrame):
        super().__init__(message)
        self.partial = partial


class MeasurementFailed(MeasurementAborted, GreenContextError):
    """A workload (or the driver) raised during a measurement.

    The original exception is ``__cause__``; the rows measured before it are
    ``.partial``.
    """


class MeasurementInterrupted(MeasurementAborted, KeyboardInterrupt):
    """The user interrupted a measurement (Ctrl-C); ``.partial`` holds the rows so far."""


# ---------------------------------------------------------------------------
# Small helpers (pure)
# ---------------------------------------------------------------------------


def _check_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return int(value)


def _check_modes(modes) -> tuple[str, ...]:
    if isinstance(modes, str):
        modes = (modes,)
    modes = tuple(modes)
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ValueError(f"unknown mode(s) {bad or modes!r}; valid modes are {', '.join(MODES)}")
    if len(set(modes)) != len(modes):
        raise ValueError(f"modes repeat: {modes!r}; valid modes are {', '.join(MODES)}")
    return modes


def _placement(plan, n_workloads: int) -> int:
    """How many partitions of ``plan`` the workloads use; ValueError if they do not fit.

    Workloads go on the requested groups in order; the remainder takes the last one
    when the split names one group fewer than there are workloads.
    """
    groups = len(plan.groups)
    if n_workloads <= groups:
        return n_workloads
    if n_workloads == groups + 1 and plan.remainder > 0:
        return n_workloads
    have = f"{groups} group(s) {plan.granted}" + (f" plus a remainder of {plan.remainder} SMs"
                                                 if plan.remainder else " and no remainder")
    raise ValueError(
        f"{n_workloads} workloads but the split {plan.requested} on {plan.info.name} gives {have}; "
        f"give {n_workloads - 1} or {n_workloads} SM counts (the remainder takes the last workload "
        "when there is one fewer count than workloads)"
    )


def _sweep_sizes(info: DeviceInfo, n_workloads: int, sm_counts, others: Sequence[int]) -> list[int]:
    """First-partition sizes a sweep measures; ValueError naming the valid sizes otherwise."""
    if n_workloads < 2:
        raise ValueError(f"a sweep needs at least two workloads (the first on k SMs, the last on "
                         f"the rest), got {n_workloads}")
    others = [int(o) for o in others]
    if len(others) != n_workloads - 2:
        raise ValueError(
            f"{n_workloads} workloads need {n_workloads - 2} fixed size(s) in others= for the "
            f"middle workload(s) (the first is swept, the last takes the remainder), got {others}")
    valid = []
    for k in info.valid_sm_counts():
        try:
            plan = plan_split(info, [k, *others])
        except ValueError:
            continue
        if plan.remainder > 0:
            valid.append(k)
    if not valid:
        raise ValueError(f"no first-partition size leaves a remainder on {info.name} with others={others}")
    if sm_counts is None:
        return valid
    if isinstance(sm_counts, (int, np.integer)):
        sm_counts = [sm_counts]
    sizes = [int(k) for k in sm_counts]
    bad = [k for k in sizes if k not in valid]
    if bad or not sizes:
        raise ValueError(
            f"cannot sweep first-partition size(s) {bad or sizes} on {info.name} ({info.sm_count} SMs): "
            f"valid sizes (leaving SMs for the last workload) are {', '.join(map(str, valid))}")
    return list(dict.fromkeys(sizes))


def _per_sec(amount, ms) -> float:
    if amount is None or not (ms > 0):
        return math.nan
    return float(amount) / (ms * 1e-3)


def _num(v) -> float:
    return math.nan if v is None else float(v)


def _frame(rows: list[dict], columns: list[str], attrs: dict) -> pd.DataFrame:
    df = pd.DataFrame.from_records(rows, columns=columns)
    for col in ("requested_sm_count",):
        if col in df.columns:
            df[col] = pd.array([None if (v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)))
                                else int(v) for v in df[col]], dtype="Int64")
    for col in ("split_sm_count", "rep", "sm_count", "sm_id", "block", "start_ns", "end_ns"):
        if col in df.columns:
            df[col] = df[col].astype("int64")
    for col in ("start_ms", "duration_ms", "makespan_ms", "flops", "bytes", "throughput_tflops",
                "bandwidth_gbs", "sm_clock_mhz_before", "power_w_before", "sm_clock_mhz", "power_w"):
        if col in df.columns:
            df[col] = df[col].astype("float64")
    df.attrs.update(attrs)
    return df


# ---------------------------------------------------------------------------
# Optional helpers: NVML, NVTX, progress
# ---------------------------------------------------------------------------


class _Nvml:
    """SM clock and board power via nvidia-ml-py, or NaN when it is absent."""

    def __init__(self, device_index: int):
        self.handle = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            try:
                from cuda.core import Device

                bus = Device(device_index).pci_bus_id
                self.handle = pynvml.nvmlDeviceGetHandleByPciBusId_v2(bus)
            except Exception:
                self.handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
        except Exception:  # no nvidia-ml-py or no NVML: columns stay NaN
            self.handle = None

    @property
    def available(self) -> bool:
        return self.handle is not None

    def read(self) -> tuple[float, float]:
        if self.handle is None:
            return math.nan, math.nan
        try:
            clock = float(self._nvml.nvmlDeviceGetClockInfo(self.handle, self._nvml.NVML_CLOCK_SM))
            power = float(self._nvml.nvmlDeviceGetPowerUsage(self.handle)) / 1000.0
            return clock, power
        except Exception:
            return math.nan, math.nan


_nvtx_module: Any = False  # False: not looked up yet; None: absent


def _nvtx():
    global _nvtx_module
    if _nvtx_module is False:
        try:
            import nvtx

            _nvtx_module = nvtx
        except ImportError:
            _nvtx_module = None
    return _nvtx_module


def _range(message: str):
    """An NVTX range in the "gcexplore" domain when the nvtx package is present."""
    nvtx = _nvtx()
    if nvtx is None:
        return contextlib.nullcontext()
    return nvtx.annotate(message, domain="gcexplore")


def _progress(total: int, desc: str, enabled: bool, initial: int = 0):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, desc=desc, unit="layout")


# ---------------------------------------------------------------------------
# The timing engine (GPU)
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class _Slot:
    """One workload placed on one stream for a repetition."""

    workload: Workload
    partition: Any  # api.Partition (or the whole device)
    stream: Any
    launches: int = 1
    paced_by: int | None = None  # launch j waits for launch j of that slot (isolation)
    run: Callable[[], None] | None = None

    @property
    def name(self) -> str:
        return self.partition.name


class _Engine:
    """Measuring machinery on one device: gate stream and kernel, L2 flush, NVML, graphs."""

    def __init__(self, info: DeviceInfo, *, streams: int = 2, l2_flush: bool = False,
                 graphs: bool = False):
        from cuda.core import EventOptions

        from .workloads import _kernel

        self.info = info
        self.graphs = graphs
        self.gate_us = _GATE_US_START
        self.max_enqueue_us = 0.0
        self._opts = EventOptions(timing_enabled=True)
        self._graphs: dict[tuple[int, int], tuple[Any, Any]] = {}
        # cuda.core wants a context of the device current for some calls (event and
        # stream creation); the device's primary context is current for the engine's
        # lifetime, and whatever was current before comes back in close().
        self._current = contextlib.ExitStack()
        self._current.enter_context(use(info.index))
        try:
            self.whole = whole_device(info.index, streams=max(2, streams))
        except BaseException:
            self._current.close()
            raise
        try:
            self.gate = self.whole.create_stream()
            with use(info.index) as dev:
                self._spin = _kernel(dev, "gcx_spin")
                self._l2 = None
                if l2_flush:
                    size = 2 * max(int(dev.properties.l2_cache_size), 1 << 20)
                    self._l2 = (dev.allocate(size, stream=self.gate), size)
            self.nvml = _Nvml(info.index)
        except BaseException:
            self.whole.close()
            self._current.close()
            raise

    # -- launching ---------------------------------------------------------
    def _launch_spin(self, stream, ns: int) -> None:
        from cuda.core import LaunchConfig, launch

        launch(stream, LaunchConfig(grid=1, block=32), self._spin, np.uint64(ns), np.uint64(0))

    def runner(self, slot: _Slot) -> Callable[[], None]:
        """What launches ``slot``'s workload once: a direct call, or its CUDA graph."""
        wl, stream = slot.workload, slot.stream
        if not self.graphs:
            return lambda: wl(stream=stream)
        from .api import _check

        from cuda.bindings import driver

        key = (id(wl), int(stream.handle))
        if key not in self._graphs:
            mode = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
            _check(driver.cuStreamBeginCapture(stream.handle, mode), "cuStreamBeginCapture")
            try:
                wl(stream=stream)
            except BaseException:
                with contextlib.suppress(Exception):
                    driver.cuStreamEndCapture(stream.handle)
                raise
            graph = _check(driver.cuStreamEndCapture(stream.handle), "cuStreamEndCapture")
            with use(slot.partition):
                exe = _check(driver.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
            self._graphs[key] = (graph, exe)
        exe = self._graphs[key][1]
        return lambda: _check(driver.cuGraphLaunch(exe, stream.handle), "cuGraphLaunch")

    def drop_graphs(self) -> None:
        from cuda.bindings import driver

        for graph, exe in self._graphs.values():
            with contextlib.suppress(Exception):
                driver.cuGraphExecDestroy(exe)
            with contextlib.suppress(Exception):
                driver.cuGraphDestroy(graph)
        self._graphs.clear()

    def run_group(self, slots: Sequence[_Slot], *, chain: bool = False):
        """One repetition: gate, common start, every slot's launches, one sync.

        Returns ``(per_slot, makespan_ms)``; ``per_slot[i]`` lists ``(start_ms,
        duration_ms)`` for each launch of slot ``i``. With ``chain`` each slot starts
        after the previous one ended (``alone`` and ``sequential``).
        """
        from .api import _check

        from cuda.bindings import driver

        gate = self.gate
        if self._l2 is not None:
            buf, size = self._l2
            _check(driver.cuMemsetD32Async(int(buf.handle), 0, size // 4, int(gate.handle)),
                   "cuMemsetD32Async")
        self._launch_spin(gate, int(self.gate_us * 1000))
        common = gate.record(options=self._opts)
        t0 = time.perf_counter()
        events = []
        prev = None
        nvtx = _nvtx()
        for slot in slots:
            s = slot.stream
            s.wait(common)
            if chain and prev is not None:
                s.wait(prev)
            if slot.paced_by is None:
                # A start event recorded right after a cross-stream wait jitters by
                # 4-11 us (H200); after a kernel on its own stream, by under 1 us.
                self._launch_spin(s, _SETTLE_NS)
            run = slot.run or self.runner(slot)
            pairs = []
            if nvtx is not None:
                nvtx.push_range(f"{slot.name}: {slot.workload.name}", domain="gcexplore")
            try:
                for j in range(slot.launches):
                    if slot.paced_by is not None:
                        s.wait(events[slot.paced_by][j][1])
                    e0 = s.record(options=self._opts)
                    run()
                    e1 = s.record(options=self._opts)
                    pairs.append((e0, e1))
            finally:
                if nvtx is not None:
                    nvtx.pop_range(domain="gcexplore")
            events.append(pairs)
            prev = pairs[-1][1]
        enqueue_us = (time.perf_counter() - t0) * 1e6
        for pairs in events:
            pairs[-1][1].sync()
        per_slot = [[(float(e0 - common), float(e1 - e0)) for e0, e1 in pairs] for pairs in events]
        makespan = max(float(pairs[-1][1] - common) for pairs in events)
        # The gate must outlast the host's enqueueing, or host latency leaks into the
        # timings: grow it at once when it came close, and let it shrink slowly after
        # a one-off host stall (a 1.3 ms stall otherwise kept a 2.6 ms gate on every
        # later repetition of a sweep).
        self.max_enqueue_us = max(self.max_enqueue_us, enqueue_us)
        if enqueue_us > 0.7 * self.gate_us:
            self.gate_us = min(_GATE_US_MAX, 2.0 * enqueue_us + 20.0)
        else:
            self.gate_us = max(_GATE_US_START, 2.0 * enqueue_us + 20.0, 0.8 * self.gate_us)
        return per_slot, makespan

    def drain(self, streams) -> None:
        for s in streams:
            with contextlib.suppress(Exception):
                s.sync()

    def close(self) -> None:
        self.drain([self.gate, *self.whole.streams])
        self.drop_graphs()
        if self._l2 is not None:
            with contextlib.suppress(Exception):
                self._l2[0].close(self.gate)
            self._l2 = None
        try:
            self.whole.close()
        finally:
            self._current.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------------------
# Launch-gap calibration
# ---------------------------------------------------------------------------

_gap_cache: dict[int, float] = {}


def _spin_samples(engine: _Engine, partition, us: float, repeats: int, warmup: int = 3):
    """Event duration and in-kernel ``%globaltimer`` span (both us) of a spin kernel."""
    from .workloads import spin

    wl = spin(us, device=engine.info.index)
    rec = wl.instrumented()
    try:
        slot = _Slot(rec.workload, partition, partition.stream)
        events, spans = [], []
        for r in range(warmup + repeats):
            per_slot, _ = engine.run_group([slot])
            if r >= warmup:
                events.append(per_slot[0][0][1] * 1000.0)
                spans.append(rec.span_ns(stream=partition.stream) / 1000.0)
        return np.array(events), np.array(spans)
    finally:
        rec.close()


def launch_gap(device=0, *, refresh: bool = False) -> float:
    """The launch gap of ``device`` in microseconds, measured once per process.

    The median over 20 launches of a 100 us spin kernel of its event-timed duration
    minus its own ``%globaltimer`` span: the part of every event timing that the
    kernel does not see (launch and event overhead). Stored with every result in
    ``df.attrs["launch_gap_us"]``.

    Parameters
    ----------
    device : int, default 0
    refresh : bool, default False
        Measure again instead of using the cached value.
    """
    info = device_info(device)
    if refresh or info.index not in _gap_cache:
        with _Engine(info) as engine:
            ev, span = _spin_samples(engine, engine.whole, 100.0, 20)
        _gap_cache[info.index] = float(np.median(ev - span))
    return _gap_cache[info.index]


def _attrs(info: DeviceInfo, kind: str, engine: _Engine | None, **extra) -> dict:
    a = info.metadata()
    a.update(kind=kind, recorded=False)
    if engine is not None:
        a.update(gate_us=round(engine.gate_us, 1), max_enqueue_us=round(engine.max_enqueue_us, 1),
                 nvml=engine.nvml.available, nvtx=_nvtx() is not None)
    a.update(extra)
    return a


# ---------------------------------------------------------------------------
# Shared loop: keep every row, checkpoint per layout
# ---------------------------------------------------------------------------


class _Checkpoint:
    """Rows of finished layouts appended to a JSON-lines file, for resuming a sweep.

    Line 1 is a header describing the run; each further line is
    ``{"layout": label, "rows": [...]}``. A truncated last line (a crash while
    writing) is ignored.
    """

    VERSION = 1

    def __init__(self, path, header: dict):
        self.path = os.fspath(path)
        self.header = {"gcexplore_checkpoint": self.VERSION, **header}

    def load(self) -> dict[str, list[dict]]:
        if not os.path.exists(self.path) or os.path.getsize(self.path) == 0:
            with open(self.path, "w") as f:
                f.write(json.dumps(self.header) + "\n")
            return {}
        done: dict[str, list[dict]] = {}
        with open(self.path) as f:
            lines = f.read().splitlines()
        try:
            header = json.loads(lines[0])
        except (json.JSONDecodeError, IndexError) as e:
            raise ValueError(f"{self.path} is not a gcexplore checkpoint (bad header: {e}); "
                             "pass another checkpoint path or delete the file") from e
        diff = {k: (header.get(k), v) for k, v in self.header.items() if header.get(k) != v}
        if diff:
            what = "; ".join(f"{k}: file has {a!r}, this run {b!r}" for k, (a, b) in diff.items())
            raise ValueError(f"checkpoint {self.path} was written by a different run ({what}); "
                             "pass another checkpoint path or delete the file")
        for line in lines[1:]:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line: that layout is measured again
            done[entry["layout"]] = entry["rows"]
        return done

    def append(self, label: str, rows: list[dict]) -> None:
        clean = [{k: _jsonable(v) for k, v in r.items()} for r in rows]
        with open(self.path, "a") as f:
            f.write(json.dumps({"layout": label, "rows": clean}) + "\n")
            f.flush()
            os.fsync(f.fileno())


def _jsonable(v):
    if v is None or v is pd.NA:
        return None
    if isinstance(v, np.generic):
        return v.item()
    return v


def _run_layouts(layouts: Sequence[tuple[str, Any]], measure: Callable[[Any, list], None], *,
                 build: Callable[[list[dict]], pd.DataFrame], checkpoint: _Checkpoint | None = None,
                 progress: bool = False, desc: str = "sweep") -> tuple[list[dict], list[str]]:
    """Measure each layout with ``measure(arg, rows_out)``, keeping every row.

    Returns ``(rows, resumed_labels)``. On an exception raises
    :class:`MeasurementFailed` / :class:`MeasurementInterrupted` with all rows so far
    (including those of a half-measured layout) as ``.partial``.
    """
    done = checkpoint.load() if checkpoint is not None else {}
    rows: list[dict] = []
    resumed = [label for label, _ in layouts if label in done]
    for label in resumed:
        rows.extend(done[label])
    bar = _progress(len(layouts), desc, progress, initial=len(resumed))
    finished = len(resumed)
    try:
        for label, arg in layouts:
            if label in done:
                continue
            if bar is not None:
                bar.set_postfix_str(label)
            layout_rows: list[dict] = []
            try:
                measure(arg, layout_rows)
            finally:
                rows.extend(layout_rows)
            if checkpoint is not None:
                checkpoint.append(label, layout_rows)
            finished += 1
            if bar is not None:
                bar.update(1)
    except KeyboardInterrupt as e:
        raise MeasurementInterrupted(
            f"interrupted after {finished} of {len(layouts)} layout(s); the {len(rows)} rows measured "
            "so far are in exc.partial", _partial(build(rows))) from e
    except Exception as e:
        raise MeasurementFailed(
            f"{type(e).__name__} while measuring ({e}); {finished} of {len(layouts)} layout(s) finished, "
            f"the {len(rows)} rows measured so far are in exc.partial", _partial(build(rows))) from e
    finally:
        if bar is not None:
            bar.close()
    return rows, resumed


def _partial(df: pd.DataFrame) -> pd.DataFrame:
    df.attrs["partial"] = True
    return df


# ---------------------------------------------------------------------------
# profile_overlap / sweep
# ---------------------------------------------------------------------------


def _overlap_row(layout, split_k, mode, rep, slot: _Slot, start, dur, makespan) -> dict:
    wl = slot.workload
    p = slot.partition
    return {
        "layout": layout, "split_sm_count": split_k, "mode": mode, "rep": rep,
        "workload": wl.name, "partition": p.name, "sm_count": p.sm_count,
        "requested_sm_count": p.requested_sm_count, "start_ms": start, "duration_ms": dur,
        "makespan_ms": makespan, "flops": _num(wl.flops), "bytes": _num(wl.bytes),
        "throughput_tflops": _per_sec(wl.flops, dur) / 1e12,
        "bandwidth_gbs": _per_sec(wl.bytes, dur) / 1e9,
        "sm_clock_mhz_before": math.nan, "power_w_before": math.nan,
        "sm_clock_mhz": math.nan, "power_w": math.nan,
    }


def _measure_layout(engine: _Engine, wls: list[Workload], parts, *, modes, repeats, warmup,
                    l2_flush: bool, rows: list[dict]) -> None:
    """All modes of one layout; appends one row per mode x rep x workload to ``rows``."""
    layout, split_k = parts.label, parts[0].sm_count
    placed = parts.all[:len(wls)]
    whole = engine.whole
    part_slots = [_Slot(w, p, p.stream) for w, p in zip(wls, placed)]
    groups = {
        # alone: one after another on their own partitions, one sync per repetition
        # (each its own repetition with an L2 flush before it when flushing).
        "alone": [(part_slots, True)] if not l2_flush else [([s], False) for s in part_slots],
        "concurrent": [(part_slots, False)],
        "sequential": [([_Slot(w, whole, whole.streams[0]) for w in wls], True)],
        "streams": [([_Slot(w, whole, whole.streams[i]) for i, w in enumerate(wls)], False)],
    }
    try:
        for mode in modes:
            with _range(f"{layout} {mode}"):
                for gslots, chain in groups[mode]:
                    for s in gslots:
                        s.run = engine.runner(s)
                for _ in range(warmup):
                    for gslots, chain in groups[mode]:
                        engine.run_group(gslots, chain=chain)
                first = len(rows)
                clock0, power0 = engine.nvml.read()
                for rep in range(repeats):
                    rep_rows = []
                    for gslots, chain in groups[mode]:
                        per_slot, makespan = engine.run_group(gslots, chain=chain)
                        for slot, launches in zip(gslots, per_slot):
                            start, dur = launches[0]
                            rep_rows.append(_overlap_row(layout, split_k, mode, rep, slot, start, dur,
                                                         makespan))
                    rows.extend(rep_rows)
                clock, power = engine.nvml.read()
                for r in rows[first:]:
                    r["sm_clock_mhz_before"], r["power_w_before"] = clock0, power0
                    r["sm_clock_mhz"], r["power_w"] = clock, power
    finally:
        engine.drain([p.stream for p in placed])
        engine.drop_graphs()


def _prepare(workloads, device):
    info = device_info(device)
    wls = as_workloads(workloads, device=info.index)
    return info, wls


def profile_overlap(workloads, split, *, repeats: int = 20, warmup: int = 3, device=0,
                    modes: Sequence[str] = MODES, l2_flush: bool = False, graphs: bool = False,
                    rounding: str = "up") -> pd.DataFrame:
    """Time workloads alone, concurrently on their partitions, one after another, and on plain streams.

    Parameters
    ----------
    workloads : mapping of str to workload, or sequence of workloads
        Workloads (:class:`~gcexplore.workloads.Workload`, built-in names such as
        ``"compute"``, or callables ``fn(*, stream)``). They are placed on the
        partitions in order; the remainder takes the last one when ``split`` names one
        group fewer than there are workloads.
    split : int, sequence of int, or Partitioning
        SM counts of the groups (as for :func:`gcexplore.split`), or partitions already
        made (used as they are, not closed).
    repeats : int, default 20
        Measured repetitions per mode.
    warmup : int, default 3
        Discarded repetitions before them.
    device : int, default 0
    modes : sequence of str, default all four
        ``"alone"`` (each workload by itself on its partition), ``"concurrent"`` (all
        at once on their partitions), ``"sequential"`` (one after another on the whole
        device), ``"streams"`` (all at once on plain streams of the whole device).
    l2_flush : bool, default False
        Overwrite a buffer of twice the L2 size before every repetition (memory-bound
        work then starts cold; ``alone`` then runs each workload in its own repetition).
    graphs : bool, default False
        Capture each workload once per stream into a CUDA graph and time graph launches
        (cuts launch gaps of many-kernel workloads; the workload must be capturable).
    rounding : {"up", "down", "exact"}, default "up"
        How requested counts become valid sizes (see :func:`gcexplore.plan_split`).

    Returns
    -------
    pandas.DataFrame
        One row per mode x repetition x workload, columns in this order:

        - ``layout`` (str): granted sizes, e.g. ``"24+108"``.
        - ``split_sm_count`` (int): granted SMs of the first partition.
        - ``mode`` (str): ``"alone"``, ``"concurrent"``, ``"sequential"``, ``"streams"``.
        - ``rep`` (int): repetition, 0-based, after warm-up.
        - ``workload`` (str): workload name.
        - ``partition`` (str): ``"p0"``, ``"p1"``, ..., ``"remainder"``, or ``"device"``.
        - ``sm_count`` (int): SMs the workload ran on (whole device for sequential/streams).
        - ``requested_sm_count`` (Int64): SMs asked for; NA for remainder and device.
        - ``start_ms`` (float): start relative to the repetition's common start event.
        - ``duration_ms`` (float): the workload's own event span.
        - ``makespan_ms`` (float): common start to the last end of the repetition (for
          ``alone`` and ``sequential``: of the whole chain).
        - ``flops``, ``bytes`` (float): declared work per call (NaN if undeclared).
        - ``throughput_tflops`` (float): flops / duration, in 1e12/s (NaN if undeclared).
        - ``bandwidth_gbs`` (float): bytes / duration, in GB/s (NaN if undeclared).
        - ``sm_clock_mhz_before``, ``power_w_before`` (float): NVML SM clock (MHz) and
          board power (W) read after the warm-up, before the mode's measured
          repetitions (NaN without nvidia-ml-py).
        - ``sm_clock_mhz``, ``power_w`` (float): the same, read after the mode's
          repetitions; a clock that fell in between shows throttling.

        ``df.attrs`` holds the device and version metadata, ``kind="overlap"``,
        ``repeats``, ``warmup``, ``launch_gap_us``, ``l2_flush``, ``graphs``, ``modes``,
        ``gate_us`` and ``max_enqueue_us`` (host time to enqueue one repetition).

    Raises
    ------
    ValueError
        Unknown mode, bad counts, sizes the device cannot give, or more workloads than
        partitions (before anything is measured).
    MeasurementFailed, MeasurementInterrupted
        A workload raised or the user interrupted; ``exc.partial`` holds the rows so far.
    """
    modes = _check_modes(modes)
    repeats = _check_int("repeats", repeats, 1)
    warmup = _check_int("warmup", warmup, 0)
    info, wls = _prepare(workloads, device)
    owned = not hasattr(split, "all")
    if owned:
        plan = plan_split(info, split, rounding=rounding)
        _placement(plan, len(wls))
    else:
        _placement(split.plan, len(wls))
    gap = launch_gap(info.index)
    engine = _Engine(info, streams=len(wls), l2_flush=l2_flush, graphs=graphs)
    parts = None

    def build(r):
        return _frame(r, OVERLAP_COLUMNS, _attrs(info, "overlap", engine, repeats=repeats, warmup=warmup,
                                                 launch_gap_us=gap, l2_flush=l2_flush, graphs=graphs,
                                                 modes=list(modes)))

    try:
        parts = _split(split, device=info.index, rounding=rounding) if owned else split
        rows, _ = _run_layouts(
            [(parts.label, parts)],
            lambda p, out: _measure_layout(engine, wls, p, modes=modes, repeats=repeats, warmup=warmup,
                                           l2_flush=l2_flush, rows=out),
            build=build)
        return build(rows)
    finally:
        if owned and parts is not None:
            parts.close()
        engine.close()


def sweep(workloads, sm_counts=None, *, others: Sequence[int] = (), repeats: int = 20,
          warmup: int = 3, device=0, modes: Sequence[str] = MODES, l2_flush: bool = False,
          graphs: bool = False, checkpoint=None, progress: bool = True) -> pd.DataFrame:
    """:func:`profile_overlap` over every valid size of the first partition.

    The first workload gets ``k`` SMs, the last the remainder (middle workloads, if
    any, the fixed sizes in ``others``). Each layout is split once and measured in
    every mode; a progress bar (tqdm.auto) counts layouts.

    Parameters
    ----------
    workloads : mapping or sequence
        At least two workloads (see :func:`profile_overlap`).
    sm_counts : sequence of int, optional
        First-partition sizes; default every valid size that leaves a remainder
        (8, 16, ..., 128 on the H100).
    others : sequence of int, default ()
        Fixed sizes of the middle workloads (``len(workloads) - 2`` of them).
    repeats, warmup, device, modes, l2_flush, graphs
        As for :func:`profile_overlap`.
    checkpoint : str or path, optional
        JSON-lines file: each finished layout's rows are appended as soon as it is
        measured; rerunning with the same file (and the same workloads, modes and
        options) skips the layouts already in it and returns all rows.
    progress : bool, default True

    Returns
    -------
    pandas.DataFrame
        The columns of :func:`profile_overlap` (one row per layout x mode x repetition
        x workload), ``attrs["kind"] = "sweep"``, plus ``attrs["resumed_layouts"]``
        (layouts taken from the checkpoint).

    Raises
    ------
    ValueError
        Before measuring: fewer than two workloads, sizes the device cannot give
        (the message lists the valid ones), unknown modes, or a checkpoint from a
        different run.
    MeasurementFailed, MeasurementInterrupted
        A workload raised or the user interrupted: ``exc.partial`` holds every row
        measured so far (finished layouts are also in the checkpoint).
    """
    modes = _check_modes(modes)
    repeats = _check_int("repeats", repeats, 1)
    warmup = _check_int("warmup", warmup, 0)
    info, wls = _prepare(workloads, device)
    sizes = _sweep_sizes(info, len(wls), sm_counts, others)
    layouts = [(plan_split(info, [k, *others]).label, k) for k in sizes]
    ckpt = None
    if checkpoint is not None:
        ckpt = _Checkpoint(checkpoint, {
            "kind": "sweep", "device_name": info.name, "workloads": [w.name for w in wls],
            "others": [int(o) for o in others], "modes": list(modes), "repeats": repeats,
            "warmup": warmup, "l2_flush": bool(l2_flush), "graphs": bool(graphs)})
    resumed: list[str] = []
    if ckpt is not None:
        done = ckpt.load()  # checks compatibility before any GPU work
        resumed.extend(label for label, _ in layouts if label in done)
    gap = launch_gap(info.index)
    engine = _Engine(info, streams=len(wls), l2_flush=l2_flush, graphs=graphs)

    def build(r):
        return _frame(r, OVERLAP_COLUMNS, _attrs(
            info, "sweep", engine, repeats=repeats, warmup=warmup, launch_gap_us=gap,
            l2_flush=l2_flush, graphs=graphs, modes=list(modes), resumed_layouts=resumed))

    def measure(k, out):
        with _split([k, *others], device=info.index) as parts:
            _measure_layout(engine, wls, parts, modes=modes, repeats=repeats, warmup=warmup,
                            l2_flush=l2_flush, rows=out)

    try:
        rows, _ = _run_layouts(layouts, measure, build=build, checkpoint=ckpt, progress=progress)
        return build(rows)
    finally:
        engine.close()


# ---------------------------------------------------------------------------
# scaling
# ---------------------------------------------------------------------------


def scaling(workload, sm_counts=None, *, repeats: int = 20, warmup: int = 3, device=0,
            whole_device_too: bool = True, l2_flush: bool = False, graphs: bool = False,
            progress: bool = True) -> pd.DataFrame:
    """Time one workload alone on partitions of each size.

    Parameters
    ----------
    workload : workload or str
        A :class:`~gcexplore.workloads.Workload`, a built-in name, or ``fn(*, stream)``.
    sm_counts : sequence of int, optional
        Partition sizes; default every valid size (8, 16, ..., 128 on the H100).
    repeats : int, default 20
    warmup : int, default 3
    device : int, default 0
    whole_device_too : bool, default True
        Also time it on the whole device (primary context; ``requested_sm_count`` NA).
    l2_flush, graphs : bool, default False
        As for :func:`profile_overlap`.
    progress : bool, default True

    Returns
    -------
    pandas.DataFrame
        One row per size x repetition, columns: ``workload`` (str), ``sm_count`` (int,
        granted), ``requested_sm_count`` (Int64), ``rep`` (int), ``duration_ms`` (float,
        event span), ``flops``, ``bytes`` (float, declared, NaN if not),
        ``throughput_tflops``, ``bandwidth_gbs`` (float). ``attrs["kind"] = "scaling"``.
        :func:`summarize` adds ``speedup`` and ``parallel_efficiency``.

    Raises
    ------
    ValueError
        A size the device cannot give (the message lists the valid ones).
    MeasurementFailed, MeasurementInterrupted
        With the rows so far in ``exc.partial``.
    """
    repeats = _check_int("repeats", repeats, 1)
    warmup = _check_int("warmup", warmup, 0)
    info = device_info(device)
    wl = as_workload(workload, device=info.index)
    valid = info.valid_sm_counts()
    if sm_counts is None:
        sizes = list(valid)
    else:
        sizes = [int(k) for k in ([sm_counts] if isinstance(sm_counts, (int, np.integer)) else sm_counts)]
        bad = [k for k in sizes if k not in valid]
        if bad or not sizes:
            raise ValueError(f"cannot time {bad or sizes} SMs on {info.name} ({info.sm_count} SMs); "
                             f"valid partition sizes are {', '.join(map(str, valid))}")
    gap = launch_gap(info.index)
    engine = _Engine(info, l2_flush=l2_flush, graphs=graphs)

    def build(r):
        return _frame(r, SCALING_COLUMNS, _attrs(info, "scaling", engine, repeats=repeats, warmup=warmup,
                                                 launch_gap_us=gap, l2_flush=l2_flush, graphs=graphs))

    def time_on(part, out):
        slot = _Slot(wl, part, part.stream)
        slot.run = engine.runner(slot)
        try:
            for _ in range(warmup):
                engine.run_group([slot])
            for rep in range(repeats):
                (launches,), _ = engine.run_group([slot])
                dur = launches[0][1]
                out.append({"workload": wl.name, "sm_count": part.sm_count,
                            "requested_sm_count": part.requested_sm_count, "rep": rep,
                            "duration_ms": dur, "flops": _num(wl.flops), "bytes": _num(wl.bytes),
                            "throughput_tflops": _per_sec(wl.flops, dur) / 1e12,
                            "bandwidth_gbs": _per_sec(wl.bytes, dur) / 1e9})
        finally:
            engine.drain([part.stream])
            engine.drop_graphs()

    def measure(k, out):
        if k is None:
            time_on(engine.whole, out)
            return
        with _split([k], device=info.index) as parts:
            time_on(parts[0], out)

    layouts = [(str(k), k) for k in sizes] + ([("device", None)] if whole_device_too else [])
    try:
        rows, _ = _run_layouts(layouts, measure, build=build, progress=progress, desc=f"scaling {wl.name}")
        return build(rows)
    finally:
        engine.close()


# ---------------------------------------------------------------------------
# isolation
# ---------------------------------------------------------------------------


def isolation(critical, background, split=16, *, repeats: int = 20, warmup: int = 3, device=0,
              launches: int = 20, pacer_us: float = 50.0) -> pd.DataFrame:
    """Latency of a critical workload next to a background one: alone, plain streams, partitions.

    NVIDIA's green-context sample as a measurement. In each repetition the background
    workload runs ``launches + 1`` times back to back on its stream, and the critical
    workload is launched ``launches`` times on its own stream, launch ``j`` issued
    (through an event) the moment background launch ``j`` ends, so it arrives while
    background launch ``j + 1`` is taking the SMs. A critical launch's latency is
    from that moment to its own end event: waiting for free SMs counts. Scenarios:

    - ``"alone"``: each on the whole device without the other (the critical launches
      are paced by a one-block spin of ``pacer_us`` instead of the background);
    - ``"streams"``: both on plain streams of the whole device (no partitions);
    - ``"partitioned"``: the critical workload on its own partition of ``split`` SMs,
      the background on the complementary partition (the remainder).

    Parameters
    ----------
    critical, background : workload or str
        E.g. ``"latency"`` and ``"compute"``.
    split : int, default 16
        SMs of the critical partition.
    repeats : int, default 20
    warmup : int, default 3
    device : int, default 0
    launches : int, default 20
        Critical launches per repetition.
    pacer_us : float, default 50
        Length of the pacing spin in the ``alone`` scenario.

    Returns
    -------
    pandas.DataFrame
        Columns: ``scenario`` (str), ``role`` (``"critical"`` or ``"background"``),
        ``workload`` (str), ``rep`` (int), ``sm_count`` (int: SMs available to it),
        ``duration_ms`` (float: for the critical role one launch's latency from its
        issue to its end event, ``launches`` rows per repetition; for the background
        one launch's event span, ``launches + 1`` rows per repetition).
        ``attrs["kind"] = "isolation"``; ``attrs["critical_within_background"]``: per
        contended scenario, the fraction of critical launches that ended before the
        background's last launch did.
    """
    from .workloads import spin

    repeats = _check_int("repeats", repeats, 1)
    warmup = _check_int("warmup", warmup, 0)
    launches = _check_int("launches", launches, 1)
    if isinstance(pacer_us, bool) or not isinstance(pacer_us, (int, float)) or not pacer_us > 0:
        raise ValueError(f"pacer_us must be a positive number of microseconds, got {pacer_us!r}")
    info = device_info(device)
    crit = as_workload(critical, device=info.index)
    bg = as_workload(background, device=info.index)
    if crit.name == bg.name:
        raise ValueError(f"critical and background need different names, both are {crit.name!r}")
    plan = plan_split(info, [split] if isinstance(split, (int, np.integer)) else split)
    if len(plan.groups) != 1 or plan.remainder == 0:
        raise ValueError(f"isolation needs one critical partition and a remainder for the background; "
                         f"split {plan.requested} gives {plan.label} on {info.name}")
    gap = launch_gap(info.index)
    engine = _Engine(info, streams=2)
    pacer = spin(float(pacer_us), device=info.index, name="pacer")
    within: dict[str, float] = {}

    def build(r):
        return _frame(r, ISOLATION_COLUMNS, _attrs(
            info, "isolation", engine, repeats=repeats, warmup=warmup, launch_gap_us=gap,
            layout=plan.label, launches=launches, pacer_us=float(pacer_us),
            critical_within_background=dict(within)))

    def scenario(name, groups, out):
        for gslots in groups:
            for s in gslots:
                s.run = engine.runner(s)
        for _ in range(warmup):
            for gslots in groups:
                engine.run_group(gslots)
        inside = total = 0
        for rep in range(repeats):
            for gslots in groups:
                per_slot, _ = engine.run_group(gslots)
                ends = [[st + d for st, d in lst] for lst in per_slot]
                for i, (slot, lst) in enumerate(zip(gslots, per_slot)):
                    if slot.workload is pacer:
                        continue
                    role = "critical" if slot.workload is crit else "background"
                    for j, (start, dur) in enumerate(lst):
                        if slot.paced_by is not None:  # from its issue (the pacing end) to its end
                            dur = ends[i][j] - ends[slot.paced_by][j]
                        out.append({"scenario": name, "role": role, "workload": slot.workload.name,
                                    "rep": rep, "sm_count": slot.partition.sm_count, "duration_ms": dur})
                if name != "alone" and len(gslots) == 2:
                    inside += sum(e <= ends[0][-1] for e in ends[1])
                    total += len(ends[1])
        if total:
            within[name] = inside / total

    def measure(parts, out):
        whole = engine.whole
        s0, s1 = whole.streams[0], whole.streams[1]
        with _range("isolation alone"):
            scenario("alone", [[_Slot(bg, whole, s0, launches + 1)],
                               [_Slot(pacer, whole, s0, launches), _Slot(crit, whole, s1, launches, 0)]], out)
        with _range("isolation streams"):
            scenario("streams", [[_Slot(bg, whole, s0, launches + 1), _Slot(crit, whole, s1, launches, 0)]], out)
        rem, p0 = parts.remainder, parts[0]
        with _range("isolation partitioned"):
            scenario("partitioned", [[_Slot(bg, rem, rem.stream, launches + 1),
                                      _Slot(crit, p0, p0.stream, launches, 0)]], out)

    try:
        with _split(plan.requested, device=info.index) as parts:
            try:
                rows, _ = _run_layouts([(parts.label, parts)], measure, build=build, desc="isolation")
            finally:
                engine.drain([p.stream for p in parts.all])
        return build(rows)
    finally:
        pacer.close()
        engine.close()


# ---------------------------------------------------------------------------
# occupancy
# ---------------------------------------------------------------------------


def occupancy(workloads, split, *, device=0, warmup: int = 1) -> pd.DataFrame:
    """Which SM ran each block of built-in kernels run concurrently on their partitions, and when.

    Parameters
    ----------
    workloads : mapping or sequence
        Built-in workloads (see :func:`gcexplore.workloads.builtin`), placed as in
        :func:`profile_overlap`.
    split : int, sequence of int, or Partitioning
    device : int, default 0
    warmup : int, default 1
        Uninstrumented concurrent runs first.

    Returns
    -------
    pandas.DataFrame
        One row per block: ``partition`` (str), ``workload`` (str), ``sm_id`` (int,
        ``%smid``), ``block`` (int, block index in its launch), ``start_ns``, ``end_ns``
        (int, ``%globaltimer`` relative to the earliest block start of the run).
        ``attrs["kind"] = "occupancy"``, ``attrs["layout"]``, ``attrs["partition_sm_counts"]``.

    Raises
    ------
    ValueError
        A workload is not a built-in kernel (only those record per block), or the
        split does not fit the workloads.
    """
    warmup = _check_int("warmup", warmup, 0)
    if not isinstance(workloads, str):
        # Callables and Workloads can be checked before touching the GPU.
        items = workloads.values() if hasattr(workloads, "values") else (
            [workloads] if isinstance(workloads, Workload) or callable(workloads) else workloads)
        _require_instrumentable([w for w in items if not isinstance(w, str)])
    info, wls = _prepare(workloads, device)
    _require_instrumentable(wls)
    owned = not hasattr(split, "all")
    plan = plan_split(info, split) if owned else split.plan
    _placement(plan, len(wls))
    gap = launch_gap(info.index)
    engine = _Engine(info, streams=len(wls))
    recorders: list[Recorder] = []
    parts = None
    try:
        parts = _split(split, device=info.index) if owned else split
        placed = parts.all[:len(wls)]
        recorders = [w.instrumented() for w in wls]
        plain = [_Slot(w, p, p.stream) for w, p in zip(wls, placed)]
        inst = [_Slot(r.workload, p, p.stream) for r, p in zip(recorders, placed)]
        for _ in range(warmup):
            engine.run_group(plain)
        engine.run_group(inst)
        rows = []
        for wl, p, rec in zip(wls, placed, recorders):
            r = rec.records(stream=p.stream)
            for b in range(rec.blocks):
                rows.append({"partition": p.name, "workload": wl.name, "sm_id": int(r[b, 0]), "block": b,
                             "start_ns": int(r[b, 1]), "end_ns": int(r[b, 2])})
        t0 = min(row["start_ns"] for row in rows)
        for row in rows:
            row["start_ns"] -= t0
            row["end_ns"] -= t0
        return _frame(rows, OCCUPANCY_COLUMNS, _attrs(
            info, "occupancy", engine, repeats=1, warmup=warmup, launch_gap_us=gap, layout=parts.label,
            partition_sm_counts={p.name: p.sm_count for p in placed}))
    finally:
        for rec in recorders:
            rec.close()
        if owned and parts is not None:
            parts.close()
        engine.close()


def _require_instrumentable(items) -> None:
    bad = [getattr(w, "name", getattr(w, "__name__", repr(w))) for w in items
           if not (isinstance(w, Workload) and w.instrumentable)]
    if bad:
        raise ValueError(f"occupancy needs built-in kernels, which record per block; "
                         f"{', '.join(map(repr, bad))} cannot be instrumented "
                         "(built-ins: compute, memory, copy, spin, latency)")


# ---------------------------------------------------------------------------
# Statistics (pure)
# ---------------------------------------------------------------------------


def _stats(values) -> dict:
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return {"reps": 0, "median_ms": math.nan, "p10_ms": math.nan, "p90_ms": math.nan,
                "iqr_ms": math.nan, "noisy": False}
    q10, q25, q50, q75, q90 = np.percentile(v, [10, 25, 50, 75, 90])
    iqr = float(q75 - q25)
    return {"reps": int(v.size), "median_ms": float(q50), "p10_ms": float(q10), "p90_ms": float(q90),
            "iqr_ms": iqr, "noisy": bool(iqr > NOISY_FRACTION * q50)}


def _nanmedian(values) -> float:
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    return float(np.median(v)) if v.size else math.nan


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Medians and spread from the raw samples, with the derived comparisons.

    Dispatches on the result's kind (``df.attrs["kind"]``, else its columns).

    Overlap and sweep results: one row per (layout, mode, workload), columns
    ``layout``, ``split_sm_count``, ``mode``, ``workload``, ``partition``, ``sm_count``,
    ``requested_sm_count``, ``reps``, ``median_ms``, ``p10_ms``, ``p90_ms``, ``iqr_ms``
    (of ``duration_ms``), ``noisy`` (IQR > 10% of the median), ``makespan_median_ms``
    (median over repetitions of the mode's makespan), ``throughput_tflops`` and
    ``bandwidth_gbs`` (medians), and per layout (the same on all its rows):

    - ``speedup_vs_sequential``: sequential makespan / concurrent makespan (medians);
    - ``speedup_vs_streams``: streams makespan / concurrent makespan;
    - ``slowdown_vs_alone``: the workload's concurrent median / its alone median on
      the same partition (per workload);
    - ``lower_bound_ms``: a bound no layout can beat, the largest of (a) the slowest
      workload alone on the whole device (its ``sequential`` median), (b) the
      workloads' declared FLOPs together at the device's peak FLOP rate, (c) their
      declared bytes together at the peak bandwidth. The peaks are the highest
      median rates any workload reached on the whole device in this result (or
      ``attrs["peak_tflops"]`` / ``attrs["peak_bandwidth_gbs"]`` if higher), so the
      bound holds for the workloads as written; NaN without ``sequential`` rows;
    - ``efficiency``: ``lower_bound_ms`` / concurrent makespan median (1.0 is ideal).

    Scaling results: one row per (workload, sm_count) with the same statistics plus
    ``speedup`` (median at the smallest size / median here) and
    ``parallel_efficiency`` (speedup / (sm_count / smallest sm_count)).

    Isolation results: one row per (scenario, role, workload) with the statistics,
    ``sm_count`` and ``slowdown_vs_alone`` (median / the same role's ``alone`` median).

    Occupancy results: :func:`sm_busy`.
    """
    kind = df.attrs.get("kind")
    cols = set(df.columns)
    if kind in ("overlap", "sweep") or "mode" in cols:
        return _summarize_overlap(df)
    if kind == "isolation" or "scenario" in cols:
        return _summarize_isolation(df)
    if kind == "occupancy" or "sm_id" in cols:
        return sm_busy(df)
    if kind == "scaling" or {"workload", "sm_count", "duration_ms"} <= cols:
        return _summarize_scaling(df)
    raise ValueError(f"summarize does not know this DataFrame (kind {kind!r}, columns {sorted(cols)}); "
                     "pass a result of profile_overlap, sweep, scaling, isolation or occupancy")


def _require_columns(df, needed, where):
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise ValueError(f"{where} needs columns {missing}, which this DataFrame lacks "
                         f"(it has {list(df.columns)})")


_OVERLAP_SUMMARY_COLUMNS = [
    "layout", "split_sm_count", "mode", "workload", "partition", "sm_count", "requested_sm_count",
    "reps", "median_ms", "p10_ms", "p90_ms", "iqr_ms", "noisy", "makespan_median_ms",
    "throughput_tflops", "bandwidth_gbs", "speedup_vs_sequential", "speedup_vs_streams",
    "slowdown_vs_alone", "lower_bound_ms", "efficiency",
]


def _makespans(df: pd.DataFrame) -> dict[tuple[str, str], float]:
    per_rep = df.groupby(["layout", "mode", "rep"], sort=False)["makespan_ms"].max()
    return {k: float(v) for k, v in per_rep.groupby(level=[0, 1], sort=False).median().items()}


def _summarize_overlap(df: pd.DataFrame) -> pd.DataFrame:
    _require_columns(df, ["layout", "split_sm_count", "mode", "rep", "workload", "partition",
                          "sm_count", "duration_ms", "makespan_ms"], "summarize")
    if df.empty:
        out = pd.DataFrame(columns=_OVERLAP_SUMMARY_COLUMNS)
        out.attrs.update(df.attrs)
        return out
    makespan = _makespans(df)
    rows = []
    for (layout, mode, workload), g in df.groupby(["layout", "mode", "workload"], sort=False):
        first = g.iloc[0]
        req = first.get("requested_sm_count", pd.NA)
        row = {"layout": layout, "split_sm_count": int(first["split_sm_count"]), "mode": mode,
               "workload": workload, "partition": first["partition"], "sm_count": int(first["sm_count"]),
               "requested_sm_count": req}
        row.update(_stats(g["duration_ms"]))
        row["makespan_median_ms"] = makespan.get((layout, mode), math.nan)
        row["throughput_tflops"] = _nanmedian(g["throughput_tflops"]) if "throughput_tflops" in g else math.nan
        row["bandwidth_gbs"] = _nanmedian(g["bandwidth_gbs"]) if "bandwidth_gbs" in g else math.nan
        row["_flops"] = _nanmedian(g["flops"]) if "flops" in g else math.nan
        row["_bytes"] = _nanmedian(g["bytes"]) if "bytes" in g else math.nan
        rows.append(row)
    s = pd.DataFrame(rows)

    seq = s[s["mode"] == "sequential"]
    peak_f = np.nanmax([*seq["throughput_tflops"].tolist(), _num(df.attrs.get("peak_tflops")), -1.0])
    peak_b = np.nanmax([*seq["bandwidth_gbs"].tolist(), _num(df.attrs.get("peak_bandwidth_gbs")), -1.0])

    per_layout = {}
    for layout, g in s.groupby("layout", sort=False):
        conc = makespan.get((layout, "concurrent"), math.nan)
        seq_ms = makespan.get((layout, "sequential"), math.nan)
        streams_ms = makespan.get((layout, "streams"), math.nan)
        lb = _lower_bound(g[g["mode"] == "sequential"], peak_f, peak_b)
        per_layout[layout] = {
            "speedup_vs_sequential": seq_ms / conc if conc > 0 else math.nan,
            "speedup_vs_streams": streams_ms / conc if conc > 0 else math.nan,
            "lower_bound_ms": lb,
            "efficiency": lb / conc if conc > 0 else math.nan,
        }
    med = {(r.layout, r.mode, r.workload): r.median_ms for r in s.itertuples()}
    for col in ("speedup_vs_sequential", "speedup_vs_streams", "lower_bound_ms", "efficiency"):
        s[col] = [per_layout[lay][col] for lay in s["layout"]]
    slow = []
    for r in s.itertuples():
        c = med.get((r.layout, "concurrent", r.workload), math.nan)
        a = med.get((r.layout, "alone", r.workload), math.nan)
        slow.append(c / a if a > 0 else math.nan)
    s["slowdown_vs_alone"] = slow
    s["requested_sm_count"] = pd.array(
        [None if (v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))) else int(v)
         for v in s["requested_sm_count"]], dtype="Int64")
    s = s[_OVERLAP_SUMMARY_COLUMNS].reset_index(drop=True)
    s.attrs.update(df.attrs)
    s.attrs["summary_of"] = df.attrs.get("kind", "overlap")
    return s


def _lower_bound(seq_rows: pd.DataFrame, peak_tflops: float, peak_gbs: float) -> float:
    """max(slowest alone on the whole device, sum FLOPs / peak, sum bytes / peak) in ms."""
    if seq_rows.empty:
        return math.nan
    terms = [float(seq_rows["median_ms"].max())]
    flops = seq_rows["_flops"].dropna()
    if len(flops) and peak_tflops > 0:
        terms.append(float(flops.sum()) / (peak_tflops * 1e12) * 1e3)
    nbytes = seq_rows["_bytes"].dropna()
    if len(nbytes) and peak_gbs > 0:
        terms.append(float(nbytes.sum()) / (peak_gbs * 1e9) * 1e3)
    return max(terms)


def _layout_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per layout: its makespans per mode and the derived comparisons."""
    rows = []
    for layout, g in summary.groupby("layout", sort=False):
        ms = g.drop_duplicates("mode").set_index("mode")["makespan_median_ms"]
        first = g.iloc[0]
        rows.append({
            "layout": layout, "split_sm_count": int(first["split_sm_count"]),
            "concurrent_ms": float(ms.get("concurrent", math.nan)),
            "sequential_ms": float(ms.get("sequential", math.nan)),
            "streams_ms": float(ms.get("streams", math.nan)),
            "speedup_vs_sequential": float(first["speedup_vs_sequential"]),
            "speedup_vs_streams": float(first["speedup_vs_streams"]),
            "lower_bound_ms": float(first["lower_bound_ms"]),
            "efficiency": float(first["efficiency"]),
        })
    return pd.DataFrame(rows)


def best_split(df: pd.DataFrame) -> pd.Series:
    """The layout with the lowest median concurrent makespan.

    Parameters
    ----------
    df : pandas.DataFrame
        A :func:`sweep` or :func:`profile_overlap` result, or its :func:`summarize`.

    Returns
    -------
    pandas.Series
        Named by the layout, with ``layout``, ``split_sm_count``, ``concurrent_ms``,
        ``sequential_ms``, ``streams_ms`` (median makespans), ``speedup_vs_sequential``,
        ``speedup_vs_streams``, ``lower_bound_ms`` and ``efficiency``.

    Raises
    ------
    ValueError
        No ``concurrent`` rows.
    """
    s = df if "median_ms" in df.columns else summarize(df)
    if "mode" not in s.columns or not (s["mode"] == "concurrent").any():
        modes = sorted(set(s["mode"])) if "mode" in s.columns else []
        raise ValueError(f"best_split needs 'concurrent' rows from sweep() or profile_overlap(); "
                         f"this result has modes {modes}")
    table = _layout_table(s)
    table = table[table["concurrent_ms"].notna()]
    best = table.loc[table["concurrent_ms"].idxmin()]
    best.name = best["layout"]
    return best


_STAT_COLUMNS = ["reps", "median_ms", "p10_ms", "p90_ms", "iqr_ms", "noisy"]


def _summarize_scaling(df: pd.DataFrame) -> pd.DataFrame:
    _require_columns(df, SCALING_COLUMNS[:5], "summarize (scaling)")
    rows = []
    for (workload, sm), g in df.groupby(["workload", "sm_count"], sort=True):
        row = {"workload": workload, "sm_count": int(sm), "requested_sm_count": g["requested_sm_count"].iloc[0]}
        row.update(_stats(g["duration_ms"]))
        row["throughput_tflops"] = _nanmedian(g["throughput_tflops"]) if "throughput_tflops" in g else math.nan
        row["bandwidth_gbs"] = _nanmedian(g["bandwidth_gbs"]) if "bandwidth_gbs" in g else math.nan
        rows.append(row)
    s = pd.DataFrame(rows)
    sp, eff = [], []
    for r in s.itertuples():
        g = s[s["workload"] == r.workload]
        base = g.loc[g["sm_count"].idxmin()]
        sp.append(base["median_ms"] / r.median_ms if r.median_ms > 0 else math.nan)
        eff.append(sp[-1] / (r.sm_count / base["sm_count"]))
    s["speedup"] = sp
    s["parallel_efficiency"] = eff
    s["requested_sm_count"] = pd.array(
        [None if (v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))) else int(v)
         for v in s["requested_sm_count"]], dtype="Int64")
    s.attrs.update(df.attrs)
    s.attrs["summary_of"] = "scaling"
    return s


def _summarize_isolation(df: pd.DataFrame) -> pd.DataFrame:
    _require_columns(df, ISOLATION_COLUMNS, "summarize (isolation)")
    rows = []
    for (scenario, role, workload), g in df.groupby(["scenario", "role", "workload"], sort=False):
        row = {"scenario": scenario, "role": role, "workload": workload, "sm_count": int(g["sm_count"].iloc[0])}
        row.update(_stats(g["duration_ms"]))
        rows.append(row)
    s = pd.DataFrame(rows)
    alone = {(r.role, r.workload): r.median_ms for r in s.itertuples() if r.scenario == "alone"}
    s["slowdown_vs_alone"] = [r.median_ms / alone[(r.role, r.workload)]
                              if alone.get((r.role, r.workload), 0) > 0 else math.nan for r in s.itertuples()]
    s.attrs.update(df.attrs)
    s.attrs["summary_of"] = "isolation"
    return s


def sm_busy(df: pd.DataFrame) -> pd.DataFrame:
    """Per-SM busy fractions from :func:`occupancy` records.

    Returns
    -------
    pandas.DataFrame
        One row per (sm_id, partition, workload), sorted by ``sm_id``: ``sm_id`` (int),
        ``partition`` (str), ``workload`` (str), ``blocks`` (int: blocks that ran there),
        ``busy_ns`` (int: length of the union of those blocks' intervals),
        ``busy_fraction`` (float: ``busy_ns`` over the run's span, earliest block start
        to latest block end).
    """
    _require_columns(df, OCCUPANCY_COLUMNS, "sm_busy")
    cols = ["sm_id", "partition", "workload", "blocks", "busy_ns", "busy_fraction"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    span = int(df["end_ns"].max() - df["start_ns"].min())
    rows = []
    for (sm, part, wl), g in df.groupby(["sm_id", "partition", "workload"], sort=True):
        iv = sorted(zip(g["start_ns"].astype("int64"), g["end_ns"].astype("int64")))
        busy, cur_s, cur_e = 0, None, None
        for s0, e0 in iv:
            if cur_e is None or s0 > cur_e:
                if cur_e is not None:
                    busy += cur_e - cur_s
                cur_s, cur_e = s0, e0
            else:
                cur_e = max(cur_e, e0)
        busy += cur_e - cur_s
        rows.append({"sm_id": int(sm), "partition": part, "workload": wl, "blocks": len(iv),
                     "busy_ns": int(busy), "busy_fraction": busy / span if span > 0 else math.nan})
    out = pd.DataFrame(rows, columns=cols)
    out.attrs.update(df.attrs)
    out.attrs["summary_of"] = "occupancy"
    return out
