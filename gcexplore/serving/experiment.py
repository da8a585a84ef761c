"""Serving splits: decode and prefill on one GPU, measured per split under an open-loop load.

:func:`serve` runs, for every decode share and load: decode continuously on its partition, prefill
requests arriving open-loop on the complement (Poisson, or bursts), and records every decode gap
(the inter-token latency, ITL) and every request's time to first token (TTFT, queueing included),
all on the GPU's own clock (``%globaltimer``, written by a one-thread kernel at the end of each
decode step, inside its CUDA graph, and after each request, and by the kernel that holds a request
until it arrives). Baselines on the same
arrivals: both roles on the whole GPU in two plain streams (``streams``), and one stream alternating
a decode step and a prefill chunk (``time_sliced``, as chunked prefill does). ``alone`` measures
each role by itself on its partition, ``paired`` both at once on each split with requests back to
back (no arrivals): the step profiles predictions start from (the paired one holds what sharing
DRAM and L2 costs each role).

The host only keeps the streams fed: requests are enqueued a few ahead, each held on the GPU until
its arrival time, and decode steps in batches ahead of the GPU; the time-sliced scheduler decides
one iteration ahead, as an engine's overlap scheduler does.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import deque
from collections.abc import Sequence

import numpy as np

from .._checks import as_count, as_int
from ..device import partitions
from ..device.driver import check, device_info, use
from ..experiments.engine import capture_graph
from ..experiments.experiment import result_frame
from ..experiments.runner import closing_bar, keeping, progress_lines, round_plan
from ..schema import MAX_ROUNDS, new_run_id
from .roles import ARRIVALS, ServingModel, arrivals

__all__ = ["SERVING_MODES", "serve", "traced_splits"]

#: What a serving run measures, in order.
SERVING_MODES = ("alone", "paired", "partitioned", "streams", "time_sliced")

_AHEAD = 3          # requests enqueued beyond the one being served
_DECODE_BATCH = 16  # decode steps enqueued at once; more are added when half have run
_MAX_STEPS = 1 << 17
_ALONE_STEPS, _ALONE_REQUESTS = 40, 4
_PAIRED_REQUESTS = 8  # back to back next to decode: the contended service time and decode gaps
_GIVE_UP_NS = 30_000_000_000  # an arrival kernel whose run never started gives up after 30 s
_STALL_S = 45.0               # the host gives up on a run this long past its deadline
_LEAD_MS = 20.0               # arrivals start this long after a run's first decode tick


class _Clock:
    """Device buffers the tick / arrive kernels write ``%globaltimer`` into (ns)."""

    def __init__(self, info, torch, max_requests: int):
        from ..device.kernels import builtin_kernel

        with use(info.index) as dev:
            self._tick = builtin_kernel(dev, "gcx_tick")
            self._arrive = builtin_kernel(dev, "gcx_arrive")
        d = torch.device("cuda", info.index)
        self.steps = torch.zeros(_MAX_STEPS + 1, dtype=torch.int64, device=d)
        self.start = torch.zeros(max(1, max_requests), dtype=torch.int64, device=d)
        self.end = torch.zeros_like(self.start)
        self.stamped = torch.zeros(1, dtype=torch.int64, device=d)  # the last step slot stamped
        self.torch = torch

    def reset(self):
        for b in (self.steps, self.start, self.end, self.stamped):
            b.zero_()
        self.torch.cuda.synchronize()

    def _launch(self, stream, kernel, *args):
        from cuda.core import LaunchConfig, launch

        launch(stream, LaunchConfig(grid=1, block=1), kernel, *args)

    def tick(self, stream, buf, i: int):
        if i >= buf.numel():  # the kernel would write past the buffer
            raise IndexError(f"clock slot {i} past its buffer of {buf.numel()}")
        self._launch(stream, self._tick, np.uint64(buf.data_ptr()), np.uint64(i), np.uint64(0),
                     np.uint64(buf.numel()))

    def step_tick(self, stream):
        """Stamp the next decode step's slot (a device-side count, so a captured graph can hold it:
        the stamp then follows its step's last kernel on the GPU, whenever the host gets there)."""
        self._launch(stream, self._tick, np.uint64(self.steps.data_ptr()), np.uint64(0),
                     np.uint64(self.stamped.data_ptr()), np.uint64(self.steps.numel()))

    def arrive(self, stream, offset_ms: float, i: int):
        if i >= self.start.numel():
            raise IndexError(f"request slot {i} past the clock's buffer of {self.start.numel()}")
        self._launch(stream, self._arrive, np.uint64(self.steps.data_ptr()), np.uint64(int(offset_ms * 1e6)),
                     np.uint64(self.start.data_ptr()), np.uint64(i), np.uint64(_GIVE_UP_NS))

    def warm(self, *streams):
        """Launch both kernels once on every stream, so none is loaded into a context (with lazy
        loading that synchronises the context) while an arrival kernel spins there: a deadlock."""
        self.reset()
        for s in streams:
            self.tick(s, self.steps, 0)
            s.sync()
            self.arrive(s, 0.0, 0)
            s.sync()
        self.reset()

    def read(self, steps: int, n: int):
        self.torch.cuda.synchronize()
        stamped = int(self.stamped.item())
        if stamped != steps:
            raise RuntimeError(f"{stamped} decode steps stamped their clock slot, {steps} were launched")
        out = (self.steps[:steps + 1].cpu().numpy(), self.start[:n].cpu().numpy(), self.end[:n].cpu().numpy())
        if n and not out[1].all():
            raise RuntimeError("a request's arrival kernel gave up waiting for the run's first decode tick; "
                               "the decode stream never started")
        return out


