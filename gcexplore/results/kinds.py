"""Every result kind declared once: its columns, the keys a repetition's row is unique by, the column
that tells it apart, its family, and the functions that check, summarise and draw it.

A :class:`Kind` is the whole contract of one kind of result. :func:`register` adds one;
:func:`kinds` lists them, :func:`get` finds one by name and :func:`kind_of` tells which one a frame
is. Saving, loading, validating, summarising, the Perfetto export, ``compare`` and the command line
read the declaration rather than tables of their own, so a new kind is one declaration in its family
(plus its experiment, analysis and view).

``check``, ``summary``, ``figure`` and ``export`` are ``"module:function"`` strings, resolved when
first used (:func:`resolve`): the registry imports nothing heavy, and the core names no family's
functions. A family registers its kinds when its package is imported (``gcexplore/__init__`` imports
every family after the core, so they are in place before any core module reads the registry).
"""

from __future__ import annotations

import dataclasses
import importlib
import threading
from collections.abc import Mapping

from .. import schema

__all__ = ["Kind", "get", "kind_of", "kinds", "names", "register", "resolve"]


@dataclasses.dataclass(frozen=True)
class Kind:
    """One result kind's declaration.

    Attributes
    ----------
    name : str
        ``df.attrs["kind"]`` of its results.
    columns : Mapping[str, str]
        Column name -> dtype, in order (the identity columns included).
    row_keys : tuple of str
        The columns one measured row is unique by within one run (with the run's identity columns):
        a frame whose rows repeat these is refused (the same run concatenated twice).
    tell_apart : str or None
        A column only this kind's rows (and kinds whose columns include it) have: how
        :func:`kind_of` tells it when ``attrs["kind"]`` is gone (``pd.concat``). None: told by its
        label alone; its rows are those of ``like``.
    family : str
        ``"core"`` or the family package that declares it (``"serving"``, ``"comm"``).
    check : str or None
        ``"module:function"`` ``(df, where) -> None`` raising ResultError for unusable rows (None:
        nothing beyond the kind, the columns and the row keys).
    summary : str
        ``"module:function"`` ``(one run's rows) -> DataFrame``: what ``summarize`` returns per run.
    figure : str
        ``"module:function"``: the figure of the kind.
    maker : str
        What makes such a result, for messages (``"gcexplore.sweep()"``).
    like : str or None
        The kind whose rows these are (a sweep's rows are overlap rows; a tune result's are too): the
        two are accepted where either is.
    compare : tuple of str
        The columns ``gcexplore compare`` needs of it; empty: not comparable.
    compare_group : str or None
        Kinds of one group compare with each other (overlap with sweep).
    export : str or None
        ``"module:function"`` ``(df, reps) -> list of events`` for the Perfetto export; None: not
        exportable.
    run_keys : tuple of str or None
        The identity columns whose values make one run of it; None: :data:`gcexplore.schema.RUN_COLUMNS`
        (a run is one card's). A comm run spans its ranks' cards: ``("run_id",)``.
    words : str or None
        ``"module:function"`` ``(the summary table) -> list of str``: the sentences computed from it
        (what an explorer shows beside the figure); None: the kind has none.
    options : tuple of str
        The measurement options (fields of :class:`gcexplore.schema.Options`) that apply to it: what its
        experiment takes and its metadata records (``Options.metadata(kind)``, the ``options`` column).
    """

    name: str
    columns: Mapping[str, str]
    row_keys: tuple[str, ...]
    tell_apart: str | None
    family: str
    check: str | None
    summary: str
    figure: str
    maker: str
    like: str | None = None
    compare: tuple[str, ...] = ()
    compare_group: str | None = None
    export: str | None = None
    run_keys: tuple[str, ...] | None = None
    words: str | None = None
    options: tuple[str, ...] = ()

    def __post_init__(self):
        missing = [c for c in self.row_keys if c not in self.columns]
        if missing:
            raise ValueError(f"kind {self.name!r}: row keys {missing} are not among its columns")
        if self.tell_apart is not None and self.tell_apart not in self.columns:
            raise ValueError(f"kind {self.name!r}: tell_apart column {self.tell_apart!r} is not among its columns")
        if self.tell_apart is None and self.like is None:
            raise ValueError(f"kind {self.name!r} needs a tell_apart column, or like= the kind whose rows it has")
        known = {f.name for f in dataclasses.fields(schema.Options)}
        if not isinstance(self.options, tuple) or not set(self.options) <= known:
            raise ValueError(f"kind {self.name!r}: options must be a tuple of Options fields "
                             f"({', '.join(sorted(known))}), got {self.options!r}")
        for field in ("check", "summary", "figure", "export", "words"):
            ref = getattr(self, field)
            if ref is not None and (not isinstance(ref, str) or ref.count(":") != 1):
                raise ValueError(f"kind {self.name!r}: {field} must be 'module:function', got {ref!r}")

    def accepts(self) -> set[str]:
        """The kinds whose rows this kind's readers take (itself, and the kinds of the same rows)."""
        base = self.like or self.name
        return {k.name for k in kinds() if (k.like or k.name) == base}


