"""What one campaign task does on its worker: build the workloads, measure, write the shard.

A task runs in a Dask worker process that sees one GPU (``CUDA_VISIBLE_DEVICES``) and
has one thread (a green context is current to one thread). It builds its workloads
from their recipe on that GPU, runs its experiment with the layout-level checkpoint in
the campaign folder, and writes its shard atomically before it returns: a task that
reports done has its rows on disk. A task that raises is recorded in ``failed/`` with
a summary of the worker's traceback and returns normally, so it stops no other task.

Experiments are looked up in :data:`EXPERIMENTS` on the client (see
:func:`register_experiment`); the function itself travels with the task.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import socket
import time
import traceback
from collections.abc import Callable, Mapping

from ..device.driver import device_count
from ..results import io as _io
from ..results.campaign_store import CampaignFolder
from ..schema import IDENTITY_COLUMNS, identity_name, identity_of
from ..workloads.builtins import parse_builtin
from .measure_isolation import isolation
from .measure_scaling import scaling
from .overlap import profile_overlap, sweep
from .tuner import tune

__all__ = ["EXPERIMENTS", "Experiment", "parse_builtin", "register_experiment", "resolve_factory", "run_task"]


@dataclasses.dataclass(frozen=True)
class Experiment:
    """An experiment a campaign can run: ``fn(workloads, *, splits, device, checkpoint, **options)``.

    ``workloads`` is a dict name -> built workload; ``splits`` the task's split set
    (None: every valid one); ``checkpoint`` a JSON-lines path for the layout-level
    checkpoint (experiments without one ignore it). ``gpu``: it needs one GPU of its
    own (the worker must see exactly one and run one thread).
    """

    fn: Callable
    gpu: bool = True


def resolve_factory(ref: str) -> Callable:
    """The function named ``"module:function"`` (dots allowed in both parts)."""
    module, sep, attr = str(ref).partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"a workload factory is written 'module:function', got {ref!r}")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{ref!r} is a {type(obj).__name__}, not a function")
    return obj


# ------------------------------------------------------------------ the built-in experiments


def _one_gpu() -> None:
    """Refuse a worker that sees several GPUs: two tasks would share device 0."""
    n = device_count()
    if n != 1:
        raise RuntimeError(f"this worker sees {n} GPUs (CUDA_VISIBLE_DEVICES="
                           f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}); start each Dask worker with "
                           "one GPU: CUDA_VISIBLE_DEVICES=<index> dask worker ADDR --nthreads 1")


def _sweep(wls, *, splits, device, checkpoint, **options):
    _one_gpu()
    return sweep(wls, splits, device=device, checkpoint=checkpoint, progress=False, **options)


def _overlap(wls, *, splits, device, checkpoint, **options):
    _one_gpu()
    if splits is None:
        raise ValueError("profile_overlap needs a split in every split set (e.g. splits=[[24]])")
    return profile_overlap(wls, splits, device=device, **options)


def _scaling(wls, *, splits, device, checkpoint, **options):
    _one_gpu()
    if len(wls) != 1:
        raise ValueError(f"scaling measures one workload per task, got {len(wls)}: {', '.join(wls)}")
    return scaling(next(iter(wls.values())), splits, device=device, progress=False, **options)


def _isolation(wls, *, splits, device, checkpoint, **options):
    _one_gpu()
    if len(wls) != 2:
        raise ValueError(f"isolation needs two workloads (critical, background), got {len(wls)}")
    crit, bg = wls.values()
    return isolation(crit, bg, 16 if splits is None else splits, device=device, **options)


def _tune(wls, *, splits, device, checkpoint, **options):
    _one_gpu()
    return tune(wls, sm_counts=splits, device=device, progress=False, **options)


#: Experiments by name; :func:`register_experiment` adds more (e.g. a stand-in for tests).
EXPERIMENTS: dict[str, Experiment] = {
    "sweep": Experiment(_sweep), "profile_overlap": Experiment(_overlap), "scaling": Experiment(_scaling),
    "isolation": Experiment(_isolation), "tune": Experiment(_tune),
}


def register_experiment(name: str, fn: Callable, *, gpu: bool = True) -> None:
    """Make ``fn(workloads, *, splits, device, checkpoint, **options) -> DataFrame`` a campaign experiment.

    The function travels to the workers with each task (pickled by reference when it
    is importable there, by value when defined in a notebook).
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"an experiment name is an identifier such as 'sweep', got {name!r}")
    if not callable(fn):
        raise TypeError(f"experiment {name!r} must be a function, got {type(fn).__name__}")
    EXPERIMENTS[name] = Experiment(fn, gpu=gpu)


# ------------------------------------------------------------------ on the worker


