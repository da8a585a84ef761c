"""The engine's pipelined repetitions, on fake streams and events (no GPU): each repetition is
enqueued behind the end of the one before, results come back in order, and a repetition whose
predecessor had already ended when its enqueue finished is measured again behind a sized gate."""

from __future__ import annotations

import itertools

import pytest

from gcexplore.experiments import engine as E


class _Event:
    def __init__(self, log, t, done):
        self.log, self.t, self._done = log, t, done

    def __sub__(self, other):
        return self.t - other.t

    def sync(self):
        self._done = True

    @property
    def is_done(self):
        return self._done


class _Stream:
    def __init__(self, name, log, clock, finished):
        self.name, self.log, self.clock, self.finished = name, log, clock, finished

    def record(self, options=None):
        ev = _Event(self.log, next(self.clock), self.finished())
        self.log.append(("record", self.name, ev))
        return ev

    def wait(self, ev):
        self.log.append(("wait", self.name, ev))


class _Workload:
    name = "w"
    flops = bytes = None


class _Part:
    name = "p0"
    sm_count, requested_sm_count = 8, 8


def _engine(finished, trace=None, step=100.0):
    log, clock = [], (i * step for i in itertools.count())  # event times in ms: far beyond any host enqueue
    eng = object.__new__(E.Engine)
    eng.trace, eng._l2, eng.event_options = trace, None, None
    eng.gate_us, eng.max_enqueue_us, eng.host, eng.gate_kind = E._GATE_US_START, 0.0, E.phase_totals(), "timed"
    eng.queue_every, eng._recent = False, E.collections.deque(maxlen=E._RECENT)
    eng.gate = _Stream("gate", log, clock, finished)
    eng._spin, eng._spin_config = None, None
    eng._launch = lambda stream, cfg, kernel, ns, _: log.append(("spin", stream.name, int(ns)))
    stream = _Stream("s0", log, clock, finished)
    slot = E.Slot(_Workload(), _Part(), stream, run=lambda: log.append(("run", "s0", None)))
    return eng, slot, log


def _gates(log):
    return [ns for what, name, ns in log if what == "spin" and name == "gate"]


def test_repetitions_are_queued_behind_the_one_before_while_it_runs():
    eng, slot, log = _engine(finished=lambda: False)  # the GPU is always busy: every rep is clean
    labels = [("8+124", "concurrent", r) for r in range(5)]
    out = list(eng.run_reps([slot], labels))
    assert [label for label, _, _ in out] == labels
    gates = _gates(log)
    assert len(gates) == 5  # nothing measured twice
    # reps 0 and 1 gated (no makespan known yet when 1 is enqueued), then each queued behind the last
    assert min(gates[:2]) >= int(E._GATE_US_START * 1000) and set(gates[2:]) == {int(E._GATE_US_QUEUED * 1000)}
    gate_waits = [ev for what, name, ev in log if what == "wait" and name == "gate"]
    ends = [ev for what, name, ev in log if what == "record" and name == "s0"][1::2]
    assert gate_waits == ends[1:4]  # reps 2..4 each wait for the end of the rep before


def test_a_repetition_queued_after_its_predecessor_ended_is_measured_again_behind_a_sized_gate():
    eng, slot, log = _engine(finished=lambda: True)  # a host stall: each rep ends before the next is queued
    labels = [("8+124", "alone", r) for r in range(4)]
    out = list(eng.run_reps([slot], labels))
    assert [label for label, _, _ in out] == labels
    gates = _gates(log)
    # reps 0, 1 gated; rep 2 queued (5 us gate), found unclean, measured again gated; rep 3 gated
    assert gates[2] == int(E._GATE_US_QUEUED * 1000) and len(gates) == 5
    assert all(g >= int(E._GATE_US_START * 1000) for g in (*gates[:2], *gates[3:]))


def test_repetitions_shorter_than_the_enqueue_go_one_at_a_time_and_call_the_workload_once_each():
    eng, slot, log = _engine(finished=lambda: True, step=1e-6)  # 1 ns apart: shorter than any enqueue
    labels = [("8+124", "concurrent", r) for r in range(6)]
    assert [label for label, _, _ in eng.run_reps([slot], labels)] == labels
    assert sum(1 for what, _, _ in log if what == "run") == 6  # no repetition measured twice
    assert not [1 for what, name, _ in log if what == "wait" and name == "gate"]


