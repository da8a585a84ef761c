"""Numbers derived from kernel traces: busy span, GPU-busy time, launch bubbles, truthful rates.

Part of the analysis layer (pure pandas, no GPU); :mod:`gcexplore.analysis` calls it
when a trace is given. A trace (kind ``"trace"``, :mod:`gcexplore.tracing`) has one row
per kernel with its start and end relative to the repetition's common start.

Per (layout, mode, rep, workload):

- **busy span**: first kernel start to last kernel end;
- **GPU-busy time**: the length of the union of its kernels' intervals (kernels of
  one workload on several streams may overlap);
- **idle gaps** (launch bubbles): the holes in that union, between its first start
  and last end;
- **wait**: from the workload's start event (overlap result) to its first kernel's
  start: time its stream had reached it but its kernels had no SMs (plain streams)
  or had not been launched yet;
- **truthful rates**: declared FLOPs or bytes over GPU-busy time, never over a span
  that includes waiting.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import pandas as pd

from ..results.io import without_attrs
from ..results.validate import ResultError, check_trace_rows
from ..schema import UNTAGGED, sorted_partitions
from .stats import stats

__all__ = [
    "BUSY_COLUMNS",
    "attribution",
    "busy_time",
    "kernel_gaps",
    "require_trace_of",
    "tpc_map",
    "trace_rates",
    "trace_summary",
    "with_trace",
]

KEYS = ["layout", "mode", "rep", "workload"]
BUSY_COLUMNS = [*KEYS, "partition", "sm_count", "kernels", "first_start_ms", "last_end_ms", "busy_span_ms",
                "gpu_busy_ms", "idle_ms", "gaps", "largest_gap_ms", "device_name", "run_id"]
GAP_COLUMNS = [*KEYS, "partition", "gap_start_ms", "gap_end_ms", "gap_us", "before", "after",
               "device_name", "run_id"]


def _require_trace(trace: pd.DataFrame, where: str) -> None:
    need = [*KEYS, "partition", "start_ms", "end_ms", "name"]
    if not isinstance(trace, pd.DataFrame) or any(c not in trace.columns for c in need):
        got = list(trace.columns) if isinstance(trace, pd.DataFrame) else type(trace).__name__
        raise ValueError(f"{where} needs a kernel trace (columns {need}) from trace=True or "
                         f"gcexplore.kernel_trace(); got {got}")
    check_trace_rows(trace, where)  # finite times in order, no negative counts


def _named(values) -> list[str]:
    return sorted({str(v) for v in values} - {UNTAGGED})


def require_trace_of(results: pd.DataFrame, trace: pd.DataFrame, where: str, *, layouts: bool = True) -> None:
    """Refuse a kernel trace that is not of ``results``: workloads (and, with ``layouts``,
    layouts) it has that ``results`` lacks, or another run (``run_id``). A ValueError saying
    both sides and what fits."""
    _require_trace(trace, where)
    wl_r, wl_t = _named(results["workload"]), _named(trace["workload"])
    extra = sorted(set(wl_t) - set(wl_r))
    if extra:
        raise ValueError(f"{where}: the kernel trace is of workloads {wl_t}, but the results are of {wl_r}; "
                         "give the trace recorded with these results (trace=True on the same run)")
    runs_r = set(results["run_id"].astype(str)) if "run_id" in results.columns else set()
    runs_t = set(trace["run_id"].astype(str)) if "run_id" in trace.columns else set()
    if runs_r and runs_t and not runs_r & runs_t:
        raise ValueError(f"{where}: the kernel trace is of run {sorted(runs_t)}, the results of run {sorted(runs_r)}; "
                         "give the trace recorded with these results (trace=True on the same run)")
    lay_t = sorted(set(trace["layout"].astype(str)) - set(results["layout"].astype(str)))
    if layouts and lay_t:
        raise ValueError(f"{where}: the kernel trace covers layouts {lay_t} that the results did not measure "
                         f"(measured: {sorted(set(results['layout'].astype(str)))}); give the trace of "
                         "these results")


class _Union:
    """The union of each group's kernel intervals, for all groups at once.

    Groups are the (run, layout, mode, rep, workload) keys, numbered in order of first
    appearance. Within a group, intervals are taken in start order (ties in row order);
    an interval that starts at or before the end of the segment so far joins it, else it
    opens a new segment. ``seg_*`` arrays hold one entry per segment, in group order.
    """

    def __init__(self, trace: pd.DataFrame):
        keys = ["run_id", *KEYS] if "run_id" in trace.columns else KEYS
        gid = trace.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
        starts, ends = trace["start_ms"].to_numpy(float), trace["end_ms"].to_numpy(float)
        order = np.lexsort((starts, gid))
        s, e, g = starts[order], ends[order], gid[order]
        first_in_group = np.r_[True, g[1:] != g[:-1]] if len(g) else np.zeros(0, bool)
        reach = pd.Series(e).groupby(g).cummax().to_numpy()  # end of the segment so far, row by row
        opens = first_in_group | (s > np.r_[np.nan, reach[:-1]])
        opens[first_in_group] = True
        seg = np.cumsum(opens) - 1
        at = np.flatnonzero(opens)
        self.n_groups = int(gid.max()) + 1 if len(gid) else 0
        self.first_row = np.unique(gid, return_index=True)[1]  # each group's first row (original order)
        self.kernels = np.bincount(gid, minlength=self.n_groups)
        self.seg_group = g[at]
        self.seg_start = s[at]
        self.seg_end = np.maximum.reduceat(e, at) if len(at) else np.zeros(0)
        self.seg_first = order[at]  # the row whose start opened the segment
        longest = np.flatnonzero(e == self.seg_end[seg])  # the first row reaching the segment's end
        self.seg_last = order[longest[np.unique(seg[longest], return_index=True)[1]]] if len(at) else at
        self.group_first_seg = np.flatnonzero(np.r_[True, self.seg_group[1:] != self.seg_group[:-1]]) \
            if len(at) else at
        self.gid = gid

    def holes(self) -> np.ndarray:
        """Index k of every segment followed by another of the same group (a gap after it)."""
        return np.flatnonzero(self.seg_group[1:] == self.seg_group[:-1])


def _merge(starts: np.ndarray, ends: np.ndarray) -> list[list]:
    """The union of one group's intervals as [start, end, index of its first, index of its last] (sorted)."""
    n = len(starts)
    u = _Union(pd.DataFrame({**{k: np.zeros(n, int) for k in KEYS}, "start_ms": starts, "end_ms": ends}))
    return [[float(a), float(b), int(f), int(t)] for a, b, f, t in zip(u.seg_start, u.seg_end, u.seg_first, u.seg_last)]


