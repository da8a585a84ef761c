"""The user's step in a communication-SMs run: the compute beside the collective, the collective's dtype
and buckets, and the one-communicator-per-partition rule.

The compute (``CommSpec(compute=...)``) is a built-in recipe (``"compute"``, ``"memory:n=1048576"``:
:func:`gcexplore.workloads.spec.parse_recipe`) or a factory ``"package.module:function"``, resolved as
campaigns resolve theirs (:func:`gcexplore.workloads.spec.resolve_factory`, checked by
:func:`gcexplore.workloads.spec.check_factory`) and called in each rank's process, once per layout, with
that layout's compute stream current in PyTorch (a green partition's stream: what it allocates and
warms up runs there)::

    factory(device=rank, **compute_kwargs)          # plus, where the factory names them:
            stream=<the compute partition's stream>, sm_count=<its SMs>, comm=<a communicator of its own>

It returns a :class:`~gcexplore.workloads.Workload`, a recipe, or a callable ``fn(*, stream)``. A
factory that names ``comm`` gets a communicator split from the rank's for the compute alone: two
partitions of one process enqueueing on one communicator deadlock (the NCCL kernels of two streams
meet in different orders on different ranks: sglang#31117), so :func:`check_communicators` refuses any
step that would put one communicator on two streams before anything of it is enqueued.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

__all__ = ["DTYPES", "CommunicatorShared", "build_compute", "check_buckets", "check_communicators", "check_compute",
           "check_compute_factory", "communicators_of", "gemm_chain"]

#: Element types of a collective's buffers -> bytes per element.
DTYPES = {"float32": 4, "bfloat16": 2, "float16": 2}
_REF = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*\Z")  # as campaigns write a factory
#: What the rank passes a factory besides ``device`` and ``compute_kwargs``, where its signature names it.
OFFERED = ("stream", "sm_count", "comm")


class CommunicatorShared(ValueError):
    """Two partitions of one process were given one NCCL communicator (refused before it can hang)."""


def check_compute(compute, kwargs) -> tuple:
    """``(compute, kwargs items)`` checked without importing anything: ValueError / TypeError in one sentence."""
    from ..workloads.builtins import BUILTINS
    from ..workloads.spec import is_recipe, parse_recipe

    if not isinstance(kwargs, Mapping):
        raise TypeError(f"compute_kwargs must be a mapping of keyword arguments for the factory, got {kwargs!r}")
    kwargs = dict(kwargs)
    if compute is None:
        if kwargs:
            raise ValueError("compute_kwargs are for a compute factory; with compute=None (the GEMM chain) "
                             "set gemms= and gemm_n= instead")
        return None, ()
    if not isinstance(compute, str):
        raise TypeError(f"compute is a built-in recipe ({', '.join(BUILTINS)}, e.g. 'memory:n=1048576') or a factory "
                        f"written 'package.module:function' (each rank's process imports it: a function object does "
                        f"not travel to a spawned rank), got {type(compute).__name__}")
    if is_recipe(compute):
        if kwargs:
            raise ValueError(f"compute {compute!r} is a built-in recipe: its options go in the recipe "
                             "('name:key=value,...'), not compute_kwargs")
        return parse_recipe(compute).text, ()
    if not _REF.match(compute.strip()):
        raise ValueError(f"compute must be a built-in recipe ({', '.join(BUILTINS)}, e.g. 'memory:n=1048576') or a "
                         f"factory 'package.module:function', got {compute!r}")
    bad = [k for k in kwargs if not isinstance(k, str) or not k.isidentifier() or k in ("device", *OFFERED)]
    if bad:
        raise ValueError(f"compute_kwargs names must be keyword identifiers other than device, {', '.join(OFFERED)} "
                         f"(the rank passes those), got {bad}")
    try:
        json.dumps(kwargs)
    except (TypeError, ValueError) as e:
        raise ValueError(f"compute_kwargs must be recordable in the run's spec (JSON: numbers, strings, lists, "
                         f"dicts), got {kwargs!r} ({e})") from None
    return compute.strip(), tuple(sorted(kwargs.items()))


def check_compute_factory(compute: str, kwargs: Mapping):
    """The factory of ``compute``, imported and its signature checked (in the launcher, before any rank starts)."""
    from ..workloads.spec import check_factory, resolve_factory

    try:
        fn = resolve_factory(compute)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"compute factory {compute!r} cannot be imported here ({type(e).__name__}: {e}); each rank's "
                         "process imports it the same way, so the module must be importable (on sys.path)") from None
    check_factory(fn, dict(kwargs), compute)
    return fn


def build_compute(compute: str, kwargs: Mapping, *, device: int, stream, sm_count: int, comm=None, torch=None):
    """The user's compute on ``stream`` (a factory's, or a built-in recipe's), named ``"compute"``."""
    import contextlib
    import dataclasses
    import inspect

    from ..workloads.spec import as_workload, is_recipe

    if is_recipe(compute):
        wl = as_workload(compute, "compute", device=device)
    else:
        fn = check_compute_factory(compute, kwargs)
        named = set(inspect.signature(fn).parameters)
        offer = {"stream": stream, "sm_count": int(sm_count), "comm": comm}
        extra = {k: v for k, v in offer.items() if k in named and v is not None}
        if "comm" in named and comm is None:
            raise ValueError(f"compute factory {compute!r} names comm, but no communicator of its own was made")
        ctx = (torch.cuda.stream(torch.cuda.get_stream_from_external(int(stream.handle), device=device))
               if torch is not None else contextlib.nullcontext())
        with ctx:  # what the factory allocates and warms up runs on its partition's stream
            out = fn(device=device, **dict(kwargs), **extra)
        wl = as_workload(out, "compute", device=device)
    return wl if wl.name == "compute" else dataclasses.replace(wl, name="compute")


