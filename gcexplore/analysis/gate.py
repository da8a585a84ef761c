"""The CI gate of a comparison, one owner for the CLI's ``--fail-on-regression PCT`` and the Python
side's :meth:`Comparison.regressions`: which rows are regressions and what the gate answers.

A regression is a row whose interval of B / A lies wholly above ``1 + PCT/100`` whatever its verdict
(a noisy side that makes the row UNCLEAR does not hide a 2x slowdown). The exit codes are a
contract (:data:`GATE_EXIT_CODES`): a CI job that must fail on any doubt fails on every non-zero
code; one that fails only on a shown regression checks for 1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # the CLI's --help reads GATE_EXIT_CODES: nothing heavy at import
    import pandas as pd

__all__ = ["GATE_EXIT_CODES", "gate", "regression_rows"]

#: ``gcexplore compare A B --fail-on-regression PCT``: exit code -> what it means.
GATE_EXIT_CODES = {
    0: "no regression beyond PCT: every layout measured on both sides has its interval's high end within +PCT%",
    1: "regression: some layout's interval lies wholly above +PCT% (whatever its verdict)",
    2: "bad arguments or inputs (PCT not a finite number >= 0, a file that cannot be read)",
    3: "cannot rule out a regression: no interval lies above +PCT% but some reaches beyond it (too noisy), "
       "or no layout was measured on both sides (nothing compared)",
}


def regression_rows(table: pd.DataFrame, threshold: float = 0.0) -> pd.DataFrame:
    """Rows of a comparison table whose interval's low end exceeds ``1 + threshold``, whatever the verdict."""
    return table[table["ratio_low"] > 1.0 + threshold]


def gate(table: pd.DataFrame, pct: float, floors=()) -> tuple[int, str]:
    """The gate's exit code (:data:`GATE_EXIT_CODES`) and its one-line reason ("" for 0).

    ``floors``: the noise floors the table's intervals carry (:class:`~gcexplore.analysis.stats.Floor`);
    where one is a default (no floor recorded for the card), the reason says so and which it is.
    """
    code, why = _gate(table, pct)
    defaults = sorted({f.text() for f in floors if f.default})
    if code and defaults:
        why += (f"; no noise floor is recorded for this card, so the intervals carry the default one: "
                f"{' and '.join(defaults)}")
    return code, why


def _gate(table: pd.DataFrame, pct: float) -> tuple[int, str]:
    limit = 1.0 + pct / 100.0
    of = lambda row: f" of {row['measured']}" if "measured" in table.columns else ""  # noqa: E731
    slow = regression_rows(table, pct / 100.0)
    if len(slow):
        worst = slow.loc[cast(Any, slow["ratio_low"].idxmax())]  # pandas-stubs: idxmax gives a Hashable, not a label
        return 1, (f"regression: {len(slow)} layout x mode pair(s) SLOW by more than {pct:g}% (at least "
                   f"{worst['ratio_low'] - 1:+.1%} at {worst['group']} {worst['layout_b']}{of(worst)}, verdict "
                   f"{worst['verdict']})")
    both = table[table["present"] == "both"] if "present" in table.columns else table
    if not len(both) or not both["ratio_low"].notna().any():
        return 3, (f"cannot rule out a regression beyond {pct:g}%: no layout was measured on both sides, so "
                   "nothing was compared; measure the same layouts on both")
    unsure = both[~(both["ratio_high"] <= limit) & both["ratio_low"].notna()]
    if len(unsure):
        worst = unsure.loc[unsure["ratio_high"].idxmax()]
        return 3, (f"cannot rule out a regression beyond {pct:g}%: {len(unsure)} layout x mode pair(s) are too "
                   f"noisy (up to {worst['ratio_high'] - 1:+.1%} at {worst['group']} {worst['layout_b']}"
                   f"{of(worst)}); measure more repetitions or fewer layouts")
    return 0, ""
