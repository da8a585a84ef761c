"""What the recorded results print does not change when the code under them is reorganised: the demo
over the recorded sweep and ``gcexplore compare`` on two pairs of recorded files print exactly the
text captured before the result kinds were declared once (tests/data/expected/, written by the
commands below on the code of that time). The compare captures were written again once, for issue 46's
wording (the noise floor said once per table, "undecided" where every layout is UNCLEAR): every number
column of every row was checked identical to the first capture then."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from gcexplore.cli.commands import main

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = ROOT / "tests" / "data" / "expected"


def _printed(argv) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    assert code == 0
    return out.getvalue()


@pytest.mark.parametrize("a, b, expected", [
    ("sweep", "sweep_second", "compare_sweep_sweep_second.txt"),
    ("torch_sweep", "torch_sweep_second", "compare_torch_sweep_torch_sweep_second.txt"),
])
def test_compare_on_recorded_files_prints_what_it_printed(a, b, expected, monkeypatch):
    monkeypatch.chdir(ROOT)  # the files named as the capture named them
    got = _printed(["compare", f"gcexplore/data/{a}.parquet", f"gcexplore/data/{b}.parquet"])
    assert got == (EXPECTED / expected).read_text()


def test_demo_over_the_recorded_sweep_prints_what_it_printed(tmp_path):
    lines = _printed(["demo", "--recorded", "--out", str(tmp_path)]).splitlines(keepends=True)
    assert lines[-1].startswith("wrote ") and str(tmp_path) in lines[-1]
    assert "".join(lines[:-1]) == (EXPECTED / "demo_recorded.txt").read_text()
