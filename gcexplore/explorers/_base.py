"""What both explorers of :mod:`gcexplore.widgets` share: controls' CSS classes, output
helpers, the controller base class, and turning user input into a workload catalog."""

from __future__ import annotations

import base64
import html
import io
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

try:
    import ipywidgets as W
except ImportError as e:  # an extra: the core install leaves it out (it brings IPython and jedi)
    raise ImportError("the explorers need ipywidgets, which the core install leaves out: "
                      "pip install 'gcexplore[jupyter]' (or pip install ipywidgets)") from e
import pandas as pd
from matplotlib.figure import Figure

from .. import analysis as A
from ..analysis.trace import require_trace_of
from ..results.validate import check_result
from ..views.plot import plot_occupancy
from ..workloads.spec import unique_names as spec_names
from .render import render_fit_notes, render_trace, run_summary

__all__ = ["CSS", "Controller", "TraceView", "catalog", "load_result", "load_trace", "show", "unique_names",
           "with_builtins"]

#: CSS classes on the main widgets, for browser tests and custom styling.
CSS = {
    "root": "gcexplore-explorer",
    "sweep_root": "gcexplore-sweep-explorer",
    "split": "gcexplore-split",
    "remainder": "gcexplore-remainder",
    "workload": "gcexplore-workload",
    "repeats": "gcexplore-repeats",
    "run": "gcexplore-run",
    "progress": "gcexplore-progress",
    "error": "gcexplore-error",
    "throughput": "gcexplore-throughput",
    "occupancy": "gcexplore-occupancy",
    "summary": "gcexplore-summary",
    "fit": "gcexplore-fit",
    "sweep": "gcexplore-sweep",
    "tune": "gcexplore-tune",
}

# ------------------------------------------------------------------ output helpers


def esc(text) -> str:
    """Text from data as HTML that shows it literally: escaped, and ``$`` as an entity so no math
    renderer in the page (MathJax in Jupyter) typesets a name like ``a$b$``."""
    return html.escape(str(text)).replace("$", "&#36;")


#: Tables as wide as their output area, not as their longest headers: fixed layout, cells wrap.
TABLE_STYLE = ("<style>table.gcexplore-table{width:100%;table-layout:fixed;font-size:11px;border-collapse:collapse}"
               "table.gcexplore-table th,table.gcexplore-table td{white-space:normal!important;"
               "overflow-wrap:anywhere;word-break:break-word;padding:2px 3px;text-align:right}</style>")

#: Why the measuring controls of an explorer over saved results are disabled.
OFFLINE_REASON = "recorded results: measuring needs an NVIDIA GPU in this kernel (gcexplore.explore() there)"


def display_data(obj) -> dict:
    """An output message for ``Output.outputs`` (PNG for figures, HTML for tables)."""
    if isinstance(obj, Figure):
        buf = io.BytesIO()
        obj.savefig(buf, format="png", dpi=90)
        title = obj.get_suptitle()
        data = {"image/png": base64.b64encode(buf.getvalue()).decode("ascii"),
                "text/plain": f"<Figure: {title}>"}
    elif isinstance(obj, pd.DataFrame):
        table = obj.to_html(index=False, float_format=lambda v: f"{v:.4g}", classes="gcexplore-table")
        data = {"text/html": TABLE_STYLE + "<div style='max-width:100%'>" + table.replace("$", "&#36;") + "</div>",
                "text/plain": obj.to_string(index=False)}
    else:
        text = str(obj)
        data = {"text/html": f"<p>{esc(text)}</p>", "text/plain": text}
    return {"output_type": "display_data", "data": data, "metadata": {}}


def show(out: W.Output, *objs) -> None:
    """Replace what ``out`` shows with ``objs`` in one update.

    Assigning ``outputs`` once swaps the old content for the new in a single message,
    the effect of ``clear_output(wait=True)`` + ``display`` (no flicker, nothing
    stacked), and it also works without a kernel, so tests can read what was drawn.
    """
    out.outputs = tuple(display_data(o) for o in objs)


def name_of(fn) -> str:
    name = getattr(fn, "name", None) or getattr(fn, "__name__", None)
    if not name or name == "<lambda>":
        raise ValueError(f"give the workload {fn!r} a name: pass workloads as a mapping "
                         "{name: callable}")
    return str(name)


