"""A campaign worker's CPUs: chosen from its card's sysfs entry, its share of them, left alone (and why) when
the entry is missing, GCEXPLORE_WORKER_CPUS=off, every thread of the process moved."""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gcexplore.campaigns import worker_cpus as wc

ROOT = Path(__file__).resolve().parents[1]


def _sysfs(tmp_path, address="0000:1b:00.0", cpulist="0-15,32-47\n", node="0\n"):
    d = tmp_path / address
    d.mkdir(parents=True)
    if cpulist is not None:
        (d / "local_cpulist").write_text(cpulist)
    if node is not None:
        (d / "numa_node").write_text(node)
    return str(tmp_path)


def test_cpu_lists_parse_and_print_back():
    assert wc.parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert wc._format([0, 1, 2, 3, 8, 10, 11]) == "0-3,8,10-11"
    for bad in ("", "3-1", "a-b"):
        with pytest.raises(ValueError):
            wc.parse_cpulist(bad)


def test_the_cards_local_cpus_are_read_from_sysfs_by_its_pci_address(tmp_path):
    root = _sysfs(tmp_path)
    # the driver writes the address upper-case, NVML with an 8-digit domain: both name the same sysfs entry
    for bus in ("0000:1B:00.0", "00000000:1B:00.0"):
        cpus, info = wc.read_local_cpus(bus, root)
        assert cpus == [*range(16), *range(32, 48)] and info["numa_node"] == 0 and info["pci"] == "0000:1b:00.0"
    cpus, info = wc.read_local_cpus("0000:3B:00.0", root)  # no such device
    assert cpus is None and "0000:3b:00.0" in info["why"]
    empty = _sysfs(tmp_path / "e", cpulist="\n", node="-1\n")
    cpus, info = wc.read_local_cpus("0000:1b:00.0", empty)
    assert cpus is None and info["numa_node"] == -1 and "no CPU" in info["why"]


def test_each_worker_gets_its_own_run_of_its_cards_local_cpus():
    local, allowed = [*range(16), *range(32, 48)], range(64)
    runs = [wc.choose("share", local, allowed, (k, 4))[0] for k in range(4)]
    assert runs == [list(range(8)), list(range(8, 16)), list(range(32, 40)), list(range(40, 48))]
    assert wc.choose("local", local, allowed, (1, 4))[0] == local  # dask-cuda's: the whole local set
    # a card local to every CPU this process may use (no locality known): nothing to narrow, left alone
    cpus, why = wc.choose("local", list(range(64)), allowed, (1, 4))
    assert cpus is None and "every CPU this process may use (64)" in why
    assert wc.choose("share", list(range(64)), allowed, (1, 4))[0] == list(range(16, 32))  # share still splits
    # only what this process may use; more workers than CPUs: one each, round the list
    assert wc.choose("share", local, range(4), (1, 2))[0] == [2, 3]
    assert wc.choose("share", [0, 1], allowed, (3, 4))[0] == [1]
    # left alone, with the reason
    for mode, loc, allow, why in (("off", local, allowed, "=off"), ("share", None, allowed, "unknown"),
                                  ("share", [70, 71], allowed, "none of the card's local CPUs 70-71")):
        cpus, text = wc.choose(mode, loc, allow, (0, 4))
        assert cpus is None and why in text


def test_the_mode_comes_from_the_environment_and_a_bad_one_is_refused(monkeypatch):
    monkeypatch.delenv(wc.ENV, raising=False)
    assert wc.cpu_mode() == "local"
    monkeypatch.setenv(wc.ENV, "off")
    assert wc.cpu_mode() == "off"
    monkeypatch.setenv(wc.ENV, "numa")
    with pytest.raises(ValueError, match="'local', 'share', 'off'.*'numa'"):
        wc.cpu_mode()
    pytest.importorskip("distributed")
    from gcexplore.campaigns.cluster import local_cluster

    with pytest.raises(ValueError, match="GCEXPLORE_WORKER_CPUS"):  # the client refuses before any worker starts
        local_cluster(["0"], warm=[])


def test_pinning_moves_every_thread_and_caps_torch(tmp_path, monkeypatch):
    """pin_worker with a fake sysfs and a fake affinity API: every thread of the process (one started before the
    call too) gets the worker's run; PyTorch's intra-op threads capped at its size; off: nothing moved."""
    import types

    root = _sysfs(tmp_path)
    calls = []
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    monkeypatch.setattr(os, "sched_setaffinity", lambda tid, cpus: calls.append((tid, sorted(cpus))))
    torch = types.SimpleNamespace(n=64)
    torch.get_num_threads = lambda: torch.n
    torch.set_num_threads = lambda n: setattr(torch, "n", n)
    monkeypatch.setitem(sys.modules, "torch", torch)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        monkeypatch.setenv(wc.ENV, "share")
        monkeypatch.setenv(wc.SLOT_ENV, "1/4")
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
        out = wc.pin_worker("0000:1B:00.0", root)
        assert out["applied"] and out["cpus"] == "8-15" and out["numa_node"] == 0 and out["local"] == "0-15,32-47"
        tids = {t for t, _ in calls}
        assert other.native_id in tids and threading.get_native_id() in tids and out["threads"] == len(tids)
        assert {tuple(c) for _, c in calls} == {tuple(range(8, 16))}
        assert out["torch_threads"] == [64, 8] and "card 2: 8-15 (share: pinned, NUMA node 0, torch threads 64->8)" \
            == wc.describe(out)
        calls.clear()
        monkeypatch.setenv(wc.ENV, "off")
        out = wc.pin_worker("0000:1B:00.0", root)
        assert not out["applied"] and not calls and out["cpus"] == "0-63" and "off" in wc.describe(out)
        monkeypatch.setenv(wc.ENV, "share")
        out = wc.pin_worker("0000:3B:00.0", root)  # no sysfs entry for the card: left alone, and why
        assert not out["applied"] and not calls and "no local CPU list for 0000:3b:00.0" in out["why"]
        out = wc.pin_worker(None, root)
        assert not out["applied"] and not calls and "PCI address is unknown" in out["why"]
    finally:
        stop.set()
        other.join()


def test_pinning_for_real_moves_a_thread_started_before(tmp_path):
    """In a process of its own (this one stays as it is): the real affinity calls move a thread started before
    the pin, and a thread started after inherits the set."""
    allowed = sorted(os.sched_getaffinity(0))
    root = _sysfs(tmp_path, cpulist=wc._format(allowed) + "\n")
    code = f"""
import json, os, sys, threading
from gcexplore.campaigns import worker_cpus as wc
stop = threading.Event()
seen = {{}}
def before():
    stop.wait()
    seen["before"] = sorted(os.sched_getaffinity(0))
t = threading.Thread(target=before); t.start()
out = wc.pin_worker("0000:1b:00.0", {root!r})
after = threading.Thread(target=lambda: seen.update(after=sorted(os.sched_getaffinity(0)))); after.start(); after.join()
stop.set(); t.join()
print(json.dumps({{"out": out, **seen}}))
"""
    env = {**os.environ, wc.ENV: "share", wc.SLOT_ENV: f"{len(allowed) - 1}/{len(allowed)}",
           "PYTHONPATH": str(ROOT)}
    res = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                    check=True).stdout)
    assert res["out"]["applied"] and res["before"] == res["after"] == [allowed[-1]]
    assert res["out"]["cpus"] == str(allowed[-1])
