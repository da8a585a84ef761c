"""Serving splits without a GPU: arrivals from a seed, the SLO / goodput arithmetic on synthetic gap
and TTFT records with known answers, predictions from solo profiles, and the advisor's search.

The synthetic frames are made up here (device "synthetic GPU (not a measurement)"), never saved.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import pytest

from gcexplore.serving import analysis as S
from gcexplore.schema import frame
from gcexplore.serving.roles import ModelShape, arrivals, serving_roles

SYNTH = {"device_name": "synthetic GPU (not a measurement)", "run_id": "synthetic", "kind": "serving"}


def _load(rate):
    return dict(load=f"poisson {rate:g}/s", rate_rps=float(rate), pattern="poisson", burst=1, duration_s=1.0, seed=0)


def _run(mode, layout, dsm, psm, rate, itls, arrivals_ms, ttfts, tokens=(32, 2048), window=1000.0):
    """Rows of one run: gaps with the given ITLs, requests with the given TTFTs (NaN: unserved)."""
    common = dict(mode=mode, layout=layout, decode_sm_count=dsm, prefill_sm_count=psm, **_load(rate),
                  window_ms=window, run_ms=window)
    rows, t = [], 0.0
    for j, g in enumerate(itls):
        rows.append(dict(common, record="gap", index=j, start_ms=t, end_ms=t + g, itl_ms=g, tokens=tokens[0]))
        t += g
    for i, (a, ttft) in enumerate(zip(arrivals_ms, ttfts)):
        r = dict(common, record="request", index=i, arrival_ms=a, tokens=tokens[1])
        if not math.isnan(ttft):
            r.update(start_ms=a, end_ms=a + ttft, ttft_ms=ttft, queue_ms=0.0)
        rows.append(r)
    return rows


# -- arrivals ---------------------------------------------------------------

def test_arrivals_are_reproducible_from_a_seed_and_follow_the_rate():
    a, b, c = arrivals(50, 2.0, seed=7), arrivals(50, 2.0, seed=7), arrivals(50, 2.0, seed=8)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert np.all(np.diff(a) >= 0) and a.min() >= 0 and a.max() < 2000
    counts = [len(arrivals(50, 2.0, seed=s)) for s in range(200)]
    assert abs(np.mean(counts) - 100) < 3  # Poisson mean rate x duration
    burst = arrivals(40, 1.0, seed=1, pattern="burst", burst=4)
    assert len(burst) % 4 == 0 and len(np.unique(burst)) == len(burst) // 4


@pytest.mark.parametrize("kw, msg", [({"rate": 0}, "rate"), ({"duration_s": -1}, "duration_s"),
                                     ({"pattern": "uniform"}, "valid: poisson, burst")])
def test_arrivals_refuse_bad_loads(kw, msg):
    args = {"rate": 10, "duration_s": 1.0, **kw}
    with pytest.raises(ValueError, match=msg):
        arrivals(args.pop("rate"), args.pop("duration_s"), **args)


def test_model_shape_counts_llama_like_work():
    s = ModelShape()
    assert s.head_dim == 128 and s.layer_params == 218_103_808  # Llama-3-8B's layer without norms
    assert s.prefill_flops(2048) > 2 * 2048 * s.layer_params * s.layers
    with pytest.raises(ValueError, match="multiple of kv_heads"):
        ModelShape(heads=32, kv_heads=6)


class _Stream:
    def __init__(self, name):
        self.name = name

    def __cuda_stream__(self):
        return (0, 0)

    def __repr__(self):
        return self.name


def test_user_callables_become_roles():
    calls, s, t = [], _Stream("s"), _Stream("t")
    m = serving_roles(decode=lambda *, stream: calls.append(("d", stream)), prefill=lambda *, stream: calls.append(
        ("p", stream)), decode_tokens=8, prompt_tokens=100)
    m.decode(stream=s)
    m.prefill_chunks[0](stream=t)
    assert calls == [("d", s), ("p", t)] and m.decode_tokens == 8 and not m.graphable
    with pytest.raises(TypeError, match="decode must be a callable"):
        serving_roles(decode=3, prefill=print)


# -- SLO and goodput arithmetic ---------------------------------------------

def test_table_tails_and_throughputs_have_known_values():
    itls = [1.0] * 98 + [5.0, 9.0]                       # p50 1, max 9
    ttfts = [float(t) for t in range(1, 10)] + [math.nan]  # one unserved request
    df = frame(_run("partitioned", "64+68", 64, 68, 10, itls, np.arange(10) * 50.0, ttfts), "serving", SYNTH)
    t = S.serving_table(df).iloc[0]
    assert t["itl_p50_ms"] == 1.0 and t["itl_max_ms"] == 9.0
    assert t["itl_p99_ms"] == pytest.approx(5.0 + 0.01 * 4.0)  # linear between the 99th and 100th gaps
    assert t["ttft_p50_ms"] == pytest.approx(5.5) and math.isinf(t["ttft_p99_ms"])
    assert t["served"] == 9 and t["requests"] == 10
    assert t["decode_tokens_per_s"] == pytest.approx(100 * 32 / 1.0)   # 100 gaps in a 1 s window
    assert t["prefill_tokens_per_s"] == pytest.approx(9 * 2048 / 1.0)


def test_slo_attainment_counts_unserved_requests_as_misses():
    ttfts = [float(t) for t in range(1, 10)] + [math.nan]
    df = frame(_run("partitioned", "64+68", 64, 68, 10, [1.0] * 10, np.zeros(10), ttfts), "serving", SYNTH)
    t = S.serving_table(df, S.ServingSLO(ttft_ms=9.0, itl_p99_ms=2.0, attainment=0.9)).iloc[0]
    assert t["ttft_attainment"] == pytest.approx(0.9) and bool(t["meets_slo"])
    t = S.serving_table(df, S.ServingSLO(ttft_ms=8.5, itl_p99_ms=2.0, attainment=0.9)).iloc[0]
    assert t["ttft_attainment"] == pytest.approx(0.8) and not bool(t["meets_slo"])
    t = S.serving_table(df, S.ServingSLO(ttft_ms=100.0, itl_p99_ms=0.5)).iloc[0]
    assert not bool(t["meets_slo"])  # the ITL p99 misses


def test_goodput_is_the_highest_rate_meeting_the_slo():
    rows = []
    for rate, ttft in ((10, 5.0), (20, 8.0), (30, 50.0)):  # the TTFT grows with the load
        rows += _run("partitioned", "64+68", 64, 68, rate, [1.0] * 20, np.arange(10.0), [ttft] * 10)
        rows += _run("streams", "streams", 132, 132, rate, [3.0] * 20, np.arange(10.0), [ttft / 2] * 10)
    df = frame(rows, "serving", SYNTH)
    g = S.goodput_table(df, S.ServingSLO(ttft_ms=10.0, itl_p99_ms=2.0)).set_index("mode")
    assert g.loc["partitioned", "goodput_rps"] == 20.0 and g.loc["partitioned", "loads_met"] == 2
    assert g.loc["streams", "goodput_rps"] == 0.0  # its ITL misses at every load


def test_goodput_counts_one_arrival_pattern():
    rows = _run("partitioned", "64+68", 64, 68, 10, [1.0] * 20, np.arange(10.0), [5.0] * 10)
    burst = _run("partitioned", "64+68", 64, 68, 40, [1.0] * 20, np.zeros(10), [5.0] * 10)
    for r in burst:
        r.update(load="burst 40/s x8", pattern="burst", burst=8)
    df = frame(rows + burst, "serving", SYNTH)
    slo = S.ServingSLO(ttft_ms=10.0, itl_p99_ms=2.0)
    assert S.goodput_table(df, slo)["goodput_rps"].tolist() == [10.0]  # Poisson loads by default
    assert S.goodput_table(df, slo, pattern="burst")["goodput_rps"].tolist() == [40.0]
    t = S.serving_table(df).set_index("load")
    assert t.loc["burst 40/s x8", "pattern"] == "burst" and t.loc["burst 40/s x8", "burst"] == 8


def test_slo_refuses_nonsense():
    with pytest.raises(ValueError, match="ttft_ms"):
        S.ServingSLO(ttft_ms=0, itl_p99_ms=1)
    with pytest.raises(ValueError, match="attainment"):
        S.ServingSLO(ttft_ms=1, itl_p99_ms=1, attainment=1.5)


def test_fifo_queue_has_known_ttfts():
    np.testing.assert_allclose(S.ttft_queue([0.0, 1.0, 2.0, 20.0], 5.0), [5.0, 9.0, 13.0, 5.0])
    out = S.ttft_queue([0.0, 0.0, 0.0], 5.0, deadline_ms=6.0)
    assert out[0] == 5.0 and out[1] == 10.0 and math.isnan(out[2])  # the third would start at 10 > 6


# -- predictions and the advisor --------------------------------------------

def _alone(layouts):
    """Alone rows: decode gaps of ``itl`` ms on each decode partition, prefill in ``service`` ms."""
    rows = []
    for dsm, itl, service in layouts:
        lay = f"{dsm}+{132 - dsm}"
        rows += _run("alone", lay, dsm, 0, 0.0, [itl] * 40, [], [], window=40 * itl)
        rows += _run("alone", lay, 0, 132 - dsm, 0.0, [], [0.0] * 4, [service * (i + 1) for i in range(4)],
                     window=4 * service)
    df = frame(rows, "serving", SYNTH)
    df.loc[df["record"] == "request", "start_ms"] = df.loc[df["record"] == "request", "end_ms"] - [
        s for _, _, s in layouts for _ in range(4)]
    return df


def test_predictions_queue_the_loads_arrivals_at_the_solo_service_time():
    alone = _alone([(32, 3.0, 4.0), (96, 1.0, 12.0)])
    loads = {"poisson 50/s": (50.0, np.arange(0.0, 100.0, 20.0))}
    p = S.predict_serving(alone, loads, S.ServingSLO(ttft_ms=10.0, itl_p99_ms=2.0)).set_index("layout")
    assert p.loc["32+100", "service_ms"] == 4.0 and p.loc["32+100", "ttft_p50_ms"] == 4.0
    assert p.loc["96+36", "ttft_p50_ms"] == 12.0 and p.loc["96+36", "itl_p99_ms"] == 1.0
    assert not p.loc["32+100", "meets_slo"] and not p.loc["96+36", "meets_slo"]


def _paired(dsm, itl, service, n=8, idle=2):
    """Paired rows: ``n`` requests back to back (arrived at 0) in ``service`` ms each, decode gaps of
    ``itl`` ms while they run, then ``idle`` gaps of 1 ms after the last one."""
    busy = int(round(n * service / itl))
    df = frame(_run("paired", f"{dsm}+{132 - dsm}", dsm, 132 - dsm, 0.0, [itl] * busy + [1.0] * idle, [0.0] * n,
                    [service * (i + 1) for i in range(n)], window=n * service), "serving", SYNTH)
    req = df["record"] == "request"
    df.loc[req, "start_ms"] = df.loc[req, "end_ms"] - service
    return df


def test_predictions_use_the_prefill_time_next_to_decode_and_its_gaps_while_busy():
    solo = _alone([(32, 1.0, 4.0)])
    profiles = pd.concat([solo, _paired(32, 1.5, 6.0)], ignore_index=True)
    profiles.attrs.update(solo.attrs)
    loads = {"light": (10.0, np.arange(10) * 100.0), "all at once": (10.0, np.zeros(10))}
    slo = S.ServingSLO(ttft_ms=5.0, itl_p99_ms=2.0)
    p = S.predict_serving(profiles, loads, slo).set_index("load")
    assert set(p["profile"]) == {"paired"} and (p["service_ms"] == 6.0).all()
    # light: no queue, the prefill busy 10 x 6 ms of the 906 ms to the last end
    assert p.loc["light", "ttft_p50_ms"] == 6.0 and p.loc["light", "busy_share"] == pytest.approx(60 / 906)
    assert p.loc["light", "itl_p50_ms"] == 1.0 and p.loc["light", "itl_p99_ms"] == 1.5  # 6.6% of the gaps slowed
    # all at once: a FIFO queue of 6 ms services (TTFT 6, 12, ..., 60), the prefill busy throughout
    assert p.loc["all at once", "ttft_p50_ms"] == 33.0 and p.loc["all at once", "busy_share"] == 1.0
    assert p.loc["all at once", "itl_p50_ms"] == 1.5  # the idle gaps after the paired run are not busy ones
    assert not p["meets_slo"].any()  # 6 ms > 5 ms: the solo 4 ms would have met it
    s = S.predict_serving(solo, loads, slo).set_index("load")
    assert set(s["profile"]) == {"solo"} and s.loc["light", "ttft_p50_ms"] == 4.0 and s.loc["light", "meets_slo"]


def test_prediction_errors_count_both_unserved_as_agreement():
    pred = pd.DataFrame({"layout": ["a", "a"], "load": ["x", "y"], "itl_p99_ms": [1.1, 1.0],
                         "ttft_p50_ms": [math.inf, math.inf]})
    meas = pd.DataFrame({"mode": "partitioned", "layout": ["a", "a"], "load": ["x", "y"], "pattern": "poisson",
                         "decode_sm_count": 64, "rate_rps": [1.0, 2.0], "itl_p99_ms": [1.0, 1.0],
                         "ttft_p50_ms": [math.inf, 50.0]})
    e = S.prediction_errors(pred, meas).set_index("load")
    assert e.loc["x", "itl_p99_error"] == pytest.approx(0.1) and e.loc["x", "ttft_p50_error"] == 0.0
    assert math.isinf(e.loc["y", "ttft_p50_error"])


def test_clock_agreement_against_a_trace_with_known_times():
    n = 20
    gaps = [dict(mode="partitioned", layout="48+84", record="gap", index=j, itl_ms=1.0) for j in range(n)]
    kern = [("p0", "gcx_tick", -50.0, -49.9)]  # the clock's warm-up tick
    kern += [("p0", "gcx_tick", 0.0, 0.001)] + [
        k for j in range(1, n + 1) for k in (("p0", "decode_step", j - 0.95, j - 0.01), ("p0", "gcx_tick", j, j + 0.001))]
    kern += [("remainder", "gcx_tick", -50.0, -49.9)]
    reqs = []
    for i, (a, ttft) in enumerate(((2.0, 5.0), (3.0, 9.0))):
        kern += [("remainder", "gcx_arrive", a, a + 0.01), ("remainder", "prefill", a + ttft - 4.0, a + ttft - 0.003),
                 ("remainder", "gcx_tick", a + ttft, a + ttft + 0.001)]
        reqs.append(dict(mode="partitioned", layout="48+84", record="request", index=i, arrival_ms=a, ttft_ms=ttft))
    trace = pd.DataFrame(kern, columns=["partition", "name", "start_ms", "end_ms"]).assign(activity="kernel")
    rows = pd.DataFrame(gaps + reqs)
    out = S.clock_agreement(rows, trace)
    assert out["itl_p50_ratio"] == pytest.approx(1.0) and out["itl_p99_cupti_ms"] == pytest.approx(1.0)
    assert out["requests"] == 2 and out["ttft_within"] == 1.0 and out["ttft_max_abs_diff_ms"] == pytest.approx(0.003)
    assert out["itl_within"] == 1.0 and out["itl_max_abs_diff_ms"] == pytest.approx(0.0, abs=1e-9)
    # a stamp 0.3 ms late behind its step: two gaps off by 0.3 ms, which the p50 does not show
    late = trace.copy()
    late.loc[(late["partition"] == "p0") & (late["name"] == "gcx_tick") & (late["start_ms"] == 7.0), "start_ms"] = 7.3
    late.loc[(late["name"] == "decode_step") & (late["start_ms"] == 8 - 0.95), "start_ms"] = 7.35  # after it
    moved = rows.copy()
    moved.loc[moved["record"].eq("gap") & moved["index"].eq(6), "itl_ms"] = 1.3
    moved.loc[moved["record"].eq("gap") & moved["index"].eq(7), "itl_ms"] = 0.7
    out = S.clock_agreement(moved, late)
    assert out["itl_p50_ratio"] == pytest.approx(1.0) and out["itl_within"] == pytest.approx(1 - 2 / (n - 1))
    assert out["itl_max_abs_diff_ms"] == pytest.approx(0.3)
    rows.loc[rows["index"].eq(1) & rows["record"].eq("request"), "ttft_ms"] = 10.0  # a stamp 1 ms off
    out = S.clock_agreement(rows, trace)
    assert out["ttft_within"] == 0.5 and out["ttft_max_abs_diff_ms"] == pytest.approx(1.003)
    with pytest.raises(ValueError, match="not a trace of this run"):
        S.clock_agreement(rows, trace[trace["start_ms"] < 10])


def test_advisor_measures_little_and_finds_the_grids_best():
    # three splits; their "measured" truth is worse than predicted by 10% (DRAM sharing)
    alone = _alone([(32, 3.0, 4.0), (64, 1.5, 6.0), (96, 1.0, 12.0)])
    rates = [20.0, 40.0, 60.0, 80.0]
    loads = {f"poisson {r:g}/s": (r, np.linspace(0, 1000, int(r), endpoint=False)) for r in rates}
    slo = S.ServingSLO(ttft_ms=15.0, itl_p99_ms=2.0)
    pred = S.predict_serving(alone, loads, slo)
    rows = []
    for r in pred.itertuples():
        arr = loads[r.load][1]
        ttft = S.ttft_queue(arr, r.service_ms * 1.1)
        rows += _run("partitioned", r.layout, r.decode_sm_count, r.prefill_sm_count, r.rate_rps,
                     [r.itl_p99_ms * 1.1] * 50, arr, ttft)
    grid = frame(rows, "serving", SYNTH)
    table = S.serving_table(grid, slo)
    truth = S.goodput_table(table, slo).sort_values("goodput_rps").iloc[-1]
    calls = []

    def measure(layout, rate):
        calls.append((layout, rate))
        return table[(table["layout"] == layout) & (table["rate_rps"] == rate)]

    advice = S.advise(alone, loads, slo, measure)
    assert advice.layout == truth["layout"] == "64+68" and advice.goodput_rps == truth["goodput_rps"]
    assert 0 < len(calls) < len(table) / 3
    assert advice.cost_ms < 0.5 * table["run_ms"].sum()
    errs = S.prediction_errors(pred, table)
    assert np.allclose(errs["itl_p99_error"], 1 / 1.1 - 1)


def _grid():
    rows = []
    for dsm, itl, ttft in ((32, 3.0, 5.0), (64, 1.5, 8.0), (96, 1.0, 30.0)):
        for rate in (20.0, 40.0):
            rows += _run("partitioned", f"{dsm}+{132 - dsm}", dsm, 132 - dsm, rate, [itl] * 30, np.arange(10.0),
                         [ttft * rate / 20] * 10)
    for rate in (20.0, 40.0):
        rows += _run("streams", "streams", 132, 132, rate, [4.0] * 30, np.arange(10.0), [3.0] * 10)
        rows += _run("time_sliced", "time_sliced", 132, 132, rate, [2.5] * 30, np.arange(10.0), [12.0] * 10)
    return frame(rows, "serving", SYNTH)


def test_trade_facts_say_what_the_rows_show():
    f = S.trade_facts(S.serving_table(_grid()))
    assert f["itl_falls"] and f["ttft_rises"]
    assert "ITL p99 3 -> 1 ms" in f["text"] and "2 of 2 loads" in f["text"]


def test_plot_serving_draws_tails_goodput_and_the_advised_split():
    from gcexplore.serving.view import plot_serving

    slo = S.ServingSLO(ttft_ms=20.0, itl_p99_ms=2.0)
    fig = plot_serving(_grid(), slo, advised="64+68")
    gids = {a.get_gid() for ax in fig.axes for a in [*ax.lines, *ax.patches] if a.get_gid()}
    assert {"itl_p99_ms:poisson 20/s", "streams:itl_p99_ms:poisson 20/s", "time_sliced:ttft_p50_ms:poisson 40/s",
            "advised", "goodput:streams", "slo:itl_p99_ms"} <= gids
    star = next(ln for ax in fig.axes for ln in ax.lines if ln.get_gid() == "advised")
    assert star.get_xdata()[0] == 64 and star.get_ydata()[0] == 40.0  # 64+68 meets at 40/s too (TTFT 16 ms)
    with pytest.raises(Exception, match="serving"):
        plot_serving(pd.DataFrame({"x": [1]}))


def test_cli_serve_checks_before_the_gpu(capsys):
    from gcexplore.cli import main

    assert main(["serve", "--ttft-ms", "5"]) == 2
    assert "give both --ttft-ms and --itl-p99-ms" in capsys.readouterr().err
    assert main(["serve", "--chunk", "4096", "--prompt", "1024"]) == 2
    with pytest.raises(SystemExit) as e:
        main(["serve", "--rates", "0"])
    assert e.value.code == 2 and "rates must be positive" in capsys.readouterr().err


# -- the experiment's host logic on a simulated GPU ----------------------------

class _SimEvent:
    """Done when the wall clock reaches the stream's virtual time at the record; ``sync`` waits for it (the
    GPU's back-pressure: without it a stream's clock ran ahead of the host, and a time-sliced request
    admitted by the host's clock could end before it arrived)."""

    def __init__(self, at_ms: float):
        self.at = at_ms

    @property
    def is_done(self) -> bool:
        return (time.perf_counter() - _T0) * 1e3 >= self.at

    def sync(self):
        wait = self.at - (time.perf_counter() - _T0) * 1e3
        if wait > 0:
            time.sleep(wait / 1e3)


