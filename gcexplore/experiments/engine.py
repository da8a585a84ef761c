"""The timing engine: how gcexplore times workloads on streams, and nothing else.

Interface (used by the experiments in :mod:`gcexplore.profile` and by ``bench/``):

- :class:`Engine` ``(info, *, streams=2, l2_flush=False, graphs=False, trace=None)``: the
  measuring machinery of one device (a context manager). ``engine.run_group(slots,
  chain=False)`` runs one repetition of :class:`Slot` s and returns each launch's
  ``(start_ms, duration_ms)`` and the makespan; ``engine.runner(slot)`` is what
  launches a slot once (a direct call or its CUDA graph); ``engine.whole`` is the
  whole device as a partition; ``engine.nvml`` reads SM clock and power;
  ``engine.metadata()`` is what a result records about the engine. With a
  :class:`gcexplore.tracing.Collector` as ``trace``, every launch of a repetition
  carries an external correlation id (gate, settling spin, workload launch) and
  ``run_group(..., label=(layout, mode, rep))`` names the repetition for the trace.
- :func:`launch_gap`: the event time a kernel does not see, measured once per device.
- :func:`spin_samples`: event durations and in-kernel spans of a spin kernel.
- :func:`nvtx_range`: a named range in Nsight Systems when nvtx is installed.

How a repetition is timed
-------------------------
A short spin kernel on a gate stream holds the GPU while the host enqueues the whole
repetition, then a common start event is recorded on the gate stream; every stream of
the repetition waits on it, runs a 1 us settling spin (so its start event follows work
on its own stream rather than a cross-stream wait, which would add 4-11 us of jitter),
records its own start event, launches its workload, and records its end event. The
host synchronises once per repetition. The gate grows at once when the host's enqueue
time comes close to it and shrinks slowly afterwards. With ``l2_flush`` a buffer of
twice the L2 size is overwritten on the gate stream before the gate.

A sweep's repetitions go through ``engine.run_reps``: the host enqueues repetition
``r + 1`` while ``r`` runs, behind a short gate that waits for ``r``'s end, so neither the
enqueue nor the Python between repetitions leaves the GPU idle; a repetition whose
predecessor had already ended when its enqueue finished is measured again, gated.

Event spans include a launch gap of a few microseconds that the kernel itself does
not see (about 8 us on the H100): :func:`launch_gap` measures it as the event time
minus the ``%globaltimer`` span of a spin kernel.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..device.driver import DeviceInfo, check, device_info, use
from ..device.partitions import whole_device
from ..workloads.workload import Workload

__all__ = ["Engine", "Nvml", "Slot", "capture_graph", "launch_gap", "nvtx_available", "nvtx_range", "spin_samples"]

_GATE_US_START = 60.0
_GATE_US_MAX = 20_000.0
_GATE_US_QUEUED = 5.0  # the gate of a repetition enqueued while the one before still runs
# queue a repetition behind the running one only when that one takes this many host enqueues and more
_QUEUE_FACTOR, _QUEUE_MARGIN_US = 4.0, 200.0
_SETTLE_NS = 1_000  # the tiny spin each stream runs after its waits, before its start event
_UNTRACED = contextlib.nullcontext()


def _tag(trace, role: str, slot=None, launch: int = 0):
    """The trace's correlation scope of one launch, or nothing when not tracing."""
    return _UNTRACED if trace is None else trace.tag(role, slot, launch)


class Nvml:
    """SM clock and board power via nvidia-ml-py, or NaN when it is absent."""

    def __init__(self, device_index: int, pci_bus_id: str = ""):
        self.handle = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            try:
                if not pci_bus_id:  # DeviceInfo read it already; a hand-built one may lack it
                    from cuda.core import Device

                    pci_bus_id = Device(device_index).pci_bus_id
                self.handle = pynvml.nvmlDeviceGetHandleByPciBusId_v2(pci_bus_id)
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


def nvtx_range(message: str):
    """An NVTX range in the "gcexplore" domain when the nvtx package is present."""
    nvtx = _nvtx()
    if nvtx is None:
        return contextlib.nullcontext()
    return nvtx.annotate(message, domain="gcexplore")


# ---------------------------------------------------------------------------
# The timing engine (GPU)
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class Slot:
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


