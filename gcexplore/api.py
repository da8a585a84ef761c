"""Device facts, split planning, and partitions (green contexts with explicit streams).

The layer everything else stands on. Planning (:func:`plan_split`) is pure Python over a
:class:`DeviceInfo`, so it runs anywhere; the rest is a thin layer over ``cuda.core``
(>= 1.2) and ``cuda.bindings`` that needs a GPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

__all__ = [
    "DeviceInfo",
    "GreenContextError",
    "Partition",
    "Partitioning",
    "PlannedGroup",
    "SplitPlan",
    "UnsupportedError",
    "device_count",
    "device_info",
    "gpu_available",
    "plan_split",
    "release_contexts",
    "require_stream",
    "split",
    "use",
    "whole_device",
]

# Driver versions (cuDriverGetVersion encoding: 1000 * major + 10 * minor).
FEATURES = {
    "green_contexts": 12040,
    "green_context_streams": 12050,
    "structured_split": 13010,
    "workqueue_config": 13010,
}
_FEATURE_TEXT = {
    "green_contexts": "green contexts",
    "green_context_streams": "green-context streams",
    "structured_split": "the structured SM split (cuDevSmResourceSplit)",
    "workqueue_config": "work-queue configuration",
}
_ROUNDINGS = ("up", "down", "exact")


class GreenContextError(RuntimeError):
    """gcexplore's own errors about green contexts and partitions."""


class UnsupportedError(GreenContextError):
    """No GPU, no driver, or a driver too old for what was asked."""