class _SimStream:
    """A stream with its own virtual clock (ms): work advances it; events and syncs wait for it."""

    def __init__(self, name, clock):
        self.name, self.t = name, clock

    def __cuda_stream__(self):
        return (0, id(self))

    def record(self):
        return _SimEvent(_cursor(self))

    def sync(self):
        self.record().sync()


_T0 = time.perf_counter()


def _cursor(stream) -> float:
    """Where a simulated stream is (ms): its last work's end, or now when it is idle."""
    now = stream.t["now"]
    now[stream.name] = max(now[stream.name], (time.perf_counter() - _T0) * 1e3)
    return now[stream.name]


class _SimClock:
    def __init__(self, info, torch, max_requests):  # request buffers as small as the real clock's
        self.steps = np.zeros(4096, dtype=np.int64)
        self.start, self.end = (np.zeros(max_requests, dtype=np.int64) for _ in range(2))
        self.stamped = 0

    def reset(self):
        for b in (self.steps, self.start, self.end):
            b[:] = 0
        self.stamped = 0

    def warm(self, *streams):
        self.warmed = streams

    def tick(self, stream, buf, i):
        buf[i] = int(_cursor(stream) * 1e6)

    def step_tick(self, stream):  # the next slot, as the real clock's device-side count
        self.stamped += 1
        self.tick(stream, self.steps, self.stamped)

    def arrive(self, stream, offset_ms, i):
        now = stream.t["now"]
        # the GPU holds the request until the run's first tick; the simulation takes that as now
        base = self.steps[0] / 1e6 if self.steps[0] else (time.perf_counter() - _T0) * 1e3
        now[stream.name] = max(_cursor(stream), base + offset_ms)
        self.start[i] = int(now[stream.name] * 1e6)

    def read(self, steps, n):
        assert self.stamped == steps, "every launched decode step stamps exactly one slot"
        return self.steps[:steps + 1].copy(), self.start[:n].copy(), self.end[:n].copy()


