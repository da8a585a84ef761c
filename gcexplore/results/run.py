"""The run: one owner for who measured a result, which rows belong together, and every number
derived from them, computed once.

A **run** is the rows that share the identity columns :data:`~gcexplore.schema.RUN_COLUMNS`
(``run_id`` and the device's ``device_uuid``, ``device_index``, ``device_name``) that a result
carries. Two cards that share a run id are two runs. A result without identity columns (an older
file) is one run only if no repetition appears twice in it (:func:`repeated_rows`).

:func:`run_of` gives the :class:`Run` of a frame: its identity (every field of
:data:`~gcexplore.schema.IDENTITY`, from the rows where they carry it, else the attrs), what it
measured (:attr:`Run.measured`: the workload set in placement order, with their recipes), its
per-repetition makespans, and :meth:`Run.memo`, where the analysis layer keeps the numbers it
derives (the summary, the lower bound, the best split): asking twice for the same unchanged frame
computes once. The door that validates a frame once is
:func:`gcexplore.results.validate.open_run`.

Results of several runs that measured different things (a campaign's pairs) are split by
:func:`measured_groups` before anything pools them.
"""

from __future__ import annotations

import math
import itertools
import threading
from typing import Any
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..schema import IDENTITY, IDENTITY_COLUMNS, RECIPES_ATTR, RUN_COLUMNS, identity_of
from . import kinds as _kinds
from .kinds import kind_of

__all__ = ["MEASURED_COLUMN", "RUN_COLUMNS", "Run", "identity", "identity_fields", "measured_groups",
           "measured_label", "per_run", "rep_keys", "repeated_rows", "require_one_run", "run_columns", "run_of", "runs",
           "stamp", "stamp_text", "token", "with_identity"]

_EMPTY = ("", "nan", "<NA>", "None")


# ------------------------------------------------------------------------ membership


def run_columns(df: pd.DataFrame) -> list[str]:
    """The identity columns of :data:`RUN_COLUMNS` that ``df`` has (those its kind names, where a run
    spans several cards: :attr:`~gcexplore.results.kinds.Kind.run_keys`); none without ``run_id``
    (the device columns alone cannot tell two runs of one card apart)."""
    if "run_id" not in df.columns:
        return []
    keys = RUN_COLUMNS
    try:
        keys = _kinds.get(kind_of(df)).run_keys or RUN_COLUMNS
    except ValueError:
        pass  # not a result: a card's run
    return [c for c in keys if c in df.columns]


def _run_groups(df: pd.DataFrame):
    cols = run_columns(df)
    if not cols or not len(df):
        return cols, None
    # grouped on a bare view: the groups (indices, ngroups) are the same, no attrs copied per key column
    return cols, pd.DataFrame(df, copy=False).groupby(cols, sort=False, dropna=False)


def _label(cols: list[str], values) -> str:
    values = dict(zip(cols, values))
    head = values.pop("run_id", None)
    rest = ", ".join(dict.fromkeys(v for v in values.values() if v not in _EMPTY))
    if head is None:
        return rest
    return f"{head} ({rest})" if rest else str(head)


def runs(df: pd.DataFrame) -> list[str]:
    """The runs in a result, each as its run id with its device (one for a single run; none for
    frames without identity columns)."""
    cols, groups = _run_groups(df)
    if groups is None:
        return []
    return [_label(cols, map(str, k if isinstance(k, tuple) else (k,))) for k in groups.indices]


def require_one_run(df: pd.DataFrame, where: str) -> None:
    """ValueError when ``df`` holds rows of several runs (pick one first), or repeats a
    repetition (:func:`repeated_rows`)."""
    run = run_of(df)
    ids = run.memo("runs", lambda: runs(df))  # asked by every view and table: counted once per frame
    if len(ids) > 1:
        raise ValueError(f"{where} takes one run, but these rows hold {len(ids)} runs: {', '.join(ids)}; "
                         "select one, e.g. df[df.run_id == ...], or summarize(df) to compare them")
    found = run.memo("repeated", lambda: repeated_rows(df))
    if found:
        raise ValueError(f"{where}: {found}")


