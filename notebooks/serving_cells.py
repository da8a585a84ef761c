"""The cells of notebook 05 (serving splits), kept apart so make_notebooks.py stays small."""

from __future__ import annotations


def cells(md, code, parameters, detect) -> list:
    return [
        md('''
# Serving splits: prefill and decode on one GPU

Inference engines multiplex **prefill** (a new prompt: compute-bound) and **decode** (one token
per running sequence per step: memory-bound, latency-critical) on one GPU. With green contexts
each gets its own SMs (SGLang's PD-Mux `--sm-group-num`, TensorRT-LLM, semi-PD, Nexus, Bullet),
and the operator picks the decode share. This notebook shows the trade per split, with the
numbers an operator needs:

1. decode's inter-token latency (ITL, every gap between two decode steps, on the GPU's clock) and
   prefill's time to first token (TTFT, queueing included) per decode share and load (Poisson
   arrivals at several rates, and bursts of long prompts arriving at once),
2. the same arrivals on two baselines: both on the whole GPU in plain streams, and time-sliced
   (a decode step, then a prefill chunk, as chunked prefill does),
3. goodput at SLOs (the highest request rate whose run kept TTFT within bound for 90% of
   requests and the decode ITL p99 within bound) and the split an advisor picks from step
   profiles, measuring only a few runs,
4. how close those predictions come to the measured tails.

The workload is synthetic and engine-agnostic: a stack of Llama-3-8B-like decoder layers in
PyTorch with random bf16 weights (`gcexplore.decoder_stack`); your own `decode=fn` and
`prefill=fn` fit the same roles (`gcexplore.serving_roles`). Without a GPU the notebook shows
a grid recorded on the project's GPU by `bench/serving.py` (its card and date are printed with it).
'''),
        parameters,
        detect,
        code('''
from gcexplore.serving import analysis as S

if LIVE:
    shape = workloads.ModelShape(layers=2 if QUICK else 4)
    model = gcexplore.decoder_stack(shape, batch=16 if QUICK else 32, kv_len=1024 if QUICK else 2048,
                                    prompt=1024 if QUICK else 2048, chunk=256 if QUICK else 512)
    df = gcexplore.serve(model, [32, 64, 96], rates=[20.0, 40.0] if QUICK else [20.0, 40.0, 60.0],
                         duration_s=0.3 if QUICK else 1.0)
    model.close()
    slo = S.ServingSLO(ttft_ms=100.0, itl_p99_ms=2.0)
else:
    df = recorded("serving")
    a = df.attrs
    slo = S.ServingSLO(a["slo_ttft_ms"], a["slo_itl_p99_ms"], a["slo_attainment"])
print("model:", df.attrs["model"])
print("SLO:", slo.text())
'''),
        md('''
## 1. Tails per run

One row per run (mode, split, load): ITL p50 / p99 / max over every decode gap in the run's
window, TTFT p50 / p99 over every request (a request the run could not start in time counts as
infinitely late), and both throughputs. The profile rows (`alone`: each role by itself on its
partition; `paired`: both on the split, requests back to back) are left out here. A load named
`burst R/s xN` brings N prompts at once, the bursts a Poisson process of R / N per second.
'''),
        code('''
table = gcexplore.serving_table(df, slo)
cols = ["mode", "layout", "load", "itl_p50_ms", "itl_p99_ms", "ttft_p50_ms", "ttft_p99_ms", "served", "requests",
        "decode_tokens_per_s", "prefill_tokens_per_s", "meets_slo"]
display(table[~table["mode"].isin(S.PROFILE_MODES)][cols].round(3))
print(S.trade_facts(table)["text"])
'''),
        md('''
## 2. Goodput per split against both baselines, and the advisor

Goodput counts the Poisson loads (a rate of bursts is another load). `advise_recorded` replays
the advisor on the recorded grid: it predicts every split's TTFT (the load's arrivals queued
FIFO at the prefill time measured next to decode, the `paired` rows) and ITL (the decode gaps
measured with a prefill running, for the share of time the queue keeps prefill busy, and alone
otherwise), then asks for the runs the predictions cannot settle, which are looked up here
instead of measured. Its cost is the GPU time of the profiles and of what it asked for.
'''),
        code('''
display(gcexplore.goodput_table(table, slo).round(3))
advice, grid = S.advise_recorded(df, slo)
print(advice.reason)
print(f"advisor: {len(advice.measured)} loaded runs, {advice.cost_ms / 1e3:.2f} s of GPU time = "
      f"{grid['cost_share']:.1%} of the exhaustive grid's {grid['grid_cost_ms'] / 1e3:.2f} s; its split reaches "
      f"{grid['reaches']:.0%} of the grid's best goodput ({grid['grid_best_layout']}, "
      f"{grid['grid_best_goodput_rps']:g} requests/s)")
gcexplore.plot_serving(df, slo, advised=advice.layout)
'''),
        md('''
## 3. How far the predictions are from the measurements

Predicted / measured - 1 for ITL p99 and TTFT p50, per split and load (bursts included), from the
profile rows only: no loaded run goes into them. Prefill and decode share DRAM bandwidth and L2
across the partitions, which the `paired` profile measures; predictions from the solo (`alone`)
rows alone miss that, and are shown for comparison.
'''),
        code('''
profiles = df[df["mode"].isin(S.PROFILE_MODES)]
for name, rows in (("step profiles", profiles), ("solo only", profiles[profiles["mode"] == "alone"])):
    errs = S.prediction_errors(S.predict_serving(rows, S.loads_of(df), slo, S.deadline_of(df)), table)
    if name == "step profiles":
        display(errs.round(3))
    print(f"{name}: ITL p99 within 10% for {(errs['itl_p99_error'].abs() <= 0.10).mean():.0%} of "
          f"{len(errs)} split x load runs; TTFT p50 within 10% for {(errs['ttft_p50_error'].abs() <= 0.10).mean():.0%}")
'''),
    ]