def communicators_of(workload) -> tuple:
    """The NCCL communicators a workload enqueues on: what its ``fn`` declares as ``communicators``
    (gcexplore's collectives do; a user's compute that runs its own collectives declares them so)."""
    fn = getattr(workload, "fn", workload)
    return tuple(getattr(fn, "communicators", ()) or ())


def check_communicators(slots, names=None) -> None:
    """CommunicatorShared unless each communicator of a step's ``[(workload, stream), ...]`` is on one stream.

    Pure: reads what the workloads declare; called before anything of the step is enqueued."""
    seen: dict[int, tuple[int, object]] = {}
    for i, (wl, stream) in enumerate(slots):
        for comm in communicators_of(wl):
            first = seen.setdefault(id(comm), (i, stream))
            if first[1] is not stream:
                j = first[0]
                who = [names[k] if names else getattr(slots[k][0], "name", f"slot {k}") for k in (j, i)]
                raise CommunicatorShared(
                    f"{who[0]!r} and {who[1]!r} run on two partitions of this process with one NCCL communicator: "
                    "their collectives would reach NCCL from two streams in an order the ranks need not share, and "
                    "the ranks deadlock (sglang#31117); give each partition its own communicator "
                    "(comm.split(color=0, key=rank) on every rank; a compute factory that names comm gets one)")


def check_buckets(buckets, sizes, size_text) -> tuple:
    """Bucketed points (lists of parsed sizes) as tuples, each total distinct from the others and from ``sizes``
    (a point's rows are keyed by its ``size_bytes``, the total)."""
    out = tuple(tuple(int(s) for s in b) for b in buckets)
    totals = [sum(b) for b in out]
    clash = sorted({t for t in totals if totals.count(t) > 1 or t in sizes})
    if clash:
        raise ValueError(f"a bucketed point is keyed by its total size, so totals must differ from each other and "
                         f"from sizes; {', '.join(map(size_text, clash))} repeats (buckets {[list(b) for b in out]})")
    return out


def gemm_chain(torch, device: int, gemms: int, n: int):
    """The default compute: ``gemms`` chained bf16 ``n`` cubed matrix products (PyTorch)."""
    from ..workloads.workload import from_torch

    dev = torch.device("cuda", device)
    gen = torch.Generator(device=dev).manual_seed(0)
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=gen) / n ** 0.5
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=gen) / n ** 0.5
    out = [torch.empty(n, n, device=dev, dtype=torch.bfloat16) for _ in range(2)]

    def chain():
        x = a
        for i in range(gemms):
            torch.matmul(x, b, out=out[i % 2])
            x = out[i % 2]

    return from_torch(chain, name="gemm", device=device, flops=2.0 * n ** 3 * gemms)
