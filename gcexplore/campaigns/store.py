"""A campaign folder on disk: its spec, one shard per finished task, failure records.

Layout of a folder (format :data:`FORMAT`)::

    campaign.json            the spec: format, campaign id, every task by key
    shards/<key>.parquet     a finished task's rows; attrs["campaign"] holds its task,
                             identity (card UUID, host, ...) and timings
    failed/<key>.json        a task that raised: the error and the worker's traceback
    checkpoints/<key>.jsonl  the layout-level checkpoint of a task (gcexplore.runner)
    traces/<key>.parquet     a traced task's kernel trace
    torn/                    shards set aside by a repair (never deleted)
    campaign.lock            held (flock) by the campaign running on the folder (made O_EXCL, removed after)

Every file is written to an exclusive, unpredictable temporary name beside it and
renamed, so a reader sees a whole shard or none and a symlink planted at a name is
replaced, never written through. Task keys are plain file names (:func:`check_key`).
Readers open plain files only (no symlink, pipe or device) and read bounded amounts.
:func:`load_campaign` reads a finished or unfinished campaign;
:func:`campaign_status` lists each task and what the folder holds for it.

Pure Python, pandas and pyarrow; nothing here touches the GPU or imports Dask.

Over 500 lines: the folder's formats (spec, shards, failure records, lock) and their bounded readers,
kept together so that every reader and writer agree.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import socket
import stat
import tempfile
import time
from pathlib import Path

import pandas as pd

from ..results import io as _io
from ..results.kinds import kind_of
from ..schema import IDENTITY_COLUMNS, SAMPLE_IDENTITY, conform, identity_name
from . import disk_full

__all__ = ["CAMPAIGN_COLUMNS", "FORMAT", "CampaignFolder", "FolderLock", "belongs", "campaign_status", "check_key",
           "load_campaign", "open_regular", "read_bounded"]

#: Version of the folder layout; a folder of a newer format is refused, not misread.
FORMAT = 1
SPEC_NAME = "campaign.json"
LOCK_NAME = "campaign.lock"

#: Columns a campaign adds to every row (after the experiment's own), with their dtypes.
CAMPAIGN_COLUMNS = {
    "experiment": "str", "pair": "str", "split_set": "str", "task_key": "str", "campaign_id": "str",
    **{k: v for k, v in IDENTITY_COLUMNS.items() if k not in SAMPLE_IDENTITY},  # the one spelling: schema
    "task_started_s": "float64", "task_finished_s": "float64",
}

_UUID = identity_name("uuid")


#: Largest spec / failure record read (bytes): a planted /dev/zero or a huge file is refused, not read.
MAX_JSON_BYTES = 64 << 20
MAX_RECORD_BYTES = 1 << 20
#: A task key is one file name: no separators, no leading dot (nothing built from it leaves the folder).
_KEY = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9_.+-]{0,199}\Z")
_SUBDIRS = ("shards", "failed", "checkpoints", "torn", "traces")


def check_key(key) -> str:
    """``key`` if it is a task key that names a file inside the folder; else ValueError."""
    if not isinstance(key, str) or not _KEY.match(key):
        raise ValueError(f"task key {str(key)[:80]!r} is not a plain file name (letters, digits, _ . + -, "
                         "not starting with '.'): a path built from it could leave the campaign folder")
    return key


class NotRegular(OSError):
    """A path that is a symlink, a pipe, a device or a folder where a plain file belongs."""


def open_regular(path, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """A descriptor of ``path`` opened without following a symlink or blocking on a pipe;
    NotRegular unless it is a plain file."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(f"{str(path)!r} is not a regular file ({_what(st.st_mode)})")
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _what(mode: int) -> str:
    return ("a named pipe" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a folder" if stat.S_ISDIR(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a plain file")


def read_bounded(path, limit: int) -> bytes:
    """The bytes of a plain file (never through a symlink), refused past ``limit`` bytes."""
    try:
        fd = open_regular(path)
    except OSError as e:
        if e.errno == errno.ELOOP:  # O_NOFOLLOW met a symlink
            raise NotRegular(f"{str(path)!r} is a symlink, not read") from None
        raise
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{str(path)!r} is larger than {limit} bytes, not read")
    return data


