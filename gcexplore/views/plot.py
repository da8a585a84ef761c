"""Figures drawn from gcexplore's result DataFrames (no GPU needed).

Every function takes the DataFrame a profiler call returned (or one loaded with
:mod:`gcexplore.results`; columns in docs/contract.md) and returns a
:class:`matplotlib.figure.Figure`. Nothing here measures, imports the CUDA layers at
module import, or touches pyplot's global state: figures are built with the object
API so they work under Agg, in scripts, in threads and in notebooks alike. Every
figure names, in its heading, the device the data came from, whether they were
recorded (loaded from a saved file) or measured in this session, and the date.

Statistics drawn here are descriptive (median and the p10/p90 band of the raw
repetitions); the derived quantities that have one definition in the profiler (the
lower bound of the makespan) are taken from :func:`gcexplore.summarize`.
"""

from __future__ import annotations

import io
from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .. import analysis as A
from ..results.provenance import require_one_run, stamp_text
from ..results.validate import check_result
from ..schema import MODE_DESCRIPTIONS, MODES, SCENARIOS, layout_key, partition_key, sorted_partitions

__all__ = [
    "plot_sweep",
    "plot_throughput",
    "plot_scaling",
    "plot_occupancy",
    "plot_isolation",
    "figure_stamp",
    "occupancy_rows",
    "require_result",
    "mode_color",
    "mode_label",
    "new_figure",
    "stamp",
    "WORKLOAD_COLORS",
]

WORKLOAD_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
                    "#17becf", "#bcbd22")
_KNOWN_MODE_COLORS = {"alone": "#7f7f7f", "concurrent": "#1f77b4", "sequential": "#d62728",
                      "streams": "#ff7f0e"}
_SPARE_COLORS = ("#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


def mode_color(mode: str) -> str:
    """A mode's colour; a mode the schema gained later gets a spare colour, never dropped."""
    if mode in _KNOWN_MODE_COLORS:
        return _KNOWN_MODE_COLORS[mode]
    extra = [m for m in MODES if m not in _KNOWN_MODE_COLORS] + [mode]
    return _SPARE_COLORS[extra.index(mode) % len(_SPARE_COLORS)]


def mode_label(mode: str) -> str:
    return MODE_DESCRIPTIONS.get(mode, mode)


class _Figure(Figure):
    """A Figure that shows itself as PNG in IPython without pyplot's inline backend."""

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=100)
        return buf.getvalue()


def new_figure(figsize=(8.0, 4.8), **kwargs) -> Figure:
    return _Figure(figsize=figsize, layout="constrained", **kwargs)


def require_result(df: pd.DataFrame, columns: Sequence[str], where: str, hint: str) -> None:
    """TypeError / ValueError unless ``df`` is a non-empty DataFrame with ``columns``."""
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{where} expects a pandas DataFrame ({hint}); got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        kind = df.attrs.get("kind", "unknown")
        raise ValueError(
            f"{where} needs the columns {missing}, which this DataFrame (kind {kind!r}, "
            f"columns {list(df.columns)}) lacks; pass {hint}")
    if df.empty:
        raise ValueError(f"{where} got an empty DataFrame; nothing was measured to draw")


def figure_stamp(attrs: dict) -> str:
    """The provenance line every figure carries: device, recorded or live, date.

    Parameters
    ----------
    attrs : dict
        A result's ``df.attrs`` (keys ``device_name``, ``device_sm_count``, ``date``,
        ``recorded``, ``driver_version`` are read when present).

    Returns
    -------
    str
        E.g. ``"NVIDIA H100 80GB HBM3 (132 SMs, driver 13.0) · recorded 2025-11-26"``.
    """
    return stamp_text(attrs)


def stamp(fig: Figure, df: pd.DataFrame) -> None:
    fig.suptitle(figure_stamp(df.attrs), fontsize=9, color="0.3")


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _ratio_text(r: float) -> str:
    """A ratio of two medians with the digits their spread supports: 48x, 1.9x, 1.01x."""
    return f"{r:.0f}x" if r >= 10 else (f"{r:.1f}x" if r >= 1.95 else f"{r:.2f}x")


def _panel_format(values) -> str:
    """One number format for every label of a panel, from its largest value."""
    top = max((abs(float(v)) for v in values if np.isfinite(v)), default=0.0)
    return "{:,.0f}" if top >= 100 else ("{:.1f}" if top >= 10 else "{:.2f}")


