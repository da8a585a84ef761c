"""The :class:`Explorer` (and :func:`explore`): pick a split and workloads, measure, look.

Split sliders that stop only on sizes the device can give, a workload per partition,
repetitions and a Run button; shows the throughput plot, the SM occupancy plot (with a kernel
trace: its timeline) and the summary table. Offline, over saved results
(:meth:`Explorer.from_results`), the sliders move over the measured splits and nothing is
measured. The drawing is done by the pure functions of :mod:`.render`; this class only wires
controls to them. Importing this module touches no GPU: the API and profiler layers are
imported inside the live paths only. :class:`SweepExplorer` lives in :mod:`.sweep_explorer`.
"""

from __future__ import annotations

from typing import cast


import pandas as pd

from .. import analysis as A
from ..results.validate import check_result
from ..schema import identity_name, layout_key, parse_layout
from ..views import plot as _plot
from ._base import (CSS, Controller, TraceView, W, catalog, esc, load_result, load_trace, unique_names,
                    with_builtins)
from .render import (render_occupancy, render_summary, render_sweep, render_throughput,
                     render_trace)
from .sweep_explorer import SweepExplorer

__all__ = ["Explorer", "SweepExplorer", "explore", "render_occupancy", "render_summary", "render_sweep",
           "render_throughput", "render_trace"]


# ========================================================================= Explorer


class Explorer(TraceView, Controller):
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
        if _offline is None:
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
        self._root = W.VBox([controls, self.error_box, self.status, self.plot_output, self.fit_label,
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
        return cls(_offline=(results, occupancy, load_trace(trace, results, "Explorer.from_results(trace=...)")))

    def _setup_live(self, workloads, repeats: int) -> None:
        from ..device import driver  # lazy: touches the driver

        self.info = driver.device_info(self.device)
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
        self.total_sm = int(results.attrs.get(identity_name("sm_count"))
                            or sum(next(iter(self.layouts))))
        best = str(A.best_split(self.run_summary())["layout"])  # the summary the table draws too
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
        self.status.value = ("<i>Recorded results: " + esc(
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
        self.remainder_label.value = f"remainder: <b>{rest} SMs</b> → {esc(last)}"
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
        from .. import experiments  # lazy: the profiler and the driver

        names = [cast(str, p.value) for p in self.workload_pickers]  # ipywidgets' inferred value type has None
        workloads = unique_names(names, self.catalog)
        self._progress_start(2, "measuring")
        try:
            try:
                results, trace = self._profile(workloads)
            except Exception as exc:
                self._show_error(exc, f"measuring {self.layout}")
                return False
            self._progress_step("occupancy")
            occupancy, self._occupancy_note = None, None
            try:
                occupancy = experiments.occupancy(workloads, self.split, device=self.device)
            except Exception as exc:  # e.g. a user callable cannot record %smid
                self._occupancy_note = f"no SM occupancy: {type(exc).__name__}: {exc}"
            self._progress_step()
        finally:
            self._progress_done()
        self.results, self.occupancy, self.trace = results, occupancy, trace
        self._shown_layout = str(results["layout"].iloc[0])
        self.status.value = "<i>" + esc(_plot.figure_stamp(results.attrs)) + "</i>"
        return True

    def _profile(self, workloads):
        """``(results, trace)``: the trace None when off or when CUPTI cannot run (then a note)."""
        from .. import experiments  # lazy: the profiler and the driver
        from ..trace.collector import TraceUnavailable

        kwargs = dict(repeats=int(self.repeats.value), device=self.device)
        self._trace_note = None
        if self.want_trace:
            try:
                return tuple(experiments.profile_overlap(workloads, self.split, trace=True, **kwargs))
            except TraceUnavailable as exc:
                self._trace_note = f"no kernel trace: {exc}".splitlines()[0]
        return experiments.profile_overlap(workloads, self.split, **kwargs), None

    def _redraw(self) -> None:
        layout = self._shown_layout
        self._draw("throughput", self.plot_output,
                   lambda: render_throughput(cast(pd.DataFrame, self.results), layout,  # redrawn only with results
                                             trace=self.trace_at(layout, every_mode=True)))
        self._show_fit_notes()
        self._draw_with_trace(layout, self.occupancy, None if self.live else layout,
                              getattr(self, "_occupancy_note", None))
        self._draw("summary", self.table_output,
                   lambda: render_summary(cast(pd.DataFrame, self.results), layout, summary=self.run_summary()))


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