def _write_json(path: Path, data: dict) -> None:
    """Write ``path`` through an exclusive, unpredictable temporary file beside it and a rename
    (a symlink planted at ``path`` is replaced, never written through)."""
    from ..results.files import new_file_mode

    _real_dir(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True, default=str)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, new_file_mode())  # the umask's (077: the campaign's records are the user's own)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _real_dir(path: Path) -> Path:
    """Create ``path`` (a folder of the campaign); refuse it when it is a symlink or not a folder."""
    path.mkdir(parents=True, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise NotRegular(f"{str(path)!r} is {'a symlink' if stat.S_ISLNK(st.st_mode) else _what(st.st_mode)}, "
                         "not a folder: gcexplore writes campaign files only into real folders of the campaign")
    return path


def _listing(folder: Path, suffix: str, notes: list[str]) -> list[tuple[str, Path]]:
    """(key, path) of the plain files ``*suffix`` in a real sub-folder; what is skipped goes to ``notes``."""
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return []
    if not stat.S_ISDIR(st.st_mode):
        notes.append(f"{folder.name}/ is {'a symlink' if stat.S_ISLNK(st.st_mode) else _what(st.st_mode)}, "
                     "not a folder of the campaign: skipped")
        return []
    found = []
    with os.scandir(folder) as it:
        for entry in sorted(it, key=lambda e: e.name):
            if not entry.name.endswith(suffix) or entry.name.startswith("."):
                continue  # temporaries of interrupted writes start with '.'
            key = entry.name[: -len(suffix)]
            if not _KEY.match(key):
                notes.append(f"{folder.name}/{entry.name!r}: not a task key, skipped")
            elif not entry.is_file(follow_symlinks=False):
                what = "a symlink" if entry.is_symlink() else _what(entry.stat(follow_symlinks=False).st_mode)
                notes.append(f"{folder.name}/{entry.name}: {what}, not a plain file: skipped")
            else:
                found.append((key, Path(entry.path)))
    return found


def belongs(df: pd.DataFrame, key: str, task: dict, campaign_id: str) -> str | None:
    """Why the rows of shard ``key`` are not that task's of this campaign, or None when they are."""
    meta = df.attrs.get("campaign")
    if not isinstance(meta, dict):
        return "it has no campaign record (attrs['campaign']): not a shard of a campaign task"
    if meta.get("key") != key:
        return f"its rows are task {str(meta.get('key'))[:80]!r}'s, not {key!r}'s (a copied or swapped shard)"
    if meta.get("campaign_id") != campaign_id:
        return f"it belongs to campaign {str(meta.get('campaign_id'))[:40]!r}, not {campaign_id!r}"
    for field in ("experiment", "pair", "split_set", "card", "splits", "options", "workloads"):
        if field in task and json.dumps(meta.get(field), sort_keys=True, default=str) != \
                json.dumps(task[field], sort_keys=True, default=str):
            return f"its {field} {str(meta.get(field))[:60]!r} is not the task's {str(task[field])[:60]!r}"
    for col, want in (("task_key", key), ("campaign_id", campaign_id), *((c, task.get(c)) for c in
                                                                        ("experiment", "pair", "split_set"))):
        if col in df.columns and want is not None and len(df) and (df[col].astype(str) != str(want)).any():
            return f"some rows name another {col} than {str(want)[:60]!r}"
    why = _rows_of_one_run(df)
    if why:
        return why
    try:
        kind_of(df)
    except ValueError as e:
        return f"its rows are not one result kind ({str(e)[:100]})"
    return None


#: Columns that together name one measured row (those a shard has): a row twice is counted twice.
_ROW_KEY = ("layout", "split_sm_count", "mode", "round", "rep", "workload", "partition", "sm_count", "load",
            "collective", "size_bytes", "comm_sm_count", "ctas", "step", "rank")


def _rows_of_one_run(df: pd.DataFrame) -> str | None:
    """Why the rows are not one run's measurement (checked on rows, not labels), or None."""
    if "run_id" in df.columns and len(df):
        runs = sorted(map(str, df["run_id"].dropna().unique()))
        if len(runs) > 1:
            return f"its rows are of {len(runs)} runs ({', '.join(r[:16] for r in runs[:3])}), not one task's run"
        own = df.attrs.get("run_id")
        if runs and own is not None and runs[0] != str(own):
            return f"its rows are run {runs[0][:16]!r}'s, not the run its record names ({str(own)[:16]!r})"
    key = [c for c in _ROW_KEY if c in df.columns]
    if len(key) >= 3 and len(df):
        dup = int(df.duplicated(subset=key).sum())
        if dup:
            return f"{dup} of its rows repeat another ({', '.join(key)} alike): rows counted twice"
    return None


class CampaignFolder:
    """The files of one campaign (see the module docstring); creates nothing until written to."""

    def __init__(self, folder):
        self.root = Path(folder)
        self.spec_path = self.root / SPEC_NAME
        self.lock_path = self.root / LOCK_NAME
        self.shards, self.failed = self.root / "shards", self.root / "failed"
        self.checkpoints, self.torn = self.root / "checkpoints", self.root / "torn"
        self.traces = self.root / "traces"

    def shard_path(self, key: str) -> Path:
        return self.shards / f"{check_key(key)}.parquet"

    def failure_path(self, key: str) -> Path:
        return self.failed / f"{check_key(key)}.json"

    def checkpoint_path(self, key: str) -> Path:
        return self.checkpoints / f"{check_key(key)}.jsonl"

    def trace_path(self, key: str) -> Path:
        return self.traces / f"{check_key(key)}.parquet"

    def prepare(self, sub: str) -> Path:
        """The sub-folder ``sub`` (shards, failed, ...), created, refused when it is a symlink."""
        if sub not in _SUBDIRS:
            raise ValueError(f"a campaign folder has the sub-folders {', '.join(_SUBDIRS)}, not {sub!r}")
        return _real_dir(self.root / sub)

    # ----------------------------------------------------------------- the spec

    def read_spec(self) -> dict:
        """The spec; ValueError for a file of another format or not a campaign spec."""
        if not os.path.lexists(self.spec_path):
            raise FileNotFoundError(f"{str(self.root)!r} is not a campaign folder (no {SPEC_NAME}); "
                                    "gcexplore.campaign(...) or `gcexplore campaign SPEC` makes one")
        try:
            spec = json.loads(read_bounded(self.spec_path, MAX_JSON_BYTES).decode("utf-8"))
        except NotRegular as e:
            raise ValueError(f"{e}; a campaign spec is a plain file written by gcexplore") from None
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise ValueError(f"{str(self.spec_path)!r} is not readable JSON ({str(e)[:200]}); it is written "
                             "atomically, so it was changed by hand: restore it or start a new campaign "
                             "folder") from None
        found = spec.get("gcexplore_campaign") if isinstance(spec, dict) else None
        if not isinstance(found, int) or not isinstance(spec.get("tasks"), dict):
            raise ValueError(f"{str(self.spec_path)!r} is not a gcexplore campaign spec "
                             "(no 'gcexplore_campaign' format number or no 'tasks')")
        if found > FORMAT:
            raise ValueError(f"campaign folder {str(self.root)!r} has format {found}, written by gcexplore "
                             f"{spec.get('gcexplore_version', '?')}; this gcexplore reads formats up to {FORMAT}: "
                             "upgrade gcexplore to read or resume it")
        for key, task in spec["tasks"].items():
            check_key(key)
            if not isinstance(task, dict) or task.get("key", key) != key:
                raise ValueError(f"{str(self.spec_path)!r}: task {key!r} is not a task record of that key")
        return spec

    def write_spec(self, campaign_id: str, tasks: dict[str, dict], version: str) -> dict:
        """Record the tasks (merged with those already in the folder) and return the spec.

        A folder keeps its first campaign id; tasks are keyed by what they measure, so
        a spec grown by new tasks keeps every shard already written. Call it holding
        :meth:`lock` (two campaigns on one folder would otherwise race on the spec).
        """
        for key in tasks:
            check_key(key)
        spec = self.read_spec() if os.path.lexists(self.spec_path) else {
            "gcexplore_campaign": FORMAT, "campaign_id": campaign_id, "tasks": {},
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        new = {k: t for k, t in tasks.items() if k not in spec["tasks"]}
        if new or not os.path.lexists(self.spec_path):
            spec["tasks"].update(new)
            spec["gcexplore_version"] = version
            _write_json(self.spec_path, spec)
        return spec

    def lock(self) -> FolderLock:
        """Hold the folder for one campaign: a second one on it is refused with who holds it."""
        return FolderLock(self.root, self.lock_path)

    # ----------------------------------------------------------------- shards

    def write_shard(self, key: str, df: pd.DataFrame) -> Path:
        """Save a finished task's rows atomically, then drop an older failure record of it."""
        self.prepare("shards")
        path = _io.save(df, self.shard_path(key), overwrite=True)
        # unlink removes a link itself, never its target; an old record that cannot be removed (a read-only
        # failed/) is harmless: a task with a shard is done whatever failed/ holds
        with contextlib.suppress(OSError):
            os.unlink(self.failure_path(key))
        disk_full.clear(self, key)
        return path

    def write_failure(self, key: str, record: dict, sub: str = "failed") -> Path:
        """The failure record; on a full disk the marker of :func:`.disk_full.write_failure` (naming ``sub``)."""
        return disk_full.write_failure(self, key, record, sub, _write_json)

    def read_shard(self, key: str) -> pd.DataFrame:
        path = self.shard_path(key)
        os.close(open_regular(path))  # a symlink to a result elsewhere is not this task's shard
        return _io.load(path)

    def _move_torn(self, path: Path) -> Path:
        self.prepare("torn")
        dest = self.torn / f"{path.name}.{time.strftime('%Y%m%dT%H%M%S')}.{os.getpid()}"
        os.replace(path, dest)  # files: a rename into torn/ (a real folder), nothing written
        return dest

    def scan(self, spec: dict | None = None, *, repair: bool = False
             ) -> tuple[dict[str, pd.DataFrame], dict[str, dict], list[str]]:
        """(shards by key, failures by key, notes); reads only unless ``repair``.

        A shard that does not load, or (given the ``spec``) whose rows are not its task's
        of this campaign (:func:`belongs`), is left out with a note; ``repair`` moves it
        to ``torn/`` (a read-only folder keeps it, with a note). Symlinks, pipes and
        other non-plain files are skipped with a note, never opened.
        """
        notes: list[str] = []
        shards = {}
        for key, path in _listing(self.shards, ".parquet", notes):
            try:
                df = self.read_shard(key)
                why = None if spec is None else (
                    "it is no task of this campaign" if key not in spec["tasks"] else
                    belongs(df, key, spec["tasks"][key], spec["campaign_id"]))
            except (OSError, ValueError) as e:
                df, why = None, f"{type(e).__name__} ({str(e)[:120]})"
            if why is None:
                shards[key] = df
                continue
            if key not in (spec or {}).get("tasks", {key: 0}):
                notes.append(f"{key}: {why}; ignored")
                continue
            where = "left in place (`gcexplore campaign repair DIR` moves it aside)"
            if repair:
                try:
                    where = f"moved to {self._move_torn(path).relative_to(self.root)}"
                except OSError as e:
                    where = f"left in place (cannot move it: {e.strerror or e})"
            notes.append(f"{key}: {why}; {where}")
        failures = {}
        for key, path in _listing(self.failed, ".json", notes):
            try:
                failures[key] = json.loads(read_bounded(path, MAX_RECORD_BYTES).decode("utf-8", "replace"))
                if not isinstance(failures[key], dict):
                    failures[key] = {"error": "a failure record that is not a JSON object"}
            except (OSError, ValueError, RecursionError) as e:
                failures[key] = {"error": f"unreadable failure record ({str(e)[:120]})"}
        failures.update({k: {"error": why} for k, why in disk_full.marks(self).items()})
        return shards, failures, notes

    def finished_keys(self, spec: dict | None = None, *, repair: bool = False) -> set[str]:
        """Keys whose shard reads back whole and is its task's (what a resume skips)."""
        return set(self.scan(spec, repair=repair)[0])

    def checkpointed_layouts(self, key: str, notes: list[str] | None = None) -> int:
        """Finished layouts in the task's checkpoint (0 for none, for one that is not a plain file, and
        for one larger than a checkpoint can be: said in ``notes``, never read through)."""
        from ..experiments.runner import Checkpoint

        try:
            fd = open_regular(self.checkpoint_path(key))
        except OSError:
            return 0
        lines = 0
        with os.fdopen(fd, "rb") as f:
            if (size := os.fstat(f.fileno()).st_size) > Checkpoint.MAX_BYTES:  # a sparse 30 GiB file: not counted
                if notes is not None:
                    notes.append(f"checkpoints/{key}.jsonl is {size / 2**30:.1f} GiB, over the "
                                 f"{Checkpoint.MAX_BYTES >> 20} MiB a checkpoint can reach: not read")
                return 0
            for chunk in iter(lambda: f.read(1 << 20), b""):
                lines += chunk.count(b"\n")
        return max(0, lines - 1)  # less the header


class FolderLock:
    """An exclusive ``flock`` on ``campaign.lock`` of one campaign folder, held until :meth:`release`.

    The lock file is created with ``O_EXCL`` (the umask's permissions) and removed at release. One
    found there is taken only when it is a plain file with a single link that no campaign holds (a
    killed campaign's): a symlink or a hard link to a user's file is refused, never truncated."""

    def __init__(self, root: Path, path: Path):
        root.mkdir(parents=True, exist_ok=True)
        self.root, self.path, self._fd = root, path, None
        for _ in range(8):  # a holder releasing between our open and our flock: try again
            fd = self._open_fresh_or_found()
            if self._lock(fd):
                break
        else:
            raise RuntimeError(f"campaign folder {str(root)!r}: its {LOCK_NAME} keeps changing hands; try again")
        assert self._fd is not None  # _lock keeps the descriptor it locked
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"pid {os.getpid()} on {socket.gethostname()} since "
                            f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n".encode(), 0)

    def _open_fresh_or_found(self) -> int:
        from ..results.files import new_file_mode

        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                           new_file_mode())
        except FileExistsError:
            pass
        try:
            fd = open_regular(self.path, os.O_RDWR)
        except OSError as e:
            what = "a symlink" if os.path.islink(self.path) else str(e)
            raise NotRegular(f"{str(self.path)!r} is {what}, not a lock file gcexplore made: remove it (nothing "
                             "is written through it)") from None
        if os.fstat(fd).st_nlink != 1:
            os.close(fd)
            raise NotRegular(f"{str(self.path)!r} has several hard links: it may be another file's name; "
                             "gcexplore does not truncate it: remove it")
        return fd

    def _lock(self, fd: int) -> bool:
        """flock ``fd``; True when held and still the file at the path (False: it was swapped, retry)."""
        import fcntl

        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 400, 0).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise RuntimeError(f"campaign folder {str(self.root)!r} is in use by {holder}; two campaigns on one "
                               "folder would race on its spec: wait for that one to finish, or use another "
                               "folder") from None
        st = os.fstat(fd)
        try:
            here = os.lstat(self.path)
        except FileNotFoundError:
            here = None
        if here is None or (here.st_ino, here.st_dev) != (st.st_ino, st.st_dev):
            os.close(fd)  # released and removed by its holder meanwhile
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            import fcntl

            with contextlib.suppress(OSError):  # removed while held: whoever opens it next creates it afresh
                if os.path.samestat(os.lstat(self.path), os.fstat(self._fd)):
                    os.unlink(self.path)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def _with_identity(df: pd.DataFrame) -> pd.DataFrame:
    """A shard's rows with every campaign column; ones an older writer left out come from its attrs."""
    meta = df.attrs.get("campaign", {})
    ident = {**meta.get("identity", {}), **{k: meta.get(k) for k in ("experiment", "pair", "split_set")},
             "task_key": meta.get("key"), "campaign_id": meta.get("campaign_id")}
    for col in CAMPAIGN_COLUMNS:
        if col not in df.columns:
            df[col] = ident.get(col)
    return df


