"""Figures of a communication-SMs result: the step and its parts against the collective's SMs, the
collective's bus bandwidth against its SMs, and the step at the SM counts engines ship against the best."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from .analysis import comm_answer, comm_table
from ..results.validate import check_result
from ..views._style import new_figure, plain_text, stamp

__all__ = ["plot_comm", "plot_comm_constants"]

_PARTS = (("compute_whole_ms", "compute on the whole GPU", "0.75"),
          ("split_loss_ms", "split loss (compute on fewer SMs)", "tab:orange"),
          ("interference_ms", "interference (compute beside the collective)", "tab:red"),
          ("exposed_comm_ms", "exposed collective", "tab:blue"))


def _size(b: int) -> str:
    for unit, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b % f == 0:
            return f"{b // f} {unit}"
    return f"{b} B"


def plot_comm(df: pd.DataFrame, *, collective: str | None = None, size_bytes: int | None = None,
              tolerance: float = 0.01, figsize=None) -> Figure:
    """Step time and its parts (stacked) against communication SMs, and bus bandwidth against SMs.

    Parameters
    ----------
    df : pandas.DataFrame
        A ``"comm"`` result (:func:`gcexplore.comm_sweep`).
    collective, size_bytes : optional
        Which collective and size (default: the first collective, its largest size).
    tolerance : float, default 0.01
        The answer's tolerance (the fewest SMs within it of the best step is marked).

    Returns
    -------
    matplotlib.figure.Figure
        Left: stacked parts per split (gids ``"part:<column>"``), the measured step (``"step"``), the
        plain-streams step (``"plain"``), the answer (``"answer"``). Right: bus bandwidth of the
        collective alone and beside the compute (``"busbw:alone"``, ``"busbw:overlapped"``), with the
        whole-GPU value (``"busbw:plain"``).
    """
    check_result(df, "comm", "plot_comm")
    t = comm_table(df)
    collective = collective or str(t["collective"].iloc[0])
    g = t[t["collective"] == collective]
    if g.empty:
        have = ", ".join(sorted(t["collective"].unique()))
        raise ValueError(f"plot_comm: no {collective!r} rows; collectives here: {have}")
    size_bytes = int(size_bytes if size_bytes is not None else g["size_bytes"].max())
    g = g[g["size_bytes"] == size_bytes]
    if g.empty:
        raise ValueError(f"plot_comm: {collective} was not measured at {size_bytes} bytes")
    part = g[g["setup"] == "partition"].sort_values("comm_sm_count")
    plain = g[g["setup"] == "plain"]
    ans = comm_answer(t, tolerance)
    ans = ans[(ans["collective"] == collective) & (ans["size_bytes"] == size_bytes)]
    fig = new_figure(figsize or (11.0, 4.4))
    ax, bx = fig.subplots(1, 2)
    x = part["comm_sm_count"].to_numpy()
    width = 0.8 * (min(x[1:] - x[:-1]) if len(x) > 1 else 8)
    bottom = 0 * x.astype(float)
    for col, label, color in _PARTS:
        v = part[col].fillna(0).clip(lower=0).to_numpy()
        ax.bar(x, v, width, bottom=bottom, color=color, label=label, gid=f"part:{col}")
        bottom = bottom + v
    ax.plot(x, part["step_ms"], "k.-", label="step (median)", gid="step")
    if len(plain):
        ax.axhline(float(plain["step_ms"].iloc[0]), color="k", ls=":", lw=1, label="plain streams, NCCL's CTAs",
                   gid="plain")
    if len(ans):
        a = ans.iloc[0]
        ax.plot([a["answer_sm_count"]], [a["answer_step_ms"]], "r*", ms=12, gid="answer",
                label=f"fewest SMs within {tolerance:.0%} of best: {int(a['answer_sm_count'])}")
    ax.set_xlabel("SMs of the collective's partition (the rest compute)")
    ax.set_ylabel("ms per step (slowest rank)")
    ax.set_title(plain_text(f"{collective} {_size(size_bytes)} beside a GEMM chain: step and its parts"), fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    bx.plot(x, part["bus_bw_alone_gbs"], "o-", label="alone", gid="busbw:alone")
    bx.plot(x, part["bus_bw_gbs"], "s--", label="beside the compute", gid="busbw:overlapped")
    if len(plain):
        bx.axhline(float(plain["bus_bw_alone_gbs"].iloc[0]), color="k", ls=":", lw=1, gid="busbw:plain",
                   label="whole GPU, NCCL's CTAs")
    bx.set_xlabel("SMs of the collective's partition")
    bx.set_ylabel("bus bandwidth, GB/s")
    bx.set_ylim(bottom=0)
    bx.set_title(f"{collective} {_size(size_bytes)} over {int(g['nranks'].iloc[0])} GPUs", fontsize=10)
    bx.legend(fontsize=7)
    bx.grid(True, alpha=0.3)
    stamp(fig, df)
    return fig


_CONSTANT_COLORS = {"vllm": "tab:purple", "transformer_engine": "tab:orange", "deepep_v2": "tab:green",
                    "nccl_default": "0.45", "best": "tab:blue", "best_measured": "tab:cyan"}


def plot_comm_constants(df: pd.DataFrame, *, deepep_sms=None, confidence: float = 0.9, figsize=None) -> Figure:
    """Each engine's constant against the sweep's best, per collective (row) and size (column).

    Draws :func:`gcexplore.comm_constants` (it computes every number): per constant, its step over the best
    partition's as a bar (``gap``, %) with its interval; a constant with no number (DeepEP V2 without its
    count, a size the sweep lacks) is named on the axis with "n/a". Bars have gids
    ``"gap:<collective>:<size_bytes>:<constant>"``.

    Parameters
    ----------
    df : pandas.DataFrame
        A ``"comm"`` result, or the table :func:`gcexplore.comm_constants` returned.
    deepep_sms, confidence
        As :func:`gcexplore.comm_constants` (when ``df`` is a result).
    """
    from .constants import comm_constants

    t = df if "constant" in df.columns else comm_constants(df, deepep_sms=deepep_sms, confidence=confidence)
    if t.empty:
        raise ValueError("plot_comm_constants: the table has no rows (no collective measured at a partition)")
    colls = sorted(t["collective"].unique())
    sizes = sorted(t["size_bytes"].unique())
    fig = new_figure(figsize or (2.9 * len(sizes) + 1.0, 2.4 * len(colls) + 0.8))
    axes = fig.subplots(len(colls), len(sizes), squeeze=False, sharey="row")
    for i, coll in enumerate(colls):
        for j, size in enumerate(sizes):
            ax = axes[i][j]
            g = t[(t["collective"] == coll) & (t["size_bytes"] == size)]
            labels = []
            for x, r in enumerate(g.itertuples()):
                sm = (f" ({r.layout})" if r.constant == "best_measured" else
                      "" if r.sm_count != r.sm_count else f" ({int(r.sm_count)})")
                labels.append(plain_text(f"{r.constant}{sm}"))
                if r.gap != r.gap:  # no number: say so where the bar would be
                    ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=7, color="0.4")
                    continue
                ax.bar(x, 100 * r.gap, 0.7, color=_CONSTANT_COLORS.get(r.constant, "0.6"),
                       gid=f"gap:{coll}:{int(size)}:{r.constant}")
                ax.errorbar(x, 100 * r.gap, yerr=[[100 * (r.gap - r.gap_low)], [100 * (r.gap_high - r.gap)]],
                            color="k", lw=0.8, capsize=2)
            ax.axhline(0, color="k", lw=0.8)
            ax.set_xticks(range(len(labels)), labels, rotation=35, ha="right", fontsize=7)
            ax.tick_params(axis="y", labelsize=7)
            ax.grid(True, axis="y", alpha=0.3)
            best = g[g["constant"] == "best"]
            step = f", best {float(best['best_step_ms'].iloc[0]):.3g} ms" if len(best) else ""
            ax.set_title(plain_text(f"{coll} {_size(int(size))}{step}"), fontsize=8)
            if j == 0:
                ax.set_ylabel("step over the best partition's, %", fontsize=7)
    conf = t.attrs.get("confidence", confidence)
    stamp(fig, t, f"median step (slowest rank) at each constant's SMs over the best partition's, {conf:.0%} interval")
    return fig
