"""The timing engine: how gcexplore times workloads on streams, and nothing else.

Interface (used by the experiments in :mod:`gcexplore.profile` and by ``bench/``):

- :class:`Engine` ``(info, *, streams=2, l2_flush=False, graphs=False, trace=None, gate=None,
  queue_every=False)``: the measuring machinery of one device (a context manager).
  ``engine.run_group(slots, chain=False)`` runs one repetition of :class:`Slot` s and returns each launch's
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
A gate kernel on a gate stream holds the GPU while the host enqueues the whole
repetition, then a common start event is recorded on the gate stream; every stream of
the repetition waits on it, runs a 1 us settling spin (so its start event follows work
on its own stream rather than a cross-stream wait, which would add 4-11 us of jitter),
records its own start event, launches its workload, and records its end event. The
host synchronises once per repetition. With ``l2_flush`` a buffer of twice the L2 size
is overwritten on the gate stream before the gate.

The gate (:mod:`gcexplore.experiments.gate`; ``gate=`` or ``GCEXPLORE_GATE``): ``flag``, the
default, spins until the host writes the repetition's number into host-mapped memory after
its last launch (giving up after 20 ms: such a repetition is measured again); ``timed`` spins
for a time sized after the host's enqueues (it grows at once when an enqueue comes close to it
and shrinks slowly after), and is what the engine uses where host-mapped memory cannot be had.

A sweep's repetitions go through ``engine.run_reps``: the host enqueues repetition
``r + 1`` while ``r`` runs, behind a gate that waits for ``r``'s end, so neither the
enqueue nor the Python between repetitions leaves the GPU idle: repetitions several times
longer than the host's enqueue (shorter ones go one at a time: the next one's launches would run
beside the measured one, which moved PyTorch medians by up to 2.8% in batch k1). Behind the timed
gate one whose predecessor had already ended when its enqueue finished is measured again, gated;
behind the flag every queued repetition is clean (the flag also waits for the host's last launch).

Event spans include a launch gap of a few microseconds that the kernel itself does
not see (about 8 us on the H100): :func:`launch_gap` measures it as the event time
minus the ``%globaltimer`` span of a spin kernel.

Over 500 lines: the gate, settling spin, L2 flush, graphs and NVML hooks all act on one repetition
loop.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..device.driver import DeviceInfo, check, device_info, use
from ..device.partitions import whole_device
from ..workloads.workload import Workload
from .gate import FlagGate, gate_kind, phase_totals
from .nvml import Nvml, nvtx_available, nvtx_module, nvtx_range

__all__ = ["Engine", "Nvml", "Slot", "capture_graph", "launch_gap", "nvtx_available", "nvtx_range", "spin_samples"]

_GATE_US_START = 60.0
_GATE_US_MAX = 20_000.0
_GATE_US_QUEUED = 5.0  # the gate of a repetition enqueued while the one before still runs
# queue a repetition behind the running one only when that one takes this many host enqueues and more
_QUEUE_FACTOR, _QUEUE_MARGIN_US = 4.0, 200.0
_RECENT = 64  # with the flag gate, the queueing rule reads the slowest of this many last enqueues (a stall ages out)
_SETTLE_NS = 1_000  # the tiny spin each stream runs after its waits, before its start event
_FLAG_GIVE_UPS = 3  # the flag gate timed out this many repetitions in a row: the timed gate from then on
_UNTRACED = contextlib.nullcontext()


def _tag(trace, role: str, slot=None, launch: int = 0):
    """The trace's correlation scope of one launch, or nothing when not tracing."""
    return _UNTRACED if trace is None else trace.tag(role, slot, launch)


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
    clean: bool  # no host time can show in its timings (a flag gate's: known once it has ended)
    seq: int = 0  # the flag gate's sequence number (0: a timed gate)
    gate_us: float = 0.0  # the timed gate's length
    flag: Any = None  # the FlagGate that holds its outcome


