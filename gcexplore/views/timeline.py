"""The kernel timeline of a trace (a lane per partition and stream, launch bubbles shaded) and
the SMs in use over time per partition, estimated from each kernel's grid, block and resources."""

from __future__ import annotations

from typing import Sequence

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .. import analysis as A
from ..results.run import require_one_run
from ..analysis.clusters import rep_mode, trace_modes
from ._style import WORKLOAD_COLORS, figure_stamp, mode_label, new_figure, require_result, stamp
from ..schema import layout_key, partition_key

__all__ = ["plot_sm_usage", "plot_timeline"]


def _one_repetition(trace: pd.DataFrame, layout: str | None, rep: int, where: str):
    require_result(trace, ["layout", "mode", "rep", "workload", "partition", "stream_id", "start_ms",
                           "end_ms", "name"], where, "a kernel trace from trace=True or gcexplore.kernel_trace()")
    require_one_run(trace, where)
    layout = str(trace["layout"].iloc[0]) if layout is None else layout
    rows = trace[(trace["layout"] == layout) & (trace["rep"] == rep)]
    if rows.empty:
        raise ValueError(f"no kernels of layout {layout!r} repetition {rep} in this trace; layouts "
                         f"{sorted(set(trace['layout']), key=layout_key)}, reps {sorted(set(trace['rep']))}")
    return layout, rows


