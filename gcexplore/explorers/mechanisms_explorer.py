"""The :class:`MechanismsExplorer`: a mechanisms result (green contexts beside MPS, plain and
prioritised streams, one after another), one pair (run) and one split at a time.

The core never imports a family: the mechanisms family's table, sentences and figure are found
through the ``mechanisms`` kind's declaration (:mod:`gcexplore.results.kinds`: its ``summary``,
``words`` and ``figure``). So this view computes nothing: the ``render_*`` functions select the
chosen run's rows at the chosen split and return what the family's functions make of them.
"""

from __future__ import annotations

from typing import cast

import pandas as pd
from matplotlib.figure import Figure

from ..results import kinds
from ..results.run import measured_label, require_one_run, run_columns, runs
from ..results.validate import check_result
from ..views.plot import figure_stamp
from ._base import CSS, Controller, W, esc, load_result

__all__ = ["MechanismsExplorer", "render_mechanisms", "render_mechanisms_sentences", "render_mechanisms_table",
           "mechanisms_runs"]

KIND = "mechanisms"
#: The split control's value that shows every split of the run.
EVERY_SPLIT = "every split"
#: CSS classes of this view's own widgets (the shared ones are :data:`~._base.CSS`).
MECH_CSS = {"root": "gcexplore-mechanisms-explorer", "pair": "gcexplore-pair", "words": "gcexplore-words",
            "figure": "gcexplore-mechanisms"}


def _part(field: str):
    """The family's function the kind declares in ``field`` (ValueError when the family is absent)."""
    return kinds.resolve(getattr(kinds.get(KIND), field))


