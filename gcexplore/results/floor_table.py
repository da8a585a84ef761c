"""The recorded noise floors as rows: ``gcexplore/data/noise_floor.csv`` (written by
``bench/compare_real.py``) and the table the environment variable ``GCEXPLORE_NOISE_FLOOR`` names
(a card of one's own), each file read once. :mod:`gcexplore.analysis.stats` makes floors of them.

A row is ``(device_name, workload, round_sd, run_sd, source)``; a damaged line names no floor and
is skipped, the others still hold.
"""

from __future__ import annotations

import functools
import os

__all__ = ["FLOOR_ENV", "floor_rows", "largest_run_parts", "read_table", "shipped_path"]

#: Environment variable naming a CSV of more floors (the columns of ``noise_floor.csv``), read beside
#: the shipped table: a card of one's own measured with ``bench/compare_real.py``.
FLOOR_ENV = "GCEXPLORE_NOISE_FLOOR"


def shipped_path() -> str:
    """The floor table shipped with gcexplore."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "noise_floor.csv")


@functools.lru_cache(maxsize=4)
def read_table(path: str) -> tuple[tuple, ...]:
    """The rows of the floor table at ``path`` (none for a missing file)."""
    import csv

    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except FileNotFoundError:
        return ()
    out = []
    for r in rows:
        try:
            out.append((r["device_name"], r["workload"], float(r["round_sd"]), float(r.get("run_sd") or 0.0),
                        r.get("source", "")))
        except (KeyError, TypeError, ValueError):
            continue
    return tuple(out)


def floor_rows(table: str | None = None) -> tuple[tuple, ...]:
    """The rows of ``table``, or of the shipped table and the one :data:`FLOOR_ENV` names."""
    if table:
        return read_table(table)
    extra = os.environ.get(FLOOR_ENV, "")
    return read_table(shipped_path()) + (read_table(extra) if extra else ())


def largest_run_parts(workloads, rows) -> list[tuple[str, tuple]]:
    """(workload, row) per workload: the row with the largest run part any card recorded for that name
    (for a name no card recorded, the largest of any row); no workloads: that largest row alone."""
    top = max(rows, key=lambda r: r[3])
    out = []
    for w in sorted({str(w) for w in workloads}) or [top[1]]:
        mine = [r for r in rows if r[1] == w]
        out.append((w, max(mine, key=lambda r: r[3]) if mine else top))
    return out
