"""How a campaign's tasks reach its workers: their order and one task per free worker.

- :func:`task_order`: longest first (known seconds, else the grid's estimate), then improved by
  swapping tasks where that shortens the simulated end of a greedy run (:func:`list_schedule`: each
  task, in order, to the worker free first) on the cluster's workers, whose GPUs become ready one
  after another (a local cluster's serial start, ~0.2-0.25 s apart on 4x H100).
- :class:`Feeder` (clusters of several workers; one worker gets every task at once, in order): a worker's
  first task is sent when its warm-up (queued behind its GPU start)
  has finished, its next when the one before has: no task waits on a card that is not ready or
  busy while another is idle. Dask on its own hands every task of a group smaller than the
  cluster to a worker at once (its ``worker-saturation`` queue takes only larger groups) and steals
  some back later; on 4x H100 (batch h3) that ended 0.6 s after a greedy run of the same tasks.
  A task is pinned to its worker loosely: where that worker has died, another runs it.
  ``GCEXPLORE_DISPATCH=eager`` submits every task at once (Dask's way; for clusters that
  grow while a campaign runs).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence

DISPATCH_ENV, DISPATCHES = "GCEXPLORE_DISPATCH", ("ready", "eager")
READY_GAP_S = 0.25  # a local cluster's serial GPU start: one worker's driver and context after another's
SEARCH_MAX_TASKS, SEARCH_S = 64, 0.25  # the swap search is quadratic per pass: larger grids keep longest first
# a searched order is kept only where it ends the simulated run this much sooner than longest first: replayed on the
# task times of 10 runs (batches h1-h3, j1; 2 and 4 H100s), orders predicted >= 2.6% sooner ended 0.09-0.40 s sooner in
# 6 of 7, those predicted 0.2-0.6% sooner ended 0.05-0.40 s later in all 3 (the 1-GPU task times predict to ~3%)
MIN_GAIN = 0.01


def dispatch_mode() -> str:
    """``GCEXPLORE_DISPATCH``: ``ready`` (default, one task per free worker) or ``eager`` (all at once)."""
    mode = os.environ.get(DISPATCH_ENV, "ready")
    if mode not in DISPATCHES:
        raise ValueError(f"{DISPATCH_ENV} is one of {', '.join(map(repr, DISPATCHES))}, got {mode!r}")
    return mode


def _grid_cost(task: dict) -> float:
    """A task's relative duration from its grid entry: layouts x repetitions x modes x workloads."""
    from ..schema import MODES

    sp, opt, wl = task["splits"], task["options"], task["workloads"]
    layouts = 16 if sp is None else 1 if isinstance(sp, int) else max(1, len(sp))
    reps = float(opt.get("repeats", 20)) + float(opt.get("warmup", 3))
    modes = len(opt.get("modes", MODES)) if isinstance(opt.get("modes", MODES), (list, tuple)) else 1
    return layouts * reps * modes * max(1, len(wl.get("builtins", {"a": 0, "b": 0})))


def known_durations(durations) -> dict[str, float]:
    """key -> seconds: a dict as given, or read from an earlier campaign folder's shards."""
    if durations is None:
        return {}
    if isinstance(durations, Mapping):
        return {str(k): float(v) for k, v in durations.items()}
    from .store import CampaignFolder

    shards, _, _ = CampaignFolder(durations).scan()
    out = {}
    for key, df in shards.items():
        meta = df.attrs.get("campaign", {})
        if isinstance(meta.get("started_s"), (int, float)) and isinstance(meta.get("finished_s"), (int, float)):
            out[key] = float(meta["finished_s"]) - float(meta["started_s"])
    return out


def list_schedule(order: Sequence[str], seconds: Mapping[str, float],
                  ready: Sequence[float]) -> tuple[float, list[int]]:
    """A greedy run: each key in ``order`` goes to the worker free first (ties: the lower index), worker ``i``
    free from ``ready[i]`` s. Returns (the time the last task ends, each key's worker)."""
    free, where = list(ready), []
    for k in order:
        i = min(range(len(free)), key=free.__getitem__)
        free[i] += seconds[k]
        where.append(i)
    return max(free), where