def plot_timeline(trace: pd.DataFrame, *, layout: str | None = None, rep: int = 0,
                  modes: Sequence[str] | None = None, figsize=None) -> Figure:
    """Kernel timeline of one repetition: a lane per partition and stream, one panel per mode.

    Each kernel (CUPTI's start and end, relative to the repetition's common start) is
    a bar coloured by workload; the idle gaps inside a workload's busy span (launch
    bubbles, :func:`gcexplore.busy.kernel_gaps`) are shaded red on its lane. Where a
    workload's first-kernel start falls into separate clusters over the repetitions
    (:func:`gcexplore.analysis.trace_modes`), the panel's title says which cluster the drawn
    repetition is in and where the others start.

    A kernel that runs more than one wave on its partition
    (:func:`gcexplore.analysis.waves.launch_waves`, from :func:`gcexplore.partition_fit`) has its
    bar cut into its waves, alternating shades, the last wave paler the emptier it is; a persistent
    grid's waves are hatched (its CTAs loop over the work: the waves set where the time stops
    falling, not the time). Kernels without resource fields, or of one wave, are drawn plain.

    Parameters
    ----------
    trace : pandas.DataFrame
        A kernel trace (``trace=True`` or :func:`gcexplore.kernel_trace`).
    layout : str, optional
        Default: the first layout in the trace.
    rep : int, default 0
        Which repetition.
    modes : sequence of str, optional
        Default: every mode of that layout.
    figsize : tuple of float, optional

    Returns
    -------
    matplotlib.figure.Figure
        Kernel bars carry gid ``"kernel:<workload>"``, gaps ``"gap:<workload>"``, one collection
        per multi-wave launch ``"waves:<workload>"`` (``"persistent_waves:<workload>"``), a
        segment per wave.
    """
    from ..analysis.trace import kernel_gaps
    from ..analysis.waves import launch_waves

    layout, rows = _one_repetition(trace, layout, rep, "plot_timeline")
    modes = [m for m in (modes or A.modes_in(rows)) if (rows["mode"] == m).any()]
    colors = {w: WORKLOAD_COLORS[i % len(WORKLOAD_COLORS)] for i, w in enumerate(dict.fromkeys(rows["workload"]))}
    fig = new_figure(figsize or (9.0, 1.2 + 1.1 * sum(len(set(zip(rows[rows["mode"] == m]["partition"],
                                                                  rows[rows["mode"] == m]["stream_id"])))
                                                       for m in modes)))
    axes = fig.subplots(len(modes), 1, squeeze=False, sharex=True)[:, 0]
    gaps = kernel_gaps(rows)
    waves = launch_waves(rows)
    drawn = set()  # which wave shadings appear, for the legend
    label_ms = 0.05 * (rows["end_ms"].max() - rows["start_ms"].min())  # bars this long get their wave count
    # which cluster of repetitions the drawn one belongs to, where a start is bimodal
    whole = trace[trace["layout"] == layout]
    here = rep_mode(trace_modes(whole), rep)
    for ax, mode in zip(axes, modes):
        m = rows[rows["mode"] == mode]
        lanes = sorted(set(zip(m["partition"].astype(str), m["stream_id"].astype(int))),
                       key=lambda t: (partition_key(t[0]), t[1]))
        for y, (part, stream) in enumerate(lanes):
            k = m[(m["partition"] == part) & (m["stream_id"] == stream)]
            for wl, kw in k.groupby("workload", sort=False):
                ax.broken_barh(list(zip(kw["start_ms"], kw["end_ms"] - kw["start_ms"])), (y - 0.35, 0.7),
                               facecolors=colors[wl], edgecolors="white", linewidth=0.3, gid=f"kernel:{wl}")
                drawn |= _shade_waves(ax, kw.join(waves, how="inner"), y, wl, label_ms)
            for g in gaps[(gaps["mode"] == mode) & (gaps["partition"] == part)].itertuples():
                if (k["workload"] == g.workload).any():
                    ax.broken_barh([(g.gap_start_ms, g.gap_end_ms - g.gap_start_ms)], (y - 0.35, 0.7),
                                   facecolors="#d62728", alpha=0.3, gid=f"gap:{g.workload}")
        sms = {p: int(s) for p, s in zip(m["partition"], m["sm_count"])}
        ax.set_yticks(range(len(lanes)), [f"{p} ({sms[p]} SMs)\nstream {s}" for p, s in lanes], fontsize=7)
        ax.set_ylim(-0.6, len(lanes) - 0.4)
        ax.set_title(f"{mode_label(mode)} — layout {layout}, repetition {rep}"
                     + _cluster_note(here[here["mode"] == mode]), fontsize=9)
        ax.grid(True, axis="x", alpha=0.3)
    axes[-1].set_xlabel("time since the repetition's common start (ms, CUPTI kernel records)")
    handles = [Patch(color=c, label=w) for w, c in colors.items()]
    handles.append(Patch(color="#d62728", alpha=0.3, label="idle gap (launch bubble)"))
    if "waves" in drawn:
        handles.append(Patch(facecolor="0.55", edgecolor="white", label="waves on its partition "
                             "(last paler the emptier it is)"))
    if "persistent" in drawn:
        handles.append(Patch(facecolor="0.55", edgecolor="0.15", hatch="////", label="persistent grid's waves "
                             "(a plateau, not the time)"))
    fig.legend(handles=handles, fontsize=7, loc="outside lower center", ncol=min(len(handles), 3))
    stamp(fig, trace)
    return fig


