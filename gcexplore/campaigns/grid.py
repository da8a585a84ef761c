"""Campaigns: a grid of experiments over workload sets x split sets x options x cards, on Dask.

:func:`campaign` turns the grid into tasks with keys derived from what they measure,
skips the keys whose shard is already in the campaign folder, and submits the rest to
a Dask cluster: an existing one (``client=`` or ``scheduler="tcp://..."``), or a local
one started here with one worker process per visible GPU, one thread each, each
worker pinned to its GPU by ``CUDA_VISIBLE_DEVICES`` (:func:`local_cluster`). The
returned :class:`Campaign` shows progress (tqdm.auto: a widget in Jupyter, a bar in a
terminal) and reads the folder back as one tidy DataFrame.

Dask distributes, retries tasks lost with a worker and keeps the dashboard; what runs
on a worker is :mod:`gcexplore.campaigns._task`; the folder is
:mod:`gcexplore.campaigns.store`. Dask is imported only when a campaign starts.

Over 500 lines: one campaign's planning, checks and the client's dispatch loop.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import queue
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence

import pandas as pd

from .._version import __version__
from .disk_full import keep_unsaved, record_failure
from .store import CampaignFolder, campaign_status, load_campaign
from ..device.driver import UnsupportedError, device_info
from ..schema import new_run_id

from .dispatch import (Feeder, cut_layouts, dispatch_mode, known_durations, ready_gap_s, split_label,  # noqa: F401
                       task_key, task_order)
from .cluster import PROBE_DIED, ClusterStart, local_cluster, local_devices, require_distributed, visible_gpus  # noqa: F401
from ._task import (EXPERIMENTS, Experiment, call_each, parse_builtin, register_experiment, resolve_factory,  # noqa: F401
                    run_task, warm_up)
from ..workloads.spec import check_factory  # noqa: F401 (gcexplore.campaigns.grid.check_factory, as before)

__all__ = ["Campaign", "campaign", "local_cluster", "plan_tasks", "register_experiment", "task_order"]

CARDS = ("any", "each")


# ------------------------------------------------------------------ the grid, checked before any work


def _recipe(obj) -> tuple[dict, str, Callable | None]:
    """(JSON description, pair label, factory function or None) of one workload recipe."""
    if isinstance(obj, str) and ":" in obj and obj.split(":", 1)[0] not in _builtin_names():
        if not _REF.match(obj):
            raise ValueError(f"a workload factory is written 'module:function', got {obj!r}")
        return {"factory": obj, "kwargs": {}}, obj.rsplit(":", 1)[1], None
    if isinstance(obj, Mapping) and "factory" in obj:
        extra = set(obj) - {"factory", "kwargs", "name"}
        if extra:
            raise ValueError(f"a factory recipe has keys factory, kwargs, name; got also {sorted(extra)}")
        desc, label, fn = _recipe(obj["factory"])
        kwargs = dict(obj.get("kwargs") or {})
        json.dumps(kwargs)  # TypeError here, on the client, for arguments that cannot be recorded
        return {**desc, "kwargs": kwargs}, str(obj.get("name") or label), fn
    if callable(obj) and not isinstance(obj, str):
        ref = f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', getattr(obj, '__name__', '?'))}"
        return {"factory": ref, "kwargs": {}}, getattr(obj, "__name__", "factory"), obj
    if isinstance(obj, str):
        obj = [obj]
    items = list(obj.items()) if isinstance(obj, Mapping) else [(None, s) for s in obj]
    named: dict[str, str] = {}
    for name, spec in items:
        if not isinstance(spec, str):
            raise TypeError(f"a workload recipe is a built-in name ('memory:n=1048576'), a factory "
                            f"'module:function', a function, or a list of built-in names; got {spec!r}")
        base, _ = parse_builtin(spec)
        key = name or base
        i = 2
        while key in named:
            key, i = f"{base}_{i}", i + 1
        named[key] = spec
    if not named:
        raise ValueError("a workload recipe names no workloads")
    return {"builtins": named}, "+".join(named), None


def _builtin_names():
    from ..workloads import BUILTINS

    return BUILTINS


def _as_splits(splits) -> int | list[int] | None:
    if splits is None or isinstance(splits, int):
        return splits
    try:
        return [int(k) for k in splits]
    except (TypeError, ValueError):
        raise TypeError(f"a split set is None (every valid size), an int or a list of ints, got {splits!r}") from None


#: The public function behind each built-in experiment, whose signature checks the options.
_TARGETS = {"sweep": "sweep", "profile_overlap": "profile_overlap", "scaling": "scaling",
            "isolation": "isolation", "tune": "tune"}
_PASSED = {"device", "checkpoint", "progress", "workloads", "workload", "critical", "background", "sm_counts", "split"}


_REF = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*\Z")


def _check_experiment_name(name) -> None:
    """A registered name or a ``"module:function"`` reference, checked without importing anything."""
    if isinstance(name, str) and (name in EXPERIMENTS or _REF.match(name)):
        return
    raise ValueError(f"unknown experiment {name!r}; campaign experiments are {', '.join(sorted(EXPERIMENTS))}, "
                     "or a 'module:function' (register_experiment adds one by name)")


def lookup_experiment(name: str) -> Experiment:
    """A registered experiment, or ``"module:function"`` imported here (it must import on the workers too).

    Importing runs the module's code: :func:`plan_tasks` calls this only after the whole grid is checked.
    """
    _check_experiment_name(name)
    return EXPERIMENTS[name] if name in EXPERIMENTS else Experiment(resolve_factory(name))


def _check_options(experiment: str, options: dict) -> None:
    """Unknown option names and bad values of the built-in experiments, on the client."""
    if experiment not in _TARGETS:
        return
    import inspect

    from ..schema import Options

    from ..experiments import overlap, tuner

    target = tuner if _TARGETS[experiment] == "tune" else overlap
    params = inspect.signature(getattr(target, _TARGETS[experiment])).parameters
    bad = sorted(k for k in options if k not in params or k in _PASSED)
    if bad:
        valid = sorted(k for k, p in params.items() if p.kind is p.KEYWORD_ONLY and k not in _PASSED)
        raise ValueError(f"{experiment} has no option(s) {', '.join(bad)} in a campaign; valid: {', '.join(valid)}")
    fields = {f.name for f in dataclasses.fields(Options)}
    Options(**{k: v for k, v in options.items() if k in fields})


def _checked_grid(experiment, workloads, splits, options):
    """(experiments, recipes, split sets, options), every part checked; nothing named is imported."""
    exps = [experiment] if isinstance(experiment, str) else list(experiment)
    for e in exps:
        _check_experiment_name(e)
    recipes = [_recipe(w) for w in (workloads if isinstance(workloads, (list, tuple)) else [workloads])]
    if not recipes:
        raise ValueError("a campaign needs at least one workload recipe, e.g. workloads=[['compute', 'memory']]")
    split_sets = [_as_splits(s) for s in (splits if isinstance(splits, (list, tuple)) else [splits])]
    opts = [dict(o) for o in ([options] if isinstance(options, Mapping) else options)] or [{}]
    for o in opts:
        json.dumps(o)  # options must be recordable in the spec
        for e in exps:
            _check_options(e, o)
    return exps, recipes, split_sets, opts


def _factory_modules(descs) -> list[str]:
    """The modules of these recipes' factories (a worker imports them to warm up), ``__main__`` aside."""
    return sorted({d["factory"].split(":", 1)[0] for d in descs if "factory" in d} - {"__main__"})