def test_a_workload_raising_while_the_next_rep_is_queued_still_gives_the_rep_before():
    eng, slot, log = _engine(finished=lambda: False)
    calls = []

    def run():
        calls.append(1)
        if len(calls) == 4:
            raise RuntimeError("workload failed")

    slot.run = run
    got = []
    with pytest.raises(RuntimeError, match="workload failed"):
        for label, _, _ in eng.run_reps([slot], [("8+124", "concurrent", r) for r in range(6)]):
            got.append(label[2])
    assert got == [0, 1, 2]  # rep 2 was queued when rep 3's enqueue raised: its times still came back


def test_no_pipelining_while_tracing():
    class _Trace:
        def group(self, label):
            pass

        def tag(self, *a, **k):
            import contextlib
            return contextlib.nullcontext()

    eng, slot, log = _engine(finished=lambda: False, trace=_Trace())
    list(eng.run_reps([slot], [("8+124", "alone", r) for r in range(3)]))
    assert not [1 for what, name, _ in log if what == "wait" and name == "gate"]
    assert all(g >= int(E._GATE_US_START * 1000) for g in _gates(log))


@pytest.mark.parametrize("later, first_ms, want", [("auto", 1.0, 0), ("auto", 1.3, 1), ("rep", 1.0, 1),
                                                     ("none", 1.3, 0)])
def test_a_layouts_first_mode_gets_every_warmup_and_later_modes_one_where_its_first_call_cost(monkeypatch, later,
                                                                                             first_ms, want):
    # by default ("auto") a later mode of the layout's first round runs one warm-up repetition only where
    # the first mode's first warm-up repetition ran over its slowest measured one by more than the margin
    O, run, parts, calls, _ = _layout_run(monkeypatch, first_warmup_ms=first_ms)
    monkeypatch.setattr(O, "_LATER_MODES", later)
    O.measure_layout(run, parts, [])
    assert calls == [("alone", 3), ("concurrent", want), ("sequential", want), ("streams", want)]
    assert run.extra["warmup_later_modes_at"] == (["8+124"] if want else [])


def test_gpu_time_counts_a_later_modes_warm_up_only_at_the_layouts_that_ran_it():
    import pandas as pd

    from gcexplore.analysis.tuning import gpu_time_ms

    rows = [{"layout": lay, "mode": m, "round": 0, "rep": r, "makespan_ms": 1.0}
            for lay in ("8+124", "16+116") for m in ("alone", "concurrent") for r in range(3)]
    df = pd.DataFrame(rows)
    df.attrs.update(warmup=2, modes=["alone", "concurrent"], warmup_later_modes=1)
    assert gpu_time_ms(df) == 12 + 2 * 2 + 2 * 1  # recorded before the list: every layout's later mode
    df.attrs["warmup_later_modes_at"] = ["16+116"]
    assert gpu_time_ms(df) == 12 + 2 * 2 + 1
    df.attrs["warmup_later_modes_at"] = []
    assert gpu_time_ms(df) == 12 + 2 * 2


def _layout_run(monkeypatch, warmup=3, first_warmup_ms=1.0):
    """A layout measured by a stand-in _measure_mode: its first warm-up repetition took
    ``first_warmup_ms``, its measured ones 0.99 to 1.0 ms."""
    import types

    from gcexplore.experiments import overlap as O
    from gcexplore.schema import Options

    calls, warmed = [], []

    def measure_mode(*a):
        calls.append((a[4], a[-1]))
        return (first_warmup_ms if a[-1] else None), [0.99, 1.0, 0.995]

    monkeypatch.setattr(O, "_measure_mode", measure_mode)
    monkeypatch.setattr(O, "_LATER_ROUNDS", "auto")

    class _Parts(list):
        label = "8+124"
        all = property(lambda self: list(self))

    p = types.SimpleNamespace(name="p0", sm_count=8, stream=None)
    engine = types.SimpleNamespace(whole=types.SimpleNamespace(streams=[None, None]), drain=lambda s: None,
                                   drop_graphs=lambda: None,
                                   warm=lambda slots, calls, label: warmed.append((len(slots), calls, label)))
    run = types.SimpleNamespace(engine=engine, wls=[_Workload(), _Workload()], options=Options(warmup=warmup),
                                extra={}, warmed={})
    return O, run, _Parts([p, p]), calls, warmed


