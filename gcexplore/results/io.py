"""Save and load results with their metadata; export timelines.

- :func:`save` / :func:`load`: parquet (pyarrow; ``df.attrs`` as JSON in the schema
  metadata) or CSV (``df.attrs`` and the column dtypes in a sidecar ``<name>.json``).
  Loading sets ``df.attrs["recorded"] = True``.
- :func:`load_recorded`: results measured on the project's GPU that ship in
  ``gcexplore/data/``.
- :func:`to_chrome_trace` (:mod:`.chrome_trace`): a JSON timeline for Perfetto.

Files are written through :mod:`.files` (a temporary file beside the target and a rename, with
the permissions an ordinary write would give). A save never replaces a folder, a device, or a
``.json`` beside a CSV that is not that CSV's sidecar. Nothing here needs a GPU.

Over 500 lines: saving and loading share the bounded readers of hostile files (sizes checked before
decoding), which must agree with what save writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .files import as_path, atomic_write, check_target, digest, named_error, replace_with, temp_beside

__all__ = ["MAX_ATTRS_DEPTH", "RECORDED", "ResultFileError", "load", "load_recorded", "recorded_folder",
           "recorded_names", "save"]

#: Names of the recorded results shipped in gcexplore/data (see bench/record.py).
RECORDED = ("sweep", "scaling", "occupancy", "isolation", "torch_sweep", "trace", "trace_overlap", "occupancy_best",
            "primary_sms", "bandwidth_sharing", "l2_sharing", "pm", "pm_trace", "sweep_second", "torch_sweep_second",
            "sweep_twice", "campaign", "comm", "comm_4gpu", "comm_zero", "comm_zero_trace", "comm_fit",
            "comm_fit_trace", "predict_profiles", "predict_sweep", "predict_profiles_h200", "serving",
            "mechanisms")
#: Deepest nesting of lists and dicts accepted in ``df.attrs`` (saved or loaded).
MAX_ATTRS_DEPTH = 64

#: The most a results file may hold once decoded, checked before decoding (a 1.7 MB parquet can
#: decompress to 9 GB): bytes of uncompressed column data (a CSV: its size), and cells (rows x columns).
#: Raise them here to read a larger result you trust.
MAX_LOAD_BYTES = 4 << 30
MAX_LOAD_CELLS = 400_000_000
#: The largest metadata read: a CSV's sidecar, a parquet file's stored attrs.
MAX_METADATA_BYTES = 64 << 20

_ATTRS_KEY = b"gcexplore.attrs"
_FORMATS = ("parquet", "csv")


class ResultFileError(ValueError):
    """A results file (or its sidecar) that cannot be read back as it was saved."""


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
        if set(v) == {"__tuple__"} and isinstance(v["__tuple__"], list):
            return tuple(_decode(x) for x in v["__tuple__"])
        return {k: _decode(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_decode(x) for x in v]
    return v


def nesting_depth(v: Any, limit: int = MAX_ATTRS_DEPTH) -> int:
    """How deep lists, tuples, dicts and arrays nest in ``v`` (counted without recursion,
    stopping once past ``limit``)."""
    deepest, stack = 0, [(v, 1)]
    while stack and deepest <= limit:
        x, d = stack.pop()
        if isinstance(x, dict):
            x = list(x.values())
        elif isinstance(x, np.ndarray):
            x = [] if x.dtype != object else list(x.ravel())
            d += 0 if x else -1
        if isinstance(x, (list, tuple)):
            deepest = max(deepest, d)
            stack.extend((y, d + 1) for y in x)
    return deepest


def plain_attrs(attrs: dict) -> dict:
    """``attrs`` as JSON values (tuples tagged); ValueError when nested past :data:`MAX_ATTRS_DEPTH`."""
    if nesting_depth(dict(attrs)) > MAX_ATTRS_DEPTH:
        raise ValueError(f"df.attrs nests lists or dicts deeper than {MAX_ATTRS_DEPTH} levels; results metadata "
                         "holds plain values, lists and dicts: flatten it before saving")
    return _encode(dict(attrs))


def _loads_metadata(text, where: str) -> Any:
    """JSON metadata, refused (ResultFileError) when damaged or nested past MAX_ATTRS_DEPTH."""
    try:
        value = json.loads(text)
    except RecursionError:
        value = None
        deep = True
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ResultFileError(f"{where} is damaged: not UTF-8 JSON ({e})") from e
    else:
        deep = nesting_depth(value, MAX_ATTRS_DEPTH + 2) > MAX_ATTRS_DEPTH + 2  # the sidecar's own two levels
    if deep:
        raise ResultFileError(f"{where} nests deeper than {MAX_ATTRS_DEPTH} levels, "
                              "which save never writes: the file is damaged or not a gcexplore result")
    return value


def bare(df: pd.DataFrame) -> pd.DataFrame:
    """``df``'s columns in a new frame without attrs, copying no data (copy on write keeps ``df`` as it is).

    pandas deep-copies ``attrs`` into every frame, column or group derived from a frame; a
    shipped run's (its fit, every repetition's origin) makes each copy cost milliseconds, so
    code that slices a frame many times works on ``bare(df)`` and sets the attrs once.
    """
    return pd.DataFrame(df, copy=False)


@contextlib.contextmanager
def without_attrs(df: pd.DataFrame):
    """``df`` with its attrs set aside for the block, then put back.

    pandas deep-copies ``attrs`` into every frame or column derived from ``df``; a kernel
    trace's (every repetition's origin, every green context) makes each copy cost seconds.
    """
    saved = df.attrs
    df.attrs = {}
    try:
        yield df
    finally:
        df.attrs = saved


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


def is_sidecar(path: Path, csv_name: str | None = None) -> bool:
    """True when ``path`` holds the metadata :func:`save` writes beside a CSV (that CSV's,
    when ``csv_name`` is given)."""
    try:
        if os.stat(path).st_size > 64 << 20:
            return False
        side = json.loads(Path(path).read_bytes())
    except (OSError, ValueError, RecursionError):
        return False
    return (isinstance(side, dict) and isinstance(side.get("dtypes"), dict)
            and (csv_name is None or side.get("csv") in (None, csv_name)))


def is_saved_result(path: Path) -> bool:
    """True when ``path`` is a parquet file :func:`save` wrote (its footer holds gcexplore's attrs):
    what a companion file (a comm run's ``-trace.parquet``) may replace without asking."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        return _ATTRS_KEY in (pq.read_schema(path).metadata or {})
    except (OSError, pa.ArrowException):
        return False


def _old_sidecar(path: Path) -> dict | None:
    """The sidecar a CSV save would replace: None when there is none; FileExistsError
    when the ``.json`` there is not this CSV's metadata (a save must not destroy it)."""
    side_path = _sidecar(path)
    check_target(side_path)
    if not side_path.exists():
        return None
    if not is_sidecar(side_path, path.name):
        raise FileExistsError(
            f"{str(side_path)!r} exists and is not the metadata sidecar of {str(path)!r}; saving this CSV would "
            "replace it with the sidecar: choose another name, move that file, or save as .parquet")
    side = json.loads(side_path.read_bytes())
    side.pop("previous", None)
    return side if path.exists() else None


def save(df: pd.DataFrame, path, *, format: str | None = None, overwrite: bool = True) -> Path:  # noqa: A002
    """Write a result DataFrame with its ``attrs``, atomically.

    The file is written beside the target and renamed over it, so a failure leaves an
    earlier file intact. A CSV's sidecar ``<stem>.json`` records the CSV's row count
    and SHA-256, so :func:`load` notices a CSV and sidecar that do not belong together;
    it also keeps the previous CSV's description until the new CSV is in place, so a
    crash between the two renames leaves the old result loadable.

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
        Its permissions are an existing file's, else 0666 less the umask.

    Raises
    ------
    ValueError
        A CSV named ``*.json``, an unknown format, or ``attrs`` nested deeper than
        :data:`MAX_ATTRS_DEPTH`.
    OSError
        ``path`` (or a CSV's sidecar) is a folder or a device; a ``.json`` beside the
        CSV that is not its sidecar (FileExistsError); the folder cannot be written
        (the message names ``path``).
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"save needs a pandas DataFrame, got {type(df).__name__}")
    path = as_path(path, "save")
    fmt = _format(path, format)
    if fmt == "csv" and _sidecar(path) == path:
        raise ValueError(f"cannot save CSV as {str(path)!r}: its metadata sidecar would have the same name; "
                         "use a .csv suffix")
    check_target(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{str(path)!r} exists; pass overwrite=True to replace it or choose another name")
    side_attrs = plain_attrs(df.attrs)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise named_error(e, path) from e
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(df, preserve_index=False)
        meta = dict(table.schema.metadata or {})
        meta[_ATTRS_KEY] = json.dumps(side_attrs, allow_nan=True).encode()
        # pandas would also store attrs under its own key; keep one source of truth.
        meta.pop(b"PANDAS_ATTRS", None)
        atomic_write(path, lambda tmp: pq.write_table(table.replace_schema_metadata(meta), tmp))
        return path
    _save_csv(df, path, side_attrs)
    return path


def _save_csv(df: pd.DataFrame, path: Path, attrs: dict) -> None:
    previous = _old_sidecar(path)
    data = df.to_csv(index=False).encode("utf-8")
    side = {"attrs": attrs,
            "dtypes": {str(c): str(t) for c, t in df.dtypes.items()},
            "columns": [str(c) for c in df.columns],
            "rows": int(len(df)), "sha256": hashlib.sha256(data).hexdigest(), "csv": path.name}
    if previous is not None:
        side["previous"] = previous  # the CSV still in place until the second rename
    csv_tmp = temp_beside(path, lambda tmp: Path(tmp).write_bytes(data))
    try:
        side_tmp = temp_beside(_sidecar(path), lambda tmp: Path(tmp).write_text(
            json.dumps(side, allow_nan=True, indent=1)))
    except BaseException:
        os.unlink(csv_tmp)
        raise
    try:
        replace_with(side_tmp, _sidecar(path))
    except BaseException:
        os.unlink(csv_tmp)
        raise
    replace_with(csv_tmp, path)


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------


def _read_parquet(path: Path) -> tuple[pd.DataFrame, dict]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        _check_parquet_size(path, pq.read_metadata(path))
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as e:
        raise ResultFileError(f"{str(path)!r} is not a readable parquet file ({e}); it may be truncated "
                              "or damaged: save the result again from its source") from e
    meta = table.schema.metadata or {}
    attrs = _loads_metadata(meta[_ATTRS_KEY], f"the metadata stored in {str(path)!r}") if _ATTRS_KEY in meta else {}
    if not isinstance(attrs, dict):
        raise ResultFileError(f"the metadata stored in {str(path)!r} is {type(attrs).__name__} data, not the "
                              "attributes dict gcexplore.results.save writes")
    try:
        df = table.to_pandas()
    except (pa.ArrowException, ValueError, TypeError, KeyError) as e:
        raise ResultFileError(f"the pandas metadata stored in {str(path)!r} is damaged ({type(e).__name__}: "
                              f"{e}); pyarrow.parquet.read_table(path, use_pandas_metadata=False) reads the "
                              "columns alone") from e
    return df, _decode(attrs)


def _size(n: float) -> str:
    units = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"), (1, "bytes"))
    return next(f"{n / u:.1f} {name}" for u, name in units if n >= u or u == 1)


def _too_large(path: Path, what: str, found: str, limit: str, knob: str) -> ResultFileError:
    return ResultFileError(f"{str(path)!r} {what} {found}, over the {limit} gcexplore reads without being asked "
                           f"(gcexplore.results.io.{knob}); not read. A result you trust can be read by raising it")


def _check_parquet_size(path: Path, md) -> None:
    """Refuse, from the footer alone, a parquet file whose data would decode past the budget."""
    cells = md.num_rows * max(1, md.num_columns)
    if cells > MAX_LOAD_CELLS:
        raise _too_large(path, "holds", f"{md.num_rows} rows x {md.num_columns} columns", f"{MAX_LOAD_CELLS} cells",
                         "MAX_LOAD_CELLS")
    raw = sum(md.row_group(i).column(j).total_uncompressed_size
              for i in range(md.num_row_groups) for j in range(md.num_columns))
    if raw > MAX_LOAD_BYTES:
        raise _too_large(path, "decompresses to", _size(raw), _size(MAX_LOAD_BYTES), "MAX_LOAD_BYTES")
    stored = sum(len(k) + len(v) for k, v in (md.metadata or {}).items())
    if stored > MAX_METADATA_BYTES:
        raise _too_large(path, "stores metadata of", _size(stored), _size(MAX_METADATA_BYTES), "MAX_METADATA_BYTES")


def _read_sidecar(path: Path, side_path: Path) -> dict:
    if not side_path.exists():
        raise FileNotFoundError(f"{str(path)!r} has no metadata sidecar {str(side_path)!r} "
                                "(gcexplore.results.save writes both)")
    check_target(side_path, "load")
    where = f"the sidecar {str(side_path)!r} of {str(path)!r}"
    if (size := side_path.stat().st_size) > MAX_METADATA_BYTES:  # before reading: not a MemoryError later
        raise _too_large(side_path, "is", _size(size), f"{_size(MAX_METADATA_BYTES)} of a sidecar",
                         "MAX_METADATA_BYTES")
    side = _loads_metadata(side_path.read_bytes(), where)
    if not isinstance(side, dict) or not isinstance(side.get("dtypes", {}), dict) \
            or not isinstance(side.get("attrs", {}), dict):
        raise ResultFileError(f"the sidecar {str(side_path)!r} is {type(side).__name__} data, not the metadata "
                              "gcexplore.results.save writes ({'attrs': ..., 'dtypes': ..., ...})")
    if side.get("csv") not in (None, path.name):
        raise ResultFileError(f"the sidecar {str(side_path)!r} belongs to {side['csv']!r}, not to {path.name!r}")
    if "sha256" in side and side["sha256"] != (found := digest(path)):
        previous = side.get("previous")
        if isinstance(previous, dict) and previous.get("sha256") == found:
            return previous  # a save stopped between its two renames: the old CSV is still whole
        raise ResultFileError(
            f"{str(path)!r} does not match its sidecar {str(side_path)!r} (the CSV changed or was cut short "
            f"after saving; the sidecar describes {side.get('rows', '?')} rows); save the result again")
    _check_dtypes(side.get("dtypes", {}), side_path)
    return side


def _check_dtypes(dtypes: dict, side_path: Path) -> None:
    """ResultFileError for a dtype no saved result has (a fixed-width type could ask for gigabytes)."""
    for c, t in dtypes.items():
        try:
            dt = pd.api.types.pandas_dtype(t) if isinstance(t, str) and len(t) < 200 else None
        except (TypeError, ValueError):
            dt = None
        if dt is None or (isinstance(dt, np.dtype) and dt.kind in "SUVO" and dt.itemsize > 8):
            raise ResultFileError(f"the sidecar {str(side_path)!r} gives column {str(c)[:80]!r} the dtype "
                                  f"{str(t)[:80]!r}, which save never writes (fixed-width or unknown types "
                                  "are refused): the sidecar is damaged")


def _ends_mid_row(path: Path) -> bool:  # to_csv ends every row, the last too, with a newline
    with open(path, "rb") as f:
        return f.seek(0, os.SEEK_END) > 0 and f.seek(-1, os.SEEK_END) >= 0 and f.read(1) != b"\n"


def _read_csv(path: Path) -> tuple[pd.DataFrame, dict]:
    if (size := path.stat().st_size) > MAX_LOAD_BYTES:
        raise _too_large(path, "is", _size(size), _size(MAX_LOAD_BYTES), "MAX_LOAD_BYTES")
    side = _read_sidecar(path, _sidecar(path))
    if "rows" not in side and "sha256" not in side and _ends_mid_row(path):  # nothing else would tell
        raise ResultFileError(f"{str(path)!r} ends in the middle of a row: it was cut short; save the result again")
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
        A folder, a device, a truncated or damaged file or metadata, a sidecar that is
        not this CSV's, or a CSV that changed after it was saved.
    """
    from ..schema import conform
    from .kinds import kind_of
    from .run import stamp

    path = as_path(path, "load")
    fmt = _format(path, format)
    if not path.exists():
        raise FileNotFoundError(f"no results file {str(path)!r}")
    try:
        check_target(path, "load")
    except OSError as e:  # a parquet "dataset" folder would be read as one result: refuse it
        raise ResultFileError(f"{e}: gcexplore results are single files written by save()") from None
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
    return stamp(conform(df, kind))  # the token its derived numbers are kept under


def _data_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "data"


def recorded_names() -> list[str]:
    """Names of the recorded results present in ``gcexplore/data``."""
    d = _data_dir()
    return sorted(p.stem for p in d.glob("*.parquet")) if d.is_dir() else []


def recorded_folder(name: str) -> Path | None:
    """A recorded campaign's folder (``gcexplore/data/<name>/``, for ``load_campaign`` and
    ``gcexplore campaign status``), or None."""
    return folder if ((folder := _data_dir() / name) / "campaign.json").is_file() else None


def load_recorded(name: str) -> pd.DataFrame:
    """A result recorded on the project's GPU and shipped in ``gcexplore/data/``.

    Parameters
    ----------
    name : {"sweep", "scaling", "occupancy", "isolation", "torch_sweep", "trace", "trace_overlap", "pm", ...}
        ``"trace"``: the CUPTI kernel trace of the PyTorch matmul + sigmoid pair at
        24+108 in all four modes; ``"trace_overlap"``: the event rows of the same run
        (``summarize(load_recorded("trace_overlap"), trace=load_recorded("trace"))``);
        ``"pm"``: PM samples (DRAM % of peak, SMs active) of two memory kernels on 24 and
        108 SMs, alone and together, with ``"pm_trace"`` their kernel trace
        (``plot_dram_timeline(load_recorded("pm"), load_recorded("pm_trace"))``); ``"campaign"``:
        a two-GPU campaign, also shipped as its folder (``attrs["folder"]``, :func:`recorded_folder`).

    Returns a DataFrame with ``attrs["recorded"] = True`` and the GPU's metadata. Raises
    ValueError for an unknown name (listing the known ones), FileNotFoundError for a known
    name whose file is not in this installation.
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
    df = load(path)
    if (folder := recorded_folder(name)) is not None:  # also shipped as a campaign folder: where it is
        df.attrs["folder"] = str(folder)
    return df


