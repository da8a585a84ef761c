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
])
def test_bad_arguments_are_named_before_the_gpu_is_asked(tmp_path, args, message):
    r = _cli(*args, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
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
    assert r.returncode == 1 and "gcexplore demo" in r.stderr  # says what works without a GPU
