"""The command line without a GPU: every argument is checked before the driver is asked,
and every failure is one line with a non-zero exit, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import gcexplore

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "gcexplore.cli", *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize("args, message", [
    (["profile", "compute", "memory", "--split", "24", "--repeats", "0"], "--repeats: must be >= 1, got 0"),
    (["sweep", "compute", "memory", "--modes", "foo"], "unknown mode(s) ['foo']; valid modes are alone"),
    (["profile", "compute", "memory", "--split", "-8"], "SM counts must be positive integers, got '-8'"),
    (["profile", "compute", "memory", "--split", "24", "--out", "x.txt"], "--out 'x.txt' must end in .parquet or .csv"),
    (["profile", "compute", "fast", "--split", "24"], "unknown built-in workload 'fast'; built-ins are compute"),
    (["sweep", "compute", "memory", "--trace", "t.csv"], "--trace 't.csv' must end in .json"),
    (["sweep", "compute", "memory", "--out", "r.csv", "--trace", "r.json"], "would overwrite the metadata sidecar"),
    (["info", "--device", "-1"], "--device: must be >= 0, got -1"),
    (["profile", "--split", "24", "memory:n=abc", "compute"], "workload 'memory:n=abc': n must be a positive integer"),
    (["profile", "--split", "24", "spin:bogus=1", "compute"], "spin has no option 'bogus'; its options are us"),
    (["profile", "--split", "24", "compute:iters=-3", "memory"], "iters must be positive, got -3"),
    (["sweep", "compute", "memory", "--out", "r.csv", "--checkpoint", "r.json"], "--checkpoint 'r.json' is also the "
                                                                                "metadata sidecar of --out"),
    (["sweep", "compute", "memory", "--out", "r.parquet", "--checkpoint", "r.parquet"], "is also --out"),
    (["sweep", "compute", "memory", "--trace", "t.json", "--checkpoint", "t.json"], "is also --trace"),
    (["tune", "compute", "memory", "--max-repeats", "100000"], "--max-repeats: must be <= 1000 (the tuner's limit)"),
    (["demo", "--out", "afile"], "--out: the output folder 'afile' is a file"),
    (["demo", "--out", "/proc/nope"], "--out: cannot create the output folder '/proc/nope'"),
])
def test_bad_arguments_are_named_before_the_gpu_is_asked(tmp_path, args, message):
    (tmp_path / "afile").write_text("a file where the demo's folder should be")
    r = _cli(*args, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""  # nothing measured or printed first
    assert message in r.stderr
    assert "Traceback" not in r.stderr and "driver" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_unwritable_out_is_refused_before_measuring(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("a file where a folder should be")
    r = _cli("profile", "compute", "memory", "--split", "24", "--out", str(blocker / "r.parquet"))
    assert r.returncode == 2 and "cannot create the folder of --out" in r.stderr
    assert "Traceback" not in r.stderr


def test_version_and_help_answer():
    r = _cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"gcexplore {gcexplore.__version__}"
    assert _cli("--help").returncode == 0


@pytest.mark.skipif(gcexplore.gpu_available(), reason="checks the no-GPU path; a GPU is present")
def test_without_a_gpu_valid_arguments_end_in_one_line(tmp_path):
    r = _cli("profile", "compute", "memory", "--split", "24", "--out", str(tmp_path / "r.parquet"))
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "gcexplore profile: UnsupportedError: no" in r.stderr
    r = _cli("info")
    assert r.returncode == 1 and r.stderr.count("gcexplore demo") == 1  # says what works without a GPU, once
    assert r.stderr.startswith("gcexplore info: no NVIDIA driver found; without a GPU") \
        or r.stderr.startswith("gcexplore info: no usable CUDA GPU")
    assert len(r.stderr.splitlines()) == 1


@pytest.mark.skipif(gcexplore.gpu_available(), reason="checks the no-GPU path; a GPU is present")
@pytest.mark.parametrize("args", [["serve", "--out", "s.parquet"], ["serve", "--advise", "--ttft-ms", "50", "--itl-p99-ms", "5", "--out", "s.csv"]])
def test_serve_without_a_gpu_says_no_driver_and_what_runs_without_one(tmp_path, args):
    """As every other command (not an install hint for PyTorch, which a machine without a GPU cannot use)."""
    r = _cli(*[str(tmp_path / a) if a.endswith((".parquet", ".csv")) else a for a in args])
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    first = _cli("info").stderr.split(";")[0].removeprefix("gcexplore info: ")  # what the driver check says here
    assert first in r.stderr and "gcexplore serve --recorded" in r.stderr and "pip install" not in r.stderr
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.skipif(gcexplore.gpu_available(), reason="checks the no-GPU path; a GPU is present")
def test_the_loaders_detail_is_the_cause_shown_with_verbose():
    with pytest.raises(gcexplore.UnsupportedError) as e:
        gcexplore.device_count()
    assert str(e.value).split(";")[0] in ("no NVIDIA driver found", "no usable CUDA GPU") \
        or str(e.value).startswith("no usable CUDA GPU")
    assert "system search" not in str(e.value) and e.value.__cause__ is not None
    r = _cli("--verbose", "info")
    assert r.returncode == 1 and "  caused by " in r.stderr and "Traceback" not in r.stderr


def test_demo_into_a_closed_pipe_exits_quietly_and_writes_its_files(tmp_path):
    out = tmp_path / "o"
    p = subprocess.Popen([sys.executable, "-m", "gcexplore.cli", "demo", "--recorded", "--out", str(out)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()  # the reader is gone before the first line (``| head -0``)
    err = p.stderr.read()
    assert p.wait() == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err
    assert {"sweep.parquet", "sweep.png", "throughput.png"} <= {f.name for f in out.iterdir()}
    assert len(gcexplore.load(out / "sweep.parquet")) > 0


def test_skip_reasons_are_one_short_line(tmp_path):
    if gcexplore.gpu_available():
        pytest.skip("GPU tests run here; nothing is skipped for want of one")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                        str(ROOT / "tests" / "test_api_gpu.py")], capture_output=True, text=True, cwd=ROOT)
    skips = [line for line in r.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skips, r.stdout[-2000:]
    assert all(len(line) < 120 for line in skips), max(skips, key=len)
