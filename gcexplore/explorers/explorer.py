"""ipywidgets front ends: pick a split and workloads, measure, look.

Two controllers, each one object that owns its controls and displays itself:

* :class:`Explorer` (and :func:`explore`): split sliders that stop only on sizes the
  device can give, a workload per partition, repetitions and a Run button; shows the
  throughput plot, the SM occupancy plot and the summary table.
* :class:`SweepExplorer`: runs a sweep over every valid split, plots it with the best
  split marked; choosing a split shows its throughput, occupancy and summary.

Both also work offline over saved results (``from_results``), where the sliders move
over the measured splits and nothing is measured.

The drawing is done by pure functions (:func:`render_throughput`,
:func:`render_occupancy`, :func:`render_sweep`, :func:`render_summary`) that take
result DataFrames and return a Figure or a table; the classes only wire controls to
them. Importing this module touches no GPU: the API and profiler layers are imported
inside the live paths only.
"""

from __future__ import annotations

import html
from typing import Sequence

import pandas as pd
from matplotlib.figure import Figure

from .. import analysis as A
from ..views import plot as _plot
from ._base import CSS, Controller, W, catalog, load_result, unique_names, with_builtins
from ..schema import layout_key, parse_layout
from ..views.tune import plot_tune
from ..results.validate import check_result

__all__ = [
    "Explorer",
    "SweepExplorer",
    "explore",
    "render_occupancy",
    "render_summary",
    "render_sweep",
    "render_throughput",
    "render_trace",
]

# Columns of gcexplore.summarize shown in the table, in this order, when present.
_SUMMARY_COLUMNS = (
    "mode", "workload", "partition", "sm_count", "median_ms", "p10_ms", "p90_ms", "noisy", "makespan_median_ms",
    "slowdown_vs_alone", "speedup_vs_sequential", "speedup_vs_streams", "lower_bound_ms",
    "efficiency",
)


# ------------------------------------------------------------------ pure rendering


def render_throughput(results: pd.DataFrame, layout: str | None = None) -> Figure:
    """Throughput figure of one measured layout (see :func:`gcexplore.plot_throughput`)."""
    return _plot.plot_throughput(results, layout=layout)


def render_occupancy(occupancy: pd.DataFrame) -> Figure:
    """SM occupancy figure of per-block records (see :func:`gcexplore.plot_occupancy`)."""
    return _plot.plot_occupancy(occupancy)


def render_trace(trace: pd.DataFrame, layout: str | None = None) -> tuple[Figure, Figure]:
    """Kernel timeline and estimated SMs in use of one layout of a kernel trace
    (see :func:`gcexplore.plot_timeline` and :func:`gcexplore.plot_sm_usage`)."""
    from ..views.timeline import plot_sm_usage, plot_timeline

    return plot_timeline(trace, layout=layout), plot_sm_usage(trace, layout=layout)


def _load_trace(trace, where: str) -> pd.DataFrame | None:
    if trace is None:
        return None
    trace = load_result(trace)
    check_result(trace, "trace", where)
    return trace


class _TraceView:
    """The kernel timeline in the occupancy output, where a trace covers the layout."""

    trace: pd.DataFrame | None = None
    _trace_note: str | None = None

    def _draw_with_trace(self, layout: str, occupancy: pd.DataFrame | None, measured_layout: str | None,
                         note: str | None = None) -> None:
        """Occupancy as before; with a trace of ``layout``, its timeline and estimated SM use
        (after the measured occupancy when that was recorded at ``layout``)."""
        trace = self.trace
        if trace is None or not (trace["layout"] == layout).any():
            if self._trace_note and occupancy is None:
                note = f"{note or 'no SM occupancy records for this split'}; {self._trace_note}"
            self._draw_occupancy(occupancy, measured_layout, note)
            return
        measured = occupancy is not None and A.occupancy_layout(occupancy) == layout
        self._draw("occupancy", self.occupancy_output, lambda: (
            *((_plot.plot_occupancy(occupancy),) if measured else ()), *render_trace(trace, layout)))


