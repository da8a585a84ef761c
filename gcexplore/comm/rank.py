"""Communication SMs: one rank's part of the experiment that puts an NCCL collective on a partition
and a GEMM chain on the rest of the SMs, in steps, at every split of a sweep, with the whole-GPU
baselines (plain streams with NCCL's own CTA count, and communicators capped by ``max_ctas``).

:class:`CommSpec` is what a run measures, checked before any GPU work. :func:`run_rank` is what
each rank's process does (:mod:`.comm_launch` starts one process per GPU). Every rank runs the same
steps in the same order, so the collectives match up.

How a step is timed
-------------------
A spin kernel on a gate stream holds the device while the host enqueues the step; then a 4-byte
all-reduce on the gate stream (a GPU-side barrier: no rank's step starts before every rank's gate
has ended, so a rank's host jitter does not land in another rank's collective time), then the common
start event; each measured stream waits on it, runs a 1 us settling spin, and brackets its workload
with events. ``mode`` ``"alone"`` runs one workload; ``"overlapped"`` both. The step time is the
last end minus the common start.

Over 500 lines for a reason: the spec and the rank program it drives are one contract (what the spec
admits is what every rank runs in lockstep); the user's step (compute, dtype, buckets, the rule of
one communicator per partition) is in :mod:`.compute`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from collections.abc import Sequence

from .._checks import as_count, as_int
from ..schema import environment_identity
from .collectives import COLLECTIVES, ZERO_SM_COLLECTIVES
from .compute import (DTYPES, build_compute, check_buckets, check_communicators, check_compute, check_compute_factory,
                      gemm_chain)
from ..workloads.spec import is_recipe
from ..experiments.pm import METRIC_SETS

__all__ = ["PM_SETS", "CommSpec", "parse_size", "run_rank", "size_text"]

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_MAX_SIZE = 8 << 30  # a buffer beyond this per rank is a typo, not an experiment
_SETTLE_NS = 1_000
_GATE_US = 60.0
_PM_STEPS = 3
_PM_INTERVAL_NS = 20_000  # the interval verified with the metric sets (gcexplore.experiments.pm)
#: PM metric sets of ``CommSpec(pm=True)`` (name -> CUPTI metrics): DRAM % and bytes, and with the L2's bytes
#: ("dram_l2": configured and decoded at 20 us on 2 x H100 80GB HBM3, CUPTI 13.4.92, 2026-11-26; 1 GiB copies'
#: DRAM read and write bytes within 0.01% of the known, L2 bytes 3.05x the copied bytes)
PM_SETS = {"dram_bytes": METRIC_SETS["dram_bytes"],
           "dram_l2": (*METRIC_SETS["dram_bytes"], "lts__t_bytes.sum.per_second")}


def parse_size(text) -> int:
    """``"256M"`` -> 268435456 (K, M, G are powers of 1024; plain numbers are bytes)."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(?:i?B)?\s*", str(text), re.IGNORECASE)
        if not m:
            raise ValueError(f"a message size is a whole number of bytes with an optional K, M or G "
                             f"(powers of 1024), e.g. 1M or 256M, got {text!r}")
        value = int(m.group(1)) * _UNITS[m.group(2).upper()]
    if not 0 < value <= _MAX_SIZE:
        raise ValueError(f"a message size must be between 1 byte and 8G, got {text!r}")
    return value


def size_text(size_bytes: int) -> str:
    """268435456 -> ``"256M"`` (the inverse of :func:`parse_size` for whole units)."""
    for unit in ("G", "M", "K"):
        if size_bytes % _UNITS[unit] == 0:
            return f"{size_bytes // _UNITS[unit]}{unit}"
    return str(size_bytes)


