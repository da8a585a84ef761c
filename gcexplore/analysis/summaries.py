"""The summary of any result: the dispatcher only. Each kind's summary lives with its kind and is
named by its declaration (:attr:`gcexplore.results.kinds.Kind.summary`); the result is computed once
per unchanged frame (the run's memo, under the frame's token)."""

from __future__ import annotations

import pandas as pd

from ..results import kinds as _kinds
from ..results.run import per_run, run_of, token
from ..results.validate import ResultError, check_result, check_trace_matches, open_run
from . import trace as busy
from .overlap import best_layout

__all__ = ["summarize"]


def summarize(df: pd.DataFrame, trace: pd.DataFrame | None = None) -> pd.DataFrame:
    """Medians and spread from the raw samples, with the derived comparisons.

    Dispatches on the result's kind (``df.attrs["kind"]``, else its columns). Rows of
    several runs are summarized per run (``device_name`` and ``run_id`` columns).

    Overlap and sweep results: one row per (layout, mode, workload), columns
    ``layout``, ``split_sm_count``, ``mode``, ``workload``, ``partition``, ``sm_count``,
    ``requested_sm_count``, ``reps``, ``median_ms``, ``p10_ms``, ``p90_ms``, ``iqr_ms``
    (of ``duration_ms``), ``noisy`` (IQR > 10% of the median), ``makespan_median_ms``
    (median over repetitions of the mode's makespan), ``throughput_tflops`` and
    ``bandwidth_gbs`` (medians), ``lower_bound_ms`` (one value for the run, on every row),
    and on the concurrent rows only (NaN on the alone, sequential and streams rows, which
    they do not describe) the layout's comparisons (the same on both its concurrent rows;
    one row per layout in :func:`layout_table`):

    - ``speedup_vs_sequential``: sequential makespan / concurrent makespan (medians);
    - ``speedup_vs_streams``: streams makespan / concurrent makespan;
    - ``slowdown_vs_alone``: the workload's concurrent median / its alone median on
      the same partition (per workload);
    - ``interference_free_ms``: the makespan the layout would give if its partitions
      shared nothing: the slowest workload's ``alone`` median on its own partition of
      that layout (NaN without ``alone`` rows);
    - ``interference``: concurrent makespan / ``interference_free_ms``, what sharing
      memory bandwidth, L2 and power costs at this layout (1.0 = nothing);
    - ``split_loss``: ``interference_free_ms`` / ``lower_bound_ms``, what giving each
      workload fewer SMs than its best costs at this layout (1.0 = nothing);
    - ``lower_bound_ms``: :func:`lower_bound`, one value for the whole run: no layout
      of it can beat it (up to the measured spread);
    - ``efficiency``: ``lower_bound_ms`` / concurrent makespan
      (= 1 / (``interference`` x ``split_loss``)); at most 1 up to the spread.

    Scaling results: one row per (workload, sm_count) with the same statistics plus
    ``speedup`` (median at the smallest size / median here) and
    ``parallel_efficiency`` (speedup / (sm_count / smallest sm_count)).

    Isolation results: one row per (scenario, role, workload) with the statistics,
    ``sm_count`` and ``slowdown_vs_alone`` (median / the same role's ``alone`` median).

    Occupancy results: :func:`sm_busy`. Traces: :func:`gcexplore.busy.busy_time`.

    Serving results: one row per run, :func:`gcexplore.serving_table`.

    Tune results: as overlap results (their rows are concurrent ones); see also
    :func:`tune_table`. PM samples (kind ``"pm"``): per repetition group, ``samples``
    and the means of the counters over its whole window, ``dram_pct_max``; per workload
    with the trace: :func:`gcexplore.dram_summary`.

    Rates (``throughput_tflops``, ``bandwidth_gbs``) of a mode in
    :data:`SPAN_INCLUDES_WAIT` (plain streams) are NaN, with the reason in
    ``attrs["rate_notes"]``. With ``trace`` (the kernel trace of the same run), every
    mode's rates come from GPU-busy time instead and the columns of
    :func:`gcexplore.busy.trace_summary` are added; a trace of other workloads or of
    another run is refused (ValueError, :func:`gcexplore.analysis.trace.require_trace_of`).

    ``attrs["fit_notes"]`` (sentences, :mod:`gcexplore.analysis.waves`): for a scaling
    result, the sizes on a plateau and the SMs they waste (:func:`gcexplore.fit_table`; with
    ``trace``, each size's waves); for a traced overlap or sweep result, the kernels that waste
    their partition's SMs at the best layout and what that costs (:func:`gcexplore.partition_fit`).
    """
    kind = open_run(df, _kinds.names(), "summarize", one_run=False).kind
    key = ("summary", None if trace is None else token(trace))
    return run_of(df).memo(key, lambda: _summarize(df, kind, trace)).copy()


def _summarize(df: pd.DataFrame, kind: str, trace: pd.DataFrame | None) -> pd.DataFrame:
    one = _kinds.resolve(_kinds.get(kind).summary)
    if trace is not None and kind == "scaling":  # the trace adds each size's waves to the fit hints only
        check_result(trace, "trace", "summarize(trace=...)")
        ours, theirs = set(df["workload"].astype(str)), set(trace["workload"].astype(str))
        if not theirs <= ours:
            raise ResultError(f"summarize: the trace's workloads {sorted(theirs - ours)} are not in this scaling "
                              f"result's {sorted(ours)}; pass the trace measured with it (scaling(..., trace=True))")
    elif trace is not None:
        check_trace_matches(df, trace, "summarize", kind)
    out = per_run(df, one)
    if trace is not None and kind != "scaling":
        out = busy.with_trace(out, df, trace)
    return _with_fit(out, df, kind, trace)


def _with_fit(out: pd.DataFrame, df: pd.DataFrame, kind: str, trace: pd.DataFrame | None) -> pd.DataFrame:
    """``attrs["fit_notes"]``: the plateau hints of a scaling run, the kernels that waste their partition's
    SMs at the chosen split of a traced result (:mod:`.waves`)."""
    from .waves import fit_notes, fit_table

    if kind == "scaling":
        out.attrs["fit_notes"] = fit_table(df, trace).attrs["hints"]
    elif trace is not None:
        try:
            layout = best_layout(df) if kind in ("overlap", "sweep", "tune") else None
        except (ValueError, KeyError):  # no concurrent layout to choose: every layout traced
            layout = None
        out.attrs["fit_notes"] = fit_notes(trace, layout)
    return out

