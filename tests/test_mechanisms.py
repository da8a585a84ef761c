"""The mechanisms family on a CPU: cross-process alignment on hand-made stamps, the table and its
sentences on a synthetic run, the figure, the kind through save and load, the course page, and bad
input refused before any GPU work."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gcexplore
from gcexplore import schema
from gcexplore.results import kinds
from gcexplore.mechanisms import MECHANISMS, TABLE_COLUMNS, align_clients, pair_specs
from gcexplore.mechanisms.analysis import mechanisms_sentences, mechanisms_table

SPLITS = {24: "24+108", 64: "64+68", 104: "104+28"}
#: base times (ms) of the critical workload and the other, per mechanism (made up, distinct)
BASE = {"green": (0.30, 1.60), "mps": (0.35, 1.55), "streams": (0.80, 1.40), "priority": (0.40, 1.50),
        "sequential": (0.25, 1.20)}


def synthetic(reps: int = 40, seed: int = 3) -> pd.DataFrame:
    """A mechanisms frame: every mechanism at three splits, durations drawn around BASE."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, layout in SPLITS.items():
        for mech, (c, o) in BASE.items():
            for rep in range(reps):
                dc, do = c * (1 + 0.1 * rng.random()) * (128 / (k + 24)), o * (1 + 0.1 * rng.random())
                sc, so = (0.0, dc) if mech == "sequential" else (0.0, 0.001 * rep % 0.01)
                makespan = max(sc + dc, so + do)
                for name, crit, start, dur, sms in (("latency", True, sc, dc, k), ("memory", False, so, do, 132 - k)):
                    rows.append({"mechanism": mech, "layout": layout, "split_sm_count": k, "rep": rep, "round": 0,
                                 "workload": name, "critical": crit, "sms": sms if mech in ("green", "mps") else 132,
                                 "thread_pct": 100 * sms / 132 if mech == "mps" else np.nan, "priority_level": None,
                                 "start_ms": start, "duration_ms": dur, "makespan_ms": makespan,
                                 "timer_span_ms": np.nan, "clock": "globaltimer" if mech == "mps" else "events"})
    return schema.frame(rows, "mechanisms", {"device_name": "Synthetic H200", "device_sm_count": 132,
                                             "run_id": "synth01", "date": "2026-12-01"})


# ----------------------------------------------------------------------------- alignment


def test_alignment_puts_every_client_on_the_gpu_clock():
    # rep 0: memory starts 5 us before latency; rep 1: latency first and memory ends last
    stamps = {"latency": [(1_000_005_000, 1_000_305_000, 0.31), (2_000_000_000, 2_000_200_000, 0.21)],
              "memory": [(1_000_000_000, 1_001_500_000, 1.51), (2_000_020_000, 2_001_020_000, 1.01)]}
    rows = {(r["rep"], r["workload"]): r for r in align_clients(stamps)}
    assert rows[0, "memory"]["start_ms"] == 0.0
    assert rows[0, "latency"]["start_ms"] == pytest.approx(0.005)
    assert rows[0, "latency"]["timer_span_ms"] == pytest.approx(0.3)
    assert rows[0, "latency"]["makespan_ms"] == pytest.approx(1.5)  # first stamp to last, both clients
    assert rows[1, "memory"]["start_ms"] == pytest.approx(0.02)
    assert rows[1, "latency"]["makespan_ms"] == rows[1, "memory"]["makespan_ms"] == pytest.approx(1.02)
    assert rows[1, "memory"]["duration_ms"] == 1.01  # the client's own events, kept as they were


def test_alignment_refuses_what_cannot_be_aligned():
    with pytest.raises(ValueError, match="no client stamps"):
        align_clients({})
    with pytest.raises(ValueError, match="different numbers of repetitions"):
        align_clients({"a": [(0, 1, 0.0)], "b": []})
    with pytest.raises(ValueError, match=r"client 'a': stamp ends before it starts in repetition\(s\) \[1\]"):
        align_clients({"a": [(0, 1, 0.0), (5, 4, 0.0)], "b": [(0, 1, 0.0), (1, 2, 0.0)]})


# ----------------------------------------------------------------------------- the table


