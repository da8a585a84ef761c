"""Partition fit: how many waves each kernel runs on its partition, and the SM counts that buy nothing.
(The module is ``waves`` so that ``gcexplore.analysis.partition_fit`` stays the function. Over 500 lines
as the one owner of the fit's numbers: per kernel, per launch, plateaus, and the sentences from them.)

Part of the analysis layer (pure pandas, no GPU). Kernels pick their grids from the card, not
from the partition they run in: cuBLAS's persistent ``nvjet`` GEMMs launch 2 x 66 = 132 CTAs on an
H200 whatever partition they run on, so on 120 SMs they run two waves, the second 10% full, and
4096^3 takes as long on 96 SMs as on 120 (persistent CTAs loop over the tiles: the waves set that
plateau, not the time). Two questions, two functions:

- :func:`partition_fit` (a kernel trace): per kernel and partition its CTAs, the CTAs the
  partition holds at once (the per-SM residency of
  :func:`gcexplore.occupancy_estimate.blocks_per_sm` times the partition's SMs, whole clusters
  only, checked against CUPTI's ``max_active_clusters`` for the card), its waves, the tail
  wave's fill, the share of the partition's CTA slots left empty, the fewest SMs that give the
  same waves, and whether the grid was sized for the card rather than the partition;
- :func:`fit_table` (a scaling run, optionally with its trace): the sizes on a plateau (not
  faster than the plateau's first size beyond their combined interval, from
  :func:`gcexplore.analysis.stats.round_median_ci`), the smallest size that reaches each
  plateau, the SMs each larger size wastes, and :func:`fit_hints`, sentences computed from it.

:func:`fit_notes` is what :func:`gcexplore.summarize` adds (``attrs["fit_notes"]``) to a traced
result: the kernels that waste their partition's SMs and what that costs at the chosen split.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..schema import identity_name
from ..results.io import bare
from .occupancy_estimate import blocks_per_sm, limits_for, resident_blocks
from .stats import nanmedian, round_median_ci, run_floor

__all__ = [
    "FIT_COLUMNS",
    "FIT_TABLE_COLUMNS",
    "LAUNCH_WAVE_COLUMNS",
    "fit_hints",
    "fit_notes",
    "fit_table",
    "launch_waves",
    "partition_fit",
]

FIT_COLUMNS = [
    "workload",
    "name",
    "partition",
    "sm_count",
    "card_sm_count",
    "launches",
    "ctas",
    "threads_per_block",
    "cluster_size",
    "blocks_per_sm",
    "limited_by",
    "resident_ctas",
    "card_resident_ctas",
    "cupti_card_ctas",
    "cupti_agrees",
    "waves",
    "tail_fill",
    "idle_sm_share",
    "same_waves_sm",
    "wasted_sms",
    "multi_wave",
    "sized_for_card",
    "persistent",
    "duration_ms",
    "idle_ms",
    "reason",
    "device_name",
    "run_id",
]
FIT_TABLE_COLUMNS = [
    "workload",
    "sm_count",
    "median_ms",
    "low_ms",
    "high_ms",
    "ideal_ms",
    "plateau",
    "plateau_start_sm",
    "plateau_end_sm",
    "on_plateau",
    "wasted_sms",
    "kernel",
    "ctas",
    "waves",
    "tail_fill",
    "persistent",
    "from_waves",
    "device_name",
    "run_id",
]

_RESOURCES = (
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "registers_per_thread",
    "static_shared_bytes",
    "dynamic_shared_bytes",
)
_SHAPE = ["ctas", "threads_per_block", "cluster_size", "registers_per_thread", "shared_bytes"]
#: One :func:`partition_fit` row per group of these (its rows in the groups' order of first appearance).
_FIT_KEYS = ["workload", "name", "partition", "sm_count"] + _SHAPE
#: The columns :func:`launch_waves` carries over from :func:`partition_fit`, one row per launch.
LAUNCH_WAVE_COLUMNS = ["waves", "tail_fill", "multi_wave", "persistent", "resident_ctas", "reason"]

#: A kernel that leaves at least this share of its partition's SM time idle is named in the notes.
NOTE_IDLE_SHARE = 0.10
#: A grid sized for the card of at most this many CTAs per card SM, and no more than the card holds at
#: once, is read as persistent (each CTA loops over the work: cuBLAS's nvjet, Triton's ``NUM_SMS``
#: kernels). Its waves set where the time stops falling, not the time: on an H200 cuBLAS 4096^3 took
#: 1.43x its one-wave time in 2 waves on 96-120 SMs. A one-wave grid of many small CTAs per SM
#: (32 x the SMs) stays a wave grid.
PERSISTENT_MAX_PER_SM = 4


def _ints(k: pd.DataFrame, cols) -> pd.DataFrame:
    return k[list(cols)].apply(pd.to_numeric, errors="coerce")


def _card_sms(trace: pd.DataFrame, device_sm_count) -> int | None:
    col = identity_name("sm_count")  # the card's SMs, as the run's identity spells it
    for v in (device_sm_count, trace.attrs.get(col), trace[col].dropna().max() if col in trace else None):
        if v is not None and not (isinstance(v, float) and math.isnan(v)) and int(v) > 0:
            return int(v)
    return None


def _same_waves_sm(ctas: int, per_sm: int, cluster: int, waves: int, sms: int, granularity: int) -> int:
    """The fewest SMs (a multiple of ``granularity``, at most ``sms``) on which the grid runs no more waves
    and puts no more CTAs on its busiest SM than on ``sms``."""
    step, load = max(1, int(granularity)), math.ceil(ctas / sms)
    for s in range(step, sms + 1, step):
        r = resident_blocks(per_sm, s, cluster)
        if r and math.ceil(ctas / r) <= waves and math.ceil(ctas / s) <= load:
            return s
    return sms


def _prepared(trace: pd.DataFrame) -> tuple[pd.DataFrame, list]:
    """The kernel rows with their launch shape (:data:`_SHAPE`) and duration; the resource columns absent."""
    k = (trace[trace["activity"] == "kernel"] if "activity" in trace.columns else trace).copy()
    absent = [c for c in _RESOURCES if c not in k.columns]
    for c in _RESOURCES:
        k[c] = pd.to_numeric(k[c], errors="coerce") if c in k.columns else np.nan
    for c in ("cluster_x", "cluster_y", "cluster_z", "max_active_clusters"):
        k[c] = pd.to_numeric(k[c], errors="coerce").fillna(0) if c in k.columns else 0
    g = _ints(k, ("grid_x", "grid_y", "grid_z"))
    b = _ints(k, ("block_x", "block_y", "block_z"))
    k["ctas"] = g.prod(axis=1, min_count=3)
    k["threads_per_block"] = b.prod(axis=1, min_count=3)
    k["cluster_size"] = (k[["cluster_x", "cluster_y", "cluster_z"]].clip(lower=1).prod(axis=1)).astype(int)
    k["shared_bytes"] = k["static_shared_bytes"] + k["dynamic_shared_bytes"]
    k["duration"] = pd.to_numeric(k["end_ms"], errors="coerce") - pd.to_numeric(k["start_ms"], errors="coerce")
    for c in ("device_name", "run_id"):
        if c not in k.columns:
            k[c] = trace.attrs.get(c, "")
    return k, absent


def partition_fit(
    trace: pd.DataFrame, *, device_sm_count: int | None = None, compute_capability=None, granularity: int = 1
) -> pd.DataFrame:
    """Per kernel and partition of a trace: its waves, the tail wave's fill, and the SMs it cannot use.

    Parameters
    ----------
    trace : pandas.DataFrame
        A kernel trace (``trace=True``, :func:`gcexplore.kernel_trace`, or a recorded one);
        memcpy and memset rows are left out. Columns ``workload``, ``name``, ``partition``,
        ``sm_count``, ``start_ms``, ``end_ms`` are needed; the grid, block, registers and
        shared memory columns (``cluster_*`` and ``max_active_clusters`` optional) where
        present.
    device_sm_count : int, optional
        The card's SMs; default the trace's identity (its attrs, else its column).
    compute_capability : str or tuple, optional
        Default ``trace.attrs["compute_capability"]``
        (:data:`gcexplore.occupancy_estimate.LIMITS`).
    granularity : int, default 1
        ``same_waves_sm`` is a multiple of this (8 for green contexts on Hopper).

    Returns
    -------
    pandas.DataFrame
        One row per (workload, kernel name, partition, SM count, launch shape), columns
        :data:`FIT_COLUMNS`: ``card_sm_count`` (the card's SMs); ``launches``; ``ctas`` (the grid's blocks),
        ``threads_per_block``,
        ``cluster_size``; ``blocks_per_sm`` and ``limited_by`` (the occupancy calculator's);
        ``resident_ctas`` (CTAs the partition holds at once, whole clusters) and
        ``card_resident_ctas`` (the same for the card); ``cupti_card_ctas``
        (``max_active_clusters`` x cluster size, CUPTI's count for the card; NaN where CUPTI
        gives none) and ``cupti_agrees``; ``waves`` = ceil(ctas / resident_ctas);
        ``tail_fill`` (the last wave's CTAs / resident_ctas); ``idle_sm_share``
        = 1 - ctas / (sm_count x ceil(ctas / sm_count)), the share of the partition's SM time
        idle when CTAs spread evenly and each takes the same time (the busiest SM sets the
        kernel's time); ``same_waves_sm`` (the fewest SMs giving no more waves and no more
        CTAs on the busiest SM) and ``wasted_sms`` (sm_count - same_waves_sm: SMs that buy
        this kernel nothing); ``multi_wave`` (waves > 1); ``sized_for_card`` (CTAs a multiple of the
        card's SMs, or equal to the card's resident CTAs, on a partition smaller than the
        card); ``persistent`` (a card-sized grid the card holds at once, at most
        :data:`PERSISTENT_MAX_PER_SM` CTAs per card SM: CTAs that loop over the work, whose
        waves set the plateau but not the time, so ``idle_sm_share``, ``idle_ms`` and
        ``wasted_sms`` overstate them); ``duration_ms`` (median kernel duration) and ``idle_ms`` (duration_ms x
        idle_sm_share: the SM time idle, as time of the whole partition); ``reason`` ("" when computed, else why not:
        a kernel without
        resource fields, or one the limits refuse), ``device_name``, ``run_id``.
        ``attrs`` carry the trace's plus ``summary_of = "partition_fit"``.
    """
    if not isinstance(trace, pd.DataFrame):
        raise TypeError(
            f"partition_fit needs a kernel trace DataFrame (trace=True or gcexplore.kernel_trace()); "
            f"got {type(trace).__name__}"
        )
    need = ["workload", "name", "partition", "sm_count", "start_ms", "end_ms"]
    missing = [c for c in need if c not in trace.columns]
    if missing:
        raise ValueError(
            f"partition_fit needs a kernel trace with columns {need}; {missing} missing (columns: "
            f"{list(trace.columns)})"
        )
    card = _card_sms(trace, device_sm_count)
    try:
        lim, lim_reason = limits_for(compute_capability or trace.attrs.get("compute_capability")), ""
    except ValueError as e:
        lim, lim_reason = None, str(e).split(";")[0]
    k, absent = _prepared(trace)
    keys = _FIT_KEYS
    rows = []
    for key, grp in k.groupby(keys, sort=False, dropna=False):
        row = dict(zip(keys, key))
        row.update(
            launches=len(grp),
            duration_ms=nanmedian(grp["duration"]),
            device_name=str(grp["device_name"].iloc[0]),
            run_id=str(grp["run_id"].iloc[0]),
            card_sm_count=card,
            max_active_clusters=int(grp["max_active_clusters"].max()),
        )
        rows.append(_fit_row(row, lim, lim_reason, absent, card, granularity))
    out = pd.DataFrame(rows, columns=FIT_COLUMNS)
    for c in (
        "ctas threads_per_block blocks_per_sm resident_ctas card_resident_ctas waves same_waves_sm wasted_sms "
        "card_sm_count"
    ).split():
        out[c] = pd.array([None if pd.isna(v) else int(v) for v in out[c]], dtype="Int64")
    out["sm_count"] = pd.to_numeric(out["sm_count"], errors="coerce").astype("Int64")
    out.attrs.update(trace.attrs)
    out.attrs.update(
        {
            "summary_of": "partition_fit",
            "source": "estimated",
            "estimate": "resident CTAs from block, registers, shared memory and cluster shape "
            f"({lim.name if lim else 'no limits'}); waves of equal length assumed",
        }
    )
    return out


def launch_waves(trace: pd.DataFrame, **fit_options) -> pd.DataFrame:
    """Each kernel launch of a trace with its row of :func:`partition_fit`: what the timeline shades.

    Parameters
    ----------
    trace : pandas.DataFrame
        As for :func:`partition_fit`, which gets ``**fit_options`` (``device_sm_count``, ...) too.

    Returns
    -------
    pandas.DataFrame
        Indexed as the trace's kernel rows (no memcpy or memset rows), columns :data:`LAUNCH_WAVE_COLUMNS`,
        each from the launch's (workload, name, partition, SM count, launch shape) row of
        :func:`partition_fit` (``waves`` NaN and ``reason`` set where the trace has no resource fields).
    """
    fit = partition_fit(trace, **fit_options)
    k, _ = _prepared(trace)
    # partition_fit built its rows from the same groups in the same order: group number = its row
    row = k.groupby(_FIT_KEYS, sort=False, dropna=False).ngroup().to_numpy()
    out = fit[LAUNCH_WAVE_COLUMNS].iloc[row].set_axis(k.index)
    out.attrs = {**fit.attrs, "summary_of": "launch_waves"}
    return out


def _fit_row(row: dict, lim, lim_reason: str, absent: list, card: int | None, granularity: int) -> dict:
    nan = math.nan
    row.update(
        blocks_per_sm=nan,
        limited_by="",
        resident_ctas=nan,
        card_resident_ctas=nan,
        cupti_card_ctas=nan,
        cupti_agrees=None,
        waves=nan,
        tail_fill=nan,
        idle_sm_share=nan,
        same_waves_sm=nan,
        wasted_sms=nan,
        multi_wave=None,
        sized_for_card=None,
        persistent=None,
        idle_ms=nan,
        reason="",
    )
    sms = row["sm_count"]
    fields = [row["ctas"], row["threads_per_block"], row["registers_per_thread"], row["shared_bytes"]]
    if absent or any(pd.isna(v) for v in fields):
        row["reason"] = (
            "no resource fields in the trace ("
            + ", ".join(
                absent
                or [c for c, v in zip(("grid", "block", "registers_per_thread", "shared memory"), fields) if pd.isna(v)]
            )
            + ")"
        )
        return row
    if pd.isna(sms) or int(sms) <= 0:
        row["reason"] = "partition of unknown size (sm_count 0: its context was not watched)"
        return row
    if row["ctas"] <= 0 or row["threads_per_block"] <= 0:
        row["reason"] = "no grid (a record without launch dimensions)"
        return row
    if lim is None:
        row["reason"] = lim_reason
        return row
    try:
        per_sm, limiter = blocks_per_sm(
            int(row["threads_per_block"]), int(row["registers_per_thread"]), int(row["shared_bytes"]), lim
        )
    except ValueError as e:
        row["reason"] = str(e)
        return row
    ctas, cl, sms = int(row["ctas"]), int(row["cluster_size"]), int(sms)
    resident = resident_blocks(per_sm, sms, cl)
    row.update(blocks_per_sm=per_sm, limited_by=limiter, resident_ctas=resident)
    if resident <= 0:
        row["reason"] = f"not one cluster of {cl} fits {sms} SMs at {per_sm} blocks per SM"
        return row
    waves = math.ceil(ctas / resident)
    same = _same_waves_sm(ctas, per_sm, cl, waves, sms, granularity)
    row.update(
        waves=waves,
        tail_fill=(ctas - (waves - 1) * resident) / resident,
        idle_sm_share=1.0 - ctas / (sms * math.ceil(ctas / sms)),
        same_waves_sm=same,
        wasted_sms=sms - same,
        multi_wave=waves > 1,
    )
    row["idle_ms"] = row["duration_ms"] * row["idle_sm_share"]
    if card:
        card_res = resident_blocks(per_sm, card, cl)
        row["card_resident_ctas"] = card_res
        if row["max_active_clusters"] > 0:
            row["cupti_card_ctas"] = row["max_active_clusters"] * cl
            row["cupti_agrees"] = bool(row["cupti_card_ctas"] == card_res)
        fits_card = ctas % card == 0 or ctas in (card_res, row["cupti_card_ctas"])
        row["sized_for_card"] = bool(fits_card and sms < card)
        row["persistent"] = bool(fits_card and ctas <= card_res and ctas <= PERSISTENT_MAX_PER_SM * card)
    return row


# ---------------------------------------------------------------------------
# Scaling runs: plateaus
# ---------------------------------------------------------------------------


def _plateaus(sizes: list[int], low: list[float], high: list[float], median: list[float]) -> list[int]:
    """Plateau id per size (-1: none). From the smallest size up, a size joins the plateau of the first
    size ``s0`` unless it is faster than ``s0`` beyond their combined interval (its high below s0's low).
    A size without a finite median (no usable sample) is on none and ends the one before it."""
    ok = [math.isfinite(m) for m in median]
    ids, pid, i = [-1] * len(sizes), 0, 0
    while i < len(sizes):
        if not ok[i]:
            i += 1
            continue
        j = i + 1
        while j < len(sizes) and ok[j] and high[j] >= low[i]:
            j += 1
        if j - i >= 2:
            ids[i:j] = [pid] * (j - i)
            pid += 1
        i = j if j - i >= 2 else i + 1
    return ids


def fit_table(scaling_df: pd.DataFrame, trace: pd.DataFrame | None = None, *, confidence: float = 0.9) -> pd.DataFrame:
    """Plateaus of a scaling run: the sizes whose time does not fall as SMs grow, and the SMs they waste.

    Parameters
    ----------
    scaling_df : pandas.DataFrame
        A :func:`gcexplore.scaling` result (or any rows with ``workload``, ``sm_count``,
        ``duration_ms``; ``round`` where present; several runs are told apart by ``run_id``).
    trace : pandas.DataFrame, optional
        Its kernel trace (``gcexplore.scaling(..., trace=True).trace``): each size's longest
        kernel, its CTAs, waves and tail fill (:func:`partition_fit`) are added.
    confidence : float, default 0.9
        Of each size's interval (:func:`gcexplore.analysis.stats.round_median_ci`, with the
        card's recorded noise floor, :func:`gcexplore.analysis.stats.run_floor`).

    Returns
    -------
    pandas.DataFrame
        One row per (run, workload, sm_count), columns :data:`FIT_TABLE_COLUMNS`: ``median_ms``,
        ``low_ms``, ``high_ms`` (the interval); ``ideal_ms`` (linear scaling from the smallest
        size's median); ``plateau`` (an id per workload, -1 for none);
        ``plateau_start_sm`` (the smallest size that reaches it) and ``plateau_end_sm``;
        ``on_plateau``; ``wasted_sms`` (sm_count - plateau_start_sm on a plateau, else 0);
        ``kernel``, ``ctas``, ``waves``, ``tail_fill``, ``persistent`` (from the trace; NaN without it);
        ``from_waves`` on a plateau's sizes: True where the longest kernel runs one wave count across
        the plateau (the waves explain it), False where the waves change while the time stays flat
        (something else bounds it, such as memory bandwidth), NA without a trace or off a plateau.
        ``attrs["hints"]``: :func:`fit_hints`.
    """
    need = ["workload", "sm_count", "duration_ms"]
    if not isinstance(scaling_df, pd.DataFrame) or any(c not in scaling_df.columns for c in need):
        got = list(scaling_df.columns) if isinstance(scaling_df, pd.DataFrame) else type(scaling_df).__name__
        raise ValueError(f"fit_table needs a scaling result (columns {need}) from gcexplore.scaling(); got {got}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    df = bare(scaling_df)  # grouped twice below: no attrs copied into each group
    run = df["run_id"].astype(str) if "run_id" in df else pd.Series("", index=df.index)
    kernels, rows = _kernel_per_size(trace) if trace is not None else {}, []
    for (rid, w), g in df.groupby([run, df["workload"]], sort=False):
        dev = str(g["device_name"].iloc[0]) if "device_name" in g else str(scaling_df.attrs.get("device_name", ""))
        floor = run_floor(g.assign(device_name=dev))  # its card also where the rows carry none
        per = []
        for sm, gs in g.groupby(pd.to_numeric(g["sm_count"]), sort=True):
            rounds = gs["round"].to_numpy() if "round" in gs and gs["round"].notna().all() else None
            per.append((int(sm), *round_median_ci(gs["duration_ms"].to_numpy(float), rounds, confidence, floor=floor)))
        ids = _plateaus([p[0] for p in per], [p[2] for p in per], [p[3] for p in per], [p[1] for p in per])
        for (sm, med, lo, hi), pid in zip(per, ids):
            span = [p[0] for p, q in zip(per, ids) if q == pid] if pid >= 0 else []
            kern = kernels.get((rid, w, sm), {})
            waves = {kernels[(rid, w, s)]["waves"] for s in span if (rid, w, s) in kernels}
            from_waves = (
                (len(waves) == 1) if span and len(waves) and all((rid, w, s) in kernels for s in span) else pd.NA
            )
            rows.append(
                {
                    "workload": w,
                    "sm_count": sm,
                    "median_ms": med,
                    "low_ms": lo,
                    "high_ms": hi,
                    "ideal_ms": per[0][1] * per[0][0] / sm,
                    "plateau": pid,
                    "plateau_start_sm": min(span) if span else np.nan,
                    "plateau_end_sm": max(span) if span else np.nan,
                    "on_plateau": pid >= 0,
                    "wasted_sms": sm - min(span) if span else 0,
                    "kernel": kern.get("name", ""),
                    "ctas": kern.get("ctas", np.nan),
                    "waves": kern.get("waves", np.nan),
                    "tail_fill": kern.get("tail_fill", np.nan),
                    "persistent": kern.get("persistent", pd.NA),
                    "from_waves": from_waves,
                    "device_name": dev,
                    "run_id": rid,
                }
            )
    out = pd.DataFrame(rows, columns=FIT_TABLE_COLUMNS)
    out.attrs.update(scaling_df.attrs)
    out.attrs.update({"summary_of": "fit_table", "confidence": confidence})
    out.attrs["hints"] = fit_hints(out)
    return out


def _kernel_per_size(trace: pd.DataFrame) -> dict:
    """(run_id, workload, sm_count) -> the longest kernel's fit row (as a dict)."""
    fit = bare(partition_fit(trace))  # a trace's attrs are large: none copied per group
    fit = fit[fit["reason"] == ""]
    out = {}
    for (rid, w, sm), g in fit.groupby(["run_id", "workload", "sm_count"], sort=False):
        top = g.loc[(g["duration_ms"] * g["launches"]).idxmax()]
        out[(str(rid), w, int(sm))] = {
            "name": top["name"],
            "ctas": int(top["ctas"]),
            "waves": int(top["waves"]),
            "tail_fill": float(top["tail_fill"]),
            "persistent": None if pd.isna(top["persistent"]) else bool(top["persistent"]),
        }
    if "" not in {k[0] for k in out}:  # a trace without run ids still joins a run's rows
        out.update({("", w, sm): v for (_, w, sm), v in list(out.items())})
    return out


def fit_hints(table: pd.DataFrame) -> list[str]:
    """Sentences of a :func:`fit_table`, one per plateau: the smallest size that gives its time,
    the largest size that gives no better, what the larger sizes waste, what the waves say about it,
    and the next size that gains.

    With a trace: one wave count across the plateau explains it ("in the same waves"); waves that
    change while the time stays flat do not ("something other than waves bounds it"); a persistent
    grid's waves set the plateau but not its time, so no time is claimed from them.
    """
    hints = []
    for (rid, w), g in table.groupby(["run_id", "workload"], sort=False):
        g = g.sort_values("sm_count")
        for pid, p in g[g["plateau"] >= 0].groupby("plateau", sort=True):
            first, last = p.iloc[0], p.iloc[-1]
            conf = f"{table.attrs.get('confidence', 0.9):.0%}"
            if last.low_ms <= first.high_ms:  # the intervals overlap: the same time
                how = (
                    f"takes the same time on {int(first.sm_count)} SMs as on {int(last.sm_count)} "
                    f"({first.median_ms:.3g} ms against {last.median_ms:.3g} ms, within their {conf} intervals)"
                )
            else:  # slower beyond the intervals: more SMs cost time
                how = (
                    f"takes no less time on {int(last.sm_count)} SMs than on {int(first.sm_count)} "
                    f"({last.median_ms:.3g} ms against {first.median_ms:.3g} ms, {conf} intervals apart)"
                )
            text = f"{w} {how}: the {int(last.wasted_sms)} SMs beyond {int(first.sm_count)} buy nothing"
            text += _waves_clause(p)
            after = g[g["sm_count"] > last.sm_count]
            if len(after):
                nxt = after.iloc[0]
                text += f"; {int(nxt.sm_count)} SMs bring it to {nxt.median_ms:.3g} ms"
            hints.append(text)
    return hints


def _waves_clause(p: pd.DataFrame) -> str:
    """What the longest kernel's waves say about one plateau's rows ``p`` ("" without a trace)."""
    last = p.iloc[-1]
    if not (isinstance(last.kernel, str) and last.kernel) or p["waves"].isna().any():
        return ""
    waves = [int(x) for x in p["waves"]]
    if len(set(waves)) > 1:  # flat time while the waves change: not the waves
        return (
            f"; its longest kernel runs {int(last.ctas)} CTAs there, the time flat while its waves fall from "
            f"{max(waves)} to {min(waves)}: something other than waves bounds it (bandwidth, for one)"
        )
    n = waves[0]
    text = f"; its longest kernel runs {int(last.ctas)} CTAs in the same {'wave' if n == 1 else 'waves'} ({n}) there"
    if p["persistent"].fillna(False).astype(bool).any():
        text += " (persistent: waves set the plateau, not the time)"
    return text


# ---------------------------------------------------------------------------
# Traced results: which kernels waste their partition's SMs
# ---------------------------------------------------------------------------


def fit_notes(trace: pd.DataFrame, layout: str | None = None) -> list[str]:
    """Sentences naming the kernels that leave at least :data:`NOTE_IDLE_SHARE` of their partition's
    SM time idle (on ``layout`` of the trace, where given), with what that costs.

    Each says the kernel's CTAs, its waves on its partition and the tail's fill, the fewest SMs
    giving the same waves, and ``idle_ms`` (the kernel's time x the idle share) per launch; for a
    ``persistent`` grid only its waves (they set the plateau, not the time).
    Kernels without resource fields are counted in a last sentence.
    """
    t = trace
    if layout is not None and "layout" in t.columns:
        t = t[t["layout"].astype(str) == str(layout)]
        t.attrs.update(trace.attrs)
    fit = partition_fit(t)
    notes = []
    done = fit[fit["reason"] == ""]
    where = f" at {layout}" if layout is not None else ""
    bad = done[(done["idle_sm_share"] >= NOTE_IDLE_SHARE) & (done["wasted_sms"] > 0)]
    for r in bad.sort_values("idle_ms", ascending=False).itertuples():
        name = r.name if len(r.name) <= 60 else r.name[:57] + "..."
        card = " (a grid sized for the card)" if r.sized_for_card else ""
        if r.persistent:  # its CTAs loop over the work: equal waves and idle time would be claims, not estimates
            notes.append(
                f"{r.workload}'s {name} runs {r.ctas} CTAs (a persistent grid sized for the card) in "
                f"{r.waves} {'wave' if r.waves == 1 else 'waves'} on {r.partition}'s {r.sm_count} SMs{where} "
                f"(last wave {r.tail_fill:.0%} full): persistent: waves set the plateau, not the time, so "
                "no idle time is claimed; a scaling run (gcexplore.fit_table) measures the SMs it wastes"
            )
            continue
        notes.append(
            f"{r.workload}'s {name} runs {r.ctas} CTAs{card} in {r.waves} "
            f"{'wave' if r.waves == 1 else 'waves'} on {r.partition}'s {r.sm_count} SMs{where} "
            f"(last wave {r.tail_fill:.0%} full): it would run the same waves on {r.same_waves_sm}, "
            f"so {r.wasted_sms} SMs buy it nothing; {r.idle_sm_share:.0%} of its SM time sits idle, "
            f"about {r.idle_ms:.3g} ms of its {r.duration_ms:.3g} ms"
        )
    if len(done) and not len(bad):
        notes.append(
            f"no traced kernel{where} leaves {NOTE_IDLE_SHARE:.0%} or more of its partition's SM time "
            "idle on SMs that buy it nothing"
        )
    skipped = fit[fit["reason"] != ""]
    if len(skipped):
        notes.append(f"{len(skipped)} kernel shape(s) not estimated: {skipped['reason'].iloc[0]}")
    return notes
