"""What one campaign task does on its worker: build the workloads, measure, write the shard.

A task runs in a Dask worker process that sees one GPU (``CUDA_VISIBLE_DEVICES``) and
has one thread (a green context is current to one thread). It builds its workloads
from their recipe on that GPU, runs its experiment with the layout-level checkpoint in
the campaign folder, and writes its shard atomically before it returns: a task that
reports done has its rows on disk. A task that raises is recorded in ``failed/`` with
a summary of the worker's traceback and returns normally, so it stops no other task.

Experiments are looked up in :data:`EXPERIMENTS` on the client (see
:func:`register_experiment`); the function itself travels with the task.

A worker keeps what a task set up for the next one: :func:`warm_up` (submitted once
per worker ahead of the tasks) imports, makes the GPU context and compiles the
built-in kernels; the workloads a recipe built stay in a small per-worker cache keyed
by the recipe and the factory's code (:func:`recipe_digest`), so a changed recipe or
factory builds afresh. Each task reports the seconds of each phase.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import importlib
import inspect
import json
import os
import socket
import time
import traceback
from collections.abc import Callable, Mapping

from ..device.driver import device_count
from ..results import io as _io
from . import disk_full
from .store import CampaignFolder
from ..schema import IDENTITY_COLUMNS, identity_name, identity_of
from ..workloads.spec import parse_builtin, parse_recipe, resolve_factory
from ..experiments.runner import HOST_S, Checkpoint
from ..experiments.measure_isolation import isolation
from ..experiments.measure_scaling import scaling
from ..experiments.overlap import profile_overlap, sweep
from ..experiments.tuner import tune

__all__ = ["EXPERIMENTS", "Experiment", "parse_builtin", "recipe_digest", "register_experiment", "resolve_factory",
           "run_task", "warm_gpu", "warm_up"]


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
        made: dict = {}
        try:
            for name, spec in recipe["builtins"].items():
                made[name] = parse_recipe(spec).build(device=device)
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


def _code_digest(fn) -> str:
    """What identifies a factory's code: its source, else its bytecode and constants."""
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        return repr((code.co_code, code.co_consts)) if code is not None else repr(fn)


def recipe_digest(recipe: dict, factory=None) -> str:
    """The cache key of a recipe's workloads: the recipe and, for a factory, its code (a factory
    edited between campaigns builds afresh, as does any change of name, option or kwargs)."""
    parts = [json.dumps(recipe, sort_keys=True, default=str)]
    if "factory" in recipe:
        parts.append(_code_digest(factory if factory is not None else resolve_factory(recipe["factory"])))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


#: Workloads built on this worker, by :func:`recipe_digest`; the least recently used are closed.
_BUILT: collections.OrderedDict[str, tuple[dict, list]] = collections.OrderedDict()
CACHE_SIZE = 4


def _cached_build(recipe: dict, factory, device: int) -> tuple[dict, bool]:
    """(workloads by name, True when they came from this worker's cache)."""
    key = recipe_digest(recipe, factory)
    if key in _BUILT:
        _BUILT.move_to_end(key)
        return _BUILT[key][0], True
    made = _build(recipe, factory, device)
    _BUILT[key] = made
    while len(_BUILT) > CACHE_SIZE:
        _close(_BUILT.popitem(last=False)[1][1])
    return made[0], False


def _close(owned: list) -> None:
    for w in owned:
        try:
            w.close()
        except Exception:  # one workload failing to close must not keep the others
            pass


def clear_cache() -> int:
    """Close every cached workload of this worker; how many recipes were cached."""
    n = len(_BUILT)
    while _BUILT:
        _close(_BUILT.popitem()[1][1])
    return n


#: What this worker's start-up preload (:mod:`._campaign_preload`) did, when it had one.
PRELOADED: dict = {}