def test_table_computes_each_number_from_the_rows():
    df = synthetic()
    t = mechanisms_table(df)
    assert list(t.columns) == list(TABLE_COLUMNS)
    assert len(t) == len(SPLITS) * len(MECHANISMS)
    assert list(t[t["split_sm_count"] == 24]["mechanism"]) == list(MECHANISMS)
    for (k, mech), row in t.set_index(["split_sm_count", "mechanism"]).iterrows():
        m = df[(df["split_sm_count"] == k) & (df["mechanism"] == mech)]
        crit = m[m["workload"] == "latency"]["duration_ms"]
        seq = df[(df["split_sm_count"] == k) & (df["mechanism"] == "sequential")]
        assert row["critical_p99_ms"] == pytest.approx(np.percentile(crit, 99))
        assert row["makespan_ms"] == pytest.approx(m.drop_duplicates("rep")["makespan_ms"].median())
        assert row["critical_interference"] == pytest.approx(
            crit.median() / seq[seq["workload"] == "latency"]["duration_ms"].median())
        assert row["reps"] == 40
        assert row["critical"] == "latency" and row["other"] == "memory"
    mps = t[(t["mechanism"] == "mps") & (t["split_sm_count"] == 64)].iloc[0]
    assert (mps["critical_sms"], mps["other_sms"], mps["clock"]) == (64, 68, "globaltimer")


def test_sentences_are_computed_from_the_table():
    t = mechanisms_table(synthetic())
    sentences = mechanisms_sentences(t)
    assert len(sentences) == len(SPLITS)
    for s, (k, rows) in zip(sentences, t.groupby("split_sm_count")):
        fast = rows.loc[rows["makespan_ms"].idxmin()]
        shared = rows[rows["mechanism"] != "sequential"]
        calm = shared.loc[shared["critical_p99_ms"].idxmin()]
        assert f"given {k} SMs" in s
        assert f"({fast['makespan_ms']:.3g} ms)" in s
        assert f"({calm['critical_p99_ms']:.3g} ms; its median {calm['critical_interference']:.2f}x its time alone)" in s
        mps = rows[rows["mechanism"] == "mps"].iloc[0]
        assert f"the MPS clients saw {mps['critical_sms']} and {mps['other_sms']} SMs" in s
    # change the rows and the sentence follows
    t2 = t.copy()
    t2.loc[(t2["split_sm_count"] == 24) & (t2["mechanism"] == "mps"), "makespan_ms"] = 0.001
    assert "finishes first under MPS (0.001 ms)" in mechanisms_sentences(t2)[0]


def test_table_refuses_what_is_not_a_mechanisms_result():
    with pytest.raises(TypeError, match="expects the DataFrame"):
        mechanisms_table([1, 2])
    with pytest.raises(ValueError, match="not a mechanisms result: the columns"):
        mechanisms_table(pd.DataFrame({"mode": ["x"]}))
    with pytest.raises(ValueError, match="no rows"):
        mechanisms_table(synthetic().iloc[:0])
    df = synthetic()
    df.loc[df["mechanism"] == "mps", "critical"] = False
    with pytest.raises(ValueError, match="no critical workload"):
        mechanisms_table(df)
    with pytest.raises(ValueError, match="takes mechanisms_table"):
        mechanisms_sentences(pd.DataFrame({"a": [1]}))
    two = pd.concat([synthetic(), synthetic().assign(run_id="other")], ignore_index=True)
    with pytest.raises(ValueError, match="a mechanisms table is one run's"):  # never two runs' baselines mixed
        mechanisms_table(two)


def test_the_kind_survives_save_and_load(tmp_path):
    pytest.importorskip("pyarrow")
    df = synthetic(reps=5)
    path = tmp_path / "m.parquet"
    gcexplore.save(df, path)
    back = gcexplore.load(path)
    assert kinds.kind_of(back) == "mechanisms"
    pd.testing.assert_frame_equal(mechanisms_table(back), mechanisms_table(df))