class Controller:
    """What both explorers share: status line, progress bar, outputs, error display."""

    _root_class = CSS["root"]
    results: pd.DataFrame | None = None
    trace: pd.DataFrame | None = None
    _root: W.VBox  # each explorer builds its own

    def __init__(self):
        self.error_box = W.HTML(value="", layout=W.Layout(display="none"))
        self.error_box.add_class(CSS["error"])
        self.progress = W.IntProgress(value=0, min=0, max=1, description="measuring",
                                      layout=W.Layout(visibility="hidden"))
        self.progress.add_class(CSS["progress"])
        self.status = W.HTML(value="")
        self.plot_output = W.Output()
        self.plot_output.add_class(CSS["throughput"])
        self.occupancy_output = W.Output()
        self.occupancy_output.add_class(CSS["occupancy"])
        self.table_output = W.Output()
        self.table_output.add_class(CSS["summary"])
        #: The partition-fit notes of a traced run (a line under the throughput figure).
        self.fit_label = W.HTML(value="", layout=W.Layout(display="none"))
        self.fit_label.add_class(CSS["fit"])
        #: The last exception shown in the widget (its traceback stays here).
        self.last_error: BaseException | None = None
        #: How many times each output was redrawn (for tests and curiosity).
        self.redraws = {"throughput": 0, "occupancy": 0, "summary": 0, "sweep": 0}
        #: The figure or table each output shows now (e.g. to save it).
        self.figures: dict[str, Any] = {}

    # -- display ------------------------------------------------------------------

    @property
    def widget(self) -> W.Widget:
        """The root widget (a VBox); display the controller or this."""
        return self._root

    def _repr_mimebundle_(self, **kwargs):
        return self._root._repr_mimebundle_(**kwargs)

    # -- errors and progress ------------------------------------------------------

    def _show_error(self, exc: BaseException, what: str) -> None:
        """One readable line (type, message, what was being done) instead of a traceback."""
        self.last_error = exc
        self.error_box.value = (
            f"<div style='color:#b00020'><b>{esc(what)} failed</b> — "
            f"{esc(type(exc).__name__)}: {esc(str(exc))}</div>")
        self.error_box.layout.display = None

    def _clear_error(self) -> None:
        self.last_error = None
        self.error_box.value = ""
        self.error_box.layout.display = "none"

    def _progress_start(self, steps: int, what: str) -> None:
        self.progress.max = max(1, steps)
        self.progress.value = 0
        self.progress.description = what
        self.progress.layout.visibility = "visible"

    def _progress_step(self, what: str | None = None) -> None:
        self.progress.value = min(self.progress.value + 1, self.progress.max)
        if what:
            self.progress.description = what

    def _progress_done(self) -> None:
        self.progress.layout.visibility = "hidden"

    # -- drawing ------------------------------------------------------------------

    def run_summary(self) -> pd.DataFrame:
        """:func:`~gcexplore.explorers.render.run_summary` of the results (and trace) shown,
        computed once per pair: the sweep plot and every split's table draw from it."""
        cached = getattr(self, "_summary", None)
        if cached is None or cached[0] is not self.results or cached[1] is not self.trace:
            assert self.results is not None  # drawn only once results are shown
            self._summary = (self.results, self.trace, run_summary(self.results, self.trace))
        return self._summary[2]

    def trace_at(self, layout: str, *, every_mode: bool = False) -> pd.DataFrame | None:
        """The trace where it has rows of ``layout``, else None; with ``every_mode``, only where
        it has every (mode, workload) the results have there (rates from GPU-busy time then
        replace the event-based ones without leaving a bar out)."""
        trace = self.trace
        if trace is None or self.results is None:
            return None
        at = trace[trace["layout"] == layout]
        if at.empty:
            return None
        if every_mode:
            rows = self.results[self.results["layout"] == layout]
            if not set(zip(rows["mode"], rows["workload"])) <= set(zip(at["mode"], at["workload"])):
                return None
        return trace

    def _draw(self, key: str, out: W.Output, make: Callable[[], Any]) -> bool:
        """Redraw ``out`` with ``make()``; on failure show the error, keep the old view."""
        try:
            obj = make()
        except Exception as exc:  # shown in the widget; the traceback is in last_error
            self._show_error(exc, f"drawing the {key}")
            return False
        show(out, *(obj if isinstance(obj, tuple) else (obj,)))  # a tuple: several figures
        self.figures[key] = obj
        self.redraws[key] += 1
        return True

    def _show_fit_notes(self) -> None:
        """The fit notes of the run's summary under the figure; hidden without a trace (or notes)."""
        try:
            notes = render_fit_notes(self.run_summary()) if self.trace is not None else []
        except Exception as exc:  # shown in the widget; the traceback is in last_error
            self._show_error(exc, "reading the partition fit")
            notes = []
        self.fit_label.value = "<br>".join(f"<small>partition fit: {esc(n)}</small>" for n in notes)
        self.fit_label.layout.display = "" if notes else "none"

    def _draw_occupancy(self, occupancy: pd.DataFrame | None, layout: str | None,
                        note: str | None = None) -> None:
        if occupancy is None:
            self._draw("occupancy", self.occupancy_output,
                       lambda: note or "no SM occupancy records for this split")
            return
        measured = A.occupancy_layout(occupancy)
        if layout is not None and measured != layout:
            self._draw("occupancy", self.occupancy_output,
                       lambda: f"SM occupancy was recorded at {measured}, not at {layout}; "
                               f"choose {measured} to see it")
            return
        self._draw("occupancy", self.occupancy_output, lambda: plot_occupancy(occupancy))


