"""A campaign folder on disk: its spec, one shard per finished task, failure records.

Layout of a folder (format :data:`FORMAT`)::

    campaign.json            the spec: format, campaign id, every task by key
    shards/<key>.parquet     a finished task's rows; attrs["campaign"] holds its task,
                             identity (card UUID, host, ...) and timings
    failed/<key>.json        a task that raised: the error and the worker's traceback
    checkpoints/<key>.jsonl  the layout-level checkpoint of a task (gcexplore.runner)
    torn/                    damaged shards moved aside by a repair (never deleted)

Every file is written to a temporary name beside it and renamed, so a reader sees a
whole shard or none. :func:`load_campaign` reads a finished or unfinished campaign;
:func:`campaign_status` lists each task and what the folder holds for it.

Pure Python, pandas and pyarrow; nothing here touches the GPU or imports Dask.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd

from . import io as _io
from ..schema import IDENTITY_COLUMNS, SAMPLE_IDENTITY, conform, identity_name, kind_of

__all__ = ["CAMPAIGN_COLUMNS", "FORMAT", "CampaignFolder", "campaign_status", "load_campaign"]

#: Version of the folder layout; a folder of a newer format is refused, not misread.
FORMAT = 1
SPEC_NAME = "campaign.json"

#: Columns a campaign adds to every row (after the experiment's own), with their dtypes.
CAMPAIGN_COLUMNS = {
    "experiment": "str", "pair": "str", "split_set": "str", "task_key": "str", "campaign_id": "str",
    **{k: v for k, v in IDENTITY_COLUMNS.items() if k not in SAMPLE_IDENTITY},  # the one spelling: schema
    "task_started_s": "float64", "task_finished_s": "float64",
}

_UUID = identity_name("uuid")


def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class CampaignFolder:
    """The files of one campaign (see the module docstring); creates nothing until written to."""

    def __init__(self, folder):
        self.root = Path(folder)
        self.spec_path = self.root / SPEC_NAME
        self.shards, self.failed = self.root / "shards", self.root / "failed"
        self.checkpoints, self.torn = self.root / "checkpoints", self.root / "torn"

    def shard_path(self, key: str) -> Path:
        return self.shards / f"{key}.parquet"

    def failure_path(self, key: str) -> Path:
        return self.failed / f"{key}.json"

    def checkpoint_path(self, key: str) -> Path:
        return self.checkpoints / f"{key}.jsonl"

    # ----------------------------------------------------------------- the spec

    def read_spec(self) -> dict:
        """The spec; ValueError for a file of another format or not a campaign spec."""
        if not self.spec_path.exists():
            raise FileNotFoundError(f"{str(self.root)!r} is not a campaign folder (no {SPEC_NAME}); "
                                    "gcexplore.campaign(...) or `gcexplore campaign SPEC` makes one")
        try:
            spec = json.loads(self.spec_path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise ValueError(f"{str(self.spec_path)!r} is not readable JSON ({e}); it is written atomically, "
                             "so it was changed by hand: restore it or start a new campaign folder") from e
        found = spec.get("gcexplore_campaign") if isinstance(spec, dict) else None
        if not isinstance(found, int) or not isinstance(spec.get("tasks"), dict):
            raise ValueError(f"{str(self.spec_path)!r} is not a gcexplore campaign spec "
                             "(no 'gcexplore_campaign' format number or no 'tasks')")
        if found > FORMAT:
            raise ValueError(f"campaign folder {str(self.root)!r} has format {found}, written by gcexplore "
                             f"{spec.get('gcexplore_version', '?')}; this gcexplore reads formats up to {FORMAT}: "
                             "upgrade gcexplore to read or resume it")
        return spec

    def write_spec(self, campaign_id: str, tasks: dict[str, dict], version: str) -> dict:
        """Record the tasks (merged with those already in the folder) and return the spec.

        A folder keeps its first campaign id; tasks are keyed by what they measure, so
        a spec grown by new tasks keeps every shard already written.
        """
        spec = self.read_spec() if self.spec_path.exists() else {
            "gcexplore_campaign": FORMAT, "campaign_id": campaign_id, "tasks": {},
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        new = {k: t for k, t in tasks.items() if k not in spec["tasks"]}
        if new or not self.spec_path.exists():
            spec["tasks"].update(new)
            spec["gcexplore_version"] = version
            _write_json(self.spec_path, spec)
        return spec

    # ----------------------------------------------------------------- shards

    def write_shard(self, key: str, df: pd.DataFrame) -> Path:
        """Save a finished task's rows atomically, then drop an older failure record of it."""
        path = _io.save(df, self.shard_path(key), overwrite=True)
        failed = self.failure_path(key)
        if failed.exists():
            failed.unlink()
        return path

    def write_failure(self, key: str, record: dict) -> Path:
        path = self.failure_path(key)
        _write_json(path, record)
        return path

    def read_shard(self, key: str) -> pd.DataFrame:
        return _io.load(self.shard_path(key))

    def _move_torn(self, path: Path) -> Path:
        self.torn.mkdir(parents=True, exist_ok=True)
        dest = self.torn / f"{path.name}.{time.strftime('%Y%m%dT%H%M%S')}.{os.getpid()}"
        os.replace(path, dest)
        return dest

    def scan(self, *, repair: bool = True) -> tuple[dict[str, pd.DataFrame], dict[str, dict], list[str]]:
        """(shards by key, failures by key, torn notes). Damaged shards are moved to torn/
        (``repair``) or skipped; left-over temporary files of interrupted writes are ignored."""
        shards, torn = {}, []
        for path in sorted(self.shards.glob("*.parquet")) if self.shards.is_dir() else []:
            key = path.stem
            try:
                shards[key] = _io.load(path)
            except (OSError, ValueError) as e:
                where = self._move_torn(path) if repair else path
                torn.append(f"{key}: {type(e).__name__} ({str(e)[:120]}); "
                            + (f"moved to {where.relative_to(self.root)}" if repair else "skipped"))
        failures = {}
        for path in sorted(self.failed.glob("*.json")) if self.failed.is_dir() else []:
            try:
                failures[path.stem] = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                failures[path.stem] = {"error": f"unreadable failure record ({e})"}
        return shards, failures, torn

    def finished_keys(self, *, repair: bool = True) -> set[str]:
        """Keys whose shard reads back whole (what a resume skips)."""
        return set(self.scan(repair=repair)[0])

    def checkpointed_layouts(self, key: str) -> int:
        path = self.checkpoint_path(key)
        if not path.exists():
            return 0
        with open(path, "rb") as f:
            return max(0, sum(1 for line in f if line.endswith(b"\n")) - 1)  # less the header


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
    status = "done" if shard is not None else "failed" if failure is not None else (
        "started" if layouts else "pending")
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
    shards, failures, torn = store.scan(repair=repair)
    tasks = spec["tasks"]
    rows = [_task_row(k, t, shards.get(k), failures.get(k) if k not in shards else None,
                      store.checkpointed_layouts(k)) for k, t in tasks.items()]
    status = pd.DataFrame.from_records(rows, columns=["task_key", "experiment", "pair", "split_set", "card",
                                                      "status", "rows", "layouts_checkpointed",
                                                      _UUID, "host", "error"])
    counts = {s: int((status["status"] == s).sum()) for s in ("done", "failed", "started", "pending")}
    status.attrs.update(campaign_id=spec["campaign_id"], folder=str(store.root), torn=torn, counts=counts,
                        unknown_shards=sorted(set(shards) - set(tasks)))
    return spec, shards, status


def campaign_status(folder, *, repair: bool = True) -> pd.DataFrame:
    """One row per task of the campaign in ``folder``: its status and what the folder holds.

    Columns: ``task_key``, ``experiment``, ``pair``, ``split_set``, ``card`` (the card
    the task must run on, or ``"any"``), ``status`` (``"done"``: its shard reads back;
    ``"failed"``: it raised, ``error`` says why; ``"started"``: layouts are in its
    checkpoint but no shard yet; ``"pending"``), ``rows``, ``layouts_checkpointed``,
    ``device_uuid``, ``host``, ``error``. ``attrs["counts"]``: tasks per status;
    ``attrs["torn"]`` lists shards found damaged (moved to ``torn/`` when ``repair``,
    the task then counts as not done).
    """
    return _scan_with_status(folder, repair)[2]


def load_campaign(folder, *, repair: bool = True) -> pd.DataFrame:
    """Every finished task's rows of the campaign in ``folder``, each task exactly once.

    Works on finished and unfinished campaigns (a campaign still running included):
    only whole shards are read; a damaged shard is moved to ``torn/`` (``repair``) or
    skipped, and its task counts as not done (a resume measures it again from its
    layout checkpoint).

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