def capture_graph(launch: Callable[[], None], stream, where) -> tuple[Any, Any]:
    """``(graph, exec)``: what ``launch()`` enqueues on ``stream``, captured in a CUDA graph and
    instantiated with ``where`` (a partition or device) current; launch it with
    ``cuGraphLaunch(exec, stream.handle)`` and destroy both when done."""
    from cuda.bindings import driver

    mode = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
    check(driver.cuStreamBeginCapture(stream.handle, mode), "cuStreamBeginCapture")
    try:
        launch()
    except BaseException:
        with contextlib.suppress(Exception):
            driver.cuStreamEndCapture(stream.handle)
        raise
    graph = check(driver.cuStreamEndCapture(stream.handle), "cuStreamEndCapture")
    try:
        with use(where):
            exe = check(driver.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
    except BaseException:
        with contextlib.suppress(Exception):
            driver.cuGraphDestroy(graph)  # the captured graph would leak
        raise
    return graph, exe


class _Queued(NamedTuple):
    """One enqueued repetition, not yet collected."""

    common: Any  # the start event every stream waits on
    events: list  # per slot: (start, end) event pairs
    enqueue_us: float
    gated: bool  # behind a gate sized to the enqueue (not behind a running repetition)
    clean: bool  # no host time can show in its timings


class Engine:
    """Measuring machinery on one device: gate stream and kernel, L2 flush, NVML, graphs."""

    def __init__(self, info: DeviceInfo, *, streams: int = 2, l2_flush: bool = False,
                 graphs: bool = False, trace=None):
        from cuda.core import EventOptions, LaunchConfig, launch

        from ..device.kernels import builtin_kernel

        self.info = info
        self.graphs = graphs
        self.trace = trace  # a tracing.Collector, or None
        self.gate_us = _GATE_US_START
        self.max_enqueue_us = 0.0
        self.event_options = EventOptions(timing_enabled=True)
        self._launch, self._spin_config = launch, LaunchConfig(grid=1, block=32)  # built once: host time per rep
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
                self._spin = builtin_kernel(dev, "gcx_spin")
                self._l2 = None
                if l2_flush:
                    size = 2 * max(int(dev.properties.l2_cache_size), 1 << 20)
                    self._l2 = (dev.allocate(size, stream=self.gate), size)
            self.nvml = Nvml(info.index, info.pci_bus_id)
            if trace is not None:  # fails in one sentence now, not after a sweep
                trace.probe(lambda: self.launch_spin(self.gate, 1_000), self.gate)
        except BaseException:
            self.whole.close()
            self._current.close()
            raise

    # -- launching ---------------------------------------------------------
    def launch_spin(self, stream, ns: int) -> None:
        self._launch(stream, self._spin_config, self._spin, np.uint64(ns), np.uint64(0))

    def runner(self, slot: Slot) -> Callable[[], None]:
        """What launches ``slot``'s workload once: a direct call, or its CUDA graph."""
        wl, stream = slot.workload, slot.stream
        if not self.graphs:
            return lambda: wl(stream=stream)
        from cuda.bindings import driver

        key = (id(wl), int(stream.handle))
        if key not in self._graphs:
            if getattr(wl, "new_round", None) is not None:  # setup= inputs are made outside the capture
                wl(stream=stream)
            self._graphs[key] = capture_graph(lambda: wl(stream=stream), stream, slot.partition)
        exe = self._graphs[key][1]
        return lambda: check(driver.cuGraphLaunch(exe, stream.handle), "cuGraphLaunch")

    def drop_graphs(self) -> None:
        from cuda.bindings import driver

        for graph, exe in self._graphs.values():
            with contextlib.suppress(Exception):
                driver.cuGraphExecDestroy(exe)
            with contextlib.suppress(Exception):
                driver.cuGraphDestroy(graph)
        self._graphs.clear()

    def run_group(self, slots: Sequence[Slot], *, chain: bool = False, label: tuple | None = None):
        """One repetition: gate, common start, every slot's launches, one sync.

        Returns ``(per_slot, makespan_ms)``; ``per_slot[i]`` lists ``(start_ms,
        duration_ms)`` for each launch of slot ``i``. With ``chain`` each slot starts
        after the previous one ended (``alone`` and ``sequential``). ``label``
        ``(layout, mode, rep)`` names a measured repetition in the trace (None: warm-up).
        """
        return self._finish(self._enqueue(slots, chain, label))

    def run_reps(self, slots: Sequence[Slot], labels: Sequence[tuple], *, chain: bool = False, on_queued=None):
        """Repetitions of one group, one per label, each enqueued while the one before runs.

        Yields ``(label, per_slot, makespan_ms)`` in order, as :meth:`run_group` returns
        them. Where the last repetition collected took several times the host's enqueue,
        the host enqueues repetition ``r + 1`` (behind a gate that waits for the end of
        ``r``) while ``r`` runs, then collects ``r``: neither the enqueue nor the Python
        between repetitions leaves the GPU idle. Shorter repetitions go one at a time
        behind a sized gate, as :meth:`run_group` runs them, so every workload is called
        once per repetition. A queued repetition counts only if ``r`` was still running
        when its enqueue finished (its gate had not started, so no host time can show in
        it); otherwise (a host stall) it is measured again, gated, and the rest go one at a
        time. A workload that raises while ``r + 1`` is enqueued still gives ``r``'s
        times first. Not pipelined while tracing. ``on_queued(i)``, when given, runs once
        label ``i``'s repetition is enqueued for good (host work that can overlap it: NVML).
        """
        pipelined = self.trace is None
        pending, last_ms = None, None  # (label, queued repetition) not yet collected; last makespan

        def collect():
            nonlocal pending, last_ms
            out = (pending[0], *self._finish(pending[1]))
            pending, last_ms = None, out[2]
            return out

        for i, label in enumerate(labels):
            behind = (pipelined and pending is not None and last_ms is not None
                      and last_ms * 1e3 > _QUEUE_FACTOR * self.max_enqueue_us + _QUEUE_MARGIN_US)
            if pending is not None and not behind:
                yield collect()
            try:
                queued = self._enqueue(slots, chain, label, after=pending[1] if pending else None)
            except BaseException:
                if pending is not None:  # measured already: its times reach the caller first
                    yield collect()
                raise
            if not queued.clean:
                yield collect()
                self._finish(queued)  # it may hold host time: measured again, gated
                pipelined = False
                queued = self._enqueue(slots, chain, label)
            if on_queued is not None:
                on_queued(i)
            if pending is not None:
                yield collect()
            pending = (label, queued)
        if pending is not None:
            yield collect()

    def _enqueue(self, slots: Sequence[Slot], chain: bool, label: tuple | None, after=None) -> _Queued:
        """Enqueue one repetition behind the gate; behind the end of ``after`` when given."""
        from cuda.bindings import driver

        gate, trace = self.gate, self.trace
        if trace is not None:
            trace.group(label)
        with _tag(trace, "gate"):
            if after is not None:
                for pairs in after.events:
                    gate.wait(pairs[-1][1])
            if self._l2 is not None:
                buf, size = self._l2
                check(driver.cuMemsetD32Async(int(buf.handle), 0, size // 4, int(gate.handle)),
                      "cuMemsetD32Async")
            gate_us = _GATE_US_QUEUED if after is not None else self.gate_us
            self.launch_spin(gate, int(gate_us * 1000))
        common = gate.record(options=self.event_options)
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
                with _tag(trace, "settle", slot):
                    self.launch_spin(s, _SETTLE_NS)
            run = slot.run or self.runner(slot)
            pairs = []
            if nvtx is not None:
                nvtx.pushnvtx_range(f"{slot.name}: {slot.workload.name}", domain="gcexplore")
            try:
                for j in range(slot.launches):
                    if slot.paced_by is not None:
                        s.wait(events[slot.paced_by][j][1])
                    e0 = s.record(options=self.event_options)
                    with _tag(trace, "workload", slot, j):
                        run()
                    e1 = s.record(options=self.event_options)
                    pairs.append((e0, e1))
            finally:
                if nvtx is not None:
                    nvtx.popnvtx_range(domain="gcexplore")
            events.append(pairs)
            prev = pairs[-1][1]
        enqueue_us = (time.perf_counter() - t0) * 1e6
        # Behind ``after``: clean only if ``after`` was still running now, so this
        # repetition's gate had not started before its enqueue ended.
        clean = after is None or not all(pairs[-1][1].is_done for pairs in after.events)
        return _Queued(common, events, enqueue_us, after is None, clean)

    def _finish(self, queued: _Queued):
        """Wait for a queued repetition; its launches' times and makespan (see :meth:`run_group`)."""
        common, events, enqueue_us = queued.common, queued.events, queued.enqueue_us
        for pairs in events:
            pairs[-1][1].sync()
        per_slot = [[(float(e0 - common), float(e1 - e0)) for e0, e1 in pairs] for pairs in events]
        makespan = max(float(pairs[-1][1] - common) for pairs in events)
        self.max_enqueue_us = max(self.max_enqueue_us, enqueue_us)
        if queued.gated:
            # The gate must outlast the host's enqueueing, or host latency leaks into the
            # timings: grow it at once when it came close, and let it shrink slowly after
            # a one-off host stall (a 1.3 ms stall otherwise kept a 2.6 ms gate on every
            # later repetition of a sweep).
            if enqueue_us > 0.7 * self.gate_us:
                self.gate_us = min(_GATE_US_MAX, 2.0 * enqueue_us + 20.0)
            else:
                self.gate_us = max(_GATE_US_START, 2.0 * enqueue_us + 20.0, 0.8 * self.gate_us)
        return per_slot, makespan

    def warm(self, slots: Sequence[Slot], *, calls: bool = False, label: tuple | None = None) -> None:
        """Warm what a new round made afresh without a warm-up repetition: a 1 us spin on each
        slot's stream and on the whole device's streams (with ``calls``, each slot's workload
        once as well), then wait for them, so none of it runs into a measured repetition."""
        trace = self.trace
        if trace is not None:
            trace.group(label)
        for slot in slots:
            with _tag(trace, "settle", slot):
                self.launch_spin(slot.stream, _SETTLE_NS)
            if calls:
                with _tag(trace, "workload", slot):
                    (slot.run or self.runner(slot))()
        for s in self.whole.streams:
            with _tag(trace, "settle"):
                self.launch_spin(s, _SETTLE_NS)
        for s in [*(slot.stream for slot in slots), *self.whole.streams]:
            s.sync()

    def new_round(self) -> None:
        """Fresh whole-device streams and gate for a new round (state that differs between runs
        is drawn again: stream handles, and with them a library's per-stream workspaces)."""
        self.drain([self.gate, *self.whole.streams])
        self.drop_graphs()
        old, gate = self.whole, self.gate
        self.whole = whole_device(self.info.index, streams=len(old.streams))
        self.gate = self.whole.create_stream()
        with contextlib.suppress(Exception):  # drained above; the L2 buffer is freed on the new gate
            gate.close()
        old.close()

    def clocks(self) -> dict:
        """NVML SM clock and power now, as the ``*_before`` columns of a round's rows."""
        clock, power = self.nvml.read()
        return {"sm_clock_mhz_before": clock, "power_w_before": power}

    def stamp(self, rows: list[dict], before: dict) -> None:
        """Write the round's clock and power (read before, and now) into its rows."""
        clock, power = self.nvml.read()
        for r in rows:
            r.update(before, sm_clock_mhz=clock, power_w=power)

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

    def metadata(self) -> dict:
        """What a result records about the engine: final gate, slowest enqueue, NVML, NVTX."""
        return {"gate_us": round(self.gate_us, 1), "max_enqueue_us": round(self.max_enqueue_us, 1),
                "nvml": self.nvml.available, "nvtx": nvtx_available()}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------------------
# Launch-gap calibration
# ---------------------------------------------------------------------------

_gap_cache: dict[int, float] = {}


def spin_samples(engine: Engine, partition, us: float, repeats: int, warmup: int = 3):
    """Event duration and in-kernel ``%globaltimer`` span (both us) of a spin kernel."""
    from ..workloads.builtins import spin

    wl = spin(us, device=engine.info.index)
    rec = wl.instrumented()
    try:
        slot = Slot(rec.workload, partition, partition.stream)
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
        with Engine(info) as engine:
            ev, span = spin_samples(engine, engine.whole, 100.0, 20)
        _gap_cache[info.index] = float(np.median(ev - span))
    return _gap_cache[info.index]


def nvtx_available() -> bool:
    """True when the nvtx package is present (ranges show in Nsight Systems)."""
    return _nvtx() is not None