def _metric_label(metric: str) -> str:
    return A.RATES.get(metric, metric)


# --------------------------------------------------------------------------- sweep


def plot_sweep(df: pd.DataFrame, *, summary: pd.DataFrame | None = None,
               figsize=(8.0, 5.0)) -> Figure:
    """Makespan against the first partition's SM count, on a log axis.

    Draws the median concurrent makespan of every measured split with p10-p90 error
    bars and band; the interference-free makespan of each split (the slowest workload
    alone on its partition: what the split would give if partitions shared nothing);
    the sequential and plain-streams baselines (medians over all layouts: both run on
    the whole device, so the split does not change them; drawn in two styles so the
    one on top never hides the other); the lower bound of
    :func:`gcexplore.analysis.lower_bound`, with its value and the measurement that
    sets it; and the best split (the rule of :func:`gcexplore.best_split`). The y axis
    is logarithmic so that a slow split at one end does not squeeze the region near
    the bound where the answer lies.

    Parameters
    ----------
    df : pandas.DataFrame
        Rows from :func:`gcexplore.sweep` or :func:`gcexplore.profile_overlap`
        (columns ``layout``, ``split_sm_count``, ``mode``, ``rep``, ``workload``,
        ``partition``, ``makespan_ms``).
    summary : pandas.DataFrame, optional
        ``gcexplore.summarize(df)`` if already computed; computed here otherwise.
    figsize : tuple of float, default (8.0, 5.0)
        Figure size in inches.

    Returns
    -------
    matplotlib.figure.Figure
        One Axes; lines carry gids ``"concurrent"``, ``"interference_free"``,
        ``"sequential"``, ``"streams"``, ``"lower_bound"``, ``"best"`` and the band
        ``"concurrent_band"``.
    """
    check_result(df, "overlap", "plot_sweep")
    require_result(df, ["layout", "split_sm_count", "mode", "rep", "workload", "partition",
                  "makespan_ms"], "plot_sweep",
             "the DataFrame from gcexplore.sweep() or gcexplore.profile_overlap()")
    require_one_run(df, "plot_sweep")
    if not (df["mode"] == "concurrent").any():
        raise ValueError("plot_sweep needs 'concurrent' rows; this DataFrame has modes "
                         f"{A.modes_in(df)}")
    if summary is None:
        summary = A.summarize(df)

    fig = new_figure(figsize)
    ax = fig.add_subplot()
    _sweep_concurrent(ax, df, summary)
    _sweep_baselines(ax, df)
    table = A.layout_table(summary)
    bound = summary.attrs.get("lower_bound") or A.lower_bound(df).to_dict()
    lb = table[["split_sm_count", "lower_bound_ms"]].dropna()
    if not lb.empty:
        where = ("whole device" if bound.get("mode") == "sequential" else f"{bound.get('sm_count')} SMs")
        ax.plot(lb["split_sm_count"], lb["lower_bound_ms"], color="0.2", linestyle=":", linewidth=1.5,
                label=f"lower bound: {lb['lower_bound_ms'].iloc[0]:.3f} ms ({bound.get('workload')} alone, {where})",
                gid="lower_bound")

    best = A.best_split(summary)
    ax.plot([best["split_sm_count"]], [best["concurrent_ms"]], marker="*", ms=16, color="gold",
            markeredgecolor="black", linestyle="none", zorder=5,
            label=(f"best split {best['layout']}: {best['concurrent_ms']:.3g} ms"
                   + (f", {best['speedup_vs_sequential']:.2f}x vs sequential"
                      if pd.notna(best["speedup_vs_sequential"]) else "")), gid="best")

    order = A.workload_order(df)
    ax.set_xlabel(f"SMs of the first partition ({order[0]})")
    ax.set_ylabel("makespan (ms)")
    ax.set_title(f"Overlap sweep: {' + '.join(order)}")
    ax.set_xticks(table["split_sm_count"])
    ax.tick_params(axis="x", labelsize=7)
    _log_ms_axis(ax)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper center")
    stamp(fig, df)
    return fig