def render_sweep(results: pd.DataFrame, chosen: str | None = None) -> Figure:
    """Sweep figure with the best split and the chosen one marked (see :func:`gcexplore.plot_sweep`)."""
    return _plot.plot_sweep(results, chosen=chosen)


def render_summary(results: pd.DataFrame, layout: str | None = None) -> pd.DataFrame:
    """The summary table of one layout: :func:`gcexplore.summarize` on its rows.

    Parameters
    ----------
    results : pandas.DataFrame
        Overlap or sweep rows.
    layout : str, optional
        The layout to summarise; default all of ``results``.

    Returns
    -------
    pandas.DataFrame
        One row per (mode, workload): medians, spread, speedups, lower bound.
    """
    rows = results if layout is None else results[results["layout"] == layout]
    if rows.empty:
        raise ValueError(f"layout {layout!r} was not measured")
    summary = A.summarize(rows)
    cols = [c for c in _SUMMARY_COLUMNS if c in summary.columns]
    return summary[cols].reset_index(drop=True)


# ========================================================================= Explorer


class Explorer(_TraceView, Controller):
    """Choose a split and workloads, run them, and see throughput, occupancy and summary.

    Live (a GPU is present), build it with :func:`explore` or ``Explorer(workloads)``;
    offline, over saved results, with :meth:`Explorer.from_results`.

    Parameters
    ----------
    workloads : mapping or sequence, optional
        What to offer for each partition: a mapping ``{name: workload}`` or a sequence
        of built-in names and named callables (each called as ``fn(stream=...)``).
        Their number fixes the number of partitions: ``n`` workloads give ``n - 1``
        split sliders and the last workload runs on the remainder. Default: the
        built-in compute/memory pair.
    device : int, default 0
        The GPU to measure on.
    repeats : int, default 10
        Initial value of the repetitions control.
    trace : bool, default False
        Also record a CUPTI kernel trace of each run (``profile_overlap(trace=True)``)
        and show its kernel timeline and estimated SMs in use. Where CUPTI cannot run
        (:class:`gcexplore.TraceUnavailable`), the run goes on without it and the
        occupancy output says why in one line.

    Attributes
    ----------
    sliders : list of ipywidgets.SelectionSlider
        One per partition but the last ("p0 SMs", "p1 SMs", ...), stopping only on
        sizes the device can give (live) or on measured sizes (offline).
    remainder_label : ipywidgets.HTML
        What is left for the last partition.
    workload_pickers : list of ipywidgets.Dropdown
        The workload of each partition ("p0", ..., "remainder").
    repeats : ipywidgets.IntSlider
        Repetitions per mode.
    run_button : ipywidgets.Button
        "Run": measures the chosen split (live); hidden offline, where moving a slider
        redraws (``run()`` still redraws the chosen split).
    progress : ipywidgets.IntProgress
        Visible while measuring.
    error_box : ipywidgets.HTML
        The last error, one line, hidden when there is none.
    plot_output, occupancy_output, table_output : ipywidgets.Output
        Throughput plot, SM occupancy plot, summary table.
    results, occupancy, trace : pandas.DataFrame or None
        The rows shown (the last measurement, or the saved results); ``occupancy_output``
        shows the kernel timeline and estimated SMs in use where ``trace`` covers the split.
    """

    def __init__(self, workloads=None, device: int = 0, *, repeats: int = 10, trace: bool = False,
                 _offline: tuple | None = None):
        super().__init__()
        self.device, self.want_trace = device, bool(trace)
        self.results: pd.DataFrame | None = None
        self.occupancy: pd.DataFrame | None = None
        self.live = _offline is None
        if self.live:
            self._setup_live(workloads, repeats)
        else:
            self._setup_offline(*_offline)
        self.run_button = W.Button(description="Run", button_style="primary",
                                   tooltip="measure this split" if self.live
                                   else "show this split's recorded results")
        self.run_button.add_class(CSS["run"])
        self.run_button.on_click(lambda _b: self.run())
        if not self.live:
            self.run_button.layout.display = "none"  # the sliders redraw by themselves
        for s in self.sliders:
            s.observe(self._on_split_change, names="value")
        self._update_remainder()
        controls = W.VBox([*self.sliders, self.remainder_label, *self.workload_pickers,
                           self.repeats, W.HBox([self.run_button, self.progress])])
        self._root = W.VBox([controls, self.error_box, self.status, self.plot_output,
                             self.occupancy_output, self.table_output])
        self._root.add_class(self._root_class)
        if not self.live:
            self.run()

    # -- construction -------------------------------------------------------------

    @classmethod
    def from_results(cls, results, occupancy: pd.DataFrame | None = None, trace=None) -> "Explorer":
        """An explorer over saved results: the sliders move over the measured splits.

        Parameters
        ----------
        results : pandas.DataFrame or str
            Rows of :func:`gcexplore.profile_overlap` / :func:`gcexplore.sweep`, or
            the name of a recorded result (``"sweep"``, ``"torch_sweep"``) loaded
            with :func:`gcexplore.results.load_recorded`.
        occupancy : pandas.DataFrame or str, optional
            Per-block records of :func:`gcexplore.occupancy` (or a recorded name),
            shown when the chosen split is the one they were recorded at.
        trace : pandas.DataFrame or str, optional
            A kernel trace of the same runs (``trace=True``, or ``"trace"`` for the
            recorded one): for the splits it covers, the occupancy output shows its
            kernel timeline and the SMs in use estimated from grid, block and resources.
        """
        results = load_result(results)
        check_result(results, "overlap", "Explorer.from_results")
        occupancy = load_result(occupancy) if occupancy is not None else None
        if occupancy is not None:
            check_result(occupancy, "occupancy", "Explorer.from_results(occupancy=...)")
        return cls(_offline=(results, occupancy, _load_trace(trace, "Explorer.from_results(trace=...)")))

    def _setup_live(self, workloads, repeats: int) -> None:
        from .. import api  # lazy: touches the driver

        self.info = api.device_info(self.device)
        self.catalog = catalog(workloads)
        names = list(self.catalog)  # the user's, one per partition
        options = with_builtins(self.catalog)
        if len(names) < 2:
            raise ValueError(f"an explorer needs at least two workloads to split the device "
                             f"between, got {names}")
        n_groups = len(names) - 1
        valid = self.info.valid_sm_counts()
        # Leave at least the smallest partition for each later group and the remainder.
        room = self.info.sm_count - n_groups * self.info.min_partition_size
        sizes = [c for c in valid if c <= room]
        if not sizes:
            raise ValueError(f"{self.info.name} has {self.info.sm_count} SMs: too few for "
                             f"{len(names)} partitions of at least "
                             f"{self.info.min_partition_size}")
        self.total_sm = self.info.sm_count
        start = sizes[min(len(sizes) - 1, 2)]  # 24 SMs on the H100: a useful start
        self.sliders = [self._slider(i, sizes, start if i == 0 else sizes[0])
                        for i in range(n_groups)]
        self.workload_pickers = [self._picker(i, n_groups, options, names[i])
                                 for i in range(len(names))]
        for p in self.workload_pickers:
            p.observe(lambda _c: self._update_remainder(), names="value")
        self.repeats = W.IntSlider(value=repeats, min=1, max=100, description="repeats",
                                   continuous_update=False)
        self.repeats.add_class(CSS["repeats"])
        self.remainder_label = W.HTML()
        self.remainder_label.add_class(CSS["remainder"])

    def _setup_offline(self, results: pd.DataFrame, occupancy: pd.DataFrame | None,
                       trace: pd.DataFrame | None = None) -> None:
        self.trace = trace
        _plot.require_result(results, ["layout", "mode", "workload", "partition", "sm_count",
                                 "duration_ms"], "Explorer.from_results",
                       "the DataFrame from gcexplore.profile_overlap() or gcexplore.sweep()")
        self.results, self.occupancy = results, occupancy
        placement = A.placement(results)
        self.layouts = {parse_layout(lay): lay for lay in dict.fromkeys(results["layout"])}
        n_groups = max(1, len(placement) - 1)
        self.total_sm = int(results.attrs.get("device_sm_count")
                            or sum(next(iter(self.layouts))))
        best = A.best_layout(results)
        start = parse_layout(best)
        self.sliders = []
        for i in range(n_groups):
            options = sorted({key[i] for key in self.layouts if len(key) > i})
            self.sliders.append(self._slider(i, options, start[i]))
        self.workload_pickers = [
            self._picker(i, n_groups, [w], w) for i, (_p, w) in enumerate(placement)]
        for p in self.workload_pickers:
            p.disabled = True  # recorded: the placement is what was measured
        self.repeats = W.IntSlider(value=int(results.attrs.get("repeats") or 1), min=1,
                                   max=max(100, int(results.attrs.get("repeats") or 1)),
                                   description="repeats", disabled=True)
        self.repeats.add_class(CSS["repeats"])
        self.remainder_label = W.HTML()
        self.remainder_label.add_class(CSS["remainder"])
        self.status.value = ("<i>Recorded results: " + html.escape(
            _plot.figure_stamp(results.attrs)) + ". Move a slider to see another "
            "measured split.</i>")

    @staticmethod
    def _slider(i: int, options: list[int], value: int) -> W.SelectionSlider:
        s = W.SelectionSlider(options=options, value=value, description=f"p{i} SMs",
                              continuous_update=False,
                              style={"description_width": "initial"})
        s.add_class(CSS["split"])
        return s

    @staticmethod
    def _picker(i: int, n_groups: int, names: list[str], value: str) -> W.Dropdown:
        label = "remainder" if i == n_groups else f"p{i}"
        d = W.Dropdown(options=names, value=value, description=label)
        d.add_class(CSS["workload"])
        return d

    # -- state --------------------------------------------------------------------

    @property
    def split(self) -> list[int]:
        """The SM counts chosen on the sliders (the groups before the remainder)."""
        return [int(s.value) for s in self.sliders]

    @property
    def layout(self) -> str:
        """The chosen split as a layout label, e.g. ``"24+108"``."""
        counts = self.split
        rest = self.total_sm - sum(counts)
        return "+".join(map(str, counts + ([rest] if rest else [])))

    def _remainder(self) -> int:
        return self.total_sm - sum(self.split)

    def _update_remainder(self) -> bool:
        rest = self._remainder()
        last = self.workload_pickers[-1].value
        if self.live and rest < self.info.min_partition_size:
            self.remainder_label.value = (
                f"<span style='color:#b00020'>remainder: {rest} SMs — the last partition "
                f"needs at least {self.info.min_partition_size}; lower a slider</span>")
            self.run_button.disabled = True
            return False
        self.remainder_label.value = f"remainder: <b>{rest} SMs</b> → {html.escape(last)}"
        self.run_button.disabled = False
        return True

    def _on_split_change(self, _change) -> None:
        if self._update_remainder() and not self.live:
            self.run()

    # -- actions ------------------------------------------------------------------

    def run(self) -> None:
        """Measure the chosen split (live) or show its saved rows (offline), and redraw.

        Errors are shown in the widget (``error_box``; the exception in
        ``last_error``), never raised into the notebook.
        """
        self._clear_error()
        if self.live:
            if not self._measure():
                return
        else:
            key = tuple(self.split)
            match = [lay for k, lay in self.layouts.items() if k[:len(key)] == key]
            if not match:
                measured = ", ".join(sorted(self.layouts.values(), key=layout_key))
                self._show_error(ValueError(f"split {self.layout} was not measured; measured "
                                            f"splits: {measured}"), "showing this split")
                return
            self._shown_layout = match[0]
        self._redraw()

    def _measure(self) -> bool:
        import gcexplore  # lazy: the profiler and the driver

        names = [p.value for p in self.workload_pickers]
        workloads = unique_names(names, self.catalog)
        self._progress_start(2, "measuring")
        try:
            try:
                results, trace = self._profile(gcexplore, workloads)
            except Exception as exc:
                self._show_error(exc, f"measuring {self.layout}")
                return False
            self._progress_step("occupancy")
            occupancy, self._occupancy_note = None, None
            try:
                occupancy = gcexplore.occupancy(workloads, self.split, device=self.device)
            except Exception as exc:  # e.g. a user callable cannot record %smid
                self._occupancy_note = f"no SM occupancy: {type(exc).__name__}: {exc}"
            self._progress_step()
        finally:
            self._progress_done()
        self.results, self.occupancy, self.trace = results, occupancy, trace
        self._shown_layout = str(results["layout"].iloc[0])
        self.status.value = "<i>" + html.escape(_plot.figure_stamp(results.attrs)) + "</i>"
        return True

    def _profile(self, gcexplore, workloads):
        """``(results, trace)``: the trace None when off or when CUPTI cannot run (then a note)."""
        kwargs = dict(repeats=int(self.repeats.value), device=self.device)
        self._trace_note = None
        if self.want_trace:
            try:
                return tuple(gcexplore.profile_overlap(workloads, self.split, trace=True, **kwargs))
            except gcexplore.TraceUnavailable as exc:
                self._trace_note = f"no kernel trace: {exc}".splitlines()[0]
        return gcexplore.profile_overlap(workloads, self.split, **kwargs), None

    def _redraw(self) -> None:
        layout = self._shown_layout
        self._draw("throughput", self.plot_output,
                   lambda: render_throughput(self.results, layout))
        self._draw_with_trace(layout, self.occupancy, None if self.live else layout,
                              getattr(self, "_occupancy_note", None))
        self._draw("summary", self.table_output, lambda: render_summary(self.results, layout))