def plan_tasks(experiment="sweep", workloads=(), splits=(None,), options=({},), cards: Sequence[str] = ("any",)):
    """The campaign's tasks (key -> task) and the factories of function recipes; checks everything.

    The key of a task is derived from its experiment, workload recipe, split set,
    options and card only, so the same grid gives the same keys in every process and
    on every run.

    A spec is code: experiments and factories given as ``"module:function"`` are
    imported (their modules run) only after every other part of the grid is checked,
    and a factory's ``kwargs`` are then checked against its signature
    (:func:`check_factory`) before anything calls it.

    Raises
    ------
    ValueError, TypeError
        An unknown experiment, a bad recipe, split set or option value (before any work).
    """
    exps, recipes, split_sets, opts = _checked_grid(experiment, workloads, splits, options)
    for e in exps:  # the grid is checked: now (and only now) import what it names
        lookup_experiment(e)
    for desc, _, fn in recipes:
        if "factory" in desc:
            check_factory(fn if fn is not None else resolve_factory(desc["factory"]), desc["kwargs"], desc["factory"])
    tasks, factories = {}, {}
    for exp, (desc, pair, fn), sp, opt, card in itertools.product(exps, recipes, split_sets, opts, cards):
        t = {"experiment": exp, "workloads": desc, "pair": pair, "splits": sp, "split_set": split_label(sp),
             "options": opt, "card": str(card)}
        t["key"] = task_key(t)
        tasks[t["key"]] = t
        if fn is not None:
            factories[t["key"]] = fn
    return tasks, factories