def _first_values(trace: pd.DataFrame, rows: np.ndarray) -> dict:
    """The keys and identity of each group, from its first row."""
    out = {k: trace[k].to_numpy()[rows] for k in KEYS}
    for col in ("device_name", "run_id"):
        out[col] = trace[col].astype(str).to_numpy()[rows] if col in trace.columns else np.full(len(rows), "")
    return out


def _partitions(trace: pd.DataFrame, u: _Union) -> np.ndarray:
    """Each group's partitions, joined by "+" in partition order."""
    pairs = pd.DataFrame({"g": u.gid, "p": trace["partition"].astype(str).to_numpy()}).drop_duplicates()
    out = np.empty(u.n_groups, dtype=object)
    single = ~pairs["g"].duplicated(keep=False)
    out[pairs["g"][single].to_numpy()] = pairs["p"][single].to_numpy()
    for g, names in pairs[~single].groupby("g")["p"]:
        out[g] = "+".join(sorted_partitions(names))
    return out


def busy_time(trace: pd.DataFrame) -> pd.DataFrame:
    """Busy span, GPU-busy time and idle gaps of every workload in every repetition.

    Returns
    -------
    pandas.DataFrame
        One row per (layout, mode, rep, workload): ``partition`` (the partitions its
        kernels ran in, joined by "+"), ``sm_count``, ``kernels`` (records),
        ``first_start_ms``, ``last_end_ms``, ``busy_span_ms`` (their difference),
        ``gpu_busy_ms`` (length of the union of its intervals), ``idle_ms`` (span minus
        busy), ``gaps`` (holes in the union), ``largest_gap_ms``, ``device_name``,
        ``run_id``.
    """
    _require_trace(trace, "busy_time")
    with without_attrs(trace):
        out = _busy(trace)
    out.attrs.update(trace.attrs)
    out.attrs["summary_of"] = "trace"
    return out


