"""Partitions: green contexts of one split of a device, each with explicit streams.

:func:`split` makes a :class:`Partitioning` (the requested groups plus the remainder,
disjoint, from one layout of the device); :func:`whole_device` wraps the primary
context the same way for the baselines. Handles come only from these factories;
every one has ``close()`` and is a context manager. Re-exported by :mod:`gcexplore.api`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from .._checks import as_count, as_int
from .driver import (DeviceInfo, GreenContextError, SplitPlan, UnsupportedError, check, device_info, driver_module,
                  plan_split, require_stream, use)

__all__ = ["Partition", "Partitioning", "release_contexts", "split", "whole_device"]


# ---------------------------------------------------------------------------
# Partitions
# ---------------------------------------------------------------------------

_PROBE_SRC = r"""
extern "C" __global__ void gcx_smid_probe(unsigned int* seen, unsigned long long spin_ns) {
    unsigned int smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    if (threadIdx.x == 0) atomicOr(&seen[smid], 1u);
    // Keep the block resident a little so the scheduler spreads blocks over every SM.
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < spin_ns);
}
"""
_PROBE_SLOTS = 1024  # larger than any %smid
_probe_kernels: dict[str, Any] = {}
_probe_lock = threading.Lock()


def _np():
    import numpy

    return numpy


def _probe_kernel(dev):
    from cuda.core import Program, ProgramOptions

    arch = f"sm_{dev.arch}"
    with _probe_lock:
        if arch not in _probe_kernels:
            prog = Program(_PROBE_SRC, code_type="c++", options=ProgramOptions(arch=arch))
            _probe_kernels[arch] = prog.compile("cubin").get_kernel("gcx_smid_probe")
        return _probe_kernels[arch]


def _sm_ids_on(stream, dev, device_sm_count: int) -> frozenset[int]:
    """SM ids that a many-block probe kernel launched on ``stream`` ran on."""
    from cuda.core import LaunchConfig, launch

    driver, np = driver_module(), _np()
    kernel = _probe_kernel(dev)
    nbytes = _PROBE_SLOTS * 4
    buf = dev.allocate(nbytes, stream=stream)
    try:
        s = int(stream.handle)
        check(driver.cuMemsetD32Async(int(buf.handle), 0, _PROBE_SLOTS, s), "cuMemsetD32Async")
        # Eight blocks per SM of the whole device, each resident for 5 us: far more
        # blocks than any partition holds at once, so every SM it owns gets some.
        grid = 8 * device_sm_count
        launch(stream, LaunchConfig(grid=grid, block=128), kernel, buf, np.uint64(5_000))
        host = np.zeros(_PROBE_SLOTS, dtype=np.uint32)
        check(driver.cuMemcpyDtoHAsync(host.ctypes.data, int(buf.handle), nbytes, s), "cuMemcpyDtoHAsync")
        stream.sync()
    finally:
        buf.close(stream)
        stream.sync()
    return frozenset(int(i) for i in np.flatnonzero(host))


def _check_coscheduled(value, info: DeviceInfo, sm_counts) -> None:
    """Co-scheduling counts: ints in [1, SM count], one for all groups or one per group."""
    values = [value] if not isinstance(value, (list, tuple)) else list(value)
    groups = 1 if not isinstance(sm_counts, (list, tuple)) else len(sm_counts)
    for v in values:
        as_int("coscheduled_sm_count", v, minimum=1, maximum=info.sm_count)
    if len(values) not in (1, groups):
        raise ValueError(f"coscheduled_sm_count has {len(values)} values for {groups} group(s); "
                         "give one for all groups or one per group")


def _fill_streams(part, factory, n: int) -> None:
    """Create ``part``'s streams one by one into its own list, so a failure at the k-th
    leaves the first k - 1 where ``part.close()`` finds them."""
    for _ in range(n):
        part._streams.append(factory(None))


def _close_each(items) -> list[Exception]:
    """Close every item, keeping on after a failure; return the errors."""
    errors = []
    for item in items:
        try:
            item.close()
        except Exception as e:
            errors.append(e)
    return errors


class Partition:
    """A set of SMs with its own context and explicit streams.

    Not built by hand: get partitions from :func:`split` (green contexts) or
    :func:`whole_device` (the primary context over all SMs).

    Attributes
    ----------
    name : str
        ``"p0"``, ``"p1"``, ..., ``"remainder"``, or ``"device"``.
    index : int
        Position in its :class:`Partitioning` (the remainder comes last).
    sm_count : int
        SMs granted.
    requested_sm_count : int or None
        SMs asked for (None for the remainder and the whole device).
    is_remainder : bool
    device_index : int
    """

    def __init__(self, *args, **kwargs):
        raise TypeError("Partition cannot be instantiated directly; use gcexplore.split(...) "
                        "or gcexplore.whole_device(...)")

    def _setup(self, *, name, index, device_index, device_sm_count, sm_count, requested,
               is_remainder, context, streams, stream_factory, sm_ids=None):
        self.name = name
        self.index = index
        self.device_index = device_index
        self.sm_count = sm_count
        self.requested_sm_count = requested
        self.is_remainder = is_remainder
        self._device_sm_count = device_sm_count
        self._context = context
        self._stream_factory = stream_factory
        self._streams = list(streams)
        self._extra_streams: list = []
        self._sm_ids: frozenset[int] | None = sm_ids
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._streams)} stream(s)"
        req = "" if self.requested_sm_count in (None, self.sm_count) else f", requested {self.requested_sm_count}"
        return f"<Partition {self.name}: {self.sm_count} SMs{req} on device {self.device_index}, {state}>"

    @property
    def is_closed(self) -> bool:
        return self._closed

    def require_open(self) -> None:
        if self._closed:
            raise GreenContextError(
                f"partition {self.name} ({self.sm_count} SMs) is closed; "
                "create a new one with gcexplore.split(...)"
            )

    @property
    def context(self):
        """The cuda.core Context (a green context, or the primary context for ``"device"``)."""
        self.require_open()
        return self._context

    @property
    def stream(self):
        """The first of this partition's streams (a non-blocking cuda.core Stream)."""
        self.require_open()
        return self._streams[0]

    @property
    def streams(self) -> tuple:
        """The streams created with the partition."""
        self.require_open()
        return tuple(self._streams)

    def create_stream(self, *, priority: int | None = None):
        """Create one more non-blocking stream on this partition; closed with it."""
        self.require_open()
        s = self._stream_factory(priority)
        self._extra_streams.append(s)
        return s

    def torch_stream(self, stream=None):
        """This partition's stream (or ``stream``) as a ``torch.cuda.Stream``.

        Work queued on it by PyTorch runs on this partition's SMs only.
        """
        self.require_open()
        try:
            import torch
        except ImportError as e:
            raise ImportError("torch_stream() needs PyTorch: pip install torch") from e
        s = require_stream(stream if stream is not None else self.stream, "torch_stream")
        return torch.cuda.get_stream_from_external(int(s.handle), device=self.device_index)

    def cupy_stream(self, stream=None):
        """This partition's stream (or ``stream``) as a CuPy stream (work on it runs on this partition)."""
        self.require_open()
        try:
            import cupy
        except ImportError as e:
            raise ImportError("cupy_stream() needs CuPy: pip install cupy-cuda13x") from e
        s = require_stream(stream if stream is not None else self.stream, "cupy_stream")
        if hasattr(cupy.cuda.Stream, "from_external"):  # CuPy 14+
            return cupy.cuda.Stream.from_external(s)
        return cupy.cuda.ExternalStream(int(s.handle), self.device_index)

    def sm_ids(self) -> frozenset[int]:
        """SM ids a many-block probe kernel launched on this partition ran on (``%smid``).

        Measured on the first call and cached.
        """
        self.require_open()
        if self._sm_ids is None:
            with use(self.device_index) as dev:
                self._sm_ids = _sm_ids_on(self.stream, dev, self._device_sm_count)
        return self._sm_ids

    def close(self) -> None:
        """Destroy this partition's streams. Idempotent.

        The context belongs to the :class:`Partitioning` (or, for ``"device"``, is
        the primary context) and is released when that closes.
        """
        if self._closed:
            return
        self._closed = True
        errors = _close_each(self._extra_streams + self._streams)
        self._streams, self._extra_streams = [], []
        if errors:
            raise GreenContextError(f"closing partition {self.name} failed: {errors[0]}") from errors[0]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _split_groups(dev, info: DeviceInfo, granted: list[int], *, coscheduled):
    """Split the device's SMs into ``granted`` groups. Returns (groups, remainder, method, temps)."""
    from cuda.core import ContextOptions, SMResourceOptions

    full = dev.resources.sm
    if len(set(granted)) == 1 and coscheduled is None:
        groups, rem = full.split(SMResourceOptions(count=list(granted)))
        method = "single"
    elif info.features["structured_split"]:
        groups, rem = full.split(SMResourceOptions(count=list(granted), coscheduled_sm_count=coscheduled))
        method = "structured"
    else:
        # Driver 13.0: cuda.core refuses unequal counts in one split; split one group
        # at a time from what is left, so groups stay disjoint by construction.
        groups, rem, method, temps = [], full, "successive", []
        try:
            for g in granted:
                try:
                    (grp,), nxt = rem.split(SMResourceOptions(count=g))
                except Exception:
                    # Some drivers refuse to split a remainder directly; split it through
                    # a context made over it (kept alive until the partitioning closes).
                    ctx = dev.create_context(ContextOptions(resources=[rem]))
                    temps.append(ctx)
                    (grp,), nxt = ctx.resources.sm.split(SMResourceOptions(count=g))
                    method = "successive-via-context"
                groups.append(grp)
                rem = nxt
        except BaseException:
            _close_each(temps)  # a later step failed: the temporary contexts would leak
            raise
        return list(groups), rem, method, temps
    return list(groups), rem, method, []


