"""Serving workloads: a synthetic transformer decoder stack (PyTorch, random bf16 weights at real
shapes) with a decode step and a prefill step, and open-loop request arrivals.

- :class:`ModelShape`: the stack's shapes (a Llama-3-8B-like default: hidden 4096, 32 query heads,
  8 KV heads, head 128, FFN 14336; 4 layers so a run stays small).
- :func:`decoder_stack` builds the weights and returns a :class:`ServingModel` whose ``decode``
  (batch B over a KV cache of length L) and ``prefill`` (one prompt, whole or in chunks) are
  :class:`~gcexplore.workloads.Workload` s: ``fn(stream=...)``.
- :func:`serving_roles` turns the user's own callables (``decode=fn``, ``prefill=fn``) into the
  same roles.
- :func:`arrivals`: request arrival times (Poisson at a rate, or bursts of N prompts), the same
  for the same seed.

Nothing here touches a GPU until a model is built; PyTorch is imported there.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._checks import as_count, as_int
from ..workloads.workload import Workload, from_torch

__all__ = ["ARRIVALS", "ModelShape", "ServingModel", "arrivals", "decoder_stack", "serving_roles"]

#: Arrival patterns of :func:`arrivals`.
ARRIVALS = ("poisson", "burst")


@dataclasses.dataclass(frozen=True)
class ModelShape:
    """Shapes of the synthetic decoder stack (defaults: Llama-3-8B's layer, 4 of its 32 layers)."""

    hidden: int = 4096
    heads: int = 32
    kv_heads: int = 8
    ffn: int = 14336
    layers: int = 4

    def __post_init__(self):
        for name in ("hidden", "heads", "kv_heads", "ffn", "layers"):
            as_count(name, getattr(self, name))
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads}) and heads a "
                             f"multiple of kv_heads ({self.kv_heads}); e.g. 4096 / 32 / 8")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def layer_params(self) -> int:
        """Weights of one layer (QKV, output, gate+up, down; norms are negligible)."""
        qkv = self.hidden * (self.heads + 2 * self.kv_heads) * self.head_dim
        return qkv + self.hidden * self.hidden + 3 * self.hidden * self.ffn

    def decode_flops(self, batch: int, kv_len: int) -> float:
        """FLOPs of one decode step over ``batch`` sequences with ``kv_len`` cached tokens."""
        attn = 4.0 * batch * kv_len * self.heads * self.head_dim
        return self.layers * (2.0 * batch * self.layer_params + attn)

    def decode_bytes(self, batch: int, kv_len: int) -> float:
        """DRAM bytes one decode step reads at least: the weights and the KV cache (bf16)."""
        kv = 2.0 * batch * kv_len * self.kv_heads * self.head_dim
        return self.layers * 2.0 * (self.layer_params + kv)

    def prefill_flops(self, prompt: int) -> float:
        """FLOPs of one prompt's prefill (causal attention counted half)."""
        attn = 2.0 * prompt * prompt * self.heads * self.head_dim
        return self.layers * (2.0 * prompt * self.layer_params + attn)


def arrivals(rate: float, duration_s: float, *, seed: int = 0, pattern: str = "poisson",
             burst: int = 8) -> np.ndarray:
    """Request arrival times (ms from the start, sorted) of an open-loop load.

    Parameters
    ----------
    rate : float
        Requests per second on average.
    duration_s : float
        Arrivals fall in ``[0, duration_s)``.
    seed : int, default 0
        The same seed gives the same times.
    pattern : {"poisson", "burst"}, default "poisson"
        ``"burst"``: groups of ``burst`` requests arriving at once, the groups a Poisson process
        of rate ``rate / burst``.
    burst : int, default 8
    """
    if not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
        raise ValueError(f"rate must be a positive number of requests per second, got {rate!r}")
    if not (isinstance(duration_s, (int, float)) and math.isfinite(duration_s) and 0 < duration_s <= 3600):
        raise ValueError(f"duration_s must be in (0, 3600] seconds, got {duration_s!r}")
    if pattern not in ARRIVALS:
        raise ValueError(f"unknown arrival pattern {pattern!r}; valid: {', '.join(ARRIVALS)}")
    as_int("seed", seed, minimum=0)
    size = as_count("burst", burst) if pattern == "burst" else 1
    rng = np.random.default_rng(seed)
    groups = rate / size
    n = rng.poisson(groups * duration_s)
    starts = np.sort(rng.uniform(0.0, duration_s * 1e3, size=n))
    return np.repeat(starts, size)


@dataclasses.dataclass(frozen=True, eq=False)
class ServingModel:
    """The roles a serving experiment runs: ``decode`` and ``prefill`` workloads.

    ``prefill_chunks`` holds the prefill split into pieces for a time-sliced schedule (one
    piece: the whole prompt). ``graphable``: the decode step may be captured in a CUDA graph.
    ``decode_tokens`` and ``prompt_tokens`` count the tokens of one decode step and one request.
    """

    decode: Workload
    prefill: Workload
    prefill_chunks: tuple[Callable[..., Any], ...]
    decode_tokens: int
    prompt_tokens: int
    graphable: bool = False
    shape: ModelShape | None = None
    description: dict = dataclasses.field(default_factory=dict)
    release: Callable[[], None] | None = None

    def close(self) -> None:
        if self.release is not None:
            self.release()