class _Decode:
    """Launches one decode step on a stream, then its clock tick: the role's call and the tick, or
    one CUDA graph holding both (so no host delay can come between a step and its stamp)."""

    def __init__(self, model: ServingModel, stream, where, graphs: bool, clock: _Clock):
        self.stream, self._graph = stream, None
        fn = model.decode
        for _ in range(2):  # warm-up: kernels loaded, the allocator's blocks cached before capture
            fn(stream=stream)
        stream.sync()

        def step():
            fn(stream=stream)
            clock.step_tick(stream)

        if graphs and model.graphable:
            self._graph = capture_graph(step, stream, where)
            self.step = self._launch
        else:
            self.step = step

    def _launch(self):
        from cuda.bindings import driver

        assert self._graph is not None  # the step is _launch only once a graph is captured
        check(driver.cuGraphLaunch(self._graph[1], self.stream.handle), "cuGraphLaunch")

    def close(self):
        if self._graph is not None:
            from cuda.bindings import driver

            with contextlib.suppress(Exception):
                driver.cuGraphExecDestroy(self._graph[1])
            with contextlib.suppress(Exception):
                driver.cuGraphDestroy(self._graph[0])
            self._graph = None


def _rows(mode, layout, dsm, psm, load, clock_read, steps, arr, served, model, rnd: int = 0):
    """Gap and request records of one run (of round ``rnd``), times in ms from the run's first tick."""
    dstamp, rstart, rend = clock_read
    base = int(dstamp[0])
    d = (dstamp.astype(np.int64) - base) / 1e6
    n_served = int(served)
    ends = (rend[:n_served].astype(np.int64) - base) / 1e6
    starts = (rstart[:n_served].astype(np.int64) - base) / 1e6
    window = float(ends.max()) if n_served else float(d[steps])
    common = dict(mode=mode, layout=layout, decode_sm_count=dsm, prefill_sm_count=psm, **load,
                  window_ms=window, run_ms=float(max(d[steps], window)), round=int(rnd))
    rows = []
    for j in range(1, steps + 1):
        if d[j] > window and n_served:
            break
        rows.append(dict(common, record="gap", index=j - 1, start_ms=d[j - 1], end_ms=d[j], itl_ms=d[j] - d[j - 1],
                         tokens=model.decode_tokens))
    for i, a in enumerate(arr):
        r = dict(common, record="request", index=i, arrival_ms=float(a), tokens=model.prompt_tokens)
        if i < n_served:
            r.update(start_ms=starts[i], end_ms=ends[i], ttft_ms=ends[i] - a, queue_ms=max(0.0, starts[i] - a))
        rows.append(r)
    return rows


