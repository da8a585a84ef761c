"""PyTorch example pairs as factories ``module:function`` (campaigns, ``compare_mechanisms``, scripts):
the design's matmul + sigmoid, and the campaign benchmark's attention + sort and GEMM chain + layer
norm. Each returns ``{name: Workload}`` with its tensors made up front on ``device``.

PyTorch is imported with the module (not by ``import gcexplore``): a campaign worker that imports
``gcexplore.workloads.torch_pairs`` while it warms up pays for PyTorch once, before any task.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .workload import from_torch

__all__ = ["attention_sort", "gemm_layernorm", "matmul_sigmoid", "matmul_sigmoid_calls"]


def matmul_sigmoid_calls(device: int = 0, *, n: int = 8192, mib: int = 512) -> tuple[dict, dict]:
    """The design's pair as plain calls and its declared work: ``({"matmul": fn, "sigmoid": fn},
    {name: {"flops": ...} or {"bytes": ...}})``, each fn a no-argument call on the current PyTorch
    stream (for a hand-written reference that times them without gcexplore)."""
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

    declared = {"matmul": {"flops": 2.0 * n ** 3}, "sigmoid": {"bytes": 2.0 * x.nbytes}}
    return {"matmul": matmul, "sigmoid": sigmoid}, declared


def matmul_sigmoid(device: int = 0, *, n: int = 8192, mib: int = 512) -> dict:
    """The design's pair as workloads: an ``n``^3 bf16 matmul (declared FLOPs) and a sigmoid over ``mib``
    MiB of fp32 (declared bytes: read and written once); 8192 and 512 by default."""
    calls, work = matmul_sigmoid_calls(device, n=n, mib=mib)
    return {k: from_torch(fn, name=k, **work[k]) for k, fn in calls.items()}


def attention_sort(device: int = 0, seq: int = 2048, heads: int = 16, dim: int = 64, n: int = 1 << 23) -> dict:
    """Scaled-dot-product attention (fp16, ``heads`` x ``seq`` x ``dim``) against a sort of ``n`` floats."""
    dev = torch.device("cuda", device)
    q, k, v = (torch.randn(1, heads, seq, dim, device=dev, dtype=torch.float16) for _ in range(3))
    keys = torch.rand(n, device=dev)
    return {"attention": from_torch(lambda: F.scaled_dot_product_attention(q, k, v), name="attention",
                                    device=device),
            "sort": from_torch(lambda: torch.sort(keys), name="sort", device=device)}


def gemm_layernorm(device: int = 0, n: int = 2048, chain: int = 4, rows: int = 8192, cols: int = 4096) -> dict:
    """A chain of ``chain`` fp16 GEMMs (``n`` x ``n``) against a layer norm of ``rows`` x ``cols`` fp16."""
    dev = torch.device("cuda", device)
    a, b = (torch.randn(n, n, device=dev, dtype=torch.float16) for _ in range(2))
    x = torch.randn(rows, cols, device=dev, dtype=torch.float16)

    def gemm_chain():
        y = a
        for _ in range(chain):
            y = y @ b
        return y

    return {"gemm_chain": from_torch(gemm_chain, name="gemm_chain", device=device),
            "layer_norm": from_torch(lambda: F.layer_norm(x, (cols,)), name="layer_norm", device=device)}
