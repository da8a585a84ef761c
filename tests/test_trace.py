"""Kernel traces on the CPU: attribution from synthetic CUPTI records, busy time, gaps, export.

The records come from :mod:`_synthetic_trace` (a stand-in ``cupti`` module that reports
kernels the way CUPTI does); nothing here is a measurement.
"""

from __future__ import annotations

import builtins
import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace as NS

import numpy as np
import pandas as pd
import pytest

import _synthetic_trace as T
import gcexplore
from gcexplore.analysis import trace as busy
from gcexplore.trace import records as cupti_records
from gcexplore.results import io as results
from gcexplore.results.chrome_trace import to_chrome_trace
from gcexplore.trace import collector as tracing
from gcexplore.trace import user as user_trace
from gcexplore.views import plot as P
from gcexplore import schema
from gcexplore.results.validate import ResultError
from gcexplore.results.kinds import kind_of
from gcexplore.schema import Options, columns

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _fresh_context_records(monkeypatch):
    """Each test sees only the context records it made (the collector keeps them per process)."""
    monkeypatch.setattr(tracing, "_CONTEXTS_SEEN", {})


@pytest.fixture
def traced():
    tr, df = T.trace_df()
    return tr, df


# ----------------------------------------------------------------------------- attribution


def test_every_kernel_lands_in_its_partition_workload_and_repetition(traced):
    tr, _ = traced
    assert list(tr.columns) == columns("trace") and kind_of(tr) == "trace"
    conc = tr[tr["mode"] == "concurrent"]
    assert set(zip(conc["workload"], conc["partition"], conc["sm_count"])) == {("matmul", "p0", 24),
                                                                               ("sigmoid", "remainder", 108)}
    assert set(tr[tr["mode"] == "streams"]["partition"]) == {"device"}
    assert sorted(set(tr["rep"])) == [0, 1]  # warm-up left out
    assert len(tr) == 2 * 2 * (1 + 3)
    assert tr["name"].str.startswith("void kernel<").all()  # demangled
    # times relative to the repetition's gate end, as events are to the common start
    assert tr[(tr["mode"] == "concurrent") & (tr["workload"] == "matmul")]["start_ms"].tolist() == \
        pytest.approx([0.005, 0.005])
    d = tr.attrs["trace_diagnostics"]
    assert d["rows"] == len(tr) and d["untagged"] == 1 and d["gate"] == 4 and d["settle"] == 8
    assert d.get("partition_mismatch", 0) == 0 and d.get("unknown_context", 0) == 0


def test_partition_comes_from_the_context_id_not_from_the_tag():
    """A kernel whose record names another context than the partition it was launched for is
    attributed to the context it ran in, and the mismatch is counted."""
    records = [{"activity": "kernel", "name": "k", "start": 10, "end": 20, "context_id": 2, "stream_id": 1,
                "correlation_id": 5, **{f: 0 for f in cupti_records.KERNEL_INTS},
                "static_shared_bytes": 0, "dynamic_shared_bytes": 0, "bytes": math.nan},
               {"activity": "kernel", "name": "gate", "start": 1, "end": 5, "context_id": 1, "stream_id": 0,
                "correlation_id": 4, **{f: 0 for f in cupti_records.KERNEL_INTS},
                "static_shared_bytes": 0, "dynamic_shared_bytes": 0, "bytes": math.nan}]
    rows, diag = cupti_records.trace_rows(records, {5: 2, 4: 1}, {1: (0, "gate", "", "", 0), 2: (0, "workload", "w", "p0", 0)},
                                    {0: ("8+124", "concurrent", 0)}, {3: ("p0", 8), 2: ("remainder", 124)})
    assert rows[0]["partition"] == "remainder" and rows[0]["sm_count"] == 124
    assert rows[0]["start_ms"] == pytest.approx(5e-6)
    assert diag["partition_mismatch"] == 1


def test_green_context_records_give_sms_tpcs_and_the_tpc_map(traced):
    tr, _ = traced
    greens = {g["partition"]: g for g in tr.attrs["green_contexts"]}
    assert greens["p0"]["num_multiprocessors"] == 24 and greens["p0"]["num_tpcs"] == 12
    assert greens["remainder"]["source"] == "GREEN_CONTEXT"
    assert greens["device"]["source"] == "gcexplore"  # no record: from the partition itself
    tpcs = busy.tpc_map(tr)
    per = tpcs.groupby("partition")["tpc"].apply(set)
    assert len(per["p0"]) == 12 and len(per["remainder"]) == 54
    assert not per["p0"] & per["remainder"]


