"""Which CPUs a local campaign cluster's worker runs on: those near its GPU.

A worker drives its card from the host between every two repetitions (launches, events,
one sync); where the host's placement slows those calls the worker's tasks take longer
with the GPU time unchanged. ``GCEXPLORE_WORKER_CPUS`` picks what a worker does, once its
driver knows the card's PCI address (before its context):

- ``local`` (default, dask-cuda's choice): every CPU local to its card (sysfs
  ``local_cpulist`` of the card's PCI device, what dask-cuda reads through NVML); where that
  is every CPU the process may use (a host or VM that reports no locality) nothing changes;
- ``share``: those CPUs cut into as many equal runs as the cluster has workers; worker ``k``
  of ``n`` takes run ``k`` (cores of its own);
- ``off``: left as inherited.

On a 4x H100 VM that reports no locality (numa_node -1, every card local to CPUs 0-63;
batch h1) neither placement changed the host time of a repetition measurably (1, 2 and 4
processes, unpinned against their own 16 CPUs each): the default stays dask-cuda's.

Every thread of the process is moved (threads started later inherit it), and PyTorch's
intra-op threads are capped at the set's size. Where the card's CPUs cannot be read
(no sysfs entry, an empty or unparsable list, none of them allowed to this process), the
affinity is left alone and the reason recorded. What was chosen and why goes into the
worker's preload report (``cpus``).
"""

from __future__ import annotations

import os
import sys

ENV = "GCEXPLORE_WORKER_CPUS"
SLOT_ENV = "GCEXPLORE_WORKER_SLOT"  # "k/n": this worker's place among its cluster's n workers (set by local_cluster)
MODES = ("local", "share", "off")
SYSFS = "/sys/bus/pci/devices"

__all__ = ["ENV", "MODES", "choose", "cpu_mode", "describe", "parse_cpulist", "pin_to_card", "pin_worker",
           "read_local_cpus"]


def cpu_mode() -> str:
    """``GCEXPLORE_WORKER_CPUS``, checked: one of :data:`MODES` (default ``local``)."""
    mode = os.environ.get(ENV, "local")
    if mode not in MODES:
        raise ValueError(f"{ENV} is one of {', '.join(map(repr, MODES))}, got {mode!r}")
    return mode


def parse_cpulist(text: str) -> list[int]:
    """A kernel CPU list (``"0-3,8,10-11"``) -> sorted CPU numbers; ValueError for anything else."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        a, b = int(lo), int(hi) if hi else int(lo)
        if b < a:
            raise ValueError(f"a CPU range runs backwards: {part!r}")
        cpus.update(range(a, b + 1))
    if not cpus:
        raise ValueError(f"no CPU in {text!r}")
    return sorted(cpus)


def _format(cpus) -> str:
    """Sorted CPUs as a kernel CPU list (``0-3,8``)."""
    out, run = [], []
    for c in sorted(cpus):
        if run and c != run[-1] + 1:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
            run = []
        run.append(c)
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def _sysfs_address(bus_id: str) -> str:
    """A PCI address as CUDA (``0000:1B:00.0``) or NVML (``00000000:1B:00.0``) writes it -> sysfs's name."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    return f"{int(domain, 16):04x}:{rest}"


def read_local_cpus(bus_id: str, root: str = SYSFS) -> tuple[list[int] | None, dict]:
    """The CPUs sysfs lists as local to the PCI device ``bus_id``, and what was read (``numa_node``, or
    ``why`` there is no list)."""
    where = os.path.join(root, _sysfs_address(bus_id))
    info: dict = {"pci": _sysfs_address(bus_id)}
    try:
        with open(os.path.join(where, "numa_node")) as f:
            info["numa_node"] = int(f.read().strip())
    except (OSError, ValueError):
        info["numa_node"] = None
    try:
        with open(os.path.join(where, "local_cpulist")) as f:
            return parse_cpulist(f.read()), info
    except (OSError, ValueError) as e:
        return None, {**info, "why": f"no local CPU list for {info['pci']} in {root} ({type(e).__name__}: {e})"}


