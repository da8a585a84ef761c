"""How a campaign's tasks reach its workers (issue 30, no GPU): the order (longest first, improved by
simulating the greedy run on the cluster's workers and their ready times) and the feeder (a worker's
first task once its warm-up, queued behind its GPU start, is done; its next once it is free)."""

from __future__ import annotations

import queue
import threading
import time

import pytest

import gcexplore as gx
from gcexplore.campaigns import dispatch
from gcexplore.campaigns.grid import plan_tasks, task_order
from gcexplore.campaigns.dispatch import Feeder, list_schedule

EXP = "_campaign_standin:standin"
PAIR = "_campaign_standin:pair"


def _tasks(n):
    return plan_tasks(EXP, [PAIR], [[8 * (k + 1)] for k in range(n)], [{"repeats": 5}])[0]


def test_list_schedule_gives_each_task_to_the_worker_free_first():
    secs = {"a": 3, "b": 2, "c": 2, "d": 1}
    assert list_schedule("abcd", secs, [0, 0]) == (4, [0, 1, 1, 0])
    # a worker ready later gets its first task later: the second task goes to the one ready first
    assert list_schedule("abcd", secs, [0, 3.5]) == (6, [0, 0, 1, 0])


def test_the_order_beats_longest_first_where_the_greedy_run_would_end_later():
    tasks = _tasks(5)
    keys = sorted(tasks)
    secs = dict(zip(keys, [3.0, 3.0, 2.0, 2.0, 2.0]))
    lpt = sorted(keys, key=lambda k: (-secs[k], k))
    assert task_order(tasks, secs) == lpt  # one worker: longest first
    assert list_schedule(lpt, secs, [0, 0])[0] == 7.0  # 3+2+2 | 3+2
    order = task_order(tasks, secs, workers=2)
    assert sorted(order) == keys and order[0] == lpt[0]
    assert list_schedule(order, secs, [0, 0])[0] == 6.0  # 3+3 | 2+2+2: both 3-s tasks on one worker


def test_the_order_gives_less_work_to_a_worker_whose_gpu_starts_later():
    tasks = _tasks(6)
    keys = sorted(tasks)
    secs = dict(zip(keys, [5.0, 4.0, 4.0, 3.0, 3.0, 1.0]))
    ready = [0.0, 2.0]
    plain = sorted(keys, key=lambda k: (-secs[k], k))
    assert list_schedule(plain, secs, ready)[0] == 12.0
    order = task_order(tasks, secs, workers=2, ready_gap_s=2.0)
    end, where = list_schedule(order, secs, ready)
    assert end == 11.0  # the bound: (20 s of tasks + 2 s later) / 2
    late = sum(secs[k] for k, w in zip(order, where) if w == 1)
    assert late == 9.0  # the worker ready 2 s later runs 2 s less
    # without the gap the search aims at an even split
    assert list_schedule(task_order(tasks, secs, workers=2), secs, [0, 0])[0] == 10.0


def test_large_grids_keep_longest_first(monkeypatch):
    tasks = _tasks(6)
    secs = dict(zip(sorted(tasks), [3.0, 3.0, 2.0, 2.0, 2.0, 0.5]))
    assert task_order(tasks, secs, workers=2) != sorted(tasks, key=lambda k: (-secs[k], k))
    monkeypatch.setattr(dispatch, "SEARCH_MAX_TASKS", 5)
    assert task_order(tasks, secs, workers=2) == sorted(tasks, key=lambda k: (-secs[k], k))


LOG: list = []  # the in-process workers append here: (key, worker, started, ended)


def test_a_search_gaining_less_than_what_durations_predict_keeps_longest_first(monkeypatch):
    tasks = _tasks(7)
    secs = dict(zip(sorted(tasks), [100.0, 100.0, 3.0, 3.0, 2.0, 2.0, 2.0]))
    lpt = sorted(tasks, key=lambda k: (-secs[k], k))
    assert list_schedule(lpt, secs, [0, 0])[0] == 107.0  # 100+3+2+2 | 100+3+2: the search finds 106 (0.9% sooner)
    assert task_order(tasks, secs, workers=2) == lpt
    monkeypatch.setattr(dispatch, "MIN_GAIN", 0.0)
    assert list_schedule(task_order(tasks, secs, workers=2), secs, [0, 0])[0] == 106.0


