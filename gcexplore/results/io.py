"""Save and load results with their metadata; export timelines.

- :func:`save` / :func:`load`: parquet (pyarrow; ``df.attrs`` as JSON in the schema
  metadata) or CSV (``df.attrs`` and the column dtypes in a sidecar ``<name>.json``).
  Loading sets ``df.attrs["recorded"] = True``.
- :func:`load_recorded`: results measured on the project's GPU that ship in
  ``gcexplore/data/``.
- :func:`to_chrome_trace`: a JSON timeline that Perfetto (ui.perfetto.dev) and
  ``chrome://tracing`` open, one track per partition (per partition and stream for a
  kernel trace).

Nothing here needs a GPU.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..schema import partition_key, sorted_partitions


__all__ = ["RECORDED", "ResultFileError", "load", "load_recorded", "recorded_names", "save", "to_chrome_trace"]

#: Names of the recorded results shipped in gcexplore/data (see bench/record.py).
RECORDED = ("sweep", "scaling", "occupancy", "isolation", "torch_sweep", "trace", "trace_overlap", "occupancy_best",
            "primary_sms", "bandwidth_sharing", "l2_sharing", "pm", "pm_trace", "sweep_second", "torch_sweep_second",
            "sweep_twice", "campaign")

_ATTRS_KEY = b"gcexplore.attrs"
_FORMATS = ("parquet", "csv")


# ---------------------------------------------------------------------------
# attrs <-> JSON, losslessly for the plain values attrs hold (tuples included)
# ---------------------------------------------------------------------------


def _encode(v: Any) -> Any:
    if isinstance(v, tuple):
        return {"__tuple__": [_encode(x) for x in v]}
    if isinstance(v, list):
        return [_encode(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _encode(x) for k, x in v.items()}
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return [_encode(x) for x in v.tolist()]
    if v is pd.NA:
        return None
    if isinstance(v, (pd.Timestamp,)):
        return v.isoformat()
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return str(v)


def _decode(v: Any) -> Any:
    if isinstance(v, dict):
        if set(v) == {"__tuple__"}:
            return tuple(_decode(x) for x in v["__tuple__"])
        return {k: _decode(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_decode(x) for x in v]
    return v


def _attrs_json(attrs: dict) -> str:
    return json.dumps(_encode(dict(attrs)), allow_nan=True)


def _format(path: Path, format: str | None) -> str:  # noqa: A002
    if format is None:
        suffix = path.suffix.lower().lstrip(".")
        if suffix == "pq":
            suffix = "parquet"
        if suffix not in _FORMATS:
            raise ValueError(f"cannot tell the format of {str(path)!r} from its suffix; "
                             f"use .parquet or .csv, or pass format= one of {', '.join(_FORMATS)}")
        return suffix
    if format not in _FORMATS:
        raise ValueError(f"unknown format {format!r}; valid formats are {', '.join(_FORMATS)}")
    return format


def _sidecar(path: Path) -> Path:
    return path.with_suffix(".json")


def _temp_beside(path: Path, write) -> str:
    """``write(tmp)`` to a temporary file beside ``path``, fsynced; its name (removed on failure)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def _atomic_write(path: Path, write) -> None:
    """Write ``path`` through a temporary file and a rename: a failure (disk full, a
    crash, Ctrl-C) leaves ``path`` as it was."""
    os.replace(_temp_beside(path, write), path)


