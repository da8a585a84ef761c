"""Driver checks, device facts, split planning, ``use`` and explicit streams.

The layer everything else stands on. Planning (:func:`plan_split`) is pure Python over a
:class:`DeviceInfo`, so it runs anywhere; the rest is a thin layer over ``cuda.core``
(>= 1.2) and ``cuda.bindings`` that needs a GPU.

Over 500 lines: the driver checks, device facts and split planning every layer calls, the pure plan
beside the thin driver calls it is checked against.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import threading
from collections.abc import Iterator, Sequence
from typing import Any, cast

import math
import numbers

from .._checks import as_int

__all__ = [
    "DeviceInfo",
    "GreenContextError",
    "PlannedGroup",
    "SplitPlan",
    "UnsupportedError",
    "device_count",
    "device_info",
    "gpu_available",
    "plan_split",
    "require_stream",
    "use",
]

# Driver versions (cuDriverGetVersion encoding: 1000 * major + 10 * minor).
#: The oldest driver gcexplore runs on: it pins the CUDA 13 bindings and NVRTC 13, whose
#: kernels (PTX ISA 9.0) a CUDA 12 driver cannot load; tested on 13.0 (R580) and newer.
MIN_DRIVER = 13000
#: What to do without a usable GPU, appended to every "no GPU" message.
NO_GPU_HINT = ("without a GPU, `gcexplore demo` shows the recorded H100 results, "
               "gcexplore.load_recorded(name) loads them for the plots and explorers, and "
               "gcexplore.plan_split(gcexplore.DeviceInfo(...), [24]) plans splits for a described "
               "device (docs/guide.md, 'Without a GPU')")
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
    uuid, pci_bus_id : str
        The card's UUID (two cards of one model share a name) and PCI bus id ("" when unknown).
    l2_cache_bytes : int
        L2 cache size in bytes (0 when unknown).
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
    uuid: str = ""
    pci_bus_id: str = ""
    l2_cache_bytes: int = 0

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

    @classmethod
    def from_result(cls, df) -> "DeviceInfo":
        """The card a sweep was measured on, from its metadata (``df.attrs``) and its split sizes
        (the smallest gives ``min_partition_size``, their common step ``alignment``): planning
        for a recorded card needs no GPU."""
        from ..schema import IDENTITY

        a = df.attrs
        src = {f.source: a.get(f.name) for f in IDENTITY if f.source}  # DeviceInfo field -> recorded value
        missing = [f.name for f in IDENTITY if f.source in ("name", "sm_count", "driver_version_str")
                   and not src[f.source]]
        if missing or "split_sm_count" not in getattr(df, "columns", ()):
            raise ValueError(f"DeviceInfo.from_result needs a sweep with its metadata; missing "
                             f"{missing or ['the split_sm_count column']}")
        sizes = sorted({int(k) for k in df["split_sm_count"]})
        drv = src["driver_version_str"]
        if isinstance(drv, str):  # "13.0", as metadata() writes it
            major, minor = (drv.split(".") + ["0"])[:2]
            drv = int(major) * 1000 + int(minor) * 10
        cc = a.get("compute_capability", "0.0")
        cc = tuple(int(x) for x in (cc.split(".") if isinstance(cc, str) else cc))
        given = {"name", "index", "sm_count", "driver_version_str"}
        rest = {k: v for k, v in src.items() if k not in given and v not in (None, "")}  # uuid, PCI, L2, versions
        return cls(name=str(src["name"]), index=int(src["index"] or 0), compute_capability=cast("tuple[int, int]", cc),
                   sm_count=int(src["sm_count"]), min_partition_size=sizes[0],
                   alignment=math.gcd(*sizes), driver_version=int(drv), **rest)

    def identity(self) -> dict[str, Any]:
        """The identity fields this card gives (:data:`gcexplore.schema.IDENTITY` with a
        ``source``), named as every result names them."""
        from ..schema import IDENTITY

        return {f.name: getattr(self, f.source) for f in IDENTITY if f.source}

    def metadata(self) -> dict[str, Any]:
        """The device facts as plain values, for ``DataFrame.attrs``."""
        from .._version import __version__

        return {
            **self.identity(),
            "compute_capability": f"{self.compute_capability[0]}.{self.compute_capability[1]}",
            "gcexplore_version": __version__,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }


def driver_module():
    from cuda.bindings import driver

    return driver


def check(result, what: str) -> Any:  # whatever the (untyped) driver call returned
    """Unpack a cuda.bindings result tuple, raising with context on error."""
    driver = driver_module()
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
        driver = driver_module()
        try:
            version = check(driver.cuDriverGetVersion(), "cuDriverGetVersion")
            if not _initialized:
                check(driver.cuInit(0), "cuInit")
                _initialized = True
        except GreenContextError as e:
            raise UnsupportedError(f"no usable CUDA GPU: {str(e).rstrip('.')}; {NO_GPU_HINT}") from e
        except Exception as e:  # the driver library itself is missing; the loader's detail stays the cause
            raise UnsupportedError(f"no NVIDIA driver found; {NO_GPU_HINT}") from e
        return version


def device_count() -> int:
    """Number of visible CUDA devices (raises :class:`UnsupportedError` without a driver)."""
    _init()
    return check(driver_module().cuDeviceGetCount(), "cuDeviceGetCount")


def gpu_available() -> bool:
    """True when a CUDA device and a driver gcexplore runs on (>= :data:`MIN_DRIVER`) are present."""
    try:
        return device_count() > 0 and _init() >= MIN_DRIVER
    except UnsupportedError:
        return False


def _device_index(device) -> int:
    if isinstance(device, bool):
        raise TypeError(f"device must be an int or cuda.core.Device, got {device!r}")
    if isinstance(device, numbers.Integral):
        index = as_int("device", device)
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
        No GPU or driver, or a driver older than :data:`MIN_DRIVER` (13.0).
    ValueError
        ``device`` is not a visible device.
    """
    index = _device_index(device)
    if index in _info_cache:
        return _info_cache[index]
    version = _init()
    try:  # through the bindings: no cuda.core import, no primary context (gcexplore info in 0.2 s)
        facts = bindings_facts(index)
    except Exception:  # an older binding without the SM-resource fields: cuda.core reads them
        facts = None
    name = facts["name"] if facts else _cuda_device(index).name
    if version < MIN_DRIVER:
        raise UnsupportedError(
            f"gcexplore requires NVIDIA driver {_version_str(MIN_DRIVER)} (R580) or newer for its CUDA 13 "
            f"bindings and NVRTC, found {_version_str(version)} on {name}; update the NVIDIA driver, or: "
            f"{NO_GPU_HINT}"
        )
    import importlib.metadata

    import cuda.bindings

    if facts is None:
        dev = _cuda_device(index)
        with use(index):
            sm = dev.resources.sm
            facts = {"name": name, "compute_capability": tuple(dev.compute_capability), "sm_count": int(sm.sm_count),
                     "min_partition_size": int(sm.min_partition_size), "alignment": int(sm.coscheduled_alignment)}
    info = DeviceInfo(index=index, driver_version=version, cuda_core_version=importlib.metadata.version("cuda-core"),
                      cuda_bindings_version=cuda.bindings.__version__, **facts, **card_facts(index))
    _info_cache[index] = info
    return info


