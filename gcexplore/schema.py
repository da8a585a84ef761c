"""The result schema and the measurement options, named once for every layer.

- :data:`MODES` / :data:`SCENARIOS`: what an overlap and an isolation result measure,
  with one line of description each (plots and widgets label from these).
- :data:`COLUMNS`: the columns of every result kind, in order, with their dtypes (the core's
  declared here, where the measuring wing frames its rows; a family's added when its kind is
  registered, :mod:`gcexplore.results.kinds`, which holds the rest of each kind's declaration and
  tells a frame's kind). :func:`frame` builds a result from records; :func:`conform` repairs the
  dtypes of a result that went through CSV or ``pd.concat``.
- :class:`Options`: the measurement options (repetitions, warm-up, modes, L2 flush,
  CUDA graphs, rounding), frozen and checked when built; every experiment, the
  checkpoint header, the metadata and the command line use it.

Every result carries its identity in columns (``device_name``, ``run_id``), so results
of several cards or runs put together with ``pd.concat`` stay apart (``df.attrs`` is
dropped by concat when it differs).

Imports nothing heavy: pandas is loaded inside the functions that build frames.

Over 500 lines: the result contract in one place (identity, every core kind's columns, modes, Options),
which every reader and writer must find together.
"""

from __future__ import annotations

import dataclasses
import math
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    import pandas as pd

from ._checks import as_count, as_int

__all__ = [
    "trace_groups",
    "COLUMNS",
    "IDENTITY",
    "IDENTITY_COLUMNS",
    "IdentityField",
    "RECIPES_ATTR",
    "RUN_COLUMNS",
    "SAMPLE_IDENTITY",
    "MODES",
    "MODE_DESCRIPTIONS",
    "Options",
    "ROUNDINGS",
    "SCENARIOS",
    "SCENARIO_DESCRIPTIONS",
    "UNTAGGED",
    "auto_rounds",
    "check_modes",
    "columns",
    "conform",
    "environment_identity",
    "identity_name",
    "identity_of",
    "frame",
    "new_run_id",
    "layout_key",
    "parse_layout",
    "partition_key",
    "round_sizes",
    "sorted_partitions",
]

#: Overlap modes, in the order they are measured and drawn.
MODE_DESCRIPTIONS = {
    "alone": "alone on its partition",
    "concurrent": "concurrent (partitioned)",
    "sequential": "sequential (whole device)",
    "streams": "plain streams (whole device)",
}
MODES = tuple(MODE_DESCRIPTIONS)

#: Isolation scenarios, in order.
SCENARIO_DESCRIPTIONS = {
    "alone": "alone",
    "streams": "next to background, plain streams",
    "partitioned": "next to background, own partition",
}
SCENARIOS = tuple(SCENARIO_DESCRIPTIONS)

ROUNDINGS = ("up", "down", "exact")


@dataclasses.dataclass(frozen=True)
class IdentityField:
    """One field of a run's identity: its column (and ``attrs`` key), dtype, the label reports
    and identity diffs print, and the :class:`~gcexplore.device.driver.DeviceInfo` attribute it
    is read from (None: filled by the experiment, e.g. the host, or by the trace, CUPTI)."""

    name: str
    dtype: str
    label: str
    source: str | None = None
    run_key: bool = False  # part of what tells one run from another


#: The identity of a run, in order: the only spelling of these names. A new identity field is one
#: line here; rows, attrs, DeviceInfo.identity(), the campaign columns, identity diffs, compare's
#: ``by=`` and the run (:mod:`gcexplore.results.run`) all derive from it.
IDENTITY = (
    IdentityField("device_name", "str", "card", "name", run_key=True),
    IdentityField("device_uuid", "str", "device UUID", "uuid", run_key=True),
    IdentityField("device_index", "Int64", "device index", "index", run_key=True),
    IdentityField("pci_bus_id", "str", "PCI bus id", "pci_bus_id"),
    IdentityField("device_sm_count", "Int64", "SM count", "sm_count"),
    IdentityField("l2_cache_bytes", "Int64", "L2 cache (bytes)", "l2_cache_bytes"),
    IdentityField("host", "str", "host"),
    IdentityField("driver_version", "str", "driver", "driver_version_str"),
    IdentityField("cuda_core_version", "str", "cuda-core", "cuda_core_version"),
    IdentityField("cuda_bindings_version", "str", "cuda-bindings", "cuda_bindings_version"),
    IdentityField("cupti_version", "str", "CUPTI"),
    IdentityField("torch_version", "str", "PyTorch"),
    IdentityField("cupy_version", "str", "CuPy"),
    IdentityField("options", "str", "options"),
    IdentityField("run_id", "str", "run", run_key=True),
)
#: Identity columns (name -> dtype), last in every measurement kind's columns.
IDENTITY_COLUMNS = {f.name: f.dtype for f in IDENTITY}
#: The identity columns that tell one run from another (rows sharing them are one run).
RUN_COLUMNS = tuple(f.name for f in IDENTITY if f.run_key)


