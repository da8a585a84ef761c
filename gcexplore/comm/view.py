"""Figure of a communication-SMs result: the step and its parts against the collective's SMs, and
the collective's bus bandwidth against its SMs."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from .analysis import comm_answer, comm_table
from ..results.validate import check_result
from ..views._style import new_figure, plain_text, stamp

__all__ = ["plot_comm"]

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