def warm_up(modules=(), gpu: bool = True) -> dict:
    """On a worker, before its first task: import gcexplore's experiments and the factory
    ``modules``, make the GPU context and compile the built-in kernels (recipes are primed by
    each worker's first task of them: :func:`run_task`). Seconds per step; ``preload``: what the
    worker's start-up preload already did (then the imports and the context here cost nothing)."""
    steps, t = {}, time.perf_counter()
    from ..experiments import overlap, tuner  # noqa: F401 (the imports are the warm-up)

    steps["import_s"] = time.perf_counter() - t
    for name in modules:
        t = time.perf_counter()
        importlib.import_module(name)
        steps[f"import {name}_s"] = time.perf_counter() - t
    try:
        gpus = device_count() if gpu else 0
    except Exception:  # no driver here (the CPU stand-in): nothing to warm
        gpus = 0
    if gpus:
        warm_gpu(steps)
    out = {"pid": os.getpid(), "host": socket.gethostname(), **steps}
    if PRELOADED:
        out["preload"] = dict(PRELOADED)
    return out


def warm_gpu(steps: dict):
    """Make device 0's context current here and compile the built-in kernels; seconds into ``steps``."""
    t = time.perf_counter()
    from cuda.core import Device

    from ..device.kernels import builtin_kernel

    dev = Device(0)
    steps["device_s"] = time.perf_counter() - t
    t = time.perf_counter()
    dev.set_current()
    steps["context_s"] = time.perf_counter() - t
    t = time.perf_counter()
    builtin_kernel(dev, "gcx_fma")
    steps["kernels_s"] = time.perf_counter() - t
    return dev


#: Recipes (by :func:`recipe_digest`) whose workloads were called once in this worker.
_PRIMED: set[str] = set()


def _call_once(key: str, wls: dict, dev) -> bool:
    """Call each workload once on a stream of its own (``dev``: None on the CPU stand-in, nothing to call),
    the first time this worker meets the recipe ``key``: its libraries' lazy set-up (cuBLAS handles, module
    loading) is then not paid inside measured repetitions. True when it called them now."""
    if key in _PRIMED:
        return False
    if dev is not None:
        stream = dev.create_stream()
        try:
            call_each(wls, stream)
        finally:
            stream.close()
    _PRIMED.add(key)
    return True


def call_each(wls: dict, stream) -> None:
    """Call each workload of ``wls`` once on ``stream`` and wait for them."""
    for w in wls.values():
        fn = getattr(w, "fn", w)
        if callable(fn):
            fn(stream=stream)
    stream.sync()


def _task_device(experiment: Experiment):
    """This worker's device 0 for priming (its context made current at the start), None without a GPU."""
    if not experiment.gpu:
        return None
    try:
        if device_count() < 1:
            return None
        from cuda.core import Device

        dev = Device(0)
        dev.set_current()  # current already (the worker's start made it on this thread): a retain, no new context
        return dev
    except Exception:  # no driver here (the CPU stand-in)
        return None


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
        from ..device.driver import device_info

        return device_info(device).uuid  # read once through the driver API (DeviceInfo)
    except Exception:  # no GPU: the row says so with an empty UUID
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