def _busy(trace: pd.DataFrame) -> pd.DataFrame:
    u = _Union(trace)
    if u.n_groups == 0:
        out = pd.DataFrame(columns=BUSY_COLUMNS)
    else:
        heads = u.group_first_seg
        tails = np.r_[heads[1:], len(u.seg_start)] - 1
        busy = np.add.reduceat(u.seg_end - u.seg_start, heads)
        holes = u.holes()
        largest = np.zeros(u.n_groups)
        np.maximum.at(largest, u.seg_group[holes], u.seg_start[holes + 1] - u.seg_end[holes])
        first, last = u.seg_start[heads], u.seg_end[tails]
        ident = _first_values(trace, u.first_row)
        out = pd.DataFrame({**{k: ident[k] for k in KEYS}, "partition": _partitions(trace, u),
                            "sm_count": trace["sm_count"].to_numpy()[u.first_row].astype(int),
                            "kernels": u.kernels, "first_start_ms": first, "last_end_ms": last,
                            "busy_span_ms": last - first, "gpu_busy_ms": busy,
                            "idle_ms": np.maximum(last - first - busy, 0.0), "gaps": tails - heads,
                            "largest_gap_ms": largest, "device_name": ident["device_name"],
                            "run_id": ident["run_id"]}, columns=BUSY_COLUMNS)
    return out


def kernel_gaps(trace: pd.DataFrame, *, min_gap_us: float = 0.0) -> pd.DataFrame:
    """Every idle gap (launch bubble) inside a workload's busy span.

    Parameters
    ----------
    trace : pandas.DataFrame
    min_gap_us : float, default 0
        Leave out gaps shorter than this.

    Returns
    -------
    pandas.DataFrame
        One row per gap: the (layout, mode, rep, workload) keys, ``partition``,
        ``gap_start_ms``, ``gap_end_ms``, ``gap_us``, ``before`` (the kernel whose end
        opened it), ``after`` (the kernel whose start closed it), ``device_name``,
        ``run_id``.
    """
    _require_trace(trace, "kernel_gaps")
    with without_attrs(trace):
        return _gaps(trace, min_gap_us)


def _gaps(trace: pd.DataFrame, min_gap_us: float) -> pd.DataFrame:
    u = _Union(trace)
    k = u.holes()
    gap_us = (u.seg_start[k + 1] - u.seg_end[k]) * 1e3
    k = k[gap_us >= min_gap_us]
    if len(k) == 0:
        return pd.DataFrame(columns=GAP_COLUMNS)
    rows = u.first_row[u.seg_group[k]]
    ident = _first_values(trace, rows)
    names = trace["name"].astype(str).to_numpy()
    return pd.DataFrame({**{c: ident[c] for c in KEYS}, "partition": trace["partition"].astype(str).to_numpy()[rows],
                         "gap_start_ms": u.seg_end[k], "gap_end_ms": u.seg_start[k + 1],
                         "gap_us": (u.seg_start[k + 1] - u.seg_end[k]) * 1e3, "before": names[u.seg_last[k]],
                         "after": names[u.seg_first[k + 1]], "device_name": ident["device_name"],
                         "run_id": ident["run_id"]}, columns=GAP_COLUMNS)


def trace_rates(df: pd.DataFrame, trace: pd.DataFrame, *, where: str = "trace_rates") -> pd.DataFrame:
    """An overlap result's rows with their rates taken from the trace's GPU-busy time.

    Returns ``df``'s rows that the trace covers (same layout, mode, rep, workload),
    with ``event_ms`` (the event span, formerly ``duration_ms``), ``duration_ms``
    replaced by the GPU-busy time, ``busy_span_ms``, ``first_start_ms``, ``wait_ms``
    (first kernel start minus the start event), ``idle_ms``, ``gaps``, and
    ``throughput_tflops`` / ``bandwidth_gbs`` recomputed from the GPU-busy time.
    Rows without kernels in the trace are left out.
    """
    require_trace_of(df, trace, where, layouts=False)
    busy = busy_time(trace)
    cols = ["busy_span_ms", "gpu_busy_ms", "first_start_ms", "idle_ms", "gaps", "kernels"]
    on = [*KEYS, "run_id"] if "run_id" in df.columns and "run_id" in busy.columns else KEYS
    merged = df.merge(busy[[*on, *cols]], on=on, how="inner", validate="one_to_one")
    merged = merged.rename(columns={"duration_ms": "event_ms"})
    merged["duration_ms"] = merged["gpu_busy_ms"]
    merged["wait_ms"] = merged["first_start_ms"] - merged["start_ms"]
    secs = merged["gpu_busy_ms"].where(merged["gpu_busy_ms"] > 0) * 1e-3
    merged["throughput_tflops"] = merged["flops"] / secs / 1e12
    merged["bandwidth_gbs"] = merged["bytes"] / secs / 1e9
    merged.attrs.update(df.attrs)
    merged.attrs["rate_basis"] = "GPU-busy time from CUPTI kernel records"
    return merged