def _simulated(monkeypatch, prefill=None):
    """The serving experiment module on a simulated GPU, and a model whose prefill is ``prefill`` (default
    5 ms of simulated work)."""
    import sys
    import types

    from gcexplore.device.driver import DeviceInfo
    from gcexplore.serving import experiment as E

    clocks = {"now": {}}

    def stream(name):
        clocks["now"].setdefault(name, 0.0)
        return _SimStream(name, clocks)

    def work(ms, wait):
        def run(*, stream):  # a decode step holds the host as long as the simulated GPU works
            if wait:
                time.sleep(ms / 1e3)
            stream.t["now"][stream.name] = _cursor(stream) + ms
        return run

    model = serving_roles(decode=work(1.0, True), prefill=prefill or work(5.0, False), decode_tokens=32,
                          prompt_tokens=2048,
                          prefill_chunks=[work(1.25, False)] * 4)

    class _Dec:
        def __init__(self, model, s, where, graphs, clock):
            self.stream = s

            def step():
                model.decode(stream=s)
                clock.step_tick(s)

            self.step = step

        def close(self):
            pass

    class _Parts:
        def __init__(self, k):
            self.k = k
            self.parts = [types.SimpleNamespace(sm_count=k, stream=stream(f"d{k}"))]
            self.remainder = types.SimpleNamespace(sm_count=132 - k, stream=stream(f"p{k}"))

        def __getitem__(self, i):
            return self.parts[i]

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    whole = types.SimpleNamespace(streams=(stream("w0"), stream("w1")), __enter__=None)

    class _Whole:
        def __enter__(self):
            return whole

        def __exit__(self, *exc):
            return False

    info = DeviceInfo(name="simulated GPU (not a measurement)", index=0, compute_capability=(9, 0), sm_count=132,
                      min_partition_size=8, alignment=8, driver_version=13000)
    fake_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(empty_cache=lambda: None))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setattr(E, "_Clock", _SimClock)
    monkeypatch.setattr(E, "_Decode", _Dec)
    monkeypatch.setattr(E, "device_info", lambda device: info)
    monkeypatch.setattr(E.partitions, "split", lambda counts, **kw: _Parts(counts[0]))
    monkeypatch.setattr(E.partitions, "whole_device", lambda *a, **kw: _Whole())
    return E, model