def identity_name(source: str) -> str:
    """The identity column read from :class:`~gcexplore.device.driver.DeviceInfo`'s ``source``
    attribute ("uuid" -> its column name), for code that fills one field by hand."""
    for f in IDENTITY:
        if f.source == source:
            return f.name
    raise KeyError(f"no identity field comes from DeviceInfo.{source}; sources: "
                   f"{', '.join(f.source for f in IDENTITY if f.source)}")


#: The attrs key of a result's ``{workload name: recipe}`` (:func:`gcexplore.workloads.spec.parse_recipe`):
#: part of what a run measured.
RECIPES_ATTR = "workload_specs"

#: Per-sample kinds (traces, occupancy, PM samples: up to millions of rows) carry only these; the
#: rest of their identity is their run's (attrs), so a trace does not repeat fifteen strings a kernel.
SAMPLE_IDENTITY = {"device_name": "str", "run_id": "str"}

_OVERLAP = {
    "layout": "str", "split_sm_count": "int64", "mode": "str", "rep": "int64", "round": "int64", "workload": "str",
    "partition": "str", "sm_count": "int64", "requested_sm_count": "Int64", "start_ms": "float64",
    "duration_ms": "float64", "makespan_ms": "float64", "flops": "float64", "bytes": "float64",
    "throughput_tflops": "float64", "bandwidth_gbs": "float64", "sm_clock_mhz_before": "float64",
    "power_w_before": "float64", "sm_clock_mhz": "float64", "power_w": "float64",
}
#: NVML SM clock (MHz) and board power (W) before and after each round's measured repetitions.
_CLOCKS = {"sm_clock_mhz_before": "float64", "power_w_before": "float64", "sm_clock_mhz": "float64",
           "power_w": "float64"}
_SCALING = {
    "workload": "str", "sm_count": "int64", "requested_sm_count": "Int64", "rep": "int64", "round": "int64",
    "duration_ms": "float64", "flops": "float64", "bytes": "float64",
    "throughput_tflops": "float64", "bandwidth_gbs": "float64", **_CLOCKS,
}
# launch: the critical launch (or background run) within its repetition.
_ISOLATION = {"scenario": "str", "role": "str", "workload": "str", "rep": "int64", "launch": "int64",
              "round": "int64", "sm_count": "int64", "duration_ms": "float64", **_CLOCKS}
#: The tuner's rows: the overlap columns (mode always "concurrent") and the search step.
_TUNE = {"layout": "str", "split_sm_count": "int64", "step": "int64",
         **{k: v for k, v in _OVERLAP.items() if k not in ("layout", "split_sm_count")}}
_OCCUPANCY = {"partition": "str", "workload": "str", "sm_id": "int64", "block": "int64",
              "start_ns": "int64", "end_ns": "int64"}
#: The workload of a user trace's kernels launched outside any region.
UNTAGGED = "(untagged)"
# One row per kernel (or memcpy / memset) from CUPTI; see gcexplore.tracing.
_TRACE = {
    "layout": "str", "mode": "str", "rep": "int64", "group": "int64", "workload": "str", "launch": "int64",
    "partition": "str", "sm_count": "int64", "stream_id": "int64", "activity": "str", "name": "str",
    "start_ms": "float64", "end_ms": "float64", "grid_x": "int64", "grid_y": "int64", "grid_z": "int64",
    "block_x": "int64", "block_y": "int64", "block_z": "int64", "cluster_x": "int64", "cluster_y": "int64",
    "cluster_z": "int64", "registers_per_thread": "int64", "static_shared_bytes": "int64",
    "dynamic_shared_bytes": "int64", "max_active_clusters": "int64", "bytes": "float64",
    "graph_id": "int64", "context_id": "int64", "correlation_id": "int64",
}

