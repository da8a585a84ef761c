"""Every result kind is declared once (gcexplore.results.kinds): each declaration complete, its columns
those of a recorded result of that kind, its functions resolvable; every kind concatenated with itself
is refused; and a frame edited in place is checked again (the memo is kept under a token the frame
carries, not under its id)."""

from __future__ import annotations

import _synthetic as S
import pandas as pd
import pytest

from gcexplore import schema
from gcexplore.analysis import summarize
from gcexplore.analysis.overlap import best_split
from gcexplore.results import kinds as K
from gcexplore.results.io import load_recorded, recorded_names
from gcexplore.results.run import run_of, token
from gcexplore.results.validate import ResultError

#: NVML clocks: absent from results recorded before the rows carried them.
OPTIONAL = set(schema._CLOCKS)


def _recorded_by_kind() -> dict[str, list[pd.DataFrame]]:
    out: dict[str, list[pd.DataFrame]] = {}
    for name in recorded_names():
        df = load_recorded(name)
        out.setdefault(K.kind_of(df), []).append(df)
    return out


RECORDED = _recorded_by_kind()


def _tune() -> pd.DataFrame:
    return S.fake_tune()


def example(kind: str) -> pd.DataFrame:
    """A result of ``kind``: recorded where one ships, else the synthetic stand-in."""
    if kind in RECORDED:
        return min(RECORDED[kind], key=len).copy()
    return {"tune": _tune}[kind]()


@pytest.mark.parametrize("kind", K.names())
def test_every_registered_kind_is_complete(kind):
    k = K.get(kind)
    assert k.name == kind and k.family and k.maker and k.row_keys
    assert k.tell_apart or k.like in K.names()
    for field in ("check", "summary", "figure"):
        assert callable(K.resolve(getattr(k, field))), field
    if k.export:
        assert callable(K.resolve(k.export))
    assert schema.COLUMNS[kind] == dict(k.columns)  # what frame() and conform() read
    assert set(k.row_keys) <= set(k.columns)
    for ident in schema.SAMPLE_IDENTITY:
        assert ident in k.columns


@pytest.mark.parametrize("kind", K.names())
def test_a_kinds_columns_are_those_of_its_recorded_results(kind):
    """Every declared column (bar NVML clocks of older files) is in a recorded result of the kind,
    every recorded one has its row keys, and kind_of tells the rows with their label gone (pd.concat
    drops it)."""
    if kind not in RECORDED:
        df = example(kind)
        assert list(df.columns) == list(K.get(kind).columns)
        return
    k = K.get(kind)
    assert min(len([c for c in k.columns if c not in df.columns and c not in OPTIONAL]) for df in RECORDED[kind]) == 0
    for df in RECORDED[kind]:
        assert set(k.row_keys) <= set(df.columns)
        bare = df.iloc[:5].copy()
        bare.attrs = {}
        told = K.kind_of(bare)
        assert told == kind or told in K.get(kind).accepts()


def test_the_serving_and_comm_kinds_are_their_families():
    assert K.get("serving").family == "serving" and K.get("comm").family == "comm"
    assert "rank" in K.get("comm").row_keys
    assert {k.family for k in K.kinds() if k.name not in ("serving", "comm", "mechanisms")} == {"core"}


def test_a_declaration_contradicting_itself_is_refused():
    cols = {"a": "str", "device_name": "str", "run_id": "str"}
    with pytest.raises(ValueError, match="row keys"):
        K.Kind("x", cols, ("b",), "a", "core", None, "m:f", "m:f", "x()")
    with pytest.raises(ValueError, match="tell_apart"):
        K.Kind("x", cols, ("a",), None, "core", None, "m:f", "m:f", "x()")
    with pytest.raises(ValueError, match="module:function"):
        K.Kind("x", cols, ("a",), "a", "core", None, "summarize", "m:f", "x()")
    with pytest.raises(ValueError, match="already registered"):
        K.register(K.Kind("sweep", cols, ("a",), "a", "core", None, "m:f", "m:f", "x()"))