def test_a_layouts_later_rounds_warm_their_fresh_streams_instead_of_running_warm_up_repetitions(monkeypatch):
    from gcexplore.experiments.runner import Round

    O, run, parts, calls, warmed = _layout_run(monkeypatch)
    O.measure_layout(run, parts, [], rnd=Round(0, 4, 0))
    assert calls == [("alone", 3), ("concurrent", 0), ("sequential", 0), ("streams", 0)] and warmed == []
    calls.clear()
    O.measure_layout(run, parts, [], rnd=Round(1, 4, 4))
    # round 1: the new partitions' and whole-device streams get one short spin each, no repetition is discarded
    assert calls == [("alone", 0), ("concurrent", 0), ("sequential", 0), ("streams", 0)]
    assert warmed == [(2, False, ("8+124", "alone", None))]
    assert run.extra["warmup_later_rounds"] == [0, 0, 0, 0] and "warmup_calls" not in run.extra


@pytest.mark.parametrize("first_ms, calls_later", [(1.004, False), (1.006, True), (1.3, True)])
def test_a_layout_whose_first_warm_up_ran_slow_calls_each_workload_once_in_its_later_rounds(monkeypatch, first_ms,
                                                                                             calls_later):
    # a library loading its kernels into every new green context shows as a slow first repetition
    # on fresh partitions: later rounds then call each workload once on them before measuring
    from gcexplore.experiments.runner import Round

    O, run, parts, calls, warmed = _layout_run(monkeypatch, first_warmup_ms=first_ms)
    O.measure_layout(run, parts, [], rnd=Round(0, 3, 0))
    O.measure_layout(run, parts, [], rnd=Round(1, 3, 3))
    O.measure_layout(run, parts, [], rnd=Round(2, 3, 6))
    assert warmed == [(2, calls_later, ("8+124", "alone", None))] * 2
    assert run.extra.get("warmup_calls", []) == (["8+124"] if calls_later else [])
    assert [n for _, n in calls[4:]] == [0] * 8  # no warm-up repetitions in rounds 1 and 2 either way


def test_a_later_round_of_a_layout_not_yet_warmed_in_this_process_gets_the_full_warm_up(monkeypatch):
    from gcexplore.experiments.runner import Round

    O, run, parts, calls, warmed = _layout_run(monkeypatch)
    O.measure_layout(run, parts, [], rnd=Round(2, 4, 8))  # e.g. a sweep resumed from its checkpoint in round 2
    assert calls[0] == ("alone", 3) and warmed == []
    O, run, parts, calls, warmed = _layout_run(monkeypatch, warmup=0)  # no warm-up asked: none in any round
    O.measure_layout(run, parts, [], rnd=Round(0, 4, 0))
    O.measure_layout(run, parts, [], rnd=Round(1, 4, 4))
    assert {n for _, n in calls} == {0} and warmed == []


@pytest.mark.parametrize("calls", [False, True])
def test_engine_warm_spins_on_every_fresh_stream_and_waits_for_it_before_measuring(calls):
    eng, slot, log = _engine(finished=lambda: False)
    clock = (i for i in itertools.count())

    class _S(_Stream):
        def sync(self):
            log.append(("sync", self.name, None))

    eng.whole = type("W", (), {"streams": [_S(f"w{i}", log, clock, lambda: False) for i in range(2)]})()
    slot.stream = _S("s0", log, clock, lambda: False)
    eng.warm([slot], calls=calls)
    spins = [name for what, name, _ in log if what == "spin"]
    assert spins == ["s0", "w0", "w1"]  # no gate: nothing here is a repetition
    assert sum(1 for what, _, _ in log if what == "run") == int(calls)
    syncs = [i for i, (what, _, _) in enumerate(log) if what == "sync"]
    assert [log[i][1] for i in syncs] == ["s0", "w0", "w1"]
    assert min(syncs) > max(i for i, (what, _, _) in enumerate(log) if what in ("spin", "run"))


def test_nvml_is_read_while_the_first_and_last_measured_repetitions_run():
    from gcexplore.experiments import overlap as O
    from gcexplore.schema import Options

    eng, slot, log = _engine(finished=lambda: False)
    eng.nvml = type("N", (), {"read": lambda self: log.append(("nvml", "", None)) or (1980.0, 300.0)})()
    eng.runner = lambda s: s.run
    rows = []
    from gcexplore.experiments.runner import Round

    O._measure_mode(eng, [([slot], False)], "8+124", 8, "concurrent", Options(repeats=3, warmup=2), Round(0, 3, 0),
                    rows, 2)
    order = [what for what, name, _ in log if what == "nvml" or (what == "spin" and name == "gate")]
    # 2 warm-up + 3 measured gates; NVML right after the first measured (3rd) and the last (5th) enqueue
    assert order == ["spin", "spin", "spin", "nvml", "spin", "spin", "nvml"]
    assert [r["rep"] for r in rows] == [0, 1, 2] and rows[0]["sm_clock_mhz_before"] == 1980.0