def _sweep_concurrent(ax, df: pd.DataFrame, summary: pd.DataFrame) -> None:
    per_layout = A.makespan_stats(df, "concurrent")
    x = per_layout["split_sm_count"].to_numpy()
    med, lo, hi = (per_layout[c].to_numpy(dtype=float) for c in ("median_ms", "p10_ms", "p90_ms"))
    widest = float(np.nanmax((hi - lo) / med)) if len(med) else float("nan")
    color = mode_color("concurrent")
    band = ax.fill_between(x, lo, hi, color=color, alpha=0.25, linewidth=0)
    band.set_gid("concurrent_band")
    ax.errorbar(x, med, yerr=[med - lo, hi - med], fmt="none", ecolor=color, elinewidth=1, capsize=3)
    ax.plot(x, med, marker="o", ms=4, color=color, gid="concurrent",
            label=(f"{mode_label('concurrent')}: median, p10–p90 bars "
                   f"(widest {widest:.1%} of the median)"))
    table = A.layout_table(summary)
    free = table[["split_sm_count", "interference_free_ms"]].dropna()
    if not free.empty:
        # hollow markers on top: visible also where the curve runs over them (no interference)
        ax.plot(free["split_sm_count"], free["interference_free_ms"], color="black", linestyle="none",
                marker="D", ms=7, markerfacecolor="none", markeredgewidth=0.9, zorder=4, gid="interference_free",
                label="interference-free: slowest workload alone on its partition")


def _sweep_baselines(ax, df: pd.DataFrame) -> None:
    # Sequential underneath, wide and pale; plain streams on top, thin and dashed: two
    # baselines a few percent apart stay distinguishable.
    styles = {"sequential": {"linestyle": "-", "linewidth": 4.0, "alpha": 0.35, "zorder": 1},
              "streams": {"linestyle": (0, (5, 3)), "linewidth": 1.4, "alpha": 1.0, "zorder": 3}}
    for mode in A.modes_in(df):
        if mode in ("alone", "concurrent"):
            continue  # alone is per partition, not a makespan of the pair
        med = A.baseline_ms(df, mode)
        ax.axhline(med, color=mode_color(mode), label=f"{mode_label(mode)}: {med:.3g} ms", gid=mode,
                   **styles.get(mode, {"linestyle": "-.", "linewidth": 1.2}))


def _log_ms_axis(ax) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo * 0.9, hi * 1.6)  # room for the legend above the curve


# ---------------------------------------------------------------------- throughput