#: Per (layout, mode, workload) medians :func:`trace_summary` adds to a summary.
TRACE_SUMMARY_COLUMNS = ["event_median_ms", "busy_span_median_ms", "gpu_busy_median_ms", "wait_median_ms",
                         "idle_median_ms", "kernels_per_rep", "throughput_tflops", "bandwidth_gbs"]


def _median(values) -> float:
    return stats(values)["median_ms"]


def trace_summary(df: pd.DataFrame, trace: pd.DataFrame, *, where: str = "trace_summary") -> pd.DataFrame:
    """Per (layout, mode, workload): medians over repetitions of the traced numbers.

    Columns ``layout``, ``mode``, ``workload``, ``reps_traced``, ``event_median_ms``
    (event span), ``busy_span_median_ms``, ``gpu_busy_median_ms``, ``wait_median_ms``,
    ``idle_median_ms``, ``kernels_per_rep``, ``throughput_tflops`` and
    ``bandwidth_gbs`` (medians of the per-repetition rates from GPU-busy time).
    """
    r = trace_rates(df, trace, where=where)
    rows = []
    for (layout, mode, workload), g in r.groupby(["layout", "mode", "workload"], sort=False):
        rows.append({"layout": layout, "mode": mode, "workload": workload, "reps_traced": len(g),
                     "event_median_ms": _median(g["event_ms"]), "busy_span_median_ms": _median(g["busy_span_ms"]),
                     "gpu_busy_median_ms": _median(g["gpu_busy_ms"]), "wait_median_ms": _median(g["wait_ms"]),
                     "idle_median_ms": _median(g["idle_ms"]), "kernels_per_rep": _median(g["kernels"]),
                     "throughput_tflops": _median(g["throughput_tflops"]),
                     "bandwidth_gbs": _median(g["bandwidth_gbs"])})
    return pd.DataFrame(rows, columns=["layout", "mode", "workload", "reps_traced", *TRACE_SUMMARY_COLUMNS])


def tpc_map(trace: pd.DataFrame) -> pd.DataFrame:
    """Which logical TPCs each green context held, from the trace's green-context records.

    A record without a partition name (a green context a :func:`gcexplore.kernel_trace` block's
    kernels ran in, under a CUPTI id no partition given to the trace had) is named after the one
    partition given with its SM count that has no mask of its own, else ``"context <id>"``.

    Returns
    -------
    pandas.DataFrame
        One row per (context, TPC): ``layout``, ``partition``, ``context_id``,
        ``sm_count``, ``num_tpcs``, ``tpc`` (logical TPC index: bit ``i`` of word ``w``
        of ``logical_tpc_mask`` is TPC ``bits * w + i``, ``bits`` the record's
        ``mask_word_bits``, 64 by default). Contexts without a mask (no
        GREEN_CONTEXT record) are left out, except the partitions of a
        :func:`gcexplore.kernel_trace`, whose TPCs come from their ``%smid`` probe
        (``attrs["partition_tpcs"]``); ``attrs["tpc_source"]`` says which source each
        partition's rows come from.

    Raises
    ------
    ResultError
        The trace was taken with a CUPTI that has no GREEN_CONTEXT records: the
        sentence recorded in ``attrs["cupti_refused"]`` (which CUPTI adds them, how to get it).
    """
    probed = trace.attrs.get("partition_tpcs") or {}
    refused = (trace.attrs.get("cupti_refused") or {}).get("tpc_map")
    if refused and not probed:
        raise ResultError(refused)
    greens = list(trace.attrs.get("green_contexts", []) or [])
    rows = []
    for g in greens:
        words, width = g.get("logical_tpc_mask") or [], int(g.get("mask_word_bits", 64) or 64)
        name = g.get("partition") or _context_name(g, greens)
        for w, word in enumerate(words):
            bits = int(word, 16) if isinstance(word, str) else int(word)
            rows.extend({"layout": g.get("layout", ""), "partition": name,
                         "context_id": int(g.get("context_id", 0)), "sm_count": int(g.get("sm_count", 0)),
                         "num_tpcs": int(g.get("num_tpcs", 0) or 0), "tpc": width * w + i}
                        for i in range(width) if bits >> i & 1)
    source = {r["partition"]: "CUPTI green-context record" for r in rows}
    layout = str(trace["layout"].iloc[0]) if "layout" in trace.columns and len(trace) else ""
    for name, p in probed.items():  # a user trace's partitions, made before CUPTI recorded
        if name in source:
            continue
        ctx = next((int(g.get("context_id", -1)) for g in greens if g.get("partition") == name), -1)
        rows.extend({"layout": layout, "partition": name, "context_id": ctx, "sm_count": int(p["sm_count"]),
                     "num_tpcs": len(p["tpcs"]), "tpc": int(t)} for t in p["tpcs"])
        source[name] = p.get("source", "%smid probe")
    out = pd.DataFrame(rows, columns=["layout", "partition", "context_id", "sm_count", "num_tpcs", "tpc"])
    out.attrs["tpc_source"] = source
    return out


