"""The launcher of the communication-SMs experiment: one process per GPU of this host, started by one
call (:func:`comm_sweep`, or ``gcexplore comm``), joined by NCCL's own bootstrap.

Why processes and not one process driving every GPU (``Communicator.init_all``): every rank owns its
device's green contexts and its own host thread, as in a training job (one process per GPU); in one
thread, device 3's step could only be enqueued after devices 0-2's, and that host time would land in
the collective's time on the others. Why not the Dask cluster: a collective needs all its ranks
running at once, which a task scheduler does not promise.

Rank 0 makes the NCCL unique id (``ncclGetUniqueId``: NCCL's bootstrap root runs in rank 0); the
launcher hands its bytes to the other ranks over their pipes. Unless ``NCCL_SOCKET_IFNAME`` is set,
NCCL's bootstrap listens on the loopback interface only (all ranks are on this host; the data moves
over NVLink or PCIe, not sockets).
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import cast

__all__ = ["CommLaunchError", "check_launch", "comm_sweep"]


class CommLaunchError(RuntimeError):
    """A rank failed or the run timed out; ``rows`` holds what the ranks had measured."""

    def __init__(self, message: str, rows=None, details: str = ""):
        super().__init__(message)
        self.rows, self.details = rows, details  # details: the ranks' tracebacks


def check_launch(gpus, device_count: int, nccl_error: str | None) -> int:
    """The number of ranks, or ValueError / UnsupportedError in one sentence (pure)."""
    from .._checks import as_int
    from ..device.driver import UnsupportedError

    if nccl_error:
        raise UnsupportedError(nccl_error)
    if device_count < 2:
        raise UnsupportedError(f"a collective needs at least 2 GPUs on this host; the driver sees {device_count}")
    n = device_count if gpus is None else as_int("gpus", gpus, minimum=2)
    if n > device_count:
        raise ValueError(f"gpus={n} but the driver sees {device_count} GPUs on this host (use 2..{device_count})")
    return n


def _child(rank: int, nranks: int, conn, spec) -> None:
    """A rank's process: make or receive the unique id, measure, send everything back."""
    import traceback

    def send(msg):
        conn.send(msg)

    try:
        if spec.trace or spec.pm:  # the newest CUPTI first, before PyTorch can load its own (as the tests do)
            with contextlib.suppress(Exception):
                from ..trace.collector import preload_cupti

                preload_cupti()
        from .collectives import nccl_module

        nccl = nccl_module()
        if rank == 0:
            send(("uid", bytes(nccl.get_unique_id())))
        tag, uid = conn.recv()
        from .rank import run_rank

        meta = run_rank(rank, nranks, uid, spec, send)
        send(("done", meta))
    except BaseException as e:  # the parent reports it and keeps the rows already sent
        with contextlib.suppress(Exception):
            send(("error", f"rank {rank}: {type(e).__name__}: {e}", traceback.format_exc(limit=6)))
    finally:
        conn.close()


@contextlib.contextmanager
def _loopback_bootstrap():
    """``NCCL_SOCKET_IFNAME=lo`` for the children started inside (unless the user set one); this
    process's environment comes back as it was."""
    had = os.environ.get("NCCL_SOCKET_IFNAME")
    if had is None:
        os.environ["NCCL_SOCKET_IFNAME"] = "lo"
    try:
        yield
    finally:
        if had is None:
            os.environ.pop("NCCL_SOCKET_IFNAME", None)


def _nccl_problem() -> str | None:
    from ..device.driver import UnsupportedError
    from .collectives import nccl_module

    try:
        nccl_module()
    except UnsupportedError as e:
        return str(e)
    return None