def plot_throughput(df: pd.DataFrame, *, layout: str | None = None, metric: str = "auto",
                    figsize=None, trace: pd.DataFrame | None = None) -> Figure:
    """Throughput of each workload on its partition, one bar per mode.

    One panel per workload (workloads declare different units: TFLOP/s for FLOPs,
    GB/s for bytes, calls per second when nothing was declared); in each panel a bar
    per mode at the median with a p10/p90 error bar, labelled with the partition and
    its SM count.

    Parameters
    ----------
    df : pandas.DataFrame
        Rows from :func:`gcexplore.profile_overlap` or :func:`gcexplore.sweep`.
    layout : str, optional
        Which layout (e.g. ``"24+108"``) to draw; default the only one, or for a sweep
        the best split (lowest median concurrent makespan).
    metric : str, default "auto"
        ``"auto"`` (declared FLOPs, else bytes, else calls per second; GB/s when
        both are declared at under 1 FLOP per byte),
        ``"throughput_tflops"``, ``"bandwidth_gbs"``, ``"calls_per_s"`` or
        ``"duration_ms"``.
    figsize : tuple of float, optional
        Figure size in inches; default scales with the number of workloads.
    trace : pandas.DataFrame, optional
        The kernel trace of the same run (``trace=True``): rates come from each
        workload's GPU-busy time in every mode. Without it, a mode whose event span
        may include waiting for SMs (plain streams) gets no rate bar but a note why.

    Returns
    -------
    matplotlib.figure.Figure
        One Axes per workload; each bar (a Rectangle) has gid ``"bar:<workload>:<mode>"``;
        a withheld rate is a text with gid ``"withheld:<workload>:<mode>"``.
    """
    check_result(df, "overlap", "plot_throughput")
    require_result(df, ["layout", "mode", "workload", "partition", "sm_count", "duration_ms"],
             "plot_throughput",
             "the DataFrame from gcexplore.profile_overlap() or gcexplore.sweep()")
    require_one_run(df, "plot_throughput")
    layouts = list(dict.fromkeys(df["layout"]))
    if layout is None:
        layout = layouts[0] if len(layouts) == 1 else A.best_layout(df)
    elif layout not in layouts:
        raise ValueError(f"layout {layout!r} was not measured; measured layouts: "
                         f"{sorted(layouts, key=layout_key)}")
    rows = df[df["layout"] == layout]
    if trace is not None:
        from ..analysis.trace import trace_rates

        rows = trace_rates(rows, trace)
    workloads = list(dict.fromkeys(rows["workload"]))
    if figsize is None:
        figsize = (max(4.0, 3.6 * len(workloads)), 4.2)
    fig = new_figure(figsize)
    axes = fig.subplots(1, len(workloads), squeeze=False)[0]
    for ax, workload in zip(axes, workloads):
        wrows = rows[rows["workload"] == workload]
        _, metric_used = A.rates(wrows, metric)
        labels, drawn = [], []
        for i, mode in enumerate(A.modes_in(wrows)):
            mrows = wrows[wrows["mode"] == mode]
            part = mrows["partition"].iloc[0]
            labels.append(f"{mode}\n{part}\n{int(mrows['sm_count'].iloc[0])} SMs")
            if trace is None and mode in A.SPAN_INCLUDES_WAIT and metric_used != "duration_ms":
                ax.text(i, 0.03, "no rate:\nspan includes\nwait for SMs", ha="center", va="bottom",
                        transform=ax.get_xaxis_transform(), fontsize=6.5, color=mode_color(mode),
                        bbox={"facecolor": "white", "edgecolor": "none", "pad": 1},
                        gid=f"withheld:{workload}:{mode}")
                continue
            values, _ = A.rates(mrows, metric_used)
            med, lo, hi = A.quantiles(values)
            cont = ax.bar([i], [med], yerr=[[med - lo], [hi - med]], capsize=4,
                          color=mode_color(mode), label=mode_label(mode))
            cont.patches[0].set_gid(f"bar:{workload}:{mode}")
            drawn.append((i, med, hi))
        fmt = _panel_format([d[1] for d in drawn])
        for i, med, hi in drawn:
            ax.annotate(fmt.format(med), (i, max(med, hi)), textcoords="offset points", xytext=(0, 3),
                        ha="center", va="bottom", fontsize=7)
        ax.text(0.99, 0.99, "median; bars: p10–p90", transform=ax.transAxes, ha="right", va="top",
                fontsize=7, color="0.3")
        ax.set_xticks(range(len(labels)), labels, fontsize=7)
        ax.set_ylabel(_metric_label(metric_used) + (", from GPU-busy time" if trace is not None else ""))
        ax.set_title(f"{workload} — layout {layout}", fontsize=10)
        ax.set_ylim(0, max((d[2] for d in drawn if np.isfinite(d[2])), default=1.0) * 1.18)
        ax.grid(True, axis="y", alpha=0.3)
    stamp(fig, df)
    return fig


# ------------------------------------------------------------------------- scaling


