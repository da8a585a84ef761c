"""Workloads: built-in kernels with known work, and adapters for the user's own code.

A workload is anything called as ``fn(*, stream)``. :class:`Workload` wraps such a
callable with a name and the work it declares (FLOPs, bytes moved, items), so the
profiler can report throughput in units.

Built-in kernels (:func:`builtin`, or :func:`compute`, :func:`memory`, :func:`copy`,
:func:`spin`, :func:`latency`) are compiled once per process and architecture with
cuda.core's :class:`~cuda.core.Program` (NVRTC, cubin) and cached. Their default
sizes take about 1 ms on a whole H100. Each can record, per block, the SM it ran on
(``%smid``) and its start and end (``%globaltimer``), for
:func:`gcexplore.occupancy` (see :meth:`Workload.instrumented`).

Adapters: :func:`from_kernel` (a cuda.core Kernel with its LaunchConfig and
arguments), :func:`from_torch` and :func:`from_cupy` (callables run with the given
stream made current in that library). PyTorch and CuPy are imported only when used.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..device.driver import check, require_stream, use
from ..device.kernels import REC_WORDS, builtin_kernel

__all__ = [
    "BUILTINS",
    "Recorder",
    "Workload",
    "as_workload",
    "builtin",
    "compute",
    "copy",
    "from_cupy",
    "from_kernel",
    "from_torch",
    "latency",
    "memory",
    "parse_builtin",
    "spin",
]

BUILTINS = ("compute", "memory", "copy", "spin", "latency")


def _driver():
    from cuda.bindings import driver

    return driver


class _DeviceBuffers:
    """Device memory owned by a built-in workload (allocated once, zero-filled).

    The allocation stream stays alive with the buffers: cuda.core frees a buffer on
    the stream it was allocated on.
    """

    def __init__(self, device: int, sizes: list[int]):
        self.device = device
        self._bufs = []
        with use(device) as dev:
            self._stream = dev.create_stream()
            try:
                for nbytes in sizes:
                    n = max(int(nbytes), 16)
                    buf = dev.allocate(n, stream=self._stream)
                    self._bufs.append(buf)
                    check(_driver().cuMemsetD8Async(int(buf.handle), 0, n, int(self._stream.handle)),
                           "cuMemsetD8Async")
                self._stream.sync()
            except BaseException:
                self.close()
                raise

    def ptr(self, i: int) -> int:
        return int(self._bufs[i].handle)

    def close(self) -> None:
        bufs, self._bufs = self._bufs, []
        stream, self._stream = getattr(self, "_stream", None), None
        if stream is None:
            return
        try:
            for buf in bufs:
                buf.close(stream)
            stream.sync()
        finally:
            stream.close()


@dataclasses.dataclass(frozen=True, eq=False)
class Workload:
    """A named callable ``fn(*, stream)`` with the work it declares.

    Build one with :func:`builtin` (or :func:`compute`, :func:`memory`, ...),
    :func:`from_kernel`, :func:`from_torch`, :func:`from_cupy`, or directly from any
    callable that takes ``stream=`` as a keyword.

    Attributes
    ----------
    name : str
        Name used in result DataFrames (column ``workload``).
    fn : callable
        Called as ``fn(stream=stream)``; must enqueue its GPU work on that stream only.
    flops : float or None
        Floating-point operations per call (None: undeclared; throughput is NaN).
    bytes : float or None
        Bytes read plus written in device memory per call (None: undeclared).
    items : float or None
        Application items per call (tokens, elements ...), for the caller's own units.
    blocks : int or None
        Thread blocks per launch, for built-ins (None otherwise).
    device : int or None
        The device whose memory and kernels it uses (built-ins, and adapters given
        ``device=``); the profiler refuses to run it on another device's partition.
        None: not tied to one device.
    """

    name: str
    fn: Callable[..., Any]
    flops: float | None = None
    bytes: float | None = None
    items: float | None = None
    blocks: int | None = None
    device: int | None = None
    _instrument: Callable[[], Recorder] | None = dataclasses.field(default=None, repr=False)
    _close: Callable[[], None] | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a workload needs a non-empty str name, got {self.name!r}")
        if not callable(self.fn):
            raise TypeError(f"workload {self.name!r}: fn must be callable as fn(stream=...), got {self.fn!r}")
        for field in ("flops", "bytes", "items"):
            v = getattr(self, field)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float, np.number))
                                  or not math.isfinite(float(v)) or v < 0):
                raise ValueError(f"workload {self.name!r}: {field} must be a finite number >= 0 or None, got {v!r}")

    def __call__(self, *, stream):
        require_stream(stream, f"workload {self.name!r}")
        return self.fn(stream=stream)

    @property
    def instrumentable(self) -> bool:
        """True for built-in kernels, which can record per-block SM ids and times."""
        return self._instrument is not None

    def instrumented(self) -> Recorder:
        """A :class:`Recorder`: this workload launching with per-block recording on.

        Raises
        ------
        ValueError
            The workload is not a built-in kernel.
        """
        if self._instrument is None:
            raise ValueError(
                f"workload {self.name!r} cannot be instrumented: only the built-in kernels "
                f"({', '.join(BUILTINS)}) record per-block SM ids and times"
            )
        return self._instrument()

    def close(self) -> None:
        """Free device memory a built-in workload holds (no-op for others)."""
        if self._close is not None:
            self._close()

    def __repr__(self) -> str:
        work = [f"{k}={getattr(self, k):.3g}" for k in ("flops", "bytes", "items") if getattr(self, k)]
        return f"<Workload {self.name}{' ' + ' '.join(work) if work else ''}>"


class Recorder:
    """A built-in workload whose launches record per block (``%smid``, start, end).

    Attributes
    ----------
    workload : Workload
        Call it like the original; each launch overwrites the records.
    blocks : int
        Blocks per launch (rows of :meth:`records`).
    """

    def __init__(self, workload: Workload, blocks: int, buffers: _DeviceBuffers):
        self.workload = workload
        self.blocks = blocks
        self._buffers = buffers

    @property
    def ptr(self) -> int:
        return self._buffers.ptr(0)

    def records(self, *, stream) -> np.ndarray:
        """Copy the last launch's records to the host.

        Parameters
        ----------
        stream : cuda.core Stream
            Stream ordered after the launch (it is synchronised).

        Returns
        -------
        numpy.ndarray
            Shape ``(blocks, 3)``, uint64: ``sm_id``, ``start_ns``, ``end_ns``
            (``%globaltimer``, absolute).
        """
        require_stream(stream, "Recorder.records")
        host = np.zeros((self.blocks, REC_WORDS), dtype=np.uint64)
        check(_driver().cuMemcpyDtoHAsync(host.ctypes.data, self.ptr, host.nbytes, int(stream.handle)),
               "cuMemcpyDtoHAsync")
        stream.sync()
        return host

    def span_ns(self, *, stream) -> int:
        """Earliest block start to latest block end of the last launch, in ns."""
        r = self.records(stream=stream)
        return int(r[:, 2].max()) - int(r[:, 1].min())

    def close(self) -> None:
        self._buffers.close()


def _resolved_index(device) -> int:
    from ..device.driver import device_info

    return device_info(device).index


def _sm_count(device: int) -> int:
    from ..device.driver import device_info

    return device_info(device).sm_count


def compute(*, iters: int = 1536, blocks: int | None = None, threads: int = 256, device=0,
            name: str = "compute") -> Workload:
    """Compute-bound built-in: FP32 FMA chains, known FLOPs.

    Parameters
    ----------
    iters : int, default 1536
        Loop iterations per thread (8 FMAs each).
    blocks : int, optional
        Thread blocks; default 64 per SM of the whole device (many short blocks, so
        any partition size gets whole waves).
    threads : int, default 256
    device : int, default 0
    name : str, default "compute"

    Notes
    -----
    FLOPs per call = ``blocks * threads * iters * 8 * 2``; about 5.3e10 and 1 ms on a
    whole H100 with the defaults.
    """
    index = _resolved_index(device)
    _positive(iters=iters, threads=threads)
    grid = blocks if blocks is not None else 64 * _sm_count(index)
    _positive(blocks=grid)
    flops = float(grid) * threads * iters * 16
    out_bytes = grid * threads * 4
    holder: dict[str, _DeviceBuffers] = {}

    def args(rec):
        return (np.uint64(holder["b"].ptr(0)), np.int32(iters), np.float32(0.9999),
                np.float32(1e-4), np.uint64(rec))

    return _builtin_with_buffers(name, index, "gcx_fma", grid, threads, args, [out_bytes], holder,
                                 flops=flops, nbytes=float(out_bytes), items=float(grid * threads))


def latency(*, iters: int = 2048, blocks: int = 16, threads: int = 128, device=0,
            name: str = "latency") -> Workload:
    """A short latency-critical built-in: a few blocks of FMA chains, about 10 us.

    Parameters
    ----------
    iters : int, default 2048
    blocks : int, default 16
    threads : int, default 128
    device : int, default 0
    name : str, default "latency"
    """
    return compute(iters=iters, blocks=blocks, threads=threads, device=device, name=name)


def _memory_common(name, index, kernel, n, per_thread, threads, arrays):
    _positive(n=n, per_thread=per_thread, threads=threads)
    if n % 4:
        raise ValueError(f"{name}: n must be a multiple of 4 (float4 accesses), got {n}")
    n4 = n // 4
    grid = -(-n4 // (threads * per_thread))
    return n4, grid, [n * 4] * arrays


def memory(*, n: int = 1 << 28, per_thread: int = 8, threads: int = 256, device=0,
           name: str = "memory") -> Workload:
    """Memory-bound built-in: the STREAM triad ``a = b + s * c`` over ``n`` floats.

    Parameters
    ----------
    n : int, default 2**28
        Floats per array (three arrays of 1 GiB each by default).
    per_thread : int, default 8
        float4 elements per thread; each block streams a contiguous chunk.
    threads : int, default 256
    device : int, default 0
    name : str, default "memory"

    Notes
    -----
    Bytes per call = ``3 * 4 * n`` (two reads, one write): 3.2 GB, about 1 ms on an H100.
    """
    index = _resolved_index(device)
    n4, grid, sizes = _memory_common(name, index, "gcx_triad", n, per_thread, threads, 3)
    holder: dict[str, _DeviceBuffers] = {}

    def args(rec):
        b = holder["b"]
        return (np.uint64(b.ptr(0)), np.uint64(b.ptr(1)), np.uint64(b.ptr(2)), np.float32(0.5),
                np.uint64(n4), np.int32(per_thread), np.uint64(rec))

    return _builtin_with_buffers(name, index, "gcx_triad", grid, threads, args, sizes, holder,
                                 flops=2.0 * n, nbytes=12.0 * n, items=float(n))


def copy(*, n: int = 3 << 27, per_thread: int = 8, threads: int = 256, device=0,
         name: str = "copy") -> Workload:
    """Memory-bound built-in: ``dst = src`` over ``n`` floats.

    Bytes per call = ``2 * 4 * n``: 3.2 GB with the default ``n = 3 * 2**27``.
    """
    index = _resolved_index(device)
    n4, grid, sizes = _memory_common(name, index, "gcx_copy", n, per_thread, threads, 2)
    holder: dict[str, _DeviceBuffers] = {}

    def args(rec):
        b = holder["b"]
        return (np.uint64(b.ptr(0)), np.uint64(b.ptr(1)), np.uint64(n4), np.int32(per_thread),
                np.uint64(rec))

    return _builtin_with_buffers(name, index, "gcx_copy", grid, threads, args, sizes, holder,
                                 nbytes=8.0 * n, items=float(n))


def spin(us: float = 1000.0, *, blocks: int = 1, threads: int = 32, device=0,
         name: str | None = None) -> Workload:
    """A kernel that spins for ``us`` microseconds by ``%globaltimer``.

    Parameters
    ----------
    us : float, default 1000
        Spin time per block, microseconds.
    blocks : int, default 1
        Blocks (each spins ``us``; with more blocks than fit at once, waves add up).
    threads : int, default 32
    device : int, default 0
    name : str, optional
        Default ``"spin"``.

    Notes
    -----
    Declares no work; its in-kernel span (``Recorder.span_ns``) is the reference the
    event timings are checked against.
    """
    index = _resolved_index(device)
    if isinstance(us, bool) or not isinstance(us, (int, float)) or not (us > 0 and math.isfinite(us)):
        raise ValueError(f"spin: us must be a positive number of microseconds, got {us!r}")
    _positive(blocks=blocks, threads=threads)
    ns = int(round(us * 1000))
    holder: dict[str, _DeviceBuffers] = {}

    def args(rec):
        return (np.uint64(ns), np.uint64(rec))

    return _builtin_with_buffers(name or "spin", index, "gcx_spin", blocks, threads, args, [], holder)


def _builtin_with_buffers(name, index, kernel_name, grid, threads, make_args, sizes, holder, *,
                          flops=None, nbytes=None, items=None) -> Workload:
    from cuda.core import LaunchConfig, launch

    with use(index) as dev:
        kernel = builtin_kernel(dev, kernel_name)
    if sizes:
        holder["b"] = _DeviceBuffers(index, sizes)
    config = LaunchConfig(grid=grid, block=threads)

    def build(rec_ptr: int):
        args = make_args(rec_ptr)

        def run(*, stream):
            launch(stream, config, kernel, *args)

        return run

    def close():
        if "b" in holder:
            holder.pop("b").close()

    def instrument() -> Recorder:
        rec = _DeviceBuffers(index, [grid * REC_WORDS * 8])
        # The instrumented copy shares the data buffers (the holder) with the original.
        w = Workload(name, build(rec.ptr(0)), flops, nbytes, items, blocks=grid, device=index)
        return Recorder(w, grid, rec)

    return Workload(name, build(0), flops, nbytes, items, blocks=grid, device=index,
                    _instrument=instrument, _close=close)


def _positive(**values) -> None:
    for k, v in values.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
            raise ValueError(f"{k} must be a positive int, got {v!r}")


_FACTORIES: dict[str, Callable[..., Workload]] = {
    "compute": compute, "memory": memory, "copy": copy, "spin": spin, "latency": latency,
}


def builtin(name: str, *, device=0, **kwargs) -> Workload:
    """A built-in workload by name.

    Parameters
    ----------
    name : {"compute", "memory", "copy", "spin", "latency"}
    device : int, default 0
    **kwargs
        Passed to the factory (e.g. ``us=100`` for ``"spin"``, ``n=`` for ``"memory"``).

    Raises
    ------
    ValueError
        Unknown name (the message lists the built-ins).
    """
    if name not in _FACTORIES:
        raise ValueError(f"unknown built-in workload {name!r}; built-ins are {', '.join(BUILTINS)}")
    return _FACTORIES[name](device=device, **kwargs)


def from_kernel(kernel, config, *args, name: str | None = None, flops: float | None = None,
                bytes: float | None = None, items: float | None = None) -> Workload:  # noqa: A002
    """A workload that launches a cuda.core ``Kernel`` with ``config`` and ``args``.

    Parameters
    ----------
    kernel : cuda.core.Kernel
    config : cuda.core.LaunchConfig
    *args
        Kernel arguments, as :func:`cuda.core.launch` takes them.
    name : str, optional
        Default ``"kernel"``.
    flops, bytes, items : float, optional
        Declared work per launch.
    """
    from cuda.core import LaunchConfig, launch

    if not isinstance(config, LaunchConfig):
        raise TypeError(f"from_kernel: config must be a cuda.core.LaunchConfig, got {type(config).__name__}")

    def run(*, stream):
        launch(stream, config, kernel, *args)

    return Workload(name or "kernel", run, flops, bytes, items)


def _import(module: str, pip: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"this workload needs {module}, which is not installed: pip install {pip}") from e


def _adapter(fn, *, library: str, pip: str, name, device, flops, bytes, items,  # noqa: A002
             external: Callable[[Any, Any, int], Any]) -> Workload:
    """A workload calling ``fn()`` with the library's view of the given stream current."""
    if not callable(fn):
        raise TypeError(f"a {library} workload needs a callable fn(), got {fn!r}")
    cache: dict[int, Any] = {}

    def run(*, stream):
        lib = _import(library, pip)
        handle = int(stream.handle)
        ext = cache.get(handle)
        if ext is None:
            dev = device if device is not None else stream.device.device_id
            ext = cache[handle] = external(lib, stream, dev)
        with ext:
            fn()

    return Workload(name or getattr(fn, "__name__", library), run, flops, bytes, items,
                    device=None if device is None else int(device))


