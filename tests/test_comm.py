"""Communication SMs on the CPU: the decomposition and the answers on a synthetic result of a known
model (tests/_comm_synth.py), the tuner's recommendation replayed over it, the launcher's and the
spec's checks, the refusals of a missing NCCL or a single GPU, the figure, save and load."""

from __future__ import annotations

import math
import time

import pandas as pd
import pytest

import gcexplore as gx
from gcexplore.comm.rank import PM_SETS, CommSpec, parse_size, size_text
from gcexplore.comm.launch import check_launch
from gcexplore.comm.collectives import buffer_elements, zero_sm_offered

from _comm_synth import SM, comm_ms, comm_result, compute_ms


@pytest.fixture(scope="module")
def synth():
    return comm_result()


@pytest.fixture(scope="module")
def table(synth):
    return gx.comm_table(synth)


# ------------------------------------------------------------------------------- analysis


def test_steps_take_the_slowest_rank(synth):
    s = gx.comm.comm_steps(synth)
    assert set(s["ranks"]) == {2}
    one = synth[(synth["layout"] == "16+116") & (synth["collective"] == "allreduce")
                & (synth["size_bytes"] == 1 << 30) & (synth["mode"] == "overlapped") & (synth["rep"] == 3)]
    got = s[(s["layout"] == "16+116") & (s["collective"] == "allreduce") & (s["size_bytes"] == 1 << 30)
            & (s["mode"] == "overlapped") & (s["rep"] == 3)]
    assert got["step_ms"].iloc[0] == one["step_ms"].max()
    comm = got[got["workload"] == "comm"]["duration_ms"].iloc[0]
    assert comm == one[one["workload"] == "comm"]["duration_ms"].max()


def test_decomposition_adds_up_and_matches_the_model(table):
    t = table
    total = t["compute_whole_ms"] + t["split_loss_ms"] + t["interference_ms"] + t["exposed_comm_ms"]
    assert (total - t["step_ms"]).abs().max() < 1e-9
    r = t[(t["layout"] == "24+108") & (t["collective"] == "allreduce") & (t["size_bytes"] == 1 << 30)].iloc[0]
    assert r["compute_alone_ms"] == pytest.approx(compute_ms(108), rel=0.01)
    assert r["split_loss_ms"] == pytest.approx(compute_ms(108) - compute_ms(SM), rel=0.03)
    assert r["comm_alone_ms"] == pytest.approx(comm_ms("allreduce", 1 << 30, 2, 24), rel=0.01)
    # the collective's own split loss: 8 SMs move less than the whole GPU, 24 as much (the model's peak)
    r8 = t[(t["layout"] == "8+124") & (t["collective"] == "allreduce") & (t["size_bytes"] == 1 << 30)].iloc[0]
    assert r8["comm_split_loss_ms"] > 1.0 and abs(r["comm_split_loss_ms"]) < 0.02
    assert set(t["setup"]) == {"partition", "plain", "ctas"}
    assert t[t["setup"] == "ctas"]["max_ctas"].notna().all() and t[t["setup"] != "ctas"]["max_ctas"].isna().all()


def test_summarize_is_the_comm_table(synth, table):
    pd.testing.assert_frame_equal(gx.summarize(synth), table)


def test_bus_bandwidth_follows_nccl_tests():
    assert gx.comm.bus_factor("allreduce", 4) == pytest.approx(1.5)
    assert gx.comm.bus_factor("allgather", 4) == pytest.approx(0.75)
    assert gx.comm.bus_bw_gbs("allreduce", 2, 1e9, 1000.0) == pytest.approx(1.0)
    assert math.isnan(gx.comm.bus_bw_gbs("allreduce", 2, 1e9, 0.0))
    with pytest.raises(ValueError, match="2 or more ranks"):
        gx.comm.bus_factor("allreduce", 1)


def _expected_answer(df, coll, size, tol=0.01):
    """Independently: slowest rank per step, median per split, fewest SMs within tol of the best."""
    d = df[(df["setup"] == "partition") & (df["collective"] == coll) & (df["size_bytes"] == size)
           & (df["mode"] == "overlapped") & (df["workload"] == "comm")]
    med = d.groupby(["comm_sm_count", "rep"])["step_ms"].max().groupby("comm_sm_count").median()
    return int(min(k for k, v in med.items() if v <= med.min() * (1 + tol))), float(med.min())


def test_answer_is_the_fewest_sms_within_one_percent(synth):
    a = gx.comm_answer(synth, 0.01)
    assert len(a) == 6
    for r in a.itertuples():
        k, best = _expected_answer(synth, r.collective, r.size_bytes)
        assert (r.answer_sm_count, r.best_step_ms) == (k, pytest.approx(best))
        assert r.answer_step_ms <= r.best_step_ms * 1.01
    big = a[(a["collective"] == "allreduce") & (a["size_bytes"] == 1 << 30)].iloc[0]
    small = a[(a["collective"] == "allreduce") & (a["size_bytes"] == 1 << 20)].iloc[0]
    assert big["answer_sm_count"] > small["answer_sm_count"] == 8  # a big message needs more SMs
    with pytest.raises(ValueError, match="tolerance"):
        gx.comm_answer(synth, 1.5)


def test_bandwidth_table_finds_the_model_saturation(synth):
    b = gx.bandwidth_table(synth, 0.95)
    big = b[b["size_bytes"] == 1 << 30]
    # the model saturates at 360 / 24 = 15 SMs: 16 is the first measured size at 95% of the peak
    assert list(big["min_sm_count"]) == [16.0, 16.0]
    assert (big["bus_bw_at_min_gbs"] >= 0.95 * big["peak_bus_bw_gbs"]).all()
    assert list(big["min_ctas"]) == [16.0, 16.0]


