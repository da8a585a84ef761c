"""Partitions: the handles over green contexts of one split of a device, each with explicit streams
(the contexts themselves, their split and their reuse: :mod:`.green`; the ``%smid`` probe behind
:meth:`Partition.sm_ids`: :mod:`.kernels`).

:func:`split` makes a :class:`Partitioning` (the requested groups plus the remainder,
disjoint, from one layout of the device); :func:`whole_device` wraps the primary
context the same way for the baselines. Handles come only from these factories;
every one has ``close()`` and is a context manager. Re-exported by :mod:`gcexplore.api`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import cast

from .._checks import as_count, as_int
from . import green
from .driver import DeviceInfo, GreenContextError, device_info, plan_split, require_stream, use
from .green import close_each, destroy_layout, keep_layout, new_layout, release_contexts, take_layout
from .kernels import sm_ids_on

__all__ = ["Partition", "Partitioning", "release_contexts", "split", "whole_device"]


# ---------------------------------------------------------------------------
# Partitions
# ---------------------------------------------------------------------------

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
                self._sm_ids = sm_ids_on(self.stream, dev, self._device_sm_count)
        return self._sm_ids

    def close(self) -> None:
        """Destroy this partition's streams. Idempotent.

        The context belongs to the :class:`Partitioning` (or, for ``"device"``, is
        the primary context) and is released when that closes.
        """
        if self._closed:
            return
        self._closed = True
        errors = close_each(self._extra_streams + self._streams)
        self._streams, self._extra_streams = [], []
        if errors:
            raise GreenContextError(f"closing partition {self.name} failed: {errors[0]}") from errors[0]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


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
        errors = close_each(parts)
        lay = self._layout
        lay.sm_ids = [p._sm_ids for p in parts]
        if self._reuse and not errors:
            keep_layout(lay)
        else:
            errors += destroy_layout(lay)
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


#: More streams than this per partition is a typo, not a plan (each costs driver resources).
MAX_STREAMS = 64


def _check_streams(streams) -> int:
    return as_count("streams", streams, maximum=MAX_STREAMS)


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
        returns about 4.1 MiB of device memory per destroyed green context, so
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
    cosched = coscheduled_sm_count
    if cosched is not None:
        cosched = tuple(int(c) for c in (cosched if isinstance(cosched, (list, tuple)) else [cast(int, cosched)]))
    key = (info.index, tuple(plan.granted), plan.remainder, cosched)
    layout = take_layout(key) if reuse else None
    reused = layout is not None
    if layout is None:
        layout = new_layout(info, plan, key, coscheduled_sm_count)
    created: list[Partition] = []
    n = len(plan.groups)
    try:
        for i, ctx in enumerate(layout.contexts):
            is_rem = i >= n
            factory = green.stream_factory(ctx, info.index)  # looked up here: a test may swap it
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
        destroy_layout(layout)
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
