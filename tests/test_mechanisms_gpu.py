"""The mechanisms experiment on a real GPU, on a small pair at one split: every mechanism measured,
green contexts on disjoint partitions of the granted sizes, the MPS clients limited to fewer SMs for
the smaller share, every time on one clock, and gcexplore's MPS daemon gone afterwards. Skipped with
the reason where MPS cannot run here."""

from __future__ import annotations

from pathlib import Path

import pytest

import gcexplore
from gcexplore.mechanisms import MECHANISMS, mps_refusal

pytestmark = pytest.mark.gpu

PAIR = {"latency": "latency", "memory": "memory:n=16777216"}


def _our_mps_processes() -> list[str]:
    out = []
    for p in Path("/proc").glob("[0-9]*"):
        try:
            if (p / "comm").read_text().startswith("nvidia-cuda-mps") and b"gcexplore-mps-" in (p / "environ").read_bytes():
                out.append(p.name)
        except OSError:
            continue
    return out


@pytest.fixture(scope="module")
def run():
    why = mps_refusal()
    if why:
        pytest.skip(why)
    return gcexplore.compare_mechanisms(PAIR, splits=(24,), repeats=6, warmup=2)


def test_every_mechanism_is_measured_on_one_clock(run):
    t = gcexplore.mechanisms_table(run)
    print(t.to_string())
    assert list(t["mechanism"]) == list(MECHANISMS)
    assert (t["reps"] == 6).all()
    assert (t["makespan_ms"] > 0).all() and (t["critical_p99_ms"] > 0).all()
    assert set(run.loc[run["mechanism"] == "mps", "clock"]) == {"globaltimer"}
    assert set(run.loc[run["mechanism"] != "mps", "clock"]) == {"events"}
    mps = run[run["mechanism"] == "mps"]
    assert (mps["timer_span_ms"] > 0).all()
    # a workload's span on the GPU's clock lies inside its makespan
    assert (mps["start_ms"] + mps["timer_span_ms"] <= mps["makespan_ms"] + 1e-6).all()
    assert run["run_id"].nunique() == 1


def test_where_each_mechanism_put_the_work(run):
    ids = run.attrs["sm_ids"]
    layout = run["layout"].iloc[0]
    green = [set(ids[f"green|{layout}|{n}"]) for n in PAIR]
    assert [len(g) for g in green] == [int(s) for s in layout.split("+")]
    assert not green[0] & green[1]
    mps = [ids[f"mps|{layout}|{n}"] for n in PAIR]
    print("MPS clients saw", [len(m) for m in mps], "SMs")
    assert 0 < len(mps[0]) < len(mps[1]) <= run["device_sm_count"].iloc[0]
    t = gcexplore.mechanisms_table(run).set_index("mechanism")
    assert (t.loc["mps", "critical_sms"], t.loc["mps", "other_sms"]) == (len(mps[0]), len(mps[1]))


def test_the_daemon_is_gone_afterwards(run):
    assert _our_mps_processes() == []
    assert mps_refusal() is None  # nothing of ours left that would refuse the next run