@dataclasses.dataclass(frozen=True)
class CommSpec:
    """What a communication-SMs run measures; checked when built.

    Parameters
    ----------
    collectives : sequence of str
        Any of ``"allreduce"``, ``"allgather"``, ``"reducescatter"``, ``"alltoall"``.
    sizes : sequence of int or str
        Message sizes (nccl-tests' sizes: see :mod:`gcexplore.comm.collective`), e.g. ``"256M"``.
    comm_sms : sequence of int
        SMs of the communication partition at each split of the sweep (the rest compute).
    ctas : sequence of int
        NCCL ``max_ctas`` of the whole-GPU baselines (1 to 32; empty: none), besides NCCL's default.
    repeats, warmup : int
        Measured and discarded steps per workload, mode and split.
    gemms, gemm_n : int
        The default compute: a chain of ``gemms`` bf16 ``gemm_n`` cubed matrix products (PyTorch) per step.
    trace : bool
        One more overlapped step per split and collective under CUPTI, to attribute every kernel to
        its partition.
    compute_fit : bool
        Size the GEMMs for the compute partition: cuBLASLt with its SM-count target set to the
        partition's SMs (PyTorch's ``torch._C._set_sm_carveout_experimental``, the knob PyTorch's own
        compute/communication overlap uses). False (default): PyTorch's stock cuBLAS, whose kernels
        are sized for the whole GPU. Measured on 2 x H100 (docs/measurements.md, "Communication SMs").
    zero_sm : bool
        Also the zero-SM setup: all-gather and all-to-all (those of ``collectives``) on a communicator
        of ``CTAPolicy.ZERO`` with their buffers in symmetric windows, so NCCL moves the data with the
        copy engines, beside the compute on the whole GPU (setup ``"zero"``, ``comm_sm_count`` 0). Needs
        NCCL 2.28.3+ and one node.
    pm : bool
        At every split (and the zero-SM setup), 3 more steps of each mode (the compute alone, each collective
        alone, both) under CUPTI's PM sampler (the card's DRAM and L2 traffic, every 20 us: ``pm_metrics``) and
        the kernel trace that places the samples in the steps; ``attrs["pm"]`` gets each step's DRAM use
        (:func:`gcexplore.comm_dram`). Needs cupti-python 13.4 with its CUPTI.
    pm_metrics : str
        The sampled set of :data:`PM_SETS`: ``"dram_l2"`` (default: DRAM % of peak, read and write bytes,
        and the L2's bytes per second, ``lts__t_bytes``) or ``"dram_bytes"`` (the DRAM's alone).
    compute : str, optional
        The user's compute instead of the GEMM chain: a built-in recipe (``"memory:n=1048576"``) or a factory
        ``"package.module:function"`` built in each rank's process on its layout's compute stream
        (:mod:`gcexplore.comm.compute` says how it is called).
    compute_kwargs : dict
        Keyword arguments of the factory (JSON values: they are recorded in the run's spec).
    dtype : str
        The collective buffers' element type: ``"float32"`` (default), ``"bfloat16"``, ``"float16"``.
    buckets : sequence of sequences of int or str
        Bucketed gradients: each a list of sizes, one collective call per bucket in one step (its point's
        ``size_bytes`` is their sum, which no other point may have).
    """

    collectives: tuple = ("allreduce",)
    sizes: tuple = (1 << 20, 16 << 20, 256 << 20, 1 << 30)
    comm_sms: tuple = (8, 16, 24, 32, 40, 48, 56, 64)
    ctas: tuple = (8, 16, 32)
    repeats: int = 10
    warmup: int = 2
    gemms: int = 8
    gemm_n: int = 4096
    trace: bool = True
    compute_fit: bool = False
    zero_sm: bool = False
    pm: bool = False
    pm_metrics: str = "dram_l2"
    compute: str | None = None
    compute_kwargs: dict = dataclasses.field(default_factory=dict)
    dtype: str = "float32"
    buckets: tuple = ()

    def __post_init__(self):
        colls = tuple(str(c).lower().replace("_", "").replace("-", "") for c in _seq("collectives", self.collectives))
        bad = [c for c in colls if c not in COLLECTIVES]
        if bad or not colls or len(set(colls)) != len(colls):
            raise ValueError(f"collectives must be distinct names among {', '.join(COLLECTIVES)}, "
                             f"got {list(self.collectives)!r}")
        sizes = tuple(parse_size(s) for s in _seq("sizes", self.sizes))
        sms = tuple(as_count("comm_sms", s) for s in _seq("comm_sms", self.comm_sms))
        ctas = tuple(as_int("ctas", c, minimum=1, maximum=32) for c in _seq("ctas", self.ctas, empty=True))
        for name, v in (("sizes", sizes), ("comm_sms", sms), ("ctas", ctas)):
            if len(set(v)) != len(v):
                raise ValueError(f"{name} must not repeat a value, got {list(v)}")
        object.__setattr__(self, "collectives", colls)
        object.__setattr__(self, "sizes", tuple(sorted(sizes)))
        object.__setattr__(self, "comm_sms", tuple(sorted(sms)))
        object.__setattr__(self, "ctas", tuple(sorted(ctas)))
        object.__setattr__(self, "repeats", as_int("repeats", self.repeats, minimum=3, maximum=1000))
        object.__setattr__(self, "warmup", as_int("warmup", self.warmup, minimum=1, maximum=100))
        object.__setattr__(self, "gemms", as_int("gemms", self.gemms, minimum=1, maximum=1000))
        object.__setattr__(self, "gemm_n", as_int("gemm_n", self.gemm_n, minimum=128, maximum=32768))
        for name in ("trace", "compute_fit", "zero_sm", "pm"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.pm_metrics not in PM_SETS:
            raise ValueError(f"pm_metrics must name a metric set among {', '.join(map(repr, PM_SETS))}, "
                             f"got {self.pm_metrics!r}")
        compute, kwargs = check_compute(self.compute, self.compute_kwargs)
        object.__setattr__(self, "compute", compute)
        object.__setattr__(self, "compute_kwargs", dict(kwargs))
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype is the collective's element type, one of {', '.join(DTYPES)}; got {self.dtype!r}")
        buckets = [[parse_size(s) for s in _seq("a bucket", b)] for b in _seq("buckets", self.buckets, empty=True)]
        object.__setattr__(self, "buckets", check_buckets(buckets, sizes, size_text))

    def check(self, info, nranks: int) -> None:
        """Refuse what this device and rank count cannot run, in one sentence (before any GPU work)."""
        valid = info.valid_sm_counts()
        for s in self.comm_sms:
            if s not in valid or info.sm_count - s < info.min_partition_size:
                raise ValueError(f"a communication partition of {s} SMs cannot be split exactly on {info.name} "
                                 f"with at least {info.min_partition_size} SMs left to compute: valid sizes are "
                                 f"{info.describe_valid()} up to {info.sm_count - info.min_partition_size}")
        if self.zero_sm and not set(self.collectives) & set(ZERO_SM_COLLECTIVES):
            raise ValueError(f"zero_sm measures {' and '.join(ZERO_SM_COLLECTIVES)} (the collectives NCCL runs on copy "
                             f"engines); collectives {list(self.collectives)} have neither")
        quantum = DTYPES[self.dtype] * nranks
        bad = [s for s in (*self.sizes, *(b for bs in self.buckets for b in bs)) if s % quantum]
        if bad:
            raise ValueError(f"over {nranks} ranks every size must be a multiple of {quantum} bytes "
                             f"({self.dtype} elements split evenly), got {', '.join(map(size_text, bad))}")
        if self.compute is not None and not is_recipe(self.compute):
            check_compute_factory(self.compute, self.compute_kwargs)  # imported here before any rank starts

    def metadata(self) -> dict:
        return dataclasses.asdict(self)


def _seq(name: str, value, empty: bool = False) -> list:
    if isinstance(value, (str, int)):
        value = [value]
    if not isinstance(value, Sequence) or (not value and not empty):
        raise ValueError(f"{name} must be a non-empty list, got {value!r}")
    return list(value)


# ------------------------------------------------------------------------------ the rank program


class _Stepper:
    """The gate, the barrier and the events of one rank's steps."""

    def __init__(self, engine, barrier):
        self.engine, self.barrier = engine, barrier
        self.gate_us = _GATE_US

    def step(self, slots, tag=None, barrier: bool = True):
        """One step of ``[(workload, stream), ...]``: ``([(start_ms, duration_ms)], step_ms)``.

        ``tag(i)``: a context around the launch of slot ``i`` (a trace region). ``barrier=False``
        (traced steps, whose times are not kept): no barrier kernel, so every NCCL kernel of the
        trace is the collective's."""
        check_communicators(slots)  # before anything of the step is enqueued: a shared one would hang
        eng = self.engine
        opts = eng.event_options
        t0 = time.perf_counter()
        eng.launch_spin(eng.gate, int(self.gate_us * 1000))
        if barrier:
            self.barrier(stream=eng.gate)
        common = eng.gate.record(options=opts)
        pairs = []
        for i, (wl, s) in enumerate(slots):
            s.wait(common)
            eng.launch_spin(s, _SETTLE_NS)
            e0 = s.record(options=opts)
            if tag is None:
                wl(stream=s)
            else:
                with tag(i):
                    wl(stream=s)
            pairs.append((e0, s.record(options=opts)))
        enqueue_us = (time.perf_counter() - t0) * 1e6
        for _, e1 in pairs:
            e1.sync()
        # the gate must outlast the host's enqueueing (as the engine's gate does)
        self.gate_us = max(_GATE_US, 2.0 * enqueue_us + 20.0, 0.8 * self.gate_us)
        times = [(float(e0 - common), float(e1 - e0)) for e0, e1 in pairs]
        return times, max(float(e1 - common) for _, e1 in pairs)


class _Rank:
    """One rank's communicators, workloads and rows."""

    def __init__(self, rank: int, nranks: int, uid: bytes, spec: CommSpec, send):
        import torch

        from ..device.driver import device_info
        from .collectives import nccl_barrier, nccl_module
        from ..experiments.engine import Engine

        self.rank, self.nranks, self.spec, self.send = rank, nranks, spec, send
        self.torch, self.nccl = torch, nccl_module()
        torch.cuda.set_device(rank)
        self.info = device_info(rank)
        self.comm = self.nccl.Communicator.init(nranks, rank, self.nccl.UniqueId.from_bytes(uid))
        self.engine = Engine(self.info, streams=2)
        self.stepper = _Stepper(self.engine, nccl_barrier(self.comm, device=rank))
        if spec.compute_fit:
            if not hasattr(torch._C, "_set_sm_carveout_experimental"):
                raise RuntimeError(f"compute_fit needs PyTorch's SM carveout (torch._C._set_sm_carveout_experimental), "
                                   f"which PyTorch {torch.__version__} lacks")
            torch.backends.cuda.preferred_blas_library("cublaslt")
        self.compute = gemm_chain(torch, rank, spec.gemms, spec.gemm_n) if spec.compute is None else None
        self._own_comm = None  # the user's compute's own communicator, where its factory names comm
        self.rows: list[dict] = []
        self.recipes: dict[str, str] = {}
        self.trace_error = ""
        self.pm_rows: list[dict] = []
        self.pm_error = ""
        self.zero_error = ""
        self._pm = None

    def close(self) -> None:
        if self._pm is not None:
            self._pm.disable()
        self.engine.close()
        if self._own_comm is not None:
            self._own_comm.destroy()
        self.comm.destroy()

    @contextlib.contextmanager
    def _computing(self, stream, sm_count: int):
        """The user's compute built for one layout on its compute stream (the GEMM chain stays as built)."""
        if self.spec.compute is None:
            yield
            return
        if self._own_comm is None and not is_recipe(self.spec.compute):
            import inspect

            factory = check_compute_factory(self.spec.compute, self.spec.compute_kwargs)
            if "comm" in inspect.signature(factory).parameters:
                self._own_comm = self.comm.split(color=0, key=self.rank)  # every rank, in the same order
        self.compute = build_compute(self.spec.compute, self.spec.compute_kwargs, device=self.rank, stream=stream,
                                     sm_count=sm_count, comm=self._own_comm, torch=self.torch)
        try:
            yield
        finally:
            self.torch.cuda.synchronize(self.rank)
            if hasattr(self.compute, "close"):
                self.compute.close()
            self.compute = None

    def _measure(self, base: dict, mode: str, slots, names) -> None:
        for i in range(self.spec.warmup + self.spec.repeats):
            times, step_ms = self.stepper.step(slots)
            if i < self.spec.warmup:
                continue
            for (wl, _), name, (start, dur) in zip(slots, names, times):
                self.rows.append({**base, "mode": mode, "rep": i - self.spec.warmup, "workload": name,
                                  "start_ms": start, "duration_ms": dur, "step_ms": step_ms,
                                  "flops": wl.flops if wl.flops is not None else float("nan"),
                                  "bytes": wl.bytes if wl.bytes is not None else float("nan")})

    def _collectives(self, comm):
        from .collectives import collective

        from .collectives import bucketed

        for kind in self.spec.collectives:
            for size in (*self.spec.sizes, *self.spec.buckets):
                wl = (bucketed(comm, kind, size, device=self.rank, dtype=self.spec.dtype) if isinstance(size, tuple)
                      else collective(comm, kind, size, device=self.rank, dtype=self.spec.dtype))
                assert wl.bytes is not None  # a collective declares its bytes
                yield kind, int(wl.bytes), wl
                del wl
                self.torch.cuda.synchronize(self.rank)

    def _layout(self, base: dict, comm, comm_stream, compute_stream, items=None) -> None:
        cbase = {**base, "collective": "", "size_bytes": 0}
        self._measure(cbase, "alone", [(self.compute, compute_stream)], ["compute"])
        for kind, size, wl in (self._collectives(comm) if items is None else items):
            kbase = {**base, "collective": kind, "size_bytes": size}
            self._measure(kbase, "alone", [(wl, comm_stream)], ["comm"])
            self._measure(kbase, "overlapped", [(wl, comm_stream), (self.compute, compute_stream)],
                          ["comm", "compute"])
            if kind == "alltoall":
                from .collectives import alltoall_recipe

                self.recipes["alltoall"] = alltoall_recipe(wl)

    def _fit(self, compute_sms: int | None) -> None:
        """The GEMMs' SM-count target: ``compute_sms`` (None: the whole GPU), with ``compute_fit``."""
        if self.spec.compute_fit:
            self.torch._C._set_sm_carveout_experimental(
                None if compute_sms is None else self.info.sm_count - int(compute_sms))

    def run_split(self, comm_sms: int) -> None:
        from ..device.partitions import split

        with split([comm_sms], device=self.rank, rounding="exact") as parts:
            assert parts.remainder is not None  # the compute side: comm_sms leaves SMs over
            base = {"nranks": self.nranks, "rank": self.rank, "setup": "partition", "layout": parts.label,
                    "comm_sm_count": int(parts[0].sm_count), "compute_sm_count": int(parts.remainder.sm_count),
                    "max_ctas": None}
            cs, rs = parts[0].stream, parts.remainder.stream
            self._fit(parts.remainder.sm_count)
            with self._computing(rs, int(parts.remainder.sm_count)):
                self._layout(base, self.comm, cs, rs)
                self._extras(parts, cs, rs, base)
            self._fit(None)

    def _extras(self, parts, cs, rs, base: dict, items=None, layout: str = "") -> None:
        """A layout's traced and PM-sampled steps. A failure (CUPTI missing or held: alike on every rank,
        before any collective of the block) is kept as the rank's ``trace_error`` / ``pm_error``."""
        if self.spec.trace and not self.trace_error:
            try:
                self._trace_split(parts, cs, rs, items, layout)
            except Exception as e:
                self.trace_error = f"{type(e).__name__}: {e}"
        if self.spec.pm and not self.pm_error:
            self.flush()  # a crash inside CUPTI's profiler ends this process: the layout's rows go first
            try:
                self._pm_split(parts, cs, rs, base, items)
            except Exception as e:
                self.pm_error = f"{type(e).__name__}: {e}"

    def _trace_split(self, parts, cs, rs, items=None, layout: str = "") -> None:
        from ..trace.user import kernel_trace

        with kernel_trace(parts, device=self.rank) as t:
            for kind, size, wl in (self._collectives(self.comm) if items is None else items):
                names = (f"comm:{kind}:{size}", "compute")
                self.stepper.step([(wl, cs), (self.compute, rs)], tag=lambda i: t.region(names[i]), barrier=False)
        frame = t.frame().assign(rank=self.rank)
        self.send(("trace", frame.assign(layout=layout) if layout else frame))

    def _pm_collector(self):
        """CUPTI's PM sampler on this rank's card, enabled and configured once (the spec's metric set)."""
        if self._pm is None:
            from ..trace.collector import TraceUnavailable, require_cupti
            from ..trace.features import describe, refusal

            refused = refusal("pm_sampling", describe(require_cupti()))
            if refused:
                raise TraceUnavailable(refused)
            from cupti import pm_sampling

            col = pm_sampling.Collector(self.rank)
            col.enable()
            self._pm = col
            col.configure(metrics=list(PM_SETS[self.spec.pm_metrics]), sampling_interval=_PM_INTERVAL_NS,
                          hardware_buffer_size=256 << 20)
        return self._pm

    def _pm_split(self, parts, cs, rs, base: dict, items=None) -> None:
        """_PM_STEPS steps of each mode under the PM sampler and the kernel trace, summarised per step."""
        from .analysis import PM_TAG, pm_step_dram
        from ..trace.user import kernel_trace
        from ..experiments.pm import MAX_SAMPLES

        col = self._pm_collector()

        def steps(t, coll, size, mode, slots, names):
            for i in range(_PM_STEPS):
                tags = [PM_TAG.format(collective=coll, size_bytes=size, mode=mode, step=i, workload=n) for n in names]
                self.stepper.step(slots, tag=lambda j: t.region(tags[j]))

        with kernel_trace(parts, device=self.rank, copies=True) as t:  # copies: a copy-engine collective's span
            col.start()
            try:
                steps(t, "", 0, "alone", [(self.compute, rs)], ["compute"])
                for kind, size, wl in (self._collectives(self.comm) if items is None else items):
                    steps(t, kind, size, "alone", [(wl, cs)], ["comm"])
                    steps(t, kind, size, "overlapped", [(wl, cs), (self.compute, rs)], ["comm", "compute"])
            finally:
                col.stop()
        data = col.decode(max_samples=MAX_SAMPLES)
        # cupti's CounterData.__getitem__ is unannotated (a slice gives a list); iterating it yields Samples
        got = [(s.start_timestamp, s.end_timestamp, list(s.metric_values)) for s in data]  # pyright: ignore[reportAttributeAccessIssue]
        rows = pm_step_dram(t.frame(), [g[0] for g in got], [g[1] for g in got], [g[2] for g in got],
                            list(PM_SETS[self.spec.pm_metrics]))
        keep = {k: base[k] for k in ("setup", "layout", "comm_sm_count", "compute_sm_count")}
        self.pm_rows.extend({"rank": self.rank, **keep, **r} for r in rows)

    def run_zero(self) -> None:
        """All-gather and all-to-all on a communicator of CTA policy ZERO, their buffers in symmetric
        windows (NCCL's copy engines), beside the compute on the whole GPU; a failure alike on every
        rank (no such path in this NCCL) becomes ``zero_error``."""
        from .collectives import collective

        a, b = self.engine.whole.streams[:2]
        base = {"nranks": self.nranks, "rank": self.rank, "setup": "zero", "layout": "zero", "comm_sm_count": 0,
                "compute_sm_count": self.info.sm_count, "max_ctas": None}
        items = []
        try:
            sub = self.comm.split(color=0, key=self.rank,
                                  config=self.nccl.NCCLConfig(cta_policy=self.nccl.CTAPolicy.ZERO))
        except Exception as e:
            self.zero_error = f"{type(e).__name__}: {e}"
            return
        try:
            # every workload lives until the communicator is gone: its windows go first, then the buffers
            items = [(k, s, collective(sub, k, s, device=self.rank, symmetric=True, dtype=self.spec.dtype))
                     for k in self.spec.collectives if k in ZERO_SM_COLLECTIVES for s in self.spec.sizes]
            with self._computing(b, self.info.sm_count):
                self._layout(base, sub, a, b, items)
                self.flush()
                self._extras(None, a, b, base, items, layout="zero")
        except Exception as e:  # rows measured before it are with the launcher
            self.zero_error = f"{type(e).__name__}: {e}"
        finally:
            self.torch.cuda.synchronize(self.rank)
            sub.destroy()
            del items

    def run_baselines(self) -> None:
        self._fit(None)
        a, b = self.engine.whole.streams[:2]
        sm = self.info.sm_count
        base = {"nranks": self.nranks, "rank": self.rank, "setup": "plain", "layout": "plain",
                "comm_sm_count": sm, "compute_sm_count": sm, "max_ctas": None}
        with self._computing(b, sm):  # the whole GPU's stream, for every baseline
            self._layout(base, self.comm, a, b)
            self.flush()
            for c in self.spec.ctas:
                cfg = self.nccl.NCCLConfig(max_ctas=c)
                sub = self.comm.split(color=0, key=self.rank, config=cfg)
                try:
                    self._layout({**base, "setup": "ctas", "layout": f"ctas={c}", "max_ctas": c}, sub, a, b)
                finally:
                    self.torch.cuda.synchronize(self.rank)
                    sub.destroy()
                self.flush()

    def flush(self) -> None:
        if self.rows:
            self.send(("rows", self.rows))
            self.rows = []


def run_rank(rank: int, nranks: int, uid: bytes, spec: CommSpec, send) -> dict:
    """Everything one rank measures; rows go out through ``send(("rows", [...]))`` after each
    layout (so a failure later loses none), traces through ``send(("trace", frame))``. Returns
    the rank's metadata."""
    r = _Rank(rank, nranks, uid, spec, send)
    try:
        # baselines first, then the largest partition first: if a small partition fails (or hangs until
        # the launcher's timeout), everything measured before it is already with the launcher
        r.run_baselines()
        r.flush()
        for k in sorted(spec.comm_sms, reverse=True):
            r.run_split(k)
            r.flush()
        if spec.zero_sm:  # last: a copy-engine path that fails or hangs costs nothing measured before it
            r.run_zero()
            r.flush()
        from .collectives import nccl_versions

        return {"rank": rank, **r.info.metadata(), **nccl_versions(),
                "alltoall_recipe": r.recipes.get("alltoall", ""),
                "gate_us": round(r.stepper.gate_us, 1), **environment_identity(),
                "trace_error": r.trace_error, "pm_error": r.pm_error, "zero_error": r.zero_error, "pm": r.pm_rows}
    finally:
        r.flush()
        r.close()
