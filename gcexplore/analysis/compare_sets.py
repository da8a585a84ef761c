"""Which rows :func:`gcexplore.compare` may set side by side: the two sides split by a column
(:func:`split_by`, which also reads the identity's short names, ``by="driver"``), and within them the
workload sets each side measured (:func:`gcexplore.results.run.measured_groups`). Only a set measured
on both sides is compared, set by set; :class:`Comparisons` holds one comparison per such set and
names the sets measured on one side only. Nothing here decides a verdict: that is
:mod:`gcexplore.analysis.comparison`'s per-row function.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from ..results.run import MEASURED_COLUMN, measured_groups
from ..schema import IDENTITY

__all__ = ["Comparisons", "differing_columns", "resolve_by", "set_pairs", "split_by"]

# Columns besides the identity that tell runs or campaign tasks apart.
_CONTEXT = ("campaign_id", "task_key", MEASURED_COLUMN, "split_set", "experiment")


def differing_columns(df: pd.DataFrame) -> dict[str, int]:
    """The identity and campaign columns of ``df`` whose values differ between rows, with how many
    distinct values each has (what ``by=`` can split on)."""
    out = {}
    for col in (*(f.name for f in IDENTITY), *_CONTEXT):
        if col in df.columns:
            n = int(df[col].astype(str).nunique())
            if n > 1:
                out[col] = n
    return out


def _choices(df: pd.DataFrame) -> str:
    found = differing_columns(df)
    if not found:
        return "none: every identity column has one value in these rows"
    return ", ".join(f"{c} ({n} values)" for c, n in found.items())


def resolve_by(df: pd.DataFrame, by: str) -> str:
    """The column ``by`` names: a column of ``df``, or an identity field by its label or short name
    ("driver" -> ``driver_version``, "uuid" -> ``device_uuid``, "card" -> ``device_name``).

    Raises
    ------
    ValueError
        ``by`` names no column here; the message lists the columns that split these rows.
    """
    if by in df.columns:
        return by
    key = str(by).strip().lower()
    for f in IDENTITY:
        names = {f.name, f.label.lower(), f.name.removesuffix("_version"), f.name.removeprefix("device_")}
        if key in names and f.name in df.columns:
            return f.name
    raise ValueError(f"compare: by={by!r} is not a column of this result; columns whose values differ here: "
                     f"{_choices(df)}")


def split_by(df: pd.DataFrame, by: str, labels) -> tuple[pd.DataFrame, pd.DataFrame, tuple[str, str], str]:
    """``df`` split in two sides by the values of column ``by`` (:func:`resolve_by`): ``(A, B,
    labels, column)``. ``labels`` picks two values (in order) where there are more than two."""
    col = resolve_by(df, by)
    values = [str(v) for v in pd.unique(df[col].astype(str))]
    if len(values) < 2:
        raise ValueError(f"compare: every row has {col} {values[0] if values else ''!r}, so by={by!r} gives one "
                         f"side only; columns whose values differ here: {_choices(df)}")
    if labels is None and len(values) != 2:
        raise ValueError(f"compare: by={by!r} must split the rows into two groups, it gives {len(values)}: "
                         f"{values[:8]}; pass labels=(first, second) to pick two of them")
    picked = tuple(map(str, labels)) if labels is not None else tuple(values)
    missing = [v for v in picked if v not in values]
    if len(picked) != 2 or missing:
        raise ValueError(f"compare: labels must name two values of {col!r} ({values[:8]}), got {list(picked)}")
    sides = []
    for v in picked:
        part = df[df[col].astype(str) == v].reset_index(drop=True)
        part.attrs = dict(df.attrs)
        sides.append(part)
    return sides[0], sides[1], picked, col


def set_pairs(fa: pd.DataFrame, fb: pd.DataFrame) -> tuple[list[tuple[str, pd.DataFrame, pd.DataFrame]], dict]:
    """The workload sets measured on both sides, each ``(label, A rows, B rows)`` in first-seen order,
    and the sets measured on one side only (label -> "A only" / "B only")."""
    ga, gb = dict(measured_groups(fa)), dict(measured_groups(fb))
    both = [(k, ga[k], gb[k]) for k in ga if k in gb]
    one = {**{k: "A only" for k in ga if k not in gb}, **{k: "B only" for k in gb if k not in ga}}
    return both, one


@dataclasses.dataclass(frozen=True)
class Comparisons:
    """:func:`gcexplore.compare` of results that measured several workload sets (a campaign): one
    comparison per set measured on both sides; sets measured on one side are named, never pooled.

    Attributes
    ----------
    labels : tuple of str
        Names of side A and side B.
    pairs : dict
        Workload set (e.g. ``"compute+memory"``) -> its :class:`~gcexplore.analysis.comparison.Comparison`.
    one_sided : dict
        Workload set -> ``"A only"`` or ``"B only"``.
    by : str or None
        The column that split one result into the two sides.
    columns : tuple of str
        The columns of a comparison table (what :attr:`table` has when no set was compared).
    """

    labels: tuple[str, str]
    pairs: dict
    one_sided: dict
    by: str | None = None
    columns: tuple = ()

    def __iter__(self):
        return iter(self.pairs.items())

    def __len__(self) -> int:
        return len(self.pairs)

    @property
    def table(self) -> pd.DataFrame:
        """Every set's comparison table, one after the other, with the set in column ``measured``."""
        parts = [c.table.assign(measured=k) for k, c in self.pairs.items()]
        if not parts:
            return pd.DataFrame(columns=[*self.columns, "measured"])
        return pd.concat(parts, ignore_index=True)

    def compared(self) -> int:
        """How many layout x mode rows were measured on both sides, over every set."""
        return sum(int((c.table["present"] == "both").sum()) for c in self.pairs.values())

    def counts(self) -> dict[str, int]:
        """The verdict counts of :meth:`Comparison.counts`, summed over the sets."""
        out: dict[str, int] = {}
        for c in self.pairs.values():
            for k, v in c.counts().items():
                out[k] = out.get(k, 0) + v
        return out

    def regressions(self, threshold: float = 0.0) -> pd.DataFrame:
        """Every set's :meth:`Comparison.regressions`, with the set in column ``measured``."""
        parts = [c.regressions(threshold).assign(measured=k) for k, c in self.pairs.items()]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["measured"])
