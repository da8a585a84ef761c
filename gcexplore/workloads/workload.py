"""A workload: a named callable ``fn(*, stream)`` with the work it declares, and adapters for
the user's own code.

:class:`Workload` wraps such a callable with a name and the work it declares (FLOPs, bytes
moved, items), so the profiler can report throughput in units. Adapters: :func:`from_kernel`
(a cuda.core Kernel with its LaunchConfig and arguments), :func:`from_torch` and
:func:`from_cupy` (callables run with the given stream made current in that library). PyTorch
and CuPy are imported only when used. The built-in kernels are in :mod:`.builtins`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..device.driver import require_stream

if TYPE_CHECKING:
    from .builtins import Recorder

__all__ = ["Workload", "from_cupy", "from_kernel", "from_torch"]


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
    make_recorder : callable or None
        For built-ins: builds the :class:`~gcexplore.workloads.builtins.Recorder` behind
        :meth:`instrumented` (None otherwise).
    release : callable or None
        For built-ins: frees the device memory they hold, called by :meth:`close`.
    new_round : callable or None
        Called when an experiment starts a new round: a workload built with ``setup=``
        (:func:`from_torch`, :func:`from_cupy`) allocates its inputs afresh at its next call.
    """

    name: str
    fn: Callable[..., Any]
    flops: float | None = None
    bytes: float | None = None
    items: float | None = None
    blocks: int | None = None
    device: int | None = None
    make_recorder: Callable[[], Recorder] | None = dataclasses.field(default=None, repr=False)
    release: Callable[[], None] | None = dataclasses.field(default=None, repr=False)
    new_round: Callable[[], None] | None = dataclasses.field(default=None, repr=False)

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
        return self.make_recorder is not None

    def instrumented(self) -> Recorder:
        """A :class:`Recorder`: this workload launching with per-block recording on.

        Raises
        ------
        ValueError
            The workload is not a built-in kernel.
        """
        if self.make_recorder is None:
            raise ValueError(
                f"workload {self.name!r} cannot be instrumented: only the built-in kernels "
                "(gcexplore.workloads.builtin) record per-block SM ids and times"
            )
        return self.make_recorder()

    def close(self) -> None:
        """Free device memory a built-in workload holds (no-op for others)."""
        if self.release is not None:
            self.release()

    def __repr__(self) -> str:
        work = [f"{k}={getattr(self, k):.3g}" for k in ("flops", "bytes", "items") if getattr(self, k)]
        return f"<Workload {self.name}{' ' + ' '.join(work) if work else ''}>"


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


#: Largest pad (bytes, drawn uniformly) allocated ahead of a ``setup=`` workload's fresh inputs.
PAD_MAX_BYTES = 64 << 20


def _adapter(fn, *, library: str, pip: str, name, device, flops, bytes, items,  # noqa: A002
             external: Callable[[Any, Any, int], Any], setup=None, pad=None) -> Workload:
    """A workload calling ``fn()`` with the library's view of the given stream current; with
    ``setup``, ``fn = setup()`` is made afresh at the first call of every round."""
    if (fn is None) == (setup is None):
        raise TypeError(f"a {library} workload needs fn (a callable holding its inputs) or setup (a callable that "
                        f"allocates them and returns that callable, made afresh each round), exactly one of them")
    if not callable(fn if setup is None else setup):
        raise TypeError(f"a {library} workload needs a callable {'fn' if setup is None else 'setup'}(), "
                        f"got {fn if setup is None else setup!r}")
    cache: dict[int, Any] = {}
    state = {"fn": fn, "stale": setup is not None, "held": None}
    rng = np.random.default_rng()

    def run(*, stream):
        lib = _import(library, pip)
        handle = int(stream.handle)
        ext = cache.get(handle)
        if ext is None:
            dev = device if device is not None else stream.device.device_id
            ext = cache[handle] = external(lib, stream, dev)
        with ext:
            if state["stale"]:  # a new round: new inputs, made before the old are dropped and behind a
                assert setup is not None and pad is not None  # stale is set only with setup (and its pad)
                dev = device if device is not None else stream.device.device_id  # pad, so they land elsewhere
                held = pad(lib, dev, int(rng.integers(0, PAD_MAX_BYTES)))
                made = setup()
                if not callable(made):
                    raise TypeError(f"setup() of workload {name or library!r} must return the callable to time, "
                                    f"got {made!r}")
                state.update(fn=made, held=held, stale=False)
            state["fn"]()

    def new_round():
        state["stale"] = setup is not None

    def release():
        if setup is not None:
            state.update(fn=None, held=None, stale=True)

    label = name or getattr(fn if setup is None else setup, "__name__", library)
    return Workload(label, run, flops, bytes, items, device=None if device is None else int(device),
                    release=release if setup is not None else None,
                    new_round=new_round if setup is not None else None)


def _torch_stream(torch, stream, dev):
    ts = torch.cuda.get_stream_from_external(int(stream.handle), device=dev)
    return torch.cuda.stream(ts)


def _torch_pad(torch, dev, nbytes: int):
    return torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{dev}")


def _cupy_pad(cupy, dev, nbytes: int):
    return cupy.empty(nbytes, dtype=cupy.uint8)


def _cupy_stream(cupy, stream, dev):
    if hasattr(cupy.cuda.Stream, "from_external"):  # CuPy 14+
        return cupy.cuda.Stream.from_external(stream)
    return cupy.cuda.ExternalStream(int(stream.handle), dev)


def from_torch(fn: Callable[[], Any] | None = None, *, setup: Callable[[], Callable[[], Any]] | None = None,
               name: str | None = None, device=None, flops: float | None = None,
               bytes: float | None = None, items: float | None = None) -> Workload:  # noqa: A002
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
    setup : callable, optional
        Instead of ``fn``: ``setup()`` allocates the inputs and returns ``fn``. It is called
        at the first call of every round of an experiment (with the stream current, behind a
        pad of random size, before the old inputs are dropped), so each round draws its
        allocations again, as a separate run would; their cost is in the round's warm-up.
    name : str, optional
        Default: ``fn.__name__`` (``setup.__name__``).
    device : int, optional
        CUDA device index; default: the stream's device.
    flops, bytes, items : float, optional
        Declared work per call.
    """
    return _adapter(fn, library="torch", pip="torch", name=name, device=device, flops=flops,
                    bytes=bytes, items=items, external=_torch_stream, setup=setup, pad=_torch_pad)


def from_cupy(fn: Callable[[], Any] | None = None, *, setup: Callable[[], Callable[[], Any]] | None = None,
              name: str | None = None, device=None, flops: float | None = None,
              bytes: float | None = None, items: float | None = None) -> Workload:  # noqa: A002
    """A workload running a CuPy callable with the given stream current in CuPy.

    Parameters are as in :func:`from_torch`.
    """
    return _adapter(fn, library="cupy", pip="cupy-cuda13x", name=name, device=device, flops=flops,
                    bytes=bytes, items=items, external=_cupy_stream, setup=setup, pad=_cupy_pad)