def test_serve_runs_every_mode_on_a_simulated_gpu(monkeypatch):
    E, model = _simulated(monkeypatch)
    df = E.serve(model, [32, 96], rates=[30.0, 60.0], duration_s=0.2, seed=2)
    t = S.serving_table(df)
    assert set(t["mode"]) == {"alone", "paired", "partitioned", "streams", "time_sliced"}
    assert set(t[t["mode"] == "partitioned"]["layout"]) == {"32+100", "96+36"}
    paired = t[t["mode"] == "paired"]  # requests back to back next to decode, on each split only
    assert set(paired["layout"]) == {"32+100", "96+36"} and (paired["served"] == E._PAIRED_REQUESTS).all()
    assert np.allclose(paired["service_p50_ms"], 5.0, atol=0.05) and (paired["gaps"] > 0).all()
    loaded = t[t["mode"] != "alone"]
    assert (loaded["served"] == loaded["requests"]).all() and (loaded["gaps"] > 0).all()
    # every request ends after it arrived; not checked time-sliced, where the simulated stream runs
    # ahead of the host without the GPU's back-pressure
    reqs = df[(df["record"] == "request") & df["mode"].isin(["partitioned", "streams"])]
    assert (reqs["ttft_ms"] > 0).all() and (reqs["queue_ms"] >= 0).all()
    alone = t[t["mode"] == "alone"]
    assert set(alone["service_p50_ms"].dropna().round(3)) == {5.0}
    assert np.allclose(alone["itl_p50_ms"].dropna(), 1.0, atol=0.3)  # plus the host's own time
    # profiles at a load of one request still make room for every paired request
    few = S.serving_table(E.serve(model, [32], rates=[5.0], duration_s=0.2, modes=("alone", "paired"), seed=2))
    assert few[few["mode"] == "paired"]["served"].tolist() == [E._PAIRED_REQUESTS]
    with pytest.raises(ValueError, match="valid partition sizes are 8, 16"):
        E.serve(model, [132], rates=[10.0])


