"""Example workloads scripts measure: PyTorch and CuPy work as a user brings it (no declared bytes: the
card counts them), and the work kinds ``compare`` is calibrated on, each with an optional shift (that
much more work) so a null pair and a true shift can be told apart.

:func:`real_workloads` builds the prediction's workloads once (sizes chosen so one call takes about
0.3-5 ms on a whole H100). Multi-pass ones (FFT, sort, convolution, layer norm, a GEMM chain) move more
DRAM than their tensors; the layer norm's 32 MiB tensor is re-read from L2 across its 16 passes, so it
is the one a neighbour's traffic can evict. :func:`shifted` builds one calibration kind. PyTorch and
CuPy are imported only when a function that needs them is called.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..device.driver import device_info
from . import builtins as B
from .workload import from_cupy, from_torch

__all__ = ["BUILTIN", "CAMPAIGN_KINDS", "CUPY", "SHIFTED_KINDS", "TORCH", "TORCH_KINDS", "real_workloads",
           "shifted"]

#: The names :func:`real_workloads` builds: the built-ins (bytes declared), PyTorch's and CuPy's (none declared).
BUILTIN = ("compute", "memory", "latency", "copy")
TORCH = ("matmul", "sigmoid", "softmax", "sdpa", "layernorm", "conv", "chain", "tanh", "bmm", "gather")
CUPY = ("fft", "sort", "elementwise", "scale", "cumsum", "reduce")


def _torch(dev: int) -> dict:
    import torch
    import torch.nn.functional as F

    d = f"cuda:{dev}"
    bf = torch.bfloat16
    a, b, c = (torch.randn(8192, 8192, device=d, dtype=bf) for _ in range(3))
    x = torch.randn(512 << 18, device=d)
    y = torch.empty_like(x)
    s = torch.randn(8192, 8192, device=d)
    q, k, v = (torch.randn(8, 16, 4096, 128, device=d, dtype=bf) for _ in range(3))
    ln = torch.randn(8192, 1024, device=d)  # 32 MiB: fits the 50 MiB L2 alone
    w_ln, b_ln = torch.ones(1024, device=d), torch.zeros(1024, device=d)
    img = torch.randn(64, 256, 56, 56, device=d, dtype=bf).to(memory_format=torch.channels_last)
    ker = torch.randn(256, 256, 3, 3, device=d, dtype=bf).to(memory_format=torch.channels_last)
    h = torch.randn(4096, 4096, device=d, dtype=bf)
    ws = [torch.randn(4096, 4096, device=d, dtype=bf) / 64 for _ in range(4)]
    g_in = torch.randn(256 << 20, device=d, dtype=bf)  # tanh: its own 512 MiB in, 512 MiB out
    g_out = torch.empty_like(g_in)
    # FRESH8's workloads (added 2026-11-27, before any was measured): a batched bf16 GEMM and a random row gather
    ba, bb = (torch.randn(32, 2048, 2048, device=d, dtype=bf) for _ in range(2))
    rows = torch.randn(1 << 20, 128, device=d)  # 512 MiB of 512-byte rows
    idx = torch.randint(0, 1 << 20, (1 << 20,), device=d)
    torch.cuda.synchronize()

    def layernorm():
        for _ in range(16):
            F.layer_norm(ln, (1024,), w_ln, b_ln)

    def chain():
        t = h
        for w in ws:
            t = F.gelu(t @ w)
        return t

    fns = {"matmul": lambda: torch.matmul(a, b, out=c), "sigmoid": lambda: torch.sigmoid(x, out=y),
           "softmax": lambda: torch.softmax(s, -1), "sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
           "layernorm": layernorm, "conv": lambda: F.conv2d(img, ker, padding=1), "chain": chain,
           "tanh": lambda: torch.tanh(g_in, out=g_out), "bmm": lambda: torch.bmm(ba, bb),
           "gather": lambda: torch.index_select(rows, 0, idx)}
    return {n: from_torch(f, name=n) for n, f in fns.items()}


def _cupy(dev: int) -> dict:
    import cupy as cp

    with cp.cuda.Device(dev):
        sig = (cp.random.rand(1 << 25, dtype=cp.float32) + 1j * cp.random.rand(1 << 25, dtype=cp.float32)).astype(
            cp.complex64)
        keys = cp.random.randint(0, 2 ** 31 - 1, 1 << 26, dtype=cp.int32)
        e1, e2 = cp.random.rand(1 << 27, dtype=cp.float32), cp.random.rand(1 << 27, dtype=cp.float32)
        e3 = cp.empty_like(e1)
        s1, s2 = cp.random.rand(3 << 25, dtype=cp.float32), cp.empty(3 << 25, dtype=cp.float32)  # scale's own
        cs = cp.random.rand(1 << 27, dtype=cp.float32)  # cumsum: a multi-pass scan of 512 MiB
        rd = cp.random.rand(1 << 28, dtype=cp.float32)  # reduce: 1 GiB read once
        cp.fft.fft(sig)  # the plan, made once
        cp.cuda.Device(dev).synchronize()
    return {"fft": from_cupy(lambda: cp.fft.fft(sig), name="fft"),
            "sort": from_cupy(lambda: cp.sort(keys), name="sort"),
            "elementwise": from_cupy(lambda: cp.add(e1, e2, out=e3), name="elementwise"),
            "scale": from_cupy(lambda: cp.multiply(s1, 1.5, out=s2), name="scale"),
            "cumsum": from_cupy(lambda: cp.cumsum(cs), name="cumsum"),
            "reduce": from_cupy(lambda: cp.sum(rd), name="reduce")}


def real_workloads(dev: int = 0, *, names=None, torch_too: bool = True, cupy_too: bool = True) -> dict:
    """``{name: Workload}``: the built-ins (their declared bytes are the known ones) and, with
    no declared bytes, the PyTorch and CuPy workloads; ``names`` keeps only those."""
    sm = device_info(dev).sm_count
    out = {"compute": B.compute(device=dev), "memory": B.memory(device=dev),
           "latency": B.latency(blocks=4 * sm, device=dev), "copy": B.copy(device=dev)}
    want = set(names) if names else None
    if torch_too and (want is None or want & set(TORCH)):
        out.update(_torch(dev))
    if cupy_too and (want is None or want & set(CUPY)):
        out.update(_cupy(dev))
    return {k: v for k, v in out.items() if want is None or k in want}


# ------------------------------------------------------------------ compare's calibration kinds

#: The kinds ``shifted`` builds by default: compute and memory (built-ins), gemm (a chain of bf16 2048^3
#: matmuls through cuBLAS), attention (scaled-dot-product attention, bf16), sort (torch.sort of float32),
#: fft (torch.fft.fft2 of a batch of complex64 images).
SHIFTED_KINDS = ("compute", "memory", "gemm", "attention", "sort", "fft")
#: The campaign benchmark's workloads (:mod:`gcexplore.workloads.torch_pairs`), measured by name so
#: that its campaign-vs-alone check finds their floors: not in the default set.
CAMPAIGN_KINDS = ("copy", "gemm_chain", "layer_norm")
TORCH_KINDS = {"gemm", "attention", "sort", "fft", "gemm_chain", "layer_norm"}


def shifted(kind: str, shift: float, device: int, redraw: bool = False):
    """One workload of ``kind`` with ``shift`` (0: none) more work, tensors made now; with
    ``redraw``, a PyTorch kind is built with ``from_torch(setup=...)``: its tensors are allocated
    afresh in every round (at the round's first call), as a separate run would."""
    if kind == "compute":
        return B.compute(iters=int(round(1536 * (1 + shift))), device=device)
    if kind == "memory":
        n = int(round((1 << 27) * (1 + shift) / 4096)) * 4096
        return B.memory(n=n, device=device)
    if kind == "copy":  # the built-in's default size (the campaign's), 3% more floats when shifted
        return B.copy(n=int(round((3 << 27) * (1 + shift) / 4096)) * 4096, device=device)
    if kind not in TORCH_KINDS:
        raise ValueError(f"unknown kind {kind!r}; kinds are {', '.join(SHIFTED_KINDS + CAMPAIGN_KINDS)}")
    import torch

    make, flops = _torch_work(kind, shift, f"cuda:{device}")
    if redraw:
        return from_torch(setup=make, name=kind, device=device, flops=flops)
    fn = make()
    torch.cuda.synchronize()
    return from_torch(fn, name=kind, device=device, flops=flops)  # fn holds its tensors


def _torch_work(kind: str, shift: float, dev: str):
    """(make, flops): ``make()`` allocates the tensors of ``kind`` and returns the call to time."""
    import torch

    grow = lambda n: n + max(1, int(round(n * shift))) if shift else n  # noqa: E731
    if kind == "gemm":
        links = grow(32)

        def make() -> Callable[[], Any]:
            a = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16) / 45.0
            x = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)

            def fn():
                t = x
                for _ in range(links):
                    t = torch.matmul(t, a)
            return fn
        return make, 2.0 * 2048 ** 3 * links
    if kind == "attention":
        b = grow(32)

        def make() -> Callable[[], Any]:
            q, k, v = (torch.randn(b, 16, 1024, 64, device=dev, dtype=torch.bfloat16) for _ in range(3))
            return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return make, 4.0 * b * 16 * 1024 ** 2 * 64
    if kind == "gemm_chain":  # torch_pairs.gemm_layernorm's: 4 fp16 2048^3 GEMMs
        cols = int(round(4 * 2048 * shift / 64)) * 64  # shifted: one more 2048 x 2048 x cols GEMM

        def make() -> Callable[[], Any]:
            a, b = (torch.randn(2048, 2048, device=dev, dtype=torch.float16) for _ in range(2))

            def fn():
                y = a
                for _ in range(4):
                    y = y @ b
                return y @ b[:, :cols] if cols else y
            return fn
        return make, 2.0 * 2048 ** 2 * (4 * 2048 + cols)
    if kind == "layer_norm":  # torch_pairs' layer norm of 8192 x 4096 fp16 (more rows when shifted)
        rows = int(round(8192 * (1 + shift)))

        def make() -> Callable[[], Any]:
            x = torch.randn(rows, 4096, device=dev, dtype=torch.float16)
            return lambda: torch.nn.functional.layer_norm(x, (4096,))
        return make, None
    if kind == "sort":
        n = int(round((1 << 24) * (1 + shift)))

        def make() -> Callable[[], Any]:
            x = torch.rand(n, device=dev)
            return lambda: torch.sort(x)
        return make, None
    b = grow(32)

    def make() -> Callable[[], Any]:
        x = torch.randn(b, 1024, 1024, device=dev, dtype=torch.complex64)
        return lambda: torch.fft.fft2(x)
    return make, None
