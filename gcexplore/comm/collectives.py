"""NCCL collectives as workloads: all-reduce, all-gather, reduce-scatter and all-to-all launched on the
stream they are given (a partition's stream confines their kernels to its SMs), through NVIDIA's
nccl4py over cuda.core streams.

A collective's ``size_bytes`` is the buffer nccl-tests reports: all-reduce and all-to-all send and
receive that many bytes per rank, all-gather receives it (each rank sends ``size / nranks``),
reduce-scatter sends it (each rank receives ``size / nranks``). Bus bandwidth is derived from it in
:mod:`gcexplore.comm.analysis`.
"""

from __future__ import annotations

from ..device.driver import UnsupportedError
from ..workloads.workload import Workload

__all__ = ["COLLECTIVES", "ZERO_SM_COLLECTIVES", "ZERO_SM_NCCL", "alltoall_recipe", "buffer_elements", "collective",
           "nccl_barrier", "nccl_module", "nccl_versions", "zero_sm_offered"]

#: The collectives a communication workload can be, in the order results list them.
COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall")
#: The first NCCL release whose collectives can run without SMs: 2.28.3 added copy-engine all-gather and
#: all-to-all within one node (communicator ``CTAPolicy.ZERO``, both buffers in symmetric windows);
#: 2.30.7 added the hierarchical, several-node ones.
ZERO_SM_NCCL = (2, 28, 3)
#: The collectives of this module that NCCL can run on copy engines.
ZERO_SM_COLLECTIVES = ("allgather", "alltoall")
_ELEMENT = 4  # float32
_PIP = 'pip install nccl4py "cuda-pathfinder>=1.5.4"'


def nccl_module():
    """``nccl.core`` (nccl4py), or UnsupportedError in one sentence saying what to install."""
    try:
        import nccl.core as nccl
    except Exception as e:  # ImportError, or the library's own loader failing
        raise UnsupportedError(f"NCCL collectives need NVIDIA's nccl4py and a libnccl ({_PIP}); "
                               f"importing it failed: {type(e).__name__}: {e}") from None
    return nccl


def nccl_versions() -> dict:
    """``{"nccl4py": "0.6.0", "nccl": "2.28.9"}`` (``"nccl"`` empty when no libnccl loads)."""
    nccl = nccl_module()
    v = nccl.get_version()
    return {"nccl4py": str(v.nccl4py), "nccl": "" if v.libnccl is None else str(v.libnccl.version)}


def zero_sm_offered(nccl_version: str) -> tuple[bool, str]:
    """Whether this NCCL release runs collectives on no SMs, and the sentence that says so (pure)."""
    try:
        have = tuple(int(p) for p in str(nccl_version).split(".")[:3])
    except ValueError:
        return False, f"NCCL version {nccl_version!r} unreadable; zero-SM collectives not tried"
    need = ".".join(map(str, ZERO_SM_NCCL))
    if have >= ZERO_SM_NCCL:
        return True, (f"NCCL {nccl_version} offers zero-SM all-gather and all-to-all within one node (copy engines: "
                      f"CTA policy ZERO, buffers in symmetric windows; NCCL {need}+)")
    return False, (f"NCCL {nccl_version} has no zero-SM collectives (copy-engine all-gather and all-to-all need "
                   f"NCCL {need}+, CTA policy ZERO and symmetric windows); none were measured")