def _open_loop(clock, decode: _Decode, pstream, prefill, arr, deadline_ms: float, alone_decode: bool = False):
    """Decode continuously on ``decode.stream`` while requests arrive on ``pstream``; returns
    ``(steps, served)``. Requests not enqueued by ``deadline_ms`` are left unserved."""
    clock.reset()
    dstream, n = decode.stream, len(arr)
    events: deque = deque()
    enq = 0

    def enqueue(i):
        clock.arrive(pstream, float(arr[i]), i)
        prefill(stream=pstream)
        clock.tick(pstream, clock.end, i)
        events.append(pstream.record())

    # The run's clock starts before any request is enqueued, so no spinning arrival ever waits on
    # something the host has yet to do (a lazy module load or an allocation that synchronises
    # would otherwise wait for the spin); arrivals come _LEAD_MS later, when the host is ahead.
    h0 = time.perf_counter()
    clock.tick(dstream, clock.steps, 0)
    steps, marker = 0, None
    limit = _ALONE_STEPS if alone_decode else _MAX_STEPS - _DECODE_BATCH
    while True:
        if steps < limit and (marker is None or marker.is_done):
            for k in range(min(_DECODE_BATCH, limit - steps)):
                decode.step()  # stamps slot steps + 1
                steps += 1
                if k == _DECODE_BATCH // 2:
                    marker = dstream.record()
        while events and events[0].is_done:
            events.popleft()
        late = (time.perf_counter() - h0) * 1e3 > deadline_ms
        while enq < n and len(events) < _AHEAD and not late:
            enqueue(enq)
            enq += 1
        if alone_decode and steps >= limit:
            break
        if not events and (enq >= n or late) and not alone_decode:
            break
        if steps >= limit and not alone_decode:
            raise RuntimeError(f"decode ran {_MAX_STEPS} steps before the requests were served; shorten duration_s")
        if (time.perf_counter() - h0) > deadline_ms / 1e3 + _STALL_S:
            raise RuntimeError(f"the GPU made no progress for {_STALL_S:g} s past the run's deadline "
                               f"({enq} requests enqueued, {len(events)} unfinished, {steps} decode steps enqueued)")
        time.sleep(20e-6)
    dstream.sync()
    pstream.sync()
    return steps, enq


def _time_sliced(clock, decode: _Decode, model: ServingModel, arr, deadline_ms: float):
    """One stream: a decode step, then one prefill chunk of the oldest arrived request, repeated;
    the host decides an iteration while the previous one runs."""
    clock.reset()
    s, n = decode.stream, len(arr)
    clock.tick(s, clock.steps, 0)
    s.sync()
    h0 = time.perf_counter()
    inflight: deque = deque()
    pending: deque = deque()   # [request, next chunk]
    admitted = steps = finished = 0
    chunks = model.prefill_chunks
    while True:
        while len(inflight) >= 2:
            inflight.popleft().sync()
        now = (time.perf_counter() - h0) * 1e3
        while admitted < n and arr[admitted] <= now and now <= deadline_ms:
            pending.append([admitted, 0])
            admitted += 1
        if steps >= _MAX_STEPS:
            raise RuntimeError(f"time-sliced run reached {_MAX_STEPS} steps; shorten duration_s")
        decode.step()
        steps += 1
        if pending:
            req = pending[0]
            if req[1] == 0:
                clock.tick(s, clock.start, req[0])
            chunks[req[1]](stream=s)
            req[1] += 1
            if req[1] == len(chunks):
                clock.tick(s, clock.end, req[0])
                pending.popleft()
                finished += 1
        inflight.append(s.record())
        if not pending and (admitted >= n or now > deadline_ms):
            break
    s.sync()
    return steps, finished