def _shade_waves(ax, kw: pd.DataFrame, y: float, wl: str, label_ms: float) -> set:
    """Over each multi-wave launch of ``kw`` (its :func:`gcexplore.analysis.waves.launch_waves` columns
    joined), its ``waves`` as equal segments: full waves alternate plain and darkened, the last one
    paled by the share of its CTA slots left empty (1 - ``tail_fill``); a persistent grid's hatched.
    Bars at least ``label_ms`` long are labelled with their wave count (narrow segments alias).
    Returns which of ``{"waves", "persistent"}`` it drew."""
    drawn = set()
    for r in kw[kw["multi_wave"].eq(True)].itertuples():
        n, width = int(r.waves), (r.end_ms - r.start_ms) / int(r.waves)
        shades = [(0, 0, 0, 0.22 * (i % 2)) for i in range(n - 1)] + [(1, 1, 1, 0.75 * (1 - r.tail_fill))]
        persistent = bool(r.persistent)
        ax.broken_barh([(r.start_ms + i * width, width) for i in range(n)], (y - 0.35, 0.7), facecolors=shades,
                       edgecolors="0.15" if persistent else "none", linewidth=0.0, hatch="////" if persistent else None,
                       gid=f"{'persistent_waves' if persistent else 'waves'}:{wl}")
        drawn.add("persistent" if persistent else "waves")
        if r.end_ms - r.start_ms >= label_ms:
            ax.text((r.start_ms + r.end_ms) / 2, y, f"{n} waves" + (", persistent" if persistent else ""),
                    ha="center", va="center", fontsize=6.5, gid=f"wave_count:{wl}",
                    bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none", alpha=0.85))
    return drawn


def _cluster_note(here: pd.DataFrame) -> str:
    """Where a workload's first-kernel start falls into clusters over the repetitions: which
    one this repetition is in, and the others."""
    notes = []
    for r in here[here["clusters"] > 1].itertuples():
        others = ", ".join(f"{n} at {m:.3f} ms" for n, m in r.others)
        notes.append(f"{r.workload}'s first kernel at {r.median:.3f} ms here, as in {r.count} of "
                     f"{r.reps_total} repetitions (others: {others})")
    return "".join(f"\n{n}" for n in notes)


def plot_sm_usage(trace: pd.DataFrame, *, layout: str | None = None, rep: int = 0,
                  modes: Sequence[str] | None = None, figsize=None) -> Figure:
    """SMs in use over time per partition, estimated from grid, block and resources.

    One panel per mode; a step line per partition
    (:func:`gcexplore.occupancy_estimate.sm_usage`) under a dashed line at the
    partition's SM count. Estimates, not measurements: what each launch lets the
    hardware keep busy (occupancy-calculator rules for the trace's compute capability).

    Parameters
    ----------
    trace : pandas.DataFrame
        A kernel trace with grid, block, register and shared-memory columns.
    layout, rep, modes, figsize
        As in :func:`plot_timeline`.

    Returns
    -------
    matplotlib.figure.Figure
        Step lines carry gid ``"sm_usage:<partition>"`` and a label naming the partition, its SM
        count and the workloads that ran on it; the caps carry ``"sm_cap:<partition>"``.
    """
    from ..analysis.occupancy_estimate import ESTIMATE_LABEL, sm_usage

    layout, rows = _one_repetition(trace, layout, rep, "plot_sm_usage")
    usage = sm_usage(rows)
    modes = [m for m in (modes or A.modes_in(rows)) if (usage["mode"] == m).any()]
    fig = new_figure(figsize or (9.0, 0.8 + 1.9 * len(modes)))
    axes = fig.subplots(len(modes), 1, squeeze=False, sharex=True)[:, 0]
    parts = sorted(set(usage["partition"].astype(str)), key=partition_key)
    colors = {p: WORKLOAD_COLORS[i % len(WORKLOAD_COLORS)] for i, p in enumerate(parts)}
    for ax, mode in zip(axes, modes):
        m = usage[usage["mode"] == mode]
        for part, g in m.groupby("partition", sort=False):
            cap = int(g["sm_count"].iloc[0])
            wls = ", ".join(dict.fromkeys(rows.loc[(rows["mode"] == mode) & (rows["partition"] == part), "workload"]))
            ax.step([g["time_ms"].iloc[0], *g["time_ms"]], [0, *g["sms_in_use"]], where="post", color=colors[str(part)],
                    linewidth=1.4,
                    label=f"{part} ({cap} SMs): {wls}", gid=f"sm_usage:{part}")
            ax.axhline(cap, color=colors[str(part)], linestyle="--", linewidth=0.8, alpha=0.6,
                       gid=f"sm_cap:{part}")
        ax.set_ylim(0, max(usage["sm_count"]) * 1.08)
        ax.set_ylabel("SMs in use\n(estimated)", fontsize=8)
        ax.set_title(f"{mode_label(mode)} — layout {layout}, repetition {rep}", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    axes[-1].set_xlabel("time since the repetition's common start (ms, CUPTI kernel records)")
    fig.suptitle(f"{figure_stamp(trace.attrs)}\nSMs in use per partition, {ESTIMATE_LABEL} "
                 "(estimated, not measured)", fontsize=9, color="0.2")
    return fig