def serving_roles(*, decode, prefill, decode_tokens: int = 1, prompt_tokens: int = 1,
                  prefill_chunks: Sequence[Callable[..., Any]] | None = None,
                  graphable: bool = False) -> ServingModel:
    """The user's own decode step and prefill request as serving roles.

    ``decode`` and ``prefill`` are callables ``fn(stream=...)`` (e.g. from :func:`from_torch`) or
    :class:`Workload` s; ``prefill`` serves one whole request. ``prefill_chunks`` (callables
    ``fn(stream=...)`` run in order) lets the time-sliced baseline interleave decode steps between
    them; without it the request is one piece. ``graphable=True`` lets the experiment capture
    the decode step in a CUDA graph (it must then allocate nothing and never synchronise).
    """
    roles = {}
    for name, fn in (("decode", decode), ("prefill", prefill)):
        if not callable(fn):
            raise TypeError(f"{name} must be a callable fn(stream=...) or a Workload, got {fn!r}")
        roles[name] = fn if isinstance(fn, Workload) else Workload(getattr(fn, "__name__", name), fn)
    chunks = tuple(prefill_chunks) if prefill_chunks else (roles["prefill"],)
    if not all(callable(c) for c in chunks):
        raise TypeError("prefill_chunks must be callables fn(stream=...)")
    return ServingModel(roles["decode"], roles["prefill"], chunks, as_count("decode_tokens", decode_tokens),
                        as_count("prompt_tokens", prompt_tokens), graphable=bool(graphable),
                        description={"decode": roles["decode"].name, "prefill": roles["prefill"].name})


# ---------------------------------------------------------------------------
# the synthetic decoder stack (PyTorch)
# ---------------------------------------------------------------------------


class _Stack:
    """Weights, KV caches and activations of the decoder stack; every step reuses them."""

    def __init__(self, torch, shape: ModelShape, batch: int, kv_len: int, prompt: int, device: int, seed: int):
        self.t, self.s = torch, shape
        dev, bf = torch.device("cuda", device), torch.bfloat16
        g = torch.Generator(device=dev).manual_seed(seed)

        def w(*size):
            return (torch.randn(*size, device=dev, dtype=bf, generator=g) * (size[0] ** -0.5)).contiguous()

        h, hd, kvh = shape.hidden, shape.head_dim, shape.kv_heads
        qkv = (shape.heads + 2 * kvh) * hd
        self.layers = [dict(qkv=w(h, qkv), o=w(h, h), gu=w(h, 2 * shape.ffn), down=w(shape.ffn, h),
                            n1=torch.ones(h, device=dev, dtype=bf), n2=torch.ones(h, device=dev, dtype=bf))
                       for _ in range(shape.layers)]
        self.kcache = [torch.randn(batch, kvh, kv_len, hd, device=dev, dtype=bf, generator=g)
                       for _ in range(shape.layers)]
        self.vcache = [torch.randn(batch, kvh, kv_len, hd, device=dev, dtype=bf, generator=g)
                       for _ in range(shape.layers)]
        self.pk = [torch.empty(1, shape.heads, prompt, hd, device=dev, dtype=bf) for _ in range(shape.layers)]
        self.pv = [torch.empty_like(self.pk[0]) for _ in range(shape.layers)]
        self.x = torch.randn(batch, h, device=dev, dtype=bf, generator=g)
        self.prompt = torch.randn(prompt, h, device=dev, dtype=bf, generator=g)
        self.batch, self.kv_len, self.n_prompt = batch, kv_len, prompt

    def _norm(self, x, weight):
        t = self.t
        return t.nn.functional.rms_norm(x, (x.shape[-1],), weight, 1e-5)

    def _mlp(self, x, lw):
        t = self.t
        gate, up = (x @ lw["gu"]).chunk(2, dim=-1)
        return (t.nn.functional.silu(gate) * up) @ lw["down"]

    def decode(self):
        """One step: every sequence of the batch attends over its KV cache (the last slot
        rewritten with the new key and value, so the length stays ``kv_len``)."""
        t, s, x = self.t, self.s, self.x
        b, hd, kvh, grp = self.batch, s.head_dim, s.kv_heads, s.heads // s.kv_heads
        for lw, kc, vc in zip(self.layers, self.kcache, self.vcache):
            qkv = self._norm(x, lw["n1"]) @ lw["qkv"]
            q, k, v = qkv.split([s.heads * hd, kvh * hd, kvh * hd], dim=-1)
            kc[:, :, -1].copy_(k.view(b, kvh, hd))
            vc[:, :, -1].copy_(v.view(b, kvh, hd))
            qg = q.view(b, kvh, grp, hd)  # the query heads sharing one KV head, batched together
            p = t.softmax((qg @ kc.transpose(-1, -2)).float() * hd ** -0.5, dim=-1).to(qg.dtype)
            x = x + (p @ vc).reshape(b, s.hidden) @ lw["o"]
            x = x + self._mlp(self._norm(x, lw["n2"]), lw)
        self.x.copy_(x)

    def prefill(self, start: int = 0, stop: int | None = None):
        """Prompt tokens ``start:stop`` through every layer, attending causally to the tokens
        before them (their keys and values are kept per layer)."""
        t, s = self.t, self.s
        stop = self.n_prompt if stop is None else stop
        hd, kvh, grp, n = s.head_dim, s.kv_heads, s.heads // s.kv_heads, stop - start
        x = self.prompt[start:stop]
        for lw, pk, pv in zip(self.layers, self.pk, self.pv):
            qkv = self._norm(x, lw["n1"]) @ lw["qkv"]
            q, k, v = qkv.split([s.heads * hd, kvh * hd, kvh * hd], dim=-1)
            # GQA: each KV head serves `grp` query heads
            pk[0, :, start:stop] = k.view(n, kvh, hd).transpose(0, 1).repeat_interleave(grp, dim=0)
            pv[0, :, start:stop] = v.view(n, kvh, hd).transpose(0, 1).repeat_interleave(grp, dim=0)
            qh = q.view(1, n, s.heads, hd).transpose(1, 2)
            if start == 0:
                o = t.nn.functional.scaled_dot_product_attention(qh, pk[:, :, :stop], pv[:, :, :stop],
                                                                 is_causal=True)
            else:
                from torch.nn.attention.bias import causal_lower_right

                o = t.nn.functional.scaled_dot_product_attention(
                    qh, pk[:, :, :stop], pv[:, :, :stop], attn_mask=causal_lower_right(n, stop))
            x = x + o.transpose(1, 2).reshape(n, s.hidden) @ lw["o"]
            x = x + self._mlp(self._norm(x, lw["n2"]), lw)
        return x