def _failing_prefill(monkeypatch, exc, after_calls):
    """A prefill that raises ``exc`` at its ``after_calls``-th call (midway through the grid)."""
    calls = {"n": 0}

    def prefill(*, stream):
        calls["n"] += 1
        if calls["n"] > after_calls:
            raise exc
        stream.t["now"][stream.name] = _cursor(stream) + 5.0

    return prefill, calls


@pytest.mark.parametrize("exc, aborted", [(RuntimeError("CUDA error: an illegal memory access"), "MeasurementFailed"),
                                          (KeyboardInterrupt(), "MeasurementInterrupted")])
def test_a_serving_run_stopped_midway_keeps_the_runs_measured_before(monkeypatch, exc, aborted):
    """A workload that raises (or Ctrl-C) in the second split: the first split's rows come back in
    exc.partial, as a serving result with the card's and the process's identity."""
    from gcexplore.experiments import runner

    probe = {"n": 0}

    def counting(*, stream):
        probe["n"] += 1
        stream.t["now"][stream.name] = _cursor(stream) + 5.0

    E, model = _simulated(monkeypatch, prefill=counting)
    E.serve(model, [32], rates=[30.0], duration_s=0.1, seed=2, modes=("partitioned",))
    prefill, calls = _failing_prefill(monkeypatch, exc, probe["n"])  # raises in the second split's first call
    E, model = _simulated(monkeypatch, prefill=prefill)
    with pytest.raises(getattr(runner, aborted)) as e:
        E.serve(model, [32, 96], rates=[30.0], duration_s=0.1, seed=2, modes=("partitioned",))
    assert calls["n"] == probe["n"] + 1  # it did stop midway
    kept = e.value.partial
    assert kept.attrs["partial"] is True and kept.attrs["kind"] == "serving"
    assert set(kept["layout"]) == {"32+100"}  # the first split, whole: its gaps and every request
    requests = kept[kept["record"] == "request"]
    assert (kept["record"] == "gap").any() and len(requests) == len(arrivals(30.0, 0.1, seed=2))
    import socket

    assert set(kept["host"]) == {socket.gethostname()}  # the process's identity, not ""
    assert set(kept["device_name"]) == {"simulated GPU (not a measurement)"} and kept["run_id"].nunique() == 1
    assert "32+100" in set(S.serving_table(kept)["layout"])