def _digest(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save(df: pd.DataFrame, path, *, format: str | None = None, overwrite: bool = True) -> Path:  # noqa: A002
    """Write a result DataFrame with its ``attrs``, atomically.

    The file is written beside the target and renamed over it, so a failure leaves an
    earlier file intact. A CSV's sidecar ``<stem>.json`` records the CSV's row count
    and SHA-256, so :func:`load` notices a CSV and sidecar that do not belong together.

    Parameters
    ----------
    df : pandas.DataFrame
        A result of the profiler (any kind).
    path : str or path
        ``*.parquet`` or ``*.csv``; parent folders are created.
    format : {"parquet", "csv"}, optional
        Default: from the suffix.
    overwrite : bool, default True
        False: refuse (FileExistsError) when ``path`` exists.

    Returns
    -------
    pathlib.Path
        The file written (for CSV, the sidecar ``<stem>.json`` is written next to it).

    Raises
    ------
    ValueError
        A CSV named ``*.json`` (its sidecar would be the file itself) or an unknown format.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"save needs a pandas DataFrame, got {type(df).__name__}")
    path = Path(path)
    fmt = _format(path, format)
    if fmt == "csv" and _sidecar(path) == path:
        raise ValueError(f"cannot save CSV as {str(path)!r}: its metadata sidecar would have the same name; "
                         "use a .csv suffix")
    if path.exists() and not overwrite:
        raise FileExistsError(f"{str(path)!r} exists; pass overwrite=True to replace it or choose another name")
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(df, preserve_index=False)
        meta = dict(table.schema.metadata or {})
        meta[_ATTRS_KEY] = _attrs_json(df.attrs).encode()
        # pandas would also store attrs under its own key; keep one source of truth.
        meta.pop(b"PANDAS_ATTRS", None)
        _atomic_write(path, lambda tmp: pq.write_table(table.replace_schema_metadata(meta), tmp))
        return path
    data = df.to_csv(index=False).encode("utf-8")
    side = {"attrs": _encode(dict(df.attrs)),
            "dtypes": {str(c): str(t) for c, t in df.dtypes.items()},
            "columns": [str(c) for c in df.columns],
            "rows": int(len(df)), "sha256": hashlib.sha256(data).hexdigest(), "csv": path.name}
    # Both are written in full before either replaces its old file; a crash between the
    # two renames leaves a pair that load() reports as mismatched, never mixed silently.
    csv_tmp = _temp_beside(path, lambda tmp: Path(tmp).write_bytes(data))
    try:
        side_tmp = _temp_beside(_sidecar(path), lambda tmp: Path(tmp).write_text(
            json.dumps(side, allow_nan=True, indent=1)))
    except BaseException:
        os.unlink(csv_tmp)
        raise
    os.replace(side_tmp, _sidecar(path))
    os.replace(csv_tmp, path)
    return path


class ResultFileError(ValueError):
    """A results file (or its sidecar) that cannot be read back as it was saved."""


def _read_parquet(path: Path) -> tuple[pd.DataFrame, dict]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as e:
        raise ResultFileError(f"{str(path)!r} is not a readable parquet file ({e}); it may be truncated "
                              "or damaged: save the result again from its source") from e
    meta = table.schema.metadata or {}
    try:
        attrs = _decode(json.loads(meta[_ATTRS_KEY])) if _ATTRS_KEY in meta else {}
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ResultFileError(f"the metadata stored in {str(path)!r} is damaged ({e})") from e
    return table.to_pandas(), attrs


def _read_sidecar(path: Path, side_path: Path) -> dict:
    if not side_path.exists():
        raise FileNotFoundError(f"{str(path)!r} has no metadata sidecar {str(side_path)!r} "
                                "(gcexplore.results.save writes both)")
    try:
        side = json.loads(side_path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ResultFileError(f"the sidecar {str(side_path)!r} of {str(path)!r} is not UTF-8 JSON ({e})") from e
    if not isinstance(side, dict) or not isinstance(side.get("dtypes", {}), dict) \
            or not isinstance(side.get("attrs", {}), dict):
        raise ResultFileError(f"the sidecar {str(side_path)!r} is {type(side).__name__} data, not the metadata "
                              "gcexplore.results.save writes ({'attrs': ..., 'dtypes': ..., ...})")
    if side.get("csv") not in (None, path.name):
        raise ResultFileError(f"the sidecar {str(side_path)!r} belongs to {side['csv']!r}, not to {path.name!r}")
    if "sha256" in side and side["sha256"] != _digest(path):
        raise ResultFileError(
            f"{str(path)!r} does not match its sidecar {str(side_path)!r} (the CSV changed or was cut short "
            f"after saving; the sidecar describes {side.get('rows', '?')} rows); save the result again")
    return side


def _read_csv(path: Path) -> tuple[pd.DataFrame, dict]:
    side = _read_sidecar(path, _sidecar(path))
    dtypes = side.get("dtypes", {})
    # Text columns are read as text, "NA" and "None" included (a layout "132" must stay
    # a string); then every column gets back the dtype it was saved with.
    # Floats are read as text and converted by numpy, which rounds correctly; pandas'
    # own CSV float parser can miss the last ulp (seen with pandas 2 on the GPU machine).
    text = {c: str for c, t in dtypes.items() if t in ("object", "str", "string", "float64")}
    floats = [c for c, t in dtypes.items() if t == "float64"]
    try:
        df = pd.read_csv(path, dtype=text, keep_default_na=False,
                         na_values={c: ["", "NaN", "nan", "<NA>"] for c in dtypes if c not in text})
        for c in floats:
            if c in df.columns:
                raw = df[c].to_numpy(dtype=str)
                df[c] = np.where(np.isin(raw, ["", "<NA>"]), "nan", raw).astype(np.float64)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as e:
        raise ResultFileError(f"{str(path)!r} is not a readable results CSV ({e})") from e
    if "rows" in side and len(df) != side["rows"]:
        raise ResultFileError(f"{str(path)!r} has {len(df)} rows but was saved with {side['rows']}; "
                              "it was cut short or edited: save the result again")
    for c, t in dtypes.items():
        if c in df.columns and str(df[c].dtype) != t:
            try:
                df[c] = df[c].astype(t)
            except (TypeError, ValueError):
                pass  # keep what read_csv inferred
    return df, _decode(side.get("attrs", {}))


def load(path, *, format: str | None = None) -> pd.DataFrame:  # noqa: A002
    """Read a result written by :func:`save`, with its ``attrs``.

    ``attrs["recorded"]`` is set to True (the rows were measured earlier, not now).
    Results saved before results carried their identity in columns get ``device_name``
    and ``run_id`` columns from their metadata.

    Raises
    ------
    FileNotFoundError
        No such file (for CSV: or no sidecar ``.json``).
    ResultFileError (a ValueError)
        A truncated or damaged file, a sidecar that is not this CSV's, or a CSV that
        changed after it was saved.
    """
    from ..schema import conform, kind_of

    path = Path(path)
    fmt = _format(path, format)
    if not path.exists():
        raise FileNotFoundError(f"no results file {str(path)!r}")
    if path.stat().st_size == 0:
        raise ResultFileError(f"{str(path)!r} is empty (0 bytes): nothing was saved there")
    df, attrs = _read_parquet(path) if fmt == "parquet" else _read_csv(path)
    df.attrs.clear()
    df.attrs.update(attrs)
    df.attrs["recorded"] = True
    try:
        kind = kind_of(df)
    except ValueError:
        return df  # a frame of the user's own, saved with save(): give it back as it is
    return conform(df, kind)


def _data_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "data"


def recorded_names() -> list[str]:
    """Names of the recorded results present in ``gcexplore/data``."""
    d = _data_dir()
    return sorted(p.stem for p in d.glob("*.parquet")) if d.is_dir() else []


def load_recorded(name: str) -> pd.DataFrame:
    """A result recorded on the project's GPU and shipped in ``gcexplore/data/``.

    Parameters
    ----------
    name : {"sweep", "scaling", "occupancy", "isolation", "torch_sweep", "trace", "trace_overlap", "pm", "pm_trace", ...}
        ``"trace"``: the CUPTI kernel trace of the PyTorch matmul + sigmoid pair at
        24+108 in all four modes; ``"trace_overlap"``: the event rows of the same run
        (``summarize(load_recorded("trace_overlap"), trace=load_recorded("trace"))``);
        ``"pm"``: PM samples (DRAM % of peak, SMs active) of two memory kernels on 24 and
        108 SMs, alone and together, with ``"pm_trace"`` their kernel trace
        (``plot_dram_timeline(load_recorded("pm"), load_recorded("pm_trace"))``).

    Returns
    -------
    pandas.DataFrame
        With ``attrs["recorded"] = True`` and the GPU's metadata.

    Raises
    ------
    ValueError
        Unknown name (the message lists the available ones).
    FileNotFoundError
        A known name whose file is not in this installation.
    """
    present = recorded_names()
    if name not in RECORDED and name not in present:
        raise ValueError(f"unknown recorded result {name!r}; recorded results are "
                         f"{', '.join(sorted(set(RECORDED) | set(present)))}")
    path = _data_dir() / f"{name}.parquet"
    if not path.exists():
        raise FileNotFoundError(
            f"recorded result {name!r} is not in {str(_data_dir())!r} (present: {', '.join(present) or 'none'}); "
            "bench/record.py produces it on a GPU")
    return load(path)


# ---------------------------------------------------------------------------
# Chrome / Perfetto trace
# ---------------------------------------------------------------------------


def _lanes(intervals: list[tuple[float, float]]) -> list[int]:
    """Greedy lane per interval so intervals in one lane never overlap (trace slices must nest)."""
    order = sorted(range(len(intervals)), key=lambda i: intervals[i])
    ends: list[float] = []
    lane = [0] * len(intervals)
    for i in order:
        s, e = intervals[i]
        for j, end in enumerate(ends):
            if end <= s:
                ends[j] = e
                lane[i] = j
                break
        else:
            ends.append(e)
            lane[i] = len(ends) - 1
    return lane


def _meta(kind: str, pid: int, name: str, tid: int | None = None) -> dict:
    ev = {"ph": "M", "pid": pid, "name": kind, "args": {"name": name}}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _occupancy_events(df: pd.DataFrame) -> list[dict]:
    events = []
    parts = sorted_partitions(df["partition"])
    for pid, part in enumerate(parts, start=1):
        g = df[df["partition"] == part]
        events.append(_meta("process_name", pid, f"partition {part} ({g['sm_id'].nunique()} SMs)"))
        events.append({"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": pid}})
        tids = {}
        for sm, gs in g.groupby("sm_id", sort=True):
            iv = list(zip(gs["start_ns"].astype(float) / 1e3, gs["end_ns"].astype(float) / 1e3))
            for (s, e), lane, wl, blk in zip(iv, _lanes(iv), gs["workload"], gs["block"]):
                tid = int(sm) * 64 + lane
                if tid not in tids:
                    tids[tid] = f"SM {int(sm)}" + (f" slot {lane}" if lane else "")
                    events.append(_meta("thread_name", pid, tids[tid], tid))
                events.append({"ph": "X", "pid": pid, "tid": tid, "name": str(wl), "ts": s,
                               "dur": max(e - s, 0.001), "cat": "block",
                               "args": {"sm_id": int(sm), "block": int(blk), "workload": str(wl)}})
    return events


def _overlap_events(df: pd.DataFrame, reps: int | None) -> list[dict]:
    events = []
    pid = 0
    for (layout, mode), g in df.groupby(["layout", "mode"], sort=False):
        pid += 1
        events.append(_meta("process_name", pid, f"{layout} {mode}"))
        events.append({"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": pid}})
        # One track per partition; plain streams of the whole device run at once, so
        # in "streams" mode each workload gets its own track.
        keys = []
        for part, wl in zip(g["partition"], g["workload"]):
            key = f"{part}: {wl}" if mode == "streams" else str(part)
            if key not in keys:
                keys.append(key)
        for tid, key in enumerate(keys, start=1):
            events.append(_meta("thread_name", pid, key, tid))
        offset = 0.0
        rep_ids = list(dict.fromkeys(g["rep"]))
        if reps is not None:
            rep_ids = rep_ids[:reps]
        for rep in rep_ids:
            gr = g[g["rep"] == rep]
            span = float(gr["makespan_ms"].max()) if "makespan_ms" in gr else float((gr.start_ms + gr.duration_ms).max())
            for r in gr.itertuples():
                key = f"{r.partition}: {r.workload}" if mode == "streams" else str(r.partition)
                args = {"rep": int(r.rep), "sm_count": int(r.sm_count), "duration_ms": float(r.duration_ms)}
                for col in ("throughput_tflops", "bandwidth_gbs"):
                    v = getattr(r, col, math.nan)
                    if isinstance(v, float) and math.isfinite(v):
                        args[col] = float(v)
                events.append({"ph": "X", "pid": pid, "tid": keys.index(key) + 1, "name": str(r.workload),
                               "ts": (offset + float(r.start_ms)) * 1e3, "dur": float(r.duration_ms) * 1e3,
                               "cat": mode, "args": args})
            offset += span * 1.1 + 0.01  # a visible gap between repetitions
    return events


def _refuse_sidecar(path: Path) -> None:
    """ValueError when ``path`` is the metadata sidecar of a saved CSV result."""
    if path.suffix.lower() != ".json" or not path.with_suffix(".csv").exists() or not path.exists():
        return
    try:
        side = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if isinstance(side, dict) and "dtypes" in side:
        raise ValueError(f"{str(path)!r} is the metadata sidecar of {str(path.with_suffix('.csv'))!r}; "
                         "writing a trace there would orphan that result — choose another name")


_KERNEL_ARGS = ("workload", "rep", "launch", "sm_count", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
                "block_z", "cluster_x", "cluster_y", "cluster_z", "registers_per_thread", "static_shared_bytes",
                "dynamic_shared_bytes", "max_active_clusters", "bytes", "graph_id", "context_id", "correlation_id")


def _kernel_events(df: pd.DataFrame, reps: int | None) -> list[dict]:
    """A kernel trace: one process per layout and mode, one track per partition and stream."""
    events = []
    for pid, ((layout, mode), g) in enumerate(df.groupby(["layout", "mode"], sort=False), start=1):
        events.append(_meta("process_name", pid, f"{layout} {mode}".strip()))
        events.append({"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": pid}})
        tracks = sorted({(str(p), int(s)) for p, s in zip(g["partition"], g["stream_id"])},
                        key=lambda t: (partition_key(t[0]), t[1]))
        tids = {}
        for key in tracks:
            tids[key] = len(tids) * 8 + 1
            events.append(_meta("thread_name", pid, f"{key[0]} · stream {key[1]}", tids[key]))
        rep_ids = list(dict.fromkeys(g["rep"]))[:reps] if reps is not None else list(dict.fromkeys(g["rep"]))
        offset = 0.0
        for rep in rep_ids:
            gr = g[g["rep"] == rep]
            for key, gk in gr.groupby([gr["partition"].astype(str), gr["stream_id"].astype(int)], sort=False):
                iv = list(zip(gk["start_ms"].astype(float), gk["end_ms"].astype(float)))
                for (s, e), lane, r in zip(iv, _lanes(iv), gk.itertuples()):
                    args = {c: getattr(r, c) for c in _KERNEL_ARGS if hasattr(r, c)}
                    events.append({"ph": "X", "pid": pid, "tid": tids[key] + lane, "name": str(r.name),
                                   "ts": (offset + s) * 1e3, "dur": max(e - s, 1e-6) * 1e3,
                                   "cat": str(getattr(r, "activity", "kernel")), "args": args})
            offset += float(gr["end_ms"].max()) * 1.1 + 0.01
    return events


def _json_clean(v: Any) -> Any:
    """Plain JSON values: numpy scalars unwrapped, NaN and infinities as null."""
    if isinstance(v, dict):
        return {str(k): _json_clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_clean(x) for x in v]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if v is pd.NA:
        return None
    return v


def to_chrome_trace(df: pd.DataFrame, path, *, reps: int | None = 5) -> Path:
    """Write a timeline of a result for Perfetto (ui.perfetto.dev) or ``chrome://tracing``.

    Parameters
    ----------
    df : pandas.DataFrame
        An :func:`gcexplore.occupancy` result (one process per partition, one track per
        SM, one slice per block; blocks resident at the same time on one SM go to
        extra "slot" tracks) or a :func:`gcexplore.profile_overlap` /
        :func:`gcexplore.sweep` result (one process per layout and mode, one track per
        partition, repetitions laid end to end), or a kernel trace (``trace=True`` or
        :func:`gcexplore.kernel_trace`: one process per layout and mode, one track per
        partition and stream, one slice per kernel with its grid, block, cluster,
        registers and shared memory as arguments).
    path : str or path
        Output ``.json`` file.
    reps : int or None, default 5
        Overlap results: repetitions per mode to draw (None: all).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ValueError
        A DataFrame of another kind, ``reps`` below 1, or a ``path`` that is the
        metadata sidecar of a saved CSV result.
    """
    from .._checks import as_count
    from .provenance import require_one_run
    from .validate import check_result

    if reps is not None:
        reps = as_count("reps", reps)
    kind = check_result(df, ("occupancy", "overlap", "trace"), "to_chrome_trace")
    require_one_run(df, "to_chrome_trace")  # one timeline: two runs' repetitions would interleave
    events = {"occupancy": lambda: _occupancy_events(df), "trace": lambda: _kernel_events(df, reps)}.get(
        kind, lambda: _overlap_events(df, reps))()
    path = Path(path)
    _refuse_sidecar(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    trace = {"traceEvents": events, "displayTimeUnit": "ms",
             "otherData": {k: v for k, v in _encode(dict(df.attrs)).items()
                           if isinstance(v, (str, int, bool)) or (isinstance(v, float) and math.isfinite(v))}}
    text = json.dumps(_json_clean(trace), allow_nan=False)  # strict JSON: Perfetto refuses NaN
    _atomic_write(path, lambda tmp: Path(tmp).write_text(text))
    return path
