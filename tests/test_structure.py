"""The package's shape: a light import, bench reaching into no underscore name, one schema,
results of several runs kept apart, and a mode never dropped from a plot."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import _synthetic as S
import numpy as np
import pandas as pd
import pytest

import gcexplore
from gcexplore import analysis as A
from gcexplore.results import io as R
from gcexplore.schema import MODES, Options, columns
from gcexplore.views import plot as P

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gcexplore"


def test_import_loads_no_heavy_library():
    code = ("import sys, gcexplore; heavy = [m for m in ('matplotlib', 'ipywidgets', 'IPython', 'pyarrow', "
            "'pandas', 'cuda.core') if m in sys.modules]; print(heavy); sys.exit(1 if heavy else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def test_public_names_load_their_module_on_first_use():
    code = ("import sys, gcexplore; assert 'matplotlib' not in sys.modules; gcexplore.plot_sweep; "
            "assert 'matplotlib' in sys.modules; assert 'ipywidgets' not in sys.modules")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr


def test_bench_uses_no_underscore_name_of_the_package():
    bad = []
    for p in (ROOT / "bench").glob("*.py"):
        src = p.read_text()
        tree = ast.parse(src)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gcexplore"):
                bad += [f"{p.name}: {a.name}" for a in node.names if a.name.startswith("_")]
                if any(part.startswith("_") for part in node.module.split(".")):
                    bad.append(f"{p.name}: module {node.module}")
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                base = node.value
                if isinstance(base, ast.Name) and base.id in ("gcexplore", "engine", "P"):
                    bad.append(f"{p.name}: {base.id}.{node.attr}")
    assert bad == []


def test_options_are_checked_where_written():
    assert Options().modes == MODES
    with pytest.raises(TypeError, match="repeats must be an int"):
        Options(repeats=2.5)
    with pytest.raises(ValueError, match=r"repeats must be an int in \[1, 100000\]"):
        Options(repeats=0)
    with pytest.raises(ValueError, match="valid modes are alone, concurrent, sequential, streams"):
        Options(modes=("alone", "fast"))
    with pytest.raises(ValueError, match="rounding must be one of"):
        Options(rounding="nearest")
    with pytest.raises(TypeError, match="l2_flush must be True or False"):
        Options(l2_flush="yes")
    assert Options(repeats=np.int64(5)).repeats == 5
    assert Options(modes="alone,concurrent").modes == ("alone", "concurrent")
    assert Options(repeats=7).metadata("scaling") == {"repeats": 7, "warmup": 3, "rounds": 1, "l2_flush": False, "trace": False,
                                                      "graphs": False}


def test_every_result_kind_names_its_columns_and_identity():
    from gcexplore.schema import IDENTITY_COLUMNS, SAMPLE_IDENTITY

    for kind in ("overlap", "sweep", "scaling", "isolation", "tune"):
        assert columns(kind)[-len(IDENTITY_COLUMNS):] == list(IDENTITY_COLUMNS)
    for kind in ("occupancy", "trace", "pm"):  # per-sample kinds: the run key only
        assert columns(kind)[-2:] == list(SAMPLE_IDENTITY) == ["device_name", "run_id"]
    df = S.sweep_df()
    assert list(df.columns) == columns("sweep")


def test_one_number_rule_refuses_floats_for_counts(h100_like):
    with pytest.raises(TypeError, match="SM counts must be ints"):
        gcexplore.plan_split(h100_like, [24.9])
    with pytest.raises(TypeError, match="sm_counts entry must be an int"):
        from gcexplore.experiments.request import sweep_sizes as _sweep_sizes

        _sweep_sizes(h100_like, 2, [24.9], ())
    assert gcexplore.plan_split(h100_like, [np.int32(24)]).label == "24+108"


def _two_runs():
    a = S.sweep_df(seed=1)
    b = S.sweep_df(seed=2)
    b["device_name"] = "another synthetic GPU"
    b["makespan_ms"] *= 1.5
    b["duration_ms"] *= 1.5
    return pd.concat([a, b], ignore_index=True)


def test_concatenated_runs_are_summarized_per_run():
    both = _two_runs()
    s = gcexplore.summarize(both)
    assert set(s["run_id"]) == {"synthetic-1", "synthetic-2"}
    one = gcexplore.summarize(both[both.run_id == "synthetic-2"])
    mine = s[s.run_id == "synthetic-2"].reset_index(drop=True)
    pd.testing.assert_series_equal(mine["makespan_median_ms"], one["makespan_median_ms"])
    assert (mine["device_name"] == "another synthetic GPU").all()


def test_one_run_views_refuse_several_runs_and_say_how_to_pick():
    both = _two_runs()
    with pytest.raises(ValueError, match=r"2 runs: synthetic-1 .*, synthetic-2 \(another synthetic GPU"):
        gcexplore.best_split(both)
    with pytest.raises(ValueError, match="select one"):
        P.plot_sweep(both)


def test_results_saved_before_identity_columns_load_with_them(tmp_path):
    old = S.sweep_df().drop(columns=["device_name", "run_id"])
    old.attrs.pop("run_id")
    back = R.load(R.save(old, tmp_path / "old.parquet"))
    assert (back["device_name"] == S.SYNTHETIC_DEVICE).all()
    assert back["run_id"].nunique() == 1
    assert gcexplore.best_split(back)["layout"] == gcexplore.best_split(old)["layout"]


def test_recorded_results_load_and_summarize():
    for name in R.recorded_names():
        df = R.load_recorded(name)
        assert {"device_name", "run_id"} <= set(df.columns)
        assert len(gcexplore.summarize(df))


def test_a_mode_outside_the_list_is_drawn_not_dropped():
    df = S.sweep_df(splits=[24])
    extra = df[df["mode"] == "streams"].assign(mode="graphs_streams")
    df = pd.concat([df, extra], ignore_index=True)
    df.attrs.update(S.sweep_df(splits=[24]).attrs)
    fig = P.plot_throughput(df)
    gids = {p.get_gid() for ax in fig.axes for p in ax.patches}
    assert "bar:compute:graphs_streams" in gids
    assert A.modes_in(df)[-1] == "graphs_streams"


def test_demo_and_cli_print_the_same_layout_table():
    from gcexplore.cli import demo as _demo
    from gcexplore.views.report import layout_report

    df = S.sweep_df()
    assert _demo.format_summary(df) == layout_report(df)


def test_the_text_report_loads_no_matplotlib():
    code = "import sys, gcexplore.views.report; sys.exit('matplotlib' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr or "gcexplore.views.report loaded matplotlib"


#: Text-only commands, run in a fresh process with the GPU parts stood in by recorded or
#: synthetic results; none may load matplotlib.
_TEXT_COMMANDS = {
    "info": "main(['info'])  # 1 without a GPU, 0 with one: both print",
    "sweep": ("import gcexplore.workloads.builtins as B, gcexplore.experiments.overlap as O\n"
              "from gcexplore.results.io import load_recorded\n"
              "B.builtin = lambda name, **kw: type('W', (), {'close': lambda self: None})()\n"
              "O.sweep = lambda *a, **k: load_recorded('sweep')\n"
              "assert main(['sweep', 'compute', 'memory', '--quiet', '--out', OUT]) == 0"),
    "tune": ("import gcexplore.workloads.builtins as B, gcexplore.experiments.tuner as T, _synthetic as S\n"
             "B.builtin = lambda name, **kw: type('W', (), {'close': lambda self: None})()\n"
             "df = S.fake_tune()\nT.tune = lambda *a, **k: df\n"
             "assert main(['tune', 'compute', 'memory', '--quiet', '--out', OUT]) == 0"),
    "compare": "assert main(['compare', SWEEP, SWEEP]) == 0",
}
@pytest.mark.parametrize("command", list(_TEXT_COMMANDS))
def test_text_only_commands_load_no_matplotlib(command, tmp_path):
    code = (f"import sys; sys.path.insert(0, 'tests')\nfrom gcexplore.cli import main\n"
            f"OUT, SWEEP = {str(tmp_path / 'r.parquet')!r}, {str(PACKAGE / 'data' / 'sweep.parquet')!r}\n"
            f"{_TEXT_COMMANDS[command]}\nsys.exit(3 if 'matplotlib' in sys.modules else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, ("loaded matplotlib" if r.returncode == 3 else "") + r.stdout[-500:] + r.stderr[-2000:]
    assert (r.stdout + r.stderr).strip()  # it printed (info without a GPU prints to stderr)


def test_help_loads_neither_pandas_nor_numpy():
    """``gcexplore --help`` stays fast (0.08 s measured) because it imports no data library."""
    code = ("import sys\nfrom gcexplore.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('numpy', 'pandas', 'matplotlib', 'pyarrow') if m in sys.modules]\n"
            "sys.exit(f'loaded {heavy}' if heavy else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "usage: gcexplore" in r.stdout


@pytest.mark.parametrize("old, name", [
    ("api", "device_info"), ("partitions", "split"), ("kernels", "builtin_kernel"), ("tracing", "kernel_trace"),
    ("tracing", "preload_cupti"), ("cupti_records", "trace_rows"), ("engine", "launch_gap"), ("runner", "Checkpoint"),
    ("tuner", "tune"), ("search", "search"), ("pm", "dram_timeline"), ("sizes", "as_sizes"),
    ("validate", "check_result"), ("busy", "busy_time"), ("occupancy_estimate", "estimate_occupancy"),
    ("plot", "plot_sweep"), ("timeline", "plot_timeline"), ("tune_plot", "plot_tune"), ("pm_plot", "plot_dram_timeline"),
    ("report", "layout_report"), ("profile", "sweep"), ("widgets", "Explorer"), ("schema", "Options"),
    ("results", "load_recorded"), ("analysis", "summarize"), ("workloads", "compute"),
])
def test_the_flat_modules_of_earlier_versions_still_resolve(old, name):
    import gcexplore

    assert callable(getattr(getattr(gcexplore, old), name))