def _build(recipe: dict, factory, device: int) -> tuple[dict, list]:
    """(workloads by name, those to close) from a recipe, on ``device``."""
    if "builtins" in recipe:
        from ..workloads import builtin

        made: dict = {}
        try:
            for name, spec in recipe["builtins"].items():
                base, kwargs = parse_builtin(spec)
                made[name] = builtin(base, device=device, **kwargs)
        except BaseException:
            for w in made.values():
                w.close()
            raise
        return made, list(made.values())
    fn = factory if factory is not None else resolve_factory(recipe["factory"])
    out = fn(device=device, **recipe.get("kwargs", {}))
    if not isinstance(out, Mapping):
        from ..workloads import workload_names

        out = dict(zip(workload_names(out), out))
    return dict(out), [w for w in out.values() if hasattr(w, "close")]


def _summarise(exc: BaseException, limit: int = 6) -> str:
    """The exception line and the last ``limit`` frames of its traceback, on the worker."""
    frames = traceback.extract_tb(exc.__traceback__)[-limit:]
    lines = [f"  {os.path.basename(f.filename)}:{f.lineno} in {f.name}: {(f.line or '').strip()}" for f in frames]
    return "\n".join([f"{type(exc).__name__}: {exc}", *lines])


def _physical_index(local: int):
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    items = [v.strip() for v in visible.split(",") if v.strip()]
    if local < len(items) and items[local].isdigit():
        return int(items[local])
    return local


def _device_uuid(device: int) -> str:
    try:
        from cuda.core import Device

        return str(Device(device).uuid)
    except Exception:  # no GPU or an older cuda.core: the row says so with an empty UUID
        return ""


def _identity(attrs: dict, device: int, trace_attrs: dict) -> dict:
    """The run's identity (:data:`gcexplore.schema.IDENTITY`) as the result recorded it, the CUPTI
    version from the trace, and the physical device index and UUID of this worker's card."""
    traced = {k: v for k, v in trace_attrs.items() if k in IDENTITY_COLUMNS and v}
    ident = identity_of({**attrs, **traced})
    index, uuid, host = identity_name("index"), identity_name("uuid"), "host"
    ident[index] = _physical_index(int(device if ident[index] is None else ident[index]))
    ident[uuid] = ident[uuid] or _device_uuid(device)
    ident[host] = ident[host] or socket.gethostname()
    return ident


def _check_worker(exp: Experiment) -> None:
    if not exp.gpu:
        return
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return  # not inside a Dask worker (a direct call)
    if worker.state.nthreads != 1:
        raise RuntimeError(f"worker {worker.address} runs {worker.state.nthreads} threads; GPU tasks need one "
                           "thread per worker (dask worker --nthreads 1): a green context is current to one thread")


def _finish(df, task: dict, ident: dict, campaign_id: str, times: tuple[float, float]):
    for col in ("experiment", "pair", "split_set"):
        df[col] = task[col]
    df["task_key"], df["campaign_id"] = task["key"], campaign_id
    for k, v in ident.items():
        df[k] = v
    df["task_started_s"], df["task_finished_s"] = times
    df.attrs["campaign"] = {"key": task["key"], "campaign_id": campaign_id, "identity": ident,
                            **{k: task[k] for k in ("experiment", "pair", "split_set", "card", "splits",
                                                    "options", "workloads")},
                            "started_s": times[0], "finished_s": times[1]}
    return df


def run_task(task: dict, folder: str, campaign_id: str, experiment: Experiment, factory=None) -> dict:
    """Run one task and write its shard (or its failure record); return what happened.

    Returns a dict with ``key``, ``status`` ("done" or "failed"), ``rows``,
    ``started_s`` and ``ended_s`` (Unix seconds), ``experiment_s`` (the experiment's
    own time), ``write_s`` (the shard write), ``host``, ``pid`` and, for a failure,
    ``error``.
    """
    store = CampaignFolder(folder)
    key, started = task["key"], time.time()
    report = {"key": key, "host": socket.gethostname(), "started_s": started, "pid": os.getpid()}
    try:
        _check_worker(experiment)
        wls, owned = _build(task["workloads"], factory, 0)
        try:
            t0 = time.perf_counter()
            out = experiment.fn(wls, splits=task["splits"], device=0, checkpoint=str(store.checkpoint_path(key)),
                                **task["options"])
            report["experiment_s"] = time.perf_counter() - t0
        finally:
            for w in owned:
                w.close()
        df, trace = (out.result, out.trace) if hasattr(out, "trace") and hasattr(out, "result") else (out, None)
        ident = _identity(dict(df.attrs), 0, dict(trace.attrs) if trace is not None else {})
        _finish(df, task, ident, campaign_id, (started, time.time()))
    except Exception as exc:
        summary = _summarise(exc)
        store.write_failure(key, {**{k: task[k] for k in ("key", "experiment", "pair", "split_set", "card")},
                                  "error": f"{type(exc).__name__}: {exc}", "traceback": summary,
                                  "host": report["host"], "time_s": time.time()})
        return {**report, "status": "failed", "error": summary}
    t1 = time.perf_counter()
    if trace is not None:
        _io.save(_finish(trace, task, ident, campaign_id, (started, df["task_finished_s"].iloc[0]
                                                           if len(df) else time.time())),
                 store.root / "traces" / f"{key}.parquet")
    store.write_shard(key, df)
    return {**report, "status": "done", "rows": len(df), "write_s": time.perf_counter() - t1, "ended_s": time.time()}