def _torch_stream(torch, stream, dev):
    ts = torch.cuda.get_stream_from_external(int(stream.handle), device=dev)
    return torch.cuda.stream(ts)


def _cupy_stream(cupy, stream, dev):
    if hasattr(cupy.cuda.Stream, "from_external"):  # CuPy 14+
        return cupy.cuda.Stream.from_external(stream)
    return cupy.cuda.ExternalStream(int(stream.handle), dev)


def from_torch(fn: Callable[[], Any], *, name: str | None = None, device=None,
               flops: float | None = None, bytes: float | None = None,  # noqa: A002
               items: float | None = None) -> Workload:
    """A workload running a PyTorch callable on the given stream.

    ``fn()`` is called with no arguments inside
    ``torch.cuda.stream(torch.cuda.get_stream_from_external(int(stream.handle)))``,
    so every PyTorch operation it issues goes to that stream (and so to that
    partition's SMs). Allocate its tensors beforehand; allocations inside ``fn`` are
    timed with it. PyTorch is imported at the first call (ImportError naming the
    package if it is absent).

    Parameters
    ----------
    fn : callable
        ``fn()``; its return value is ignored.
    name : str, optional
        Default: ``fn.__name__``.
    device : int, optional
        CUDA device index; default: the stream's device.
    flops, bytes, items : float, optional
        Declared work per call.
    """
    return _adapter(fn, library="torch", pip="torch", name=name, device=device, flops=flops,
                    bytes=bytes, items=items, external=_torch_stream)