def test_recommendation_matches_the_sweep_at_a_fraction(synth):
    r = gx.recommend_comm(synth, 0.01)
    a = gx.comm_answer(synth, 0.01)
    m = r.merge(a, on=["collective", "size_bytes", "nranks"])
    assert (m["within"] <= 0.03).all()
    assert (m["recommended_step_ms"] <= m["best_step_ms"] * 1.03).all()
    assert (m["gpu_share"] < 0.5).all()  # every point at under half the sweep's GPU time
    flat = r[r["size_bytes"] == 1 << 20]
    assert (flat["gpu_share"] <= 0.25).all()  # a clear answer costs a quarter of the sweep or less


def test_nccl_attribution_counts_kernels_off_the_partition():
    rows = [{"rank": 0, "layout": "16+116", "partition": "p0", "name": "ncclDevKernel_AllReduce", "sm_count": 16,
             "activity": "kernel"},
            {"rank": 0, "layout": "16+116", "partition": "p0", "name": "gcx_spin", "sm_count": 16,
             "activity": "kernel"},
            {"rank": 0, "layout": "16+116", "partition": "remainder", "name": "sm90_gemm", "sm_count": 116,
             "activity": "kernel"},
            {"rank": 1, "layout": "16+116", "partition": "p0", "name": "ncclDevKernel_AllReduce", "sm_count": 16,
             "activity": "kernel"},
            {"rank": 1, "layout": "16+116", "partition": "context 1", "name": "ncclDevKernel_AllReduce",
             "sm_count": 132, "activity": "kernel"},
            {"rank": 1, "layout": "16+116", "partition": "p0", "name": "sm90_gemm", "sm_count": 16,
             "activity": "kernel"}]
    a = gx.nccl_attribution(pd.DataFrame(rows)).set_index("rank")
    assert a.loc[0, "share"] == 1.0 and a.loc[0, "sm_count"] == 16 and a.loc[0, "other_on_comm"] == 0
    assert a.loc[1, "share"] == 0.5 and a.loc[1, "partitions"] == "context 1,p0" and a.loc[1, "other_on_comm"] == 1


# ------------------------------------------------------------------------------- spec and launcher


def test_sizes_parse_and_print():
    assert parse_size("256M") == 256 << 20 and parse_size("1G") == 1 << 30 and parse_size("4096") == 4096
    assert parse_size("1MiB") == 1 << 20 and size_text(256 << 20) == "256M" and size_text(1000) == "1000"
    for bad in ("1T", "-1M", "0", "1.5M", "16G"):
        with pytest.raises(ValueError, match="message size"):
            parse_size(bad)


def test_spec_refuses_what_cannot_run(h100_like):
    s = CommSpec(collectives=["all-reduce", "all_gather"], sizes=["1G", "1M"], comm_sms=[24, 8])
    assert s.collectives == ("allreduce", "allgather") and s.sizes == (1 << 20, 1 << 30) and s.comm_sms == (8, 24)
    s.check(h100_like, 4)
    with pytest.raises(ValueError, match="collectives must be"):
        CommSpec(collectives=["broadcast"])
    with pytest.raises(ValueError, match="must not repeat"):
        CommSpec(sizes=["1M", "1024K"])
    with pytest.raises(ValueError, match="ctas"):
        CommSpec(ctas=[64])
    with pytest.raises(ValueError, match="repeats"):
        CommSpec(repeats=1)
    with pytest.raises(TypeError, match="compute_fit must be True or False"):
        CommSpec(compute_fit="yes")
    with pytest.raises(ValueError, match="cannot be split exactly"):
        CommSpec(comm_sms=[12]).check(h100_like, 2)
    with pytest.raises(ValueError, match="at least 8 SMs left"):
        CommSpec(comm_sms=[128]).check(h100_like, 2)
    with pytest.raises(ValueError, match="multiple of 24 bytes"):
        CommSpec(sizes=[1000]).check(h100_like, 6)


def test_buffers_per_collective():
    assert buffer_elements("allreduce", 1 << 20, 2) == (1 << 18, 1 << 18)
    assert buffer_elements("allgather", 1 << 20, 4) == (1 << 16, 1 << 18)
    assert buffer_elements("reducescatter", 1 << 20, 4) == (1 << 18, 1 << 16)
    with pytest.raises(ValueError, match="multiple of 16 bytes"):
        buffer_elements("alltoall", 1000, 4)


def test_single_gpu_and_missing_nccl_are_refused_in_one_sentence():
    with pytest.raises(gx.UnsupportedError) as e:
        check_launch(None, 1, None)
    assert str(e.value) == "a collective needs at least 2 GPUs on this host; the driver sees 1"
    with pytest.raises(gx.UnsupportedError, match="nccl4py") as e:
        check_launch(None, 4, "NCCL collectives need NVIDIA's nccl4py and a libnccl (pip install nccl4py); x")
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="driver sees 4 GPUs"):
        check_launch(5, 4, None)
    with pytest.raises(ValueError, match="gpus"):
        check_launch(1, 4, None)
    assert check_launch(None, 4, None) == 4 and check_launch(2, 4, None) == 2


