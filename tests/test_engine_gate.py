"""The engine's flag gate on fake streams, events and flag (no GPU): every repetition queued behind
the one before whatever its length, the flag written only after a repetition's last launch, a
repetition the flag's timeout let go measured again, the timed gate after timeouts in a row, the
gate chosen by GCEXPLORE_GATE, and the flag's words as the gate kernel leaves them."""

from __future__ import annotations

import numpy as np
import pytest
from test_engine_reps import _engine

from gcexplore.experiments import engine as E
from gcexplore.experiments import gate as G


class _Flag:
    """Stands in for gate.FlagGate: logs launches and releases; ``timeouts``: sequence numbers whose
    gate the timeout let go."""

    def __init__(self, log, timeouts=()):
        self.log, self.seq, self.timeouts = log, 0, timeouts

    def launch(self, stream):
        self.seq += 1
        self.log.append(("flag", stream.name, self.seq))
        return self.seq

    def release(self, seq):
        self.log.append(("release", "", seq))

    def outcome(self, seq):
        return seq not in self.timeouts, 25e-6

    def close(self):
        pass


def _flagged(finished, timeouts=(), step=100.0):
    eng, slot, log = _engine(finished=finished, step=step)
    eng._flag, eng.gate_kind = _Flag(log, timeouts), "flag"
    return eng, slot, log


def _what(log, what, name=None):
    return [x for w, n, x in log if w == what and (name is None or n == name)]


def test_a_repetition_queued_after_its_predecessor_ended_counts_behind_the_flag():
    # the timed gate measures such a repetition again and queues no more (test_engine_reps); the flag's
    # gate also waited for the host's last launch, so no host time can be in it
    eng, slot, log = _flagged(lambda: True)
    labels = [("8+124", "concurrent", r) for r in range(6)]
    assert [label for label, _, _ in eng.run_reps([slot], labels)] == labels
    assert len(_what(log, "run")) == 6 and _what(log, "flag", "gate") == [1, 2, 3, 4, 5, 6]
    assert _what(log, "spin", "gate") == []  # no timed gate anywhere
    ends = [ev for w, n, ev in log if w == "record" and n == "s0"][1::2]
    # reps 0 and 1 one at a time (no makespan known when 1 is enqueued), then each behind the one before
    assert _what(log, "wait", "gate") == ends[1:5]
    assert eng.host["reps"] == 6 and eng.host["queued"] == 4 and eng.host["measured_again"] == 0
    assert eng.host["gate_idle_s"] == pytest.approx(6 * 25e-6)


@pytest.mark.parametrize("every", [False, True])
def test_repetitions_shorter_than_the_enqueue_go_one_at_a_time_unless_every_one_is_queued(every):
    eng, slot, log = _flagged(lambda: False, step=1e-6)  # 1 ns apart: shorter than any enqueue
    eng.queue_every = every
    labels = [("8+124", "sequential", r) for r in range(6)]
    assert [label for label, _, _ in eng.run_reps([slot], labels)] == labels
    assert len(_what(log, "run")) == 6 and eng.host["queued"] == (5 if every else 0)


def test_a_stall_stops_the_queueing_only_until_it_ages_out_behind_the_flag(monkeypatch):
    # repetitions of 20 ms (events 10 ms apart) and one 10-ms enqueue: 4 x 10 ms + 0.2 ms > 20 ms. The timed gate
    # stops queueing for good (its rule reads the slowest enqueue ever); the flag's reads the last 64
    n, stall = 3 + E._RECENT + 10, 3
    queued = {}
    for kind in ("timed", "flag"):
        eng, slot, log = (_engine if kind == "timed" else _flagged)(lambda: False, step=10.0)
        calls = []

        def run(calls=calls, log=log):
            calls.append(1)
            if len(calls) == stall + 1:
                import time

                time.sleep(0.01)
            log.append(("run", "s0", None))

        slot.run = run
        out = [label for label, _, _ in eng.run_reps([slot], [("8+124", "alone", r) for r in range(n)])]
        assert len(out) == n and len(calls) == n
        queued[kind] = eng.host["queued"]
    # reps 2..4 queued (the stall was rep 3's enqueue, read when rep 3 is collected, after rep 4 was queued), none after
    assert queued["timed"] == 3
    assert queued["flag"] >= queued["timed"] + 8  # queued again once the stall was 64 enqueues ago


