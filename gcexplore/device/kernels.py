"""The built-in CUDA kernels and the ``%smid`` probe that tells which SMs a stream runs on: their
source, compiled once per architecture with NVRTC.

Each kernel can record, per block, the SM it ran on (``%smid``) and its start and end
(``%globaltimer``) when given a record buffer (see :class:`gcexplore.workloads.Recorder`).
"""

from __future__ import annotations

import threading
from typing import Any

from .driver import check, driver_module

__all__ = ["KERNEL_NAMES", "PROBE_SRC", "REC_WORDS", "SOURCE", "builtin_kernel", "probe_kernel", "sm_ids_on"]

# Each instrumented block writes 3 x u64: smid, start, end (%globaltimer, ns).
REC_WORDS = 3

SOURCE = r"""
#define GCX_REC_BEGIN                                                          \
    unsigned long long gcx_t0 = 0;                                             \
    if (rec != 0 && threadIdx.x == 0) {                                        \
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gcx_t0));             \
    }
#define GCX_REC_END                                                            \
    if (rec != 0) {                                                            \
        __syncthreads();                                                       \
        if (threadIdx.x == 0) {                                                \
            unsigned int smid; unsigned long long t1;                          \
            asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));                  \
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));             \
            unsigned long long* r = rec + 3ull * blockIdx.x;                   \
            r[0] = smid; r[1] = gcx_t0; r[2] = t1;                             \
        }                                                                      \
    }

// Compute-bound: 8 independent FMA chains per thread (2 FLOPs per FMA).
extern "C" __global__ void gcx_fma(float* __restrict__ out, int iters, float a, float b,
                                   unsigned long long* rec) {
    GCX_REC_BEGIN
    float x0 = threadIdx.x * 1e-6f, x1 = x0 + 0.1f, x2 = x0 + 0.2f, x3 = x0 + 0.3f;
    float x4 = x0 + 0.4f, x5 = x0 + 0.5f, x6 = x0 + 0.6f, x7 = x0 + 0.7f;
    #pragma unroll 4
    for (int i = 0; i < iters; ++i) {
        x0 = fmaf(x0, a, b); x1 = fmaf(x1, a, b); x2 = fmaf(x2, a, b); x3 = fmaf(x3, a, b);
        x4 = fmaf(x4, a, b); x5 = fmaf(x5, a, b); x6 = fmaf(x6, a, b); x7 = fmaf(x7, a, b);
    }
    out[(unsigned long long)blockIdx.x * blockDim.x + threadIdx.x] =
        x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
    GCX_REC_END
}

// Memory-bound triad a = b + s * c over float4; each block streams one contiguous chunk.
extern "C" __global__ void gcx_triad(float4* __restrict__ a, const float4* __restrict__ b,
                                     const float4* __restrict__ c, float s,
                                     unsigned long long n4, int per_thread,
                                     unsigned long long* rec) {
    GCX_REC_BEGIN
    unsigned long long base = (unsigned long long)blockIdx.x * blockDim.x * per_thread + threadIdx.x;
    #pragma unroll 4
    for (int k = 0; k < per_thread; ++k) {
        unsigned long long i = base + (unsigned long long)k * blockDim.x;
        if (i < n4) {
            float4 x = b[i], y = c[i];
            a[i] = make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
        }
    }
    GCX_REC_END
}

// Memory-bound copy dst = src over float4.
extern "C" __global__ void gcx_copy(float4* __restrict__ dst, const float4* __restrict__ src,
                                    unsigned long long n4, int per_thread,
                                    unsigned long long* rec) {
    GCX_REC_BEGIN
    unsigned long long base = (unsigned long long)blockIdx.x * blockDim.x * per_thread + threadIdx.x;
    #pragma unroll 4
    for (int k = 0; k < per_thread; ++k) {
        unsigned long long i = base + (unsigned long long)k * blockDim.x;
        if (i < n4) dst[i] = src[i];
    }
    GCX_REC_END
}

// Memory-bound scale dst = a * src over floats, one 4-byte element per thread, nothing unrolled: few requests in
// flight per SM, as a framework's plain elementwise kernel keeps (the probes' polite co-runner).
extern "C" __global__ void gcx_scale1(float* __restrict__ dst, const float* __restrict__ src, float a,
                                      unsigned long long n, unsigned long long* rec) {
    GCX_REC_BEGIN
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = a * src[i];
    GCX_REC_END
}

// Spins until %globaltimer has advanced by ns; thread 0 of each block records its span.
extern "C" __global__ void gcx_spin(unsigned long long ns, unsigned long long* rec) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
    if (rec != 0 && threadIdx.x == 0) {
        unsigned int smid;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        unsigned long long* r = rec + 3ull * blockIdx.x;
        r[0] = smid; r[1] = t0; r[2] = t;
    }
}

// Serving clocks (gcexplore.serving.experiment): out[i] = %globaltimer when the stream reaches it.
// Given a counter (next != 0), the slot is ++*next instead of i: one launch captured at the end of a
// decode step's CUDA graph stamps the next slot on every replay. Slots past n are not written.
extern "C" __global__ void gcx_tick(unsigned long long* out, unsigned long long i,
                                    unsigned long long* next, unsigned long long n) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (next != 0) i = ++*next;
    if (i < n) out[i] = t;
    __threadfence_system();
}

// An open-loop arrival: holds its stream until %globaltimer >= base[0] + offset_ns (base[0] is
// written by the first gcx_tick of the run), then records when it let the stream go in out[i].
// A base that never comes is given up after give_up_ns (out[i] = 0): no spin outlives its run.
extern "C" __global__ void gcx_arrive(const volatile unsigned long long* base, unsigned long long offset_ns,
                                      unsigned long long* out, unsigned long long i,
                                      unsigned long long give_up_ns) {
    unsigned long long b, t, t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        b = base[0];
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (b == 0ull && t - t0 < give_up_ns);
    if (b == 0ull) { out[i] = 0ull; return; }
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t < b + offset_ns);
    out[i] = t;
    __threadfence_system();
}

// The engine's flag gate (gcexplore.experiments.gate): holds its stream until the host has written seq
// (or a later one) into flag[0], giving up after give_up_ns; status[0] = seq when the flag let it go
// (seq | 2^63 when the timeout did), status[1] = how long it waited (ns).
extern "C" __global__ void gcx_gate(const volatile unsigned long long* flag, unsigned long long seq,
                                    unsigned long long give_up_ns, volatile unsigned long long* status) {
    unsigned long long f, t, t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        f = flag[0];
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (f < seq && t - t0 < give_up_ns);
    status[0] = f >= seq ? seq : (seq | (1ull << 63));
    status[1] = t - t0;
    __threadfence_system();
}
"""