@dataclasses.dataclass
class _Layout:
    """The green contexts of one split, kept together so they stay disjoint."""

    key: tuple
    contexts: list  # one per group, then the remainder's
    temps: list  # contexts made only to split a remainder further
    method: str
    sm_counts: list[int]
    sm_ids: list  # cached %smid sets, one per context (None until measured)


# Driver 13.0 keeps about 4.9 MiB of device memory for every green context it has
# destroyed (measured: 300 create/destroy cycles of cuGreenCtxCreate/cuGreenCtxDestroy
# lost 1.2 GiB). Closed layouts are therefore kept and handed to the next split
# of the same layout instead of being destroyed.
_pool: dict[tuple, list[_Layout]] = {}
_pool_lock = threading.Lock()


def _destroy_layout(layout: _Layout) -> list[Exception]:
    return _close_each(layout.contexts + layout.temps)


def release_contexts() -> int:
    """Destroy the green contexts kept for reuse by closed partitionings.

    Returns the number of contexts destroyed. On driver 13.0 each destroyed green
    context leaves about 4.9 MiB of device memory unreturned, so call this only when
    no more splits will follow (it is never needed for correctness).
    """
    with _pool_lock:
        layouts = [lay for lays in _pool.values() for lay in lays]
        _pool.clear()
    errors, n = [], 0
    for lay in layouts:
        n += len(lay.contexts) + len(lay.temps)
        errors += _destroy_layout(lay)
    if errors:
        raise GreenContextError(f"destroying kept green contexts failed: {errors[0]}") from errors[0]
    return n