def _combine(frames: list[pd.DataFrame]) -> pd.DataFrame:
    if not frames:
        return pd.DataFrame(columns=list(CAMPAIGN_COLUMNS))
    kinds = []
    for f in frames:
        try:
            kinds.append(kind_of(f))
        except ValueError:
            kinds.append(None)
    df = pd.concat([_with_identity(f) for f in frames], ignore_index=True)
    for col, dtype in CAMPAIGN_COLUMNS.items():
        if dtype == "Int64":
            df[col] = pd.array([None if pd.isna(v) else int(v) for v in df[col]], dtype="Int64")
        elif dtype == "float64":
            df[col] = df[col].astype("float64")
        else:
            df[col] = df[col].fillna("").astype(str)
    if len(set(kinds)) == 1 and kinds[0] is not None:
        df.attrs["kind"] = kinds[0]
        conform(df, kinds[0])
    return df


def _task_row(key: str, task: dict, shard, failure, layouts: int) -> dict:
    status = "done" if shard is not None else "failed" if failure is not None else ("started" if layouts else "pending")
    meta = shard.attrs.get("campaign", {}) if shard is not None else {}
    ident = meta.get("identity", {})
    return {"task_key": key, "experiment": task.get("experiment", ""), "pair": task.get("pair", ""),
            "split_set": task.get("split_set", ""), "card": task.get("card", "any"), "status": status,
            "rows": 0 if shard is None else len(shard), "layouts_checkpointed": layouts,
            _UUID: ident.get(_UUID, ""), "host": ident.get("host", ""),
            "error": "" if failure is None else str(failure.get("error", ""))}


