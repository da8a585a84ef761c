"""Figure of per-block SM occupancy: which SM ran which block when."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..results.run import require_one_run
from ..results.validate import check_result
from ._style import WORKLOAD_COLORS, new_figure, require_result, stamp
from ..schema import partition_key, sorted_partitions

__all__ = ["occupancy_rows", "plot_occupancy"]


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
    require_one_run(df, "plot_occupancy")
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
        # matplotlib's stubs want a sequence of vertex arrays; an (n, 4, 2) array is one
        coll = PolyCollection(verts, facecolors=color, edgecolors="none", alpha=0.85)  # pyright: ignore[reportArgumentType]
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