def from_cupy(fn: Callable[[], Any], *, name: str | None = None, device=None,
              flops: float | None = None, bytes: float | None = None,  # noqa: A002
              items: float | None = None) -> Workload:
    """A workload running a CuPy callable with the given stream current in CuPy.

    Parameters are as in :func:`from_torch`.
    """
    return _adapter(fn, library="cupy", pip="cupy-cuda13x", name=name, device=device, flops=flops,
                    bytes=bytes, items=items, external=_cupy_stream)


def as_workload(obj, name: str | None = None, *, device=0) -> Workload:
    """Coerce ``obj`` to a :class:`Workload`.

    A Workload passes through (renamed if ``name`` differs); a str names a built-in;
    any other callable is wrapped as ``fn(stream=...)`` with no declared work.
    """
    if isinstance(obj, Workload):
        return obj if name is None or name == obj.name else dataclasses.replace(obj, name=name)
    if isinstance(obj, str):
        wl = builtin(obj, device=device)
        return wl if name is None else dataclasses.replace(wl, name=name)
    if callable(obj):
        return Workload(name or getattr(obj, "__name__", "workload"), obj)
    raise TypeError(
        f"a workload must be a gcexplore Workload, a built-in name ({', '.join(BUILTINS)}) "
        f"or a callable fn(*, stream), got {type(obj).__name__}"
    )