def buffer_elements(kind: str, size_bytes: int, nranks: int) -> tuple[int, int]:
    """(send, receive) float32 elements per rank of ``kind`` at ``size_bytes`` (pure)."""
    if kind not in COLLECTIVES:
        raise ValueError(f"unknown collective {kind!r}; collectives are {', '.join(COLLECTIVES)}")
    quantum = _ELEMENT * nranks
    if size_bytes <= 0 or size_bytes % quantum:
        raise ValueError(f"a {kind} over {nranks} ranks needs a size that is a positive multiple of "
                         f"{quantum} bytes (float32 elements split evenly), got {size_bytes}")
    n = size_bytes // _ELEMENT
    return {"allreduce": (n, n), "alltoall": (n, n), "allgather": (n // nranks, n),
            "reducescatter": (n, n // nranks)}[kind]


def _tensors(send: int, recv: int, device: int):
    import torch

    dev = torch.device("cuda", device)
    return torch.ones(send, dtype=torch.float32, device=dev), torch.zeros(recv, dtype=torch.float32, device=dev)


def _window_tensors(comm, send: int, recv: int, device: int):
    """Send and receive buffers from NCCL's allocator, each registered in a symmetric window of ``comm``
    (collective: every rank in the same order); the window handles live as long as the workload."""
    import torch
    from nccl.core.interop.torch import empty

    nccl = nccl_module()
    bufs = [empty(n, dtype=torch.float32, device=device) for n in (send, recv)]
    bufs[0].fill_(1.0)
    bufs[1].zero_()
    handles = [comm.register_window(b, flags=nccl.WindowFlag.COLL_SYMMETRIC) for b in bufs]
    return bufs[0], bufs[1], handles


def _alltoall_p2p(nccl, comm, send, recv, nranks: int, stream) -> None:
    """All-to-all as grouped send/receive (NCCL's own recipe where ``ncclAlltoAll`` is missing)."""
    per = send.numel() // nranks
    with nccl.group():
        for peer in range(nranks):
            comm.send(send[peer * per:(peer + 1) * per], peer, stream=stream)
            comm.recv(recv[peer * per:(peer + 1) * per], peer, stream=stream)


def collective(comm, kind: str, size_bytes: int, *, device: int, name: str | None = None,
               symmetric: bool = False) -> Workload:
    """A workload running one NCCL ``kind`` of ``size_bytes`` over ``comm`` on the stream it is given.

    Parameters
    ----------
    comm : nccl.core.Communicator
        This rank's communicator (every rank runs the same workloads in the same order).
    kind : {"allreduce", "allgather", "reducescatter", "alltoall"}
    size_bytes : int
        The nccl-tests size (see the module text); float32 elements.
    device : int
        The CUDA device of this rank (its buffers are allocated there, through PyTorch).
    symmetric : bool
        Buffers from NCCL's allocator registered in symmetric windows of ``comm`` (what copy-engine
        collectives need, with a communicator of ``CTAPolicy.ZERO``); default: PyTorch's buffers.
    """
    nccl = nccl_module()
    nranks = int(comm.nranks)
    send_n, recv_n = buffer_elements(kind, int(size_bytes), nranks)
    if symmetric:
        send, recv, handles = _window_tensors(comm, send_n, recv_n, device)
    else:
        (send, recv), handles = _tensors(send_n, recv_n, device), []
    state = {"p2p": False, "windows": handles}

    def run(*, stream):
        if kind == "allreduce":
            comm.allreduce(send, recv, nccl.SUM, stream=stream)
        elif kind == "allgather":
            comm.allgather(send, recv, stream=stream)
        elif kind == "reducescatter":
            comm.reduce_scatter(send, recv, nccl.SUM, stream=stream)
        elif state["p2p"]:
            _alltoall_p2p(nccl, comm, send, recv, nranks, stream)
        else:
            try:
                comm.alltoall(send, recv, stream=stream)
            except Exception:  # a libnccl older than ncclAlltoAll: the grouped send/receive recipe
                state["p2p"] = True
                _alltoall_p2p(nccl, comm, send, recv, nranks, stream)

    run.state = state  # read by alltoall_recipe
    return Workload(name or kind, run, None, float(size_bytes), None, device=int(device))


def alltoall_recipe(workload: Workload) -> str:
    """``"ncclAlltoAll"`` or ``"grouped send/recv"``: what an all-to-all workload ran (after a call)."""
    state = getattr(workload.fn, "state", {})
    return "grouped send/recv" if state.get("p2p") else "ncclAlltoAll"


def nccl_barrier(comm, *, device: int):
    """``fn(stream=)``: a 4-byte all-reduce, so every rank's following work starts within microseconds."""
    nccl = nccl_module()
    send, recv = _tensors(1, 1, device)

    def run(*, stream):
        comm.allreduce(send, recv, nccl.SUM, stream=stream)

    return run
