"""PyTorch and CuPy workloads as a user brings them: no declared bytes (the card counts them).

``workloads(device)`` builds them (and the built-ins) once; sizes are chosen so one call
takes about 0.3-5 ms on a whole H100. Multi-pass ones (FFT, sort, convolution, layer norm,
a GEMM chain) move more DRAM than their tensors; the layer norm's 32 MiB tensor is re-read
from L2 across its 16 passes, so it is the one a neighbour's traffic can evict.
"""

from __future__ import annotations

BUILTIN = ("compute", "memory", "latency", "copy")
TORCH = ("matmul", "sigmoid", "softmax", "sdpa", "layernorm", "conv", "chain", "tanh", "bmm", "gather")
CUPY = ("fft", "sort", "elementwise", "scale", "cumsum", "reduce")


def _torch(dev: int) -> dict:
    import torch
    import torch.nn.functional as F

    import gcexplore as gx

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
    return {n: gx.from_torch(f, name=n) for n, f in fns.items()}


def _cupy(dev: int) -> dict:
    import cupy as cp

    import gcexplore as gx

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
    return {"fft": gx.from_cupy(lambda: cp.fft.fft(sig), name="fft"),
            "sort": gx.from_cupy(lambda: cp.sort(keys), name="sort"),
            "elementwise": gx.from_cupy(lambda: cp.add(e1, e2, out=e3), name="elementwise"),
            "scale": gx.from_cupy(lambda: cp.multiply(s1, 1.5, out=s2), name="scale"),
            "cumsum": gx.from_cupy(lambda: cp.cumsum(cs), name="cumsum"),
            "reduce": gx.from_cupy(lambda: cp.sum(rd), name="reduce")}


def workloads(dev: int = 0, *, names=None, torch_too: bool = True, cupy_too: bool = True) -> dict:
    """``{name: Workload}``: the built-ins (their declared bytes are the known ones) and, with
    no declared bytes, the PyTorch and CuPy workloads; ``names`` keeps only those."""
    import gcexplore as gx
    from gcexplore import workloads as W

    sm = gx.device_info(dev).sm_count
    out = {"compute": W.compute(device=dev), "memory": W.memory(device=dev),
           "latency": W.latency(blocks=4 * sm, device=dev), "copy": W.copy(device=dev)}
    want = set(names) if names else None
    if torch_too and (want is None or want & set(TORCH)):
        out.update(_torch(dev))
    if cupy_too and (want is None or want & set(CUPY)):
        out.update(_cupy(dev))
    return {k: v for k, v in out.items() if want is None or k in want}