def test_missing_nccl_module_says_what_to_install(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_nccl(name, *a, **k):
        if name == "nccl.core" or name.startswith("nccl"):
            raise ImportError("No module named 'nccl'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_nccl)
    with pytest.raises(gx.UnsupportedError, match=r"pip install nccl4py") as e:
        gx.comm.collectives.nccl_module()
    assert "\n" not in str(e.value)


class _Proc:
    exitcode = 1


def _fake_ranks(n, script):
    """Threads standing in for rank processes: ``script(rank, conn)`` on the child end of a pipe."""
    import multiprocessing as mp
    import threading

    pipes, threads = [], []
    for rank in range(n):
        parent, child = mp.Pipe()
        th = threading.Thread(target=script, args=(rank, child), daemon=True)
        pipes.append(parent)
        threads.append(th)
    for th in threads:
        th.start()
    return pipes, [_Proc() for _ in range(n)], threads


def test_collector_relays_the_unique_id_and_keeps_rows_of_a_failed_rank():
    from gcexplore.comm.launch import _collect

    seen = {}

    def script(rank, conn):
        if rank == 0:
            conn.send(("uid", b"nccl-id"))
        seen[rank] = conn.recv()
        conn.send(("rows", [{"rank": rank, "rep": 0}]))
        if rank == 1:
            conn.send(("error", "rank 1: RuntimeError: NCCL error", "Traceback ..."))
        else:
            conn.send(("done", {"rank": rank}))
        conn.close()

    pipes, procs, threads = _fake_ranks(2, script)
    rows, metas, errors, details, traces = _collect(pipes, procs, 20.0)
    for th in threads:
        th.join(5)
    assert seen == {0: ("uid", b"nccl-id"), 1: ("uid", b"nccl-id")}
    assert {r["rank"] for r in rows} >= {1} and errors == ["rank 1: RuntimeError: NCCL error"]
    assert details == ["Traceback ..."]


def test_collector_times_out_and_names_the_ranks_still_running():
    from gcexplore.comm.launch import _collect

    def script(rank, conn):
        conn.send(("rows", [{"rank": rank}]))
        time.sleep(1.5)
        conn.close()

    pipes, procs, _ = _fake_ranks(2, script)
    rows, metas, errors, _, _ = _collect(pipes, procs, 0.5)
    assert len(rows) == 2 and errors == ["timed out after 0.5 s with ranks [0, 1] still running"]


def test_a_rank_that_fails_sends_its_error_and_traceback(monkeypatch):
    import gcexplore.comm.rank as C
    from gcexplore.comm.launch import _child

    class Conn:
        def __init__(self):
            self.sent = []

        def send(self, m):
            self.sent.append(m)

        def recv(self):
            return ("uid", b"id")

        def close(self):
            pass

    def boom(rank, nranks, uid, spec, send):
        send(("rows", [{"rank": rank}]))
        raise RuntimeError(f"no peer for {uid!r}")

    monkeypatch.setattr(gx.comm.collectives, "nccl_module", lambda: None)
    monkeypatch.setattr(C, "run_rank", boom)
    conn = Conn()
    _child(1, 2, conn, CommSpec(trace=False))
    assert conn.sent[0] == ("rows", [{"rank": 1}])
    kind, message, tb = conn.sent[1]
    assert kind == "error" and message == "rank 1: RuntimeError: no peer for b'id'" and "boom" in tb


def test_zero_sm_collectives_by_nccl_version():
    # NCCL 2.28.3 added the copy-engine (zero-CTA) all-gather and all-to-all within one node
    ok, text = zero_sm_offered("2.28.9")
    assert ok and "all-gather and all-to-all" in text and "symmetric windows" in text
    ok, text = zero_sm_offered("2.27.7")
    assert not ok and "2.28.3+" in text and "none were measured" in text
    assert zero_sm_offered("2.30.3")[0] and not zero_sm_offered("2.28.2")[0] and not zero_sm_offered("banana")[0]


def test_cli_checks_arguments_before_any_gpu_work(tmp_path, capsys):
    from gcexplore.cli import main

    assert main(["comm", "--collectives", "gossip", "--out", str(tmp_path / "c.parquet")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "collectives must be" in err
    assert main(["comm", "--sizes", "3T", "--out", str(tmp_path / "c.parquet")]) == 2
    assert main(["comm", "--ctas", "0", "--out", str(tmp_path / "c.parquet")]) == 2
    assert main(["comm", "--out", str(tmp_path / "c.txt")]) == 2
    assert not list(tmp_path.iterdir())
    if (gx.device_count() if gx.gpu_available() else 0) < 2:  # no second GPU (or none): one line, exit 1
        capsys.readouterr()
        assert main(["comm", "--out", str(tmp_path / "c.parquet")]) == 1
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and ("2 GPUs" in err or "driver" in err or "nccl4py" in err)
        assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------------------- figure, files


def test_figure_draws_the_parts_and_the_answer(synth):
    fig = gx.plot_comm(synth, collective="allreduce")
    gids = {a.get_gid() for ax in fig.axes for a in [*ax.patches, *ax.lines]}
    assert {"part:split_loss_ms", "part:exposed_comm_ms", "step", "answer", "busbw:alone", "plain"} <= gids
    with pytest.raises(ValueError, match="collectives here"):
        gx.plot_comm(synth, collective="alltoall")


def test_result_saves_and_loads(synth, tmp_path):
    p = gx.save(synth, tmp_path / "comm.parquet")
    back = gx.load(p)
    assert back.attrs["kind"] == "comm" and len(back) == len(synth)
    pd.testing.assert_frame_equal(gx.comm_table(back), gx.comm_table(synth), check_like=True)


# ------------------------------------------------------------------------------- the recorded runs

# name -> (ranks, card): the 2-GPU run came from batch 1 (H200 host), the 4-GPU one from batch 2 (H100 host),
# the GEMMs fitted to their partition (16 MiB and 1 GiB) from batch d2 (2 x H100)
RUNS = {"comm": (2, "NVIDIA H200"), "comm_4gpu": (4, "NVIDIA H100 80GB HBM3"), "comm_fit": (2, "NVIDIA H100 80GB HBM3")}


@pytest.fixture(scope="module", params=sorted(RUNS))
def recorded(request):
    return request.param, gx.load_recorded(request.param)


def test_recorded_runs_name_their_cards(recorded):
    name, df = recorded
    n, card = RUNS[name]
    assert df.attrs["nranks"] == n and set(df["rank"]) == set(range(n))
    assert df.attrs["device_name"] == card
    assert {r["device_name"] for r in df.attrs["ranks"]} == {card}  # every rank's card, not only rank 0's
    assert len({r["device_uuid"] for r in df.attrs["ranks"]}) == n


def test_recorded_run_attributes_every_nccl_kernel_to_its_partition(recorded):
    name, df = recorded
    att = pd.DataFrame(df.attrs["attribution"])
    assert len(att) == RUNS[name][0] * len(df.attrs["spec"]["comm_sms"])  # every rank, every split
    assert (att["share"] == 1.0).all() and (att["other_on_comm"] == 0).all()
    layout_sms = att["layout"].str.split("+").str[0].astype(int)
    assert (att["sm_count"] == layout_sms).all()
    assert df.attrs["zero_sm"].startswith(zero_sm_offered(df.attrs["nccl_version"])[1])
    assert "not measured in this run" in df.attrs["zero_sm"]


def test_recorded_decomposition_and_recommendation(recorded):
    name, df = recorded
    t = gx.comm_table(df)
    total = t["compute_whole_ms"] + t["split_loss_ms"] + t["interference_ms"] + t["exposed_comm_ms"]
    assert (total - t["step_ms"]).abs().max() < 1e-9
    r = gx.recommend_comm(df, 0.01)
    spec = df.attrs["spec"]
    assert len(r) == len(spec["collectives"]) * len(spec["sizes"]) == (16 if name != "comm_fit" else 8)
    assert (r["within"] <= 0.03).all()  # the bound: within 3% of the sweep's best
    assert (r["gpu_share"] <= 0.25).all()  # at a quarter of the sweep's GPU time or less


def test_a_flat_non_monotone_curve_costs_first_visits_of_two_steps():
    """4 x H100, reduce-scatter 1 GiB: steps within 2% from 24 to 56 SMs, the collective slower on 64 SMs than on
    40 and the GEMMs faster on 84 than on 92, so the bounds rule out nothing but 8 SMs: 7 of 8 layouts are visited.
    At 3 steps a first visit that was 21 of the sweep's 64 steps (30%); at 2 (a third where the two differ by
    more than 1%: 32 SMs' 2.614 / 2.582 ms) it is 15 (21%), with the sweep's answer."""
    from gcexplore.comm.analysis import comm_steps
    from gcexplore.comm import tune as comm_tune

    df = gx.load_recorded("comm_4gpu")
    s = comm_steps(df)
    reps = comm_tune._reps(s[(s["setup"] == "partition") & (s["collective"] == "reducescatter")
                             & (s["size_bytes"] == 1 << 30)])
    a, b = (m for m, _ in reps[32][:2])
    assert abs(a / b - 1) > 0.01  # the recorded pair that needs its tie-break
    assert all(abs(reps[k][0][0] / reps[k][1][0] - 1) <= 0.01 for k in reps if k != 32)
    r = gx.recommend_comm(df, 0.01).set_index(["collective", "size_bytes"]).loc[("reducescatter", 1 << 30)]
    assert r["layouts_measured"] == 7 and r["steps_measured"] == 2 * 7 + 1
    assert r["recommended_sm_count"] == r["sweep_sm_count"] == 40 and r["gpu_share"] <= 0.25


def test_recommendation_starts_at_the_middle_candidate(synth, monkeypatch):
    """Each replayed search first measures the middle communication size (32 of 8..64), not half the GPU."""
    from gcexplore.comm import tune as comm_tune

    starts, real = [], comm_tune.search

    def spy(cands, measure, settings, **kw):
        first = []

        def m(layout, n):
            if not first:
                first.append(layout[0])
                starts.append(layout[0])
            return measure(layout, n)

        return real(cands, m, settings, **kw)

    monkeypatch.setattr(comm_tune, "search", spy)
    r = gx.recommend_comm(synth, 0.01)
    assert starts == [32] * len(r) == [32] * 6


# ------------------------------------------------------------------------------- DRAM use from PM sampling


def _pm_trace(origin=10_000_000_000):
    from gcexplore.comm.analysis import PM_TAG

    rows = []
    # step 0 of the collective alone: 0.0-0.1 ms; overlapped step 0: 1.0-1.2 ms (two kernels)
    for wl, mode, s, e in (("comm", "alone", 0.0, 0.1), ("comm", "overlapped", 1.0, 1.1),
                           ("compute", "overlapped", 1.05, 1.2)):
        rows.append({"workload": PM_TAG.format(collective="allreduce", size_bytes=1 << 20, mode=mode, step=0,
                                               workload=wl), "start_ms": s, "end_ms": e, "activity": "kernel"})
    rows.append({"workload": "(untagged)", "start_ms": 0.5, "end_ms": 0.6, "activity": "kernel"})  # a barrier
    # step 1 of the collective alone on the copy engines: no kernel, one copy (2.0-2.1 ms)
    rows.append({"workload": PM_TAG.format(collective="allreduce", size_bytes=1 << 20, mode="alone", step=1,
                                           workload="comm"), "start_ms": 2.0, "end_ms": 2.1, "activity": "memcpy"})
    t = pd.DataFrame(rows)
    t.attrs["origin_ns"] = origin
    return t


def test_pm_samples_are_placed_in_their_steps():
    from gcexplore.comm.analysis import pm_step_dram

    origin = 10_000_000_000
    mids_us = [50, 550, 1020, 1100, 1180, 1500, 2050]  # alone step 0; barrier; 3 in overlapped; none; copy step
    pct = [10.0, 99.0, 20.0, 40.0, 30.0, 99.0, 7.0]
    starts = [origin + (m - 10) * 1000 for m in mids_us]
    ends = [origin + (m + 10) * 1000 for m in mids_us]
    values = [[p, p * 1e9, p * 2e9, p * 3e9] for p in pct]
    metrics = list(PM_SETS["dram_l2"])
    rows = {(r["mode"], r["step"]): r for r in pm_step_dram(_pm_trace(origin), starts, ends, values, metrics)}
    assert set(rows) == {("alone", 0), ("alone", 1), ("overlapped", 0)}  # the untagged barrier is no step
    assert rows["alone", 0]["samples"] == 1 and rows["alone", 0]["dram_pct"] == 10.0
    assert rows["alone", 1]["samples"] == 1 and rows["alone", 1]["dram_pct"] == 7.0  # a step of copies only
    o = rows["overlapped", 0]
    assert o["samples"] == 3 and o["dram_pct"] == pytest.approx(30.0) and o["dram_pct_max"] == 40.0
    assert o["dram_read_gbs"] == pytest.approx(30.0) and o["dram_write_gbs"] == pytest.approx(60.0)
    assert o["l2_gbs"] == pytest.approx(90.0)  # lts__t_bytes per second, in GB/s
    dram_only = pm_step_dram(_pm_trace(origin), starts, ends, [v[:3] for v in values], list(PM_SETS["dram_bytes"]))
    assert all(math.isnan(r["l2_gbs"]) for r in dram_only) and len(dram_only) == 3
    assert o["window_ms"] == pytest.approx(0.2) and (o["collective"], o["size_bytes"]) == ("allreduce", 1 << 20)
    bare = _pm_trace(origin)
    bare.attrs = {}
    with pytest.raises(ValueError, match="origin_ns"):
        pm_step_dram(bare, starts, ends, values, metrics)


def test_comm_dram_takes_the_busiest_card_beside_the_interference(synth, tmp_path):
    with pytest.raises(ValueError, match="pm=True"):
        gx.comm_dram(synth)
    pm = []
    for rank in (0, 1):
        for step in range(3):
            base = {"rank": rank, "setup": "partition", "layout": "16+116", "comm_sm_count": 16,
                    "compute_sm_count": 116, "step": step, "window_ms": 1.0, "samples": 50}
            d = 10.0 * (rank + 1)  # rank 1's card is the busier
            pm += [{**base, "collective": "", "size_bytes": 0, "mode": "alone", "dram_pct": 5.0 + rank,
                    "dram_pct_max": 6.0, "dram_read_gbs": 1.0, "dram_write_gbs": 1.0, "l2_gbs": 100.0 + rank},
                   {**base, "collective": "allreduce", "size_bytes": 1 << 30, "mode": "alone", "dram_pct": d,
                    "dram_pct_max": d + 1, "dram_read_gbs": d, "dram_write_gbs": d, "l2_gbs": 10 * d},
                   {**base, "collective": "allreduce", "size_bytes": 1 << 30, "mode": "overlapped",
                    "dram_pct": d + 5 + step, "dram_pct_max": d + 9 + step, "dram_read_gbs": d, "dram_write_gbs": d,
                    "l2_gbs": 10 * d + step}]
    df = synth.copy()
    df.attrs = {**synth.attrs, "pm": pm}
    df = gx.load(gx.save(df, tmp_path / "pm.parquet"))  # the samples' summaries survive the file
    d = gx.comm_dram(df)
    assert len(d) == 1
    r = d.iloc[0]
    assert (r["dram_compute_pct"], r["dram_comm_pct"], r["dram_both_pct"], r["dram_both_max_pct"]) == (6.0, 20.0, 26.0, 31.0)
    assert (r["l2_compute_gbs"], r["l2_comm_gbs"], r["l2_both_gbs"]) == (101.0, 200.0, 201.0)  # medians, busiest card
    assert r["samples"] == 2 * 3 * 50
    t = gx.comm_table(synth)
    want = t[(t["layout"] == "16+116") & (t["collective"] == "allreduce") & (t["size_bytes"] == 1 << 30)]
    assert r["interference_ms"] == pytest.approx(float(want["interference_ms"].iloc[0]))
    df.attrs["pm"] = [{k: v for k, v in p.items() if k != "l2_gbs"} for p in pm]  # sampled without the L2
    no_l2 = gx.comm_dram(df).iloc[0]
    assert no_l2["dram_both_pct"] == 26.0 and math.isnan(no_l2["l2_both_gbs"]) and math.isnan(no_l2["l2_compute_gbs"])


def test_pm_flag_is_checked():
    with pytest.raises(TypeError, match="pm must be True or False"):
        CommSpec(pm="yes")
    assert CommSpec(pm=True).metadata()["pm"] is True
    assert CommSpec(pm=True, pm_metrics="dram_l2").metadata()["pm_metrics"] == "dram_l2"
    assert PM_SETS["dram_l2"][-1].startswith("lts__t_bytes") and set(PM_SETS["dram_bytes"]) < set(PM_SETS["dram_l2"])
    with pytest.raises(ValueError, match="pm_metrics must name a metric set among 'dram_bytes', 'dram_l2'"):
        CommSpec(pm=True, pm_metrics="l2")


# ------------------------------------------------------------------------------- zero-SM collectives


def test_zero_sm_table_measures_the_compute_slowdown():
    from _comm_synth import ZERO_SLOWER

    df = comm_result(zero=True)
    z = gx.zero_sm_table(df)
    assert list(z["collective"]) == ["allgather"] * 3  # all-reduce has no copy-engine path
    assert z["compute_slowdown"].to_numpy() == pytest.approx(ZERO_SLOWER - 1.0, abs=0.004)
    assert ((z["slowdown_low"] <= z["compute_slowdown"]) & (z["compute_slowdown"] <= z["slowdown_high"])).all()
    assert z["compute_alone_ms"].to_numpy() == pytest.approx(compute_ms(SM), rel=0.01)
    assert (z["plain_step_ms"] > 0).all()
    a = gx.comm_answer(df, 0.01)  # the other answers ignore the zero-SM rows
    assert a.equals(gx.comm_answer(comm_result(), 0.01))
    with pytest.raises(ValueError, match="zero_sm=True"):
        gx.zero_sm_table(comm_result())


def test_zero_sm_spec_needs_a_copy_engine_collective(h100_like):
    with pytest.raises(ValueError, match="allgather and alltoall"):
        CommSpec(collectives=["allreduce"], zero_sm=True).check(h100_like, 2)
    CommSpec(collectives=["allreduce", "alltoall"], zero_sm=True).check(h100_like, 2)
    with pytest.raises(TypeError, match="zero_sm must be True or False"):
        CommSpec(zero_sm=1)


# ------------------------------------------------------------------------------- the recorded zero-SM run


@pytest.fixture(scope="module")
def zero_run():
    return gx.load_recorded("comm_zero"), gx.load_recorded("comm_zero_trace")


def test_recorded_zero_sm_slowdown_is_measured_to_one_percent(zero_run):
    df, _ = zero_run
    assert df.attrs["nranks"] == 2 and {r["device_name"] for r in df.attrs["ranks"]} == {"NVIDIA H100 80GB HBM3"}
    assert "measured (setup 'zero')" in df.attrs["zero_sm"] and not any(m.get("zero_error") for m in df.attrs["ranks"])
    z = gx.zero_sm_table(df)
    assert set(z["collective"]) == {"allgather", "alltoall"} and set(z["size_bytes"]) == {256 << 20, 1 << 30}
    assert ((z["slowdown_high"] - z["slowdown_low"]) / 2 <= 0.01).all(), z  # the issue's +-1%
    assert (z["slowdown_low"] > 0).all()  # slower beyond the interval, not noise
    for coll, g in z.groupby("collective"):  # the larger message (more bytes through DRAM) costs more
        g = g.sort_values("size_bytes")
        assert g["slowdown_low"].iloc[1] > g["slowdown_high"].iloc[0], coll


def test_recorded_zero_sm_collectives_share_no_sm_only_the_memory(zero_run):
    """Attribution of the slowdown: no NCCL kernel ran in the traced zero-SM steps (the copy engines moved
    the data, the GEMMs had every SM), and the overlapped steps drew more DRAM than the compute alone."""
    df, trace = zero_run
    zt = trace[trace["layout"] == "zero"]
    kernels = zt[zt["activity"] == "kernel"]
    assert set(zt["rank"]) == {0, 1} and len(kernels) and (zt["activity"] != "kernel").any()  # GEMMs and copies
    assert not kernels["name"].astype(str).str.contains("nccl", case=False).any()
    att = pd.DataFrame(df.attrs["attribution"])
    assert (att.loc[att["layout"] == "zero", "nccl_kernels"] == 0).all()
    d = gx.comm_dram(df)
    dz = d[d["layout"] == "zero"]
    assert len(dz) == 4 and (dz["dram_both_pct"] > dz["dram_compute_pct"]).all()
    assert (dz["dram_both_max_pct"] > 85).all()  # the overlapped steps reach the DRAM's peak
    # the L2 (lts__t_bytes): the compute alone nearly fills it; beside the copy engines it ran at its
    # highest step mean of the run, and the extra traffic took longer at that rate
    assert df.attrs["spec"]["pm_metrics"] == "dram_l2"
    assert (dz["l2_both_gbs"] >= dz["l2_compute_gbs"]).all()
    assert dz["l2_both_gbs"].min() >= d.loc[d["layout"] != "zero", "l2_both_gbs"].max()
    assert (dz["l2_both_gbs"] < 1.05 * dz["l2_compute_gbs"]).all()  # about the GEMMs' own rate, 7-29% longer


def test_recorded_fit_run_sizes_its_gemms_for_their_partition():
    """compute_fit (batch d2, 2 x H100): in every traced split the GEMM kernels launched as many blocks as the compute
    partition has SMs, or the largest multiple of their cluster under it (stock cuBLAS: 2 x 66 = 132 on any partition),
    and the chain lost 12% on 124 SMs instead of 44% (the stock chain of the 4 x H100 run)."""
    fit, trace = gx.load_recorded("comm_fit"), gx.load_recorded("comm_fit_trace")
    assert fit.attrs["spec"]["compute_fit"] and not gx.load_recorded("comm_4gpu").attrs["spec"].get("compute_fit")
    k = trace[(trace["activity"] == "kernel") & (trace["partition"] == "remainder")
              & (trace["workload"] == "compute")]
    assert len(k) and set(k["name"].str.startswith("nvjet"))
    blocks, sms, cluster = k["grid_x"] * k["grid_y"] * k["grid_z"], k["sm_count"], k["cluster_x"]
    assert (blocks <= sms).all() and (blocks > sms - cluster).all()
    assert blocks.nunique() == fit.attrs["spec"]["comm_sms"].__len__()  # one grid per partition size
    per = []
    for df in (fit, gx.load_recorded("comm_4gpu")):
        t = gx.comm_table(df)
        p = t[(t["setup"] == "partition") & (t["compute_sm_count"] == 124)]
        per.append(p["compute_alone_ms"].median() / t["compute_whole_ms"].iloc[0] - 1)
    assert per[0] < 0.15 and per[1] > 0.4, per


def test_recorded_fit_run_moves_the_answer_to_fewer_sms():
    """Fitted GEMMs: at 16 MiB every collective's fewest SMs within 1% of the best step is the smallest split (8),
    where the stock GEMMs' split loss put it at 24-32 on the same 4 x H100 host; plain streams still win there."""
    fit, stock = gx.comm_answer(gx.load_recorded("comm_fit"), 0.01), gx.comm_answer(gx.load_recorded("comm_4gpu"), 0.01)
    small = fit[fit["size_bytes"] == 16 << 20]
    assert len(small) == 4 and (small["answer_sm_count"] == 8).all()
    assert (stock[stock["size_bytes"] == 16 << 20]["answer_sm_count"] >= 24).all()
    assert (small["speedup_vs_plain"] < 1).all()  # 0.90-0.92x: fitting halves the split loss, not more


# ------------------------------------------------------- the launcher with ranks as threads (faults)

_IDENT = ("device_name", "device_uuid", "device_index", "pci_bus_id", "device_sm_count", "l2_cache_bytes", "host",
          "driver_version", "cuda_core_version", "cuda_bindings_version", "cupti_version", "torch_version",
          "cupy_version", "options", "run_id")


class _ThreadProc:
    """A rank as a thread of this process, with the handle comm_sweep uses of a process."""

    def __init__(self, target, args, name, daemon):
        import threading

        self.thread, self.exitcode = threading.Thread(target=target, args=args, name=name, daemon=True), None

    def start(self):
        self.thread.start()

    def join(self, timeout=None):
        self.thread.join(timeout)

    def is_alive(self):
        return self.thread.is_alive()

    def terminate(self):
        pass


class _ChildEnd:
    """The rank's end of a pipe: the launcher closes its copy after starting a process, which for a
    thread of the same process is the rank's own; that first close is the launcher's."""

    def __init__(self, conn):
        self.conn, self.closes = conn, 0

    def __getattr__(self, name):
        return getattr(self.conn, name)

    def close(self):
        self.closes += 1
        if self.closes > 1:
            self.conn.close()


def _pipe():
    import multiprocessing as mp

    parent, child = mp.Pipe()
    return parent, _ChildEnd(child)


def _threaded_launch(monkeypatch, run_rank, n=2):
    """comm_sweep's own launcher, pipes and collector, with each rank a thread running ``run_rank`` and
    GPU r a card of its own (name, UUID); no NCCL, no GPU."""
    import multiprocessing as mp

    from gcexplore.comm import collectives, launch, rank
    from gcexplore.device import driver

    cards = {r: gx.DeviceInfo(name=f"card {r}", index=r, compute_capability=(9, 0), sm_count=SM,
                              min_partition_size=8, alignment=8, driver_version=13000, uuid=f"GPU-{r}")
             for r in range(n)}
    ctx = type("Ctx", (), {"Pipe": staticmethod(_pipe), "Process": staticmethod(_ThreadProc)})
    monkeypatch.setattr(mp, "get_context", lambda kind: ctx)
    monkeypatch.setattr(driver, "device_count", lambda: n)
    monkeypatch.setattr(driver, "device_info", lambda device=0: cards[int(device)])
    monkeypatch.setattr(launch, "_nccl_problem", lambda: None)
    monkeypatch.setattr(collectives, "nccl_module", lambda: type("N", (), {"get_unique_id": staticmethod(
        lambda: b"uid")}))
    monkeypatch.setattr(collectives, "nccl_versions", lambda: {"nccl": "2.28.0"})
    monkeypatch.setattr(rank, "run_rank", run_rank)
    return launch


def _rank_rows(r: int, n: int = 2) -> list[dict]:
    """Rank r's rows of a small synthetic run, as a rank sends them (no identity columns)."""
    df = comm_result(nranks=n, collectives=("allreduce",), sizes=(1 << 20,), comm_sms=(16, 32), ctas=(8,), repeats=3)
    return df[df["rank"] == r].drop(columns=list(_IDENT)).to_dict("records")


def test_comm_rows_carry_their_own_ranks_card_and_the_rank_is_a_row_key(monkeypatch):
    def run_rank(rank, nranks, uid, spec, send):
        send(("rows", _rank_rows(rank)))
        return {"rank": rank, "torch_version": "2.11.0", "nccl": "2.28.0", "pm": []}

    df = _threaded_launch(monkeypatch, run_rank).comm_sweep(gpus=2, timeout_s=30)
    for r in (0, 1):
        mine = df[df["rank"] == r]
        assert len(mine) == len(_rank_rows(r)) and set(mine["device_name"]) == {f"card {r}"}
        assert set(mine["device_uuid"]) == {f"GPU-{r}"} and set(mine["torch_version"]) == {"2.11.0"}
    assert df["run_id"].nunique() == 1 and gx.results.run.runs(df) == [df["run_id"].iloc[0]]  # one run, two cards
    gx.summarize(df)  # one run across its ranks' cards
    with pytest.raises(ValueError, match="repeat a repetition"):
        gx.summarize(pd.concat([df, df]))
    wrong = df.copy()
    wrong.loc[wrong["rank"] == 1, "rank"] = 0  # rank 1's rows relabelled: they repeat rank 0's steps
    with pytest.raises(ValueError, match="repeat a repetition"):
        gx.summarize(wrong)


def test_a_rank_that_fails_midway_leaves_every_row_sent_before(monkeypatch):
    import threading

    from gcexplore.comm.launch import CommLaunchError

    done = threading.Event()

    def run_rank(rank, nranks, uid, spec, send):
        rows = _rank_rows(rank)
        if rank == 0:
            send(("rows", rows))
            done.set()
            return {"rank": 0, "nccl": "2.28.0", "pm": []}
        done.wait(10)
        send(("rows", rows[: len(rows) // 2]))  # half its layouts, then a fault
        raise RuntimeError("NCCL error: unhandled cuda error")

    with pytest.raises(CommLaunchError, match="rank 1: RuntimeError: NCCL error") as e:
        _threaded_launch(monkeypatch, run_rank).comm_sweep(gpus=2, timeout_s=30)
    kept = e.value.rows
    assert (kept["rank"] == 1).sum() == len(_rank_rows(1)) // 2 and (kept["rank"] == 0).sum() == len(_rank_rows(0))
    assert set(kept.loc[kept["rank"] == 1, "device_uuid"]) == {"GPU-1"}  # its own card, though it never finished


def test_ctrl_c_midway_keeps_the_rows_the_ranks_sent(monkeypatch):
    import multiprocessing.connection as mpc
    import threading

    from gcexplore.experiments.runner import MeasurementInterrupted

    release = threading.Event()
    real_wait, seen = mpc.wait, {"ready": 0}

    def run_rank(rank, nranks, uid, spec, send):
        send(("rows", _rank_rows(rank)))
        release.wait(10)  # still measuring when the user presses Ctrl-C
        return {"rank": rank, "pm": []}

    def wait(conns, timeout=None):
        if seen["ready"] >= 3:  # rank 0's unique id and both ranks' rows have been read
            raise KeyboardInterrupt
        ready = real_wait(conns, timeout)
        seen["ready"] += len(ready)
        return ready

    launch = _threaded_launch(monkeypatch, run_rank)
    monkeypatch.setattr(mpc, "wait", wait)
    stopped = []  # terminate stops a rank, as it does a process (else each join waits out its timeout)
    monkeypatch.setattr(_ThreadProc, "terminate", lambda self: (stopped.append(self), release.set()))
    try:
        with pytest.raises(MeasurementInterrupted) as e:
            launch.comm_sweep(gpus=2, timeout_s=30)
    finally:
        release.set()
    kept = e.value.partial
    assert kept.attrs["partial"] is True and kept.attrs["kind"] == "comm"
    assert sorted(kept["rank"].value_counts().items()) == [(0, len(_rank_rows(0))), (1, len(_rank_rows(1)))]
    assert stopped  # the ranks still measuring were stopped by their handles


# ------------------------------------------------------------------ computed once (issue 46)


def test_comm_table_and_answer_are_computed_once_per_unchanged_frame(monkeypatch):
    from gcexplore.comm import analysis as A

    df = gx.load_recorded("comm")
    calls = {"table": 0, "answer": 0}
    inner_table, inner_answer = A._comm_table, A._comm_answer

    def count(name, fn):
        def wrapped(*a, **k):
            calls[name] += 1
            return fn(*a, **k)
        return wrapped

    monkeypatch.setattr(A, "_comm_table", count("table", inner_table))
    monkeypatch.setattr(A, "_comm_answer", count("answer", inner_answer))
    first = gx.comm_table(df)
    second = gx.comm_table(df)
    assert calls["table"] == 1 and second is not first  # kept, and each call gets its own copy
    pd.testing.assert_frame_equal(first, second)
    assert first.attrs == second.attrs
    first.loc[0, "step_ms"] = -1.0  # a caller's edit of its copy is not what the next call returns
    assert gx.comm_table(df).loc[0, "step_ms"] == second.loc[0, "step_ms"] and calls["table"] == 1
    a1, a2 = gx.comm_answer(df, 0.01), gx.comm_answer(df, 0.01)
    pd.testing.assert_frame_equal(a1, a2)
    assert calls["answer"] == 1 and calls["table"] == 1  # the answer's table is the kept one
    gx.comm_answer(df, 0.05)
    assert calls["answer"] == 2  # another tolerance is another answer
    # an in-place edit of the measurement computes afresh, and the table follows it
    df.loc[df["workload"] == "comm", "step_ms"] *= 2.0
    third = gx.comm_table(df)
    assert calls["table"] == 2
    assert third["step_ms"].to_numpy() == pytest.approx(2.0 * second["step_ms"].to_numpy())
    gx.comm_answer(df, 0.01)
    assert calls["answer"] == 3
    copy = df.copy()  # a copy is another frame: computed for itself
    gx.comm_table(copy)
    assert calls["table"] == 3


# ------------------------------------------------------------------ progress (issue 46)


def test_comm_sweep_shows_a_progress_bar_on_stderr_and_closes_it_on_a_failure(monkeypatch, capsys):
    import threading

    import tqdm.auto

    from gcexplore.comm.launch import CommLaunchError

    def run_rank(rank, nranks, uid, spec, send):
        send(("rows", _rank_rows(rank)))
        return {"rank": rank, "torch_version": "2.11.0", "nccl": "2.28.0", "pm": []}

    launch = _threaded_launch(monkeypatch, run_rank)
    lines = []
    launch.comm_sweep(gpus=2, timeout_s=30, progress=lines.append)
    assert sorted(lines) == [f"rank {r}: {len(_rank_rows(r))} rows" for r in (0, 1)], lines
    capsys.readouterr()
    launch.comm_sweep(gpus=2, timeout_s=30)  # default: the bar, on stderr
    out = capsys.readouterr()
    assert "comm:" in out.err and "layout" in out.err and "comm:" not in out.out, out.err
    with pytest.raises(TypeError, match="progress is True"):
        launch.comm_sweep(gpus=2, timeout_s=30, progress=1)

    made = []

    class Bar:
        def __init__(self, total=None, initial=0, desc="", unit=""):
            self.desc, self.n, self.closed = desc, initial, False
            made.append(self)

        def update(self, k=1):
            self.n += k

        def set_postfix_str(self, s):
            pass

        def close(self):
            self.closed = True

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    done = threading.Event()

    def failing(rank, nranks, uid, spec, send):
        if rank == 0:
            send(("rows", _rank_rows(rank)))
            done.set()
            return {"rank": 0, "nccl": "2.28.0", "pm": []}
        done.wait(10)
        raise RuntimeError("NCCL error: unhandled cuda error")

    with pytest.raises(CommLaunchError):
        _threaded_launch(monkeypatch, failing).comm_sweep(gpus=2, timeout_s=30)
    (bar,) = made
    assert bar.closed and bar.desc == "comm" and bar.n == 1