def _scan_with_status(folder, repair: bool):
    store = CampaignFolder(folder)
    spec = store.read_spec()
    shards, failures, notes = store.scan(spec, repair=repair)
    tasks = spec["tasks"]
    rows = [_task_row(k, t, shards.get(k), failures.get(k) if k not in shards else None,
                      store.checkpointed_layouts(k, notes)) for k, t in tasks.items()]
    status = pd.DataFrame.from_records(rows, columns=["task_key", "experiment", "pair", "split_set", "card",
                                                      "status", "rows", "layouts_checkpointed",
                                                      _UUID, "host", "error"])
    counts = {s: int((status["status"] == s).sum()) for s in ("done", "failed", "started", "pending")}
    status.attrs.update(campaign_id=spec["campaign_id"], folder=str(store.root), torn=notes, counts=counts)
    return spec, shards, status


def campaign_status(folder, *, repair: bool = False) -> pd.DataFrame:
    """One row per task of the campaign in ``folder``: its status and what the folder holds.

    Reads only (on a read-only folder too) unless ``repair``. Columns: ``task_key``,
    ``experiment``, ``pair``, ``split_set``, ``card`` (the card the task must run on,
    or ``"any"``), ``status`` (``"done"``: its shard reads back and its rows are that
    task's of this campaign; ``"failed"``: it raised, ``error`` says why; ``"started"``:
    layouts are in its checkpoint but no shard yet; ``"pending"``), ``rows``,
    ``layouts_checkpointed``, ``device_uuid``, ``host``, ``error``.
    ``attrs["counts"]``: tasks per status; ``attrs["torn"]``: a note per shard that does
    not load or is not its task's (left in place, or moved to ``torn/`` with ``repair``;
    the task then counts as not done) and per file skipped for not being a plain file.
    """
    return _scan_with_status(folder, repair)[2]