def probe_check(df: pd.DataFrame, where: str) -> None:
    """The new kind's check (named by its declaration as ``test_kinds:probe_check``)."""
    if (df["probe_ms"] <= 0).any():
        raise ResultError(f"{where}: probe_ms must be > 0")


def probe_summary(df: pd.DataFrame) -> pd.DataFrame:
    return df.groupby("probe", as_index=False)["probe_ms"].median()


def test_a_new_kind_is_one_declaration(monkeypatch):
    """Registered once: kind_of tells its rows, frame builds them, summarize dispatches to its summary
    and runs its check, and its self-concatenation is refused."""
    monkeypatch.setattr(K, "_KINDS", dict(K._KINDS))
    monkeypatch.setattr(schema, "COLUMNS", dict(schema.COLUMNS))
    monkeypatch.setattr(schema.Options, "APPLIES", dict(schema.Options.APPLIES))
    cols = {"probe": "str", "rep": "int64", "probe_ms": "float64", **schema.IDENTITY_COLUMNS}
    K.register(K.Kind("probe", cols, ("probe", "rep"), "probe_ms", "core", "test_kinds:probe_check",
                      "test_kinds:probe_summary", "gcexplore.views.scaling:plot_scaling", "probe()",
                      options=("repeats", "rounds")))
    # its options are the declaration's: what its metadata records and the options column says
    assert schema.Options(repeats=6, rounds=2).metadata("probe") == {"repeats": 6, "rounds": 2}
    assert schema.options_text({"repeats": 6, "rounds": 2, "warmup": 1}, "probe") == "repeats=6, rounds=2"
    df = schema.frame([{"probe": "a", "rep": r, "probe_ms": 1.0 + r} for r in range(3)], "probe",
                      {"kind": "probe", "device_name": "X", "run_id": "r"})
    bare = df.copy()
    bare.attrs = {}
    assert K.kind_of(bare) == "probe" and list(df.columns) == list(cols)
    assert summarize(df)["probe_ms"].tolist() == [2.0]
    with pytest.raises(ResultError, match="repeat a repetition"):
        summarize(pd.concat([df, df], ignore_index=True))
    df.loc[0, "probe_ms"] = -1.0
    with pytest.raises(ResultError, match="probe_ms must be > 0"):
        summarize(df)


@pytest.mark.parametrize("kind", K.names())
def test_each_kind_declares_the_options_that_apply_to_it(kind):
    # the declaration owns them (issue 43): Options reads what registering the kind put there, nothing else
    k = K.get(kind)
    assert schema.Options.APPLIES[kind] == k.options
    assert set(k.options) <= {f.name for f in schema.dataclasses.fields(schema.Options)}
    assert set(schema.Options().metadata(kind)) == set(k.options)


def test_the_options_of_the_core_kinds_and_the_mechanisms_kind_come_from_their_declarations():
    from pathlib import Path

    sweep = ("repeats", "warmup", "rounds", "modes", "l2_flush", "graphs", "rounding", "trace")
    assert K.get("sweep").options == K.get("overlap").options == sweep
    assert K.get("occupancy").options == ("warmup",) and K.get("trace").options == ()
    assert K.get("mechanisms").options == ("repeats", "warmup", "rounds")
    root = Path(__file__).resolve().parents[1] / "gcexplore"
    setters = [str(p.relative_to(root)) for p in root.rglob("*.py") if "APPLIES" in p.read_text()
               and p.name not in ("schema.py", "kinds.py")]
    assert setters == [], "only the registry writes Options.APPLIES"
    with pytest.raises(ValueError, match="options must be a tuple of Options fields"):
        K.Kind("x", {"a": "str"}, ("a",), "a", "core", None, "m:f", "m:f", "x()", options=("repeat",))
    with pytest.raises(ValueError, match="no registered result kind 'nope' declares its options"):
        schema.Options().metadata("nope")


# ------------------------------------------------------------------------ self-concatenation


