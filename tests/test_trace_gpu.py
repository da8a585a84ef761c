"""CUPTI kernel traces on a real GPU: attribution, green-context records, truth, TPC map.

Needs cupti-python (skipped with the reason where it is missing). Every test prints
what CUPTI delivered (the collector's diagnostics and green-context records), so a
failure on the GPU machine says why without a second run.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gcexplore
from gcexplore.analysis import trace as busy
from gcexplore import workloads as W
from gcexplore.experiments.engine import Engine, Slot
from gcexplore.schema import columns

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _cupti():
    from gcexplore.trace import collector as tracing

    try:
        tracing.require_cupti()
    except gcexplore.TraceUnavailable as e:
        pytest.skip(str(e))


def _show(tr: pd.DataFrame, what: str) -> None:
    pd.set_option("display.width", 220)
    pd.set_option("display.max_columns", 30)
    print(f"\n== {what}: {len(tr)} rows; {tr.attrs.get('cupti_version')}")
    print("diagnostics:", tr.attrs.get("trace_diagnostics"))
    for g in tr.attrs.get("green_contexts", []):
        print("context:", g)
    if len(tr):
        print(tr[["layout", "mode", "rep", "workload", "partition", "sm_count", "stream_id", "name", "start_ms",
                  "end_ms", "grid_x", "grid_y", "block_x", "cluster_x", "max_active_clusters"]]
              .head(12).to_string(max_colwidth=60))


def _placed(df: pd.DataFrame) -> dict:
    """(layout, mode, workload) -> partition, from the event rows."""
    return {(r.layout, r.mode, r.workload): r.partition for r in df.itertuples()}


def _check_attribution(df, tr) -> None:
    want = _placed(df)
    got = [want[(r.layout, r.mode, r.workload)] == r.partition for r in tr.itertuples()]
    bad = tr[~np.array(got)]
    assert bad.empty, f"{len(bad)} of {len(tr)} kernels outside their workload's partition:\n{bad.head()}"
    have = set(zip(tr["mode"], tr["rep"], tr["workload"]))
    missing = {(r.mode, r.rep, r.workload) for r in df.itertuples()} - have
    assert not missing, f"repetitions without any kernel record: {sorted(missing)[:10]}"
    d = tr.attrs["trace_diagnostics"]
    assert d.get("unknown_context", 0) == 0 and d.get("partition_mismatch", 0) == 0, d
    assert d.get("no_gate", 0) == 0 and d.get("bad_times", 0) == 0, d


def test_builtin_pair_every_mode_lands_in_its_partition():
    pair = {"compute": W.compute(iters=256), "memory": W.memory(n=1 << 26)}
    try:
        df, tr = gcexplore.profile_overlap(pair, [24], repeats=3, warmup=1, trace=True)
    finally:
        for w in pair.values():
            w.close()
    _show(tr, "builtin pair 24+108")
    assert list(tr.columns) == columns("trace") and tr.attrs["trace_of"] == "overlap"
    assert df.attrs["trace"] is True
    _check_attribution(df, tr)
    conc = tr[tr["mode"] == "concurrent"]
    assert set(zip(conc["workload"], conc["sm_count"])) == {("compute", 24), ("memory", 108)}
    assert set(tr[tr["mode"].isin(["sequential", "streams"])]["partition"]) == {"device"}
    assert (tr["end_ms"] > tr["start_ms"]).all() and (tr["start_ms"] > 0).all()
    # the kernel runs inside its own event span (events add a launch gap of a few us)
    r = busy.trace_rates(df, tr)
    print(r.groupby(["mode", "workload"])[["start_ms", "first_start_ms", "event_ms", "busy_span_ms",
                                            "wait_ms"]].median().to_string())
    assert (r["first_start_ms"] >= r["start_ms"] - 0.005).all(), r[["mode", "start_ms", "first_start_ms"]]
    assert (r["busy_span_ms"] <= r["event_ms"] + 0.005).all(), r[["mode", "event_ms", "busy_span_ms"]]


def test_16_32_84_cupy_cudacore_torch_all_land_in_their_partition():
    torch = pytest.importorskip("torch")
    cupy = pytest.importorskip("cupy")
    gcexplore.release_contexts()  # fresh green contexts, so CUPTI reports their creation
    x = cupy.arange(1 << 24, dtype=cupy.float32)
    n = 4096
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    cuda_core = W.compute(iters=256)
    wls = {"cupy": W.from_cupy(lambda: cupy.sqrt(x * 2.0 + 1.0), name="cupy"),
           "cuda_core": cuda_core,
           "torch": W.from_torch(lambda: torch.matmul(a, b, out=c), name="torch", flops=2.0 * n ** 3)}
    try:
        df, tr = gcexplore.profile_overlap(wls, [16, 32], repeats=3, warmup=1, modes=["concurrent"],
                                           trace=True)
    finally:
        cuda_core.close()
    _show(tr, "16+32+84")
    assert df["layout"].iloc[0] == "16+32+84"
    _check_attribution(df, tr)
    parts = dict(zip(tr["workload"], tr["partition"]))
    assert parts == {"cupy": "p0", "cuda_core": "p1", "torch": "remainder"}
    greens = {g["partition"]: g for g in tr.attrs["green_contexts"] if g["partition"] != "device"}
    print({p: (g["source"], g["num_multiprocessors"], g.get("num_tpcs")) for p, g in greens.items()})
    assert {p: g["num_multiprocessors"] for p, g in greens.items()} == {"p0": 16, "p1": 32, "remainder": 84}
    # GREEN_CONTEXT records where the loaded CUPTI has them (13.2+), CONTEXT records before
    want = "CONTEXT" if "tpc_map" in tr.attrs["cupti_refused"] else "GREEN_CONTEXT"
    assert {g["source"] for g in greens.values()} == {want}, (tr.attrs["cupti_version"], greens)


def test_builtin_kernel_spans_match_globaltimer_within_2us(info):
    """Each built-in kernel's CUPTI span against its own %globaltimer span (first block
    start to last block end), alone on a partition, concurrent, and on plain streams."""
    from gcexplore.trace.collector import Collector

    spin, compute = W.spin(200.0, blocks=8), W.compute(iters=256)
    recs = {"spin": spin.instrumented(), "compute": compute.instrumented()}
    inkernel = {}
    try:
        with Collector() as col, Engine(info, trace=col) as eng, gcexplore.split([24]) as parts:
            whole = eng.whole
            modes = {"alone": [[("spin", parts[0], parts[0].stream)], [("compute", parts.remainder,
                                                                        parts.remainder.stream)]],
                     "concurrent": [[("spin", parts[0], parts[0].stream),
                                     ("compute", parts.remainder, parts.remainder.stream)]],
                     "streams": [[("spin", whole, whole.streams[0]), ("compute", whole, whole.streams[1])]]}
            for mode, groups in modes.items():
                for rep in range(-1, 5):
                    for group in groups:
                        slots = [Slot(recs[n].workload, p, s) for n, p, s in group]
                        eng.run_group(slots, label=("24+108", mode, rep if rep >= 0 else None))
                        for n, p, s in group:
                            r = recs[n].records(stream=s)
                            inkernel[(mode, rep, n)] = (int(r[:, 1].min()), int(r[:, 2].max()))
            tr = col.frame({**info.metadata(), "run_id": "truth", "kind": "overlap"})
    finally:
        for r in recs.values():
            r.close()
        spin.close()
        compute.close()
    _show(tr, "truth")
    rows = []
    for r in tr.itertuples():
        s0, s1 = inkernel[(r.mode, r.rep, r.workload)]
        rows.append({"mode": r.mode, "rep": r.rep, "workload": r.workload,
                     "cupti_us": (r.end_ms - r.start_ms) * 1e3, "globaltimer_us": (s1 - s0) / 1e3,
                     "cupti_start_ns": round(r.start_ms * 1e6), "cupti_end_ns": round(r.end_ms * 1e6)})
    t = pd.DataFrame(rows)
    t["diff_us"] = t["cupti_us"] - t["globaltimer_us"]
    print(t.groupby(["mode", "workload"])["diff_us"].describe().to_string())
    assert len(t) == 3 * 5 * 2
    uncontended = t[t["mode"] != "streams"]
    assert uncontended["diff_us"].abs().max() < 2.0, t.sort_values("diff_us").to_string()
    # On plain streams a kernel's CUPTI start can come before its first block while the
    # other workload holds the SMs (seen: up to 5 us on an H200, 7.5 us on an H100): the CUPTI
    # span is not shorter than the in-kernel one beyond the clocks' agreement (2 us, as
    # uncontended; seen: -1.3 us once on an H200), and any excess beyond 2 us is waiting: it
    # began while the other workload still ran, and is no longer than what was left of it.
    contended = t[t["mode"] == "streams"].copy()
    assert (contended["diff_us"] > -2.0).all(), contended.to_string()
    other_end = contended.groupby("rep")["cupti_end_ns"].transform(lambda e: e[::-1].to_numpy())
    contended["left_of_other_us"] = (other_end - contended["cupti_start_ns"]) / 1e3
    waited = contended[contended["diff_us"] >= 2.0]
    assert (waited["diff_us"] <= waited["left_of_other_us"] + 2.0).all(), contended.to_string()


def test_tpc_masks_are_disjoint_and_match_the_sm_counts():
    torch = pytest.importorskip("torch")

    # green-context records come when a context is created under tracing: fresh contexts
    gcexplore.release_contexts()
    x = torch.randn(1 << 20, device="cuda")
    torch.cuda.synchronize()
    sig = W.from_torch(lambda: torch.sigmoid(x), name="sigmoid")
    df, tr = gcexplore.profile_overlap({"a": sig, "b": W.spin(20.0)}, [24], repeats=1, warmup=0,
                                       modes=["concurrent"], trace=True)
    _show(tr, "24+108 traced")
    if "tpc_map" in tr.attrs["cupti_refused"]:  # tests/test_cupti_features_gpu.py checks the sentence
        pytest.skip(tr.attrs["cupti_refused"]["tpc_map"])
    with gcexplore.split([24]) as parts:  # the same layout's contexts, kept for reuse
        sm_ids = {p.name: set(p.sm_ids()) for p in parts.all}
    tpcs = busy.tpc_map(tr)
    per = tpcs.groupby("partition")["tpc"].apply(set).to_dict()
    print("TPCs per partition:", {p: sorted(v) for p, v in per.items()})
    # cross-check with %smid: SMs 2i and 2i+1 form TPC i on Hopper (printed, not asserted:
    # the mask is in logical TPC order, %smid in virtual SM order)
    print("%smid // 2 == TPC mask:", {p: sorted({s // 2 for s in sm_ids[p]}) == sorted(per.get(p, ()))
                                      for p in sm_ids})
    assert len(per["p0"]) * 2 == 24 and len(per["remainder"]) * 2 == 108
    assert not per["p0"] & per["remainder"]


def test_sweep_trace_flushes_per_layout_and_scaling_isolation_trace():
    pair = {"compute": W.compute(iters=128), "memory": W.memory(n=1 << 24)}
    try:
        df, tr = gcexplore.sweep(pair, [24, 64], repeats=2, warmup=1, modes=["concurrent", "streams"],
                                 progress=False, trace=True)
        _show(tr, "sweep 24, 64")
        _check_attribution(df, tr)
        assert set(tr["layout"]) == {"24+108", "64+68"}
        sc, tsc = gcexplore.scaling(pair["compute"], [16], repeats=2, warmup=1, progress=False, trace=True)
        _show(tsc, "scaling")
        assert set(zip(tsc["layout"], tsc["sm_count"])) == {("16", 16), ("device", 132)}
        pair["latency"] = W.latency()
        iso, tiso = gcexplore.isolation(pair["latency"], pair["compute"], 16, repeats=2, warmup=1, launches=3,
                                        trace=True)
        _show(tiso, "isolation")
        assert set(tiso["mode"]) == {"alone", "streams", "partitioned"}
        crit = tiso[(tiso["mode"] == "partitioned") & (tiso["workload"] == "latency")]
        assert (crit["partition"] == "p0").all() and sorted(set(crit["launch"])) == [0, 1, 2]
    finally:
        for w in pair.values():
            w.close()


def test_graph_launches_are_attributed_too():
    wls = {"spin": W.spin(50.0)}
    df, tr = gcexplore.profile_overlap(wls, [8], repeats=2, warmup=1, modes=["alone"], graphs=True,
                                       trace=True)
    _show(tr, "graphs")
    assert len(tr) == 2 and (tr["partition"] == "p0").all()
    print("graph ids:", sorted(set(tr["graph_id"])))


def test_user_trace_tpc_map_names_its_partitions():
    """The TPC map of a user's own code (kernel_trace over a split) is named by the partitions
    the trace was given: p0 holds 12 TPCs of 24 SMs, the remainder 54, disjoint."""
    torch = pytest.importorskip("torch")

    gcexplore.release_contexts()
    x = torch.randn(1 << 20, device="cuda")
    torch.cuda.synchronize()
    with gcexplore.split([24]) as parts, gcexplore.kernel_trace(parts) as t:
        for p in parts.all:
            with t.region(f"sigmoid on {p.name}"), torch.cuda.stream(p.torch_stream()):
                torch.sigmoid(x)
    tr = t.frame()
    _show(tr, "kernel_trace over 24+108")
    tpcs = busy.tpc_map(tr)  # the partitions' %smid probe where CUPTI sent no mask (made before the trace)
    print("TPC source:", tpcs.attrs["tpc_source"])
    per = tpcs.groupby("partition")["tpc"].apply(set).to_dict()
    print("TPCs per partition:", {p: len(v) for p, v in per.items()})
    assert {"p0", "remainder"} <= set(per), (
        "no named TPC mask for the user's partitions; green-context records: "
        f"{[(g.get('partition'), g.get('context_id'), g.get('source')) for g in tr.attrs['green_contexts']]}")
    assert len(per["p0"]) * 2 == 24 and len(per["remainder"]) * 2 == 108
    assert not per["p0"] & per["remainder"]