# One row per PM sample (CUPTI PM sampling) inside a repetition; see gcexplore.pm.
_PM = {
    "layout": "str", "mode": "str", "rep": "int64", "round": "int64", "workloads": "str", "start_ms": "float64",
    "end_ms": "float64", "dram_pct": "float64", "dram_read_gbs": "float64", "dram_write_gbs": "float64",
    "sm_active_pct": "float64",
}

#: Columns (name -> dtype, in order) of each result kind: the core's; a family's kinds add theirs when
#: registered (:func:`gcexplore.results.kinds.register`).
COLUMNS = {
    "overlap": {**_OVERLAP, **IDENTITY_COLUMNS},
    "sweep": {**_OVERLAP, **IDENTITY_COLUMNS},
    "scaling": {**_SCALING, **IDENTITY_COLUMNS},
    "isolation": {**_ISOLATION, **IDENTITY_COLUMNS},
    "occupancy": {**_OCCUPANCY, **SAMPLE_IDENTITY},
    "trace": {**_TRACE, **SAMPLE_IDENTITY},
    "tune": {**_TUNE, **IDENTITY_COLUMNS},
    "pm": {**_PM, **SAMPLE_IDENTITY},
}

def columns(kind: str) -> list[str]:
    """Column names of ``kind`` in order."""
    return list(_columns_of(kind))


def _columns_of(kind: str) -> dict[str, str]:
    if kind not in COLUMNS:
        raise ValueError(f"unknown result kind {kind!r}; kinds are {', '.join(COLUMNS)} (a family's kinds once "
                         "its package is imported)")
    return COLUMNS[kind]


def new_run_id() -> str:
    """A fresh identity for one measurement run."""
    return uuid.uuid4().hex[:12]


def _is_missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or str(v) in ("<NA>", "nan")


def _as_dtype(series, dtype: str):
    import pandas as pd

    if dtype == "Int64":
        return pd.array([None if _is_missing(v) else int(v) for v in series], dtype="Int64")
    return series.astype(dtype)


def _missing_value(dtype: str):
    return None if dtype == "Int64" else ""


def identity_of(attrs, kind: str | None = None) -> dict:
    """The identity columns of ``kind`` (default all of :data:`IDENTITY`) as a result's ``attrs``
    give them: each field's attrs value, ``""`` (or None for counts) where absent; ``options`` from
    the options the kind records (:meth:`Options.metadata`)."""
    names = _columns_of(kind) if kind else IDENTITY_COLUMNS
    out = {}
    for f in IDENTITY:
        if f.name not in names:
            continue
        v = attrs.get(f.name)
        if f.name == "options" and v is None:
            v = options_text(attrs, kind)
        out[f.name] = _missing_value(f.dtype) if _is_missing(v) else (v if f.dtype != "str" else str(v))
    return out


def options_text(attrs, kind: str | None) -> str:
    """The measurement options ``attrs`` records for ``kind``, as one line ("repeats=20, warmup=3, ...")."""
    names = Options.APPLIES.get(kind or attrs.get("kind"), ())
    parts = []
    for n in names:
        if n in attrs:
            v = attrs[n]
            parts.append(f"{n}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}")
    return ", ".join(parts)


def environment_identity() -> dict:
    """The identity fields the process knows (no device): the host, and the versions of PyTorch
    and CuPy where they are already loaded (never imported here)."""
    import socket
    import sys

    out = {"host": socket.gethostname()}
    for field, module in (("torch_version", "torch"), ("cupy_version", "cupy")):
        mod = sys.modules.get(module)
        out[field] = str(getattr(mod, "__version__", "")) if mod is not None else ""
    return out


