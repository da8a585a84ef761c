"""Communication-SMs numbers (kind ``"comm"``): bus bandwidth, each split's step and its parts, the
fewest communication SMs within a tolerance of the best step, the fewest that reach a share of the
peak bus bandwidth, and where the NCCL kernels ran.

Steps are taken across ranks first (:func:`comm_steps`): a collective finishes on no rank before the
slowest has joined, so a step lasts as long as its slowest rank (max over ranks of each step), and a
workload's time is its slowest rank's.

The decomposition of a split's overlapped step (all medians over steps, in ms)::

    step = compute_whole + split_loss + interference + exposed_comm
    split_loss   = compute alone on the compute partition - compute alone on the whole GPU
    interference = compute beside the collective - compute alone on the compute partition
    exposed_comm = step - compute beside the collective (the collective's time not hidden)

``comm_split_loss_ms`` (the collective alone on its partition minus alone on the whole GPU with
NCCL's own CTA count) and ``comm_slowdown_ms`` (beside the compute minus alone) say why the
collective takes what it takes.
"""

from __future__ import annotations

import math
from typing import Any, cast

import pandas as pd

from ..results.validate import check_positive, check_result, require_columns

__all__ = ["bandwidth_table", "bus_factor", "comm_answer", "comm_dram", "comm_steps", "comm_table", "nccl_attribution",
           "pm_step_dram", "zero_sm_table"]

_LAYOUT = ["setup", "layout", "comm_sm_count", "compute_sm_count", "max_ctas"]
_KEY = ["nranks", *_LAYOUT, "collective", "size_bytes", "mode", "rep", "workload"]


def bus_factor(collective: str, nranks: int) -> float:
    """nccl-tests' bus-bandwidth factor: 2(n-1)/n for all-reduce, (n-1)/n for the others."""
    n = int(nranks)
    if n < 2:
        raise ValueError(f"bus bandwidth needs 2 or more ranks, got {nranks}")
    return (2.0 if collective == "allreduce" else 1.0) * (n - 1) / n


def bus_bw_gbs(collective: str, nranks: int, size_bytes: float, ms: float) -> float:
    """Bus bandwidth in GB/s (1e9 bytes) of one collective of ``size_bytes`` taking ``ms``."""
    if not (ms > 0 and math.isfinite(ms)):
        return math.nan
    return float(size_bytes) / (ms * 1e-3) / 1e9 * bus_factor(collective, nranks)


def comm_steps(df: pd.DataFrame) -> pd.DataFrame:
    """One row per step and workload across ranks: the slowest rank's ``duration_ms`` and ``step_ms``."""
    check_result(df, "comm", "comm_steps")
    require_columns(df, [*_KEY, "duration_ms", "step_ms"], "comm_steps")
    keys = [*_KEY, "run_id"] if "run_id" in df.columns else _KEY
    out = (df.groupby(keys, dropna=False, sort=True)
           .agg(duration_ms=("duration_ms", "max"), step_ms=("step_ms", "max"), ranks=("rank", "nunique"))
           .reset_index())
    out.attrs.update(df.attrs)
    return out


def _median(s: pd.Series) -> float:
    s = s.dropna()
    return float(s.median()) if len(s) else math.nan