def ready_gap_s(local: bool) -> float:
    """The expected time between two workers' GPUs being ready: a local cluster's serial start, else none."""
    from .cluster import gpu_start_mode

    return READY_GAP_S if local and gpu_start_mode() == "serial" else 0.0


def _improve(order: list[str], seconds: Mapping[str, float], ready: Sequence[float]) -> list[str]:
    """Swap two tasks wherever that ends the greedy run sooner, until no swap does (the first found, from the end;
    at most ``SEARCH_S`` seconds of it: planning runs while a local cluster starts)."""
    best, end = list(order), list_schedule(order, seconds, ready)[0]
    better, t0 = True, time.perf_counter()
    while better and time.perf_counter() - t0 < SEARCH_S:
        better = False
        for i in reversed(range(len(best))):  # the tail first: the longest tasks stay at the head where they can
            for j in reversed(range(i + 1, len(best))):
                if seconds[best[i]] == seconds[best[j]]:
                    continue
                trial = list(best)
                trial[i], trial[j] = trial[j], trial[i]
                t = list_schedule(trial, seconds, ready)[0]
                if t < end - 1e-9:
                    best, end, better = trial, t, True
    return best


def task_seconds(tasks: dict, known: Mapping[str, float] | None = None) -> dict[str, float]:
    """key -> seconds: ``known`` where given, else the grid's estimate scaled to the known ones."""
    known, cost = {k: v for k, v in (known or {}).items() if k in tasks}, {k: _grid_cost(t) for k, t in tasks.items()}
    scale = (sum(known.values()) / sum(cost[k] for k in known)) if known else 1.0
    return {k: known.get(k, cost[k] * scale) for k in tasks}


def cut_layouts(tasks: dict, known: Mapping[str, float] | None = None, *,
                first: int | None = None) -> tuple[dict, dict[str, str], dict[str, float]]:
    """The ``first`` longest tasks (default every one) cut into one task per layout, longest first.

    A task whose split set lists two or more sizes becomes one task per size (split set ``[k]``, its
    key derived as any task's: the same as a grid of that one-size split set would give); a task of one
    size, or of every valid size (``None``: the sizes are the card's, known only on a worker), stays
    whole. Finer tasks at the head of the order let the workers that are ready first start while the
    others still start, and leave no long task for the end. Pure: nothing is imported or run.

    Parameters
    ----------
    tasks : dict
        key -> task (:func:`gcexplore.campaigns.grid.plan_tasks`).
    known : mapping, optional
        key -> seconds (a task's earlier duration; a cut task's is shared equally among its layouts).
    first : int, optional
        How many of the longest tasks to cut (None: all; 0: none).

    Returns
    -------
    (tasks, parents, seconds)
        key -> task in the order to run them (longest first, ties by key); key of a piece -> key of the
        task it was cut from; key -> the seconds the order used (known, a share of known, or estimated).
    """
    if first is not None and (isinstance(first, bool) or not isinstance(first, int) or first < 0):
        raise ValueError(f"first is how many of the longest tasks to cut, an int >= 0 or None, got {first!r}")
    seconds = task_seconds(tasks, known)
    longest = sorted(tasks, key=lambda k: (-seconds[k], k))
    cut = set(longest if first is None else longest[:first])
    out, parents, secs = {}, {}, {}
    for key in longest:
        t, sp = tasks[key], tasks[key]["splits"]
        if key not in cut or not isinstance(sp, list) or len(sp) < 2:
            out[key], secs[key] = t, seconds[key]
            continue
        for k in sp:
            piece = {**{f: v for f, v in t.items() if f != "key"}, "splits": [k], "split_set": split_label([k])}
            piece["key"] = task_key(piece)
            out[piece["key"]], parents[piece["key"]], secs[piece["key"]] = piece, key, seconds[key] / len(sp)
    order = sorted(out, key=lambda k: (-secs[k], k))
    return {k: out[k] for k in order}, parents, {k: secs[k] for k in order}