def run_task(task: dict, folder: str, campaign_id: str, experiment: Experiment, factory=None, *,
             reuse: bool = True) -> dict:
    """Run one task and write its shard (or its failure record); return what happened.

    Returns a dict with ``key``, ``status`` ("done" or "failed"), ``rows``,
    ``started_s`` and ``ended_s`` (Unix seconds), ``host``, ``pid``, ``cached``
    (the workloads came from this worker's cache; ``reuse=False`` builds and closes
    them per task), ``first`` (the worker's first task) and the seconds of each phase:
    ``build_s`` (workload construction), ``prime_s`` (each workload called once, where the
    task is this worker's first of its recipe: ``primed``), ``experiment_s`` (the experiment's own time),
    ``checkpoint_s`` (its checkpoint appends, inside ``experiment_s``), ``cpu_s``
    (this process's CPU time during the experiment), ``write_s`` (shard and trace
    writes), ``host_s`` (the experiment's host-side steps outside its repetitions, seconds by step:
    :data:`gcexplore.experiments.runner.HOST_S`); for a failure, ``error``.
    """
    global _TASKS_RUN
    store = CampaignFolder(folder)
    key, started = task["key"], time.time()
    report = {"key": key, "host": socket.gethostname(), "started_s": started, "pid": os.getpid(),
              "first": _TASKS_RUN == 0}
    _TASKS_RUN += 1
    try:
        _check_worker(experiment)
        store.prepare("checkpoints")
        t0 = time.perf_counter()
        if reuse:
            wls, report["cached"] = _cached_build(task["workloads"], factory, 0)
            owned = []
        else:
            (wls, owned), report["cached"] = _build(task["workloads"], factory, 0), False
        report["build_s"] = time.perf_counter() - t0
        # the first task of a recipe on this worker primes it (outside its experiment's time): a worker primes
        # only the recipes it runs, and its first task starts after its own recipe's priming, not every recipe's
        t0 = time.perf_counter()
        report["primed"] = _call_once(recipe_digest(task["workloads"], factory), wls, _task_device(experiment))
        report["prime_s"] = time.perf_counter() - t0
        try:
            t0, cpu0, ck0, host0 = time.perf_counter(), time.process_time(), Checkpoint.write_s, dict(HOST_S)
            out = experiment.fn(wls, splits=task["splits"], device=0, checkpoint=str(store.checkpoint_path(key)),
                                **task["options"])
            report["experiment_s"] = time.perf_counter() - t0
            report["cpu_s"], report["checkpoint_s"] = time.process_time() - cpu0, Checkpoint.write_s - ck0
            report["host_s"] = {k: v - host0.get(k, 0.0) for k, v in HOST_S.items() if v > host0.get(k, 0.0)}
        finally:
            _close(owned)
        df, trace = (out.result, out.trace) if hasattr(out, "trace") and hasattr(out, "result") else (out, None)
        ident = _identity(dict(df.attrs), 0, dict(trace.attrs) if trace is not None else {})
        _finish(df, task, ident, campaign_id, (started, time.time()))
        df.attrs["campaign"]["phases"] = {k: report[k] for k in ("build_s", "prime_s", "experiment_s", "cpu_s",
                                                                 "checkpoint_s", "cached", "first")}
    except Exception as exc:
        summary = _summarise(exc)
        if disk_full.disk_full(exc):  # a checkpoint append found no space: the rows so far come back to the client
            partial = getattr(exc, "partial", None)
            return _no_space(store, task, report, "checkpoints", {} if partial is None else {"shards": partial},
                             summary)
        record = {**{k: task[k] for k in ("key", "experiment", "pair", "split_set", "card")},
                  "error": f"{type(exc).__name__}: {exc}", "traceback": summary, "host": report["host"],
                  "time_s": time.time()}
        return {**report, "status": "failed", "error": summary + disk_full.record_failure(store, key, record)}
    t1 = time.perf_counter()
    sub = "traces"
    try:
        if trace is not None:
            store.prepare("traces")
            _io.save(_finish(trace, task, ident, campaign_id, (started, df["task_finished_s"].iloc[0]
                                                               if len(df) else time.time())),
                     store.trace_path(key))
        sub = "shards"
        store.write_shard(key, df)
    except OSError as e:
        if not disk_full.disk_full(e):
            raise
        frames = {"shards": df, **({"traces": trace} if sub == "traces" and trace is not None else {})}
        return _no_space(store, task, report, sub, frames, _summarise(e))
    return {**report, "status": "done", "rows": len(df), "write_s": time.perf_counter() - t1, "ended_s": time.time()}


def _no_space(store: CampaignFolder, task: dict, report: dict, sub: str, frames: dict, summary: str) -> dict:
    """A task the disk had no room for: its one-sentence failure (a record, else the empty marker of
    :mod:`~gcexplore.campaigns.disk_full`) and its rows in the report (``unsaved``: sub-folder -> frame) for
    the client to keep."""
    why = disk_full.sentence(sub, task["key"])
    record = {**{k: task[k] for k in ("key", "experiment", "pair", "split_set", "card")}, "error": why,
              "traceback": summary, "host": report["host"], "time_s": time.time()}
    try:
        store.write_failure(task["key"], record, sub)
    except OSError:  # not even an empty file fits: the client's report is all that says it
        pass
    rows = len(frames["shards"]) if "shards" in frames else 0
    return {**report, "status": "failed", "error": why, "rows": rows, "unsaved": frames, "ended_s": time.time()}


_TASKS_RUN = 0
