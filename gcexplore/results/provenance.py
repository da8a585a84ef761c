"""Moved to :mod:`gcexplore.results.run` (the run's one owner); these names stay importable from
here so code written against earlier versions keeps working."""

from .run import RUN_COLUMNS, identity, per_run, repeated_rows, require_one_run, run_columns, runs, stamp_text

__all__ = ["RUN_COLUMNS", "identity", "per_run", "repeated_rows", "require_one_run", "run_columns", "runs",
           "stamp_text"]