def test_the_flag_is_written_only_after_the_repetitions_last_launch():
    eng, slot, log = _flagged(lambda: False)
    slot.launches = 3
    list(eng.run_reps([slot], [("8+124", "alone", r) for r in range(3)]))
    for seq in (1, 2, 3):
        i_gate, i_rel = log.index(("flag", "gate", seq)), log.index(("release", "", seq))
        assert [w for w, _, _ in log[i_gate:i_rel]].count("run") == 3  # every launch of it between
        assert log[i_rel - 1][0] == "record"  # the last: its end event
    assert len(eng.run_group([slot])) == 2 and log[-1] == ("release", "", 4)


def test_a_repetition_the_flags_timeout_let_go_is_measured_again_after_the_one_in_flight(monkeypatch):
    import test_engine_reps as T

    eng, slot, log = _flagged(lambda: False, timeouts={3})
    synced = []
    monkeypatch.setattr(T._Event, "sync", lambda self: synced.append(len(log)) or setattr(self, "_done", True))
    labels = [("8+124", "streams", r) for r in range(5)]
    assert [label for label, _, _ in eng.run_reps([slot], labels)] == labels
    assert len(_what(log, "run")) == 6  # rep 2 (seq 3) ran twice
    assert eng.host["flag_timeouts"] == 1 and eng.host["measured_again"] == 1 and eng.gate_kind == "flag"
    i_again = log.index(("flag", "gate", 5))  # seq 4 (rep 3) was in flight when seq 3's timeout was seen
    assert log[i_again - 1][0] != "wait"  # measured again gated (behind no repetition)...
    assert any(i <= i_again for i in synced if i > log.index(("release", "", 4)))  # ...once rep 3 had ended


def test_timeouts_in_a_row_leave_the_timed_gate_and_say_why():
    eng, slot, log = _flagged(lambda: False, timeouts=range(1, 100))  # a workload that syncs inside its launch
    labels = [("8+124", "alone", r) for r in range(4)]
    assert [label for label, _, _ in eng.run_reps([slot], labels)] == labels
    assert eng.gate_kind == "timed" and eng._flag is None and "timed out" in eng.gate_note
    # rep 0 three times behind the flag (seq 1, 2, 3), then behind the timed gate, as every later one
    assert _what(log, "flag", "gate") == [1, 2, 3] and eng.host["flag_timeouts"] == E._FLAG_GIVE_UPS
    # then the timed gate's own rules (tested in test_engine_reps): rep 0 measured again behind a sized gate first
    timed = _what(log, "spin", "gate")
    assert timed[0] == int(E._GATE_US_START * 1000) and len(_what(log, "run")) == 3 + len(timed)


def test_a_workload_that_raises_still_lets_its_gate_go():
    eng, slot, log = _flagged(lambda: False)

    def boom():
        raise RuntimeError("workload failed")

    slot.run = boom
    with pytest.raises(RuntimeError, match="workload failed"):
        eng.run_group([slot])
    assert log[-1] == ("release", "", 1)


def test_metadata_records_the_gate_and_the_host_side_phases():
    eng, slot, log = _flagged(lambda: False)
    eng.nvml = type("N", (), {"available": False})()
    eng.gate_note = ""
    list(eng.run_reps([slot], [("8+124", "alone", r) for r in range(4)]))
    md = eng.metadata()
    assert md["gate"] == "flag" and md["gate_note"] == ""
    h = md["engine_phases"]
    assert (h["reps"], h["queued"], h["flag_timeouts"]) == (4, 2, 0)  # reps 2, 3 behind the one before
    assert h["enqueue_s"] > 0 and h["collect_s"] > 0 and h["wait_s"] >= 0 and h["gate_idle_s"] == pytest.approx(1e-4)


