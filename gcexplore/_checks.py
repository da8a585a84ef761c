"""One rule for the numbers users pass, shared by every layer (pure, imports nothing heavy).

Counts (SM counts, repeats, device indices, stream counts ...) are ints: Python ints
and numpy integers pass, bools and floats are refused (24.9 SMs is a mistake, not 24).
Lengths of time are finite positive numbers below a stated maximum.
"""

from __future__ import annotations

import math
import numbers

__all__ = ["as_count", "as_int", "as_seconds_like"]


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
