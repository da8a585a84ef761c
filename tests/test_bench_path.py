"""bench/ holds scripts named like packages (bench/comm.py and ipywidgets' `comm`): a test that
loads a bench script must leave bench/ off sys.path, or every later widget test breaks."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = str(Path(__file__).resolve().parents[1] / "bench")


def test_loading_the_cupti_bench_puts_bench_only_behind_every_package():
    import importlib.util

    import test_cupti_features_gpu as t

    t._bench_module()
    assert BENCH not in sys.path[:-1]
    spec = importlib.util.find_spec("comm")
    assert spec is None or not str(spec.origin).startswith(BENCH)


def test_no_test_module_puts_bench_on_sys_path_for_good():
    for path in Path(__file__).parent.glob("test_*.py"):
        text = path.read_text()
        for line in text.splitlines():
            if "sys.path.insert" in line and "bench" in line and not line.startswith((" ", "\t")):
                raise AssertionError(f"{path.name}: {line.strip()} (module level: bench/comm.py would "
                                     "shadow the comm package)")