def bindings_facts(index: int) -> dict:
    """Name, compute capability and SM resource of device ``index`` from the driver API alone (the
    fields ``cuda.core``'s ``dev.resources.sm`` reads), without a context."""
    d = driver_module()
    dev = check(d.cuDeviceGet(index), "cuDeviceGet")
    raw = check(d.cuDeviceGetName(256, dev), "cuDeviceGetName")
    attr = d.CUdevice_attribute
    cc = tuple(check(d.cuDeviceGetAttribute(a, dev), "cuDeviceGetAttribute")
               for a in (attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                         attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
    res = check(d.cuDeviceGetDevResource(dev, d.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource")
    return {"name": bytes(raw).split(b"\0", 1)[0].decode(), "compute_capability": cc, "sm_count": int(res.sm.smCount),
            "min_partition_size": int(res.sm.minSmPartitionSize), "alignment": int(res.sm.smCoscheduledAlignment)}


def card_facts(index: int) -> dict:
    """UUID, PCI bus id and L2 size of device ``index`` through the driver API (what tells two cards
    of one model apart); a field the binding cannot read is left empty rather than failing."""
    d = driver_module()
    out = {}
    try:
        dev = check(d.cuDeviceGet(index), "cuDeviceGet")
    except Exception:
        return out
    try:
        raw = bytes(check(d.cuDeviceGetUuid(dev), "cuDeviceGetUuid").bytes)[:16]
        h = raw.hex()
        out["uuid"] = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
    except Exception:  # an older binding: the UUID stays unknown
        pass
    try:
        bus = check(d.cuDeviceGetPCIBusId(32, dev), "cuDeviceGetPCIBusId")
        out.update(pci_bus_id=(bus if isinstance(bus, str) else bytes(bus).split(b"\0", 1)[0].decode()).strip("\0"))
    except Exception:
        pass
    try:
        l2 = d.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
        out.update(l2_cache_bytes=int(check(d.cuDeviceGetAttribute(l2, dev), "cuDeviceGetAttribute")))
    except Exception:
        pass
    return out


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
    if isinstance(sm_counts, numbers.Integral) and not isinstance(sm_counts, bool):
        counts = [sm_counts]
    elif isinstance(sm_counts, Sequence) and not isinstance(sm_counts, str):
        counts = list(sm_counts)
    else:
        raise TypeError(f"sm_counts must be an int or a sequence of ints, got {sm_counts!r}")
    if not counts:
        raise ValueError("sm_counts is empty: give at least one SM count, e.g. [24]")
    for c in counts:
        if isinstance(c, bool) or not isinstance(c, numbers.Integral):
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


def current_context():
    return check(driver_module().cuCtxGetCurrent(), "cuCtxGetCurrent")


def _set_current(ctx) -> None:
    check(driver_module().cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


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
    if _is_partition(target):
        target.require_open()
        ctx = target.context.handle
        prev = current_context()
        _set_current(ctx)
        try:
            yield target
        finally:
            _set_current(prev)
        return
    index = _device_index(target)
    dev = _cuda_device(index)
    prev = current_context()
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


def _is_partition(target) -> bool:
    # Duck-typed: partitions.py stands on this module, so it cannot be imported here.
    return hasattr(target, "require_open") and hasattr(getattr(type(target), "context", None), "fget")