def _worker_card() -> str:
    """On a worker: the UUID of its GPU (the key of tasks pinned to it)."""
    info = device_info(0)
    from cuda.core import Device

    return f"{info.name} {Device(0).uuid}"


# ------------------------------------------------------------------ the handle


class Campaign:
    """A submitted campaign: progress, status and the result. Made by :func:`campaign`.

    Attributes
    ----------
    folder : pathlib.Path
    campaign_id : str
    tasks : dict
        key -> task of the whole grid.
    skipped : list of str
        Keys already finished in the folder when this run started (not run again).
    submitted : list of str
        Keys this run runs (a worker gets its next one when it is free: see
        :mod:`gcexplore.campaigns.dispatch`).
    futures : dict
        key -> Dask future of each task sent to Dask and not yet reported (released once
        reported: the folder, not Dask's memory, says what is done).
    """

    def __init__(self, folder, spec: dict, tasks: dict, skipped: list[str], futures: dict, client, cluster,
                 lock=None, warm: dict | None = None, *, feeder=None, todo=None):
        self.folder = CampaignFolder(folder).root
        self.campaign_id, self.tasks, self.skipped = spec["campaign_id"], tasks, skipped
        self.futures, self.client, self._cluster, self._lock = futures, client, cluster, lock
        self.submitted = sorted(futures if todo is None else todo)
        self._feeder = feeder
        self.reports: dict[str, dict] = {}
        self.unsaved: dict[str, dict] = {}  # key -> frames of a disk-full task written nowhere (disk_full.py)
        self._warm = dict(warm or {})
        #: worker address -> what its warm-up did and how long each step took (see ``warm_up``).
        self.warm_ups: dict[str, dict] = {}
        #: seconds: ``cluster_start_s`` (a local cluster's; ``cluster_started_at``: its Unix time), ``cluster_wait_s``
        #: (of it, after planning), ``plan_s`` (checks, imports, folder scan, submission), ``close_s`` (closing's
        #: cost to the caller), ``close_background_s`` (shutdown after the call returned).
        self.timings: dict[str, float] = {}
        self._closing = None

    def __repr__(self) -> str:
        return (f"<Campaign {self.campaign_id} in {str(self.folder)!r}: {len(self.tasks)} tasks, "
                f"{len(self.skipped)} already finished, {len(self.reports)}/{len(self.submitted)} submitted reported>")

    def wait(self, *, progress: bool = True) -> dict[str, dict]:
        """Wait for every submitted task; key -> its report. A task Dask could not run
        (e.g. its worker died more often than Dask allows) is recorded as failed."""
        from distributed import as_completed

        bar = None
        if progress and (self.futures or self._feeder is not None):
            from tqdm.auto import tqdm

            bar = tqdm(total=len(self.tasks), initial=len(self.skipped), desc="campaign", unit="task")
        by_future = {f: k for k, f in self.futures.items()}
        try:
            # as_completed([]) looks for a default client, which a finished campaign may not have
            for key, fut in (self._fed() if self._feeder is not None else
                             ((by_future[f], f) for f in (as_completed(list(self.futures.values()))
                                                          if self.futures else ()))):
                self.reports[key] = self._report(key, fut)
                # Forget the result in Dask: a later run of this key (its shard damaged) runs the task, not this report
                del self.futures[key]
                fut.release()
                if bar is not None:
                    bar.set_postfix_str(f"{self.reports[key]['status']} {key[:40]}")
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        keep_unsaved(self, CampaignFolder(self.folder))  # rows a full disk kept out: saved, or kept here
        self._gather_warm_ups()
        # Every task's rows are on disk (fsynced, renamed) or its failure recorded: shut down off the caller's time
        self.close(wait=False)
        return self.reports

    def _fed(self):
        """(key, future) of each task as the feeder's workers finish them; its error, if it stopped on one."""
        while self._feeder is not None:
            item = self._feeder.done.get()
            if item is None:
                feeder, self._feeder = self._feeder, None
                if feeder.error is not None:
                    raise RuntimeError(f"the campaign's feeder stopped: {feeder.error!r}") from feeder.error
                return
            yield item

    def _gather_warm_ups(self) -> None:
        """Each worker's warm-up report; one not finished (its worker died) is cancelled, not waited for."""
        for addr, fut in self._warm.items():
            if fut.status == "finished":
                self.warm_ups[addr] = fut.result()
            else:  # a failed warm-up only costs its time: the task builds as before
                self.warm_ups[addr] = {"error": f"warm-up {fut.status}"}
                fut.cancel()
            fut.release()
        self._warm = {}

    def _report(self, key: str, fut) -> dict:
        if fut.status == "finished":
            return fut.result()
        try:
            err = fut.exception()
        except Exception as e:  # cancelled
            err = e
        record = {**{k: self.tasks[key][k] for k in ("key", "experiment", "pair", "split_set", "card")},
                  "error": f"{type(err).__name__}: {err}", "traceback": "(raised by Dask, not by the task)"}
        return {"key": key, "status": "failed",
                "error": record["error"] + record_failure(CampaignFolder(self.folder), key, record)}

    def status(self) -> pd.DataFrame:
        """One row per task: see :func:`gcexplore.campaign_status`."""
        return campaign_status(self.folder)

    def result(self, *, progress: bool = True) -> pd.DataFrame:
        """Wait, then every finished task's rows (:func:`gcexplore.load_campaign`), each task once."""
        self.wait(progress=progress)
        return load_campaign(self.folder)

    def close(self, *, wait: bool = True) -> None:
        """Close the client (and the local cluster) this campaign started, if it did, and
        release the folder's lock (idempotent).

        ``wait=False`` (what :meth:`wait` does once every task has reported): the local
        cluster shuts down in a background thread; a later ``close()`` (or the
        interpreter's exit) waits for it.
        """
        t = time.perf_counter()
        if self._feeder is not None:  # no task is sent after this
            self._feeder.stop()
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        if self._cluster is not None:
            cluster, self._cluster = self._cluster, None
            self.client.close()
            if cluster is not True:  # True: a client made for scheduler=, no cluster of ours
                if wait:
                    cluster.close()
                else:
                    import threading

                    # not a daemon: the interpreter's exit waits for the workers to be gone
                    self._closing = threading.Thread(target=self._close_cluster, args=(cluster,),
                                                     name="gcexplore-campaign-close")
                    self._closing.start()
            self.timings["close_s"] = time.perf_counter() - t
        if wait and self._closing is not None:
            self._closing.join()
            self._closing = None

    def _close_cluster(self, cluster) -> None:
        t = time.perf_counter()
        cluster.close()
        self.timings["close_background_s"] = time.perf_counter() - t

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_GUARD = ("call campaign() under `if __name__ == \"__main__\":` in a script: each worker of the local "
          "cluster starts by importing the script again, and a campaign at its top level starts once more there")