def conform(df, kind: str | None = None):
    """Give each known column of ``df`` its schema dtype (in place), and return ``df``.

    Identity columns missing from an older result are filled from its attrs.
    """
    kind = kind or df.attrs.get("kind")
    if kind not in COLUMNS:
        raise ValueError(f"conform needs the kind of the rows (kind=, or attrs['kind'] one of {', '.join(COLUMNS)}), "
                         f"got {kind!r}; gcexplore.results.kinds.kind_of(df) tells it")
    if kind == "trace" and "group" not in df.columns and len(df.columns):
        _derive_groups(df)
    if "device_name" not in df.columns and len(df.columns):
        df["device_name"] = str(df.attrs.get("device_name") or "unknown device")
    if "run_id" not in df.columns and len(df.columns):
        a = df.attrs
        df["run_id"] = str(a.get("run_id") or f"{a.get('device_name', 'unknown')} {a.get('date', '')}".strip())
    if kind == "isolation" and "launch" not in df.columns and {"scenario", "role", "workload", "rep"} <= set(df):
        # measured before rows carried it: the rows of a repetition are in launch order
        keys = [c for c in RUN_COLUMNS if c in df.columns] + ["scenario", "role", "workload", "rep"]
        df["launch"] = df.groupby(keys, sort=False, dropna=False).cumcount().to_numpy()
    # rows of repetitions (rep) or of records of a kind that numbers them (a serving run's), not a summary
    cols = _columns_of(kind)
    if "round" in cols and ("rep" in df.columns or ("index" in cols and "index" in df.columns)):
        if "round" not in df.columns:
            df["round"] = 0  # measured before rounds existed: all of it one round
        elif df["round"].isna().any():
            df["round"] = df["round"].fillna(0)
    if len(df.columns):
        import pandas as pd

        missing = {c: v for c, v in identity_of(df.attrs, kind).items() if c not in df.columns}
        if missing:  # one insert for all of them (an older file lacks up to 13)
            df[list(missing)] = pd.DataFrame({c: pd.Series([v] * len(df), index=df.index, dtype=IDENTITY_COLUMNS[c])
                                              for c, v in missing.items()}, index=df.index)
    import pandas as pd

    plain = pd.DataFrame(df, copy=False)  # column reads from df would each deep-copy its attrs
    for col, dtype in _columns_of(kind).items():
        if dtype != "str" and col in plain.columns and str(plain[col].dtype) != dtype:
            df[col] = _as_dtype(plain[col], dtype)
    return df


def frame(rows: list[dict], kind: str, attrs: dict):
    """A result DataFrame of ``kind`` from records, columns in schema order, with ``attrs``.

    The identity columns are taken from ``attrs`` (:func:`identity_of`) where a row lacks them.
    """
    import pandas as pd

    cols = _columns_of(kind)
    ident = identity_of(attrs, kind)
    df = pd.DataFrame.from_records([{**ident, **r} for r in rows], columns=list(cols))
    df.attrs.update(attrs)
    return conform(df, kind)


def check_modes(modes) -> tuple[str, ...]:
    """``modes`` as a tuple of known, distinct modes; ValueError naming the valid ones."""
    if isinstance(modes, str):
        modes = tuple(m.strip() for m in modes.split(",")) if "," in modes else (modes,)
    try:
        modes = tuple(modes)
    except TypeError:
        raise TypeError(f"modes must be a sequence of mode names, got {modes!r}; "
                        f"valid modes are {', '.join(MODES)}") from None
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ValueError(f"unknown mode(s) {bad or list(modes)!r}; valid modes are {', '.join(MODES)}")
    if len(set(modes)) != len(modes):
        raise ValueError(f"modes repeat: {list(modes)!r}; valid modes are {', '.join(MODES)}")
    return modes


#: Upper bounds that catch typos (10**9 repetitions) before a run starts.
MAX_REPEATS = 100_000
MAX_WARMUP = 10_000
MAX_ROUNDS = 1_000
#: Rounds a measurement takes when the caller names none: as many as give each round at least
#: :data:`MIN_REPS_PER_ROUND` repetitions, at most this many.
DEFAULT_ROUNDS = 5
MIN_REPS_PER_ROUND = 3


