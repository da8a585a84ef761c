"""The comm result kind, declared once (:class:`gcexplore.results.kinds.Kind`): registered when the
comm family is imported; imports nothing heavy (its check, summary and figure are named, not
imported)."""

from __future__ import annotations

from ..results.kinds import Kind, register
from ..schema import IDENTITY_COLUMNS

__all__ = ["COMM", "COMM_COLUMNS"]

# One row per rank, step and workload of the communication-SMs experiment; see gcexplore.comm.rank.
# setup: "partition" (collective on comm_sm_count SMs, compute on the rest), "plain" (two plain streams,
# NCCL's own CTA count), "ctas" (plain streams, NCCL max_ctas) or "zero" (copy-engine collectives beside the
# compute on the whole GPU, comm_sm_count 0); compute-alone rows have no collective.
# One run spans every rank: each row carries its own rank's card in the identity columns (rank r ran on
# GPU r; attrs["ranks"] holds every rank's card), so a run is told by its run_id and the rank is a row key.
COMM_COLUMNS = {
    "collective": "str", "size_bytes": "int64", "nranks": "int64", "rank": "int64", "setup": "str",
    "layout": "str", "comm_sm_count": "int64", "compute_sm_count": "int64", "max_ctas": "Int64", "mode": "str",
    "rep": "int64", "workload": "str", "start_ms": "float64", "duration_ms": "float64", "step_ms": "float64",
    "flops": "float64", "bytes": "float64",
}

COMM = register(Kind(
    "comm", {**COMM_COLUMNS, **IDENTITY_COLUMNS},
    ("collective", "size_bytes", "nranks", "setup", "layout", "comm_sm_count", "max_ctas", "mode", "rep", "workload",
     "rank"),
    "comm_sm_count", "comm", "gcexplore.comm.analysis:check_comm_rows", "gcexplore.comm.analysis:comm_table",
    "gcexplore.comm.view:plot_comm", "gcexplore.comm_sweep()", run_keys=("run_id",)))