def _stamp(key, seconds, until=None):
    """A task: ``seconds`` long, or (``until``, an event) until the event is set; logged on its worker."""
    from distributed import get_worker

    t0 = time.time()
    if until is None:
        time.sleep(seconds)
    else:
        assert until.wait(60), f"{key}: the event it waits for never came"
    LOG.append((key, get_worker().address, t0, time.time()))
    return key


# Events the tests' in-process tasks wait on, so what they assert follows from the order of events,
# not from how long a loaded machine takes to start a task.
EVENTS: dict[str, threading.Event] = {}


RUNNING: dict = {}
_RUN_LOCK = threading.Lock()


def _counted(key, wait_s):
    """A task counting how many run at once; it waits up to ``wait_s`` for all three to be running."""
    with _RUN_LOCK:
        RUNNING["now"] += 1
        RUNNING["most"] = max(RUNNING["most"], RUNNING["now"])
        if RUNNING["now"] == 3:
            RUNNING["all"].set()
    RUNNING["all"].wait(wait_s)
    with _RUN_LOCK:
        RUNNING["now"] -= 1
    return _stamp(key, 0.0)


def _wait_for(name):
    assert EVENTS[name].wait(60), f"the event {name!r} never came"


def _started(key, name, seconds):
    """A task that sets the event ``name`` as it starts, then runs ``seconds``."""
    EVENTS[name].set()
    return _stamp(key, seconds)


@pytest.fixture(scope="module")
def two_workers():
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        yield client


def test_feeder_sends_a_workers_first_task_once_it_is_ready_and_one_at_a_time(two_workers):
    client = two_workers
    fast, slow = sorted(client.scheduler_info(n_workers=-1)["workers"])
    LOG.clear()
    EVENTS.update(t0=threading.Event(), t1=threading.Event())
    # the slow worker's warm-up (its GPU starting) ends only once the fast worker runs its first task,
    # and that task runs until the slow worker has started its own: ready first by events, not by sleeps
    warm = {fast: client.submit(time.sleep, 0.0, workers=[fast], pure=False),
            slow: client.submit(_wait_for, "t0", workers=[slow], pure=False)}
    secs = {f"t{i}": s for i, s in enumerate([1.0, 0.4, 0.3, 0.2, 0.1, 0.1])}
    sent = []

    def submit(key, addr):
        sent.append((key, addr))
        if key == "t0":  # runs until the slow worker's first task has started
            fn, args = _stamp_after_start, (key,)
        elif key == "t1":
            fn, args = _started, (key, "t1", 0.0)
        else:
            fn, args = _stamp, (key, 0.01)
        return client.submit(fn, *args, key=f"feed-{key}", workers=[addr], allow_other_workers=True, pure=False)

    done = queue.SimpleQueue()
    feeder = Feeder(client, list(secs), warm, submit, done)
    got = []
    while (item := done.get(timeout=60)) is not None:
        got.append(item[0])
    assert feeder.error is None and sorted(got) == sorted(secs)
    starts = {k: (a, t0, t1) for k, a, t0, t1 in LOG}
    assert warm[slow].status == "finished"
    # the first task went to the worker ready first; the slow worker's first, when it became ready, is the next
    assert sent[0] == ("t0", fast) and starts["t0"][0] == fast
    slow_tasks = sorted((v[1], k) for k, v in starts.items() if v[0] == slow)
    assert slow_tasks and slow_tasks[0][1] == "t1", slow_tasks
    assert [k for k, a in sent if a == slow][0] == "t1"
    # never two tasks at once on a worker, and tasks are sent in the order given
    for w in (fast, slow):
        spans = sorted((t0, t1) for a, t0, t1 in starts.values() if a == w)
        assert all(b[0] >= a[1] - 1e-3 for a, b in zip(spans, spans[1:])), spans
    assert [k for k, _ in sent] == list(secs)