def test_the_figure_draws_the_tables_numbers(tmp_path):
    pytest.importorskip("matplotlib")
    df = synthetic()
    fig = gcexplore.plot_mechanisms(df)
    makespan, p99 = fig.axes[:2]
    t = mechanisms_table(df)
    heights = sorted(round(p.get_height(), 9) for p in p99.patches)
    assert heights == sorted(round(v, 9) for v in t["critical_p99_ms"])
    assert sorted(round(p.get_height(), 9) for p in makespan.patches) == sorted(round(v, 9) for v in t["makespan_ms"])
    assert [x.get_text() for x in fig.legends[0].get_texts()] == [
        "green contexts", "MPS", "plain streams", "prioritised streams", "one after another"]
    fig.savefig(tmp_path / "mechanisms.png", dpi=80)
    assert (tmp_path / "mechanisms.png").stat().st_size > 10_000


def test_the_page_is_written_from_the_run():
    df = synthetic()
    page = gcexplore.mechanisms_page(df)
    t = mechanisms_table(df)
    assert page.startswith("# Green contexts, MPS or streams?")
    assert "## latency beside memory" in page and "Synthetic H200" in page
    for s in mechanisms_sentences(t):
        assert f"- {s}" in page
    assert f"{t['critical_p99_ms'].iloc[0]:.3f}" in page
    assert "`globaltimer`: one MPS client process per workload" in page


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("pair, err, match", [
    ("latency", ValueError, "is not a pair"),
    (["latency", "memory", "compute"], ValueError, "runs two workloads, got 3"),
    (["latency", "nosuch"], ValueError, "unknown built-in workload 'nosuch'"),
    (["latency", "latency"], ValueError, "must be unique"),
    (["latency", lambda stream: None], TypeError, "rebuilds it from a recipe or factory"),
    ({"a": "latency", "b": "pkg.mod:make"}, None, None),
    ("pkg.mod:make_pair", None, None),
    ({"factory": "pkg.mod:make", "kwargs": {"n": 4}, "other": 1}, ValueError, "got also"),
    ("bad:", ValueError, "neither a built-in recipe nor a factory"),
    ("nosuch", ValueError, "is not a pair"),
])
def test_pair_specs(pair, err, match):
    if err is None:
        specs = pair_specs(pair)
        assert ("whole" in specs) == isinstance(pair, str)
        return
    with pytest.raises(err, match=match):
        pair_specs(pair)


