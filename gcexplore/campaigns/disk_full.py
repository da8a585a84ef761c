"""A campaign on a full disk: what a task could not write, said in one sentence, and its rows kept.

When a write into the campaign folder fails for want of space (``ENOSPC``, or ``EDQUOT`` past a
quota), a JSON failure record cannot be written either. What still can, on most file systems, is an
empty file (an inode and a name, no data block): ``failed/<key>.<sub>.disk-full`` names the task and
the sub-folder (``shards``, ``traces``, ``checkpoints``) whose file could not be written, and
:func:`gcexplore.campaign_status` reads it as "disk full while writing shards/<key>.parquet". The
task returns its measured rows to the client in its report instead (``unsaved``); the client saves
them once every task has reported (:func:`keep_unsaved`): into the folder again, else in the
temporary folder, else they stay in memory (``Campaign.unsaved``); its report's ``rows_at`` says where.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path

__all__ = ["DISK_FULL_ERRNOS", "SUFFIX", "clear", "disk_full", "keep_rows", "keep_unsaved", "mark", "marks", "sentence",
           "record_failure", "write_failure"]

#: Errors that mean "no space left" (ENOSPC; EDQUOT: the user's quota).
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
SUFFIX = ".disk-full"
#: Sub-folder -> the suffix of a task's file there.
FILES = {"shards": ".parquet", "traces": ".parquet", "checkpoints": ".jsonl", "failed": ".json"}


def disk_full(exc: BaseException | None) -> OSError | None:
    """The OSError of no space left in ``exc`` or its causes, else None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def sentence(sub: str, key: str) -> str:
    """The one sentence a disk-full task is reported with."""
    return f"disk full while writing {sub}/{key}{FILES[sub]}"


def mark(store, key: str, sub: str) -> bool:
    """Leave the empty marker ``failed/<key>.<sub>.disk-full``; whether it could be made. An older
    failure record of the task is removed first (freeing space, and so only one reason stands)."""
    with contextlib.suppress(OSError):
        os.unlink(store.failure_path(key))
    from ..results.files import new_file_mode

    try:
        folder = store.prepare("failed")
        fd = os.open(folder / f"{key}.{sub}{SUFFIX}", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                     new_file_mode())
    except OSError:
        return False
    os.close(fd)
    return True


def marks(store) -> dict[str, str]:
    """key -> its sentence, for each plain marker in ``failed/``."""
    out = {}
    try:
        entries = list(os.scandir(store.failed))
    except OSError:
        return out
    for e in sorted(entries, key=lambda e: e.name):
        if e.name.endswith(SUFFIX) and not e.name.startswith(".") and e.is_file(follow_symlinks=False):
            key, _, sub = e.name[: -len(SUFFIX)].rpartition(".")
            if key and sub in FILES:
                out[key] = sentence(sub, key)
    return out


def write_failure(store, key: str, record: dict, sub: str, write_json) -> Path:
    """``write_json(failed/<key>.json, record)``; where the disk is full, the marker naming ``sub`` (the
    sub-folder whose file could not be written) instead. Raises where neither could be written."""
    path = store.failure_path(key)
    try:
        write_json(path, record)
    except OSError as e:
        if not (disk_full(e) and mark(store, key, sub)):
            raise
    else:
        clear(store, key)
    return path


def record_failure(store, key: str, record: dict) -> str:
    """``store.write_failure``; where nothing can be written (a read-only ``failed/``), the words to add to
    the task's report instead of an error that would end the campaign's wait."""
    try:
        store.write_failure(key, record)
    except OSError as e:
        return f"\n(its failure record could not be written: {e.strerror or e})"
    return ""


def clear(store, key: str) -> None:
    """Remove the task's markers (it has written its shard, or a full failure record)."""
    for sub in FILES:
        with contextlib.suppress(OSError):
            os.unlink(store.failed / f"{key}.{sub}{SUFFIX}")


def keep_rows(store, key: str, frames: dict, campaign_id: str) -> tuple[str, bool]:
    """Save the rows a disk-full task's report brought back (``frames``: sub-folder -> frame): its trace and
    shard in the campaign folder (space may have been freed; the task is then done), else
    ``<tmp>/gcexplore-unsaved-<campaign id>/<key>.parquet`` (and ``<key>-trace.parquet``). Returns (where the
    rows are, "" where nothing could be written; whether the task is done now)."""
    from ..results import io as _io

    rows, trace = frames.get("shards"), frames.get("traces")
    if rows is not None and not rows.attrs.get("partial"):  # a whole task's rows: its shard, and the task is done
        with contextlib.suppress(OSError, ValueError):
            if trace is not None:
                _io.save(trace, store.prepare("traces") / f"{key}.parquet", overwrite=True)
            return str(store.write_shard(key, rows)), True
    try:
        folder = Path(tempfile.gettempdir()) / f"gcexplore-unsaved-{campaign_id}"
        folder.mkdir(mode=0o700, exist_ok=True)
        if trace is not None:
            _io.save(trace, folder / f"{key}-trace.parquet", overwrite=True)
        return (str(_io.save(rows, folder / f"{key}.parquet", overwrite=True)) if rows is not None else ""), False
    except (OSError, ValueError):
        return "", False


def keep_unsaved(handle, store) -> None:
    """For a :class:`~gcexplore.campaigns.grid.Campaign` whose tasks have reported: save each disk-full task's
    rows (:func:`keep_rows`). Its report gets ``rows_at`` (the file, or where in memory they stay: the
    handle's ``unsaved``, key -> frames) and ``status`` "done" where its shard could be written after all.
    ``store``: the campaign's :class:`~gcexplore.campaigns.store.CampaignFolder`."""
    for key, rep in handle.reports.items():
        frames = rep.pop("unsaved", None)
        if not frames:
            continue
        where, done = keep_rows(store, key, frames, handle.campaign_id)
        if not where:
            handle.unsaved[key] = frames
        rep["rows_at"] = where or f"in memory only: Campaign.unsaved[{key!r}]"
        if done:
            rep.update(status="done", error="")
