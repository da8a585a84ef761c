"""bench/ only measures and prints: read from the source, every bench script imports ``gcexplore`` and
third-party packages, never another bench script (nor a test helper), touches ``sys.path`` only to put the
project root first, and names no factory inside bench/; no test loads a bench script by its path (a test
may run one as a user does, in a subprocess). What a bench and a test share lives in the package.

(bench/ holds scripts named like packages, bench/comm.py beside the ``comm`` package ipywidgets imports:
a bench folder on ``sys.path`` once broke every later widget test.)
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = sorted((ROOT / "bench").glob("*.py"))
TESTS = sorted(Path(__file__).parent.glob("*.py"))
BENCH_NAMES = {p.stem for p in BENCH}
TEST_NAMES = {p.stem for p in TESTS} | {"conftest"}
#: What a bench script may put on sys.path: the project root, so ``gcexplore`` imports without PYTHONPATH.
ROOT_EXPRS = {"str(ROOT)", "str(Path(__file__).resolve().parents[1])"}
ROOT_DEF = "Path(__file__).resolve().parents[1]"
LOADERS = ("spec_from_file_location", "run_path", "run_module", "SourceFileLoader", "load_source", "exec_module")


def _imported(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of every import, function-level ones too; a relative import as ``.name``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.lineno, "." * node.level + (node.module or "")))
    return out


def _path_edits(tree: ast.AST) -> list[tuple[int, list[str]]]:
    """(line, the values put on it) of every change to ``sys.path``: insert, append, extend, assignment."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                ast.unparse(node.func.value) == "sys.path" and node.func.attr in ("insert", "append", "extend"):
            args = node.args[1:] if node.func.attr == "insert" else node.args
            vals = [ast.unparse(e) for a in args for e in (a.elts if isinstance(a, (ast.List, ast.Tuple)) else [a])]
            out.append((node.lineno, vals))
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(ast.unparse(t).startswith("sys.path") for t in targets):
                v = node.value
                out.append((node.lineno, [ast.unparse(e) for e in (v.elts if isinstance(v, (ast.List, ast.Tuple))
                                                                   else [v])]))
    return out


def bench_violations(source: str) -> list[str]:
    """What a bench script's source does that a bench script must not."""
    tree = ast.parse(source)
    bad = []
    for line, mod in _imported(tree):
        top = mod.split(".")[0]
        if mod.startswith(".") or top in ("bench", "tests") or top in BENCH_NAMES or top in TEST_NAMES:
            bad.append(f"line {line}: imports {mod} (a bench script or test helper; put what is shared in gcexplore)")
    roots = {ast.unparse(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
             and [ast.unparse(t) for t in n.targets] == ["ROOT"]}
    for line, vals in _path_edits(tree):
        for v in vals:
            if v not in ROOT_EXPRS or (v == "str(ROOT)" and roots != {ROOT_DEF}):
                bad.append(f"line {line}: puts {v} on sys.path (only the project root may go there)")
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                re.fullmatch(r"bench\.\w+(:\w+)?", node.value):
            bad.append(f"line {node.lineno}: names {node.value!r} (a factory inside bench/; the package has them)")
    return bad


def loading_violations(source: str) -> list[str]:
    """What a test's source does that loads a bench script by its path (running one in a subprocess is fine)."""
    tree = ast.parse(source)
    bad = [f"line {line}: imports {mod} (a bench script)" for line, mod in _imported(tree)
           if mod.split(".")[0] == "bench" or mod.split(".")[0] in BENCH_NAMES - TEST_NAMES]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in LOADERS and "bench" in ast.unparse(node):
                bad.append(f"line {node.lineno}: {ast.unparse(node)[:80]} (loads a bench script by its path)")
    bad += [f"line {line}: puts {v} on sys.path" for line, vals in _path_edits(tree) for v in vals if "bench" in v]
    return bad


@pytest.mark.parametrize("path", BENCH, ids=lambda p: p.name)
def test_a_bench_script_imports_no_other_bench_script_and_leaves_bench_off_sys_path(path):
    assert bench_violations(path.read_text()) == [], path.name


@pytest.mark.parametrize("path", TESTS, ids=lambda p: p.name)
def test_no_test_loads_a_bench_script_by_its_path(path):
    assert loading_violations(path.read_text()) == [], path.name


def test_the_checks_catch_what_they_name():
    """Each way a script used to reach bench/ (all of them were in this tree) is caught; what is allowed is not."""
    bench_bad = {
        "from compare_real import build": "imports compare_real",
        "def f():\n    from predict_ceiling import main": "imports predict_ceiling",
        "import bench.campaign_pairs": "imports bench.campaign_pairs",
        "from _synthetic import overlap_result": "imports _synthetic",
        "import sys\nfrom pathlib import Path\nsys.path.insert(0, str(Path(__file__).resolve().parent))":
            "puts str(Path(__file__).resolve().parent)",
        'ROOT = Path(__file__).resolve().parents[1]\nsys.path[:0] = [str(ROOT), str(ROOT / "tests")]':
            "puts str(ROOT / 'tests')",
        'PAIRS = ["bench.campaign_pairs:attention_sort"]': "names 'bench.campaign_pairs:attention_sort'",
    }
    for source, what in bench_bad.items():
        found = bench_violations(source)
        assert len(found) == 1 and what in found[0], (source, found)
    fine = ("import sys\nfrom pathlib import Path\nROOT = Path(__file__).resolve().parents[1]\n"
            "sys.path.insert(0, str(ROOT))\nimport gcexplore\nfrom gcexplore.cli.needs import needs\nimport torch\n"
            'PAIRS = ["gcexplore.workloads.torch_pairs:attention_sort"]\n')
    assert bench_violations(fine) == []
    test_bad = ['spec = importlib.util.spec_from_file_location("b", HERE.parent / "bench" / "campaign.py")',
                'runpy.run_path(str(ROOT / "bench" / "x.py"))', 'sys.path.append(str(ROOT / "bench"))',
                "import until_decided"]
    for source in test_bad:
        assert len(loading_violations(source)) == 1, source
    ok = 'subprocess.run([sys.executable, str(ROOT / "bench" / "predict_residuals.py"), "--help"])'
    assert loading_violations(ok) == []


def test_needs_says_in_one_line_what_a_script_lacks_and_exits_2(monkeypatch, capsys):
    from gcexplore.cli.needs import needs

    monkeypatch.setattr("sys.argv", ["bench/some_script.py"])
    needs(gpu=False, modules=("json",))  # here: nothing to say
    with pytest.raises(SystemExit) as e:
        needs(gpu=False, modules=("json", "no_such_module_gcx"))
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err == "bench/some_script.py needs no_such_module_gcx, not installed here\n"


def test_an_unknown_calibration_kind_is_refused_with_the_kinds_there_are():
    from gcexplore.workloads.examples import CAMPAIGN_KINDS, SHIFTED_KINDS, shifted

    with pytest.raises(ValueError, match="unknown kind 'gemmm'; kinds are compute, memory") as e:
        shifted("gemmm", 0.0, 0)
    assert all(k in str(e.value) for k in SHIFTED_KINDS + CAMPAIGN_KINDS)