def decoder_stack(shape: ModelShape | None = None, *, batch: int = 32, kv_len: int = 2048, prompt: int = 2048,
                  chunk: int | None = 512, device: int = 0, seed: int = 0) -> ServingModel:
    """A synthetic decoder stack on ``device`` with random bf16 weights: its decode and prefill roles.

    Parameters
    ----------
    shape : ModelShape, optional
        Default: Llama-3-8B's layer shapes, 4 layers.
    batch : int, default 32
        Sequences decoded per step (tokens per step).
    kv_len : int, default 2048
        Cached tokens each sequence attends over.
    prompt : int, default 2048
        Tokens of one prefill request.
    chunk : int or None, default 512
        Prefill pieces of this many tokens for the time-sliced baseline (None: the whole
        prompt in one piece). The partitioned and plain-stream runs prefill each prompt whole.
    device : int, default 0
    seed : int, default 0
        Seed of the random weights, caches and inputs.

    Returns
    -------
    ServingModel
        Close it to free its memory (about ``layers x (436 MB + batch x kv_len x 4 KB)`` at the
        default shapes).
    """
    shape = shape if shape is not None else ModelShape()
    batch, kv_len, prompt = as_count("batch", batch), as_count("kv_len", kv_len), as_count("prompt", prompt)
    if chunk is not None and not 0 < as_count("chunk", chunk) <= prompt:
        raise ValueError(f"chunk must be in [1, prompt={prompt}] tokens or None, got {chunk}")
    try:
        import torch
    except ImportError as e:
        raise ImportError("decoder_stack needs PyTorch: pip install torch") from e
    holder = {"stack": _Stack(torch, shape, batch, kv_len, prompt, as_int("device", device, minimum=0), seed)}

    def stack():
        st = holder.get("stack")
        if st is None:
            raise RuntimeError("this ServingModel is closed; build another with decoder_stack()")
        return st

    step = chunk or prompt
    bounds = [(a, min(a + step, prompt)) for a in range(0, prompt, step)]
    chunks = tuple(from_torch(lambda a=a, b=b: stack().prefill(a, b), name=f"prefill[{a}:{b}]", device=device)
                   for a, b in bounds)
    decode = from_torch(lambda: stack().decode(), name="decode", device=device,
                        flops=shape.decode_flops(batch, kv_len), bytes=shape.decode_bytes(batch, kv_len),
                        items=batch)
    prefill = from_torch(lambda: stack().prefill(), name="prefill", device=device,
                         flops=shape.prefill_flops(prompt), items=prompt)
    desc = {**dataclasses.asdict(shape), "batch": batch, "kv_len": kv_len, "prompt": prompt,
            "chunk": chunk or prompt, "dtype": "bfloat16", "weights_seed": seed}
    return ServingModel(decode, prefill, chunks, batch, prompt, graphable=True, shape=shape, description=desc,
                        release=holder.clear)
