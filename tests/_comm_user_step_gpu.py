"""The user's step of the GPU tests of ``CommSpec(compute=...)``: a PyTorch attention + MLP block (the
issue's test step), and a factory that records the stream current while it builds."""

from __future__ import annotations

BUILT_ON: list[int] = []


def records_stream(device=0, stream=None):
    """Records PyTorch's current stream while building (the rank makes the partition's stream current)."""
    import torch

    BUILT_ON.append(int(torch.cuda.current_stream(device).cuda_stream))
    x = torch.ones(1 << 20, device=f"cuda:{device}")

    def run(*, stream):
        x.mul_(1.0)

    return run


def attention_mlp(device=0, stream=None, sm_count=None, tokens=2048, hidden=2048, heads=16):
    """One transformer block's forward in bf16: QKV, causal attention, output projection, a 4x MLP."""
    import torch
    import torch.nn.functional as F

    from gcexplore.workloads.workload import from_torch

    dev = torch.device("cuda", device)
    g = torch.Generator(device=dev).manual_seed(0)

    def w(a, b):
        return torch.randn(a, b, device=dev, dtype=torch.bfloat16, generator=g) / a ** 0.5

    x, wqkv, wo, w1, w2 = (torch.randn(tokens, hidden, device=dev, dtype=torch.bfloat16, generator=g),
                           w(hidden, 3 * hidden), w(hidden, hidden), w(hidden, 4 * hidden), w(4 * hidden, hidden))
    d = hidden // heads

    def block():
        q, k, v = (x @ wqkv).view(tokens, 3, heads, d).permute(1, 2, 0, 3).unbind(0)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(0, 1).reshape(tokens, hidden) @ wo
        return F.gelu(a @ w1) @ w2

    block()  # warm: cuBLAS and the attention kernel chosen on this stream
    flops = 2.0 * tokens * hidden * (3 * hidden + hidden + 8 * hidden) + 2.0 * tokens * tokens * hidden
    return from_torch(block, name="attention_mlp", device=device, flops=flops)