class Engine:
    """Measuring machinery on one device: gate stream and kernel, L2 flush, NVML, graphs."""

    _flag: FlagGate | None = None  # None: the timed gate
    _retired: FlagGate | None = None  # a flag gate given up on (repetitions in flight may still read it)
    gate_note = ""  # why the timed gate where the flag was asked for
    _gave_up_in_row = 0

    def __init__(self, info: DeviceInfo, *, streams: int = 2, l2_flush: bool = False,
                 graphs: bool = False, trace=None, gate: str | None = None, queue_every: bool = False):
        self.gate_kind = gate_kind(gate)  # a bad value fails before any GPU work
        # Every repetition behind the one before (flag gate only). Not the default: the host then launches the
        # next repetition while the measured one runs; batch k1 (H200) measured PyTorch pairs in sequential mode
        # 1.5-2.8% slower so than one at a time.
        self.queue_every = queue_every
        self._recent: collections.deque = collections.deque(maxlen=_RECENT)

        from cuda.core import EventOptions, LaunchConfig, launch

        from ..device.kernels import builtin_kernel

        self.host = phase_totals()
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
                if self.gate_kind == "flag":
                    try:
                        self._flag = FlagGate(builtin_kernel(dev, "gcx_gate"), launch, LaunchConfig(grid=1, block=1),
                                              _GATE_US_MAX)
                    except Exception as e:  # no host-mapped memory here: the timed gate, and why
                        self.gate_kind, self.gate_note = "timed", f"flag gate unavailable: {e}"
            self.nvml = Nvml(info.index, info.pci_bus_id)
            if trace is not None:  # fails in one sentence now, not after a sweep
                trace.probe(lambda: self.launch_spin(self.gate, 1_000), self.gate)
        except BaseException:
            if self._flag is not None:
                self._flag.close()
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
        return self._clean(slots, chain, label, self._finish(self._enqueue(slots, chain, label)))

    def _clean(self, slots, chain, label, result, behind: _Queued | None = None):
        """``(per_slot, makespan)`` of a collected repetition. One that its flag gate's timeout let go
        (host time may show in it) is measured again, gated, once ``behind`` (in flight) has ended;
        after ``_FLAG_GIVE_UPS`` such in a row the engine keeps the timed gate, and says why."""
        per_slot, makespan, clean = result
        while not clean:
            self.host["flag_timeouts"] += 1
            self.host["measured_again"] += 1
            self._gave_up_in_row += 1
            if self._gave_up_in_row >= _FLAG_GIVE_UPS and self._flag is not None:
                self._retired, self._flag, self.gate_kind = self._flag, None, "timed"
                self.gate_note = (f"the flag gate timed out ({_GATE_US_MAX / 1000:.0f} ms) on {self._gave_up_in_row} "
                                  "repetitions in a row (a workload that waits for the GPU inside its launch?): "
                                  "the timed gate from then on")
            if behind is not None:
                for pairs in behind.events:
                    pairs[-1][1].sync()
                behind = None
            per_slot, makespan, clean = self._finish(self._enqueue(slots, chain, label))
        self._gave_up_in_row = 0
        return per_slot, makespan

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
        time. With the flag gate a queued repetition is clean whenever it ran (its gate also
        waits for the host's last launch), the rule reads the slowest of the last 64 enqueues
        (a stall ages out), and ``queue_every`` queues every repetition; one that the flag's
        timeout let go is measured again. A workload that raises while ``r + 1`` is enqueued
        still gives ``r``'s times first. Not pipelined while tracing. ``on_queued(i)``, when
        given, runs once label ``i``'s repetition is enqueued for good (host work that can
        overlap it: NVML).
        """
        pipelined = self.trace is None
        pending, last_ms = None, None  # (label, queued repetition) not yet collected; last makespan

        def collect(behind=None):
            nonlocal pending, last_ms
            assert pending is not None  # collected only once something is queued
            label, queued = pending
            pending = None
            out = (label, *self._clean(slots, chain, label, self._finish(queued), behind))
            last_ms = out[2]
            return out

        for i, label in enumerate(labels):
            # the flag gate's rule reads recent enqueues (a stall ages out), the timed gate's the slowest ever
            # (its queued repetitions are clean only where the enqueue ends before the one before does)
            flag = self._flag is not None  # (not once the engine fell back to the timed gate)
            slowest = max(self._recent, default=0.0) if flag else self.max_enqueue_us
            behind = pipelined and ((flag and self.queue_every) or (
                last_ms is not None and last_ms * 1e3 > _QUEUE_FACTOR * slowest + _QUEUE_MARGIN_US))
            if pending is not None and not behind:
                yield collect()
            try:
                queued = self._enqueue(slots, chain, label, after=pending[1] if pending else None)
            except BaseException:
                if pending is not None:  # measured already: its times reach the caller first
                    yield collect()
                raise
            if not queued.clean:  # (the timed gate's; a flag gate's is known at its end)
                yield collect()
                self._finish(queued)  # it may hold host time: measured again, gated
                pipelined = False
                queued = self._enqueue(slots, chain, label)
            if on_queued is not None:
                on_queued(i)
            if pending is not None:
                yield collect(behind=queued)
            pending = (label, queued)
        if pending is not None:
            yield collect()

    def _enqueue(self, slots: Sequence[Slot], chain: bool, label: tuple | None, after=None) -> _Queued:
        """Enqueue one repetition behind the gate; behind the end of ``after`` when given."""
        from cuda.bindings import driver

        t_in = time.perf_counter()
        gate, trace, flag = self.gate, self.trace, self._flag
        seq, gate_us = 0, 0.0
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
            if flag is not None:
                seq = flag.launch(gate)
            else:
                gate_us = _GATE_US_QUEUED if after is not None else self.gate_us
                self.launch_spin(gate, int(gate_us * 1000))
        common = gate.record(options=self.event_options)
        t0 = time.perf_counter()
        events = []
        try:
            self._launch_slots(slots, chain, common, events)
            enqueue_us = (time.perf_counter() - t0) * 1e6
        finally:
            if seq and flag is not None:  # after the last launch (and on a raise: no gate waits out its timeout)
                flag.release(seq)
        # Behind ``after`` with the timed gate: clean only if ``after`` was still running now, so
        # this repetition's gate had not started before its enqueue ended. The flag's: known at its end.
        clean = seq or after is None or not all(pairs[-1][1].is_done for pairs in after.events)
        self.host["reps"] += 1
        self.host["queued"] += after is not None
        self.host["enqueue_s"] += time.perf_counter() - t_in
        return _Queued(common, events, enqueue_us, after is None, bool(clean), seq, gate_us, flag)

    def _launch_slots(self, slots, chain, common, events) -> None:
        """Each slot's waits, settling spin, and launches between its events (into ``events``)."""
        trace = self.trace
        prev = None
        nvtx = nvtx_module()
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

    def _finish(self, queued: _Queued):
        """Wait for a queued repetition: its launches' times, makespan (see :meth:`run_group`), and
        whether it is clean (a flag gate's: the flag, not the timeout, let it go)."""
        common, events, enqueue_us = queued.common, queued.events, queued.enqueue_us
        t0 = time.perf_counter()
        for pairs in events:
            pairs[-1][1].sync()
        t1 = time.perf_counter()
        per_slot = [[(float(e0 - common), float(e1 - e0)) for e0, e1 in pairs] for pairs in events]
        makespan = max(float(pairs[-1][1] - common) for pairs in events)
        self.max_enqueue_us = max(self.max_enqueue_us, enqueue_us)
        self._recent.append(enqueue_us)
        clean = queued.clean
        if queued.seq:
            clean, waited_s = queued.flag.outcome(queued.seq)
            self.host["gate_idle_s"] += waited_s
        else:
            self.host["gate_idle_s"] += queued.gate_us * 1e-6
        if queued.gated and not queued.seq:
            # The gate must outlast the host's enqueueing, or host latency leaks into the
            # timings: grow it at once when it came close, and let it shrink slowly after
            # a one-off host stall (a 1.3 ms stall otherwise kept a 2.6 ms gate on every
            # later repetition of a sweep).
            if enqueue_us > 0.7 * self.gate_us:
                self.gate_us = min(_GATE_US_MAX, 2.0 * enqueue_us + 20.0)
            else:
                self.gate_us = max(_GATE_US_START, 2.0 * enqueue_us + 20.0, 0.8 * self.gate_us)
        self.host["wait_s"] += t1 - t0
        self.host["collect_s"] += time.perf_counter() - t1
        return per_slot, makespan, clean

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
        for flag in (self._flag, self._retired):
            if flag is not None:
                with contextlib.suppress(Exception):
                    flag.close()
        self._flag = self._retired = None
        if self._l2 is not None:
            with contextlib.suppress(Exception):
                self._l2[0].close(self.gate)
            self._l2 = None
        try:
            self.whole.close()
        finally:
            self._current.close()

    def metadata(self) -> dict:
        """What a result records about the engine: the gate (``flag`` or ``timed``, and why timed
        where the flag was asked for), the timed gate's last length, slowest enqueue, NVML, NVTX, and
        ``engine_phases``: repetitions enqueued (``queued`` behind another, ``measured_again``,
        ``flag_timeouts``) and seconds per phase: the GPU waiting at the gate (``gate_idle_s``), the
        host enqueueing (``enqueue_s``), waiting for the end (``wait_s``), reading the times
        (``collect_s``)."""
        host = {k: round(v, 6) if isinstance(v, float) else v for k, v in self.host.items()}
        return {"gate": self.gate_kind, "gate_note": self.gate_note, "gate_us": round(self.gate_us, 1),
                "max_enqueue_us": round(self.max_enqueue_us, 1), "engine_phases": host,
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