def comm_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per collective, size and layout: medians of each part, bus bandwidth and the decomposition.

    Columns: ``collective``, ``size_bytes``, ``nranks``, the layout columns (``setup``, ``layout``,
    ``comm_sm_count``, ``compute_sm_count``, ``max_ctas``), ``comm_alone_ms``, ``comm_ms`` (beside
    the compute), ``compute_alone_ms``, ``compute_ms``, ``step_ms``, ``step_q25_ms``,
    ``step_q75_ms``, ``steps``, ``bus_bw_alone_gbs``, ``bus_bw_gbs``, ``compute_whole_ms``,
    ``split_loss_ms``, ``interference_ms``, ``exposed_comm_ms``, ``comm_whole_ms``,
    ``comm_split_loss_ms``, ``comm_slowdown_ms``.

    Computed once per unchanged frame (the run's memo: a copy or an in-place edit computes afresh);
    each call returns its own copy.
    """
    from ..results.run import run_of

    return run_of(df).memo("comm_table", lambda: _comm_table(df)).copy()


def _comm_table(df: pd.DataFrame) -> pd.DataFrame:
    s = comm_steps(df)
    s.attrs = {}  # every slice below would deep-copy the run's attrs: they are set once, at the end
    s["max_ctas"] = s["max_ctas"].fillna(0).astype("int64")  # 0: NCCL's own count (NaN keys never match)
    compute = s[(s["workload"] == "compute") & (s["mode"] == "alone")]
    alone_c = compute.groupby(_LAYOUT, dropna=False)["duration_ms"].median().rename("compute_alone_ms")
    compute_whole = _median(compute[compute["setup"] == "plain"]["duration_ms"])
    comm = s[s["collective"] != ""]
    over, is_comm = comm["mode"] == "overlapped", comm["workload"] == "comm"
    # one grouping for every part (a per-group loop of slices took most of the time): each part's rows keep
    # their value, the others NaN, and the aggregations skip NaN as the medians of each part's rows did
    parts = pd.DataFrame({"comm_alone_ms": comm["duration_ms"].where((comm["mode"] == "alone") & is_comm),
                          "comm_ms": comm["duration_ms"].where(over & is_comm),
                          "compute_ms": comm["duration_ms"].where(over & (comm["workload"] == "compute")),
                          "step_ms": comm["step_ms"].where(over & is_comm), "steps": (over & is_comm).astype(int)})
    g = pd.concat([comm[["collective", "size_bytes", "nranks", *_LAYOUT]], parts], axis=1).groupby(
        ["collective", "size_bytes", "nranks", *_LAYOUT], dropna=False, sort=True)
    t = g.agg(comm_alone_ms=("comm_alone_ms", "median"), comm_ms=("comm_ms", "median"),
              compute_ms=("compute_ms", "median"), step_ms=("step_ms", "median"), steps=("steps", "sum")).reset_index()
    t["step_q25_ms"], t["step_q75_ms"] = (g["step_ms"].quantile(p).to_numpy() for p in (0.25, 0.75))
    t = t.merge(alone_c.reset_index(), on=_LAYOUT, how="left")
    t["size_bytes"], t["nranks"], t["steps"] = (t[c].astype("int64") for c in ("size_bytes", "nranks", "steps"))
    t = t[["collective", "size_bytes", "nranks", *_LAYOUT, "comm_alone_ms", "comm_ms", "compute_alone_ms",
           "compute_ms", "step_ms", "step_q25_ms", "step_q75_ms", "steps"]]
    if t.empty:
        raise ValueError("comm_table: the result has no collective rows (only compute): nothing to tabulate")
    rows_t = cast("list[Any]", list(t.itertuples()))  # pandas-stubs types each field as any scalar
    t["bus_bw_alone_gbs"] = [bus_bw_gbs(r.collective, r.nranks, r.size_bytes, r.comm_alone_ms) for r in rows_t]
    t["bus_bw_gbs"] = [bus_bw_gbs(r.collective, r.nranks, r.size_bytes, r.comm_ms) for r in rows_t]
    t["compute_whole_ms"] = compute_whole
    t["split_loss_ms"] = t["compute_alone_ms"] - compute_whole
    t["interference_ms"] = t["compute_ms"] - t["compute_alone_ms"]
    t["exposed_comm_ms"] = t["step_ms"] - t["compute_ms"]
    whole = t[t["setup"] == "plain"].set_index(["collective", "size_bytes"])["comm_alone_ms"]
    t["comm_whole_ms"] = [float(whole.get((r.collective, r.size_bytes), math.nan)) for r in t.itertuples()]
    t["comm_split_loss_ms"] = t["comm_alone_ms"] - t["comm_whole_ms"]
    t["comm_slowdown_ms"] = t["comm_ms"] - t["comm_alone_ms"]
    t["max_ctas"] = pd.array([None if v == 0 else int(v) for v in t["max_ctas"]], dtype="Int64")
    t.attrs.update(df.attrs)
    t.attrs["summary_of"] = "comm"
    return t


def _best_rows(t: pd.DataFrame, setup: str) -> pd.DataFrame:
    return t[t["setup"] == setup]


def comm_answer(df: pd.DataFrame, tolerance: float = 0.01) -> pd.DataFrame:
    """Per collective and size: the fewest communication SMs whose step is within ``tolerance`` of
    the best split's (all splits measured: the exhaustive answer), against the whole-GPU baselines.

    Columns: ``collective``, ``size_bytes``, ``nranks``, ``answer_sm_count``, ``answer_step_ms``,
    ``best_sm_count``, ``best_step_ms``, ``splits``, ``plain_step_ms``, ``best_ctas``,
    ``ctas_step_ms``, ``speedup_vs_plain`` (plain step / answer step). Computed once per unchanged
    frame and tolerance, as :func:`comm_table`.
    """
    from ..results.run import run_of

    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance is a fraction in [0, 1), got {tolerance!r}")
    return run_of(df).memo(("comm_answer", float(tolerance)), lambda: _comm_answer(df, tolerance)).copy()


def _comm_answer(df: pd.DataFrame, tolerance: float) -> pd.DataFrame:
    t = df if df.attrs.get("summary_of") == "comm" else comm_table(df)
    attrs, t = t.attrs, t.copy(deep=False)
    t.attrs = {}  # as in _comm_table: the slices below copy no attrs
    rows = []
    for (coll, size, n), g in t.groupby(["collective", "size_bytes", "nranks"], sort=True):
        part = _best_rows(g, "partition").dropna(subset=["step_ms"]).sort_values("comm_sm_count")
        if part.empty:
            continue
        best = part.loc[part["step_ms"].idxmin()]
        ok = part[part["step_ms"] <= best["step_ms"] * (1.0 + tolerance)]
        ans = ok.iloc[0]
        plain = _best_rows(g, "plain")["step_ms"]
        ctas = _best_rows(g, "ctas").dropna(subset=["step_ms"])
        cbest = ctas.loc[ctas["step_ms"].idxmin()] if len(ctas) else None
        plain_ms = float(plain.iloc[0]) if len(plain) else math.nan
        rows.append({"collective": coll, "size_bytes": int(cast(int, size)), "nranks": int(cast(int, n)),
                     "answer_sm_count": int(ans["comm_sm_count"]), "answer_step_ms": float(ans["step_ms"]),
                     "best_sm_count": int(best["comm_sm_count"]), "best_step_ms": float(best["step_ms"]),
                     "splits": int(len(part)), "plain_step_ms": plain_ms,
                     "best_ctas": math.nan if cbest is None else int(cbest["max_ctas"]),
                     "ctas_step_ms": math.nan if cbest is None else float(cbest["step_ms"]),
                     "speedup_vs_plain": plain_ms / float(ans["step_ms"])})
    out = pd.DataFrame(rows)
    out.attrs.update({k: v for k, v in attrs.items() if k != "summary_of"})
    out.attrs["tolerance"] = tolerance
    return out


def bandwidth_table(df: pd.DataFrame, share: float = 0.95) -> pd.DataFrame:
    """Per collective and size: the fewest partition SMs (and NCCL CTAs) whose collective alone
    reaches ``share`` of the peak bus bandwidth measured (any setup).

    Columns: ``collective``, ``size_bytes``, ``nranks``, ``peak_bus_bw_gbs``, ``peak_setup``,
    ``min_sm_count`` (NaN: no partition measured reached it), ``bus_bw_at_min_gbs``,
    ``min_ctas`` (NaN likewise), ``plain_bus_bw_gbs``.
    """
    if not 0 < share <= 1:
        raise ValueError(f"share is a fraction in (0, 1], got {share!r}")
    t = df if df.attrs.get("summary_of") == "comm" else comm_table(df)
    rows = []
    for (coll, size, n), g in t.groupby(["collective", "size_bytes", "nranks"], sort=True):
        g = g.dropna(subset=["bus_bw_alone_gbs"])
        if g.empty:
            continue
        top = g.loc[g["bus_bw_alone_gbs"].idxmax()]
        need = share * float(top["bus_bw_alone_gbs"])
        part = g[(g["setup"] == "partition") & (g["bus_bw_alone_gbs"] >= need)].sort_values("comm_sm_count")
        ctas = g[(g["setup"] == "ctas") & (g["bus_bw_alone_gbs"] >= need)].sort_values("max_ctas")
        plain = g[g["setup"] == "plain"]["bus_bw_alone_gbs"]
        rows.append({"collective": coll, "size_bytes": int(cast(int, size)), "nranks": int(cast(int, n)),
                     "peak_bus_bw_gbs": float(top["bus_bw_alone_gbs"]), "peak_setup": str(top["layout"]),
                     "min_sm_count": float(part["comm_sm_count"].iloc[0]) if len(part) else math.nan,
                     "bus_bw_at_min_gbs": float(part["bus_bw_alone_gbs"].iloc[0]) if len(part) else math.nan,
                     "min_ctas": float(ctas["max_ctas"].iloc[0]) if len(ctas) else math.nan,
                     "plain_bus_bw_gbs": float(plain.iloc[0]) if len(plain) else math.nan})
    out = pd.DataFrame(rows)
    out.attrs["share"] = share
    return out


def nccl_attribution(trace: pd.DataFrame, comm_partition: str = "p0") -> pd.DataFrame:
    """Where the NCCL kernels of the traced steps ran, per rank and layout.

    ``trace``: kernel traces of the traced steps (no barrier there, so every NCCL kernel is a
    collective launched on the comm partition's stream; a ``rank`` column where several ranks are
    joined). Columns: ``rank``, ``layout``, ``nccl_kernels``, ``on_comm_partition``, ``share``,
    ``partitions`` (where they ran), ``sm_count`` (of the comm partition, from the trace),
    ``kernel_names`` (distinct NCCL kernel names), ``other_on_comm`` (kernels of the compute found on
    the comm partition, gcexplore's own settling spins aside: 0 when the split held).
    """
    require_columns(trace, ["partition", "name", "layout", "sm_count"], "nccl_attribution")
    t = trace.assign(rank=trace["rank"] if "rank" in trace.columns else 0)
    if "activity" in t.columns:
        t = t[t["activity"] == "kernel"]  # memcpy / memset rows have no SMs to be attributed to
    is_nccl = t["name"].astype(str).str.contains("nccl", case=False)
    ours = t["name"].astype(str).str.startswith("gcx_")
    rows = []
    for (rank, layout), g in t.groupby(["rank", "layout"], sort=True):
        nc = g[is_nccl.loc[g.index]]
        on = nc[nc["partition"] == comm_partition]
        other = g[~is_nccl.loc[g.index] & ~ours.loc[g.index] & (g["partition"] == comm_partition)]
        rows.append({"rank": int(rank), "layout": layout, "nccl_kernels": int(len(nc)),
                     "on_comm_partition": int(len(on)), "share": len(on) / len(nc) if len(nc) else math.nan,
                     "partitions": ",".join(sorted(nc["partition"].astype(str).unique())),
                     "sm_count": int(on["sm_count"].iloc[0]) if len(on) else 0,
                     "kernel_names": len(set(nc["name"])), "other_on_comm": int(len(other))})
    return pd.DataFrame(rows, columns=["rank", "layout", "nccl_kernels", "on_comm_partition", "share",
                                       "partitions", "sm_count", "kernel_names", "other_on_comm"])


#: PM metric -> (column, scale) of :func:`pm_step_dram` (the metric sets of gcexplore.experiments.pm)
_PM_COLUMNS = {"dram__throughput.avg.pct_of_peak_sustained_elapsed": ("dram_pct", 1.0),
               "dram__bytes_read.sum.per_second": ("dram_read_gbs", 1e-9),
               "dram__bytes_write.sum.per_second": ("dram_write_gbs", 1e-9),
               "lts__t_bytes.sum.per_second": ("l2_gbs", 1e-9)}
PM_TAG = "{collective}|{size_bytes}|{mode}|{step}|{workload}"  # the trace region of a sampled step's launch


def pm_step_dram(trace: pd.DataFrame, starts, ends, values, metrics) -> list[dict]:
    """PM samples (absolute ns on CUPTI's clock) averaged over each sampled step.

    ``trace``: the kernel trace taken with the samples, its kernels in regions named by :data:`PM_TAG`
    and its times from ``attrs["origin_ns"]``. A step spans its first record's start to its last
    record's end (kernels and copies; the gate and barrier before it are not in a region); a sample is
    in it when its midpoint is. One dict per step: ``collective``, ``size_bytes``, ``mode``, ``step``, ``window_ms``,
    ``samples``, ``dram_pct`` (mean), ``dram_pct_max``, ``dram_read_gbs``, ``dram_write_gbs``, ``l2_gbs``
    (the L2's bytes per second; NaN for a metric not sampled or a step with no sample).
    """
    import numpy as np

    require_columns(trace, ["workload", "start_ms", "end_ms"], "pm_step_dram")
    origin = int(trace.attrs.get("origin_ns") or 0)
    if not origin:
        raise ValueError("pm_step_dram: the trace has no attrs['origin_ns'] (its first kernel's CUPTI time), "
                         "so the samples cannot be placed")
    starts, ends = np.asarray(starts, dtype=float), np.asarray(ends, dtype=float)
    values = np.asarray(values, dtype=float).reshape(len(starts), len(metrics))
    mid = (starts + ends) / 2
    cols = {_PM_COLUMNS[m][0]: values[:, i] * _PM_COLUMNS[m][1] for i, m in enumerate(metrics) if m in _PM_COLUMNS}
    t = trace  # kernels and copies: a copy-engine collective launches no kernel
    parts = t["workload"].astype(str).str.split("|", expand=True)
    if parts.shape[1] != 5:
        return []
    t = t.assign(collective=parts[0], size_bytes=pd.to_numeric(parts[1], errors="coerce"), mode=parts[2],
                 step=pd.to_numeric(parts[3], errors="coerce")).dropna(subset=["size_bytes", "step"])
    rows = []
    for (coll, size, mode, step), g in t.groupby(["collective", "size_bytes", "mode", "step"], sort=True):
        lo, hi = origin + float(g["start_ms"].min()) * 1e6, origin + float(g["end_ms"].max()) * 1e6
        inside = (mid >= lo) & (mid <= hi)
        n = int(inside.sum())
        row = {"collective": coll, "size_bytes": int(size), "mode": mode, "step": int(step),
               "window_ms": (hi - lo) / 1e6, "samples": n}
        for name in ("dram_pct", "dram_read_gbs", "dram_write_gbs", "l2_gbs"):
            row[name] = float(cols[name][inside].mean()) if name in cols and n else math.nan
        row["dram_pct_max"] = float(cols["dram_pct"][inside].max()) if "dram_pct" in cols and n else math.nan
        rows.append(row)
    return rows


def comm_dram(df: pd.DataFrame) -> pd.DataFrame:
    """DRAM use of each sampled split beside the interference it may explain (``attrs["pm"]`` of a
    ``CommSpec(pm=True)`` run).

    Per collective, size and split (the busiest rank's card: max over ranks of each median over
    steps): ``dram_compute_pct`` (the compute alone on its partition), ``dram_comm_pct`` (the
    collective alone), ``dram_both_pct`` and ``dram_both_max_pct`` (overlapped: the steps' mean and
    highest sample), ``dram_read_gbs`` / ``dram_write_gbs`` overlapped, the L2's GB/s
    ``l2_compute_gbs``, ``l2_comm_gbs``, ``l2_both_gbs`` (NaN unless sampled: ``pm_metrics="dram_l2"``),
    ``samples`` (over every overlapped step and rank), with ``interference_ms`` and ``comm_slowdown_ms`` from
    :func:`comm_table`. Counters are device-wide, in % of the card's peak DRAM throughput: an
    overlapped step far from 100% had DRAM bandwidth to spare, so its interference is not DRAM
    bandwidth. A copy-engine collective alone is placed by its copy records, which may cover only
    part of it (one record per step was seen, 20 to 30% of the collective).
    """
    pm = pd.DataFrame(df.attrs.get("pm") or [])
    if pm.empty:
        raise ValueError("comm_dram: the result has no PM samples (attrs['pm']); measure with CommSpec(pm=True) "
                         "(bench/comm.py --pm), which needs cupti-python 13.4 with its CUPTI")
    key = ["rank", "layout", "comm_sm_count"]
    if "l2_gbs" not in pm.columns:  # sampled without the L2 (pm_metrics "dram_bytes", or before it existed)
        pm = pm.assign(l2_gbs=math.nan)
    med = pm.groupby([*key, "collective", "size_bytes", "mode"], sort=True).agg(
        dram_pct=("dram_pct", "median"), dram_pct_max=("dram_pct_max", "max"), read=("dram_read_gbs", "median"),
        write=("dram_write_gbs", "median"), l2=("l2_gbs", "median"), samples=("samples", "sum")).reset_index()
    compute = med[med["collective"] == ""].set_index(key)

    def busiest(col: str, ranks, layout, k) -> float:
        return max((float(compute[col].get((r, layout, k), math.nan)) for r in ranks), default=math.nan)

    rows = []
    for (coll, size, layout, k), g in med[med["collective"] != ""].groupby(
            ["collective", "size_bytes", "layout", "comm_sm_count"], sort=True):
        alone, both = g[g["mode"] == "alone"], g[g["mode"] == "overlapped"]
        ranks = g["rank"].unique()
        rows.append({"collective": coll, "size_bytes": int(size), "layout": layout, "comm_sm_count": int(k),
                     "dram_compute_pct": busiest("dram_pct", ranks, layout, k),
                     "dram_comm_pct": float(alone["dram_pct"].max()), "dram_both_pct": float(both["dram_pct"].max()),
                     "dram_both_max_pct": float(both["dram_pct_max"].max()),
                     "dram_read_gbs": float(both["read"].max()), "dram_write_gbs": float(both["write"].max()),
                     "l2_compute_gbs": busiest("l2", ranks, layout, k), "l2_comm_gbs": float(alone["l2"].max()),
                     "l2_both_gbs": float(both["l2"].max()), "samples": int(both["samples"].sum())})
    out = pd.DataFrame(rows)
    t = comm_table(df)[["collective", "size_bytes", "layout", "interference_ms", "comm_slowdown_ms"]]
    out = out.merge(t, on=["collective", "size_bytes", "layout"], how="left")
    out.attrs.update({k: v for k, v in df.attrs.items() if k != "pm"})
    return out


def zero_sm_table(df: pd.DataFrame, confidence: float = 0.9) -> pd.DataFrame:
    """What zero-SM collectives (setup ``"zero"``: NCCL's copy engines) cost the compute beside them.

    Per collective and size: ``comm_alone_ms``, ``bus_bw_alone_gbs``, ``compute_alone_ms`` (the whole
    GPU, no collective), ``compute_ms`` (beside the collective), ``compute_slowdown`` (compute_ms /
    compute_alone_ms - 1) with ``slowdown_low`` / ``slowdown_high`` (from the medians' ``confidence``
    intervals, order statistics of the slowest rank's steps), ``step_ms``, and the plain-streams
    step and compute beside NCCL's own kernels (``plain_step_ms``, ``plain_compute_ms``).
    """
    from ..analysis.stats import quantile_ci

    s = comm_steps(df)
    zero = s[s["setup"] == "zero"]
    if zero.empty:
        raise ValueError("zero_sm_table: the result has no zero-SM rows (setup 'zero'); measure with "
                         "CommSpec(zero_sm=True) (bench/comm.py --zero-sm), which needs NCCL 2.28.3+")
    alone = zero[(zero["collective"] == "") & (zero["workload"] == "compute")]["duration_ms"]
    a_lo, a_hi = quantile_ci(alone, 0.5, confidence)
    t = comm_table(df)
    plain = t[t["setup"] == "plain"].set_index(["collective", "size_bytes"])
    rows = []
    for r in t[t["setup"] == "zero"].itertuples():
        g = zero[(zero["collective"] == r.collective) & (zero["size_bytes"] == r.size_bytes)
                 & (zero["mode"] == "overlapped") & (zero["workload"] == "compute")]["duration_ms"]
        lo, hi = quantile_ci(g, 0.5, confidence)
        p = plain.loc[(r.collective, r.size_bytes)] if (r.collective, r.size_bytes) in plain.index else None
        rows.append({"collective": r.collective, "size_bytes": int(r.size_bytes), "comm_alone_ms": r.comm_alone_ms,
                     "bus_bw_alone_gbs": r.bus_bw_alone_gbs, "compute_alone_ms": r.compute_alone_ms,
                     "compute_ms": r.compute_ms, "compute_slowdown": r.compute_ms / r.compute_alone_ms - 1.0,
                     "slowdown_low": lo / a_hi - 1.0, "slowdown_high": hi / a_lo - 1.0, "step_ms": r.step_ms,
                     "plain_step_ms": math.nan if p is None else float(p["step_ms"]),
                     "plain_compute_ms": math.nan if p is None else float(p["compute_ms"])})
    out = pd.DataFrame(rows)
    out.attrs.update({k: v for k, v in df.attrs.items() if k != "pm"})
    out.attrs["confidence"] = confidence
    return out


def check_comm_rows(df: pd.DataFrame, where: str) -> None:
    """ResultError unless every duration and step time is a finite positive number (the comm kind's check)."""
    check_positive(df, "duration_ms", where)
    check_positive(df, "step_ms", where)