def _version_str(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


# ---------------------------------------------------------------------------
# Device facts
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """What one GPU allows for green contexts, read from the device's SM resource.

    Build it with :func:`device_info` (or by hand, for planning without a GPU).

    Attributes
    ----------
    name : str
        Device name as the driver reports it.
    index : int
        Device ordinal.
    compute_capability : tuple of int
        ``(major, minor)``.
    sm_count : int
        SMs of the whole device.
    min_partition_size : int
        Smallest SM count a partition can have (``SMResource.min_partition_size``).
    alignment : int
        Granularity of partition sizes (``SMResource.coscheduled_alignment``).
    driver_version : int
        ``cuDriverGetVersion`` value, e.g. 13000 for CUDA 13.0.
    cuda_core_version, cuda_bindings_version : str
        Versions of the Python packages in use.
    """

    name: str
    index: int
    compute_capability: tuple[int, int]
    sm_count: int
    min_partition_size: int
    alignment: int
    driver_version: int
    cuda_core_version: str = ""
    cuda_bindings_version: str = ""

    def __post_init__(self):
        for field in ("sm_count", "min_partition_size", "alignment"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"DeviceInfo.{field} must be a positive int, got {value!r}")

    @property
    def driver_version_str(self) -> str:
        """Driver version as ``"major.minor"`` (e.g. ``"13.0"``)."""
        return _version_str(self.driver_version)

    @property
    def features(self) -> dict[str, bool]:
        """Which green-context features this driver supports (name -> bool)."""
        return {name: self.driver_version >= need for name, need in FEATURES.items()}

    def require(self, feature: str) -> None:
        """Raise :class:`UnsupportedError` unless this driver supports ``feature``."""
        need = FEATURES[feature]
        if self.driver_version < need:
            raise UnsupportedError(
                f"{_FEATURE_TEXT[feature]} requires driver {_version_str(need)}, "
                f"found {self.driver_version_str} on {self.name}"
            )

    def granted(self, count: int) -> int:
        """SMs the driver grants for a request of ``count`` (it rounds up)."""
        return max(self.min_partition_size, -(-count // self.alignment) * self.alignment)

    def valid_sm_counts(self) -> list[int]:
        """Partition sizes this device can give, smallest first (on the H100: 8, 16, ..., 128)."""
        return [c for c in range(self.alignment, self.sm_count + 1, self.alignment)
                if c >= self.min_partition_size]

    def describe_valid(self) -> str:
        """The valid sizes as a short phrase for error messages."""
        valid = self.valid_sm_counts()
        if len(valid) > 4:
            return f"{valid[0]}, {valid[1]}, ..., {valid[-1]} (multiples of {self.alignment})"
        return ", ".join(map(str, valid))

    def metadata(self) -> dict[str, Any]:
        """The device facts as plain values, for ``DataFrame.attrs``."""
        from . import __version__

        return {
            "device_name": self.name,
            "device_index": self.index,
            "device_sm_count": self.sm_count,
            "compute_capability": f"{self.compute_capability[0]}.{self.compute_capability[1]}",
            "driver_version": self.driver_version_str,
            "cuda_core_version": self.cuda_core_version,
            "cuda_bindings_version": self.cuda_bindings_version,
            "gcexplore_version": __version__,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }


def _driver():
    from cuda.bindings import driver

    return driver


def _check(result, what: str):
    """Unpack a cuda.bindings result tuple, raising with context on error."""
    driver = _driver()
    err, *rest = result
    if err != driver.CUresult.CUDA_SUCCESS:
        _, msg = driver.cuGetErrorString(err)
        text = msg.decode() if isinstance(msg, bytes) else str(msg)
        raise GreenContextError(f"{what} failed: {err.name} ({text})")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


_init_lock = threading.Lock()
_initialized = False


def _init() -> int:
    """cuInit once; return the driver version. Raises UnsupportedError without a GPU."""
    global _initialized
    with _init_lock:
        driver = _driver()
        try:
            version = _check(driver.cuDriverGetVersion(), "cuDriverGetVersion")
            if not _initialized:
                _check(driver.cuInit(0), "cuInit")
                _initialized = True
        except GreenContextError as e:
            raise UnsupportedError(f"no usable CUDA GPU: {e}") from e
        except Exception as e:  # the driver library itself is missing
            raise UnsupportedError(f"no CUDA driver found: {e}") from e
        return version


def device_count() -> int:
    """Number of visible CUDA devices (raises :class:`UnsupportedError` without a driver)."""
    _init()
    return _check(_driver().cuDeviceGetCount(), "cuDeviceGetCount")


def gpu_available() -> bool:
    """True when a CUDA device with green-context streams (driver >= 12.5) is present."""
    try:
        return device_count() > 0 and _init() >= FEATURES["green_context_streams"]
    except UnsupportedError:
        return False


def _device_index(device) -> int:
    if isinstance(device, bool):
        raise TypeError(f"device must be an int or cuda.core.Device, got {device!r}")
    if isinstance(device, int):
        index = device
    elif hasattr(device, "device_id"):
        index = int(device.device_id)
    else:
        raise TypeError(f"device must be an int or cuda.core.Device, got {type(device).__name__}")
    n = device_count()
    if not 0 <= index < n:
        valid = ", ".join(map(str, range(n))) or "none"
        raise ValueError(f"device {index} does not exist: this machine has {n} CUDA device(s) ({valid})")
    return index


def _cuda_device(index: int):
    from cuda.core import Device

    return Device(index)


_info_cache: dict[int, DeviceInfo] = {}


def device_info(device=0) -> DeviceInfo:
    """Read what ``device`` allows for green contexts.

    Parameters
    ----------
    device : int or cuda.core.Device, default 0

    Returns
    -------
    DeviceInfo
        Frozen facts; ``min_partition_size`` and ``alignment`` come from the device's
        SM resource, never from a table of architectures.

    Raises
    ------
    UnsupportedError
        No GPU or driver, or a driver older than 12.4 (green contexts).
    ValueError
        ``device`` is not a visible device.
    """
    index = _device_index(device)
    if index in _info_cache:
        return _info_cache[index]
    version = _init()
    dev = _cuda_device(index)
    name = dev.name
    if version < FEATURES["green_contexts"]:
        raise UnsupportedError(
            f"green contexts require driver 12.4, found {_version_str(version)} on {name}; "
            "update the NVIDIA driver"
        )
    import cuda.bindings
    import cuda.core

    with use(index):
        sm = dev.resources.sm
        info = DeviceInfo(
            name=name,
            index=index,
            compute_capability=tuple(dev.compute_capability),
            sm_count=int(sm.sm_count),
            min_partition_size=int(sm.min_partition_size),
            alignment=int(sm.coscheduled_alignment),
            driver_version=version,
            cuda_core_version=cuda.core.__version__,
            cuda_bindings_version=cuda.bindings.__version__,
        )
    _info_cache[index] = info
    return info


# ---------------------------------------------------------------------------
# Split planning (pure)
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PlannedGroup:
    """One requested group: what was asked and what the driver will grant."""

    requested: int
    granted: int


@dataclasses.dataclass(frozen=True)
class SplitPlan:
    """What a split gives, computed without touching the GPU (see :func:`plan_split`)."""

    info: DeviceInfo
    groups: tuple[PlannedGroup, ...]
    remainder: int
    rounding: str

    @property
    def granted(self) -> list[int]:
        return [g.granted for g in self.groups]

    @property
    def requested(self) -> list[int]:
        return [g.requested for g in self.groups]

    @property
    def label(self) -> str:
        """Granted sizes joined by '+', remainder last when there is one (e.g. ``"24+108"``)."""
        sizes = self.granted + ([self.remainder] if self.remainder else [])
        return "+".join(map(str, sizes))


def _as_counts(sm_counts) -> list[int]:
    if isinstance(sm_counts, (int, np.integer)) and not isinstance(sm_counts, bool):
        counts = [sm_counts]
    elif isinstance(sm_counts, Sequence) and not isinstance(sm_counts, str):
        counts = list(sm_counts)
    else:
        raise TypeError(f"sm_counts must be an int or a sequence of ints, got {sm_counts!r}")
    if not counts:
        raise ValueError("sm_counts is empty: give at least one SM count, e.g. [24]")
    for c in counts:
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)):
            raise TypeError(f"SM counts must be ints, got {c!r} ({type(c).__name__}) in {sm_counts!r}")
    return [int(c) for c in counts]


def plan_split(info: DeviceInfo, sm_counts, *, rounding: str = "up") -> SplitPlan:
    """Compute what splitting ``info``'s SMs into ``sm_counts`` gives, without a GPU.

    Parameters
    ----------
    info : DeviceInfo
        The device (from :func:`device_info`, or built by hand).
    sm_counts : int or sequence of int
        Requested SMs per group, in order.
    rounding : {"up", "down", "exact"}, default "up"
        ``"up"`` rounds each count up to the device's granularity, as the driver
        does (66 -> 72 on the H100); ``"down"`` rounds down; ``"exact"`` refuses
        any count that is not already a valid size.

    Returns
    -------
    SplitPlan
        Requested and granted SMs per group, and the remainder.

    Raises
    ------
    TypeError
        A count is not an int (bools included).
    ValueError
        An empty request, a count <= 0, a count above the device, groups that
        together exceed it, or an unaligned count with ``rounding="exact"``. The
        message names the device and the valid sizes.
    """
    if rounding not in _ROUNDINGS:
        raise ValueError(f"rounding must be one of {', '.join(map(repr, _ROUNDINGS))}, got {rounding!r}")
    counts = _as_counts(sm_counts)
    valid = info.valid_sm_counts()
    where = f"{info.name} has {info.sm_count} SMs; valid partition sizes are {info.describe_valid()}"
    groups = []
    for c in counts:
        if c <= 0:
            raise ValueError(f"SM counts must be positive, got {c} in {counts}; {where}")
        if rounding == "up":
            g = info.granted(c)
        elif rounding == "down":
            g = (c // info.alignment) * info.alignment
            if g < info.min_partition_size:
                raise ValueError(
                    f"{c} SMs rounds down below the smallest partition ({info.min_partition_size}); {where}"
                )
        else:
            if c not in valid:
                raise ValueError(f"{c} SMs is not a valid partition size (rounding='exact'); {where}")
            g = c
        if g > info.sm_count or g not in valid:
            rounded = f" (rounded {rounding} to {g})" if g != c else ""
            raise ValueError(f"requested {c} SMs{rounded} but {where}")
        groups.append(PlannedGroup(requested=c, granted=g))
    total = sum(g.granted for g in groups)
    if total > info.sm_count:
        raise ValueError(
            f"the groups {counts} are granted {[g.granted for g in groups]} = {total} SMs together, "
            f"but {where}"
        )
    return SplitPlan(info=info, groups=tuple(groups), remainder=info.sm_count - total, rounding=rounding)


# ---------------------------------------------------------------------------
# Current context: use()
# ---------------------------------------------------------------------------


def _current_context():
    return _check(_driver().cuCtxGetCurrent(), "cuCtxGetCurrent")


def _set_current(ctx) -> None:
    _check(_driver().cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


@contextlib.contextmanager
def use(target) -> Iterator[Any]:
    """Make a device's primary context or a partition's green context current.

    On exit, restore exactly the context the driver reported as current on entry
    (``cuCtxGetCurrent``), including none, on exceptions too. No stack is kept in
    Python: nesting and threads follow the driver's own per-thread state.

    Parameters
    ----------
    target : int, cuda.core.Device, or Partition
        ``use(0)``, ``use(Device(1))``, or ``use(partition)``.

    Yields
    ------
    cuda.core.Device or Partition
        The device, or the partition.
    """
    if isinstance(target, Partition):
        target._check_open()
        ctx = target.context.handle
        prev = _current_context()
        _set_current(ctx)
        try:
            yield target
        finally:
            _set_current(prev)
        return
    index = _device_index(target)
    dev = _cuda_device(index)
    prev = _current_context()
    try:
        # Marks the thread-local cuda.core Device initialised and makes its
        # primary context current (cuCtxSetCurrent, not a push).
        dev.set_current()
    except BaseException:
        _set_current(prev)
        raise
    try:
        yield dev
    finally:
        _set_current(prev)


# ---------------------------------------------------------------------------
# Explicit streams
# ---------------------------------------------------------------------------


def require_stream(stream, where: str = "this call"):
    """Return ``stream`` if it is a CUDA stream object; else raise TypeError.

    gcexplore never falls back to a default stream: every call that schedules GPU
    work names its stream.
    """
    if stream is None:
        raise TypeError(
            f"{where} needs an explicit stream: pass stream=partition.stream "
            "(or any object with __cuda_stream__); gcexplore never uses the default stream"
        )
    if not hasattr(stream, "__cuda_stream__"):
        raise TypeError(
            f"{where} got stream={stream!r}, which is not a CUDA stream "
            "(expected a cuda.core Stream or an object with __cuda_stream__)"
        )
    return stream


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

    driver = _driver()
    kernel = _probe_kernel(dev)
    nbytes = _PROBE_SLOTS * 4
    buf = dev.allocate(nbytes, stream=stream)
    try:
        s = int(stream.handle)
        _check(driver.cuMemsetD32Async(int(buf.handle), 0, _PROBE_SLOTS, s), "cuMemsetD32Async")
        # Eight blocks per SM of the whole device, each resident for 5 us: far more
        # blocks than any partition holds at once, so every SM it owns gets some.
        grid = 8 * device_sm_count
        launch(stream, LaunchConfig(grid=grid, block=128), kernel, buf, np.uint64(5_000))
        host = np.zeros(_PROBE_SLOTS, dtype=np.uint32)
        _check(driver.cuMemcpyDtoHAsync(host.ctypes.data, int(buf.handle), nbytes, s), "cuMemcpyDtoHAsync")
        stream.sync()
    finally:
        buf.close(stream)
        stream.sync()
    return frozenset(int(i) for i in np.flatnonzero(host))


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

    def _check_open(self) -> None:
        if self._closed:
            raise GreenContextError(
                f"partition {self.name} ({self.sm_count} SMs) is closed; "
                "create a new one with gcexplore.split(...)"
            )

    @property
    def context(self):
        """The cuda.core Context (a green context, or the primary context for ``"device"``)."""
        self._check_open()
        return self._context

    @property
    def stream(self):
        """The first of this partition's streams (a non-blocking cuda.core Stream)."""
        self._check_open()
        return self._streams[0]

    @property
    def streams(self) -> tuple:
        """The streams created with the partition."""
        self._check_open()
        return tuple(self._streams)

    def create_stream(self, *, priority: int | None = None):
        """Create one more non-blocking stream on this partition; closed with it."""
        self._check_open()
        s = self._stream_factory(priority)
        self._extra_streams.append(s)
        return s

    def torch_stream(self, stream=None):
        """This partition's stream (or ``stream``) as a ``torch.cuda.Stream``.

        Work queued on it by PyTorch runs on this partition's SMs only.
        """
        self._check_open()
        try:
            import torch
        except ImportError as e:
            raise ImportError("torch_stream() needs PyTorch: pip install torch") from e
        s = require_stream(stream if stream is not None else self.stream, "torch_stream")
        return torch.cuda.get_stream_from_external(int(s.handle), device=self.device_index)

    def cupy_stream(self, stream=None):
        """This partition's stream (or ``stream``) as a CuPy stream (work on it runs on this partition)."""
        self._check_open()
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
        self._check_open()
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

    def _check_open(self):
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
        self._check_open()
        return self._remainder

    @property
    def all(self) -> list[Partition]:
        """Requested groups followed by the remainder (when there is one)."""
        self._check_open()
        return self._groups + ([self._remainder] if self._remainder is not None else [])

    def __len__(self) -> int:
        return len(self._groups)

    def __getitem__(self, i) -> Partition:
        self._check_open()
        return self._groups[i]

    def __iter__(self) -> Iterator[Partition]:
        self._check_open()
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


def _check_streams(streams) -> int:
    if isinstance(streams, bool) or not isinstance(streams, int) or streams < 1:
        raise ValueError(f"streams must be an int >= 1, got {streams!r}")
    return streams


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
        info.require("structured_split")
    plan = plan_split(info, sm_counts, rounding=rounding)
    key = (info.index, tuple(plan.granted), plan.remainder, coscheduled_sm_count if coscheduled_sm_count is None
           else tuple(np.atleast_1d(coscheduled_sm_count).tolist()))
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
            part._streams = [factory(None) for _ in range(streams)]
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
        part._streams = [factory(None) for _ in range(streams)]
    return part