def comm_sweep(spec=None, *, gpus: int | None = None, timeout_s: float = 900.0, traces: list | None = None,
               progress=True):
    """Measure communication SMs on ``gpus`` GPUs of this host: one process per GPU.

    Parameters
    ----------
    spec : CommSpec, optional
        What to measure (default: ``CommSpec()``).
    gpus : int, optional
        Ranks (GPUs 0..gpus-1); default: every GPU the driver sees (at least 2).
    timeout_s : float, default 900
        The whole run's limit; past it the ranks are stopped and :class:`CommLaunchError` carries
        the rows measured so far.
    traces : list, optional
        Receives each rank's CUPTI kernel trace (DataFrames with a ``rank`` column) when
        ``spec.trace``.
    progress : bool or callable, default True
        True: a progress bar (tqdm.auto, on stderr) counting the layouts the ranks have sent, as
        :func:`~gcexplore.sweep` has; a callable: called with one line per layout sent instead; False: neither.

    Returns
    -------
    pandas.DataFrame
        Kind ``"comm"`` (columns in :data:`gcexplore.schema.COLUMNS`); ``attrs`` hold the spec,
        NCCL's version, each rank's device, the zero-SM status and the kernel attribution.
    """
    import multiprocessing as mp

    from ..device.driver import UnsupportedError, device_count
    from ..experiments.runner import closing_bar, progress_lines
    from .collectives import nccl_versions, zero_sm_offered
    from .rank import CommSpec

    spec = spec or CommSpec()
    n = check_launch(gpus, device_count(), _nccl_problem())
    from ..device.driver import device_info

    info = device_info(0)
    spec.check(info, n)
    if spec.zero_sm:
        offered, why = zero_sm_offered(_quiet(lambda: nccl_versions()["nccl"]))
        if not offered:
            raise UnsupportedError(why)
    layouts = 1 + len(spec.ctas) + len(spec.comm_sms) + bool(spec.zero_sm)  # each rank sends its rows per layout
    say, bar = progress_lines(progress, n * layouts, "comm", unit="layout")  # a bad progress: refused before ranks
    ctx = mp.get_context("spawn")
    pipes, procs = [], []
    with _loopback_bootstrap():
        for rank in range(n):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_child, args=(rank, n, child, spec), name=f"gcexplore-comm-rank{rank}",
                            daemon=True)
            p.start()
            child.close()
            pipes.append(parent)
            procs.append(p)
    ok, got, stopped = False, ([], {}, [], [], []), None
    try:
        with closing_bar(bar):
            _collect(pipes, procs, float(timeout_s), into=got, say=say)
        ok = not got[2]
    except KeyboardInterrupt as e:  # Ctrl-C: the ranks are stopped below, the rows they sent are kept
        stopped = e
    finally:
        for p in procs:
            p.join(timeout=30 if ok else 1)  # a finished rank tears NCCL and CUDA down first
            if p.is_alive():
                p.terminate()  # our own child, by its handle
                p.join(timeout=5)
        for c in pipes:
            c.close()
    rows, metas, errors, details, trace_frames = got
    if traces is not None:
        traces.extend(trace_frames)
    versions = next(iter(metas.values()), {}) if metas else {}
    nccl_v = versions.get("nccl") or _quiet(lambda: nccl_versions()["nccl"])
    extra = {"nranks": n, "spec": spec.metadata(), "nccl_version": nccl_v,
             "nccl4py_version": versions.get("nccl4py", ""),
             "zero_sm": _zero_text(nccl_v, spec.zero_sm),
             "pm": [row for r in sorted(metas) for row in metas[r].pop("pm", [])],
             "ranks": [metas[r] for r in sorted(metas)],
             "alltoall_recipe": versions.get("alltoall_recipe", ""), "binding": "nccl4py (one process per GPU)"}
    df = _frame(rows, info, extra, _cards(n, metas))
    if stopped is not None:
        from ..experiments.runner import MeasurementInterrupted

        df.attrs["partial"] = True
        raise MeasurementInterrupted(f"the comm sweep was interrupted; the {len(df)} rows the ranks had sent are "
                                     "in exc.partial", df) from stopped
    if errors:
        raise CommLaunchError("; ".join(errors[:3]), df, "\n".join(details))
    return df


def _collect(pipes, procs, timeout_s: float, into=None, say=None):
    """Read the ranks' messages until every pipe has closed, a rank failed, or the time is up:
    ``(rows, metas, errors, details, trace frames)``, gathered in ``into`` (those five, which keep
    what arrived when Ctrl-C stops the reading). The unique id from rank 0 goes to every rank;
    ``say`` gets a line per rows message (a layout of one rank)."""
    from multiprocessing.connection import Connection, wait

    rows, metas, errors, details, trace_frames = into if into is not None else ([], {}, [], [], [])
    deadline = time.monotonic() + timeout_s
    open_ = {id(c): r for r, c in enumerate(pipes)}
    while open_ and not errors:  # after a failure the other ranks would wait in their next collective
        left = deadline - time.monotonic()
        if left <= 0:
            errors.append(f"timed out after {timeout_s:g} s with ranks {sorted(open_.values())} still running")
            break
        for c in wait([p for p in pipes if id(p) in open_], timeout=min(left, 5.0)):
            c = cast(Connection, c)  # wait() hands back the pipes it was given
            rank = open_[id(c)]
            try:
                msg = c.recv()
            except EOFError:
                del open_[id(c)]
                if rank not in metas:
                    errors.append(f"rank {rank} ended without a result (exit code {procs[rank].exitcode})")
                continue
            if msg[0] == "uid":
                for each in pipes:
                    each.send(("uid", msg[1]))
            elif msg[0] == "rows":
                rows.extend(msg[1])
                if say is not None:
                    say(f"rank {rank}: {len(msg[1])} rows")
            elif msg[0] == "trace":
                trace_frames.append(msg[1])
            elif msg[0] == "done":
                metas[rank] = msg[1]
            elif msg[0] == "error":
                errors.append(msg[1])
                details.append(msg[2])
    return rows, metas, errors, details, trace_frames


def _zero_text(nccl_version: str, asked: bool) -> str:
    from .collectives import zero_sm_offered

    offered, text = zero_sm_offered(nccl_version)
    if offered:
        text += ("; measured (setup 'zero')" if asked else "; not measured in this run (CommSpec(zero_sm=True))")
    return text


def _quiet(fn):
    try:
        return fn()
    except Exception:
        return ""


def _cards(n: int, metas: dict) -> dict[int, dict]:
    """Each rank's card, as its rows carry it: the device facts of GPU r, and the identity the rank
    process reported (its host, PyTorch) once it finished."""
    from ..device.driver import device_info

    return {r: {**device_info(r).metadata(), **metas.get(r, {})} for r in range(n)}


def _frame(rows, info, extra, cards):
    """The comm result through the one run constructor, each row with its own rank's card."""
    from ..schema import identity_of, new_run_id
    from ..experiments.experiment import result_frame

    run = {"options", "run_id"}  # the run's, not a card's
    ident = {r: {k: v for k, v in identity_of(c).items() if k not in run} for r, c in cards.items()}
    rows = [{**ident.get(int(row.get("rank", 0)), {}), **row} for row in rows]
    return result_frame(rows, "comm", info, run_id=extra.get("run_id") or new_run_id(), extra=extra)
