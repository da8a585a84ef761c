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


def _module_table(text: str, header: str) -> list[tuple[str, str]]:
    """(layer, module path) of every row of the markdown table under ``header``."""
    table = text.split(header, 1)[1].split("\n\n", 1)[0]
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in table.splitlines()[2:]]
    return [(r[0], r[1].strip("`")) for r in rows]


@pytest.mark.parametrize("doc", ["README.md", "docs/contract.md"])
def test_the_module_tables_name_every_module_and_nothing_else_in_layer_order(doc):
    sys.path.insert(0, str(ROOT / "tests"))
    import test_layers as L

    text = (ROOT / doc).read_text()
    header = "| layer | module | what |" if doc == "README.md" else "| layer | module | owns |"
    rows = _module_table(text, header)
    named = [m for _, m in rows]
    on_disk = sorted(str(p.relative_to(ROOT)) for p in L.MODULES.values())
    assert sorted(n for n in set(named) if named.count(n) > 1) == []
    assert sorted(set(named) - set(on_disk)) == [], "rows for modules that do not exist"
    assert sorted(set(on_disk) - set(named)) == [], "modules the table does not name"
    modules = {str(p.relative_to(ROOT)): m for m, p in L.MODULES.items()}
    assert [(lay, m) for lay, m in rows if lay != L.layer(modules[m])] == [], "rows in the wrong layer"
    order = list(dict.fromkeys(lay for lay, _ in rows))
    assert [lay for lay, _ in rows] == sorted((lay for lay, _ in rows), key=order.index), "a layer's rows are split"
    # The order is true: every import (function-level ones too) goes to the same layer or one listed earlier.
    up = [f"{m} -> {t}" for m in L.MODULES for t, _, _, _ in L.imports(m)
          if t in L.MODULES and order.index(L.layer(t)) > order.index(L.layer(m))]
    assert [u for u in up if u.split(" -> ")[0] not in L.ELSEWHERE] == []  # those are marked in test_layers


def test_the_guide_names_every_recorded_result_that_ships():
    import re

    import gcexplore

    # the list item (wrapped over several lines) that names them
    text = (ROOT / "docs" / "guide.md").read_text()
    item = text.split("\n- the recorded results as DataFrames", 1)[1].split("\n- ", 1)[0]
    named = set(re.findall(r"`(\w+)`", item.split("lists what ships:", 1)[1]))
    assert named == set(gcexplore.results.recorded_names())