def choose(mode: str, local: list[int] | None, allowed, slot: tuple[int, int] | None) -> tuple[list[int] | None, str]:
    """The CPU set of a worker (None: leave it alone) and why. ``local``: its card's CPUs (None: unknown);
    ``allowed``: what this process may use; ``slot`` ``(k, n)``: its place among its cluster's workers."""
    if mode == "off":
        return None, f"{ENV}=off: left as inherited"
    if local is None:
        return None, "the card's local CPUs are unknown: left as inherited"
    base = sorted(set(local) & set(allowed))
    if not base:
        return None, f"none of the card's local CPUs {_format(local)} is allowed to this process: left as inherited"
    if mode == "local" or slot is None or slot[1] <= 1:
        if base == sorted(set(allowed)):  # no locality known: nothing to narrow
            return None, f"the card's local CPUs are every CPU this process may use ({len(base)}): left as inherited"
        return base, f"the card's local CPUs ({len(base)})"
    k, n = slot
    if n > len(base):  # more workers than CPUs: one each, shared round the list
        return [base[k % len(base)]], f"CPU {k % len(base)} of the card's {len(base)} local CPUs ({n} workers)"
    lo, hi = k * len(base) // n, (k + 1) * len(base) // n
    return base[lo:hi], f"run {k + 1} of {n} of the card's {len(base)} local CPUs"


def _slot() -> tuple[int, int] | None:
    text = os.environ.get(SLOT_ENV, "")
    try:
        k, n = (int(v) for v in text.split("/"))
    except ValueError:
        return None
    return (k, n) if 0 <= k < n else None


def _set_all_threads(cpus) -> int:
    """Move every thread of this process to ``cpus`` (the process's own call moves only the calling thread)."""
    moved = 0
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:  # not Linux: this thread only
        tids = [0]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cpus)
            moved += 1
        except OSError:  # a thread that ended meanwhile
            pass
    return moved


def pin_worker(bus_id: str | None, root: str = SYSFS) -> dict:
    """In a campaign worker: place it by ``GCEXPLORE_WORKER_CPUS`` near its card ``bus_id`` (PCI address;
    None: unknown). Returns what it did: ``mode``, ``card`` (CUDA_VISIBLE_DEVICES), ``cpus`` (the set, as a
    CPU list: applied, or the inherited one when left alone), ``applied``, ``why``, ``numa_node``, ``threads``
    moved, ``torch_threads`` before and after."""
    try:
        mode = cpu_mode()
    except ValueError as e:  # checked by the client already; a worker started otherwise records it
        return {"mode": os.environ.get(ENV), "applied": False, "why": str(e)}
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity API here (not Linux)
        return {"mode": mode, "applied": False, "why": "this platform has no CPU affinity"}
    local, info = read_local_cpus(bus_id, root) if bus_id else (None, {"why": "the card's PCI address is unknown"})
    cpus, why = choose(mode, local, allowed, _slot())
    if local is None and mode != "off":
        why += f" ({info.get('why')})"
    out = {"mode": mode, "applied": cpus is not None, "why": why, "numa_node": info.get("numa_node"),
           "card": os.environ.get("CUDA_VISIBLE_DEVICES"),
           "pci": info.get("pci"), "local": _format(local) if local else None,
           "cpus": _format(cpus if cpus is not None else allowed)}
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch_threads"] = [torch.get_num_threads()]
    if cpus is not None:
        out["threads"] = _set_all_threads(cpus)
        if torch is not None and torch.get_num_threads() > len(cpus):
            torch.set_num_threads(len(cpus))  # one intra-op thread per CPU of the set, not per CPU of the host
            out["torch_threads"].append(torch.get_num_threads())
    return out


def pin_to_card() -> dict:
    """:func:`pin_worker` for this process's device 0 (a campaign worker's one card), its PCI address from the
    driver (initialised already); never raises: a failure is recorded as the reason nothing was pinned."""
    try:
        from ..device.driver import device_info

        bus = device_info(0).pci_bus_id or None  # the driver's (no context; cached for the tasks); None: unknown
    except Exception as e:  # no driver here (the CPU stand-in): nothing to place by
        out = pin_worker(None)
        return {**out, "why": out.get("why", "") + f" ({type(e).__name__}: {e})"}
    try:
        return pin_worker(bus)
    except Exception as e:  # recorded: the worker runs unpinned
        return {"mode": os.environ.get(ENV), "applied": False, "why": f"{type(e).__name__}: {e}"}


def describe(report: dict | None) -> str:
    """One worker's placement in words (for a bench's table)."""
    if not report:
        return "not recorded"
    pinned = "pinned" if report.get("applied") else "not pinned"
    text = f"card {report.get('card')}: {report.get('cpus')} ({report.get('mode')}: {pinned}"
    if report.get("numa_node") is not None:
        text += f", NUMA node {report['numa_node']}"
    if report.get("torch_threads"):
        text += ", torch threads " + "->".join(map(str, report["torch_threads"]))
    return text + ")" + ("" if report.get("applied") else f": {report.get('why')}")