KERNEL_NAMES = ("gcx_fma", "gcx_triad", "gcx_copy", "gcx_scale1", "gcx_spin", "gcx_tick", "gcx_arrive", "gcx_gate")
_kernels: dict[str, dict[str, Any]] = {}
_kernels_lock = threading.Lock()


def _arch(dev) -> str:
    cc = dev.compute_capability
    return f"sm_{cc[0]}{cc[1]}"


def builtin_kernel(dev, name: str):
    """The built-in kernel ``name`` for ``dev``'s architecture (compiled once, cached)."""
    from cuda.core import Program, ProgramOptions

    arch = _arch(dev)
    with _kernels_lock:
        if arch not in _kernels:
            prog = Program(SOURCE, code_type="c++", options=ProgramOptions(arch=arch, std="c++17"))
            try:
                obj = prog.compile("cubin")
            finally:
                prog.close()
            _kernels[arch] = {k: obj.get_kernel(k) for k in KERNEL_NAMES}
        return _kernels[arch][name]


# The probe: one %smid bit per SM a many-block kernel ran on.
PROBE_SRC = r"""
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
PROBE_SLOTS = 1024  # larger than any %smid
_probes: dict[str, Any] = {}
_probes_lock = threading.Lock()


def probe_kernel(dev):
    """The ``%smid`` probe kernel for ``dev``'s architecture, compiled once."""
    from cuda.core import Program, ProgramOptions

    arch = f"sm_{dev.arch}"
    with _probes_lock:
        if arch not in _probes:
            prog = Program(PROBE_SRC, code_type="c++", options=ProgramOptions(arch=arch))
            _probes[arch] = prog.compile("cubin").get_kernel("gcx_smid_probe")
        return _probes[arch]


def sm_ids_on(stream, dev, device_sm_count: int) -> frozenset[int]:
    """SM ids that a many-block probe kernel launched on ``stream`` ran on."""
    from cuda.core import LaunchConfig, launch

    import numpy as np

    driver = driver_module()
    kernel = probe_kernel(dev)
    nbytes = PROBE_SLOTS * 4
    buf = dev.allocate(nbytes, stream=stream)
    try:
        s = int(stream.handle)
        check(driver.cuMemsetD32Async(int(buf.handle), 0, PROBE_SLOTS, s), "cuMemsetD32Async")
        # Eight blocks per SM of the whole device, each resident for 5 us: far more
        # blocks than any partition holds at once, so every SM it owns gets some.
        grid = 8 * device_sm_count
        launch(stream, LaunchConfig(grid=grid, block=128), kernel, buf, np.uint64(5_000))
        host = np.zeros(PROBE_SLOTS, dtype=np.uint32)
        check(driver.cuMemcpyDtoHAsync(host.ctypes.data, int(buf.handle), nbytes, s), "cuMemcpyDtoHAsync")
        stream.sync()
    finally:
        buf.close(stream)
        stream.sync()
    return frozenset(int(i) for i in np.flatnonzero(host))