def _not_while_a_worker_imports_the_script() -> None:
    """A spawned worker re-imports the script as ``__mp_main__``: one sentence, not a traceback per worker."""
    frame = sys._getframe(1)
    while frame is not None:  # the script's top level, on the call stack, runs as __mp_main__ there
        if frame.f_globals.get("__name__") == "__mp_main__":
            raise SystemExit(f"gcexplore: {_GUARD}")
        frame = frame.f_back


def _connect(client, scheduler, devices, starting: ClusterStart | None = None, security=None):
    if client is not None and scheduler is not None:
        raise ValueError("pass client= or scheduler=, not both")
    Client = require_distributed().Client
    if client is not None:
        return client, None
    if scheduler is not None:  # ours to close, the cluster is not
        return (Client(scheduler, security=security) if security is not None else Client(scheduler)), True
    try:
        cluster = starting.result() if starting is not None else local_cluster(devices)
    except Exception as e:
        main = sys.modules.get("__main__")
        if ("Nanny failed to start" in str(e) or PROBE_DIED in str(e)) and getattr(main, "__file__", None):
            raise RuntimeError(f"the local campaign cluster's workers did not start; {_GUARD}") from None
        raise
    return Client(cluster, security=cluster.security), cluster


def _warm_up(client, tasks: dict) -> dict:
    """One warm-up per worker ahead of every task (imports, GPU context, built-in kernels, factory
    modules; at a local cluster's start these are done, or under way, already); address -> future.
    Recipes are primed by each worker's first task of them (``run_task``), so a worker primes only
    what it runs and its first task waits for its own recipe alone."""
    modules = _factory_modules(t["workloads"] for t in tasks.values())
    gpu = any(lookup_experiment(t["experiment"]).gpu for t in tasks.values())
    return {addr: client.submit(warm_up, modules, gpu, key=f"gcexplore-warm-up-{addr}",
                                workers=[addr], allow_other_workers=False, pure=False, priority=1 << 30)
            for addr in client.scheduler_info(n_workers=-1)["workers"]}


