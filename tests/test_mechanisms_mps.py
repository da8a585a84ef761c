"""gcexplore's own MPS daemon, on a CPU: a stand-in ``nvidia-cuda-mps-control`` written here records
each call; the daemon starts in private 0o700 folders, is refused in one sentence where it must be,
and is told to quit on a normal exit, on an exception, on KeyboardInterrupt and on SIGINT."""

from __future__ import annotations

import os
import signal
import stat
import time
from pathlib import Path

import pytest

from gcexplore.mechanisms.mps import MpsDaemon, MpsUnavailable, mps_refusal

FAKE = """#!/bin/sh
# a stand-in control binary: records its calls; -d makes the control pipe, quit removes it
echo "call $* pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY" >> "$FAKE_MPS_LOG"
if [ "$1" = "-d" ]; then
    [ -n "$FAKE_MPS_FAIL" ] && { echo "permission denied" >&2; exit 1; }
    touch "$CUDA_MPS_PIPE_DIRECTORY/control"; exit 0
fi
read cmd
echo "stdin $cmd" >> "$FAKE_MPS_LOG"
[ "$cmd" = quit ] && rm -f "$CUDA_MPS_PIPE_DIRECTORY/control"
exit 0
"""

#: The probes of the machine, quiet: no other daemon, Default compute mode.
QUIET = {"default_pipe": "/nonexistent/gcexplore-test-mps", "processes": list, "compute_mode": lambda: "Default"}


@pytest.fixture
def fake(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    binary = bindir / "nvidia-cuda-mps-control"
    binary.write_text(FAKE)
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "calls.log"
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_MPS_LOG", str(log))
    monkeypatch.delenv("FAKE_MPS_FAIL", raising=False)
    return log


def _calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def _started_and_quit(log: Path, folder: Path) -> None:
    calls = _calls(log)
    assert calls[0] == f"call -d pipe={folder / 'pipe'} log={folder / 'log'}", calls
    assert calls[1:] == [f"call  pipe={folder / 'pipe'} log={folder / 'log'}", "stdin quit"], calls
    assert not folder.exists()  # its folders removed with it


def test_start_in_private_folders_and_quit(fake):
    with MpsDaemon(**QUIET) as d:
        folder = d.folder
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert d.env == {"CUDA_MPS_PIPE_DIRECTORY": str(folder / "pipe"), "CUDA_MPS_LOG_DIRECTORY": str(folder / "log")}
        assert d.client_env(50)["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
        assert _calls(fake) == [f"call -d pipe={folder / 'pipe'} log={folder / 'log'}"]  # no quit yet
    _started_and_quit(fake, folder)
    assert d.is_closed
    d.close()  # idempotent: no second quit
    assert len(_calls(fake)) == 3


def test_quit_on_an_exception_in_the_block(fake):
    with pytest.raises(ZeroDivisionError), MpsDaemon(**QUIET) as d:
        folder = d.folder
        raise ZeroDivisionError
    _started_and_quit(fake, folder)


def test_quit_on_keyboard_interrupt_in_the_block(fake):
    with pytest.raises(KeyboardInterrupt), MpsDaemon(**QUIET) as d:
        folder = d.folder
        raise KeyboardInterrupt
    _started_and_quit(fake, folder)


def test_quit_on_sigint(fake):
    with pytest.raises(KeyboardInterrupt), MpsDaemon(**QUIET) as d:
        folder = d.folder
        os.kill(os.getpid(), signal.SIGINT)  # Python's handler raises KeyboardInterrupt here
        time.sleep(10)  # not reached: the signal interrupts the sleep at once
    _started_and_quit(fake, folder)


def test_a_daemon_that_will_not_start_is_refused_and_cleaned_up(fake, monkeypatch):
    monkeypatch.setenv("FAKE_MPS_FAIL", "1")
    d = MpsDaemon(**QUIET)
    with pytest.raises(MpsUnavailable, match=r"is not allowed to start an MPS daemon here: .*permission denied"):
        d.start()
    assert d.is_closed and not d.folder.exists()
    assert _calls(fake)[-1] == "stdin quit"  # told to quit all the same: nothing half-started stays


def test_refused_where_mps_is_absent(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no control binary here
    why = mps_refusal(**QUIET)
    assert why.startswith("MPS is absent: nvidia-cuda-mps-control is not on PATH")
    with pytest.raises(MpsUnavailable, match="MPS is absent"):
        MpsDaemon(**QUIET).start()


def test_refused_where_another_daemon_serves_the_card(fake, tmp_path):
    pipe = tmp_path / "nvidia-mps"
    pipe.mkdir()
    (pipe / "control").touch()
    assert "another MPS daemon serves the card (its control pipe is" in mps_refusal(**{**QUIET, "default_pipe": str(pipe)})
    why = mps_refusal(**{**QUIET, "processes": lambda: ["4242 nvidia-cuda-mps"]})
    assert why.startswith("another MPS daemon serves the card (running: 4242 nvidia-cuda-mps)")
    with pytest.raises(MpsUnavailable, match="another MPS daemon"):
        MpsDaemon(**{**QUIET, "processes": lambda: ["4242 nvidia-cuda-mps"]}).start()
    assert _calls(fake) == []  # refused before anything ran


def test_refused_where_the_compute_mode_is_not_default(fake):
    why = mps_refusal(**{**QUIET, "compute_mode": lambda: "Exclusive_Process"})
    assert why.startswith("the card's compute mode is Exclusive_Process, not Default")
    assert mps_refusal(**QUIET) is None


def test_bad_percentage_and_use_before_start(fake):
    d = MpsDaemon(**QUIET)
    with pytest.raises(RuntimeError, match="not started"):
        _ = d.env
    with d:
        for bad in (0, -5, 101):
            with pytest.raises(ValueError, match=r"in \(0, 100\]"):
                d.client_env(bad)
    with pytest.raises(RuntimeError, match="shut down"):
        d.start()


class _Env:
    """A daemon stand-in for the clients: no MPS variables (each client fails where it builds its work)."""

    def client_env(self, pct):
        return {"GCEXPLORE_TEST_PCT": f"{pct:g}"}


def test_failing_clients_are_reported_and_none_is_left_waiting():
    from gcexplore.mechanisms.clients import run_clients

    specs = {"each": {"a": {"factory": "gcexplore_no_such_module:make", "kwargs": {}},
                      "b": {"factory": "gcexplore_no_such_module:make", "kwargs": {}}}}
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"MPS client\(s\) failed: (?=.*\ba: )(?=.*\bb: )") as exc:
        run_clients(specs, {"a": 25, "b": 75}, _Env(), device=0, repeats=2, warmup=1, timeout_s=120)
    assert time.monotonic() - t0 < 110  # released by the barrier's abort, not by the timeout
    assert "Error" in str(exc.value)


def test_a_daemon_that_never_opens_its_pipe_is_refused_with_its_log(fake, tmp_path, monkeypatch):
    from gcexplore.mechanisms import mps as M

    binary = tmp_path / "bin" / "nvidia-cuda-mps-control"  # this one starts, logs, and makes no pipe
    binary.write_text(FAKE.replace('touch "$CUDA_MPS_PIPE_DIRECTORY/control"; exit 0',
                                   'echo "cannot open the GPU" > "$CUDA_MPS_LOG_DIRECTORY/control.log"; exit 0'))
    monkeypatch.setattr(M, "_START_S", 0.3)
    with pytest.raises(MpsUnavailable, match=r"did not start within 0.3 s \(its log .* ends: cannot open the GPU\)"):
        MpsDaemon(**QUIET).start()
    assert _calls(fake)[-1] == "stdin quit"
