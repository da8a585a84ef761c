"""What the command line prints from files: names, run ids, campaign ids and failure records come
from data anyone could have written, so they never reach the terminal raw. One helper for every
printer: :func:`escape_controls` for whole reports (newlines and tabs kept), :func:`one_line` for
each line a report states (a newline inside it is data, written as ``\\n``, never a forged line)."""

from __future__ import annotations

__all__ = ["escape_controls", "one_line", "print_lines"]

_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7f, *range(0x80, 0xa0)) if c not in (0x0a, 0x09)}
# Line breaks Python's str.splitlines and terminals honour, beyond the C0/C1 controls above.
_BREAKS = {**_CONTROLS, 0x0a: "\\n", 0x09: "\\t", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def escape_controls(text: str) -> str:
    """``text`` with every control character but newline and tab written as ``\\xNN``: names,
    run ids and failure records from files cannot move the cursor or recolour the terminal."""
    return str(text).translate(_CONTROLS)


def one_line(text) -> str:
    """``text`` as one printed line: newlines, carriage returns, tabs, line and paragraph separators
    and every other control character written as escapes (``\\n``, ``\\x0d``...)."""
    return str(text).translate(_BREAKS)


def print_lines(lines, prefix: str = "- ", **print_kw) -> None:
    """Print each of ``lines`` as one line after ``prefix`` (a bullet of a report)."""
    for line in lines:
        print(f"{prefix}{one_line(line)}", **print_kw)
