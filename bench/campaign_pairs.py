"""PyTorch pairs for the campaign benchmark (bench/campaign.py): factories a campaign
imports on its workers as ``bench.campaign_pairs:attention_sort`` and
``bench.campaign_pairs:gemm_layernorm`` (the project root on PYTHONPATH)."""

from __future__ import annotations

import torch  # imported with the module, so a worker's warm-up pays for it once
import torch.nn.functional as F

import gcexplore as gx


def attention_sort(device=0, seq=2048, heads=16, dim=64, n=1 << 23):
    """Scaled-dot-product attention (fp16) against a sort of ``n`` floats."""
    dev = torch.device("cuda", device)
    q, k, v = (torch.randn(1, heads, seq, dim, device=dev, dtype=torch.float16) for _ in range(3))
    keys = torch.rand(n, device=dev)
    return {"attention": gx.from_torch(lambda: F.scaled_dot_product_attention(q, k, v), name="attention",
                                       device=device),
            "sort": gx.from_torch(lambda: torch.sort(keys), name="sort", device=device)}


def gemm_layernorm(device=0, n=2048, chain=4, rows=8192, cols=4096):
    """A chain of ``chain`` fp16 GEMMs (n x n) against a layer norm of rows x cols."""
    dev = torch.device("cuda", device)
    a, b = (torch.randn(n, n, device=dev, dtype=torch.float16) for _ in range(2))
    x = torch.randn(rows, cols, device=dev, dtype=torch.float16)

    def gemm_chain():
        y = a
        for _ in range(chain):
            y = y @ b
        return y

    return {"gemm_chain": gx.from_torch(gemm_chain, name="gemm_chain", device=device),
            "layer_norm": gx.from_torch(lambda: F.layer_norm(x, (cols,)), name="layer_norm", device=device)}
