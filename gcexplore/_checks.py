"""One rule for the numbers users pass, shared by every layer (pure, imports nothing heavy).

Counts (SM counts, repeats, device indices, stream counts ...) are ints: Python ints
and numpy integers pass, bools and floats are refused (24.9 SMs is a mistake, not 24).
Lengths of time are finite positive numbers below a stated maximum. The numeric columns of a frame a
user hands in (profiles, traffic, predictions) are checked the same way, column by column
(:func:`check_columns`), so a NaN, an infinity, a negative or an absurd value is refused by name.
"""

from __future__ import annotations

import math
import numbers

__all__ = ["Column", "MAX_BYTES", "MAX_GBS", "MAX_MS", "MAX_SMS", "as_count", "as_int", "as_seconds_like",
           "check_columns"]

#: Bounds beyond which a column's value is absurd, not measured: an SM count (the largest cards have a
#: few hundred SMs), one call's time in ms (an hour), one call's bytes (a petabyte), a bandwidth (100 TB/s).
MAX_SMS = 1024
MAX_MS = 3.6e6
MAX_BYTES = 1e15
MAX_GBS = 1e5


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def as_int(name: str, value, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an int within ``[minimum, maximum]``; TypeError or ValueError saying why not."""
    if not _is_int(value):
        rng = _range_text(minimum, maximum)
        raise TypeError(f"{name} must be an int{rng}, got {value!r} ({type(value).__name__})")
    v = int(value)
    if (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
        raise ValueError(f"{name} must be an int{_range_text(minimum, maximum)}, got {v}")
    return v


def as_count(name: str, value, *, maximum: int | None = None) -> int:
    """A count of at least 1."""
    return as_int(name, value, minimum=1, maximum=maximum)


def as_seconds_like(name: str, value, *, unit: str, maximum: float) -> float:
    """A finite positive number (a length of time in ``unit``) no larger than ``maximum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number of {unit} in (0, {maximum:g}], got {value!r}")
    v = float(value)
    if not (math.isfinite(v) and 0 < v <= maximum):
        raise ValueError(f"{name} must be a number of {unit} in (0, {maximum:g}], got {value!r}")
    return v


def _range_text(minimum, maximum) -> str:
    if minimum is not None and maximum is not None:
        return f" in [{minimum}, {maximum}]"
    if minimum is not None:
        return f" >= {minimum}"
    if maximum is not None:
        return f" <= {maximum}"
    return ""


class Column:
    """What one numeric column of a user's frame may hold: numbers in ``[low, high]`` (``low`` excluded
    where ``positive``), whole numbers where ``integer``, missing (NaN) values where ``missing``."""

    __slots__ = ("high", "integer", "low", "missing", "positive", "unit")

    def __init__(self, unit: str, *, low: float = 0.0, high: float = math.inf, positive: bool = False,
                 integer: bool = False, missing: bool = False):
        self.unit, self.low, self.high, self.positive = unit, low, high, positive
        self.integer, self.missing = integer, missing

    def valid(self) -> str:
        """The valid values, in words."""
        kind = "whole numbers" if self.integer else "finite numbers"
        lo = f"> {self.low:g}" if self.positive else f">= {self.low:g}"
        return f"{kind} of {self.unit} {lo} and <= {self.high:g}" + (" (or missing: NaN)" if self.missing else "")


def check_columns(df, columns: dict, where: str, *, required: bool = False) -> None:
    """ValueError naming the first column of ``columns`` ({name: :class:`Column`}) in ``df`` whose dtype
    is not numeric or whose values are NaN where not allowed, infinite, out of range or fractional where
    whole numbers are asked, with an offending value and what is valid. Columns ``df`` lacks are
    skipped (or, with ``required``, refused)."""
    import numpy as np
    import pandas as pd

    for name, spec in columns.items():
        if name not in df.columns:
            if required:
                raise ValueError(f"{where}: column {name!r} is missing; valid: {spec.valid()}")
            continue
        col = df[name]
        if pd.api.types.is_bool_dtype(col) or not (pd.api.types.is_numeric_dtype(col) or col.isna().all()):
            raise ValueError(f"{where}: column {name!r} has dtype {col.dtype} (e.g. {col.iloc[0]!r}); valid: "
                             f"{spec.valid()}")
        v = col.to_numpy(dtype=float, na_value=np.nan)
        nan = np.isnan(v)
        bad = ~nan & ~((v > spec.low) if spec.positive else (v >= spec.low)) | ~nan & ~(v <= spec.high)
        bad |= ~nan & np.isinf(v)
        if spec.integer:
            bad |= ~nan & np.isfinite(v) & (v != np.round(v))
        if not spec.missing:
            bad |= nan
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{where}: column {name!r} holds {float(v[i])!r} at row {i} ({int(bad.sum())} bad of "
                             f"{len(v)}); valid: {spec.valid()}")
