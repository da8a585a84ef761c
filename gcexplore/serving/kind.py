"""The serving result kind, declared once (:class:`gcexplore.results.kinds.Kind`): registered when the
serving family is imported; imports nothing heavy (its check, summary and figure are named, not
imported)."""

from __future__ import annotations

from ..results.kinds import Kind, register
from ..schema import IDENTITY_COLUMNS

__all__ = ["SERVING", "SERVING_COLUMNS"]

# One row per decode gap or prefill request of a serving run (in its round: rows recorded before rounds
# read as round 0); see gcexplore.serving.experiment.
SERVING_COLUMNS = {
    "mode": "str", "layout": "str", "decode_sm_count": "int64", "prefill_sm_count": "int64", "load": "str",
    "rate_rps": "float64", "pattern": "str", "burst": "int64", "duration_s": "float64", "seed": "int64",
    "record": "str", "index": "int64", "start_ms": "float64", "end_ms": "float64", "itl_ms": "float64",
    "arrival_ms": "float64", "ttft_ms": "float64", "queue_ms": "float64", "tokens": "int64",
    "window_ms": "float64", "run_ms": "float64", "round": "int64",
}

SERVING = register(Kind(
    "serving", {**SERVING_COLUMNS, **IDENTITY_COLUMNS}, ("mode", "layout", "load", "record", "index", "round"),
    "ttft_ms",
    "serving", "gcexplore.serving.analysis:check_serving_rows", "gcexplore.serving.analysis:serving_table",
    "gcexplore.serving.view:plot_serving", "gcexplore.serve()"))
