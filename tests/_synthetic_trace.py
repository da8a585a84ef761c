"""Synthetic CUPTI-like activity records and a fake ``cupti`` module, for CPU tests of tracing.

Nothing here is a measurement: the trace frames say so in ``attrs["device_name"]``.

:class:`FakeCupti` implements the few calls :class:`gcexplore.tracing.Collector` makes
(enable, register callbacks, push/pop external correlation ids, flush, context ids) and
"launches" kernels the way CUPTI reports them: an EXTERNAL_CORRELATION record for each
launch made while an id is pushed, then the kernel record with the same correlation id.
:func:`run_pair` drives a collector the way the engine does (group, gate, settling
spin, workload launches) for a matmul on p0 and a three-kernel sigmoid on the
remainder, in the ``concurrent`` and ``streams`` modes.
"""

from __future__ import annotations

import enum
from types import SimpleNamespace as NS

import _synthetic as S
from gcexplore.trace.collector import Collector

DEVICE_CTX, P0_CTX, REM_CTX = 1, 3, 2


class _Kind(enum.IntEnum):
    MEMCPY = 1
    MEMSET = 2
    DRIVER = 4
    RUNTIME = 5
    CONTEXT = 9
    CONCURRENT_KERNEL = 10
    EXTERNAL_CORRELATION = 39
    GREEN_CONTEXT = 59


#: CUPTI 13.0's kinds: no GREEN_CONTEXT (cupti-python 13.0.1)
_Kind130 = enum.IntEnum("_Kind130", {k.name: int(k) for k in _Kind if k.name != "GREEN_CONTEXT"})


class _Ext(enum.IntEnum):
    UNKNOWN = 1
    CUSTOM1 = 5


class FakeCupti:
    """A stand-in ``cupti.cupti``; ``api`` is what cuptiGetVersion of the loaded CUPTI returns
    (130401: CUPTI 13.4), ``package`` the cupti-python version, ``green`` whether it has the
    GREEN_CONTEXT kind, ``refuse_kinds`` kinds whose enabling fails as an older CUPTI's did."""

    ExternalCorrelationKind = _Ext

    def __init__(self, *, refuse: bool = False, deliver: bool = True, correlate: bool = True, api: int = 130401,
                 package: str = "13.4.0", green: bool = True, pm: bool = True, refuse_kinds=()):
        self.refuse, self.deliver, self.correlate = refuse, deliver, correlate
        self.api, self.package_version, self.pm_sampling_available = api, package, pm
        self.ActivityKind = _Kind if green else _Kind130
        self.refuse_kinds = set(refuse_kinds)
        self.stack: list[int] = []
        self.pending: list = []
        self.corr = 100
        self.enabled: set[int] = set()
        self.done = None
        self.clock = 1_000_000_000

    # -- the calls Collector makes ---------------------------------------
    def activity_register_callbacks(self, requested, completed):
        self.done = completed

    def get_version(self):
        return self.api

    def activity_enable(self, kind):
        if self.refuse:
            raise RuntimeError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")
        if int(kind) in self.refuse_kinds:
            raise RuntimeError("CUPTI_ERROR_NOT_COMPATIBLE")
        self.enabled.add(int(kind))

    def activity_disable(self, kind):
        self.enabled.discard(int(kind))

    def activity_push_external_correlation_id(self, kind, ext_id):
        self.stack.append(int(ext_id))

    def activity_pop_external_correlation_id(self, kind):
        return self.stack.pop()

    def get_context_id(self, handle):
        return int(handle)

    def activity_flush_all(self, flag):
        batch, self.pending = self.pending, []
        if self.done is not None and batch:
            self.done(batch)

    # -- what the "GPU" does ---------------------------------------------
    def launch(self, ctx: int, stream: int, name: str, start: int, end: int, **dims):
        """One kernel, as CUPTI reports it."""
        self.corr += 1
        if self.stack and self.correlate:
            self.pending.append(NS(kind=39, external_kind=int(_Ext.CUSTOM1), correlation_id=self.corr,
                                   external_id=self.stack[-1]))
        if self.deliver:
            self.pending.append(NS(kind=10, name=name, start=start, end=end, context_id=ctx, stream_id=stream,
                                   correlation_id=self.corr, grid_x=dims.get("grid", 132), grid_y=1, grid_z=1,
                                   block_x=256, block_y=1, block_z=1, cluster_x=dims.get("cluster", 0),
                                   cluster_y=1, cluster_z=1, registers_per_thread=32, static_shared_memory=0,
                                   dynamic_shared_memory=1024, max_active_clusters=0, graph_id=0))

    def context(self, ctx: int, sms: int):
        """A CONTEXT record of a green context (what every CUPTI 13.x sends)."""
        self.pending.append(NS(kind=9, context_id=ctx, parent_context_id=DEVICE_CTX, device_id=0,
                               num_multiprocessors=sms, is_green_context=1))

    def green(self, ctx: int, sms: int, mask_words):
        self.pending.append(NS(kind=59, context_id=ctx, parent_context_id=DEVICE_CTX, device_id=0,
                               num_multiprocessors=sms, num_tpcs=sms // 2, logical_tpc_mask=list(mask_words),
                               logical_tpc_mask_size=len(mask_words)))