def _user_trace_in_contexts_of_cuptis_own(parts):
    """A kernel_trace block given ``parts`` whose kernels CUPTI reports under green-context ids
    of its own (70, 80: not the ids get_context_id gave for the partitions), with their masks."""
    fake = T.FakeCupti()
    c = user_trace.UserCollector("24+108", cupti=fake).start()
    kt = user_trace.KernelTrace(c)
    for p in parts:
        c.watch(p)
    fake.green(70, 24, [0xFFF])
    fake.green(80, 108, [~0xFFF & (1 << 64) - 1, 0x3])
    with kt.region("mine"):
        fake.launch(70, 3, "k", 2_000, 5_000)
        fake.launch(80, 4, "k", 2_000, 6_000)
    try:
        return c.frame({"device_name": "synthetic", "run_id": "u"})
    finally:
        c.close()


def test_user_trace_tpc_map_names_the_partitions_it_was_given():
    df = _user_trace_in_contexts_of_cuptis_own([T.PARTS["p0"], T.PARTS["remainder"]])
    assert set(df["partition"]) == {"context 70", "context 80"}  # rows: CUPTI's ids, as recorded
    per = busy.tpc_map(df).groupby("partition")["tpc"].apply(set)
    assert set(per.index) == {"p0", "remainder"}  # named by their SM counts
    assert len(per["p0"]) == 12 and len(per["remainder"]) == 54 and not per["p0"] & per["remainder"]


def test_user_trace_tpc_map_keeps_context_ids_where_sm_counts_do_not_decide():
    twin = NS(name="twin", sm_count=24, context=NS(handle=5))  # two partitions of 24 SMs: no way to tell which record is which
    df = _user_trace_in_contexts_of_cuptis_own([T.PARTS["p0"], twin])
    assert set(busy.tpc_map(df)["partition"]) == {"context 70", "context 80"}


def test_rows_carry_their_repetition_group(traced):
    tr, _ = traced
    assert tr["group"].dtype == "int64"
    per_label = tr.groupby(["mode", "rep"])["group"].nunique()
    assert (per_label == 1).all()  # one group per repetition here
    assert tr.groupby("group")[["mode", "rep"]].nunique().eq(1).all().all()
    origins = {(o["mode"], o["rep"]): o["group"] for o in tr.attrs["rep_origins"]}
    assert {(r.mode, r.rep): r.group for r in tr.itertuples()} == origins  # warm-up groups have no rows


def test_trace_groups_keep_two_groups_of_one_label_apart():
    """alone with an L2 flush runs each workload in its own repetition group under one label:
    the group column keeps them apart, each with its own time zero."""
    fake = T.FakeCupti()
    c = tracing.Collector(cupti=fake).start()
    for wl, part in (("matmul", "p0"), ("sigmoid", "remainder")):
        c.group(("24+108", "alone", 0))
        t0 = fake.clock
        with c.tag("gate"):
            fake.launch(T.DEVICE_CTX, 7, "gcx_spin", t0 - 60_000, t0)
        slot = NS(workload=NS(name=wl), partition=T.PARTS[part])
        with c.tag("workload", slot, 0):
            fake.launch(T.PARTS[part].context.handle, 10, "k", t0 + 5_000, t0 + 50_000)
        fake.clock += 10_000_000
    tr = c.frame(T.overlap_df().attrs)
    c.close()
    groups = schema.trace_groups(tr)
    assert [(o["workloads"], len(rows)) for o, rows in groups] == [(["matmul"], 1), (["sigmoid"], 1)]
    assert groups[1][0]["origin_ns"] - groups[0][0]["origin_ns"] == 10_000_000
    assert tr["start_ms"].tolist() == pytest.approx([0.005, 0.005])  # each from its own group's gate


@pytest.mark.parametrize("name", ["trace", "pm_trace"])
def test_recorded_traces_without_the_group_column_load_with_it(name):
    """Traces saved before rows carried their group get it at load, from rep_origins where
    recorded (the rows each entry names), else one group per layout, mode and repetition."""
    tr = gcexplore.load_recorded(name)
    assert tr["group"].dtype == "int64" and (tr["group"] >= 0).all()
    groups = schema.trace_groups(tr)
    assert sum(len(rows) for _, rows in groups) == len(tr)
    origins = tr.attrs.get("rep_origins")
    if origins:
        assert [o["group"] for o in origins] == list(range(len(origins)))
        for o, rows in groups:
            assert set(rows["workload"]) <= set(o["workloads"]) and "origin_ns" in o
    else:
        assert len(groups) == tr.groupby(["layout", "mode", "rep"]).ngroups


# ----------------------------------------------------------------------------- failures


