"""gcexplore's own MPS daemon for one run: :class:`MpsDaemon` (a context manager).

``nvidia-cuda-mps-control -d`` is started with private pipe and log folders
(``CUDA_MPS_PIPE_DIRECTORY``, ``CUDA_MPS_LOG_DIRECTORY`` in a fresh 0o700 temporary folder), so it
serves only the client processes given :meth:`MpsDaemon.client_env`; the card's compute mode and
settings are never changed. It is refused in one sentence (:class:`MpsUnavailable`) where MPS is
absent, where another daemon already serves the card, or where the user may not start one; and it
is always told to quit (``echo quit | nvidia-cuda-mps-control`` with the same folders), also when
the block raises or the user presses Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["CONTROL", "DEFAULT_PIPE", "MpsDaemon", "MpsUnavailable", "mps_refusal"]

CONTROL = "nvidia-cuda-mps-control"
#: Where a daemon started without private folders (the system's) keeps its control pipe.
DEFAULT_PIPE = "/tmp/nvidia-mps"
_START_S = 10.0  # how long the daemon may take to start, or to go after quit


class MpsUnavailable(RuntimeError):
    """MPS cannot be used for this run; the message says why in one sentence."""


def _mps_pids() -> dict[int, str]:
    """pid -> /proc comm of running MPS control or server processes."""
    out = {}
    for p in Path("/proc").glob("[0-9]*/comm"):
        with contextlib.suppress(OSError):
            name = p.read_text().strip()
            if name.startswith("nvidia-cuda-mps"):
                out[int(p.parent.name)] = name
    return out


def _mps_processes() -> list[str]:
    """``pid name`` of running MPS control or server processes (their /proc comm)."""
    return [f"{pid} {name}" for pid, name in sorted(_mps_pids().items())]


def _compute_mode() -> str | None:
    """The card's compute mode from ``nvidia-smi -q -d COMPUTE`` (None where nvidia-smi is absent)."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        text = subprocess.run(
            ["nvidia-smi", "-q", "-d", "COMPUTE"], capture_output=True, text=True, timeout=20, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in text.splitlines():
        if line.strip().startswith("Compute Mode"):
            return line.split(":", 1)[1].strip()
    return None


def mps_refusal(
    *,
    control: str = CONTROL,
    default_pipe: str = DEFAULT_PIPE,
    processes: Callable[[], list[str]] = _mps_processes,
    compute_mode: Callable[[], str | None] = _compute_mode,
) -> str | None:
    """Why gcexplore may not start its own MPS daemon here, in one sentence; None where it may.

    ``processes`` and ``compute_mode`` read the machine (tests pass their own).
    """
    if shutil.which(control) is None:
        return (
            f"MPS is absent: {control} is not on PATH (it ships with the NVIDIA driver's utilities); "
            "leave 'mps' out of mechanisms= to measure the others"
        )
    if Path(default_pipe, "control").exists():
        return (
            f"another MPS daemon serves the card (its control pipe is {default_pipe}/control); "
            "gcexplore starts its own only where none runs: stop that one or leave 'mps' out"
        )
    running = processes()
    if running:
        return (
            f"another MPS daemon serves the card (running: {', '.join(running)}); gcexplore starts its own "
            "only where none runs: stop that one or leave 'mps' out"
        )
    mode = compute_mode()
    if mode is not None and mode.replace("_", " ").lower() not in ("default",):
        return (
            f"the card's compute mode is {mode}, not Default: an administrator set it up for other sharing, "
            "and gcexplore never changes it; leave 'mps' out"
        )
    return None


