"""The design's PyTorch example pair, shared by the benchmarks: an ``n``^3 bf16 matmul and
a sigmoid over ``mib`` MiB of fp32 (8192 and 512 by default), tensors made up front."""

from __future__ import annotations

from gcexplore import workloads as W


def matmul_sigmoid(device: int = 0, *, n: int = 8192, mib: int = 512):
    """``(fns, wls)``: ``{"matmul": fn, "sigmoid": fn}`` (no-argument callables on the current
    PyTorch stream) and the same as gcexplore workloads with their declared FLOPs and bytes."""
    import torch

    a = torch.randn(n, n, device=f"cuda:{device}", dtype=torch.bfloat16)
    b = torch.randn(n, n, device=f"cuda:{device}", dtype=torch.bfloat16)
    c = torch.empty(n, n, device=f"cuda:{device}", dtype=torch.bfloat16)
    x = torch.randn(mib << 18, device=f"cuda:{device}", dtype=torch.float32)
    y = torch.empty_like(x)
    torch.cuda.synchronize()

    def matmul():
        torch.matmul(a, b, out=c)

    def sigmoid():
        torch.sigmoid(x, out=y)

    fns = {"matmul": matmul, "sigmoid": sigmoid}
    wls = {"matmul": W.from_torch(matmul, name="matmul", flops=2.0 * n ** 3),
           "sigmoid": W.from_torch(sigmoid, name="sigmoid", bytes=2.0 * x.nbytes)}
    return fns, wls