class _Bar:
    """A stand-in for tqdm.auto.tqdm that records what the experiment does with its bar."""

    made: list = []

    def __init__(self, total=None, initial=0, desc="", unit=""):
        self.total, self.n, self.desc, self.unit, self.closed, self.postfix = total, initial, desc, unit, False, ""
        _Bar.made.append(self)

    def update(self, k=1):
        assert not self.closed
        self.n += k

    def set_postfix_str(self, s):
        self.postfix = s

    def close(self):
        self.closed = True


def test_serve_shows_a_progress_bar_on_stderr_as_sweep_does(monkeypatch, capsys):
    E, model = _simulated(monkeypatch)
    lines = []
    E.serve(model, [32, 96], rates=[30.0, 60.0], duration_s=0.1, seed=2, progress=lines.append)  # the CLI's way
    total = E._runs([32, 96], E.SERVING_MODES, 2)
    assert len(lines) == total == 2 * (1 + 1 + 2) + 1 + 2 + 2  # per split alone, paired, two loads; streams; sliced
    capsys.readouterr()
    E.serve(model, [32, 96], rates=[30.0, 60.0], duration_s=0.1, seed=2)  # default: the bar
    out = capsys.readouterr()
    assert "serve: 100%" in out.err and f"{total}/{total}" in out.err and "run" in out.err, out.err
    assert "serve" not in out.out
    E.serve(model, [32], rates=[30.0], duration_s=0.1, seed=2, progress=False)
    assert capsys.readouterr().err == ""
    with pytest.raises(TypeError, match="progress is True"):
        E.serve(model, [32], rates=[30.0], duration_s=0.1, seed=2, progress="yes")


def test_serve_closes_its_bar_when_a_run_fails(monkeypatch):
    import tqdm.auto

    from gcexplore.experiments import runner

    monkeypatch.setattr(tqdm.auto, "tqdm", _Bar)
    _Bar.made = []
    prefill, _ = _failing_prefill(monkeypatch, RuntimeError("CUDA error: an illegal memory access"), 3)
    E, model = _simulated(monkeypatch, prefill=prefill)
    with pytest.raises(runner.MeasurementFailed):
        E.serve(model, [32, 96], rates=[30.0], duration_s=0.1, seed=2, modes=("partitioned",))
    (bar,) = _Bar.made
    assert bar.closed and bar.desc == "serve" and bar.unit == "run" and bar.n < bar.total


def test_cli_serve_saves_the_rows_measured_before_a_failure(monkeypatch, tmp_path, capsys):
    """gcexplore serve writes what it measured before a failure, then exits non-zero."""
    import argparse

    import gcexplore.cli.commands  # noqa: F401 (first: gcexplore.serving.cli imported alone runs in a circle)
    from gcexplore.experiments.runner import MeasurementFailed
    from gcexplore.results.io import load
    from gcexplore.serving import cli, experiment, roles

    part = _grid()
    part.attrs["partial"] = True

    def serve(*a, **kw):
        raise MeasurementFailed("RuntimeError while measuring the serving run (boom); the rows ... exc.partial", part)

    monkeypatch.setattr(experiment, "serve", serve)
    monkeypatch.setattr(cli, "_require_gpu", lambda: None)  # the stand-in run needs no driver
    monkeypatch.setattr(roles, "decoder_stack", lambda *a, **kw: type("M", (), {"close": lambda self: None})())
    out = tmp_path / "serving.parquet"
    args = argparse.Namespace(recorded=False, out=str(out), chunk=512, prompt=2048, rates=[20.0], duration=0.2,
                              seed=0, pattern="poisson", burst=8, layers=1, batch=4, kv_len=64, no_graphs=True,
                              device=0, advise=False, decode_sms=[32], ttft_ms=None, itl_p99_ms=None,
                              attainment=0.9)
    assert cli.cmd_serve(args) == 1
    back = load(out)
    assert len(back) == len(part) and "rows measured so far" in capsys.readouterr().err