class Partitioning:
    """The partitions of one split of a device: requested groups plus the remainder.

    Not built by hand: use :func:`split`. Indexable and iterable over the requested
    groups; ``remainder`` is the partition of the SMs left over (None if none).
    A context manager; :meth:`close` destroys every stream, then releases the green
    contexts (kept for the next split of the same layout unless ``reuse=False``).

    Attributes
    ----------
    info : DeviceInfo
    plan : SplitPlan
    method : str
        How the driver was asked: ``"single"`` (one split of equal groups),
        ``"structured"`` (driver 13.1+), ``"successive"`` or
        ``"successive-via-context"`` (one group at a time, driver 13.0).
    reused : bool
        True when the contexts came from an earlier, closed split of the same layout.
    """

    def __init__(self, *args, **kwargs):
        raise TypeError("Partitioning cannot be instantiated directly; use gcexplore.split(...)")

    def _setup(self, *, info, plan, groups, remainder, layout, reuse, reused):
        self.info = info
        self.plan = plan
        self.method = layout.method
        self.reused = reused
        self._groups = groups
        self._remainder = remainder
        self._layout = layout
        self._reuse = reuse
        self._closed = False

    @property
    def is_closed(self) -> bool:
        return self._closed

    def require_open(self):
        if self._closed:
            raise GreenContextError(
                f"this partitioning ({self.label}) is closed; create a new one with gcexplore.split(...)"
            )

    @property
    def label(self) -> str:
        """Granted sizes joined by '+', remainder last (e.g. ``"24+108"``)."""
        return self.plan.label

    @property
    def remainder(self) -> Partition | None:
        self.require_open()
        return self._remainder

    @property
    def all(self) -> list[Partition]:
        """Requested groups followed by the remainder (when there is one)."""
        self.require_open()
        return self._groups + ([self._remainder] if self._remainder is not None else [])

    def __len__(self) -> int:
        return len(self._groups)

    def __getitem__(self, i) -> Partition:
        self.require_open()
        return self._groups[i]

    def __iter__(self) -> Iterator[Partition]:
        self.require_open()
        return iter(list(self._groups))

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Partitioning {self.label} of {self.info.name} ({self.method} split), {state}>"

    def close(self) -> None:
        """Destroy all streams, then release the contexts. Idempotent."""
        if self._closed:
            return
        self._closed = True
        parts = self._groups + ([self._remainder] if self._remainder is not None else [])
        errors = _close_each(parts)
        lay = self._layout
        lay.sm_ids = [p._sm_ids for p in parts]
        if self._reuse and not errors:
            with _pool_lock:
                _pool.setdefault(lay.key, []).append(lay)
        else:
            errors += _destroy_layout(lay)
        if errors:
            raise GreenContextError(f"closing partitioning {self.label} failed: {errors[0]}") from errors[0]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # Best effort only; close() explicitly or use `with`.
        try:
            if not self._closed:
                self.close()
        except Exception:
            pass