def mechanisms_runs(results: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """``(label, rows)`` per run of a mechanisms result, in first-seen order: the pair it measured
    ("matmul+sigmoid") and the run's id and card. A recorded file holds one run per pair."""
    cols = run_columns(results)
    if not cols:
        return [(measured_label(results), results)]
    return [(f"{measured_label(rows)} · {runs(rows)[0]}", rows)
            for _, rows in results.groupby(cols, sort=False, dropna=False)]


def _at(rows: pd.DataFrame, split: int | None, where: str) -> pd.DataFrame:
    require_one_run(rows, where)
    if split is None:
        return rows
    at = rows[rows["split_sm_count"] == split]
    if at.empty:
        measured = sorted(int(k) for k in rows["split_sm_count"].unique())
        raise ValueError(f"{where}: split {split!r} was not measured in this run; its splits are {measured} "
                         "(the critical workload's SMs), or None for every split")
    return at


def render_mechanisms(rows: pd.DataFrame, split: int | None = None) -> Figure:
    """The mechanisms figure (:func:`gcexplore.plot_mechanisms`) of one run's rows at ``split``.

    Parameters
    ----------
    rows : pandas.DataFrame
        One run of a mechanisms result (:func:`mechanisms_runs` picks one).
    split : int, optional
        The critical workload's SM count (``split_sm_count``); default every split of the run.

    Returns
    -------
    matplotlib.figure.Figure
    """
    return _part("figure")(_at(rows, split, "render_mechanisms"))


def render_mechanisms_table(rows: pd.DataFrame, split: int | None = None) -> pd.DataFrame:
    """:func:`gcexplore.mechanisms_table` of one run's rows at ``split`` (default every split);
    parameters as in :func:`render_mechanisms`."""
    return _part("summary")(_at(rows, split, "render_mechanisms_table"))


def render_mechanisms_sentences(table: pd.DataFrame) -> list[str]:
    """:func:`gcexplore.mechanisms_sentences` of a :func:`render_mechanisms_table`: one per split."""
    return list(_part("words")(table))


class MechanismsExplorer(Controller):
    """A mechanisms result, one pair and one split at a time: pick the run (its pair) and the split,
    see :func:`gcexplore.plot_mechanisms`, the sentences of :func:`gcexplore.mechanisms_sentences`
    and the rows of :func:`gcexplore.mechanisms_table`. Thin: every number comes from those.

    Parameters
    ----------
    results : DataFrame or str
        What :func:`gcexplore.compare_mechanisms` returns (live or saved), or a recorded name
        (``"mechanisms"``: the shipped H200 run, both pairs).
    run : int, default 0
        Which run (pair) to show first, in :func:`mechanisms_runs` order.
    split : int, optional
        The split to show first (the critical workload's SMs); default every split.

    Attributes
    ----------
    run_picker : ipywidgets.Dropdown
        "pair": one entry per run; the value is its index in :func:`mechanisms_runs`.
    split_picker : ipywidgets.Dropdown
        "split": every split (:data:`EVERY_SPLIT`) or one ``split_sm_count`` of the chosen run.
    words : ipywidgets.HTML
        The sentences, one per split shown.
    plot_output, table_output, error_box, status : as in :class:`gcexplore.Explorer`
    table : pandas.DataFrame or None
        The table shown now.
    """

    _root_class = MECH_CSS["root"]

    def __init__(self, results, *, run: int = 0, split: int | None = None):
        super().__init__()
        results = load_result(results)
        check_result(results, KIND, "MechanismsExplorer")
        self.results = results
        self._runs = mechanisms_runs(results)
        if not 0 <= run < len(self._runs):
            raise ValueError(f"MechanismsExplorer: run {run!r} is not one of the {len(self._runs)} runs "
                             f"(0..{len(self._runs) - 1}): {', '.join(label for label, _ in self._runs)}")
        self.table: pd.DataFrame | None = None
        self.redraws["mechanisms"] = 0
        self.run_picker = W.Dropdown(options=[(label, i) for i, (label, _) in enumerate(self._runs)], value=run,
                                     description="pair", layout=W.Layout(width="auto"))
        self.run_picker.add_class(MECH_CSS["pair"])
        self.split_picker = W.Dropdown(options=self._split_options(), value=EVERY_SPLIT, description="split")
        self.split_picker.add_class(CSS["split"])
        if split is not None:
            self.split_picker.value = split  # a split not measured: TraitError naming the valid ones
        self.words = W.HTML()
        self.words.add_class(MECH_CSS["words"])
        self.plot_output.add_class(MECH_CSS["figure"])
        self.status.value = "<i>" + esc(figure_stamp(results.attrs)) + "</i>"
        self._updating = False
        self.run_picker.observe(lambda _c: self._new_run(), names="value")
        self.split_picker.observe(lambda _c: self._redraw(), names="value")
        self._root = W.VBox([W.HBox([self.run_picker, self.split_picker]), self.error_box, self.status,
                             self.words, self.plot_output, self.table_output])
        self._root.add_class(self._root_class)
        self._redraw()

    @classmethod
    def from_results(cls, results, *, run: int = 0, split: int | None = None) -> "MechanismsExplorer":
        """The view over a saved mechanisms result (a DataFrame or a recorded name); as the constructor."""
        return cls(results, run=run, split=split)

    @property
    def rows(self) -> pd.DataFrame:
        """The chosen run's rows."""
        return self._runs[cast(int, self.run_picker.value)][1]  # ipywidgets' inferred value type has None

    @property
    def split(self) -> int | None:
        """The chosen split (the critical workload's SMs), None for every split."""
        value = self.split_picker.value
        return None if value == EVERY_SPLIT else int(cast(int, value))

    def _split_options(self) -> list:
        per = self.rows.drop_duplicates("split_sm_count").sort_values("split_sm_count")
        return [(EVERY_SPLIT, EVERY_SPLIT)] + [(f"{int(k)} SMs ({lay})", int(k))
                                               for k, lay in zip(per["split_sm_count"], per["layout"])]

    def _new_run(self) -> None:
        """The chosen run's splits in the split control (the same split kept where it was measured)."""
        keep = self.split_picker.value
        self._updating = True  # options then value: draw once, at the end
        try:
            options = self._split_options()
            self.split_picker.options = options
            self.split_picker.value = keep if keep in [v for _, v in options] else EVERY_SPLIT
        finally:
            self._updating = False
        self._redraw()

    def _redraw(self) -> None:
        if self._updating:
            return
        self._clear_error()
        rows, split = self.rows, self.split
        try:
            table = render_mechanisms_table(rows, split)
            words = render_mechanisms_sentences(table)
        except Exception as exc:  # shown in the widget; the traceback is in last_error
            self._show_error(exc, "computing the mechanisms table")
            return
        self.table = table
        self.words.value = "<ul>" + "".join(f"<li>{esc(s)}</li>" for s in words) + "</ul>"
        self._draw("mechanisms", self.plot_output, lambda: render_mechanisms(rows, split))
        self._draw("summary", self.table_output, lambda: table)