def task_order(tasks: dict, known: Mapping[str, float] | None = None, *, workers: int = 1,
               ready_gap_s: float = 0.0) -> list[str]:
    """Keys longest first: by the seconds in ``known`` where given, else by the grid's estimate
    scaled to the known ones (so the two kinds of numbers compare); ties by key. With ``workers`` > 1,
    improved by swaps where a greedy run (:func:`list_schedule`) on that many workers, the k-th ready
    ``k * ready_gap_s`` s after the first, would end sooner (grids of up to 64 tasks), where that is at least
    ``MIN_GAIN`` of its end: a smaller gain is within what known durations predict."""
    seconds = task_seconds(tasks, known)
    order = sorted(tasks, key=lambda k: (-seconds[k], k))
    if workers > 1 and len(order) > workers and len(order) <= SEARCH_MAX_TASKS:
        ready = [k * ready_gap_s for k in range(workers)]
        found, longest = _improve(order, seconds, ready), list_schedule(order, seconds, ready)[0]
        if list_schedule(found, seconds, ready)[0] < longest * (1 - MIN_GAIN):
            order = found
    return order


class Feeder:
    """Sends a campaign's tasks in ``order`` to ``workers`` (address -> warm-up future), one per free worker
    (per free thread: ``threads``, address -> its thread count, for workers of several).

    ``submit(key, addr)`` submits one task pinned loosely to ``addr`` and returns its future. A worker's first
    task goes when its warm-up future is done (finished or not: a worker that died passes its task on), each
    next one when the worker's task before it is done. Every future goes to ``done`` (a queue: ``(key, future)``)
    for the campaign's ``wait`` to report. Runs in a daemon thread; ``stop()`` ends it (a closing client).
    """

    def __init__(self, client, order: Sequence[str], workers: Mapping[str, object], submit, done,
                 threads: Mapping[str, int] | None = None):
        from distributed import as_completed

        self.pending, self._submit, self.done = deque(order), submit, done
        self._threads = dict(threads or {})  # a worker of n threads (CPU experiments) runs n tasks at once
        self._ac, self._stop = as_completed(list(workers.values()), with_results=False), threading.Event()
        self._slot = {fut: ("warm", addr) for addr, fut in workers.items()}
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="gcexplore-campaign-feed", daemon=True)
        self._thread.start()

    def _next(self, addr: str) -> None:
        if self.pending and not self._stop.is_set():
            key = self.pending.popleft()
            fut = self._submit(key, addr)
            self._slot[fut] = (key, addr)
            self._ac.add(fut)

    def _run(self) -> None:
        try:
            for fut in self._ac:
                if self._stop.is_set():
                    break
                what, addr = self._slot.pop(fut)
                if what != "warm":
                    self.done.put((what, fut))
                for _ in range(1 if what != "warm" else max(1, self._threads.get(addr, 1))):
                    self._next(addr)
        except BaseException as e:  # the client closed under it: wait() says so instead of hanging
            self.error = e
        finally:
            self.done.put(None)

    def stop(self) -> None:
        self._stop.set()
        self.pending.clear()


def split_label(splits) -> str:
    """A split set as text: "all", or its sizes joined by commas."""
    if splits is None:
        return "all"
    seq = [splits] if isinstance(splits, int) else list(splits)
    return ",".join(str(int(k)) for k in seq)


def task_key(desc: dict) -> str:
    """A task's key: its experiment and pair, readable, and a digest of everything it measures."""
    digest = hashlib.sha256(json.dumps(desc, sort_keys=True).encode()).hexdigest()[:12]
    label = re.sub(r"[^A-Za-z0-9_.+-]", "_", f"{desc['experiment'].rsplit(':', 1)[-1]}-{desc['pair']}")[:60]
    return f"{label}-{digest}"