def _green_stream_factory(ctx, device_index: int):
    from cuda.core import StreamOptions

    def make(priority=None):
        # cuda.core wants some context of the device current to create a stream.
        with use(device_index):
            return ctx.create_stream(StreamOptions(nonblocking=True, priority=priority))

    return make


#: More streams than this per partition is a typo, not a plan (each costs driver resources).
MAX_STREAMS = 64


def _check_streams(streams) -> int:
    return as_count("streams", streams, maximum=MAX_STREAMS)


def _new_layout(info: DeviceInfo, plan: SplitPlan, key, coscheduled) -> _Layout:
    from cuda.core import ContextOptions

    granted = plan.granted
    temps, contexts = [], []
    try:
        with use(info.index) as dev:
            try:
                groups, rem, method, temps = _split_groups(dev, info, granted, coscheduled=coscheduled)
            except UnsupportedError:
                raise
            except Exception as e:
                raise GreenContextError(f"splitting {info.name} into {granted} SMs failed: {e}") from e
            got = [int(g.sm_count) for g in groups]
            if got != granted:
                raise GreenContextError(
                    f"the driver granted {got} SMs for the request {plan.requested}, "
                    f"but the plan expected {granted}; this is a gcexplore bug on {info.name}"
                )
            resources = list(groups) + ([rem] if int(rem.sm_count) else [])
            for res in resources:
                contexts.append(dev.create_context(ContextOptions(resources=[res])))
    except BaseException:
        for ctx in contexts + temps:
            with contextlib.suppress(Exception):
                ctx.close()
        raise
    return _Layout(key=key, contexts=contexts, temps=temps, method=method,
                   sm_counts=[int(r.sm_count) for r in resources], sm_ids=[None] * len(contexts))