def _specs(workloads) -> list[tuple[str | None, Any]]:
    if isinstance(workloads, Mapping):
        return [(str(k), w) for k, w in workloads.items()]
    if isinstance(workloads, (Workload, str)) or callable(workloads):
        return [(None, workloads)]
    try:
        return [(None, w) for w in workloads]
    except TypeError:
        raise TypeError("workloads must be a mapping {name: workload} or a sequence of workloads, "
                        f"got {type(workloads).__name__}") from None


def _spec_name(name, obj) -> str:
    if name is not None:
        return name
    if isinstance(obj, (Workload, str)):
        return obj.name if isinstance(obj, Workload) else obj
    return getattr(obj, "__name__", "workload")


def workload_names(workloads) -> list[str]:
    """The names the workloads will have, without building any (ValueError: empty or repeated).

    Used to check a request before anything is compiled or allocated.
    """
    specs = _specs(workloads)
    if not specs:
        raise ValueError("no workloads given: pass a mapping name -> workload or a sequence of them")
    for _, obj in specs:
        if not (isinstance(obj, (Workload, str)) or callable(obj)):
            raise TypeError(f"a workload must be a gcexplore Workload, a built-in name ({', '.join(BUILTINS)}) "
                            f"or a callable fn(*, stream), got {type(obj).__name__}")
        if isinstance(obj, str) and obj not in BUILTINS:
            raise ValueError(f"unknown built-in workload {obj!r}; built-ins are {', '.join(BUILTINS)}")
    names = [_spec_name(n, w) for n, w in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"workload names must be unique, got {names} ({', '.join(dupes)} repeated); "
                         "pass a mapping {name: workload} to name them")
    return names