def test_two_cards_stay_apart_and_a_doubled_run_is_refused():
    a = _grid()
    b = _grid().assign(run_id="other", device_uuid="GPU-other")
    both = pd.concat([a, b], ignore_index=True)
    slo = S.ServingSLO(ttft_ms=20.0, itl_p99_ms=2.0)
    t = S.serving_table(both, slo)
    assert len(t) == 2 * len(S.serving_table(a, slo)) and set(t["run_id"]) == {"synthetic", "other"}
    g = S.goodput_table(t, slo)
    assert len(g) == 2 * len(S.goodput_table(a, slo))
    with pytest.raises(Exception, match="repeat a repetition"):
        S.serving_table(pd.concat([a, a], ignore_index=True))


# -- the recorded H100 grid -------------------------------------------------------

def _recorded():
    import gcexplore

    if "serving" not in gcexplore.results.recorded_names():
        pytest.skip("the recorded serving grid is not in gcexplore/data (bench/serving.py records it on a GPU)")
    df = gcexplore.load_recorded("serving")
    a = df.attrs
    return df, S.ServingSLO(a["slo_ttft_ms"], a["slo_itl_p99_ms"], a["slo_attainment"])


def test_advisor_on_the_recorded_grid_answers_from_few_runs():
    df, slo = _recorded()
    advice, grid = S.advise_recorded(df, slo)
    table = S.serving_table(df, slo)
    part = table[table["mode"] == "partitioned"]
    assert 0 < len(advice.measured) < part["layout"].nunique() * part["rate_rps"].nunique()
    assert advice.cost_ms < grid["grid_cost_ms"]
    assert advice.layout is not None, advice.reason  # the recorded grid has splits that meet its SLO
    row = part[(part["layout"] == advice.layout) & (part["rate_rps"] == advice.goodput_rps)]
    assert bool(row["meets_slo"].iloc[0])  # its answer is what the grid measured for that split and rate
    good = S.goodput_table(table, slo)
    best = good[good["mode"] == "partitioned"]["goodput_rps"].max()
    reached = good.set_index(["mode", "layout"]).loc[("partitioned", advice.layout), "goodput_rps"] / best
    assert grid["reaches"] == pytest.approx(reached) and grid["grid_best_goodput_rps"] == best
    # the advisor's goals: at least 95% of the grid's best goodput for at most 15% of its GPU time
    assert reached >= 0.95 and advice.cost_ms <= 0.15 * grid["grid_cost_ms"], (reached, advice.cost_ms / grid["grid_cost_ms"])


def test_recorded_grid_has_every_split_load_and_baseline_on_the_same_arrivals():
    df, _ = _recorded()
    loaded = df[~df["mode"].isin(S.PROFILE_MODES) & (df["record"] == "request")]
    for load, g in loaded.groupby("load"):
        arr = {k: tuple(x.sort_values("index")["arrival_ms"]) for k, x in g.groupby(["mode", "layout"])}
        assert len(set(arr.values())) == 1, load
    assert {"alone", "partitioned", "streams", "time_sliced"} <= set(df["mode"])
    part = df[df["mode"] == "partitioned"]
    if "paired" in set(df["mode"]):  # grids recorded since the paired profiles and burst loads came
        assert set(df[df["mode"] == "paired"]["layout"]) == set(part["layout"])
        bursts = loaded[loaded["pattern"] == "burst"]
        assert (bursts["burst"] > 1).all() and {m for m, _ in bursts.groupby(["mode", "layout"]).groups} == {
            "partitioned", "streams", "time_sliced"}
        assert set(bursts[bursts["mode"] == "partitioned"]["layout"]) == set(part["layout"])


def _within(errs) -> tuple[float, float]:
    return float((errs["itl_p99_error"].abs() <= 0.10).mean()), float((errs["ttft_p50_error"].abs() <= 0.10).mean())


def test_step_profiles_predict_the_recorded_grid_within_10_percent():
    """Predictions from profile rows only, scored on loaded runs none of them came from. A grid
    recorded before the paired mode existed has none: its runs at one load stand in for them (as
    ``paired`` rows) and only the other loads are scored."""
    df, slo = _recorded()
    table = S.serving_table(df, slo)
    loads = S.loads_of(df)
    profiles = df[df["mode"].isin(S.PROFILE_MODES)]
    if "paired" not in set(df["mode"]):
        top = max((k for k in loads if k.startswith("poisson")), key=lambda k: loads[k][0])
        stand_in = df[(df["mode"] == "partitioned") & (df["load"] == top)].assign(mode="paired", load="paired")
        profiles = pd.concat([profiles, stand_in], ignore_index=True)
        profiles.attrs.update(df.attrs)
        loads.pop(top)
    errs = S.prediction_errors(S.predict_serving(profiles, loads, slo, S.deadline_of(df)), table)
    assert len(errs) >= 20
    itl, ttft = _within(errs)
    assert itl >= 0.8 and ttft >= 0.8, errs.to_string()
    # the solo rows alone miss what sharing DRAM and L2 costs: their predictions are lower and worse
    solo = S.prediction_errors(S.predict_serving(df[df["mode"] == "alone"], loads, slo, S.deadline_of(df)), table)
    assert max(_within(solo)) < min(itl, ttft) and (solo["itl_p99_error"] < 0).mean() > 0.9