def load_campaign(folder, *, repair: bool = False) -> pd.DataFrame:
    """Every finished task's rows of the campaign in ``folder``, each task exactly once.

    Works on finished and unfinished campaigns (a campaign still running included) and
    on read-only folders: only whole shards whose rows belong to their task (task key,
    campaign id, experiment, workloads, split set, options, one result kind) are read;
    any other shard is set aside with the reason in ``attrs["torn"]`` (moved to
    ``torn/`` with ``repair``) and its task counts as not done (a resume measures it
    again from its layout checkpoint).

    Returns
    -------
    pandas.DataFrame
        The experiments' columns (for one kind of experiment, in its schema's dtypes)
        followed by :data:`CAMPAIGN_COLUMNS`: ``experiment``, ``pair`` (the workloads
        joined by "+"), ``split_set``, ``task_key``, ``campaign_id``, ``device_uuid``,
        ``device_index``, ``host``, ``device_sm_count``, ``driver_version``,
        ``cuda_core_version``, ``cupti_version`` (empty when not traced),
        ``task_started_s`` and ``task_finished_s`` (Unix seconds on the worker).
        ``attrs``: ``campaign_id``, ``tasks``, ``done``, ``failed`` (key -> error),
        ``pending`` (keys), ``torn`` (notes), ``recorded`` True, ``device_name`` (the
        cards' names) and ``date`` (when the last task finished).

    Raises
    ------
    FileNotFoundError
        ``folder`` holds no campaign spec.
    ValueError
        The spec is damaged or of a newer format than this gcexplore reads.
    """
    spec, shards, status = _scan_with_status(folder, repair)
    df = _combine([shards[k] for k in spec["tasks"] if k in shards])
    failed = status[status["status"] == "failed"]
    df.attrs.update(campaign_id=spec["campaign_id"], tasks=len(spec["tasks"]), done=status.attrs["counts"]["done"],
                    failed=dict(zip(failed["task_key"], failed["error"])),
                    pending=status.loc[status["status"].isin(["pending", "started"]), "task_key"].tolist(),
                    torn=status.attrs["torn"], recorded=True, folder=str(CampaignFolder(folder).root))
    if len(df):  # what a figure's stamp reads: the cards and the last task's date
        df.attrs["device_name"] = ", ".join(sorted(set(df["device_name"].astype(str))))
        df.attrs["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(df["task_finished_s"].max())))
    return df