def as_workloads(workloads, *, device=0) -> tuple[list[Workload], list[Workload]]:
    """Workloads as a list of :class:`Workload` s, and those of them built here from names.

    The caller closes the built ones (they hold device memory). Nothing is built when
    the names are empty or repeated.

    Raises
    ------
    ValueError
        Empty input or duplicate names.
    """
    workload_names(workloads)
    made: list[Workload] = []
    items: list[Workload] = []
    try:
        for name, obj in _specs(workloads):
            w = as_workload(obj, name, device=device)
            if isinstance(obj, str):
                made.append(w)
            items.append(w)
    except BaseException:
        for w in made:
            w.close()
        raise
    return items, made


def parse_builtin(spec: str) -> tuple[str, dict]:
    """``"name"`` or ``"name:key=value,..."`` (``"memory:n=1048576"``) -> (name, options).

    Values are ints, floats, or else strings. ValueError for an unknown name or a
    malformed option (nothing is built).
    """
    name, _, params = str(spec).partition(":")
    if name not in BUILTINS:
        raise ValueError(f"unknown built-in workload {name!r}; built-ins are {', '.join(BUILTINS)}")
    kwargs: dict = {}
    for item in filter(None, params.split(",")):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ValueError(f"bad workload option {item!r} in {spec!r}; write name:key=value,...")
        for conv in (int, float):
            try:
                kwargs[key] = conv(value)
                break
            except ValueError:
                continue
        else:
            kwargs[key] = value
    return name, kwargs