def test_missing_cupti_fails_in_one_sentence(monkeypatch):
    real = builtins.__import__

    def no_cupti(name, *a, **k):
        if name.startswith("cupti"):
            raise ImportError("No module named 'cupti'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_cupti)
    with pytest.raises(gcexplore.TraceUnavailable, match=r"needs cupti-python.*event timing works without it") as e:
        tracing.Collector()
    assert str(e.value).count(". ") == 0  # one sentence
    assert isinstance(e.value, gcexplore.UnsupportedError)


def test_a_profiler_holding_cupti_is_named(monkeypatch):
    with pytest.raises(gcexplore.TraceUnavailable, match="another profiler .*Nsight Systems"):
        tracing.Collector(cupti=T.FakeCupti(refuse=True)).start()
    assert tracing._active is None  # nothing left half-started


def test_probe_says_what_cupti_returned():
    class Stream:
        def sync(self):
            pass

    for options, message in (({"deliver": False}, "no kernel record"),
                             ({"correlate": False}, "none carried gcexplore's external correlation id")):
        fake = T.FakeCupti(**options)
        with tracing.Collector(cupti=fake) as c, pytest.raises(gcexplore.TraceUnavailable, match=message):
            c.probe(lambda: fake.launch(1, 0, "gcx_spin", 5, 10), Stream())


def test_one_trace_at_a_time():
    with tracing.Collector(cupti=T.FakeCupti()):
        with pytest.raises(gcexplore.TraceUnavailable, match="already running"):
            tracing.Collector(cupti=T.FakeCupti()).start()
    tracing.Collector(cupti=T.FakeCupti()).start().close()


def test_trace_option_is_checked_and_recorded():
    assert Options(trace=True).metadata("sweep")["trace"] is True
    assert "trace" not in Options().metadata("occupancy")
    with pytest.raises(TypeError, match="trace must be True or False"):
        Options(trace="yes")


def test_import_stays_light_with_tracing_names():
    code = ("import sys, gcexplore; gcexplore.kernel_trace; gcexplore.busy_time; "
            "sys.exit(1 if any(m.startswith('cupti') for m in sys.modules) else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


# ----------------------------------------------------------------------------- numbers


def test_busy_span_gpu_busy_and_gaps(traced):
    tr, _ = traced
    b = busy.busy_time(tr).set_index(["mode", "rep", "workload"])
    sig = b.loc[("concurrent", 0, "sigmoid")]
    assert sig["kernels"] == 3
    assert sig["busy_span_ms"] == pytest.approx(0.36)
    assert sig["gpu_busy_ms"] == pytest.approx(0.30)
    assert sig["idle_ms"] == pytest.approx(0.06) and sig["gaps"] == 2
    assert sig["largest_gap_ms"] == pytest.approx(0.03)
    gaps = busy.kernel_gaps(tr)
    assert len(gaps) == 8 and gaps["gap_us"].tolist() == pytest.approx([30.0] * 8)
    assert busy.kernel_gaps(tr, min_gap_us=31).empty
    assert gcexplore.summarize(tr).equals(busy.busy_time(tr))


def test_union_counts_overlapping_kernels_once():
    starts, ends = np.array([0.0, 1.0, 5.0]), np.array([3.0, 2.0, 6.0])
    merged = busy._merge(starts, ends)
    assert [(a, b) for a, b, *_ in merged] == [(0.0, 3.0), (5.0, 6.0)]


def test_streams_rates_are_withheld_without_a_trace_and_truthful_with_one(traced):
    tr, df = traced
    s = gcexplore.summarize(df).set_index(["mode", "workload"])
    assert math.isnan(s.loc[("streams", "sigmoid"), "bandwidth_gbs"])
    assert "wait for SMs" in s.attrs["rate_notes"]["streams"]
    assert s.loc[("concurrent", "sigmoid"), "bandwidth_gbs"] > 0
    t = gcexplore.summarize(df, trace=tr).set_index(["mode", "workload"])
    # 1e9 bytes over 0.3 ms of GPU-busy time, in both modes: the wait is not counted
    assert t.loc[("streams", "sigmoid"), "bandwidth_gbs"] == pytest.approx(1e9 / 0.3e-3 / 1e9)
    assert t.loc[("concurrent", "sigmoid"), "bandwidth_gbs"] == pytest.approx(1e9 / 0.3e-3 / 1e9)
    assert t.loc[("streams", "sigmoid"), "wait_median_ms"] == pytest.approx(0.698)
    assert t.loc[("concurrent", "matmul"), "throughput_tflops"] == pytest.approx(1e12 / 0.9e-3 / 1e12)
    r = busy.trace_rates(df, tr)
    assert (r["event_ms"] >= r["busy_span_ms"] - 1e-9).all()


# ----------------------------------------------------------------------------- results, export, plots


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_trace_saves_and_loads_like_every_kind(traced, tmp_path, suffix):
    tr, _ = traced
    back = results.load(results.save(tr, tmp_path / f"trace{suffix}"))
    assert back.attrs["kind"] == "trace" and back.attrs["recorded"] is True
    assert back.attrs["green_contexts"] == tr.attrs["green_contexts"]
    pd.testing.assert_frame_equal(back, tr, check_like=False)


def test_perfetto_export_is_strict_json_with_a_track_per_partition_and_stream(traced, tmp_path):
    tr, _ = traced
    tr = tr.copy()
    tr.attrs = dict(tr.attrs)
    path = to_chrome_trace(tr, tmp_path / "t.json")
    text = path.read_text()
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    names = {e["args"]["name"] for e in data["traceEvents"] if e.get("name") == "thread_name"}
    assert names == {"p0 · stream 10", "remainder · stream 11", "device · stream 10", "device · stream 11"}
    slices = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == len(tr)
    assert slices[0]["args"]["grid_x"] == 132 and slices[0]["args"]["bytes"] is None
    assert "NaN" not in text


def test_timeline_draws_kernels_by_workload_and_bubbles(traced):
    tr, _ = traced
    fig = gcexplore.plot_timeline(tr)
    gids = [c.get_gid() for ax in fig.axes for c in ax.collections]
    assert {"kernel:matmul", "kernel:sigmoid", "gap:sigmoid"} <= set(gids)
    assert "gap:matmul" not in gids
    assert len(fig.axes) == 2  # concurrent and streams
    with pytest.raises(ValueError, match="no kernels of layout"):
        gcexplore.plot_timeline(tr, rep=7)


def test_throughput_plot_withholds_the_streams_rate_and_shows_it_from_a_trace(traced):
    tr, df = traced
    fig = P.plot_throughput(df)
    texts = {t.get_gid() for ax in fig.axes for t in ax.texts}
    assert "withheld:sigmoid:streams" in texts
    bars = {p.get_gid() for ax in fig.axes for p in ax.patches}
    assert "bar:sigmoid:streams" not in bars
    fig = P.plot_throughput(df, trace=tr)
    bars = {p.get_gid() for ax in fig.axes for p in ax.patches}
    assert {"bar:sigmoid:streams", "bar:matmul:streams"} <= bars


def test_user_trace_keeps_untagged_kernels_and_names_regions():
    fake = T.FakeCupti()
    c = user_trace.UserCollector("24+108", cupti=fake).start()
    kt = user_trace.KernelTrace(c)
    c.watch(T.PARTS["p0"])
    with kt.region("mine"):
        fake.launch(T.P0_CTX, 3, "_Z3fooi", 2_000, 5_000)
    fake.launch(T.P0_CTX, 3, "bar", 6_000, 7_000)
    df = c.frame({"device_name": "synthetic", "run_id": "u"})
    c.close()
    assert df["workload"].tolist() == ["mine", "(untagged)"]
    assert df["name"].tolist() == ["foo(int)", "bar"]
    assert df["start_ms"].tolist() == pytest.approx([0.0, 0.004])
    assert (df["partition"] == "p0").all() and (df["mode"] == "user").all()


def test_summarize_refuses_a_trace_of_other_workloads(traced):
    tr, df = traced
    with pytest.raises(ValueError, match=r"summarize\(trace=...\): the kernel trace is of workloads \['a', 'b'\], but the "
                                         r"results are of \['matmul', 'sigmoid'\]"):
        gcexplore.summarize(df, trace=tr.assign(workload=tr["workload"].map({"matmul": "a", "sigmoid": "b"})))


def test_tpc_map_of_a_user_trace_comes_from_the_partitions_smid_probe():
    """Partitions made before kernel_trace started get no CUPTI mask; their %smid probe names them."""
    import pandas as pd

    tr = pd.DataFrame({"layout": ["24+108"], "workload": ["w"], "partition": ["p0"]})
    tr.attrs.update(green_contexts=[{"partition": "p0", "context_id": 5, "sm_count": 24}],
                    cupti_refused={"tpc_map": "needs CUPTI 13.2"},
                    partition_tpcs={"p0": {"sm_count": 24, "tpcs": list(range(12)), "source": "%smid probe"},
                                    "remainder": {"sm_count": 108, "tpcs": list(range(12, 66)),
                                                  "source": "%smid probe"}})
    m = busy.tpc_map(tr)
    per = m.groupby("partition")["tpc"].apply(set).to_dict()
    assert len(per["p0"]) == 12 and len(per["remainder"]) == 54 and not per["p0"] & per["remainder"]
    assert set(m.loc[m["partition"] == "p0", "context_id"]) == {5}
    assert m.attrs["tpc_source"] == {"p0": "%smid probe", "remainder": "%smid probe"}
    del tr.attrs["partition_tpcs"]
    with pytest.raises(ResultError, match="needs CUPTI 13.2"):
        busy.tpc_map(tr)