@pytest.mark.parametrize("kind", K.names())
def test_every_kind_concatenated_with_itself_is_refused(kind):
    """pd.concat([df, df]) is not a result: summarize refuses it, naming the repeated rows and the fix,
    instead of counting every repetition twice (an isolation result gave 840 repetitions for 420)."""
    df = example(kind)
    summarize(df)  # the result itself is fine
    twice = pd.concat([df, df], ignore_index=True)
    twice.attrs = dict(df.attrs)
    with pytest.raises(ResultError, match=r"repeat a repetition.*drop_duplicates") as e:
        summarize(twice)
    assert ", ".join(K.get(kind).row_keys) in str(e.value)
    once = twice.drop_duplicates(ignore_index=True)  # the fix the message names
    assert len(once) == len(df)
    summarize(once)


def test_isolation_twice_no_longer_doubles_its_repetitions():
    df = load_recorded("isolation")
    reps = summarize(df)["reps"]
    assert (reps > 0).all()
    with pytest.raises(ResultError, match="repeat a repetition"):
        summarize(pd.concat([df, df]))


def test_older_isolation_rows_get_their_launch_in_measured_order():
    df = load_recorded("isolation")
    crit = df[(df["role"] == "critical") & (df["scenario"] == "alone") & (df["rep"] == 0)]
    assert crit["launch"].tolist() == list(range(len(crit)))


# ------------------------------------------------------------------------ the token


def test_an_unchanged_frame_keeps_its_token_and_a_copy_gets_its_own():
    df = load_recorded("sweep")
    t = token(df)
    df.groupby("layout").size()  # reading changes nothing
    assert token(df) == t
    assert token(df.copy()) != t and token(df[df["mode"] == "concurrent"]) != t
    assert token(df) == t


@pytest.mark.parametrize("edit", [
    lambda d: d.loc.__setitem__((d.index[0], "makespan_ms"), 99.0),
    lambda d: d.at.__setitem__((d.index[0], "workload"), "other"),
    lambda d: d.__setitem__("makespan_ms", d["makespan_ms"] * 1.5),
    lambda d: d.attrs.__setitem__("kind", "overlap"),
    lambda d: d.replace({"workload": {"compute": "x"}}, inplace=True),
    lambda d: d.fillna({"l2_cache_bytes": 1}, inplace=True),
], ids=["loc", "at", "column", "attrs", "replace", "fillna"])
def test_any_edit_in_place_gives_a_new_token(edit):
    df = load_recorded("sweep")
    t = token(df)
    edit(df)
    assert token(df) != t


def test_a_workload_renamed_in_place_is_summarised_again():
    df = load_recorded("sweep")
    before = summarize(df)
    assert "compute" in set(before["workload"])
    df.loc[df["workload"] == "compute", "workload"] = "gemm"
    after = summarize(df)
    assert "compute" not in set(after["workload"]) and "gemm" in set(after["workload"])
    assert run_of(df).measured != "compute+memory"


def test_a_bogus_mode_set_in_place_is_checked_again_not_answered_from_the_memo():
    """Once summarised and split, the same frame edited in place: summarize answers for the edited
    rows, best_split says which mode it lacks (it once returned the old answer, or a raw KeyError)."""
    df = load_recorded("sweep")
    summarize(df)
    best = best_split(df)
    df.loc[df["mode"] == "concurrent", "mode"] = "bogus"
    assert "bogus" in set(summarize(df)["mode"]) and "concurrent" not in set(summarize(df)["mode"])
    with pytest.raises(ValueError, match=r"best_split needs 'concurrent' rows.*'bogus'"):
        best_split(df)
    df["mode"] = "bogus"  # every row: the alone rows of one repetition now collide
    with pytest.raises(ResultError, match="ran on two partitions"):
        summarize(df)
    assert best.name == "104+28"


def test_the_memo_still_computes_once_for_an_unchanged_frame():
    df = load_recorded("sweep")
    calls = []
    run_of(df).memo("probe", lambda: calls.append(1) or 1)
    run_of(df).memo("probe", lambda: calls.append(1) or 1)
    assert calls == [1]
    df.loc[df.index[0], "duration_ms"] = 5.0
    run_of(df).memo("probe", lambda: calls.append(1) or 1)
    assert calls == [1, 1]
