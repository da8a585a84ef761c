"""The engine's gates on a real GPU: a flag-gated repetition's slots start at the common start, a host
stall inside the enqueue is not measured (the timed gate lets it in, so the check can fail), a stall past
the flag's timeout is measured again, a sweep's short repetitions one at a time (or every one queued, when
asked), and the gates agree."""

from __future__ import annotations

import time

import numpy as np
import pytest

from gcexplore import workloads as W
from gcexplore.device.driver import device_info
from gcexplore.experiments.engine import Engine, Slot

pytestmark = pytest.mark.gpu


def _slots(engine, us=50.0, stall_s=0.0, stall_on=()):
    """Two spins on two whole-device streams; the second's launch sleeps ``stall_s`` on the calls in ``stall_on``
    (a host stall inside the repetition's enqueue, between the first slot's launch and the second's)."""
    a, b = W.spin(us, device=engine.info.index), W.spin(us, device=engine.info.index)
    s0, s1 = engine.whole.streams[:2]
    calls = []

    def run_b():
        calls.append(1)
        if len(calls) in stall_on:
            time.sleep(stall_s)
        b(stream=s1)

    return [Slot(a, engine.whole, s0), Slot(b, engine.whole, s1, run=run_b)], (a, b)


def _starts(res):
    return [max(per_slot[i][0][0] for i in range(2)) for per_slot, _ in res]


def test_a_flag_gated_repetition_starts_aligned_and_a_host_stall_inside_its_enqueue_is_not_measured():
    info = device_info(0)
    with Engine(info, gate="flag") as eng:
        assert eng.metadata()["gate"] == "flag", eng.gate_note  # host-mapped memory to be had here
        slots, wls = _slots(eng, stall_s=0.005, stall_on=range(12, 17))  # calls 12-16: a 5-ms stall each
        eng.run_group(slots)  # first launches (module loading) before anything is counted
        before = dict(eng.host)
        res = [eng.run_group(slots) for _ in range(20)]
        starts, spans = _starts(res), [m for _, m in res]
        print(f"\nflag: latest slot start per rep us {np.round(np.array(starts) * 1e3, 1).tolist()}; makespans us "
              f"{np.round(np.array(spans) * 1e3, 1).tolist()}; host {eng.metadata()['engine_phases']}")
        # every slot within a few us of the common start, stalled repetitions too; the stall is in no makespan
        assert max(starts) < 0.03 and np.median(starts) < 0.015
        assert max(spans[10:15]) < 0.05 + 0.1 and max(spans) < 0.15
        assert eng.host["flag_timeouts"] == before["flag_timeouts"]
        assert eng.host["gate_idle_s"] - before["gate_idle_s"] >= 5 * 0.004  # the GPU waited them out
    with Engine(info, gate="timed") as eng:  # the same stalls behind the timed gate (~60 us): measured
        slots, wls = _slots(eng, stall_s=0.005, stall_on=range(12, 17))
        eng.run_group(slots)
        res = [eng.run_group(slots) for _ in range(20)]
        spans = [m for _, m in res]
        print(f"timed: makespans us {np.round(np.array(spans) * 1e3, 1).tolist()}")
        # the first stall after a gate of ~2 x the enqueue is in its repetition's makespan (the second slot's start
        # event was recorded before it: its duration holds it), so the check above can fail; the next ones hide
        # behind the gate grown to 2 x 5 ms
        assert spans[10] > 3.0


def test_a_stall_past_the_flags_timeout_is_measured_again_and_the_gate_stays():
    with Engine(device_info(0), gate="flag") as eng:
        slots, wls = _slots(eng, stall_s=0.03, stall_on=(5,))  # 30 ms > the 20-ms timeout, once
        eng.run_group(slots)  # first launches (module loading) before anything is counted
        before = eng.host["flag_timeouts"]
        res = [eng.run_group(slots) for _ in range(6)]
        print(f"\nhost {eng.metadata()['engine_phases']}, gate {eng.gate_kind}")
        assert eng.host["flag_timeouts"] - before == 1 and eng.gate_kind == "flag"
        assert max(_starts(res)) < 0.03 and max(m for _, m in res) < 0.15  # what came back is the clean one


def test_a_sweeps_short_repetitions_go_one_at_a_time_or_every_one_queued_and_the_gates_agree():
    info = device_info(0)
    med = {}
    # 100-us spins: short (below the queueing rule's 4 x the slowest enqueue + 200 us, so one at a time unless every
    # one is queued) and long enough to compare. On an H200 (2026-12-02) at 20 us the queued flag gate's spins read
    # 0.0-4.2% longer than the timed gate's by engine (three processes, failing 2 of 3); at 100 us 0.9-1.8% in six
    # processes (99% intervals), the others within 0.3%
    us = 100.0
    for kind, every in (("flag", False), ("flag", True), ("timed", False)):
        with Engine(info, gate=kind, queue_every=every) as eng:
            slots, wls = _slots(eng, us=us, stall_s=0.002, stall_on=(20,))  # short reps, one 2-ms stall
            labels = [("whole", "concurrent", r) for r in range(60)]
            res = [(ps, m) for _, ps, m in eng.run_reps(slots, labels)]
            h = eng.metadata()["engine_phases"]
            print(f"\n{kind} queue_every={every}: host {h}; makespan median us "
                  f"{np.median([m for _, m in res]) * 1e3:.2f}")
            if kind == "flag":  # short repetitions: one at a time unless every one queued
                assert max(_starts(res)) < 0.03 and max(m for _, m in res) < us / 1e3 + 0.08  # the stall in none
                assert h["queued"] == (59 if every else 0) and h["measured_again"] == 0
            med[kind, every] = np.array([ps[i][0][1] for ps, _ in res for i in range(2)])
    # The gates agree: the ratio of each flag gate's median duration to the timed gate's is not, at 99%,
    # outside 1 +- 2% (a bare median within 2% failed once in a GPU suite and passed alone).
    ref = med["timed", False]
    for key, got in med.items():
        low, high = _ratio_interval(got, ref)
        print(f"{key}: median {np.median(got) * 1e3:.2f} us, ratio to timed [{low:.4f}, {high:.4f}]")
        assert low <= 1.02 and high >= 0.98, (key, low, high)


def _ratio_interval(a, b, level=0.99, draws=4000):
    """Bootstrap interval of median(a) / median(b), with a fixed seed."""
    rng = np.random.default_rng(7)
    ra = np.median(rng.choice(a, (draws, len(a))), axis=1)
    rb = np.median(rng.choice(b, (draws, len(b))), axis=1)
    return tuple(np.quantile(ra / rb, [(1 - level) / 2, (1 + level) / 2]))