@pytest.mark.parametrize("kwargs, match", [
    ({"mechanisms": ["green", "mig"]}, "mechanisms must be distinct names of green, mps"),
    ({"mechanisms": ["green", "green"]}, "mechanisms must be distinct"),
    ({"splits": (24, 0)}, "positive SM counts"),
    ({"splits": "24"}, "positive SM counts"),
    ({"splits": ()}, "positive SM counts"),
    ({"repeats": 0}, "repeats"),
])
def test_bad_requests_fail_before_any_gpu_work(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gcexplore.compare_mechanisms(["latency", "memory"], **{"mechanisms": ["green"], **kwargs})


def test_mps_where_it_is_absent_fails_before_any_gpu_work(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(gcexplore.MpsUnavailable, match="MPS is absent"):
        gcexplore.compare_mechanisms(["latency", "memory"], mechanisms=["mps"])


# ----------------------------------------------------------------------------- the shipped run


def _shipped():
    try:
        return gcexplore.load_mechanisms()
    except FileNotFoundError as e:
        pytest.skip(f"the recorded mechanisms run is not shipped yet ({e})")


def test_the_shipped_run_has_both_pairs_at_three_splits_under_every_mechanism():
    df = _shipped()
    for _, run in df.groupby("run_id"):
        t = mechanisms_table(run)
        assert t["split_sm_count"].nunique() == 3
        assert set(t["mechanism"]) == set(MECHANISMS)
    assert df["run_id"].nunique() == 2


def test_the_course_page_reads_the_shipped_run():
    df = _shipped()
    page = gcexplore.mechanisms_page()
    assert page.count("\n## ") == 3  # two pairs, then the clock
    assert all(f"- {s}" in page for _, run in df.groupby("run_id")
               for s in mechanisms_sentences(mechanisms_table(run)))


# ----------------------------------------------------------------------------- the experiment's framing


class _Stub:
    """A workload stand-in: the experiment only names, places and closes it here."""

    def __init__(self, name):
        self.name, self.closed = name, False

    def close(self):
        self.closed = True


@pytest.fixture
def staged(monkeypatch, h100_like):
    """compare_mechanisms with its GPU calls replaced: the core's run constructor is real (identity,
    run id, frame), the sweep returns hand-made rows, priority / MPS / %smid give canned answers."""
    import contextlib

    from gcexplore.experiments.experiment import Experiment
    from gcexplore.mechanisms import experiment as E

    stubs = {"latency": _Stub("latency"), "memory": _Stub("memory")}
    monkeypatch.setattr(E, "build_pair", lambda specs, device=0: dict(stubs))
    monkeypatch.setattr(E, "mps_refusal", lambda: None)

    @contextlib.contextmanager
    def fake_experiment(kind, wls, device, options):
        yield Experiment(kind, h100_like, options, list(wls.values()), "run0001")

    def fake_sweep(wls, ks, *, modes, repeats, **kw):
        assert list(wls) == ["latency", "memory"]  # the critical workload first: it gets the split's first share
        rows = [{"layout": f"{k}+{132 - k}", "split_sm_count": k, "mode": m, "rep": r, "round": 0, "workload": n,
                 "sm_count": (k if i == 0 else 132 - k) if m == "concurrent" else 132, "start_ms": 0.0,
                 "duration_ms": 1.0 + i, "makespan_ms": 2.0}
                for k in ks for m in modes for r in range(repeats) for i, n in enumerate(wls)]
        df = pd.DataFrame(rows)
        df.attrs["run_id"] = "sweep01"
        return df

    monkeypatch.setattr(E, "experiment", fake_experiment)
    monkeypatch.setattr(E, "sweep", fake_sweep)
    monkeypatch.setattr(E, "_priority", lambda run, wls, critical, layouts, rows: None)
    monkeypatch.setattr(E, "_green_sm_ids", lambda run, layouts, names: {"green|24+108|latency": list(range(24))})
    return E, stubs


def test_rows_are_framed_by_the_core_run_constructor(staged):
    _, stubs = staged
    df = gcexplore.compare_mechanisms(["latency", "memory"], (20, 64), mechanisms=["green", "streams"], repeats=3)
    assert df.attrs["kind"] == "mechanisms" and kinds.kind_of(df) == "mechanisms"
    assert set(df["run_id"]) == {"run0001"} and df.attrs["sweep_run_id"] == "sweep01"
    assert set(df["device_name"]) == {"NVIDIA H100 80GB HBM3"}
    assert sorted(df["layout"].unique()) == ["24+108", "64+68"]  # 20 granted as the driver rounds it: 24
    assert df.attrs["splits"] == [24, 64] and df.attrs["critical"] == "latency"
    green = df[df["mechanism"] == "green"]
    assert sorted(set(zip(green["workload"], green["sms"]))) == [("latency", 24), ("latency", 64), ("memory", 68),
                                                                  ("memory", 108)]
    assert set(df[df["mechanism"] == "streams"]["sms"]) == {132}
    assert all(w.closed for w in stubs.values())  # what it built, it closed


def test_rows_measured_before_a_failure_are_kept(staged, monkeypatch):
    E, stubs = staged

    def broken_mps(*a, **k):
        raise RuntimeError("MPS client(s) failed: memory: boom")

    monkeypatch.setattr(E, "_mps", broken_mps)
    with pytest.raises(gcexplore.MeasurementFailed, match="boom") as exc:
        gcexplore.compare_mechanisms(["latency", "memory"], (24,), mechanisms=["green", "mps"], repeats=2)
    partial = exc.value.partial
    assert len(partial) == 4 and set(partial["mechanism"]) == {"green"} and set(partial["run_id"]) == {"run0001"}
    assert all(w.closed for w in stubs.values())

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(E, "_mps", interrupted)
    with pytest.raises(gcexplore.MeasurementInterrupted) as exc:
        gcexplore.compare_mechanisms(["latency", "memory"], (24,), mechanisms=["green", "mps"], repeats=2)
    assert len(exc.value.partial) == 4


@pytest.mark.usefixtures("staged")
def test_a_named_critical_workload_goes_first():
    df = gcexplore.compare_mechanisms(["memory", "latency"], (24,), mechanisms=["green"], repeats=2,
                                      critical="latency")
    assert set(df[df["critical"]]["workload"]) == {"latency"}
    with pytest.raises(ValueError, match="critical workload 'nosuch' is not in the pair"):
        gcexplore.compare_mechanisms(["memory", "latency"], (24,), mechanisms=["green"], critical="nosuch")


def test_the_page_has_a_section_per_run():
    a, b = synthetic(), synthetic(seed=5)
    b["run_id"] = "synth02"
    b["workload"] = b["workload"].map({"latency": "matmul", "memory": "sigmoid"})
    page = gcexplore.mechanisms_page(pd.concat([a, b], ignore_index=True))
    assert "## latency beside memory" in page and "## matmul beside sigmoid" in page


class _NoDaemon:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def _clients(sms_of):
    def run_clients(specs, pcts, daemon, *, device, repeats, warmup, timeout_s):
        return {name: {"sms": list(range(sms_of(pct))), "error": None,
                       "stamps": [(1_000 * r, 1_000 * r + 500_000 * (i + 1), 0.5 * (i + 1)) for r in range(repeats)]}
                for i, (name, pct) in enumerate(pcts.items())}
    return run_clients


def test_mps_rows_carry_the_percentages_the_sms_seen_and_the_gpu_clock(staged, monkeypatch):
    E, _ = staged
    monkeypatch.setattr(E, "MpsDaemon", _NoDaemon)
    monkeypatch.setattr(E, "run_clients", _clients(lambda pct: round(132 * pct / 100)))
    df = gcexplore.compare_mechanisms(["latency", "memory"], (24,), mechanisms=["mps"], repeats=3)
    mps = df[df["mechanism"] == "mps"]
    lat, mem = mps[mps["workload"] == "latency"], mps[mps["workload"] == "memory"]
    assert list(lat["thread_pct"]) == pytest.approx([100 * 24 / 132] * 3)
    assert list(mem["thread_pct"]) == pytest.approx([100 * 108 / 132] * 3)
    assert set(lat["sms"]) == {24} and set(mem["sms"]) == {108}
    assert set(mps["clock"]) == {"globaltimer"}
    assert list(mps["makespan_ms"]) == pytest.approx([1.0] * 6)  # first stamp of either client to the last
    assert list(mem["timer_span_ms"]) == [pytest.approx(1.0)] * 3
    assert df.attrs["sm_ids"]["mps|24+108|memory"] == list(range(108))


def test_a_client_outside_mps_is_refused(staged, monkeypatch):
    E, _ = staged
    monkeypatch.setattr(E, "MpsDaemon", _NoDaemon)
    monkeypatch.setattr(E, "run_clients", _clients(lambda pct: 132))  # the limit did not apply
    with pytest.raises(gcexplore.MeasurementFailed, match="reached all 132 SMs: it ran outside") as exc:
        gcexplore.compare_mechanisms(["latency", "memory"], (24,), mechanisms=["mps"], repeats=3)
    assert isinstance(exc.value.__cause__, gcexplore.MpsUnavailable)


def test_mps_rows_of_earlier_splits_are_kept_when_a_later_split_fails(staged, monkeypatch):
    E, _ = staged
    good, calls = _clients(lambda pct: round(132 * pct / 100)), []

    def flaky(*a, **k):
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("MPS client(s) failed: latency: CUDA_ERROR_OUT_OF_MEMORY")
        return good(*a, **k)

    monkeypatch.setattr(E, "MpsDaemon", _NoDaemon)
    monkeypatch.setattr(E, "run_clients", flaky)
    with pytest.raises(gcexplore.MeasurementFailed, match="OUT_OF_MEMORY") as exc:
        gcexplore.compare_mechanisms(["latency", "memory"], (24, 64), mechanisms=["mps"], repeats=3)
    assert set(exc.value.partial["layout"]) == {"24+108"} and len(exc.value.partial) == 6
