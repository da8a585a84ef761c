"""The run has one owner: its identity is spelled once (schema.IDENTITY), travels through save, load
and campaign shards, its derived numbers are computed once per frame, compare only pairs like with
like (workload set by workload set, best split over the layouts both sides measured), and a
workload recipe has one grammar everywhere."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import _synthetic as S
import pandas as pd
import pytest

import gcexplore
from gcexplore.analysis import overlap as O
from gcexplore.analysis.comparison import Comparison, Comparisons, compare
from gcexplore.results.run import Run, identity_fields, measured_groups, run_of
from gcexplore.schema import IDENTITY, IDENTITY_COLUMNS, RUN_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
CAMPAIGN = ROOT / "gcexplore" / "data" / "campaign.parquet"


# ------------------------------------------------------------------ one spelling


def test_identity_field_names_appear_nowhere_but_in_their_owner():
    """No module but schema.py (the list) and results/run.py (the run) spells an identity field's
    name as a string: every other reader derives it, so a rename or a new field is one line."""
    common = {"device_name", "run_id", "host", "options"}  # words too plain to grep for
    names = [f.name for f in IDENTITY if f.name not in common]
    pattern = re.compile(r"""["'](%s)["']""" % "|".join(map(re.escape, names)))
    owners = {"gcexplore/schema.py", "gcexplore/results/run.py"}
    found = []
    for p in sorted((ROOT / "gcexplore").rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        if rel in owners:
            continue
        for n, line in enumerate(p.read_text().splitlines(), 1):
            if pattern.search(line):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert found == []


def test_the_grep_finds_a_planted_spelling(tmp_path):
    names = [f.name for f in IDENTITY if f.name not in {"device_name", "run_id", "host", "options"}]
    pattern = re.compile(r"""["'](%s)["']""" % "|".join(map(re.escape, names)))
    assert pattern.search('x = df.attrs.get("driver_version")') and not pattern.search("driver_version=1")


def test_a_new_identity_field_is_one_line_in_the_schema(tmp_path):
    """Add one IdentityField to a copy of the package: rows, the run, the identity diff, compare's
    by=, the campaign columns and DeviceInfo.identity() all carry it with no other change."""
    pkg = tmp_path / "gcexplore"
    shutil.copytree(ROOT / "gcexplore", pkg, ignore=shutil.ignore_patterns("__pycache__", "data"))
    shutil.copytree(ROOT / "gcexplore" / "data", pkg / "data")
    schema = pkg / "schema.py"
    text = schema.read_text()
    anchor = '    IdentityField("run_id", "str", "run", run_key=True),\n'
    assert anchor in text
    schema.write_text(text.replace(anchor, '    IdentityField("nic", "str", "network card", "nic"),\n' + anchor))
    code = """
import dataclasses, gcexplore as g
from gcexplore.schema import frame, columns
from gcexplore.analysis.identity import identity_diff
from gcexplore.analysis.compare_sets import resolve_by
from gcexplore.campaigns.store import CAMPAIGN_COLUMNS
from gcexplore.results.run import run_of
row = dict(layout="8+124", split_sm_count=8, mode="concurrent", rep=0, workload="a", partition="p0", sm_count=8,
           start_ms=0.0, duration_ms=1.0, makespan_ms=1.0)
a = frame([row], "sweep", {"kind": "sweep", "device_name": "X", "run_id": "r1", "nic": "mlx5-a"})
b = frame([row], "sweep", {"kind": "sweep", "device_name": "X", "run_id": "r2", "nic": "mlx5-b"})
assert columns("sweep")[-2:] == ["nic", "run_id"] and (a["nic"] == "mlx5-a").all()
assert run_of(a).identity["nic"] == "mlx5-a"
d = identity_diff(a, b).set_index("field")
assert d.loc["network card", "a"] == "mlx5-a" and not d.loc["network card", "same"]
assert resolve_by(a, "network card") == "nic" and "nic" in CAMPAIGN_COLUMNS
@dataclasses.dataclass(frozen=True)
class Card(g.DeviceInfo):
    nic: str = "mlx5-c"
card = Card(name="X", index=0, compute_capability=(9, 0), sm_count=132, min_partition_size=8, alignment=8,
            driver_version=13000)
assert card.identity()["nic"] == "mlx5-c"
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_the_contract_names_the_change_paths_and_they_hold():
    text = (ROOT / "docs" / "contract.md").read_text()
    section = text[text.index("## Change paths"):]
    assert "a new identity field" in section and "`gcexplore/schema.py`" in section
    assert "a new derived number of a run" in section and "run_of(df).memo" in section
    # the path the contract names for a derived number: one function, memoised on the run
    df = S.sweep_df(seed=4)
    calls = []

    def spread():
        calls.append(1)
        return float(df["makespan_ms"].max() - df["makespan_ms"].min())

    assert run_of(df).memo("spread", spread) == run_of(df).memo("spread", spread)
    assert calls == [1]


# --------------------------------------------------------------- identity travels


def test_identity_round_trips_through_save_load_and_campaign_shards(tmp_path):
    df = S.sweep_df(seed=5)
    for col, v in (("device_uuid", "GPU-a"), ("pci_bus_id", "00000000:19:00.0"), ("host", "node7"),
                   ("cuda_core_version", "1.2.0")):
        df[col] = v
        df.attrs[col] = v
    want = run_of(df).identity
    assert want["device_uuid"] == "GPU-a" and want["host"] == "node7"
    for suffix in ("parquet", "csv"):
        back = gcexplore.load(gcexplore.save(df, tmp_path / f"r.{suffix}"))
        assert run_of(back).identity == want, suffix
        assert list(back.columns[-len(IDENTITY_COLUMNS):]) == list(IDENTITY_COLUMNS)
    from gcexplore.campaigns import _task as T
    from gcexplore.campaigns.store import CampaignFolder, load_campaign

    task = {"key": "t1", "experiment": "sweep", "pair": "compute+memory", "split_set": "8,16", "card": "any",
            "splits": [8, 16], "options": {}, "workloads": {"builtins": {"compute": "compute", "memory": "memory"}}}
    store = CampaignFolder(tmp_path / "camp")
    store.write_spec("c1", {"t1": task}, "test")
    ident = T._identity(dict(df.attrs), 0, {"cupti_version": "13.4.0"})
    store.write_shard("t1", T._finish(df.copy(), task, ident, "c1", (0.0, 1.0)))
    camp = load_campaign(tmp_path / "camp")
    assert run_of(camp).identity == {**want, "cupti_version": "13.4.0"}


def test_a_campaign_reads_every_identity_field_and_the_driver():
    df = gcexplore.load(CAMPAIGN)
    fields = identity_fields(df)
    assert fields["driver_version"] == ["13.0"] and len(fields["device_uuid"]) == 2
    from gcexplore.analysis.identity import identity_diff

    diff = identity_diff(df[df.device_index == 0], df[df.device_index == 1])
    assert diff.set_index("field").loc["driver", "a"] == "13.0"  # was dropped for campaign rows


# ------------------------------------------------------------ computed once


def test_the_explorer_summarises_the_run_once_over_three_redraws(monkeypatch):
    """From the recorded sweep and two slider moves (three redraws): the overlap summary and the
    lower bound are each computed once, whoever asks (best_layout, plot, table)."""
    from gcexplore import widgets as GW

    counts = {"summary": 0, "bound": 0}
    real_summary, real_bound = O._summarize_overlap, O._lower_bound

    def summary(df):
        counts["summary"] += 1
        return real_summary(df)

    def bound(df):
        counts["bound"] += 1
        return real_bound(df)

    monkeypatch.setattr(O, "_summarize_overlap", summary)
    monkeypatch.setattr(O, "_lower_bound", bound)
    df = S.sweep_df(recorded=True, seed=11)
    sx = GW.SweepExplorer.from_results(df)
    sx.split_slider.value = 24
    sx.split_slider.value = 40
    assert sx.redraws["summary"] == 3 and sx.last_error is None
    assert counts == {"summary": 1, "bound": 1}


def test_the_counter_sees_a_second_frame():
    """The memo is per frame: a changed copy is summarised again (the counter can fail)."""
    df = S.sweep_df(seed=12)
    a = gcexplore.summarize(df)
    df["makespan_ms"] *= 1.5  # changed in place (the same frame object): a new fingerprint
    b = gcexplore.summarize(df)
    assert not a["makespan_median_ms"].equals(b["makespan_median_ms"])
    c = gcexplore.summarize(df)
    c.loc[0, "median_ms"] = -1.0  # a caller's edit never reaches the kept summary
    assert gcexplore.summarize(df).loc[0, "median_ms"] != -1.0


def test_the_text_report_computes_the_lower_bound_once(monkeypatch):
    from gcexplore.views.report import layout_report

    calls = []
    real = O._lower_bound
    monkeypatch.setattr(O, "_lower_bound", lambda df: calls.append(1) or real(df))
    text = layout_report(S.sweep_df(seed=13))
    assert "no layout can beat" in text and calls == [1]


def test_a_run_is_had_from_its_factory_only():
    with pytest.raises(TypeError, match="run_of"):
        Run(S.sweep_df(), "sweep", {})
    df = S.sweep_df(seed=14)
    assert run_of(df).rep_makespans() is run_of(df).rep_makespans()
    assert set(RUN_COLUMNS) <= set(df.columns)


# ------------------------------------------------------------ like with like


def test_the_campaign_by_card_compares_set_by_set_and_fails_nothing():
    c = compare(CAMPAIGN, by="device_uuid")
    assert isinstance(c, Comparisons)
    assert set(c.pairs) == {"compute+copy", "compute+memory", "latency+memory"}
    assert c.one_sided == {"compute+spin": "B only"}
    assert c.compared() == 0 and len(c.regressions(0.02)) == 0  # no layout on both sides: no verdict
    for comp in c.pairs.values():
        assert (comp.table["present"] != "both").all() and comp.best["moved"] is None
        assert "cannot be told" in comp.best["note"]


def test_the_campaign_comparison_on_the_command_line_exits_3_and_says_why():
    """No layout on both sides: the gate cannot rule a regression out (exit 3), it does not pass (issue 46)."""
    r = subprocess.run([sys.executable, "-m", "gcexplore.cli", "compare", str(CAMPAIGN), "--by", "device_uuid",
                        "--fail-on-regression", "2"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 3 and "nothing was compared" in r.stderr, r.stderr
    assert "nothing like-for-like" in r.stdout and "measured on" in r.stdout and "compute+spin" in r.stdout
    assert "SLOW" not in r.stdout.replace("0 SLOW", "")


@pytest.mark.parametrize("field", [f.name for f in IDENTITY])
def test_the_campaign_by_every_identity_column(field):
    df = gcexplore.load(CAMPAIGN)
    values = df[field].astype(str).nunique() if field in df.columns else 0
    if values == 2:
        c = compare(df, by=field)
        assert isinstance(c, (Comparison, Comparisons))
    elif values > 2:
        with pytest.raises(ValueError, match="labels="):
            compare(df, by=field)
    else:  # one value, or a field this older file lacks: a message that names what does differ
        with pytest.raises(ValueError, match="device_uuid \\(2 values\\)"):
            compare(df, by=field)


def test_by_reads_the_identitys_short_names():
    df = gcexplore.load(CAMPAIGN)
    with pytest.raises(ValueError, match="every row has driver_version '13.0'.*device_uuid \\(2 values\\)"):
        compare(df, by="driver")
    c = compare(df, by="uuid")
    assert isinstance(c, Comparisons) and c.by == "device_uuid"


def test_frames_that_mix_workload_sets_are_compared_set_by_set():
    a1, a2 = S.sweep_df(seed=21, repeats=20), S.sweep_df(seed=22, repeats=20)
    a2["workload"] = a2["workload"].map({"compute": "latency", "memory": "copy"})
    b1 = S.sweep_df(seed=23, repeats=20)
    b1["makespan_ms"] *= 1.2
    b1["duration_ms"] *= 1.2
    a2["run_id"] = "synthetic-22b"
    mixed = pd.concat([a1, a2], ignore_index=True)
    assert [k for k, _ in measured_groups(mixed)] == ["compute+memory", "latency+copy"]
    c = compare(mixed, b1)
    assert isinstance(c, Comparisons) and list(c.pairs) == ["compute+memory"]
    assert c.one_sided == {"latency+copy": "A only"}
    one = c.pairs["compute+memory"]
    assert one.counts()["SLOW"] > 0 and one.best["moved"] is False  # the same pair, 20% slower


def test_best_split_moved_is_decided_over_layouts_both_sides_measured():
    """A measured every 8 SMs, B every 16: A's best (at an 8-step layout B never measured) is not
    compared with B's best as if B had; moved is decided over the common grid and says so."""
    a = S.sweep_df(seed=31)
    b = S.sweep_df(seed=32)
    b = b[b["split_sm_count"] % 16 == 0].reset_index(drop=True)
    best_a = gcexplore.best_split(a)["layout"]
    if int(best_a.split("+")[0]) % 16 == 0:  # make A's best one that B did not measure
        odd = a["split_sm_count"] == 88
        a.loc[odd, "makespan_ms"] *= 0.5
        best_a = gcexplore.best_split(a)["layout"]
    assert int(best_a.split("+")[0]) % 16 != 0
    c = compare(a, b)
    assert c.best["a"]["layout"] == best_a
    assert c.best["a_common"]["layout"] != best_a and c.best["moved"] in (True, False)
    assert f"A's best overall, {best_a}, was measured on that side only" in c.best["note"]
    from gcexplore.views.compare_text import describe

    assert any("measured on that side only" in line for line in describe(c))


# ------------------------------------------------------------- one recipe grammar


def test_one_recipe_grammar_parses_and_checks():
    from gcexplore.workloads.spec import is_recipe, parse_recipe, workload_names

    r = parse_recipe("memory:n=1048576")
    assert (r.name, dict(r.options)) == ("memory", {"n": 1048576})
    assert is_recipe("memory:n=1048576") and is_recipe("spin") and not is_recipe("mymod:make")
    assert workload_names(["compute", "memory:n=1048576"]) == ["compute", "memory"]
    for bad, says in (("memory:q=1", "has no option 'q'"), ("memory:n=-4", "must be positive"),
                      ("memory:n", "bad workload option"), ("nope:n=1", "unknown built-in")):
        with pytest.raises(ValueError, match=says):
            parse_recipe(bad)


class _Built(Exception):
    pass


@pytest.fixture
def built(monkeypatch, h100_like):
    """Recipes built through the one grammar, recorded instead of compiled (no GPU)."""
    from gcexplore.workloads import spec

    seen = []

    def fake(name, device=0, **options):
        seen.append((name, options))
        raise _Built(name)

    monkeypatch.setattr(spec, "builtin", fake)
    monkeypatch.setattr("gcexplore.experiments.experiment.device_info", lambda device=0: h100_like)
    return seen


def test_the_library_sweep_takes_a_recipe(built):
    with pytest.raises(_Built):
        gcexplore.sweep({"compute": "compute", "memory": "memory:n=1048576"}, progress=False)
    with pytest.raises(_Built):
        gcexplore.sweep(["memory:n=1048576", "spin:us=50"], progress=False)
    assert ("memory", {"n": 1048576}) in built


def test_the_pm_child_and_dram_timeline_take_a_recipe(built):
    from gcexplore.experiments import _pm_child, pm

    spec = pm._workload_spec({"memory": "memory:n=1048576", "compute": "compute"})
    assert spec == {"names": {"memory": "memory:n=1048576", "compute": "compute"}}
    assert pm._workload_spec("memory:n=1048576") == {"names": {"memory": "memory:n=1048576"}}
    assert pm._workload_spec("mymod:make") == {"factory": "mymod:make"}
    with pytest.raises(_Built):
        _pm_child._workloads({**spec, "device": 0})
    assert built[0] == ("memory", {"n": 1048576})


def test_the_campaign_task_and_the_command_line_take_a_recipe(built):
    from gcexplore.cli.args import Usage, workload_names
    from gcexplore.campaigns import _task as T

    with pytest.raises(_Built):
        T._build({"builtins": {"memory": "memory:n=1048576"}}, None, 0)
    assert built == [("memory", {"n": 1048576})]
    assert workload_names(["memory:n=1048576", "memory"]) == [("memory", "memory", {"n": 1048576}),
                                                               ("memory_2", "memory", {})]
    with pytest.raises(Usage, match="has no option 'q'"):
        workload_names(["memory:q=1"])


def test_no_test_puts_bench_ahead_of_installed_packages():
    """bench/comm.py ahead of site-packages shadows the `comm` package ipywidgets imports: every explorer
    test after such a module failed on the GPU machine (batch 2). Tests append bench/ instead."""
    bad = []
    for p in sorted((ROOT / "tests").glob("*.py")):
        for n, line in enumerate(p.read_text().splitlines(), 1):
            if re.search(r"sys\.path\.insert\(0,.*bench", line) or re.search(r"sys\.path\.insert\(0, str\(bench\)", line):
                bad.append(f"{p.name}:{n}: {line.strip()}")
    assert bad == []