def load_columns(rate, pattern, burst, duration_s, seed) -> dict:
    """The load's columns of a serving row (its label, such as ``"poisson 20/s"``, rate, pattern...)."""
    label = f"{pattern} {rate:g}/s" + (f" x{burst}" if pattern == "burst" else "")
    return dict(load=label, rate_rps=float(rate), pattern=pattern, burst=int(burst if pattern == "burst" else 1),
                duration_s=float(duration_s), seed=int(seed))


def _check(info, decode_sm_counts, rates, pattern, modes, duration_s):
    from ..device.driver import plan_split

    counts = [as_count("decode SM count", k, maximum=info.sm_count) for k in decode_sm_counts]
    for k in counts:
        plan = plan_split(info, [k], rounding="exact")
        if not plan.remainder:
            raise ValueError(f"decode share {k} SMs leaves no SMs for prefill on {info.name} ({info.sm_count} SMs); "
                             f"valid shares: {info.min_partition_size} to {info.sm_count - info.min_partition_size} "
                             f"in steps of {info.alignment}")
    bad = [m for m in modes if m not in SERVING_MODES]
    if bad or not modes:
        raise ValueError(f"unknown serving mode(s) {bad or modes}; valid: {', '.join(SERVING_MODES)}")
    if pattern not in ARRIVALS:
        raise ValueError(f"unknown arrival pattern {pattern!r}; valid: {', '.join(ARRIVALS)}")
    for r in rates:
        arrivals(r, duration_s, pattern=pattern)  # checks rate and duration
    return counts