def _pin(client, tasks: dict, cards: Sequence[str]) -> dict[str, list[str]]:
    """card -> worker addresses; 'each' becomes one card per distinct GPU of the cluster."""
    if list(cards) == ["any"]:
        return {"any": []}
    seen: dict[str, list[str]] = {}
    for addr, card in client.run(_worker_card).items():
        seen.setdefault(card, []).append(addr)
    return seen


def campaign(workloads, splits=None, *, experiment="sweep", options=None, folder, cards: str = "any",
             client=None, scheduler: str | None = None, devices=None, campaign_id: str | None = None,
             durations=None, cut: str | int | None = None, progress: bool = True, wait: bool = True) -> Campaign:
    """Run a grid of experiments as Dask tasks, one shard per task, resumable.

    Parameters
    ----------
    workloads : list of recipes
        Each recipe builds one workload set on the worker's GPU: a list of built-in names
        with options (``["compute", "memory:n=1048576"]``, or a dict name -> spec), a
        factory ``"module:function"`` or ``{"factory": ..., "kwargs": {...}, "name": ...}``,
        or a function (a notebook's own is pickled by value); a factory is called as
        ``fn(device=0, **kwargs)`` and returns workloads (a mapping or a sequence).
    splits : list of split sets, default [None]
        Each entry is one task per recipe: None (every valid size), an int or a list of
        ints (``sm_counts`` of a sweep, ``split`` of profile_overlap / isolation).
    experiment : str or list of str, default "sweep"
        ``"sweep"``, ``"profile_overlap"``, ``"scaling"``, ``"isolation"``, ``"tune"``, or
        one added with :func:`register_experiment`.
    options : dict or list of dicts, default [{}]
        Keyword options of the experiment (``{"repeats": 20, "modes": ["concurrent"]}``).
    folder : str or path
        The campaign folder (shared by every worker when they run on several nodes).
        Running the same campaign on the same folder resumes it.
    cards : {"any", "each"}, default "any"
        ``"any"``: each task runs once on whichever GPU is free; ``"each"``: once on
        every distinct GPU of the cluster (to compare cards).
    client : distributed.Client, optional
    scheduler : str, optional
        Address of a running scheduler (``"tcp://host:8786"``).
    devices : sequence, optional
        GPUs of the local cluster (default all visible); ignored with a client or scheduler.
    campaign_id : str, optional
        Default: the folder's, or a new one.
    durations : dict or str or path, optional
        Seconds each task took before (key -> seconds, or the folder of an earlier
        campaign of the same grid): the longest tasks are started first. Without it
        tasks are ordered by an estimate from the grid (layouts x repetitions x modes
        x workloads).
    cut : {None, "layouts"} or int, optional
        ``"layouts"``: every task of several sizes runs as one task per layout (size), longest first
        (:func:`gcexplore.campaigns.dispatch.cut_layouts`); an int: only that many of the longest are
        cut. Finer first tasks let workers start work while others still start, and leave no long
        task for the end; the keys are those of one-size split sets. ``cards="any"`` only.
    progress : bool, default True
    wait : bool, default True
        False: return at once (call ``.wait()`` / ``.result()`` later).

    Returns
    -------
    Campaign
        ``.result()`` is one DataFrame (see :func:`gcexplore.load_campaign`).

    A spec is code: a ``"module:function"`` experiment or factory is imported and run
    like a script. It is imported only after the whole grid is checked.

    Raises
    ------
    ValueError, TypeError
        A bad grid (before anything is submitted or measured), or a folder of a newer format.
    RuntimeError
        Another campaign holds the folder (``campaign.lock``).
    """
    _not_while_a_worker_imports_the_script()
    if cards not in CARDS:
        raise ValueError(f"cards must be one of {', '.join(map(repr, CARDS))}, got {cards!r}")
    grid = (experiment, workloads, [None] if splits is None else splits, [{}] if options is None else options)
    recipes = _checked_grid(*grid)[1]  # a bad grid is refused here: nothing imported, nothing started
    if cut is not None and cut != "layouts" and (isinstance(cut, bool) or not isinstance(cut, int) or cut < 0):
        raise ValueError(f"cut is None, 'layouts' (every task cut into one per layout) or how many of the longest "
                         f"tasks to cut (an int >= 0), got {cut!r}")
    if cut is not None and cards != "any":
        raise ValueError("cut cuts the tasks of cards='any' only; cards='each' runs every task whole on each card")
    if client is None and scheduler is None:
        try:
            local_devices(devices)
        except UnsupportedError:  # refused before the folder is made, after the grid's own errors
            plan_tasks(*grid)
            raise
    store = CampaignFolder(folder)
    if os.path.lexists(store.spec_path):
        store.read_spec()  # a newer format is refused before a cluster starts
    warm_rec = None
    if scheduler is not None:  # a warm cluster of `gcexplore cluster start` found dead: reported, not waited for
        from .warm import check_use

        warm_rec = check_use(scheduler)
    lock = store.lock()  # a second campaign on this folder is refused here, before a cluster starts
    client_, cluster, starting, t0 = None, None, None, time.perf_counter()
    timings: dict[str, float] = {}
    try:
        if client is None and scheduler is None:  # the workers start (and warm up) while the client plans
            starting = ClusterStart(devices, _factory_modules(d for d, _, fn in recipes if fn is None))
        tasks, factories = plan_tasks(*grid)
        known = known_durations(durations)
        if cut is not None:  # finer tasks, their keys those of one-size split sets; a known duration shared
            tasks, parents, secs = cut_layouts(tasks, known, first=None if cut == "layouts" else cut)
            factories = {k: factories[parents.get(k, k)] for k in tasks if parents.get(k, k) in factories}
            known = {**known, **{k: secs[k] for k, p in parents.items() if p in known}}
        feed = cards == "any" and dispatch_mode() == "ready"  # a bad GCEXPLORE_DISPATCH: refused before any task
        local = starting is not None  # its GPUs start one after another: the k-th ready about k gaps after the first
        order = task_order(tasks, known, workers=len(local_devices(devices)) if local else 1,
                           ready_gap_s=ready_gap_s(local))
        t1 = time.perf_counter()
        from .warm import security_for

        client_, cluster = _connect(client, scheduler, devices, starting, security_for(warm_rec))
        if scheduler is not None:  # a warm cluster of other code (version, the factories' source) is refused
            from .warm import check_code

            check_code(client_, _factory_modules(d for d, _, _ in recipes)
                       + sorted({e.split(":", 1)[0] for e in _checked_grid(*grid)[0] if ":" in e}))
        if starting is not None:
            assert starting.seconds is not None  # set when its thread ended, which _connect waited for
            timings.update(cluster_start_s=starting.seconds, cluster_wait_s=time.perf_counter() - t1,
                           cluster_started_at=starting.started_at)
        starting = None
        warm = _warm_up(client_, tasks)
        if cards == "each":
            pinned = _pin(client_, tasks, ["each"])
            tasks, factories = plan_tasks(*grid, cards=sorted(pinned))
            order = task_order(tasks, known)
        else:
            pinned = {"any": []}
            if not local and warm:  # a cluster of the caller's: its workers, all ready now
                order = task_order(tasks, known, workers=len(warm))
        spec = store.write_spec(campaign_id or new_run_id(), tasks, __version__)
        done = store.finished_keys(spec, repair=True)
        todo, futures, feeder = [k for k in order if k not in done], {}, None
        rank = {k: -i for i, k in enumerate(order)}

        def submit(key, addr=None):  # to ``addr`` loosely (another worker where it has died), else to its card
            t = tasks[key]
            futures[key] = client_.submit(run_task, t, str(store.root), spec["campaign_id"],
                                          lookup_experiment(t["experiment"]), factories.get(key), key=key,
                                          workers=[addr] if addr else pinned[t["card"]] or None,
                                          allow_other_workers=bool(addr), priority=rank[key])
            return futures[key]

        if feed and len(warm) > 1 and todo:  # one task per free worker, each worker's first once its GPU is ready
            threads = {a: w.get("nthreads", 1) for a, w in client_.scheduler_info(n_workers=-1)["workers"].items()}
            feeder = Feeder(client_, todo, warm, submit, queue.SimpleQueue(), threads)
        else:  # all at once (cards="each": pinned to their cards; GCEXPLORE_DISPATCH=eager; one worker; none yet)
            for key in todo:
                submit(key)
        timings["plan_s"] = time.perf_counter() - t0 - timings.get("cluster_wait_s", 0.0)
    except BaseException:
        if starting is not None:
            starting.discard()
        if cluster is not None:
            assert client_ is not None  # _connect made one for the cluster
            client_.close()
            if cluster is not True:
                cluster.close()
        lock.release()
        raise
    handle = Campaign(store.root, spec, tasks, sorted(done & set(tasks)), futures, client_, cluster, lock, warm,
                      feeder=feeder, todo=todo)
    handle.timings.update(timings)
    if wait:
        handle.wait(progress=progress)
    return handle


def spec_modules(spec: dict) -> list[str]:
    """The modules a spec's workers import: its factories' and its experiment's (``module:function``)."""
    exps, recipes, _, _ = _checked_grid(spec.get("experiment", "sweep"), spec["workloads"],
                                        spec.get("splits") or [None], spec.get("options") or {})
    mods = set(_factory_modules(d for d, _, _ in recipes))
    mods |= {e.split(":", 1)[0] for e in exps if ":" in e}
    return sorted(mods - {"__main__"})