_LOCK = threading.RLock()
_KINDS: dict[str, Kind] = {}
def register(kind: Kind) -> Kind:
    """Add ``kind`` to the registry (and its columns to :data:`gcexplore.schema.COLUMNS`, which
    :func:`gcexplore.schema.frame` and :func:`~gcexplore.schema.conform` read); the same declaration
    again is a no-op, another one under a registered name a ValueError."""
    if not isinstance(kind, Kind):
        raise TypeError(f"register takes a Kind, got {type(kind).__name__}")
    with _LOCK:
        old = _KINDS.get(kind.name)
        if old is not None and old != kind:
            raise ValueError(f"result kind {kind.name!r} is already registered (by family {old.family!r})")
        _KINDS[kind.name] = kind
        schema.COLUMNS.setdefault(kind.name, dict(kind.columns))
        schema.Options.APPLIES[kind.name] = kind.options  # what Options.metadata and options_text read
    return kind


def kinds() -> tuple[Kind, ...]:
    """Every registered kind, in registration order (the core's first)."""
    return tuple(_KINDS.values())


def names() -> tuple[str, ...]:
    """The registered kinds' names."""
    return tuple(k.name for k in kinds())


def get(name: str) -> Kind:
    """The kind called ``name``; ValueError naming the registered ones."""
    try:
        return _KINDS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown result kind {name!r}; kinds are {', '.join(_KINDS)}") from None


def resolve(ref: str):
    """The function a ``"module:function"`` reference names (imported now)."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def _told(cols: set) -> str | None:
    """The kind the columns say: of the kinds whose tell-apart column is present, the one whose
    columns hold the others' (a trace has the ``mode`` that tells overlap rows, and more)."""
    found = [k for k in kinds() if k.tell_apart is not None and k.tell_apart in cols]
    if not found:
        return None
    return max(found, key=lambda k: sum(o.tell_apart in k.columns for o in found)).name


def kind_of(df) -> str:
    """The kind of a result: ``df.attrs["kind"]`` where the columns fit it, else told from its columns
    (each kind's ``tell_apart`` column).

    Raises
    ------
    ValueError
        Neither names a registered kind, or ``attrs["kind"]`` contradicts the columns (sweep rows
        labelled "scaling"): the label and the rows come apart.
    """
    label = df.attrs.get("kind")
    cols = set(df.columns)
    told = _told(cols)
    every = {k.name: k for k in kinds()}
    if isinstance(label, str) and label in every:
        k = every[label]
        if told is None and not cols or told is not None and told in k.accepts():
            return label
        marks = sorted({x.tell_apart for x in every.values() if x.tell_apart})
        has = f"its {every[told].tell_apart!r} column is that of {told} results" if told else \
            f"it has none of the columns that tell a kind apart ({', '.join(marks)})"
        raise ValueError(f"attrs['kind'] says {label!r} but the columns do not fit: {has}, and {label} results "
                         f"have the columns {', '.join(list(k.columns)[:6])}, ...; the label and the rows "
                         "disagree: pass the rows of that kind, or set df.attrs['kind'] to what the rows are")
    if told:
        return told
    makers = ", ".join(dict.fromkeys(k.maker for k in every.values()))
    raise ValueError(f"not a gcexplore result (attrs kind {label!r}, columns {sorted(map(str, cols))}); "
                     f"results come from {makers}")