def _part(name: str, sms: int, ctx: int):
    return NS(name=name, sm_count=sms, context=NS(handle=ctx))


PARTS = {"p0": _part("p0", 24, P0_CTX), "remainder": _part("remainder", 108, REM_CTX),
         "device": _part("device", 132, DEVICE_CTX)}
#: (workload, partition in concurrent mode, kernels as (offset_us, length_us) from the workload's start)
PAIR = {"matmul": ("p0", [(0, 900)]), "sigmoid": ("remainder", [(0, 100), (130, 100), (260, 100)])}
#: Where each workload's kernels start (us after the repetition's start) in each mode.
STARTS = {"concurrent": {"matmul": 5, "sigmoid": 5}, "streams": {"matmul": 5, "sigmoid": 700}}


def run_pair(collector: Collector, fake: FakeCupti, *, layout="24+108", reps=2, warmup=1, grids=None):
    """Drive ``collector`` as the engine would; returns the repetition start of each (mode, rep) in ns.
    ``grids``: CTAs of each workload's kernels by workload (default 132: one wave everywhere)."""
    origins = {}
    for mode in ("concurrent", "streams"):
        for rep in [None] * warmup + list(range(reps)):
            collector.group((layout, mode, rep))
            t0 = fake.clock
            with collector.tag("gate"):
                fake.launch(DEVICE_CTX, 7, "gcx_spin", t0 - 60_000, t0)
            for stream, (wl, (pname, kernels)) in enumerate(PAIR.items(), start=10):
                part = PARTS[pname] if mode == "concurrent" else PARTS["device"]
                slot = NS(workload=NS(name=wl), partition=part)
                with collector.tag("settle", slot):
                    fake.launch(part.context.handle, stream, "gcx_spin", t0 + 1_000, t0 + 2_000)
                with collector.tag("workload", slot, 0):
                    for i, (off, length) in enumerate(kernels):
                        s = t0 + (STARTS[mode][wl] + off) * 1_000
                        fake.launch(part.context.handle, stream, f"_Z6kernelILi{i}EEvPf", s, s + length * 1_000,
                                    grid=(grids or {}).get(wl, 132))
            if rep is not None:
                origins[(mode, rep)] = t0
            fake.clock += 10_000_000
    fake.launch(DEVICE_CTX, 0, "stray", fake.clock, fake.clock + 1000)  # launched outside any tag
    return origins


def overlap_df(layout="24+108", reps=2):
    """Event rows matching :func:`run_pair` (start events 2 us after the repetition start)."""
    rows = []
    for mode in ("concurrent", "streams"):
        for rep in range(reps):
            for wl, (pname, kernels) in PAIR.items():
                part = PARTS[pname] if mode == "concurrent" else PARTS["device"]
                end = STARTS[mode][wl] + kernels[-1][0] + kernels[-1][1]
                dur = (end - 2) / 1e3
                flops, nbytes = (1e12, float("nan")) if wl == "matmul" else (float("nan"), 1e9)
                rows.append({"layout": layout, "split_sm_count": 24, "mode": mode, "rep": rep, "workload": wl,
                             "partition": part.name, "sm_count": part.sm_count, "requested_sm_count": None,
                             "start_ms": 0.002, "duration_ms": dur, "makespan_ms": 0.95, "flops": flops,
                             "bytes": nbytes, "throughput_tflops": flops / (dur * 1e-3) / 1e12,
                             "bandwidth_gbs": nbytes / (dur * 1e-3) / 1e9})
    from gcexplore.schema import frame

    attrs = S.attrs("overlap")
    attrs["run_id"] = "synthetic-trace"
    return frame(rows, "overlap", attrs)


def traced_pair(grids=None, **fake_options):
    """``(collector, fake, origins)`` after :func:`run_pair` (``grids`` passed on) on a started collector."""
    fake = FakeCupti(**fake_options)
    collector = Collector(cupti=fake).start()
    for name in ("p0", "remainder", "device"):
        collector.watch(PARTS[name])
    fake.green(P0_CTX, 24, [0xFFF])
    fake.green(REM_CTX, 108, [~0xFFF & (1 << 64) - 1, 0x3])
    origins = run_pair(collector, fake, grids=grids)
    return collector, fake, origins


def trace_df(grids=None):
    """A synthetic trace of the pair, and its overlap rows: ``(trace, overlap)``; ``grids`` as in :func:`run_pair`."""
    df = overlap_df()
    collector, _, _ = traced_pair(grids)
    try:
        return collector.frame(df.attrs), df
    finally:
        collector.close()