def explore(workloads=None, device: int = 0, *, repeats: int = 10, trace: bool = False) -> Explorer:
    """A live :class:`Explorer` on ``device`` (display it, or let the cell show it).

    Raises :class:`gcexplore.UnsupportedError` without a GPU; over saved results use
    ``Explorer.from_results(gcexplore.results.load_recorded("sweep"))``.
    """
    try:
        return Explorer(workloads, device, repeats=repeats, trace=trace)
    except Exception as exc:
        from ..device.driver import UnsupportedError

        if isinstance(exc, UnsupportedError):
            raise UnsupportedError(
                f"{exc}; to explore recorded results instead use "
                "gcexplore.Explorer.from_results(gcexplore.results.load_recorded('sweep'))"
            ) from exc
        raise


# ==================================================================== SweepExplorer


class SweepExplorer(_TraceView, Controller):
    """Sweep every split, see the makespan curve with the best split marked, and pick a
    split to see its throughput, SM occupancy and summary.

    Parameters
    ----------
    workloads : mapping or sequence, optional
        As in :class:`Explorer` (default the built-in pair); the first workload gets
        the swept partition, the rest share what is left.
    device : int, default 0
    repeats : int, default 5
        Repetitions per mode and layout.
    sm_counts : list of int, optional
        The first partition's sizes to sweep; default every valid size.

    Attributes
    ----------
    run_button : ipywidgets.Button
        "Run sweep" (live only; offline it is disabled).
    tune_button : ipywidgets.Button
        "Tune": :func:`gcexplore.tune` instead of a sweep (live only; offline disabled).
    split_slider : ipywidgets.SelectionSlider
        "split": the measured first-partition sizes; starts at the best split.
    sweep_output, plot_output, occupancy_output, table_output : ipywidgets.Output
    progress, error_box : as in :class:`Explorer`
    results, occupancy : pandas.DataFrame or None
    """

    _root_class = CSS["sweep_root"]

    def __init__(self, workloads=None, device: int = 0, *, repeats: int = 5,
                 sm_counts: Sequence[int] | None = None, _offline: tuple | None = None):
        super().__init__()
        self.device, self.sm_counts = device, sm_counts
        self.live = _offline is None
        self.results: pd.DataFrame | None = None
        self.occupancy: pd.DataFrame | None = None
        self._occupancy_cache: dict[str, pd.DataFrame | str] = {}
        self.sweep_output = W.Output()
        self.sweep_output.add_class(CSS["sweep"])
        self.split_slider = W.SelectionSlider(options=[0], value=0, description="split",
                                              continuous_update=False, disabled=True)
        self.split_slider.add_class(CSS["split"])
        self.repeats = W.IntSlider(value=repeats, min=1, max=100, description="repeats",
                                   continuous_update=False, disabled=not self.live)
        self.repeats.add_class(CSS["repeats"])
        self.run_button = W.Button(description="Run sweep", button_style="primary",
                                   disabled=not self.live)
        self.run_button.add_class(CSS["run"])
        self.tune_button = W.Button(description="Tune", disabled=not self.live,
                                    tooltip="find the best split measuring only a few layouts")
        self.tune_button.add_class(CSS["tune"])
        if self.live:
            from .. import api  # lazy: touches the driver

            self.info = api.device_info(device)
            self.catalog = catalog(workloads)
            self.run_button.on_click(lambda _b: self.run())
            self.tune_button.on_click(lambda _b: self.tune())
            self.status.value = (f"<i>{html.escape(self.info.name)}: press Run sweep to "
                                 f"measure {' + '.join(map(html.escape, self.catalog))} at "
                                 "every split.</i>")
        self.split_slider.observe(lambda _c: self._show_split(), names="value")
        self._root = W.VBox([
            W.HBox([self.run_button, self.tune_button, self.repeats, self.progress]), self.error_box,
            self.status, self.sweep_output, self.split_slider, self.plot_output,
            self.occupancy_output, self.table_output])
        self._root.add_class(self._root_class)
        if not self.live:
            results, occupancy, self.trace = _offline
            self.status.value = ("<i>Recorded results: " + html.escape(
                _plot.figure_stamp(results.attrs)) + ". Choose a split to see it.</i>")
            self._set_results(results, occupancy)

    @classmethod
    def from_results(cls, results, occupancy: pd.DataFrame | None = None, trace=None) -> "SweepExplorer":
        """A sweep view over saved sweep results (a DataFrame or a recorded name); ``occupancy``
        and ``trace`` (a kernel trace or a recorded name) as in :meth:`Explorer.from_results`."""
        results = load_result(results)
        _plot.require_result(results, ["layout", "split_sm_count", "mode", "rep", "workload",
                                 "partition", "makespan_ms"], "SweepExplorer.from_results",
                       "the DataFrame from gcexplore.sweep()")
        check_result(results, "sweep", "SweepExplorer.from_results")
        occupancy = load_result(occupancy) if occupancy is not None else None
        if occupancy is not None:
            check_result(occupancy, "occupancy", "SweepExplorer.from_results(occupancy=...)")
        return cls(_offline=(results, occupancy, _load_trace(trace, "SweepExplorer.from_results(trace=...)")))

    @property
    def layout(self) -> str | None:
        """The layout of the chosen split (None before a sweep)."""
        return getattr(self, "_layouts", {}).get(self.split_slider.value)

    def run(self) -> None:
        """Run the sweep (live), with progress; errors are shown in the widget.

        Rows measured before an error or an interrupt are kept and drawn (the
        profiler hands them over on the exception, see :func:`gcexplore.sweep`).
        """
        import gcexplore  # lazy: the profiler and the driver

        kwargs = dict(repeats=int(self.repeats.value), device=self.device)
        if self.sm_counts is not None:
            kwargs["sm_counts"] = list(self.sm_counts)
        results = self._live("sweeping", "the sweep", lambda: gcexplore.sweep(dict(self.catalog), **kwargs))
        if results is not None:
            self._set_results(results, None)

    def tune(self) -> None:
        """Run the tuner (live): the best split measuring few layouts; its plot replaces
        the sweep plot and the split slider moves over the layouts it measured, starting at
        its answer. Rows measured before an error or an interrupt are kept and drawn."""
        import gcexplore  # lazy: the tuner and the driver

        kwargs = {"device": self.device}
        if self.sm_counts is not None:
            kwargs["sm_counts"] = list(self.sm_counts)
        results = self._live("tuning", "the tuner", lambda: gcexplore.tune(dict(self.catalog), **kwargs))
        if results is not None and len(results):
            answer = results.attrs.get("answer")
            start = int(parse_layout(answer)[0]) if answer else None
            self._set_results(results, None, draw=plot_tune, start=start)
            if results.attrs.get("reason"):
                self.status.value += "<br>" + html.escape(results.attrs["reason"][0])

    def _live(self, doing: str, what: str, call):
        """``call()`` with progress and errors shown; the partial rows of an aborted run."""
        self._clear_error()
        # The profiler's tqdm.auto bar is shown inside sweep_output (a notebook bar there),
        # replaced by the plot when done.
        self._progress_start(1, doing)
        results = None
        try:
            with self.sweep_output:
                results = call()
        except BaseException as exc:  # noqa: BLE001 - Ctrl-C too: keep and draw the rows
            self._show_error(exc, what)
            partial = getattr(exc, "partial", None)  # MeasurementFailed / ...Interrupted
            if isinstance(partial, pd.DataFrame) and not partial.empty:
                results = partial
        finally:
            self._progress_step()
            self._progress_done()
        if results is not None:
            self.status.value = "<i>" + html.escape(_plot.figure_stamp(results.attrs)) + "</i>"
        return results

    def _set_results(self, results: pd.DataFrame, occupancy: pd.DataFrame | None, *, draw=None,
                     start: int | None = None) -> None:
        self.results, self.occupancy = results, occupancy
        per_split = results.drop_duplicates("split_sm_count")
        self._layouts = dict(zip(per_split["split_sm_count"].astype(int), per_split["layout"]))
        best = start if start is not None else int(parse_layout(A.best_layout(results))[0])
        self._sweep_draw = draw  # None: the sweep is redrawn with the chosen split marked
        if draw is not None:
            self._draw("sweep", self.sweep_output, lambda: draw(results))
        self._updating = True  # options then value: draw once, at the end
        try:
            self.split_slider.options = sorted(self._layouts)
            self.split_slider.value = best
            self.split_slider.disabled = False
        finally:
            self._updating = False
        self._show_split()

    def _show_split(self) -> None:
        layout = self.layout
        if self.results is None or layout is None or getattr(self, "_updating", False):
            return
        if getattr(self, "_sweep_draw", None) is None:
            self._draw("sweep", self.sweep_output, lambda: render_sweep(self.results, layout))
        self._draw("throughput", self.plot_output,
                   lambda: render_throughput(self.results, layout))
        if self.live:
            self._live_occupancy(layout)
        else:
            self._draw_with_trace(layout, self.occupancy, layout)
        self._draw("summary", self.table_output, lambda: render_summary(self.results, layout))

    def _live_occupancy(self, layout: str) -> None:
        """Occupancy of the chosen split, measured once per split and kept."""
        import gcexplore

        if layout not in self._occupancy_cache:
            counts = list(parse_layout(layout)[:len(self.catalog) - 1])
            try:
                self._occupancy_cache[layout] = gcexplore.occupancy(
                    dict(self.catalog), counts, device=self.device)
            except Exception as exc:  # e.g. user callables cannot record %smid
                self._occupancy_cache[layout] = f"no SM occupancy: {type(exc).__name__}: {exc}"
        got = self._occupancy_cache[layout]
        if isinstance(got, str):
            self._draw_occupancy(None, layout, got)
        else:
            self.occupancy = got
            self._draw_occupancy(got, None)


