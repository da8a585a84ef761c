"""The ``mechanisms`` result kind: one row per mechanism x split x repetition x workload.

Columns, in order (then the identity columns of :data:`gcexplore.schema.IDENTITY`):

- ``mechanism`` (str): ``green`` (green contexts, one partition each), ``mps`` (one MPS client
  process each, ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` at the split), ``streams`` (two plain streams),
  ``priority`` (plain streams, the critical workload's at the highest stream priority), ``sequential``
  (one after another on the whole device).
- ``layout`` (str): the split as SM counts, ``"24+108"``; ``split_sm_count`` (int): the critical
  workload's share of it (the same for every mechanism measured at that split).
- ``rep``, ``round`` (int): the repetition and its round.
- ``workload`` (str), ``critical`` (bool): whether it is the workload whose tail is asked about.
- ``sms`` (int): the SMs
  the mechanism gives the workload (a partition's size, the whole card for streams, the SMs the MPS
  client saw run its probe); ``thread_pct`` (float): the MPS active-thread percentage (NaN elsewhere);
  ``priority_level`` (Int64): the stream priority (NA where not set).
- ``start_ms`` (float): start in the repetition (from its common start event; for MPS from the
  earliest client's ``%globaltimer`` stamp); ``duration_ms`` (float): the workload's event span;
  ``makespan_ms`` (float): the repetition's; ``timer_span_ms`` (float): the workload's span between
  two ``%globaltimer`` stamps on its stream (MPS; NaN elsewhere).
- ``clock`` (str): how the repetition's times share one clock (see :data:`CLOCKS`).
"""

from __future__ import annotations

from ..results.kinds import Kind, register
from ..schema import IDENTITY_COLUMNS

KIND = "mechanisms"

#: The mechanisms, in the order tables and figures show them.
MECHANISMS = ("green", "mps", "streams", "priority", "sequential")

#: How each mechanism's times are put on one clock (the ``clock`` column).
CLOCKS = {
    "events": "one process: CUDA events behind a common start event on the GPU",
    "globaltimer": "one MPS client process per workload, released together each repetition by a host "
    "barrier; spans and makespan from %globaltimer stamps read on the GPU (one clock for "
    "every process), durations from each client's events",
}

COLUMNS = {
    "mechanism": "str",
    "layout": "str",
    "split_sm_count": "int64",
    "rep": "int64",
    "round": "int64",
    "workload": "str",
    "critical": "bool",
    "sms": "int64",
    "thread_pct": "float64",
    "priority_level": "Int64",
    "start_ms": "float64",
    "duration_ms": "float64",
    "makespan_ms": "float64",
    "timer_span_ms": "float64",
    "clock": "str",
}


register(
    Kind(
        KIND,
        {**COLUMNS, **IDENTITY_COLUMNS},
        ("mechanism", "layout", "rep", "workload"),
        "mechanism",
        "mechanisms",
        "gcexplore.mechanisms.analysis:check_mechanisms_rows",
        "gcexplore.mechanisms.analysis:mechanisms_table",
        "gcexplore.mechanisms.view:plot_mechanisms",
        "gcexplore.compare_mechanisms()",
        words="gcexplore.mechanisms.analysis:mechanisms_sentences",
        options=("repeats", "warmup", "rounds"),  # what its experiment takes and its metadata records
    )
)