class TraceView:
    """The kernel timeline in the occupancy output, where a trace covers the layout."""

    _trace_note: str | None = None
    if TYPE_CHECKING:  # what the Controller it is mixed into provides
        trace_at = Controller.trace_at
        _draw = Controller._draw
        _draw_occupancy = Controller._draw_occupancy
        occupancy_output: W.Output

    def _draw_with_trace(self, layout: str, occupancy: pd.DataFrame | None, measured_layout: str | None,
                         note: str | None = None) -> None:
        """Occupancy as before; with a trace of ``layout``, its timeline and estimated SM use
        (after the measured occupancy when that was recorded at ``layout``)."""
        trace = self.trace_at(layout)
        if trace is None:
            if self._trace_note and occupancy is None:
                note = f"{note or 'no SM occupancy records for this split'}; {self._trace_note}"
            self._draw_occupancy(occupancy, measured_layout, note)
            return
        measured = occupancy is not None and A.occupancy_layout(occupancy) == layout
        self._draw("occupancy", self.occupancy_output, lambda: (
            *((plot_occupancy(occupancy),) if measured and occupancy is not None else ()),
            *render_trace(trace, layout)))


# ------------------------------------------------------------------------- helpers


def load_trace(trace, results: pd.DataFrame, where: str) -> pd.DataFrame | None:
    """A kernel trace (a DataFrame or a recorded name) of ``results``, or None; a trace of other
    workloads or layouts is refused (ValueError) before anything is drawn."""
    if trace is None:
        return None
    trace = load_result(trace)
    check_result(trace, "trace", where)
    require_trace_of(results, trace, where)
    return trace



def load_result(obj):
    """A DataFrame as given, or a recorded result by name."""
    if isinstance(obj, pd.DataFrame):
        return obj
    if isinstance(obj, str):
        from ..results.io import load_recorded

        return load_recorded(obj)
    raise TypeError(f"expected a results DataFrame or a recorded name, got {type(obj).__name__}")


def with_builtins(catalog: dict[str, Any]) -> list[str]:
    """The names a workload picker offers: the user's, then the built-ins (added to
    ``catalog`` by name, which the profiler resolves)."""
    from ..workloads.builtins import BUILTINS  # lazy, though it only imports the api module

    for b in BUILTINS:
        catalog.setdefault(b, b)
    return list(catalog)


def catalog(workloads) -> dict[str, Any]:
    """Name -> workload (a callable or a built-in name), in the order given."""
    if workloads is None:
        workloads = ["compute", "memory"]  # the built-in pair
    if isinstance(workloads, Mapping):
        items = list(workloads.items())
    elif isinstance(workloads, (str, bytes)) or not isinstance(workloads, Sequence):
        raise TypeError("workloads must be a mapping {name: workload} or a sequence of "
                        f"built-in names and named callables, got {workloads!r}")
    else:
        items = [(w, w) if isinstance(w, str) else (name_of(w), w) for w in workloads]
    catalog: dict[str, Any] = {}
    for name, w in items:
        if not (callable(w) or isinstance(w, str)):
            raise TypeError(f"workload {name!r} must be callable as fn(stream=...) or a "
                            f"built-in name, got {type(w).__name__}")
        if name in catalog:
            raise ValueError(f"two workloads are named {name!r}; names must be unique")
        catalog[str(name)] = w
    return catalog


def unique_names(names: list[str], catalog: dict) -> dict:
    """The chosen workloads in partition order; one workload on two partitions gets a
    suffix (``"compute_2"``, as the CLI names it) so every row stays distinguishable."""
    return {key: catalog[n] for key, n in zip(spec_names(names), names)}