def _stamp_after_start(key):
    """The fast worker's first task: sets ``t0`` (the slow worker's warm-up may end), runs until ``t1`` started."""
    from distributed import get_worker

    t0 = time.time()
    EVENTS["t0"].set()
    assert EVENTS["t1"].wait(60), "the slow worker's first task never started"
    LOG.append((key, get_worker().address, t0, time.time()))
    return key


def test_feeder_passes_a_dead_workers_task_on(two_workers):
    client = two_workers
    live = sorted(client.scheduler_info(n_workers=-1)["workers"])[0]
    gone = "tcp://127.0.0.1:1"  # a worker that has left: its loosely pinned task runs elsewhere
    LOG.clear()
    warm = {live: client.submit(time.sleep, 0.01, pure=False), gone: client.submit(time.sleep, 0.01, pure=False)}
    done = queue.SimpleQueue()
    Feeder(client, ["a", "b", "c"], warm, lambda key, addr: client.submit(
        _stamp, key, 0.05, key=f"dead-{key}", workers=[addr], allow_other_workers=True, pure=False), done)
    got = []
    while (item := done.get(timeout=20)) is not None:
        got.append(item[0])
    assert sorted(got) == ["a", "b", "c"] and sorted(k for k, *_ in LOG) == ["a", "b", "c"]


def test_dispatch_mode_is_checked_and_eager_sends_every_task_at_once(monkeypatch, tmp_path):
    pytest.importorskip("distributed")
    from distributed import Client

    from gcexplore.campaigns.grid import local_cluster

    monkeypatch.setenv(dispatch.DISPATCH_ENV, "later")
    with pytest.raises(ValueError, match="GCEXPLORE_DISPATCH is one of 'ready', 'eager'"):
        dispatch.dispatch_mode()
    splits = [[8], [16], [24], [32]]
    with local_cluster(["0", "1"]) as cluster, Client(cluster) as client:
        for mode in ("eager", "ready"):  # (a cluster of one worker gets every task at once either way)
            monkeypatch.setenv(dispatch.DISPATCH_ENV, mode)
            c = gx.campaign([PAIR], splits, experiment=EXP, options={"layout_s": 0.5}, folder=tmp_path / mode,
                            client=client, progress=False, wait=False)
            sent = len(c.futures)  # before any task can have ended: ready sends at most one per worker
            assert (sent == 4) if mode == "eager" else (sent <= 2), (mode, sorted(c.futures))
            assert len(c.submitted) == 4
            df = c.result(progress=False)
            assert sorted(df["task_key"].unique()) == sorted(c.tasks) and c.futures == {}
            c.close()
    with local_cluster(["0"]) as cluster, Client(cluster) as client:  # one worker: all at once, no round trips
        c = gx.campaign([PAIR], splits, experiment=EXP, options={"layout_s": 0.5}, folder=tmp_path / "one",
                        client=client, progress=False, wait=False)
        assert len(c.futures) == 4
        c.close()


def test_feeder_keeps_every_thread_of_a_worker_of_several_busy():
    """A CPU experiment on a worker of several threads: one task per free thread, not per worker."""
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=3, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        (addr,) = client.scheduler_info(n_workers=-1)["workers"]
        for threads, at_once in (({addr: 3}, True), (None, False)):
            LOG.clear()
            done = queue.SimpleQueue()
            RUNNING.update(now=0, most=0, all=threading.Event())
            Feeder(client, ["a", "b", "c"], {addr: client.submit(time.sleep, 0.0, pure=False)},
                   lambda key, a: client.submit(_counted, key, 60 if at_once else 0.2,
                                                key=f"threads-{key}-{at_once}", workers=[a],
                                                allow_other_workers=True, pure=False), done, threads=threads)
            while done.get(timeout=90) is not None:
                pass
            # all three at once: each waits (up to a minute) until the three run; one at a time: never two
            assert len(LOG) == 3 and RUNNING["most"] == (3 if at_once else 1), (threads, RUNNING)