def test_the_gate_is_chosen_by_gcexplore_gate_and_a_bad_value_is_refused(monkeypatch):
    monkeypatch.delenv("GCEXPLORE_GATE", raising=False)
    assert G.gate_kind() == "flag"
    monkeypatch.setenv("GCEXPLORE_GATE", "timed")
    assert G.gate_kind() == "timed" and G.gate_kind("flag") == "flag"
    monkeypatch.setenv("GCEXPLORE_GATE", "fast")
    with pytest.raises(ValueError, match=r"GCEXPLORE_GATE must be one of 'flag', 'timed'.*got 'fast'"):
        G.gate_kind()
    with pytest.raises(ValueError, match=r"gate must be one of .*got 'spin'"):
        E.Engine(None, gate="spin")  # refused before any device is touched


def test_the_flag_words_as_the_gate_kernel_leaves_them():
    launched = []
    f = object.__new__(G.FlagGate)
    f.words, f.seq, f._dev, f.timeout_ns = np.zeros(1 + 2 * G.RING, np.uint64), 0, 0x10000, 20_000_000
    f._kernel, f._config = "gcx_gate", "cfg"
    f._launch = lambda stream, cfg, kernel, *args: launched.append([int(a) for a in args])
    assert [f.launch("gate"), f.launch("gate")] == [1, 2]
    # the kernel's arguments: the flag word, the sequence, the timeout, its own status words in the ring
    assert launched == [[0x10000, 1, 20_000_000, 0x10000 + 8 * 3], [0x10000, 2, 20_000_000, 0x10000 + 8 * 5]]
    f.words[3], f.words[4] = 1, 12_000  # released by the flag after 12 us
    f.words[5], f.words[6] = 2 | (1 << 63), 20_000_000  # let go by the timeout
    assert f.outcome(1) == (True, pytest.approx(12e-6)) and f.outcome(2) == (False, pytest.approx(0.02))
    f.release(2)
    assert int(f.words[0]) == 2
    f.seq = G.RING - 1  # the ring wraps: a slot's old words are cleared at its next launch
    assert f.launch("gate") == G.RING and launched[-1][3] == 0x10000 + 8 and f.outcome(G.RING)[0] is False


def test_a_local_clusters_workers_get_the_clients_gate_and_a_bad_one_is_refused(monkeypatch):
    d = pytest.importorskip("distributed")
    from gcexplore.campaigns.cluster import local_cluster

    specs = []
    monkeypatch.setattr(d, "SpecCluster", lambda workers, **kw: specs.append(workers))
    monkeypatch.setenv("GCEXPLORE_GATE", "timed")
    local_cluster(["0", "1"], start="spawn")
    assert [w["options"]["env"]["GCEXPLORE_GATE"] for w in specs[0].values()] == ["timed", "timed"]
    monkeypatch.setenv("GCEXPLORE_GATE", "sized")
    with pytest.raises(ValueError, match="GCEXPLORE_GATE"):  # the client refuses before any worker starts
        local_cluster(["0"], start="spawn")


def test_the_engines_record_names_no_identity_field():
    # experiment.frame writes the engine's metadata over the card's and the machine's identity (host, ...)
    from gcexplore.analysis.identity import IDENTITY_FIELDS
    from gcexplore.schema import IDENTITY

    eng, slot, log = _flagged(lambda: False)
    eng.nvml, eng.gate_note = type("N", (), {"available": False})(), ""
    fields = {name for _, name in IDENTITY_FIELDS} | {f.name for f in IDENTITY} | {"host"}
    assert set(eng.metadata()) & fields == set()
