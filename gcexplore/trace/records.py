"""CUPTI activity records as plain dicts, and plain dicts as trace rows (pure, no GPU).

:mod:`gcexplore.tracing` copies each record CUPTI delivers into a dict
(:func:`kernel_record`, :func:`copy_record`, :func:`context_record`) inside CUPTI's
buffer callback, so no CUPTI object outlives its buffer; :func:`trace_rows` joins
those dicts to gcexplore's external correlation ids and partitions and makes the rows
of a trace result. :func:`demangle` turns C++ kernel names back into source names.
Tested on the CPU with synthetic records (tests/_synthetic_trace.py).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ..schema import UNTAGGED

__all__ = ["KERNEL_INTS", "UNTAGGED", "context_record", "copy_record", "demangle", "gate_ends",
           "kernel_record", "trace_rows"]


# ---------------------------------------------------------------------------
# Kernel names
# ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _demangler():
    try:
        cxx = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = getattr(cxx, "__cxa_demangle")
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free.restype = None
    return fn, libc.free


@functools.lru_cache(maxsize=8192)
def demangle(name: str) -> str:
    """A C++ kernel name as source reads it (``_Z6kernelPf`` -> ``kernel(float*)``).

    Uses the C++ runtime's ``__cxa_demangle``; names that are not mangled, or that it
    cannot read, come back unchanged.
    """
    name = str(name)
    tools = _demangler() if name.startswith("_Z") else None
    if tools is None:
        return name
    fn, free = tools
    status = ctypes.c_int(-1)
    ptr = fn(name.encode(), None, None, ctypes.byref(status))
    if not ptr:
        return name
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace") if status.value == 0 else name
    finally:
        free(ptr)


# ---------------------------------------------------------------------------
# CUPTI records -> plain dicts (no CUPTI types survive the buffer callback)
# ---------------------------------------------------------------------------

KERNEL_INTS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "cluster_x", "cluster_y",
                "cluster_z", "registers_per_thread", "max_active_clusters", "graph_id")
_COMMON_INTS = ("start", "end", "context_id", "stream_id", "correlation_id")
_COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD",
               9: "HtoH", 10: "PtoP"}


def _int(a, field: str) -> int:
    v = getattr(a, field, 0)
    try:
        return int(v or 0)
    except (TypeError, ValueError):
        return 0


def kernel_record(a) -> dict:
    """The fields gcexplore keeps of a CONCURRENT_KERNEL record."""
    d: dict[str, Any] = {f: _int(a, f) for f in (*_COMMON_INTS, *KERNEL_INTS)}
    d.update(activity="kernel", name=str(getattr(a, "name", "") or ""), bytes=math.nan,
             static_shared_bytes=_int(a, "static_shared_memory"),
             dynamic_shared_bytes=_int(a, "dynamic_shared_memory"))
    return d


def copy_record(a, activity: str) -> dict:
    """The fields gcexplore keeps of a MEMCPY or MEMSET record (grid and block read 0)."""
    d: dict[str, Any] = {f: 0 for f in KERNEL_INTS}
    d.update({f: _int(a, f) for f in (*_COMMON_INTS, "graph_id")})
    what = _COPY_KINDS.get(_int(a, "copy_kind"), "") if activity == "memcpy" else ""
    d.update(activity=activity, name=f"{activity} {what}".strip(), bytes=float(_int(a, "bytes")),
             static_shared_bytes=0, dynamic_shared_bytes=0)
    return d


def context_record(a, green: bool) -> dict:
    """A CONTEXT or GREEN_CONTEXT record; the TPC mask as hex words (JSON keeps them exact)."""
    d: dict[str, Any] = {f: _int(a, f) for f in ("context_id", "device_id", "parent_context_id", "num_multiprocessors")}
    d["source"] = "GREEN_CONTEXT" if green else "CONTEXT"
    if green:
        d["num_tpcs"] = _int(a, "num_tpcs")
        mask = getattr(a, "logical_tpc_mask", None)
        words = [] if mask is None else list(mask)
        size = _int(a, "logical_tpc_mask_size")
        itemsize = getattr(getattr(mask, "dtype", None), "itemsize", 8)
        d["logical_tpc_mask"] = [hex(int(w)) for w in words[:size or len(words)]]
        d["mask_word_bits"] = 8 * int(itemsize)  # TPC i is bit i % bits of word i // bits
        d["mask_type"] = f"{type(mask).__name__} of {len(words)}, size field {size}"
    else:
        d["is_green_context"] = bool(_int(a, "is_green_context"))
    return d


# ---------------------------------------------------------------------------
# Records -> trace rows (pure; tested on synthetic records)
# ---------------------------------------------------------------------------


def gate_ends(records, ext, tags) -> dict[int, int]:
    ends: dict[int, int] = {}
    for r in records:
        tag = tags.get(ext.get(r["correlation_id"], -1))
        if tag is not None and tag[1] == "gate" and r["activity"] == "kernel":
            ends[tag[0]] = max(ends.get(tag[0], 0), r["end"])
    return ends


def _row(r: dict, label, group: int, workload: str, launch: int, where: tuple[str, int], t0: int) -> dict:
    row = {"layout": label[0], "mode": label[1], "rep": label[2], "group": group, "workload": workload,
           "launch": launch,
           "partition": where[0], "sm_count": where[1], "stream_id": r["stream_id"],
           "activity": r["activity"], "name": demangle(r["name"]),
           "start_ms": (r["start"] - t0) / 1e6, "end_ms": (r["end"] - t0) / 1e6}
    row.update({f: r[f] for f in (*KERNEL_INTS, "static_shared_bytes", "dynamic_shared_bytes", "bytes",
                                  "context_id", "correlation_id")})
    return row


def _where(cid: int, contexts: Mapping, greens: Mapping) -> tuple[str, int] | None:
    if cid in contexts:
        return contexts[cid][0], int(contexts[cid][1])
    g = greens.get(cid)
    if g is not None:
        return f"context {cid}", int(g.get("num_multiprocessors", 0))
    return None


def trace_rows(records: Sequence[dict], ext: Mapping[int, int], tags: Mapping[int, tuple],
               groups: Mapping[int, tuple | None], contexts: Mapping[int, tuple], *,
               greens: Mapping[int, dict] | None = None, origin_ns: int | None = None,
               untagged: tuple | None = None, gates: Mapping[int, int] | None = None
               ) -> tuple[list[dict], Counter]:
    """Trace rows from CUPTI-like records, and counts of what was kept and left out.

    Parameters
    ----------
    records : sequence of dict
        From :func:`kernel_record` / :func:`copy_record` (``start``, ``end``,
        ``context_id``, ``stream_id``, ``correlation_id``, ``name``, dimensions ...).
    ext : mapping
        CUPTI correlation id -> gcexplore's external id (EXTERNAL_CORRELATION records).
    tags : mapping
        External id -> ``(group, role, workload, partition, launch)``; role is
        ``"gate"``, ``"settle"``, ``"workload"`` (or ``"probe"``).
    groups : mapping
        Group -> ``(layout, mode, rep)``; rep None (or no label) marks warm-up (left out). A
        row's ``group`` column is its group (-1: a user's kernel outside any region).
    contexts : mapping
        Context id -> ``(partition name, sm_count)`` of the partitions watched.
    greens : mapping, optional
        Context id -> context record, naming contexts nobody watched.
    origin_ns : int, optional
        Times relative to this; default: each group's gate kernel end.
    untagged : tuple, optional
        ``(layout, mode, rep)`` to keep records without an external id under the
        workload ``"(untagged)"`` (a user's own code); default: leave them out.
    gates : mapping, optional
        Gate kernel ends (group -> ns) found in earlier batches of records.
    """
    greens = greens or {}
    gate = {} if origin_ns is not None else {**(gates or {}), **gate_ends(records, ext, tags)}
    rows, diag = [], Counter()
    for r in records:
        diag[r["activity"]] += 1
        tag = tags.get(ext.get(r["correlation_id"], -1))
        if tag is None:
            if untagged is None:
                diag["untagged"] += 1
                continue
            tag = (None, "workload", UNTAGGED, "", 0)
            label = untagged
        else:
            label = groups.get(tag[0])
        if label is None or label[2] is None:
            diag["warmup"] += 1
            continue
        if tag[1] != "workload":
            diag[tag[1]] += 1
            continue
        t0 = origin_ns if origin_ns is not None else gate.get(tag[0]) if tag[0] is not None else None
        if t0 is None or not 0 < r["start"] <= r["end"]:
            diag["no_gate" if t0 is None else "bad_times"] += 1
            continue
        where = _where(r["context_id"], contexts, greens)
        if where is None:
            diag["unknown_context"] += 1
            where = (f"context {r['context_id']}", 0)
        if tag[3] and where[0] != tag[3]:
            diag["partition_mismatch"] += 1
        rows.append(_row(r, label, -1 if tag[0] is None else tag[0], tag[2], tag[4], where, t0))
    diag["rows"] = len(rows)
    return rows, diag