def test_the_serving_figure_marks_infinite_tails_and_labels_its_log_axes_plainly():
    import matplotlib

    matplotlib.use("Agg")
    import gcexplore as gx
    from gcexplore.serving import analysis as SA
    from gcexplore.serving.view import INF_LABEL, plot_serving

    df = gx.load_recorded("serving")
    table = SA.serving_table(df, None)
    part = table[table["mode"] == "partitioned"]
    fig = plot_serving(df)
    for ax, col in zip(fig.axes[:2], ("itl_p99_ms", "ttft_p50_ms")):
        infinite = int(np.isinf(part[col].to_numpy(float)).sum())
        marks = sum(len(line.get_xdata()) for line in ax.lines if str(line.get_gid()).endswith(":inf"))
        assert marks == infinite, (col, marks, infinite)  # every point with no finished request is marked
        fig.canvas.draw()
        labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
        assert labels and all(lab.replace(".", "", 1).isdigit() for lab in labels), labels  # 2, 5, 10: not 2x10^0
    assert np.isinf(part["ttft_p50_ms"].to_numpy(float)).any()  # the recording has such points: the case is real
    assert INF_LABEL in [t.get_text() for t in fig.axes[1].get_legend().get_texts()]


def test_prediction_errors_over_raw_rows_says_to_pass_a_serving_table():
    import gcexplore as gx

    df = gx.load_recorded("serving")
    pred = pd.DataFrame({"layout": ["a"], "load": ["x"], "itl_p99_ms": [1.0], "ttft_p50_ms": [1.0]})
    with pytest.raises(ValueError, match=r"raw serving rows: pass serving_table\(rows\)"):
        S.prediction_errors(pred, df)
    with pytest.raises(ValueError, match="predict_serving's frame first"):
        S.prediction_errors(pred.drop(columns=["itl_p99_ms"]), S.serving_table(df, None))


@pytest.mark.parametrize("attack", ["no requests", "no decode gaps"])
def test_a_split_with_nothing_recorded_never_meets_the_slo(attack):
    import gcexplore as gx

    df = gx.load_recorded("serving")
    slo = S.ServingSLO(df.attrs["slo_ttft_ms"], df.attrs["slo_itl_p99_ms"], df.attrs["slo_attainment"])
    t = S.serving_table(df, slo)
    met = t[t["meets_slo"] & (t["mode"] == "partitioned")].iloc[0]  # a run that meets it, honestly
    run = (df["mode"] == met["mode"]) & (df["layout"] == met["layout"]) & (df["load"] == met["load"])
    record = "request" if attack == "no requests" else "gap"
    gutted = df[~(run & (df["record"] == record))].copy()
    gutted.attrs.update(df.attrs)
    row = S.serving_table(gutted, slo).set_index(["mode", "layout", "load"]).loc[(met["mode"], met["layout"],
                                                                                   met["load"])]
    assert not row["meets_slo"], attack  # nothing recorded shows nothing met


@pytest.mark.parametrize("col", ["ttft_ms", "itl_ms"])
def test_negative_latencies_are_refused(col):
    import gcexplore as gx

    df = gx.load_recorded("serving").copy()
    i = df.index[df[col].notna()][0]
    df.loc[i, col] = -5.0
    with pytest.raises(ValueError, match=f"a {col} that is not a non-negative number"):
        S.serving_table(df)


# ------------------------------------------------------------------ how close a met SLO is (issue 46)


@pytest.mark.parametrize("met, n, words", [
    (39, 43, "39 of 43 requests within 30 ms, 38.7 needed: one more missed would fail it"),  # the recorded case
    (40, 43, "40 of 43 requests within 30 ms, 38.7 needed: two more missed would fail it"),
    (90, 100, "90 of 100 requests within 30 ms, 90 needed: one more missed would fail it"),  # exactly at the bound
    (100, 100, "100 of 100 requests within 30 ms, 90 needed"),  # clear: 11 more would fail it, not said
    (38, 43, "38 of 43 requests within 30 ms, 38.7 needed"),  # not met: no margin
])
def test_the_slo_margin_in_requests(met, n, words):
    from gcexplore.serving.margin import CLOSE_REQUESTS, slo_margin

    slo = S.ServingSLO(ttft_ms=30.0, itl_p99_ms=2.0, attainment=0.9)
    m = slo_margin({"requests": n, "ttft_attainment": met / n}, slo)
    assert m["text"] == words and m["met"] == met and m["needed"] == pytest.approx(0.9 * n)
    fewest = math.ceil(0.9 * n - 1e-9)  # counted apart: each further miss until met falls below the need
    assert m["fails_after"] == max(0, met - fewest + 1)
    assert m["close"] == (0 < m["fails_after"] <= CLOSE_REQUESTS)


def test_the_recorded_advice_says_it_rests_on_one_request():
    import gcexplore

    df = gcexplore.load_recorded("serving")
    a = df.attrs
    slo = S.ServingSLO(a["slo_ttft_ms"], a["slo_itl_p99_ms"], a["slo_attainment"])
    advice, _ = S.advise_recorded(df, slo)
    row = advice.measured[-1].iloc[-1]  # the run the advice rests on
    reqs = df[(df["record"] == "request") & (df["mode"] == row["mode"]) & (df["layout"] == row["layout"])
              & (df["load"] == row["load"])]
    met, n = int((reqs["ttft_ms"] <= slo.ttft_ms).sum()), len(reqs)  # from the rows, not the table
    spare = met - math.ceil(slo.attainment * n - 1e-9)
    assert f"({met} of {n} requests within {slo.ttft_ms:g} ms, {slo.attainment * n:.3g} needed" in advice.reason
    assert ("one more missed would fail it" in advice.reason) == (spare == 0), advice.reason
