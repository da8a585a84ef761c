"""Two results side by side in the explorer: thin over :func:`gcexplore.compare` and
:func:`gcexplore.plot_compare`."""

from __future__ import annotations

from ..analysis.comparison import Comparisons, compare
from ..views.compare import plot_compare
from ..views.compare_text import describe, describe_sets
from ._base import Controller, W, esc, load_result

__all__ = ["CompareExplorer"]


class CompareExplorer(Controller):
    """Two results side by side: :func:`gcexplore.plot_compare` for the chosen mode, the
    verdict in words and the per-layout table. Thin: every number comes from
    :func:`gcexplore.compare`, recomputed when the equivalence band changes.

    Parameters
    ----------
    a, b : DataFrame, path or recorded name
        The two results (or ``a`` and ``by=``), as :func:`gcexplore.compare` takes them.
    **kwargs
        Passed to :func:`gcexplore.compare` (``by``, ``labels``, ``confidence``, ``slo_ms``).
    """

    def __init__(self, a, b=None, *, min_effect: float = 0.01, **kwargs):
        super().__init__()
        self._inputs = (load_result(a), None if b is None else load_result(b), kwargs)
        self.comparison = compare(self._inputs[0], self._inputs[1], min_effect=min_effect, **kwargs)
        sets = list(self.comparison.pairs) if isinstance(self.comparison, Comparisons) else []
        if isinstance(self.comparison, Comparisons) and not sets:
            raise ValueError("CompareExplorer: " + "; ".join(describe_sets(self.comparison)))
        # several workload sets (a campaign): one at a time, never pooled
        self.measured = W.Dropdown(options=sets or [""], value=(sets or [""])[0], description="workloads")
        self.measured.layout.display = "" if len(sets) > 1 else "none"
        groups = list(dict.fromkeys(self._current().curves["group"]))
        self.group = W.Dropdown(options=groups, value="concurrent" if "concurrent" in groups else groups[0],
                                description="mode")
        self.band = W.BoundedFloatText(value=100 * min_effect, min=0.1, max=50.0, step=0.5,
                                       description="same within ±%", style={"description_width": "initial"})
        self.words = W.HTML()
        self.group.observe(lambda _c: self._redraw(), names="value")
        self.measured.observe(lambda _c: self._redraw(), names="value")
        self.band.observe(lambda _c: self._recompute(), names="value")
        self._root = W.VBox([W.HBox([self.measured, self.group, self.band]), self.error_box, self.words,
                             self.plot_output, self.table_output])
        self._root.add_class(self._root_class)
        self._redraw()

    def _recompute(self) -> None:
        a, b, kwargs = self._inputs
        try:
            self.comparison = compare(a, b, min_effect=self.band.value / 100.0, **kwargs)
        except ValueError as exc:
            self._show_error(exc, "comparing")
            return
        self._redraw()

    def _current(self):
        """The comparison of the chosen workload set (the only one where there is one)."""
        c = self.comparison
        return c.pairs[self.measured.value] if isinstance(c, Comparisons) else c

    def _redraw(self) -> None:
        self._clear_error()
        c = self._current()
        extra = describe_sets(self.comparison) if isinstance(self.comparison, Comparisons) else []
        # the headline counts the rows of the mode the figure and table show
        lines = [*describe(c, self.group.value), *extra]
        self.words.value = "<ul>" + "".join(f"<li>{esc(s)}</li>" for s in lines) + "</ul>"
        self._draw("sweep", self.plot_output, lambda: plot_compare(c, group=self.group.value))
        cols = ["group", "layout_a", "layout_b", "median_a_ms", "median_b_ms", "ratio", "ratio_low", "ratio_high",
                "verdict", "reason"]
        self._draw("summary", self.table_output, lambda: c.table[c.table["group"] == self.group.value][cols])
