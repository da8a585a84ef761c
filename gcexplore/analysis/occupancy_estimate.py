"""Estimated SM occupancy of any workload, from a kernel trace's grid, block and resources.

Part of the analysis layer (pure pandas, no GPU). Built-in kernels record the SM each
block ran on (``%smid``, :func:`gcexplore.occupancy`); other people's kernels (PyTorch,
cuBLAS, CuPy) do not, but a kernel trace (kind ``"trace"``) carries each kernel's grid,
block, cluster, registers per thread and shared memory. From them the CUDA occupancy
calculator's rules (those of ``cuda_occupancy.h``) give the blocks one SM can hold at
once, and from that the SMs a kernel can keep busy on its partition:

- **blocks per SM** = the smallest of the limits by warps (``max_warps_per_sm`` over
  the block's warps), by blocks (``max_blocks_per_sm``), by registers (registers per
  warp rounded up to ``register_alloc_unit``; each of the SM's ``sub_partitions`` holds
  whole warps), and by shared memory (static + dynamic + ``reserved_shared_per_block``,
  rounded up to ``shared_alloc_unit``, against ``shared_per_sm``, the largest carveout);
- **SMs in use** while the kernel runs = min(partition SMs, ceil(blocks / blocks per
  SM)); with thread-block clusters, whole clusters only (the GPC layout is ignored);
- **waves** = ceil(blocks / (blocks per SM x partition SMs)).

These are estimates: labelled ``source="estimated"`` and kept apart from the
measured ``%smid`` maps. They say what the launch *allows*, not where blocks went, and
assume the largest shared-memory carveout and no other kernel on the same SMs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..results.validate import check_trace_rows

__all__ = ["ESTIMATE_COLUMNS", "LIMITS", "SM_USAGE_COLUMNS", "SmLimits", "blocks_per_sm",
           "estimate_occupancy", "resident_blocks", "sm_usage"]

ESTIMATE_LABEL = "estimated from grid, block and resources"


@dataclass(frozen=True)
class SmLimits:
    """Per-SM limits of one compute capability (the occupancy calculator's table)."""

    name: str
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int
    registers_per_sm: int
    register_alloc_unit: int  # registers, per warp
    max_registers_per_thread: int
    max_registers_per_block: int
    sub_partitions: int
    shared_per_sm: int  # bytes, the largest carveout
    max_shared_per_block: int  # bytes, opt-in maximum
    reserved_shared_per_block: int  # bytes the system keeps per block
    shared_alloc_unit: int  # bytes
    warp_size: int = 32


#: Limits by compute capability ("major.minor"); only those checked against NVIDIA's tables.
LIMITS = {
    "9.0": SmLimits(name="Hopper (sm_90)", max_threads_per_sm=2048, max_warps_per_sm=64, max_blocks_per_sm=32,
                    max_threads_per_block=1024, registers_per_sm=65536, register_alloc_unit=256,
                    max_registers_per_thread=255, max_registers_per_block=65536, sub_partitions=4,
                    shared_per_sm=228 * 1024, max_shared_per_block=227 * 1024, reserved_shared_per_block=1024,
                    shared_alloc_unit=128),
}

ESTIMATE_COLUMNS = ["layout", "mode", "rep", "workload", "launch", "partition", "sm_count", "stream_id", "name",
                    "start_ms", "end_ms", "blocks", "threads_per_block", "cluster_size", "blocks_per_sm",
                    "limited_by", "warps_per_sm", "occupancy", "sms_in_use", "waves", "source", "device_name",
                    "run_id"]
SM_USAGE_COLUMNS = ["layout", "mode", "rep", "partition", "sm_count", "time_ms", "sms_in_use", "kernels",
                    "source", "device_name", "run_id"]


def limits_for(compute_capability) -> SmLimits:
    """The :class:`SmLimits` of ``compute_capability`` ("9.0", (9, 0) or 9.0); ValueError if unknown."""
    if isinstance(compute_capability, (tuple, list)):
        key = ".".join(str(int(x)) for x in compute_capability)
    else:
        key = str(compute_capability or "")
    if key not in LIMITS:
        raise ValueError(f"no occupancy limits for compute capability {key or '(none)'}; known: "
                         f"{', '.join(f'{k} ({v.name})' for k, v in LIMITS.items())}. Pass "
                         "compute_capability= for a trace without it in attrs, or add the card's "
                         "limits to gcexplore.occupancy_estimate.LIMITS")
    return LIMITS[key]


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def blocks_per_sm(threads: int, registers: int, shared_bytes: int, limits: SmLimits) -> tuple[int, str]:
    """Blocks of this shape one SM holds at once, and what limits it.

    Parameters
    ----------
    threads : int
        Threads per block (block_x * block_y * block_z).
    registers : int
        Registers per thread.
    shared_bytes : int
        Static plus dynamic shared memory per block, in bytes.
    limits : SmLimits

    Returns
    -------
    (int, str)
        The blocks, and the limiting resources ("warps", "blocks", "registers",
        "shared memory"; ties joined by "+"). ValueError when one block cannot fit.
    """
    lim = limits
    if registers < 0 or shared_bytes < 0:
        raise ValueError(f"registers ({registers}) and shared memory ({shared_bytes} bytes) per block cannot be "
                         "negative; CUPTI reports both as counts >= 0")
    if threads <= 0 or threads > lim.max_threads_per_block:
        raise ValueError(f"a block of {threads} threads cannot run on {lim.name} "
                         f"(1 to {lim.max_threads_per_block} threads per block)")
    if registers > lim.max_registers_per_thread:
        raise ValueError(f"{registers} registers per thread exceed {lim.name}'s {lim.max_registers_per_thread}")
    if shared_bytes > lim.max_shared_per_block:
        raise ValueError(f"{shared_bytes} bytes of shared memory per block exceed {lim.name}'s "
                         f"{lim.max_shared_per_block}")
    warps = -(-threads // lim.warp_size)
    by = {"warps": lim.max_warps_per_sm // warps, "blocks": lim.max_blocks_per_sm}
    if registers > 0:
        per_warp = _round_up(registers * lim.warp_size, lim.register_alloc_unit)
        if per_warp * _round_up(warps, lim.sub_partitions) > lim.max_registers_per_block:
            raise ValueError(f"{threads} threads x {registers} registers exceed {lim.name}'s "
                             f"{lim.max_registers_per_block} registers per block")
        per_sub = (lim.registers_per_sm // lim.sub_partitions) // per_warp
        by["registers"] = per_sub * lim.sub_partitions // warps
    smem = _round_up(shared_bytes + lim.reserved_shared_per_block, lim.shared_alloc_unit)
    by["shared memory"] = lim.shared_per_sm // smem
    best = min(by.values())
    return best, "+".join(k for k, v in by.items() if v == best)


def resident_blocks(per_sm: int, sms: int, cluster: int = 1) -> int:
    """Blocks ``sms`` SMs hold at once when each holds ``per_sm``: whole clusters of ``cluster`` only
    (the GPC layout is ignored, as everywhere in this module)."""
    resident = int(per_sm) * int(sms)
    return (resident // cluster) * cluster if cluster > 1 else resident


def _kernels(trace: pd.DataFrame) -> pd.DataFrame:
    need = ["layout", "mode", "rep", "workload", "partition", "sm_count", "start_ms", "end_ms", "grid_x",
            "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread", "static_shared_bytes",
            "dynamic_shared_bytes"]
    if not isinstance(trace, pd.DataFrame) or any(c not in trace.columns for c in need):
        got = list(trace.columns) if isinstance(trace, pd.DataFrame) else type(trace).__name__
        raise ValueError(f"estimate_occupancy needs a kernel trace (columns {need}) from trace=True or "
                         f"gcexplore.kernel_trace(); got {got}")
    check_trace_rows(trace, "estimate_occupancy")
    k = trace[trace["activity"] == "kernel"] if "activity" in trace.columns else trace
    return k[(k["grid_x"] > 0) & (k["block_x"] > 0)]


def _estimate_row(r, lim: SmLimits, cache: dict) -> dict:
    threads = int(r.block_x) * int(r.block_y) * int(r.block_z)
    smem = int(r.static_shared_bytes) + int(r.dynamic_shared_bytes)
    key = (threads, int(r.registers_per_thread), smem)
    if key not in cache:
        try:
            cache[key] = blocks_per_sm(*key, lim)
        except ValueError as e:
            raise ValueError(f"kernel {r.name!r} ({r.workload}, layout {r.layout}, {r.mode}): {e}") from None
    per_sm, limiter = cache[key]
    blocks = int(r.grid_x) * int(r.grid_y) * int(r.grid_z)
    cluster = max(1, int(getattr(r, "cluster_x", 0) or 1) * int(getattr(r, "cluster_y", 0) or 1)
                  * int(getattr(r, "cluster_z", 0) or 1))
    sms = int(r.sm_count)
    resident = resident_blocks(per_sm, sms, cluster)
    in_use = min(sms, math.ceil(min(blocks, resident) / per_sm)) if resident else 0
    warps = -(-threads // lim.warp_size) * per_sm
    return {"blocks": blocks, "threads_per_block": threads, "cluster_size": cluster, "blocks_per_sm": per_sm,
            "limited_by": limiter, "warps_per_sm": warps, "occupancy": warps / lim.max_warps_per_sm,
            "sms_in_use": in_use, "waves": math.ceil(blocks / resident) if resident else np.nan}


def estimate_occupancy(trace: pd.DataFrame, *, compute_capability=None) -> pd.DataFrame:
    """Per kernel of a trace: blocks per SM, occupancy and SMs in use, estimated.

    Parameters
    ----------
    trace : pandas.DataFrame
        A kernel trace (``trace=True`` or :func:`gcexplore.kernel_trace`); memcpy and
        memset rows are left out.
    compute_capability : str or tuple, optional
        Default ``trace.attrs["compute_capability"]``; see :data:`LIMITS`.

    Returns
    -------
    pandas.DataFrame
        One row per kernel: ``layout``, ``mode``, ``rep``, ``workload``, ``launch``,
        ``partition``, ``sm_count`` (the partition's SMs), ``stream_id``, ``name``,
        ``start_ms``, ``end_ms``, ``blocks`` (grid size), ``threads_per_block``,
        ``cluster_size`` (1 without clusters), ``blocks_per_sm``, ``limited_by``,
        ``warps_per_sm``, ``occupancy`` (resident warps / the SM's maximum),
        ``sms_in_use`` (min(partition SMs, ceil(blocks / blocks per SM)), whole clusters),
        ``waves`` (ceil(blocks / blocks the partition holds at once)), ``source``
        ("estimated"), ``device_name``, ``run_id``. ``attrs`` carry the trace's, plus
        ``source`` and ``estimate`` (what the numbers are).
    """
    lim = limits_for(compute_capability or trace.attrs.get("compute_capability")
                     if isinstance(trace, pd.DataFrame) else compute_capability)
    kernels = _kernels(trace)
    cache: dict = {}
    rows = []
    for r in kernels.itertuples(index=False):
        base = {c: getattr(r, c, "" if c in ("device_name", "run_id", "name") else 0)
                for c in ("layout", "mode", "rep", "workload", "launch", "partition", "sm_count", "stream_id",
                          "name", "start_ms", "end_ms", "device_name", "run_id")}
        rows.append({**base, **_estimate_row(r, lim, cache), "source": "estimated"})
    out = pd.DataFrame(rows, columns=ESTIMATE_COLUMNS)
    out.attrs.update(trace.attrs)
    out.attrs.update({"source": "estimated", "summary_of": "trace", "occupancy_limits": lim.name,
                      "estimate": f"SMs in use {ESTIMATE_LABEL} with the occupancy calculator's rules "
                                  f"for {lim.name}; not measured"})
    return out


def sm_usage(trace: pd.DataFrame, *, compute_capability=None) -> pd.DataFrame:
    """SMs in use over time per partition: a step function over the kernels' intervals.

    At each kernel start or end in a (layout, mode, rep, partition), the SMs in use
    are the sum of :func:`estimate_occupancy`'s ``sms_in_use`` over the kernels then
    running there, capped at the partition's SMs. Each row holds from its ``time_ms``
    to the next row's; the last row of a partition (0 SMs) is its last kernel's end.

    Returns
    -------
    pandas.DataFrame
        ``layout``, ``mode``, ``rep``, ``partition``, ``sm_count``, ``time_ms``,
        ``sms_in_use``, ``kernels`` (running then), ``source`` ("estimated"),
        ``device_name``, ``run_id``; attrs as :func:`estimate_occupancy`'s.
    """
    est = estimate_occupancy(trace, compute_capability=compute_capability)
    rows = []
    keys = ["layout", "mode", "rep", "partition"]
    for (layout, mode, rep, part), g in est.groupby(keys, sort=False):
        times = np.unique(np.concatenate([g["start_ms"].to_numpy(float), g["end_ms"].to_numpy(float)]))
        starts, ends = g["start_ms"].to_numpy(float), g["end_ms"].to_numpy(float)
        use = g["sms_in_use"].to_numpy(int)
        cap = int(g["sm_count"].iloc[0])
        for t in times:
            running = (starts <= t) & (ends > t)
            rows.append({"layout": layout, "mode": mode, "rep": rep, "partition": part, "sm_count": cap,
                         "time_ms": float(t), "sms_in_use": min(cap, int(use[running].sum())),
                         "kernels": int(running.sum()), "source": "estimated",
                         "device_name": str(g["device_name"].iloc[0]), "run_id": str(g["run_id"].iloc[0])})
    out = pd.DataFrame(rows, columns=SM_USAGE_COLUMNS)
    out.attrs.update(est.attrs)
    return out
