"""The README and the user guide say what the code does: the no-GPU example runs without a
GPU, the minimum driver in the text is the one checked at start-up, two set-up commands."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_keeps_two_setup_commands_and_links_the_guide():
    setup = README.split("## Set up", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```\n(.+?)\n```", setup)
    assert len(commands) == 2, commands
    assert "docs/guide.md" in README and (ROOT / "docs" / "guide.md").is_file()


def test_the_driver_in_the_text_is_the_one_checked():
    from gcexplore.device.driver import MIN_DRIVER

    version = f"{MIN_DRIVER // 1000}.{(MIN_DRIVER % 1000) // 10}"
    guide = (ROOT / "docs" / "guide.md").read_text()
    for text in (" ".join(README.split()), " ".join(guide.split())):
        assert f"driver {version} (R580) or newer" in text or f"driver {version} / R580 or newer" in text
        assert "12.5" not in text


def test_the_no_gpu_example_runs_without_a_gpu(tmp_path):
    if "sweep" not in __import__("gcexplore").results.recorded_names():
        pytest.skip("no recorded sweep in gcexplore/data")
    block = README.split("## Without a GPU", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    r = subprocess.run([sys.executable, "-c", "import matplotlib; matplotlib.use('Agg')\n" + block],
                       cwd=tmp_path, capture_output=True, text=True,
                       env={**__import__("os").environ, "PYTHONPATH": f"{ROOT}:{__import__('os').environ.get('PYTHONPATH', '')}"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "72+60" in r.stdout