def serve(model: ServingModel, decode_sm_counts: Sequence[int], *, rates: Sequence[float] = (20.0,),
          pattern: str = "poisson", burst: int = 8, duration_s: float = 1.0, drain_s: float | None = None,
          seed: int = 0, modes: Sequence[str] = SERVING_MODES, graphs: bool = True, device: int = 0,
          rounds: int = 1, trace=None, progress=True):
    """Measure decode ITL and prefill TTFT per decode share and load.

    Parameters
    ----------
    model : ServingModel
        From :func:`~gcexplore.serving.roles.decoder_stack` or
        :func:`~gcexplore.serving.roles.serving_roles`.
    decode_sm_counts : sequence of int
        Decode partition sizes (valid split sizes); prefill gets the rest of the GPU.
    rates : sequence of float, default (20.0,)
        Request rates (per second) to load each split with.
    pattern : {"poisson", "burst"}, default "poisson"
    burst : int, default 8
        Requests per burst (``pattern="burst"``).
    duration_s : float, default 1.0
        Requests arrive during this long; the same arrivals (from ``seed``) for every split and mode.
    drain_s : float, optional
        Requests not started ``duration_s + drain_s`` after the start are left unserved (their TTFT
        is NaN, a miss). Default: ``duration_s``.
    seed : int, default 0
    modes : sequence of str, default all of :data:`SERVING_MODES`
    graphs : bool, default True
        Capture the decode step in a CUDA graph on each stream (where the model allows it).
    device : int, default 0
    rounds : int, default 1
        Times every split (and the whole-device baselines, as one visit) is measured, round by round:
        in each round every visit once, on partitions, streams and decode graphs made afresh, and with
        more than one round in a fresh shuffled order (seeded by the run id, as a sweep's rounds,
        :func:`~gcexplore.experiments.runner.round_plan`), so drift falls on every split alike. Each
        row carries its ``round``; :func:`~gcexplore.serving.analysis.serving_table` pools the rounds
        and says how far they differ.
    trace : callable, optional
        ``trace(partitioning)`` returning a context manager entered around each split's runs
        (e.g. ``lambda parts: kernel_trace(parts)``), for checking the clocks against CUPTI.
    progress : bool or callable, default True
        True: a progress bar (tqdm.auto, on stderr) counting the runs, as :func:`~gcexplore.sweep` has;
        a callable: called with one line per run instead (``gcexplore serve`` prints them); False: neither.

    Returns
    -------
    pandas.DataFrame
        Result kind ``"serving"``: one row per decode gap (``record="gap"``: ``itl_ms``) and per request
        (``record="request"``: ``arrival_ms``, ``ttft_ms``, ``queue_ms``; NaN when unserved), with
        ``mode``, ``layout``, ``decode_sm_count``, ``prefill_sm_count``, the load's columns, the run's
        ``window_ms`` (to its last served request), ``run_ms`` (its GPU time) and its ``round``. Times in
        ms from the run's first decode tick. The identity columns are the card's and this process's
        (host, PyTorch).

    Raises
    ------
    MeasurementFailed, MeasurementInterrupted
        A run raised or the user pressed Ctrl-C: ``exc.partial`` holds the rows of every run measured
        before it (:mod:`gcexplore.experiments.runner`).
    """
    import torch

    rounds = as_int("rounds", rounds, minimum=1, maximum=MAX_ROUNDS)
    info = device_info(device)
    counts = _check(info, decode_sm_counts, list(rates), pattern, list(modes), duration_s)
    as_int("seed", seed, minimum=0)
    drain = duration_s if drain_s is None else float(drain_s)
    deadline = (duration_s + drain) * 1e3 + _LEAD_MS
    loads = [(load_columns(r, pattern, burst, duration_s, seed), arrivals(r, duration_s, seed=seed, pattern=pattern,
                                                                             burst=burst)) for r in rates]
    clock = _Clock(info, torch, max(_ALONE_REQUESTS, _PAIRED_REQUESTS, max(len(a) for _, a in loads)))
    say, bar = progress_lines(progress, rounds * _runs(counts, modes, len(loads)), "serve", unit="run")
    rows: list[dict] = []
    run_id = new_run_id()
    extra = {"graphs": bool(graphs), "model": dict(model.description), "decode_tokens": model.decode_tokens,
             "prompt_tokens": model.prompt_tokens, "drain_s": drain, "lead_ms": _LEAD_MS, "modes": tuple(modes),
             "decode_sm_counts": tuple(counts), "rates": tuple(float(r) for r in rates), "rounds": rounds}

    def build(measured: list[dict]):
        return result_frame(measured, "serving", info, run_id=run_id, extra=extra)

    no_load = load_columns(1.0, "poisson", 1, duration_s, seed)
    no_load.update(load="alone", rate_rps=0.0)
    n = info.sm_count

    def run_all(tag, dsm, psm, dstream, pstream, dwhere, *, rnd: int, alone: bool, loaded: bool,
                paired: bool = False):
        clock.warm(dstream, pstream)
        dec = _Decode(model, dstream, dwhere, graphs, clock)
        where = tag if rounds == 1 else f"{tag} round {rnd}"
        try:
            for piece in (model.prefill, *model.prefill_chunks):  # warm-up
                piece(stream=pstream)
            pstream.sync()
            if alone:
                steps, _ = _open_loop(clock, dec, pstream, model.prefill, [], math.inf, alone_decode=True)
                rows.extend(_rows("alone", tag, dsm, 0, no_load, clock.read(steps, 0), steps, [], 0, model, rnd))
                still = np.zeros(_ALONE_REQUESTS)
                served = _serve_alone(clock, pstream, model, still)
                rows.extend(_rows("alone", tag, 0, psm, no_load, clock.read(0, served), 0, still, served, model, rnd))
                say(f"{where} alone: decode and prefill measured by themselves")
            if paired:
                still = np.zeros(_PAIRED_REQUESTS)
                steps, served = _open_loop(clock, dec, pstream, model.prefill, still, math.inf)
                rows.extend(_rows("paired", tag, dsm, psm, dict(no_load, load="paired"), clock.read(steps, served),
                                  steps, still, served, model, rnd))
                say(f"{where} paired: {served} requests back to back next to {steps} decode steps")
            for load, arr in loads if loaded else []:
                arr = arr + _LEAD_MS
                if tag == "time_sliced":
                    steps, served = _time_sliced(clock, dec, model, arr, deadline)
                else:
                    steps, served = _open_loop(clock, dec, pstream, model.prefill, arr, deadline)
                mode = "partitioned" if "+" in tag else tag
                rows.extend(_rows(mode, tag, dsm, psm, load, clock.read(steps, served), steps, arr, served, model,
                                  rnd))
                say(f"{where} {load['load']}: {steps} decode steps, {served}/{len(arr)} requests served")
        finally:
            dec.close()

    # each round's visits: every split, then the whole device (its baselines, on fresh streams)
    visits = [(f"split {k}", k) for k in counts] if {"partitioned", "alone", "paired"} & set(modes) else []
    visits += [("whole device", None)] if {"streams", "alone", "time_sliced"} & set(modes) else []
    with closing_bar(bar), keeping(rows, build, "the serving run"):  # a failure or Ctrl-C keeps every run before it
        for _, (k, rnd) in round_plan(visits, rounds, rounds, seed=run_id):
            if k is not None:
                with partitions.split([k], device=info.index, rounding="exact") as parts:
                    dpart, ppart = parts[0], parts.remainder
                    assert ppart is not None  # the prefill side: a decode count leaves SMs over
                    with trace(parts) if trace is not None else contextlib.nullcontext():
                        run_all(f"{dpart.sm_count}+{ppart.sm_count}", dpart.sm_count, ppart.sm_count, dpart.stream,
                                ppart.stream, dpart, rnd=rnd.index, alone="alone" in modes,
                                loaded="partitioned" in modes, paired="paired" in modes)
                torch.cuda.empty_cache()
                continue
            with partitions.whole_device(info.index, streams=2) as whole:
                if "streams" in modes or "alone" in modes:
                    run_all("streams", n, n, whole.streams[0], whole.streams[1], info.index, rnd=rnd.index,
                            alone="alone" in modes, loaded="streams" in modes)
                if "time_sliced" in modes:
                    run_all("time_sliced", n, n, whole.streams[0], whole.streams[0], info.index, rnd=rnd.index,
                            alone=False, loaded=True)
    return build(rows)