def auto_rounds(repeats: int, rounds: int | None) -> int:
    """``rounds``, or (None) the default for ``repeats``: ``min(DEFAULT_ROUNDS, repeats // 3)``, at least 1."""
    if rounds is not None:
        return rounds
    return max(1, min(DEFAULT_ROUNDS, int(repeats) // MIN_REPS_PER_ROUND)) if isinstance(repeats, int) else 1


def round_sizes(repeats: int, rounds: int) -> list[int]:
    """Measured repetitions of each round: ``repeats`` split as evenly as possible, larger first."""
    q, r = divmod(int(repeats), int(rounds))
    return [q + (1 if i < r else 0) for i in range(int(rounds))]
#: Most repetitions the tuner takes of one layout (``max_repeats``): its rank statistics
#: compare every pair of samples, so each decision costs the square of this.
MAX_TUNE_REPEATS = 1_000


@dataclasses.dataclass(frozen=True)
class Options:
    """How a measurement times its workloads; checked when built.

    Parameters
    ----------
    repeats : int, default 20
        Measured repetitions per configuration, over all rounds (1 to 100,000).
    warmup : int, default 3
        Discarded repetitions at the start of each round (0 to 10,000). Overlap experiments
        (sweep, profile_overlap, tune) run them in a layout's first round only, before its first
        mode (its partitions are new), and one before each later mode where that first warm-up
        repetition ran slow; in its later rounds a 1 us spin on each stream the round made afresh
        stands in for them (and one call of each workload on its new partition, where the layout's
        first warm-up repetition ran slow).
    rounds : int, default 1
        Rounds the repetitions are split into (1 to ``repeats``): each round measures every
        layout again, in a fresh shuffled order, on freshly made partitions and streams, so the
        variation between runs shows between rounds (:func:`round_sizes`).
    modes : sequence of str, default all of :data:`MODES`
        Overlap modes to measure (overlap experiments only).
    l2_flush : bool, default False
        Overwrite a buffer of twice the L2 size before every repetition.
    graphs : bool, default False
        Time CUDA-graph launches of each workload (captured once per stream).
    rounding : {"up", "down", "exact"}, default "up"
        How requested SM counts become valid sizes (:func:`gcexplore.plan_split`).
    trace : bool, default False
        Also record every kernel with CUPTI (:mod:`gcexplore.tracing`): the experiment
        returns ``(result, trace)``; needs cupti-python.
    """

    repeats: int = 20
    warmup: int = 3
    rounds: int = 1
    modes: tuple[str, ...] = MODES
    l2_flush: bool = False
    graphs: bool = False
    rounding: str = "up"
    trace: bool = False

    def __post_init__(self):
        object.__setattr__(self, "repeats", as_count("repeats", self.repeats, maximum=MAX_REPEATS))
        object.__setattr__(self, "warmup", as_int("warmup", self.warmup, minimum=0, maximum=MAX_WARMUP))
        object.__setattr__(self, "rounds", as_int("rounds", self.rounds, minimum=1, maximum=MAX_ROUNDS))
        if self.rounds > self.repeats:
            raise ValueError(f"rounds ({self.rounds}) must not exceed repeats ({self.repeats}): each round measures at "
                             f"least one repetition; pass rounds=1..{self.repeats} or more repeats")
        object.__setattr__(self, "modes", check_modes(self.modes))
        for flag in ("l2_flush", "graphs", "trace"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"{flag} must be True or False, got {getattr(self, flag)!r}")
        if self.rounding not in ROUNDINGS:
            raise ValueError(f"rounding must be one of {', '.join(map(repr, ROUNDINGS))}, "
                             f"got {self.rounding!r}")

    #: Which options each result kind takes (and records in its metadata): each kind's declaration owns
    #: them (``Kind.options``, :mod:`gcexplore.results.kinds`), and registering the kind puts them here.
    APPLIES: ClassVar[dict[str, tuple[str, ...]]] = {}

    def metadata(self, kind: str) -> dict:
        """The options that apply to ``kind``, as plain values (for attrs and checkpoints)."""
        if kind not in self.APPLIES:
            raise ValueError(f"no registered result kind {kind!r} declares its options; kinds: "
                             f"{', '.join(self.APPLIES)} (Kind(..., options=...) in gcexplore.results.kinds)")
        out = {}
        for name in self.APPLIES[kind]:
            v = getattr(self, name)
            out[name] = list(v) if isinstance(v, tuple) else v
        return out


def partition_key(name: str):
    """Sort key of partition names: p0, p1, ..., p10, then the remainder, then the device."""
    name = str(name)
    if name.startswith("p") and name[1:].isdigit():
        return (0, int(name[1:]), "")
    return ({"remainder": 1, "device": 2}.get(name, 3), 0, name)


def layout_key(label: str) -> tuple:
    """Natural sort key of layout labels ("8+124" before "16+116")."""
    import re

    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(label)))


