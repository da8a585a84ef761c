"""A family on the core: green contexts beside the other ways to share a GPU (MPS with active-thread
limits, plain streams, prioritised streams, one after another), on the same pair, in one table.

``compare_mechanisms(pair, splits)`` (also ``gcexplore.mechanisms.mechanisms``) measures (:mod:`.experiment`;
MPS through gcexplore's own daemon,
:mod:`.mps`, and one client process per workload, :mod:`.clients`); ``mechanisms_table`` and
``mechanisms_sentences`` derive every number (:mod:`.analysis`); ``plot_mechanisms`` draws them
(:mod:`.view`); ``mechanisms_page`` is the course page over the shipped run (:mod:`.page`). The
family imports the core; the core never imports it. Importing it declares the ``mechanisms`` result kind
(:mod:`.kind`) and loads nothing heavy.
"""

from .._lazy import face
from . import kind as _kind  # noqa: F401 (registers the family's result kind)

PUBLIC = {
    "experiment": ("compare_mechanisms",),
    "analysis": ("mechanisms_sentences", "mechanisms_table"),
    "view": ("plot_mechanisms",),
    "mps": ("MpsDaemon", "MpsUnavailable"),
    "page": ("load_mechanisms", "mechanisms_page"),
}
EXTRA = {
    "experiment": ("mechanisms",),  # gcexplore.mechanisms.mechanisms; gcexplore.mechanisms is this package
    "kind": ("CLOCKS", "MECHANISMS"),
    "mps": ("mps_refusal",),
    "align": ("align_clients",),
    "pair": ("pair_specs",),
    "analysis": ("TABLE_COLUMNS", "mechanism_label"),
}
__all__, __getattr__, __dir__, WHERE = face(__name__, PUBLIC, EXTRA)