def per_run(df: pd.DataFrame, one) -> pd.DataFrame:
    """``one`` applied to each run's rows (:func:`runs`), the outputs concatenated; identity
    columns that tell runs apart and that ``one`` dropped are put back on its rows."""
    cols, groups = _run_groups(df)
    if groups is None or groups.ngroups <= 1:
        return one(df)
    parts = []
    for idx in groups.indices.values():
        rows = df.iloc[idx]
        out = one(rows)
        for c in cols:
            if c not in out.columns:
                out[c] = rows[c].iloc[0]
        parts.append(out)
    out = pd.concat(parts, ignore_index=True)
    out.attrs.update(parts[0].attrs)
    return out


def repeated_rows(df: pd.DataFrame, kind: str | None = None) -> str:
    """Why ``df``'s rows are not one measurement each ("" when they are): a repetition that
    appears twice within a run (the same run concatenated twice), or, without identity
    columns, twice at all (several runs that cannot be told apart). ``kind``: default
    :func:`~gcexplore.schema.kind_of`."""
    try:
        keys = _kinds.get(kind or kind_of(df)).row_keys
    except ValueError:
        return ""
    if not keys or not set(keys) <= set(df.columns) or not len(df):
        return ""
    cols = run_columns(df)
    # on a bare view: duplicated reads every column, each read deep-copying a trace's large attrs
    dup = pd.DataFrame(df, copy=False).duplicated([*cols, *keys], keep=False)
    if not dup.any():
        return ""
    first = df.loc[dup, list(keys)].iloc[0].to_dict()
    where = ", ".join(f"{k} {v!r}" for k, v in first.items())
    if not cols:
        return (f"{int(dup.sum())} rows repeat a repetition ({where}) and carry no run identity (run_id, "
                "device_name columns): several runs pooled cannot be told apart; summarize each file on its "
                "own, or give each its run_id column before concatenating")
    return (f"{int(dup.sum())} rows repeat a repetition within one run ({where}, run {runs(df.loc[dup])[0]}; "
            f"a row is one measurement by {', '.join(keys)}): the same run concatenated twice would count its "
            "repetitions twice; drop the copy (df.drop_duplicates()) or keep each run once")


# -------------------------------------------------------------------------- identity


def _plain(v: Any):
    if v is None or (isinstance(v, float) and math.isnan(v)) or str(v) in _EMPTY:
        return None
    item = getattr(v, "item", None)  # a numpy scalar (float64 is a float with .item)
    return item() if item is not None else v


def identity_fields(df: pd.DataFrame) -> dict:
    """Every field of :data:`~gcexplore.schema.IDENTITY` of a result: the distinct values its rows
    carry (a list; rows of several runs carry several), else its attrs' value, else absent."""
    out = {}
    for f in IDENTITY:
        vals = []
        if f.name in df.columns and len(df):
            vals = [v for v in (_plain(x) for x in pd.unique(df[f.name])) if v is not None]
        if not vals and _plain(df.attrs.get(f.name)) is not None:
            vals = [_plain(df.attrs[f.name])]
        if vals:
            out[f.name] = vals
    return out


def identity(df: pd.DataFrame) -> dict:
    """The identity columns of one run's rows (every field of :data:`~gcexplore.schema.IDENTITY`),
    as its summary rows carry them: the first row's value where the rows have the column, else the
    attrs' (:func:`gcexplore.schema.identity_of`)."""
    out = identity_of(df.attrs)
    if not len(df):
        return out
    for col in out:
        if col in df.columns:
            v = df[col].iloc[0]
            out[col] = None if _plain(v) is None and IDENTITY_COLUMNS[col] != "str" else (
                "" if _plain(v) is None else (str(v) if IDENTITY_COLUMNS[col] == "str" else v))
    return out


