"""Figure of a scaling result: rate and parallel efficiency against SM count."""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from .. import analysis as A
from ..analysis.scaling import SATURATION, scaling_facts
from ..results.run import require_one_run
from ..results.validate import check_result
from ._style import WORKLOAD_COLORS, fmt_value, metric_label, new_figure, require_result, stamp

__all__ = ["plot_scaling"]


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
    df = _numeric_sm_counts(df)
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
        ax.set_ylabel(metric_label(unit))
        ax.set_ylim(bottom=0)
        # the title names the quantity drawn (TFLOP/s, GB/s, calls/s), never a generic "throughput"
        ax.set_title(f"{metric_label(unit)} vs SMs\nmedian, p10–p90 band", fontsize=9)
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
    stamp(fig, df, _headline(scaling_facts(df, metric)))
    return fig


def _numeric_sm_counts(df: pd.DataFrame) -> pd.DataFrame:
    """SM counts as numbers (a file may hold them as text: "8", "16"), so the axis sorts 8 < 16 < 112."""
    if pd.api.types.is_numeric_dtype(df["sm_count"]):
        return df
    # check_result has refused values that are not numbers
    out = df.assign(sm_count=pd.to_numeric(df["sm_count"]).astype("int64"))
    out.attrs.update(df.attrs)
    return out


def _headline(facts: pd.DataFrame) -> str:
    """The takeaway per workload: efficiency at the largest size, and where its rate saturates."""
    parts = []
    r: Any  # a row: its fields are the columns' values (pandas-stubs types each as any scalar)
    for r in facts.itertuples():
        text = f"{r.workload}: {r.efficiency_at_largest:.0%} parallel efficiency at {r.largest_sm} SMs"
        if r.saturates_sm <= r.largest_sm / 2:  # it stops gaining from more SMs well before the largest
            name, _, unit = metric_label(r.unit).partition(" (")
            text += (f": {SATURATION:.0%} of its peak {name} ({fmt_value(r.peak)} {unit.split(',')[0].rstrip(')')}) "
                     f"already at {r.saturates_sm} SMs")
        parts.append(text)
    return "\n".join(parts)
