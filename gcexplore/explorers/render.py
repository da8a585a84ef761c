"""The explorers' pure drawing: result DataFrames in, a Figure or a table out.

Every number shown comes from one analysis call: :func:`gcexplore.summarize` of the whole run
(with its kernel trace when there is one); the summary table selects the chosen layout's rows of
that summary, so its bound and efficiency are the run's, the same as the sweep plot above it,
:func:`gcexplore.best_split` and :func:`gcexplore.layout_table`.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from .. import analysis as A
from ..analysis.trace import require_trace_of
from ..views import plot as _plot

__all__ = ["SUMMARY_COLUMNS", "render_fit_notes", "render_occupancy", "render_summary", "render_sweep",
           "render_throughput", "render_trace", "run_summary"]

#: Columns of gcexplore.summarize shown in the table, in this order, when present.
# The run's bound and the layout's efficiency come right after the makespan: on a narrow
# page the table scrolls, and these are the columns a user opened it for.
SUMMARY_COLUMNS = (
    "mode", "workload", "partition", "sm_count", "median_ms", "makespan_median_ms", "lower_bound_ms", "efficiency",
    "speedup_vs_sequential", "speedup_vs_streams", "slowdown_vs_alone", "p10_ms", "p90_ms", "noisy",
    "throughput_tflops", "bandwidth_gbs",
)


def run_summary(results: pd.DataFrame, trace: pd.DataFrame | None = None) -> pd.DataFrame:
    """:func:`gcexplore.summarize` of the whole run (with ``trace``: rates from GPU-busy time),
    after checking that ``trace`` is a trace of these results."""
    if trace is not None:
        require_trace_of(results, trace, "the explorer")
    return A.summarize(results, trace=trace)


def render_throughput(results: pd.DataFrame, layout: str | None = None, *,
                      trace: pd.DataFrame | None = None) -> Figure:
    """Throughput figure of one measured layout (see :func:`gcexplore.plot_throughput`); with
    ``trace`` (the kernel trace of the same run) every mode's rates, plain streams included,
    come from GPU-busy time."""
    if trace is not None:
        require_trace_of(results, trace, "render_throughput")
    return _plot.plot_throughput(results, layout=layout, trace=trace)


def render_occupancy(occupancy: pd.DataFrame) -> Figure:
    """SM occupancy figure of per-block records (see :func:`gcexplore.plot_occupancy`)."""
    return _plot.plot_occupancy(occupancy)


def render_trace(trace: pd.DataFrame, layout: str | None = None) -> tuple[Figure, Figure]:
    """Kernel timeline and estimated SMs in use of one layout of a kernel trace
    (see :func:`gcexplore.plot_timeline` and :func:`gcexplore.plot_sm_usage`)."""
    from ..views.timeline import plot_sm_usage, plot_timeline

    return plot_timeline(trace, layout=layout), plot_sm_usage(trace, layout=layout)


def render_sweep(results: pd.DataFrame, *, summary: pd.DataFrame | None = None, chosen: str | None = None) -> Figure:
    """Sweep figure with the best split and the ``chosen`` one marked (see :func:`gcexplore.plot_sweep`);
    ``summary``: :func:`run_summary` of ``results`` when already computed (the table below uses the same)."""
    return _plot.plot_sweep(results, summary=summary, chosen=chosen)


def render_summary(results: pd.DataFrame, layout: str | None = None, *, trace: pd.DataFrame | None = None,
                   summary: pd.DataFrame | None = None) -> pd.DataFrame:
    """The summary table of one layout: its rows of :func:`gcexplore.summarize` of the whole run.

    Parameters
    ----------
    results : pandas.DataFrame
        Overlap or sweep rows of one run.
    layout : str, optional
        The layout to show; default all of ``results``.
    trace : pandas.DataFrame, optional
        The kernel trace of the same run: rates from GPU-busy time (plain streams too).
    summary : pandas.DataFrame, optional
        :func:`run_summary` of ``results`` (and ``trace``) when already computed.

    Returns
    -------
    pandas.DataFrame
        One row per (mode, workload): medians, spread, and on the concurrent rows the
        layout's speedups and efficiency; ``lower_bound_ms`` is the run's (one value).
    """
    if summary is None:
        summary = run_summary(results, trace)
    rows = summary if layout is None else summary[summary["layout"] == layout]
    if rows.empty:
        raise ValueError(f"layout {layout!r} was not measured")
    cols = [c for c in SUMMARY_COLUMNS if c in rows.columns]
    return rows[cols].reset_index(drop=True)


def render_fit_notes(summary: pd.DataFrame) -> list[str]:
    """The partition-fit sentences of a :func:`run_summary` (``attrs["fit_notes"]``, computed by
    :func:`gcexplore.summarize` from the run's kernel trace): the kernels that waste their
    partition's SMs at the best layout; empty without a trace."""
    return [str(n) for n in summary.attrs.get("fit_notes") or []]