def with_identity(out: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
    """``out`` (a table derived from one run's rows ``df``) with the run's :func:`identity`
    columns, in their schema dtypes."""
    out = out.assign(**identity(df))
    for col, dtype in IDENTITY_COLUMNS.items():
        if dtype == "Int64":
            out[col] = pd.array([None if _plain(v) is None else int(v) for v in out[col]], dtype="Int64")
    return out


def stamp_text(source: pd.DataFrame | Mapping) -> str:
    """Where a result's numbers were measured: device, recorded or live, date (one line).

    ``source`` is a result (its ``attrs`` are read) or its ``attrs``: the card's name, SM count and
    driver (:data:`~gcexplore.schema.IDENTITY`), ``date`` and ``recorded`` when present. E.g.
    ``"NVIDIA H100 80GB HBM3 (132 SMs, driver 13.0) · recorded 2025-11-26"``. Figures carry it
    as their title (:func:`gcexplore.views.plot.figure_stamp`), text reports as their head line.
    """
    attrs = source.attrs if isinstance(source, pd.DataFrame) else source
    field = {f.source: f.name for f in IDENTITY if f.source}
    name = attrs.get(field["name"]) or "unknown device"
    details = []
    if attrs.get(field["sm_count"]):
        details.append(f"{attrs[field['sm_count']]} SMs")
    drv = attrs.get(field["driver_version_str"])
    if isinstance(drv, (int, np.integer)) and not isinstance(drv, bool) and drv > 0:
        details.append(f"driver {drv // 1000}.{(drv % 1000) // 10}")
    elif isinstance(drv, str) and drv:
        details.append(f"driver {drv}")  # DeviceInfo.metadata() stores "13.0"
    device = f"{name} ({', '.join(details)})" if details else name
    date = str(attrs["date"])[:10] if attrs.get("date") else ", date unknown"
    how = "recorded" if attrs.get("recorded") else "measured live"
    return f"{device} · {how}{'' if date.startswith(',') else ' '}{date}"


# ------------------------------------------------------------------- what was measured

#: The column a campaign names its workload set in (``"compute+memory"``), when present.
MEASURED_COLUMN = "pair"


def _placement(df: pd.DataFrame) -> tuple[str, ...]:
    """The workloads of the rows in partition order (p0, p1, ..., remainder), or sorted by name."""
    from ..schema import partition_key

    if "partition" in df.columns and "workload" in df.columns and len(df):
        part = df.loc[~df["partition"].isin(["device"]), ["partition", "workload"]].drop_duplicates()
        if len(part):
            order = sorted(zip(part["partition"], part["workload"]), key=lambda pw: (partition_key(pw[0]), pw[1]))
            return tuple(dict.fromkeys(w for _, w in order))
    if "workload" in df.columns:
        return tuple(sorted(set(map(str, df["workload"]))))
    return ()


def _recipes(attrs: Mapping, names: tuple[str, ...]) -> tuple[str, ...]:
    specs = attrs.get(RECIPES_ATTR) or {}
    return tuple(str(specs.get(n, "")) for n in names) if isinstance(specs, Mapping) else ()


def measured_label(df: pd.DataFrame) -> str:
    """What one run's rows measured, as one line: the workload set in placement order
    ("compute+memory"), with each workload's recipe where the result recorded one."""
    names = _placement(df)
    recipes = _recipes(df.attrs, names)
    if recipes and any(recipes):
        return "+".join(r or n for n, r in zip(names, recipes))
    return "+".join(names)


def measured_groups(df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The rows of ``df`` split by what they measured, each ``(label, rows)``, in first-seen order.

    Rows of one workload set (its workloads in placement order, with their recipes) stay together,
    however many runs they span; rows of different sets are never pooled. A campaign's ``pair``
    column names the set; without it, each run's rows are labelled by :func:`measured_label`.
    """
    if not len(df):
        return [(measured_label(df), df)]
    if MEASURED_COLUMN in df.columns:
        keys = df[MEASURED_COLUMN].astype(str)
    else:
        cols = run_columns(df)
        if all(df[c].nunique(dropna=False) <= 1 for c in cols):  # one run (the usual case): no groupby
            return [(run_of(df).measured, df)]
        cols, groups = _run_groups(df)
        assert groups is not None  # the run columns vary, so there are rows and groups
        keys = pd.Series("", index=df.index)
        for idx in groups.indices.values():
            rows = df.iloc[idx]
            keys.iloc[idx] = measured_label(rows)
    out = []
    for label in pd.unique(keys):
        part = df[keys == label]
        part.attrs = dict(df.attrs)
        out.append((str(label), part))
    return out


# ------------------------------------------------------------------------------ Run


class Run:
    """One run's rows with its identity, what it measured, and the numbers derived from it, each
    computed once (:meth:`memo`). Get one with :func:`run_of` (or the validating door,
    :func:`gcexplore.results.validate.open_run`), not by hand.

    Attributes
    ----------
    rows : pandas.DataFrame
        The result as given (not copied).
    kind : str
        Its result kind (:func:`gcexplore.schema.kind_of`).
    """

    def __init__(self, rows: pd.DataFrame, kind: str | None, memo: dict, *, _token=None):
        if _token is not _TOKEN:
            raise TypeError("Run cannot be built directly; use gcexplore.results.run.run_of(df)")
        self.rows, self._kind, self._memo = rows, kind, memo

    @property
    def kind(self) -> str:
        """The result kind (:func:`gcexplore.schema.kind_of`; ValueError where the rows are no result)."""
        return self._kind or self.memo("kind", lambda: kind_of(self.rows))

    def __repr__(self) -> str:
        return f"<Run {', '.join(runs(self.rows)) or '(no identity)'}: {self.kind}, {len(self.rows)} rows>"

    @property
    def identity(self) -> dict:
        """Every identity field this run records, one value each (several where the rows are of
        several runs, joined by ", ")."""
        return self.memo("identity", lambda: {k: v[0] if len(v) == 1 else ", ".join(map(str, v))
                                              for k, v in identity_fields(self.rows).items()})

    @property
    def label(self) -> str:
        """The run id with its device, as errors and stamps name it."""
        return ", ".join(runs(self.rows)) or str(self.rows.attrs.get("run_id", ""))

    @property
    def stamp(self) -> str:
        """:func:`stamp_text` of the run."""
        return stamp_text(self.rows)

    @property
    def measured(self) -> str:
        """What the run measured: its workload set in placement order, with recipes."""
        return self.memo("measured", lambda: measured_label(self.rows))

    def rep_makespans(self, mode: str | None = None) -> pd.DataFrame:
        """One makespan per repetition of an overlap, sweep or tune run, with its round: columns the
        run's identity columns (:func:`run_columns`), ``layout``, ``split_sm_count``, ``mode``, ``rep``,
        ``step`` (tune results), ``round`` (0 for results measured before rounds) and ``makespan_ms``
        (every workload row of a repetition repeats it), in measured order; computed once for all
        modes. The one owner of per-repetition makespans: intervals, verdicts and figures read it."""
        every = self.memo("rep_makespans", lambda: _rep_makespans(self.rows))
        return every if mode is None else every[every["mode"] == mode]

    def memo(self, name, compute):
        """``compute()`` the first time ``name`` is asked of this unchanged frame, the kept value
        after. ``name`` may be any hashable (a tuple with a trace's token, say)."""
        with _LOCK:
            if name in self._memo:
                return self._memo[name]
        value = compute()
        with _LOCK:
            return self._memo.setdefault(name, value)


def rep_keys(rows: pd.DataFrame) -> list[str]:
    """The columns one repetition of an overlap, sweep or tune result is told apart by (its run's
    identity columns, ``layout``, ``split_sm_count``, ``mode``, ``rep``; ``step`` and ``round`` are
    functions of ``rep``): grouped by these with ``sort=False, dropna=False``, a per-repetition
    aggregate of another column lines up with :meth:`Run.rep_makespans` row for row."""
    return [c for c in (*run_columns(rows), "layout", "split_sm_count", "mode", "rep") if c in rows.columns]


def _rep_makespans(rows: pd.DataFrame) -> pd.DataFrame:
    # without the run's attrs (its identity is in the columns): pandas would deep-copy them into every
    # group and every slice readers take of the kept table
    rows = pd.DataFrame(rows, copy=False)
    groups = rows.groupby(rep_keys(rows), sort=False, dropna=False)
    carried = [c for c in ("step", "round") if c in rows.columns]  # functions of the repetition
    out = groups["makespan_ms"].max()
    if carried:
        out = pd.concat([groups[carried].first(), out], axis=1)
    out = out.reset_index()
    if "round" not in out.columns:
        out.insert(len(out.columns) - 1, "round", 0)  # measured before rounds: one round
    return out


_TOKEN = object()
_LOCK = threading.Lock()
#: Where a frame carries its token: a plain instance attribute, which pandas copies to no derived frame.
_CARRIED = "_gcexplore_run"
_SERIAL = itertools.count(1)


class _State:
    """What a frame's token was issued against: under pandas' copy-on-write, a shallow copy held here
    makes every later write to the frame (``.loc``, ``.at``, a column assigned, rows dropped in place)
    replace the written block's array, so the frame's arrays being the very ones the copy holds means
    no value changed; the index, the columns and the attrs are compared too. Without copy-on-write
    (pandas 2 with the option off) a content hash of every value is compared instead."""

    __slots__ = ("held", "arrays", "index", "columns", "attrs", "content", "memo", "serial")

    def __init__(self, df: pd.DataFrame):
        self.held = pd.DataFrame(df, copy=False)  # shares the arrays (not the attrs, which pandas would deep-copy)
        self.arrays, self.index, self.columns = _arrays(df), df.index, df.columns
        self.attrs = _attrs_state(df.attrs)
        self.content = None if _COPY_ON_WRITE else _content(df)
        self.memo: dict = {}
        self.serial = next(_SERIAL)

    def holds(self, df: pd.DataFrame) -> bool:
        return (df.index is self.index and df.columns is self.columns and _arrays(df) == self.arrays
                and _attrs_state(df.attrs) == self.attrs
                and (self.content is None or _content(df) == self.content))


def _copy_on_write() -> bool:
    if int(pd.__version__.split(".")[0]) >= 3:
        return True  # always on from pandas 3
    return pd.get_option("mode.copy_on_write") is True


_COPY_ON_WRITE = _copy_on_write()


def _arrays(df: pd.DataFrame) -> tuple:
    """The identities of the arrays holding the frame's values, block by block, with their columns."""
    try:
        return tuple((id(b.values), tuple(b.mgr_locs.as_array.tolist())) for b in df._mgr.blocks)
    except AttributeError:  # a pandas without blocks: never equal, so every use checks again
        return (object(),)


def _attrs_state(attrs: Mapping) -> tuple:
    """Plain attrs by value, the rest (lists, dicts) by identity."""
    return tuple((k, v if isinstance(v, (str, int, float, bool, type(None))) else ("id", id(v)))
                 for k, v in attrs.items())


def _content(df: pd.DataFrame) -> int:
    return int(pd.util.hash_pandas_object(df, index=True).to_numpy().sum(dtype=np.uint64))


def _state_of(df: pd.DataFrame) -> _State:
    """The token ``df`` carries, or a fresh one (with an empty memo) where it carries none or was
    changed since its token was issued."""
    with _LOCK:
        state = df.__dict__.get(_CARRIED)
        if state is None or not state.holds(df):
            state = _State(df)
            object.__setattr__(df, _CARRIED, state)  # not df.x = ...: pandas would take it for a column
        return state


def token(df: pd.DataFrame) -> int:
    """A number naming ``df`` as it is now: the same while the frame is unchanged, a new one after any
    change of its values, index, columns or plain attrs (and for any copy)."""
    return _state_of(df).serial


def stamp(df: pd.DataFrame) -> pd.DataFrame:
    """Give ``df`` its token now (what building or loading a result does), and return it."""
    _state_of(df)
    return df


def run_of(df: pd.DataFrame, kind: str | None = None) -> Run:
    """The :class:`Run` of ``df``: the same memo while the frame is unchanged (its :func:`token`); a
    copy, or the frame changed in place (values, rows, columns, labels, plain attrs), starts afresh,
    so it is checked again."""
    if isinstance(df, Run):
        return df
    return Run(df, kind, _state_of(df).memo, _token=_TOKEN)