class MpsDaemon:
    """An MPS control daemon of this run, in private folders; ``with MpsDaemon() as mps: ...``.

    Parameters
    ----------
    control : str, default "nvidia-cuda-mps-control"
        The control binary (looked up on PATH).
    check : bool, default True
        Refuse where :func:`mps_refusal` gives a reason (False: the caller checked).

    Raises
    ------
    MpsUnavailable
        From :meth:`start` (and ``__enter__``): MPS is absent, another daemon serves the card, the
        compute mode is not Default, or the daemon would not start (the user is not allowed).
    """

    def __init__(self, *, control: str = CONTROL, check: bool = True, **refusal_probes):
        self.control, self._check, self._probes = control, check, refusal_probes
        self.folder: Path | None = None
        self._before: set[int] = set()  # MPS processes that ran before this daemon (another's)
        self._started = False
        self.is_closed = False

    @property
    def env(self) -> dict[str, str]:
        """The variables that point a process at this daemon."""
        if self.folder is None:
            raise RuntimeError("the MPS daemon is not started: use `with MpsDaemon() as mps:`")
        return {
            "CUDA_MPS_PIPE_DIRECTORY": str(self.folder / "pipe"),
            "CUDA_MPS_LOG_DIRECTORY": str(self.folder / "log"),
        }

    def client_env(self, thread_pct: float) -> dict[str, str]:
        """The environment additions of a client limited to ``thread_pct`` % of the SMs' threads."""
        pct = float(thread_pct)
        if not 0 < pct <= 100:
            raise ValueError(f"an MPS active-thread percentage is in (0, 100], got {thread_pct!r}")
        return {**self.env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": f"{pct:g}"}

    def processes(self) -> list[int]:
        """Ids of the running MPS processes (control, server) of this daemon: those that use its folders,
        and every MPS process started since it was (a daemon may drop its environment, and the server it
        forks for the first client can outlive the quit by a moment; none ran before: the refusal)."""
        if self.folder is None:
            return []
        mine, out = str(self.folder).encode(), []
        for pid in _mps_pids():
            if pid not in self._before:
                out.append(pid)
                continue
            with contextlib.suppress(OSError):
                if mine in Path(f"/proc/{pid}/environ").read_bytes():
                    out.append(pid)
        return sorted(out)

    def _run(self, args: list[str], **kw) -> subprocess.CompletedProcess:
        return subprocess.run(
            [self.control, *args],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=_START_S,
            check=False,
            **kw,
        )

    def start(self) -> MpsDaemon:
        if self.is_closed:
            raise RuntimeError("this MpsDaemon was shut down; start a new one")
        if self._started:
            return self
        if self._check and (why := mps_refusal(control=self.control, **self._probes)):
            raise MpsUnavailable(why)
        self._before = set(_mps_pids())
        self.folder = folder = Path(tempfile.mkdtemp(prefix="gcexplore-mps-"))  # 0o700: this user's only
        for sub in ("pipe", "log"):
            (folder / sub).mkdir(mode=0o700)
        try:
            self._started = True  # from here on close() tells it to quit, whatever happens
            done = self._run(["-d"])
            if done.returncode != 0:
                user = os.environ.get("USER") or str(os.getuid())
                raise MpsUnavailable(
                    f"the user {user} is not allowed to start an MPS daemon here: {self.control} -d "
                    f"exited {done.returncode} ({(done.stderr or done.stdout).strip() or 'no message'})"
                )
            self._wait(lambda: (folder / "pipe" / "control").exists(), "start")
        except BaseException:
            self.close()
            raise
        return self

    def _wait(self, ready: Callable[[], bool], what: str) -> None:
        assert self.folder is not None  # waited on only once its folders are made
        end = time.monotonic() + _START_S
        while not ready():
            if time.monotonic() > end:
                log = self.folder / "log" / "control.log"
                last = ""
                with contextlib.suppress(OSError):
                    last = (log.read_text(errors="replace").strip().splitlines() or [""])[-1]
                raise MpsUnavailable(
                    f"the MPS daemon did not {what} within {_START_S:g} s (its log {log}"
                    + (f" ends: {last})" if last else ")")
                )
            time.sleep(0.02)

    def close(self) -> None:
        """Tell the daemon to quit and remove its folders (idempotent)."""
        if self.is_closed:
            return
        self.is_closed = True
        try:
            if self._started:
                assert self.folder is not None  # started in its folders
                self._run([], input="quit\n")
                with contextlib.suppress(MpsUnavailable):  # a daemon that will not go leaves its folder behind
                    self._wait(lambda: not self.processes(), "quit")
                    shutil.rmtree(self.folder, ignore_errors=True)
            elif self.folder is not None:
                shutil.rmtree(self.folder, ignore_errors=True)
        except (OSError, subprocess.SubprocessError):
            pass

    def __enter__(self):  # -> this daemon, started
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.is_closed else ("running" if self._started else "not started")
        return f"MpsDaemon({state}, folder={str(self.folder) if self.folder else None!r})"