# ------------------------------------------------------------------------ the core's kinds

_V = "gcexplore.results.validate"
_OVERLAP_KEYS = ("layout", "mode", "rep", "workload")
_SWEEP_OPTIONS = ("repeats", "warmup", "rounds", "modes", "l2_flush", "graphs", "rounding", "trace")
_OVERLAP_COMPARE = ("layout", "mode", "rep", "makespan_ms")

for _k in (
    Kind("overlap", schema.COLUMNS["overlap"], _OVERLAP_KEYS, "mode", "core", f"{_V}:check_overlap_rows",
         "gcexplore.analysis.overlap:summarize_overlap", "gcexplore.views.overlap:plot_sweep",
         "gcexplore.profile_overlap()", compare=_OVERLAP_COMPARE, compare_group="overlap",
         export="gcexplore.results.chrome_trace:overlap_events", options=_SWEEP_OPTIONS),
    Kind("sweep", schema.COLUMNS["sweep"], _OVERLAP_KEYS, None, "core", f"{_V}:check_overlap_rows",
         "gcexplore.analysis.overlap:summarize_overlap", "gcexplore.views.overlap:plot_sweep", "gcexplore.sweep()",
         like="overlap", compare=_OVERLAP_COMPARE, compare_group="overlap",
         export="gcexplore.results.chrome_trace:overlap_events", options=_SWEEP_OPTIONS),
    Kind("scaling", schema.COLUMNS["scaling"], ("workload", "sm_count", "rep"), "sm_count", "core",
         f"{_V}:check_scaling_rows", "gcexplore.analysis.scaling:summarize_scaling",
         "gcexplore.views.scaling:plot_scaling", "gcexplore.scaling()",
         compare=("workload", "sm_count", "rep", "duration_ms"), compare_group="scaling",
         options=("repeats", "warmup", "rounds", "l2_flush", "graphs", "trace")),
    Kind("isolation", schema.COLUMNS["isolation"], ("scenario", "role", "workload", "rep", "launch"), "scenario",
         "core", f"{_V}:check_isolation_rows", "gcexplore.analysis.scaling:summarize_isolation",
         "gcexplore.views.isolation:plot_isolation", "gcexplore.isolation()",
         options=("repeats", "warmup", "rounds", "trace")),
    Kind("occupancy", schema.COLUMNS["occupancy"], ("partition", "workload", "block"), "sm_id", "core",
         f"{_V}:check_occupancy_rows", "gcexplore.analysis.occupancy:sm_busy",
         "gcexplore.views.occupancy:plot_occupancy", "gcexplore.occupancy()",
         export="gcexplore.results.chrome_trace:occupancy_events", options=("warmup",)),
    Kind("trace", schema.COLUMNS["trace"], ("layout", "mode", "rep", "correlation_id"), "correlation_id", "core",
         f"{_V}:check_trace_rows", "gcexplore.analysis.trace:busy_time", "gcexplore.views.timeline:plot_timeline",
         "trace=True", export="gcexplore.results.chrome_trace:kernel_events"),
    Kind("tune", schema.COLUMNS["tune"], _OVERLAP_KEYS, "step", "core", f"{_V}:check_overlap_rows",
         "gcexplore.analysis.overlap:summarize_overlap", "gcexplore.views.tune:plot_tune", "gcexplore.tune()",
         like="overlap", compare=_OVERLAP_COMPARE, compare_group="tune",
         export="gcexplore.results.chrome_trace:overlap_events",
         options=("repeats", "warmup", "rounds", "l2_flush", "graphs", "rounding")),
    Kind("pm", schema.COLUMNS["pm"], ("layout", "mode", "rep", "workloads", "start_ms"), "dram_pct", "core",
         f"{_V}:check_pm_rows", "gcexplore.analysis.pm:summarize_pm", "gcexplore.views.pm:plot_dram_timeline",
         "gcexplore.dram_timeline()", options=("repeats", "warmup", "modes", "rounding")),
):
    register(_k)
del _k
