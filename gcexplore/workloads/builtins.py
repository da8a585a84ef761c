"""Built-in kernels with known work: compute, memory, copy, spin, latency.

Compiled once per process and architecture with cuda.core's :class:`~cuda.core.Program`
(NVRTC, cubin) and cached (:mod:`gcexplore.device.kernels`). Their default sizes take about
1 ms on a whole H100. Each can record, per block, the SM it ran on (``%smid``) and its start
and end (``%globaltimer``), for :func:`gcexplore.occupancy` (see
:meth:`~gcexplore.workloads.workload.Workload.instrumented` and :class:`Recorder`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..device.driver import check, require_stream, use
from ..device.kernels import REC_WORDS, builtin_kernel
from .workload import Workload

__all__ = ["BUILTINS", "Recorder", "builtin", "compute", "copy", "latency", "memory", "spin"]

BUILTINS = ("compute", "memory", "copy", "spin", "latency")


def _driver():
    from cuda.bindings import driver

    return driver


def _release_framework_caches() -> list[str]:
    """Hand back the device memory PyTorch's and CuPy's allocators cache but no tensor or array uses (each keeps
    freed blocks per stream, and every partition's stream is a new one, so a long sweep of their workloads can
    cache nearly the whole card); only frameworks already imported are touched. Returns those released."""
    import sys

    done = []
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
        done.append("torch")
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        cupy.get_default_memory_pool().free_all_blocks()
        done.append("cupy")
    return done


def _allocate(dev, n: int, stream):
    """``dev.allocate``; where the card is full, once more after the frameworks' unused caches are released (what
    each would do itself before failing one of its own allocations)."""
    try:
        return dev.allocate(n, stream=stream)
    except Exception as e:
        if "OUT_OF_MEMORY" not in str(e) or not _release_framework_caches():
            raise
    return dev.allocate(n, stream=stream)


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
                    buf = _allocate(dev, n, self._stream)
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


def polite(*, n: int = 3 << 25, threads: int = 256, device=0, name: str = "polite") -> Workload:
    """Memory-bound built-in that keeps few requests in flight: ``dst = 0.5 * src`` over ``n`` floats,
    one 4-byte element per thread and nothing unrolled, the way a framework's plain elementwise kernel
    streams. Beside it a neighbour's DRAM requests meet short queues; beside :func:`copy` (8 x 16 bytes a
    thread) they meet full ones. ``solo_profile(probe="polite")`` times a workload beside both.

    Bytes per call = ``2 * 4 * n``: 805 MB with the default ``n = 3 * 2**25``.
    """
    _positive(n=n, threads=threads)
    index = _resolved_index(device)
    grid = -(-n // threads)
    holder: dict[str, _DeviceBuffers] = {}

    def args(rec):
        b = holder["b"]
        return (np.uint64(b.ptr(0)), np.uint64(b.ptr(1)), np.float32(0.5), np.uint64(n), np.uint64(rec))

    return _builtin_with_buffers(name, index, "gcx_scale1", grid, threads, args, [n * 4] * 2, holder,
                                 flops=float(n), nbytes=8.0 * n, items=float(n))


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
                    make_recorder=instrument, release=close)


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