def split(sm_counts, *, device=0, rounding: str = "up", streams: int = 1,
          coscheduled_sm_count: int | Sequence[int] | None = None,
          reuse: bool = True) -> Partitioning:
    """Split a device's SMs into disjoint green-context partitions with explicit streams.

    All groups come from one layout of the device (never independent splits that
    could overlap): equal sizes in one driver split; unequal sizes through the
    structured split where the driver has it (13.1+), else one group at a time
    from what is left.

    Parameters
    ----------
    sm_counts : int or sequence of int
        Requested SMs per group, in order (see :func:`plan_split`).
    device : int or cuda.core.Device, default 0
    rounding : {"up", "down", "exact"}, default "up"
    streams : int, default 1
        Non-blocking streams created on every partition (the remainder included).
    coscheduled_sm_count : int or sequence of int, optional
        Co-scheduling guarantee per group; needs the structured split (driver 13.1+).
    reuse : bool, default True
        Take the green contexts of an earlier, closed split of the same layout if
        there is one, and keep these for reuse when closed. Driver 13.0 never
        returns about 4.9 MiB of device memory per destroyed green context, so
        destroying them on every close would leak in sweeps. ``reuse=False``
        creates fresh contexts and destroys them on close;
        :func:`release_contexts` destroys the kept ones.

    Returns
    -------
    Partitioning
        Close it (or use ``with``) to destroy its streams and release its contexts.
    """
    _check_streams(streams)
    info = device_info(device)
    info.require("green_context_streams")
    if coscheduled_sm_count is not None:
        _check_coscheduled(coscheduled_sm_count, info, sm_counts)
        info.require("structured_split")
    plan = plan_split(info, sm_counts, rounding=rounding)
    key = (info.index, tuple(plan.granted), plan.remainder, coscheduled_sm_count if coscheduled_sm_count is None
           else tuple(_np().atleast_1d(coscheduled_sm_count).tolist()))
    layout = None
    if reuse:
        with _pool_lock:
            kept = _pool.get(key)
            if kept:
                layout = kept.pop()
    reused = layout is not None
    if layout is None:
        layout = _new_layout(info, plan, key, coscheduled_sm_count)
    created: list[Partition] = []
    n = len(plan.groups)
    try:
        for i, ctx in enumerate(layout.contexts):
            is_rem = i >= n
            factory = _green_stream_factory(ctx, info.index)
            part = Partition.__new__(Partition)
            part._setup(name="remainder" if is_rem else f"p{i}", index=i, device_index=info.index,
                        device_sm_count=info.sm_count, sm_count=layout.sm_counts[i],
                        requested=None if is_rem else plan.groups[i].requested, is_remainder=is_rem,
                        context=ctx, streams=[], stream_factory=factory, sm_ids=layout.sm_ids[i])
            created.append(part)
            _fill_streams(part, factory, streams)
    except BaseException:
        for p in created:
            with contextlib.suppress(Exception):
                p.close()
        _destroy_layout(layout)
        raise
    parts = Partitioning.__new__(Partitioning)
    parts._setup(info=info, plan=plan, groups=created[:n], remainder=created[n] if len(created) > n else None,
                 layout=layout, reuse=reuse, reused=reused)
    return parts


def whole_device(device=0, *, streams: int = 1) -> Partition:
    """The whole device (its primary context) as a partition named ``"device"``.

    Used for the baselines that run without green contexts (one after another, or
    on plain streams). Closing it destroys its streams, not the primary context.
    """
    _check_streams(streams)
    info = device_info(device)
    from cuda.core import StreamOptions

    with use(info.index) as dev:
        ctx = dev.context

        def factory(priority=None):
            with use(info.index) as d:
                return d.create_stream(options=StreamOptions(nonblocking=True, priority=priority))

        part = Partition.__new__(Partition)
        part._setup(name="device", index=0, device_index=info.index, device_sm_count=info.sm_count,
                    sm_count=info.sm_count, requested=None, is_remainder=False, context=ctx,
                    streams=[], stream_factory=factory)
        try:
            _fill_streams(part, factory, streams)
        except BaseException:
            with contextlib.suppress(Exception):
                part.close()
            raise
    return part
