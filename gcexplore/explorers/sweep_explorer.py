"""The :class:`SweepExplorer`: sweep (or tune) every split, see the makespan curve with the best
split marked, and pick a split to see its throughput, SM occupancy and summary table.

The sweep plot and every split's table come from one :func:`gcexplore.summarize` of the whole
run (:meth:`Controller.run_summary`), so their bound and efficiency agree. Importing this module
touches no GPU.
"""

from __future__ import annotations

from typing import Any, Sequence, cast

import pandas as pd

from .. import analysis as A
from ..results.validate import check_result
from ..schema import parse_layout
from ..views import plot as _plot
from ..views.tune import plot_tune
from ._base import CSS, OFFLINE_REASON, Controller, TraceView, W, catalog, esc, load_result, load_trace
from .render import render_summary, render_sweep, render_throughput

__all__ = ["SweepExplorer"]


class SweepExplorer(TraceView, Controller):
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
        self.run_button = W.Button(description="Run sweep", button_style="primary" if self.live else "",
                                   disabled=not self.live, tooltip="" if self.live else OFFLINE_REASON)
        self.run_button.add_class(CSS["run"])
        self.tune_button = W.Button(description="Tune", disabled=not self.live,
                                    tooltip="find the best split measuring only a few layouts" if self.live
                                    else OFFLINE_REASON)
        self.tune_button.add_class(CSS["tune"])
        if self.live:
            from ..device import driver  # lazy: touches the driver

            self.info = driver.device_info(device)
            self.catalog = catalog(workloads)
            self.run_button.on_click(lambda _b: self.run())
            self.tune_button.on_click(lambda _b: self.tune())
            self.status.value = (f"<i>{esc(self.info.name)}: press Run sweep to "
                                 f"measure {' + '.join(map(esc, self.catalog))} at "
                                 "every split.</i>")
        self.split_slider.observe(lambda _c: self._show_split(), names="value")
        self._root = W.VBox([
            W.HBox([self.run_button, self.tune_button, self.repeats, self.progress]), self.error_box,
            self.status, self.sweep_output, self.split_slider, self.plot_output, self.fit_label,
            self.occupancy_output, self.table_output])
        self._root.add_class(self._root_class)
        if _offline is not None:
            results, occupancy, self.trace = _offline
            recorded = int(results.attrs.get("repeats") or results["rep"].max() + 1)
            self.repeats.max = max(self.repeats.max, recorded)
            self.repeats.value = recorded  # the recording's repetitions, not the live default
            self.status.value = ("<i>Recorded results: " + esc(
                _plot.figure_stamp(results.attrs)) + ". Choose a split to see it. Run sweep, Tune and "
                "repeats are disabled: " + esc(OFFLINE_REASON) + ".</i>")
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
        return cls(_offline=(results, occupancy,
                             load_trace(trace, results, "SweepExplorer.from_results(trace=...)")))

    @property
    def layout(self) -> str | None:
        """The layout of the chosen split (None before a sweep)."""
        return getattr(self, "_layouts", {}).get(self.split_slider.value)

    def run(self) -> None:
        """Run the sweep (live), with progress; errors are shown in the widget.

        Rows measured before an error or an interrupt are kept and drawn (the
        profiler hands them over on the exception, see :func:`gcexplore.sweep`).
        """
        from .. import experiments  # lazy: the profiler and the driver

        kwargs: dict[str, Any] = dict(repeats=int(self.repeats.value), device=self.device)
        if self.sm_counts is not None:
            kwargs["sm_counts"] = list(self.sm_counts)
        results = self._live("sweeping", "the sweep", lambda: experiments.sweep(dict(self.catalog), **kwargs))
        if results is not None:
            self._set_results(results, None)

    def tune(self) -> None:
        """Run the tuner (live): the best split measuring few layouts; its plot replaces
        the sweep plot and the split slider moves over the layouts it measured, starting at
        its answer. Rows measured before an error or an interrupt are kept and drawn."""
        from .. import experiments  # lazy: the tuner and the driver

        kwargs: dict[str, Any] = {"device": self.device}
        if self.sm_counts is not None:
            kwargs["sm_counts"] = list(self.sm_counts)
        results = self._live("tuning", "the tuner", lambda: experiments.tune(dict(self.catalog), **kwargs))
        if results is not None and len(results):
            answer = results.attrs.get("answer")
            start = int(parse_layout(answer)[0]) if answer else None
            self._set_results(results, None, draw=plot_tune, start=start)
            if results.attrs.get("reason"):
                self.status.value += "<br>" + esc(results.attrs["reason"][0])

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
            self.status.value = "<i>" + esc(_plot.figure_stamp(results.attrs)) + "</i>"
        return results

    def _set_results(self, results: pd.DataFrame, occupancy: pd.DataFrame | None, *, draw=None,
                     start: int | None = None) -> None:
        self.results, self.occupancy = results, occupancy
        per_split = results.drop_duplicates("split_sm_count")
        self._layouts = dict(zip(per_split["split_sm_count"].astype(int), per_split["layout"]))
        best = start if start is not None else int(parse_layout(A.best_split(self.run_summary())["layout"])[0])
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
            self._draw("sweep", self.sweep_output,
                       lambda: render_sweep(cast(pd.DataFrame, self.results), summary=self.run_summary(),
                                            chosen=layout))
        self._draw("throughput", self.plot_output,
                   lambda: render_throughput(cast(pd.DataFrame, self.results), layout,  # checked above
                                             trace=self.trace_at(layout, every_mode=True)))
        self._show_fit_notes()
        if self.live:
            self._live_occupancy(layout)
        else:
            self._draw_with_trace(layout, self.occupancy, layout)
        self._draw("summary", self.table_output,
                   lambda: render_summary(cast(pd.DataFrame, self.results), layout, summary=self.run_summary()))

    def _live_occupancy(self, layout: str) -> None:
        """Occupancy of the chosen split, measured once per split and kept."""
        from .. import experiments  # lazy: touches the driver

        if layout not in self._occupancy_cache:
            counts = list(parse_layout(layout)[:len(self.catalog) - 1])
            try:
                self._occupancy_cache[layout] = experiments.occupancy(
                    dict(self.catalog), counts, device=self.device)
            except Exception as exc:  # e.g. user callables cannot record %smid
                self._occupancy_cache[layout] = f"no SM occupancy: {type(exc).__name__}: {exc}"
        got = self._occupancy_cache[layout]
        if isinstance(got, str):
            self._draw_occupancy(None, layout, got)
        else:
            self.occupancy = got
            self._draw_occupancy(got, None)