def _context_name(record: dict, greens: list[dict]) -> str:
    """The partition of an unnamed green-context record: the one partition given to the trace
    with its SM count and no mask of its own, else ``"context <id>"``."""
    sms = int(record.get("num_multiprocessors") or record.get("sm_count") or 0)
    given = {g["partition"] for g in greens if g.get("partition") and not g.get("logical_tpc_mask")
             and int(g.get("sm_count") or 0) == sms}
    return given.pop() if len(given) == 1 else f"context {int(record.get('context_id', 0))}"


# Measured on the H100 (bench/trace_truth.py): a kernel's CUPTI start can come before its
# first block runs while the other workload's blocks hold the SMs, so on plain streams the
# CUPTI span still holds part of the wait.
_CONTENDED = {"streams": "; on plain streams a kernel's CUPTI start can precede its first block while "
                         "the other workload holds the SMs, so these rates are lower bounds"}


def with_trace(summary: pd.DataFrame, df: pd.DataFrame, trace: pd.DataFrame) -> pd.DataFrame:
    """An overlap summary with rates from GPU-busy time and the traced medians added.

    Rows the trace does not cover keep their event-based rates (NaN on plain
    streams); ``attrs["rate_notes"]`` names the modes whose rates came from the trace.
    """
    t = trace_summary(df, trace, where="summarize(trace=...)")
    out = summary.drop(columns=[c for c in TRACE_SUMMARY_COLUMNS if c in summary.columns
                                and c not in ("throughput_tflops", "bandwidth_gbs")])
    out = out.merge(t, on=["layout", "mode", "workload"], how="left", suffixes=("_events", ""))
    for col in ("throughput_tflops", "bandwidth_gbs"):
        out[col] = out[col].where(out["reps_traced"].notna(), out.pop(f"{col}_events"))
    out.attrs.update(summary.attrs)
    traced_modes = sorted(set(t["mode"]))
    out.attrs["rate_notes"] = {m: "rates from GPU-busy time (CUPTI kernel records)" + _CONTENDED.get(m, "")
                               for m in traced_modes}
    return out


def attribution(df: pd.DataFrame, trace: pd.DataFrame) -> pd.DataFrame:
    """Per mode and workload of a traced run: its kernels, the percentage that ran in the partition the
    run placed the workload on (``right_pct``), that partition and its SM count, and the SM count CUPTI's
    own context record gives for it (``cupti_sm_count``; None where CUPTI recorded no context)."""
    placed = {(r.layout, r.mode, r.workload): (r.partition, int(cast(int, r.sm_count))) for r in df.itertuples()}
    records = {g["partition"]: g.get("num_multiprocessors") for g in trace.attrs.get("green_contexts", [])
               if g.get("source") in ("CONTEXT", "GREEN_CONTEXT")}  # CUPTI's, not gcexplore's own count
    rows = []
    for (mode, workload), g in trace.groupby(["mode", "workload"], sort=True):
        want = {placed[(r.layout, r.mode, r.workload)] for r in g.itertuples()}
        right = [(r.partition, int(cast(int, r.sm_count))) in want for r in g.itertuples()]
        part = g["partition"].iloc[0]
        rows.append({"mode": mode, "workload": workload, "kernels": len(g), "right_pct": 100.0 * sum(right) / len(g),
                     "partition": part, "sm_count": int(g["sm_count"].iloc[0]),
                     "cupti_sm_count": records.get(part)})
    return pd.DataFrame(rows)