def plot_scaling(df: pd.DataFrame, *, metric: str = "auto", figsize=None) -> Figure:
    """Rate (TFLOP/s, GB/s or calls per second) and parallel efficiency against SM count.

    One panel per unit in use, titled with that unit, then the efficiency panel.

    Parallel efficiency at ``s`` SMs (from :func:`gcexplore.summarize`) is the speedup
    over the smallest measured size ``s0`` divided by ``s / s0`` (1.0 = perfect
    scaling), computed from median
    durations.

    Parameters
    ----------
    df : pandas.DataFrame
        Rows from :func:`gcexplore.scaling` (columns ``workload``, ``sm_count``,
        ``duration_ms`` and the throughput columns).
    metric : str, default "auto"
        As in :func:`plot_throughput`.
    figsize : tuple of float, optional
        Figure size in inches.

    Returns
    -------
    matplotlib.figure.Figure
        One throughput Axes per unit in use, then the efficiency Axes. Lines carry gids
        ``"throughput:<workload>"`` and ``"efficiency:<workload>"``.
    """
    check_result(df, "scaling", "plot_scaling")
    require_result(df, ["workload", "sm_count", "duration_ms"], "plot_scaling",
             "the DataFrame from gcexplore.scaling()")
    require_one_run(df, "plot_scaling")
    workloads = list(dict.fromkeys(df["workload"]))
    colors = {w: WORKLOAD_COLORS[i % len(WORKLOAD_COLORS)] for i, w in enumerate(workloads)}
    by_unit: dict[str, list[str]] = {}
    for w in workloads:
        _, used = A.rates(df[df["workload"] == w], metric)
        by_unit.setdefault(used, []).append(w)
    n = len(by_unit) + 1
    fig = new_figure(figsize or (4.2 * n, 4.2))
    axes = fig.subplots(1, n, squeeze=False)[0]
    for ax, (unit, ws) in zip(axes, by_unit.items()):
        for w in ws:
            q = A.rate_quantiles(df[df["workload"] == w], unit, by="sm_count")
            ax.fill_between(q["sm_count"], q["p10"], q["p90"], color=colors[w], alpha=0.2, linewidth=0)
            ax.plot(q["sm_count"], q["median"], marker="o", ms=3, color=colors[w], label=w,
                    gid=f"throughput:{w}")
        ax.set_xlabel("SMs")
        ax.set_ylabel(_metric_label(unit))
        ax.set_ylim(bottom=0)
        # the title names the quantity drawn (TFLOP/s, GB/s, calls/s), never a generic "throughput"
        ax.set_title(f"{_metric_label(unit)} vs SMs\nmedian, p10–p90 band", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    eff_ax = axes[-1]
    summary = A.summarize(df)
    for w in workloads:
        sw = summary[summary["workload"] == w].sort_values("sm_count")
        eff_ax.plot(sw["sm_count"], sw["parallel_efficiency"], marker="o", ms=3, color=colors[w], label=w,
                    gid=f"efficiency:{w}")
    eff_ax.axhline(1.0, color="0.3", linestyle=":", linewidth=1, label="perfect scaling")
    eff_ax.set_xlabel("SMs")
    eff_ax.set_ylabel("parallel efficiency (vs smallest size)")
    eff_ax.set_ylim(bottom=0)
    eff_ax.set_title("parallel efficiency", fontsize=10)
    eff_ax.grid(True, alpha=0.3)
    eff_ax.legend(fontsize=8)
    stamp(fig, df)
    return fig


# ----------------------------------------------------------------------- occupancy


def occupancy_rows(df: pd.DataFrame, order: str = "partition") -> pd.DataFrame:
    """Which row of the occupancy picture each SM gets.

    Parameters
    ----------
    df : pandas.DataFrame
        Per-block records from :func:`gcexplore.occupancy`.
    order : {"partition", "sm_id"}
        ``"partition"`` groups the SMs of each partition together (p0, p1, ...,
        remainder; by ``%smid`` inside a group); ``"sm_id"`` keeps hardware order, so
        the interleaving of partitions over SM ids is visible.

    Returns
    -------
    pandas.DataFrame
        Columns ``sm_id``, ``partition`` (the first partition seen on that SM),
        ``partitions`` (how many partitions ran blocks on it), ``row``.
    """
    if order not in ("partition", "sm_id"):
        raise ValueError(f"order must be 'partition' or 'sm_id', not {order!r}")
    per_sm = df.groupby("sm_id")["partition"].agg(
        partition=lambda s: min(s.unique(), key=partition_key), partitions="nunique")
    per_sm = per_sm.reset_index()
    if order == "partition":
        rank = {p: i for i, p in enumerate(sorted_partitions(per_sm["partition"]))}
        per_sm = per_sm.assign(_rank=per_sm["partition"].map(rank))
        per_sm = per_sm.sort_values(["_rank", "sm_id"]).drop(columns="_rank")
    else:
        per_sm = per_sm.sort_values("sm_id")
    per_sm["row"] = np.arange(len(per_sm))
    return per_sm.reset_index(drop=True)


def plot_occupancy(df: pd.DataFrame, *, order: str = "partition", figsize=(9.0, 6.0)) -> Figure:
    """Which SM ran which block when: SMs on the y axis, time on the x axis.

    Each block is a bar from its start to its end on the row of the SM it ran on,
    coloured by workload. A strip on the left colours each SM row by partition, and in
    ``order="partition"`` lines separate the partitions, so one can see that
    partitions never share an SM; SMs that ran blocks of more than one partition are
    counted in the title and outlined in red.

    Parameters
    ----------
    df : pandas.DataFrame
        Per-block records from :func:`gcexplore.occupancy` (columns ``partition``,
        ``workload``, ``sm_id``, ``block``, ``start_ns``, ``end_ns``).
    order : {"partition", "sm_id"}, default "partition"
        Row order, see :func:`occupancy_rows`.
    figsize : tuple of float, default (9.0, 6.0)
        Figure size in inches.

    Returns
    -------
    matplotlib.figure.Figure
        Axes ``[strip, blocks]``. Blocks are one ``PolyCollection`` per workload with gid
        ``"blocks:<workload>"`` (one path per block); partition separators are lines
        with gid ``"boundary"``.
    """
    check_result(df, "occupancy", "plot_occupancy")
    require_result(df, ["partition", "workload", "sm_id", "start_ns", "end_ns"], "plot_occupancy",
             "the per-block DataFrame from gcexplore.occupancy()")
    rows = occupancy_rows(df, order)
    row_of = dict(zip(rows["sm_id"], rows["row"]))
    partitions = sorted_partitions(rows["partition"])
    part_colors = {p: c for p, c in zip(partitions, ("#bbbbbb", "#555555", "#999999",
                                                       "#333333", "#dddddd", "#777777") * 4)}
    workloads = list(dict.fromkeys(df["workload"]))

    fig = new_figure(figsize)
    strip, ax = fig.subplots(1, 2, sharey=True, width_ratios=[1, 30])
    t = df[["start_ns", "end_ns"]].to_numpy(dtype=float) / 1e3  # ns -> us
    y = df["sm_id"].map(row_of).to_numpy(dtype=float)
    handles = []
    for i, w in enumerate(workloads):
        sel = (df["workload"] == w).to_numpy()
        x0, x1, yy = t[sel, 0], t[sel, 1], y[sel]
        verts = np.stack([np.column_stack([x0, yy - 0.4]), np.column_stack([x0, yy + 0.4]),
                          np.column_stack([x1, yy + 0.4]), np.column_stack([x1, yy - 0.4])],
                         axis=1)
        color = WORKLOAD_COLORS[i % len(WORKLOAD_COLORS)]
        coll = PolyCollection(verts, facecolors=color, edgecolors="none", alpha=0.85)
        coll.set_gid(f"blocks:{w}")
        ax.add_collection(coll)
        handles.append(Patch(color=color, label=w))

    # Partition strip: one cell per SM row, coloured by the partition that ran it.
    for p in partitions:
        r = rows.loc[rows["partition"] == p, "row"].to_numpy(dtype=float)
        verts = [[(0, v - 0.5), (0, v + 0.5), (1, v + 0.5), (1, v - 0.5)] for v in r]
        strip.add_collection(PolyCollection(verts, facecolors=part_colors[p], edgecolors="none"))
    shared = rows[rows["partitions"] > 1]
    for v in shared["row"]:
        ax.axhspan(v - 0.5, v + 0.5, color="red", alpha=0.25, linewidth=0, gid="shared")

    ticks, labels = [], []
    for p in partitions:
        r = rows.loc[rows["partition"] == p, "row"]
        if order == "partition":
            ticks.append((r.min() + r.max()) / 2)
            labels.append(f"{p}\n{len(r)} SMs")
            if r.min() > 0:
                ax.axhline(r.min() - 0.5, color="black", linewidth=1.2, gid="boundary")
    if order == "partition":
        strip.set_yticks(ticks, labels, fontsize=8)
        strip.set_ylabel("SMs, grouped by partition")
    else:
        strip.set_ylabel("SM id (%smid)")
        handles += [Patch(color=part_colors[p], label=f"partition {p}") for p in partitions]
    strip.set_xlim(0, 1)
    strip.set_xticks([])
    ax.set_xlim(0, max(float(t[:, 1].max()), 1e-3) * 1.01)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # first partition / lowest id on top
    ax.set_xlabel("time since the first block started (µs)")
    ax.tick_params(axis="y", left=False)
    n_shared = len(shared)
    verdict = ("no SM ran blocks of two partitions" if n_shared == 0 else
               f"{n_shared} SMs ran blocks of more than one partition")
    sizes = ", ".join(f"{p}: {int((rows['partition'] == p).sum())}" for p in partitions)
    ax.set_title(f"SM occupancy ({sizes} SMs) — {verdict}", fontsize=10)
    fig.legend(handles=handles, fontsize=8, loc="outside lower center", ncol=len(handles))
    stamp(fig, df)
    return fig


# ----------------------------------------------------------------------- isolation


def plot_isolation(df: pd.DataFrame, *, figsize=(9.0, 4.2)) -> Figure:
    """The critical workload's latency alone, next to the background on plain streams,
    and in its own partition; and the background's time in each case.

    Parameters
    ----------
    df : pandas.DataFrame
        Rows from :func:`gcexplore.isolation` (columns ``scenario``, ``role``,
        ``workload``, ``rep``, ``sm_count``, ``duration_ms``).
    figsize : tuple of float, default (9.0, 4.2)
        Figure size in inches.

    Returns
    -------
    matplotlib.figure.Figure
        Axes ``[critical, background]`` (only the first if no background rows); bars
        (Rectangles) have gids ``"critical:<scenario>"`` / ``"background:<scenario>"``;
        the critical bars are annotated with their ratio to ``alone``.
    """
    check_result(df, "isolation", "plot_isolation")
    require_result(df, ["scenario", "role", "sm_count", "duration_ms"], "plot_isolation",
             "the DataFrame from gcexplore.isolation()")
    require_one_run(df, "plot_isolation")
    crit = df[df["role"] == "critical"]
    if crit.empty:
        raise ValueError("plot_isolation needs rows with role 'critical'")
    summary = A.summarize(df)
    slowdown = {(r.role, r.scenario): r.slowdown_vs_alone for r in summary.itertuples()}
    bg = df[df["role"] == "background"]
    fig = new_figure(figsize)
    axes = fig.subplots(1, 2 if not bg.empty else 1, squeeze=False)[0]
    colors = {"alone": "#7f7f7f", "streams": mode_color("streams"),
              "partitioned": mode_color("concurrent")}

    def bars(ax, rows, role, scale):
        # each panel names the *other* role: the critical kernel runs next to the
        # background, the background next to the critical launches
        other = "background" if role == "critical" else "critical launches"
        captions = {"alone": "alone", "streams": f"next to {other}\nplain streams",
                    "partitioned": f"next to {other}\nown partition"}
        scen = [s for s in SCENARIOS if s in set(rows["scenario"])]
        scen += [s for s in dict.fromkeys(rows["scenario"]) if s not in scen]
        meds, tops, labels = {}, {}, []
        for i, s in enumerate(scen):
            srows = rows[rows["scenario"] == s]
            med, lo, hi = (v * scale for v in A.quantiles(srows["duration_ms"]))
            cont = ax.bar([i], [med], yerr=[[med - lo], [hi - med]], capsize=4,
                          color=colors.get(s, "#2ca02c"))
            cont.patches[0].set_gid(f"{role}:{s}")
            meds[s] = med
            tops[s] = max(med, hi)
            labels.append(f"{captions.get(s, s)}\n({int(srows['sm_count'].iloc[0])} SMs)")
        ax.set_xticks(range(len(scen)), labels, fontsize=7)
        # headroom for two lines of annotation above the tallest bar, inside the axes
        ax.set_ylim(0, max(tops.values()) * 1.28)
        ax.grid(True, axis="y", alpha=0.3)
        return scen, meds, tops

    crit_ms = A.quantiles(crit["duration_ms"])[0]
    scale, unit = (1e3, "µs") if crit_ms < 1.0 else (1.0, "ms")
    scen, meds, tops = bars(axes[0], crit, "critical", scale)
    for i, s in enumerate(scen):
        text = f"{_fmt(meds[s])} {unit}"
        ratio = slowdown.get(("critical", s), np.nan)
        if s != "alone" and np.isfinite(ratio):
            text += f"\n{_ratio_text(ratio)} alone"
        axes[0].annotate(text, (i, tops[s]), textcoords="offset points", xytext=(0, 3),
                         ha="center", va="bottom", fontsize=7)
    name = crit["workload"].iloc[0] if "workload" in crit else "critical"
    axes[0].set_ylabel(f"critical latency, launch to completion ({unit})")
    axes[0].set_title(f"critical workload ({name}): median, p10–p90 bars", fontsize=10)
    if not bg.empty:
        bscen, bmeds, btops = bars(axes[1], bg, "background", 1.0)
        for i, s in enumerate(bscen):
            text = f"{_fmt(bmeds[s])} ms"
            ratio = slowdown.get(("background", s), np.nan)
            if s != "alone" and np.isfinite(ratio):
                text += f"\n{_ratio_text(ratio)} alone"
            axes[1].annotate(text, (i, btops[s]), textcoords="offset points",
                             xytext=(0, 3), ha="center", va="bottom", fontsize=7)
        bname = bg["workload"].iloc[0] if "workload" in bg else "background"
        axes[1].set_ylabel("background time per launch (ms)")
        axes[1].set_title(f"background ({bname}): median, p10–p90 bars", fontsize=10)
    stamp(fig, df)
    return fig
