"""Serving splits on one GPU: the split x load grid against the advisor, in one run.

Builds the synthetic decoder stack (Llama-3-8B-like layer shapes, ``--layers`` layers, random bf16
weights), then:

1. every role alone on every candidate partition and on the whole GPU, and both paired on every split
   with requests back to back (``serve(modes=("alone", "paired"))``): the step profiles;
2. the rates: ``--fractions`` of the whole GPU's prefill capacity (1 / its solo prefill time), and
   the SLOs: ITL p99 <= ``--itl-factor`` x the whole GPU's solo decode step (p50), TTFT <=
   ``--ttft-factor`` x its solo prefill time, for 90% of requests;
3. the exhaustive grid: every split x rate partitioned, plus both baselines (two plain streams on
   the whole GPU, and time-sliced decode + prefill chunks) on the same arrivals; then the same at
   one load of bursts (``--burst`` long prompts at once, ``--burst-fraction`` of the capacity);
4. the advisor (:func:`gcexplore.advise_split`) from the same alone rows, measuring its own
   confirmation runs.

5. where cupti-python is there, one short traced run (``--traced-split``, bursts): its GPU-clock ITL
   p50 / p99 and TTFTs against the CUPTI kernel trace (:func:`gcexplore.serving.analysis.clock_agreement`).

Prints and writes (``--out``): the per-split table (ITL p50/p99, TTFT p50/p99, throughputs), goodput
per split against both baselines, the advisor's answer and GPU-time cost against the grid's, the
prediction errors (ITL p99 and TTFT p50 per split and load, predicted from the step profiles only)
and the clock agreement. The grid with its profile rows is saved as ``serving.parquet`` (the
recorded result of notebook 05).

Run from the project root on the GPU machine: ``python3 bench/serving.py --out DIR`` (about 90 s).
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import sys
import time
from pathlib import Path

import pandas as pd

import gcexplore
from gcexplore.serving import analysis as S
from gcexplore.cli.needs import needs


def _table(df: pd.DataFrame, cols) -> str:
    return df[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="serving_out")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--kv-len", type=int, default=2048)
    p.add_argument("--prompt", type=int, default=2048)
    p.add_argument("--splits", default="16,32,48,64,80,96,112")
    p.add_argument("--fractions", default="0.15,0.3,0.45,0.6")
    p.add_argument("--duration", type=float, default=1.0)
    p.add_argument("--itl-factor", type=float, default=1.5)
    p.add_argument("--ttft-factor", type=float, default=5.0)
    p.add_argument("--burst", type=int, default=8, help="long prompts per burst (0: no burst load)")
    p.add_argument("--burst-fraction", type=float, default=0.3)
    p.add_argument("--traced-split", type=int, default=48, help="decode SMs of the CUPTI-checked run (0: none)")
    p.add_argument("--no-advisor", action="store_true")
    p.add_argument("--graphs", choices=("auto", "on", "off"), default="auto",
                   help="capture the decode step in a CUDA graph (auto: on unless a short probe run fails)")
    a = p.parse_args(argv)
    needs(modules=("torch",))
    faulthandler.dump_traceback_later(100, repeat=True)  # a stuck run says where it is
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    splits = [int(x) for x in a.splits.split(",")]
    say = print
    t0 = time.perf_counter()
    shape = gcexplore.serving.ModelShape(layers=a.layers)
    model = gcexplore.decoder_stack(shape, batch=a.batch, kv_len=a.kv_len, prompt=a.prompt)
    print(f"model: {model.description}  (built in {time.perf_counter() - t0:.1f} s)")

    graphs = a.graphs != "off"
    if a.graphs == "auto":
        try:
            gcexplore.serve(model, [splits[len(splits) // 2]], rates=[10.0], modes=("partitioned",), duration_s=0.1,
                            progress=say)
        except Exception as e:  # noqa: BLE001 - said, then measured without graphs
            print(f"decode in a CUDA graph failed ({type(e).__name__}: {e}); measuring without graphs")
            graphs = False
    t = time.perf_counter()
    alone = gcexplore.serve(model, splits, rates=[1.0], modes=("alone", "paired"), duration_s=a.duration,
                            progress=say, graphs=graphs)
    alone_wall = time.perf_counter() - t
    gcexplore.save(alone, out / "serving_alone.parquet")  # kept if a later step fails
    at = S.serving_table(alone)
    whole = at[at["layout"] == "streams"]
    decode_whole = float(whole[whole["prefill_sm_count"] == 0]["itl_p50_ms"].iloc[0])
    prefill_whole = float(whole[whole["decode_sm_count"] == 0]["service_p50_ms"].iloc[0])
    capacity = 1e3 / prefill_whole
    rates = sorted({max(1.0, round(f * capacity)) for f in (float(x) for x in a.fractions.split(","))})
    slo = S.ServingSLO(ttft_ms=round(a.ttft_factor * prefill_whole, 2), itl_p99_ms=round(a.itl_factor * decode_whole, 3))
    print(f"whole GPU alone: decode step {decode_whole:.3f} ms, prefill {prefill_whole:.3f} ms "
          f"(capacity {capacity:.1f} requests/s); rates {rates}; SLO: {slo.text()}")
    print(_table(at, ["layout", "decode_sm_count", "prefill_sm_count", "itl_p50_ms", "itl_p99_ms",
                      "service_p50_ms", "run_ms"]))
    graph_note = {}
    if graphs:  # where the decode graph helps: the same decode steps launched op by op
        mid = splits[len(splits) // 2]
        eager = S.serving_table(gcexplore.serve(model, [mid], rates=[1.0], modes=("alone",), graphs=False,
                                                duration_s=a.duration))
        for name, tab in (("graph", at), ("eager", eager)):
            d = tab[(tab["mode"] == "alone") & (tab["prefill_sm_count"] == 0)
                    & ((tab["decode_sm_count"] == mid) | (tab["layout"] == "streams"))]
            for r in d.itertuples():
                graph_note[f"{name} {r.layout} ITL p50 ms"] = r.itl_p50_ms
        print("decode step, CUDA graph vs op by op:", graph_note)

    t = time.perf_counter()
    grid = gcexplore.serve(model, splits, rates=rates, modes=("partitioned", "streams", "time_sliced"),
                           duration_s=a.duration, progress=say, graphs=graphs)
    frames = [alone, grid]
    if a.burst > 0:
        brate = max(float(a.burst), round(a.burst_fraction * capacity))
        frames.append(gcexplore.serve(model, splits, rates=[brate], pattern="burst", burst=a.burst,
                                      modes=("partitioned", "streams", "time_sliced"), duration_s=a.duration,
                                      progress=say, graphs=graphs))
    grid_wall = time.perf_counter() - t
    # one recorded result: the grid with the alone rows it is predicted from (two runs of one process,
    # each keeping its run id)
    rec = pd.concat(frames, ignore_index=True)
    rec.attrs.update(grid.attrs)
    rec.attrs["alone_run_id"] = alone.attrs["run_id"]
    rec.attrs.update(modes=gcexplore.serving.SERVING_MODES, slo_ttft_ms=slo.ttft_ms, slo_itl_p99_ms=slo.itl_p99_ms,
                     slo_attainment=slo.attainment, bench="bench/serving.py")
    gcexplore.save(rec, out / "serving.parquet")

    table = S.serving_table(rec, slo)
    cols = ["mode", "layout", "load", "itl_p50_ms", "itl_p99_ms", "ttft_p50_ms", "ttft_p99_ms",
            "decode_tokens_per_s", "prefill_tokens_per_s", "served", "requests", "ttft_attainment", "meets_slo"]
    print(_table(table[table["mode"] != "alone"], cols))
    good = S.goodput_table(table, slo)
    print("goodput per split and baseline (Poisson loads):")
    print(_table(good, ["mode", "layout", "goodput_rps", "loads_met", "itl_p99_ms", "ttft_p50_ms"]))
    part = table[(table["mode"] == "partitioned") & (table["pattern"] == "poisson")]  # the grid the advisor searches
    grid_cost = float(part["run_ms"].sum())
    best = good[good["mode"] == "partitioned"].sort_values("goodput_rps").iloc[-1]
    profiles = rec[rec["mode"].isin(S.PROFILE_MODES)]
    pred = S.predict_serving(profiles, S.loads_of(rec), slo, deadline_ms=S.deadline_of(grid))
    errs = S.prediction_errors(pred, table)
    print("prediction errors (predicted / measured - 1), from the alone and paired profiles only:")
    print(_table(errs, ["layout", "load", "itl_p99_pred_ms", "itl_p99_ms", "itl_p99_error", "ttft_p50_pred_ms",
                        "ttft_p50_ms", "ttft_p50_error"]))
    within = {}
    for name, e in (("all", errs), *errs.groupby("pattern")):
        ok_i, ok_t = e["itl_p99_error"].abs() <= 0.10, e["ttft_p50_error"].abs() <= 0.10
        within[name] = {"runs": len(e), "itl_p99_within_10pct": float(ok_i.mean()),
                        "ttft_p50_within_10pct": float(ok_t.mean()), "both_within_10pct": float((ok_i & ok_t).mean())}
    print("share of split x load predictions within 10%:", within)
    report = {"model": model.description, "device": rec.attrs.get("device_name"), "rates": rates,
              "slo": {"ttft_ms": slo.ttft_ms, "itl_p99_ms": slo.itl_p99_ms, "attainment": slo.attainment},
              "decode_whole_ms": decode_whole, "prefill_whole_ms": prefill_whole, "grid_cost_ms": grid_cost,
              "grid_best_layout": str(best["layout"]), "grid_best_goodput_rps": float(best["goodput_rps"]),
              "alone_wall_s": alone_wall, "grid_wall_s": grid_wall, "graphs": graphs, "graph_vs_eager": graph_note,
              "itl_p99_within_10pct": within["all"]["itl_p99_within_10pct"],
              "ttft_p50_within_10pct": within["all"]["ttft_p50_within_10pct"], "prediction_within": within,
              "profile_cost_ms": float(profiles.groupby(["mode", "layout", "decode_sm_count", "prefill_sm_count"])
                                       ["run_ms"].first().sum())}
    if not a.no_advisor:
        t = time.perf_counter()
        advice, measured = gcexplore.advise_split(model, splits, slo, rates=rates, duration_s=a.duration,
                                                  alone=profiles, progress=say, graphs=graphs)
        top = good[(good["mode"] == "partitioned") & (good["layout"] == advice.layout)]
        reached = float(top["goodput_rps"].iloc[0]) if len(top) else 0.0
        report.update(advisor_layout=advice.layout, advisor_goodput_rps=advice.goodput_rps,
                      advisor_goodput_in_grid_rps=reached, advisor_cost_ms=advice.cost_ms,
                      advisor_cost_share=advice.cost_ms / grid_cost, advisor_runs=len(advice.measured),
                      advisor_wall_s=time.perf_counter() - t, advisor_reason=advice.reason,
                      advisor_reaches=reached / float(best["goodput_rps"]) if best["goodput_rps"] else None)
        gcexplore.save(measured, out / "serving_advisor.parquet")
    if a.traced_split:
        report["clock_agreement"] = _clock_check(model, a.traced_split, rates[min(1, len(rates) - 1)], graphs)
    print(json.dumps(report, indent=1, default=str))
    (out / "serving_report.json").write_text(json.dumps(report, indent=1, default=str))
    for name, frame in (("serving_table.csv", table), ("serving_goodput.csv", good), ("serving_errors.csv", errs)):
        frame.to_csv(out / name, index=False)
    model.close()
    print(f"total wall {time.perf_counter() - t0:.1f} s")
    return 0


def _clock_check(model, split: int, rate: float, graphs: bool) -> dict:
    """One short traced run of bursts: the GPU-clock ITLs and TTFTs against a CUPTI kernel trace."""
    try:
        from gcexplore.trace import collector

        collector.require_cupti()
    except Exception as e:  # noqa: BLE001 - said in the report
        return {"skipped": f"{type(e).__name__}: {e}"}
    from gcexplore.serving.experiment import traced_splits

    frames: list = []
    df = gcexplore.serve(model, [split], rates=[rate], duration_s=0.3, modes=("partitioned",),
                         trace=traced_splits(frames),
                         pattern="burst", burst=4, seed=3, graphs=graphs)
    out = {"layout": str(df["layout"].iloc[0]), "load": str(df["load"].iloc[0]),
           **S.clock_agreement(df, frames[0])}
    print("clock vs CUPTI:", out)
    return out


if __name__ == "__main__":
    sys.exit(main())