def parse_layout(label: str) -> tuple[int, ...]:
    """The SM counts of a layout label: "24+108" -> (24, 108)."""
    try:
        return tuple(int(p) for p in str(label).split("+"))
    except ValueError:
        raise ValueError(f"not a layout label: {label!r} (expected SM counts joined by '+', e.g. '24+108')") from None


def sorted_partitions(names: Iterable[str]) -> list[str]:
    """Partition names in :func:`partition_key` order, each once."""
    return sorted(dict.fromkeys(map(str, names)), key=partition_key)



def trace_groups(trace) -> list[tuple[dict, pd.DataFrame]]:
    """Each repetition group of a trace (its rows' ``group`` column) with its rows.

    The dict holds the group's ``layout``, ``mode``, ``rep``, ``group``, ``workloads`` and, where
    the trace recorded it (``attrs["rep_origins"]``), its time zero on the GPU clock ``origin_ns``.

    Raises
    ------
    ValueError
        The trace has no ``group`` column (a frame built by hand: :func:`conform` derives it), or
        its ``rep_origins`` are damaged (not a list of mappings, workloads not a list of names).
    """
    if "group" not in trace.columns:
        raise ValueError("this trace has no repetition groups (its 'group' column, written with every kernel "
                         "record and added by gcexplore.load to traces saved before it existed), so its kernels "
                         "cannot be told apart by repetition; gcexplore.schema.conform(trace) derives it from "
                         "attrs['rep_origins'], else one group per layout, mode and rep")
    raw = trace.attrs.get("rep_origins", []) or []
    if not isinstance(raw, list) or not all(isinstance(o, dict) and isinstance(o.get("workloads", []), list)
                                            for o in raw):
        raise ValueError("attrs['rep_origins'] of this trace is damaged (a list of mappings with layout, mode, "
                         "rep, group, origin_ns and workloads, a list of names, was expected); use the trace as "
                         "the run returned it or as gcexplore.load reads it back")
    origins = {o["group"]: o for o in raw if "group" in o}
    out = []
    for g, rows in trace.groupby("group", sort=False):
        first, o = rows.iloc[0], origins.get(int(g), {})
        info = {"layout": first["layout"], "mode": first["mode"], "rep": int(first["rep"]), "group": int(g),
                "workloads": list(o.get("workloads") or sorted(set(rows["workload"])))}
        if "origin_ns" in o:
            info["origin_ns"] = int(o["origin_ns"])
        out.append((info, rows))
    return out


def _derive_groups(df) -> None:
    """The ``group`` column of a trace saved before rows carried it: from its ``rep_origins``
    (one entry per group with its workloads; alone with an L2 flush runs one group per
    workload), written into them too; rows of no entry, one group per layout, mode and rep."""
    import pandas as pd

    keys = ["layout", "mode", "rep"]
    origins = df.attrs.get("rep_origins") or []
    # plain columns, no attrs: every pandas step would deep-copy a large trace's attrs
    plain = pd.DataFrame(df, copy=False)
    cols = pd.DataFrame({k: plain[k].to_numpy() for k in (*keys, "workload")})
    group = cols.groupby(keys, sort=False).ngroup().to_numpy().astype("int64") + len(origins)
    if origins:
        table = pd.DataFrame([(o["layout"], o["mode"], o["rep"], w, i) for i, o in enumerate(origins)
                              for w in o["workloads"]], columns=[*keys, "workload", "origin"])
        table = table.drop_duplicates([*keys, "workload"], keep="last")  # the last entry wins, as before
        for k in keys:
            table[k] = table[k].astype(cols[k].dtype)
        hit = cols.merge(table, on=[*keys, "workload"], how="left", sort=False)["origin"].to_numpy()
        group = pd.Series(hit).fillna(pd.Series(group)).to_numpy().astype("int64")
    df["group"] = group
    if origins:
        df.attrs["rep_origins"] = [{**o, "group": i} for i, o in enumerate(origins)]