def traced_splits(frames: list):
    """A ``trace=`` for :func:`serve`: a CUPTI kernel trace around each split's runs, whose frame
    is appended to ``frames`` (for :func:`gcexplore.serving.analysis.clock_agreement`)."""
    from ..trace.user import kernel_trace

    @contextlib.contextmanager
    def traced(parts):
        with kernel_trace(parts) as t:
            yield t
        frames.append(t.frame())

    return traced


def _serve_alone(clock, pstream, model: ServingModel, arr) -> int:
    """Requests back to back on the prefill stream with nothing else running (all arrived at 0)."""
    clock.reset()
    clock.tick(pstream, clock.steps, 0)
    for i in range(len(arr)):
        clock.arrive(pstream, 0.0, i)
        model.prefill(stream=pstream)
        clock.tick(pstream, clock.end, i)
    pstream.sync()
    return len(arr)


def _runs(counts, modes, loads: int) -> int:
    """How many runs (lines of ``progress``) :func:`serve` makes: per split its alone, paired and loaded runs,
    then the whole GPU's streams (alone and loaded) and time-sliced ones."""
    alone, paired = "alone" in modes, "paired" in modes
    per_split = alone + paired + loads * ("partitioned" in modes) if {"partitioned", "alone", "paired"} & set(modes) \
        else 0
    return len(counts) * per_split + alone + loads * ("streams" in modes) + loads * ("time_sliced" in modes)
