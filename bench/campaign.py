"""Campaign scaling on 1, 2, 4 and 8 GPUs of one host, first and warm runs, with where the time goes.

(Over 500 lines: the runs, their decomposition and the report are one measurement, read together.)

Usage (a multi-GPU machine, from the project root, Dask distributed and PyTorch installed)::

    python3 bench/campaign.py --out DIR [--repeats 60] [--gpus 1,2,4,8] [--step 16] [--no-warm] [--no-direct]
                              [--no-fresh] [--cut layouts]
                              [--no-cold] [--forkserver cold|kept] [--gpu-start-too serial|together]
                              [--cpus-too off[,share,local]] [--dispatch-too eager] [--gate-too timed]
                              [--too-gpus 2,4]
    python3 bench/campaign.py --out DIR --alone-again    # no GPU: campaign vs alone again, floors of now

One grid (16 tasks: 4 pairs -- compute+memory, compute+copy, a PyTorch attention+sort
and a GEMM-chain+layer-norm factory from gcexplore/workloads/torch_pairs.py -- x 4 split sets of 2
sizes) runs on 1, then 2, 4 and 8 GPUs (one worker each; a count above the GPUs here is said, not run),
timed as the caller of ``gx.campaign`` sees it:

- first (the default; ``--no-fresh``: cold instead): `gcexplore campaign SPEC`'s path, the first campaign of a
  fresh process: this script again in a new interpreter, the campaign timed from that process's birth (Python's
  start and the imports of gcexplore and Dask in the lead-in), its cluster started as a cold one's; the issue's
  goals (>= 1.85x on 2 GPUs, 3.4x on 4, 6.5x on 8) are said against the 1-GPU first run; the ``--*-too`` runs
  run in this process and compare with a cold 1-GPU run (pass ``--no-fresh`` with them);
- cold: ``gx.campaign(..., devices=)`` in this process starts its own local cluster,
  whose workers warm up as they start (imports, GPU context, kernels) while the client plans,
  and shuts it down in the background once every row is on disk; the client imports the
  factories' module and Dask before any timing (as it has in every run after the first);
- warm: the same campaign on the warm cluster of ``gcexplore cluster start`` (:mod:`gcexplore.campaigns.warm`: a
  server process of its own, its workers' modules imported as they started; ``scheduler=``; its start and a short
  priming campaign are not timed), 8/4/2/1 GPUs after the first runs (goals >= 3.6x on 4 GPUs, 7.0x on 8);
- ``--cut layouts``: every run's tasks a layout each, longest first (``campaign(cut="layouts")``): a second
  run of the bench with it against one without compares the two ways of cutting the first tasks;
- ``--forkserver cold`` (the default): the campaign forkserver is stopped before every campaign, so
  each one (1, 2 and 4 GPUs alike) starts as the first of a process does (spawned workers, a server
  started beside them); ``kept``: a server that imported Dask, pandas, gcexplore and the factories'
  module (PyTorch) started once before any timing (its start printed apart), every campaign's workers
  forked from it, as the second and later campaigns of a process do;
- the N-GPU runs order their tasks longest first by the 1-GPU run's task times
  (``durations=``; ``--no-durations``: by the grid's estimate, which cannot tell these apart);
- the decomposition: cluster start (and the client's wait for it after planning), warm-up per worker (at
  its start + the warm-up task), lead-in (call to a card's first task), task time per card, idle tail (a
  card's last task to the end of the wait), close (its cost to the call; the background shutdown in parentheses);
- the phases of the tasks summed over the cards (build, priming: a worker's first task of a recipe calls it
  once, outside its experiment; experiment, of which checkpoint appends, process CPU time, shard write), the
  first task of a worker against the rest, the median SM clock the sweeps recorded (neighbours' power, heat);
- per task, its experiment time on N cards over on one (the slowdown when N run at once);
- per task, layout and mode: the makespans on N cards against one card (the ratio's 95%
  interval, and at 95% jointly over the comparisons), so that speed is not bought with noise;
- campaign vs alone: one task per pair run alone in this process (``gx.sweep``, no Dask) on the
  1-GPU run's card, its makespans against the same task in the 1-GPU campaign; every comparison's
  row in DIR/campaign_vs_alone.csv, the tasks alone in DIR/alone.parquet;
- the local cluster's start per worker: forkserver (the campaign's start to its server's imports done;
  0 when kept), spawn (to the worker process's birth), boot (Dask's worker set-up until the preload),
  gcexplore's import, context, kernels and the factories' modules, join; each worker's CPUs;
- the host-side rest between repetitions per phase (gcexplore/campaigns/phases.py): the GPU waiting at the gate and
  the rest besides it, with the host's enqueueing, waiting and collecting, from each task's engine record;
- ``--gpu-start-too`` / ``--cpus-too`` / ``--dispatch-too`` / ``--gate-too``: the ``--too-gpus`` counts again with
  GCEXPLORE_GPU_START / GCEXPLORE_WORKER_CPUS / GCEXPLORE_DISPATCH / GCEXPLORE_GATE set so (an A/B on one host,
  against the same 1-GPU run, or that setting's own 1-GPU run when 1 is among the --too-gpus).

Written to DIR/campaign_bench.md and .json; DIR/campaign-<N>gpu[-warm] are the campaign folders
and DIR/campaign.parquet the 2-GPU cold result as one file (bench/campaign_folder.py turns it into
the folder gcexplore/data/campaign, notebook 04's recording).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))  # the workers

PAIRS = [["compute", "memory"], ["compute", "copy"], "gcexplore.workloads.torch_pairs:attention_sort",
         "gcexplore.workloads.torch_pairs:gemm_layernorm"]
EXPERIMENT = "sweep"  # (the CPU test swaps in the stand-in experiment and pairs)

from gcexplore.campaigns.phases import engine_records, rest_phases  # noqa: E402 (ROOT on the path first)
from gcexplore.campaigns.phases import table as phase_table  # noqa: E402


def _split_sets(step: int) -> list[list[int]]:
    import gcexplore as gx

    info = gx.device_info(0)
    valid = [k for k in info.valid_sm_counts() if k % step == 0 and k < info.sm_count]
    picks = [valid[round(i * (len(valid) - 1) / 7)] for i in range(8)]
    return [picks[i:i + 2] for i in range(0, 8, 2)]


ALSO = ", with "  # a run with a setting changed (--gpu-start-too, --cpus-too): the mode's label ends with it
TOO = {"gpu_start_too": ("GCEXPLORE_GPU_START", "GPU start"), "cpus_too": ("GCEXPLORE_WORKER_CPUS", "worker CPUs"),
       "dispatch_too": ("GCEXPLORE_DISPATCH", "dispatch"), "gate_too": ("GCEXPLORE_GATE", "gate")}


def _fresh(devices, folder, splits, repeats, durations=None, cut=None) -> dict:
    """The first campaign of a fresh process, as `gcexplore campaign SPEC` is: this script again in a new
    interpreter (``--child``), its campaign timed from that process's birth (Python, gcexplore's and Dask's
    imports, the cluster, the tasks); the run it recorded, read back."""
    import pickle
    import subprocess

    out = Path(folder).with_name(Path(folder).name + "-run.pickle")
    job = {"devices": list(devices), "folder": str(folder), "splits": splits, "repeats": repeats,
           "durations": None if durations is None else str(durations), "pairs": PAIRS, "experiment": EXPERIMENT,
           "cut": cut, "out": str(out)}
    subprocess.run([sys.executable, __file__, "--child", json.dumps(job), "--out", str(out.parent)], check=True)
    with open(out, "rb") as f:
        return pickle.load(f)


def _child(job: dict) -> int:
    """In the fresh process: one cold campaign (no imports before it), its times from this process's birth."""
    import pickle

    import psutil

    born = psutil.Process().create_time()
    global PAIRS, EXPERIMENT
    PAIRS, EXPERIMENT = job["pairs"], job["experiment"]
    run = _run(job["devices"], job["folder"], job["splits"], job["repeats"], job["durations"], cut=job["cut"],
               imported=False)
    run["timings"]["process_to_call_s"] = run["wall0"] - born  # Python's start and the imports of gcexplore and Dask
    run["end_to_end_s"] += run["wall0"] - born
    run["wall0"], run["mode"] = born, "first" + run["mode"][len("cold"):]
    with open(job["out"], "wb") as f:
        pickle.dump(run, f)
    return 0


def _run(devices, folder, splits, repeats, durations=None, warm=False, fork="cold", setting=None, cut=None,
         imported=True) -> dict:
    """One campaign on ``devices``, timed as its caller sees it. Cold (the default a user gets):
    ``gx.campaign(..., devices=...)`` starts its own local cluster (its workers warm up as they start, while
    the client plans), runs, and hands the cluster's shutdown to a background thread once every row is on
    disk. Warm: on a cluster kept from an earlier campaign (``client=``), its start and a priming campaign
    not timed. ``setting``: ``(variable, value, words)``, an environment variable set for this run only
    (GCEXPLORE_GPU_START: the workers' driver and context serial/together; GCEXPLORE_WORKER_CPUS: their CPUs)."""
    import gcexplore as gx

    from gcexplore.campaigns.cluster import stop_forkserver

    state = address = None
    if fork == "cold" and not warm and imported:
        stop_forkserver()  # this campaign starts as the first of a process does
    if warm:  # the warm cluster of `gcexplore cluster start` (a server process of its own), primed by one campaign
        from gcexplore.campaigns import warm as kept

        state = Path(tempfile.mkdtemp(prefix="gcexplore-bench-")) / "state" / "cluster.json"
        mods = {p.split(":")[0] for p in PAIRS if isinstance(p, str)} | ({EXPERIMENT.split(":")[0]} - {"sweep"})
        address = kept.start(state=state, devices=list(devices), modules=sorted(mods))[0]["address"]
        os.environ[kept.STATE_ENV] = str(state)
        gx.campaign(PAIRS, [splits[0]], experiment=EXPERIMENT, options={"repeats": 2, "warmup": 1},
                    folder=Path(folder).with_name(Path(folder).name + "-prime"), scheduler=address, progress=False)
    if setting:
        old = os.environ.get(setting[0])
        os.environ[setting[0]] = setting[1]
    try:
        w0, t0 = time.time(), time.perf_counter()
        c = gx.campaign(PAIRS, splits, experiment=EXPERIMENT, options={"repeats": repeats}, folder=folder,
                        progress=False, cut=cut,
                        durations=durations, **({"scheduler": address} if warm else {"devices": list(devices)}))
        end_to_end_s, w1 = time.perf_counter() - t0, time.time()
        c.close()  # waits for the background shutdown (not part of the campaign's time) before the next run
    finally:
        if setting and old is None:
            os.environ.pop(setting[0], None)
        elif setting:
            os.environ[setting[0]] = old
        if warm:
            from gcexplore.campaigns import warm as kept

            kept.stop(state)
            os.environ.pop(kept.STATE_ENV, None)
    df = gx.load_campaign(folder)
    mode = ("warm" if warm else "cold" if fork == "cold" else "cold, forkserver kept")
    mode += ", cut a layout each" if cut else ""
    mode += f"{ALSO}{setting[2]} {setting[1]}" if setting else ""
    gpu_s, engine = _from_shards(folder)
    return {"gpu_s": gpu_s, "engine": engine, "n": len(devices), "mode": mode, "end_to_end_s": end_to_end_s,
            "timings": dict(c.timings), "wall0": w0, "wall1": w1 - c.timings.get("close_s", 0.0),
            "reports": c.reports, "warm_ups": c.warm_ups, "tasks": c.tasks, "df": df}


def _from_shards(folder) -> tuple[dict, dict]:
    """key -> the GPU time its repetitions took (measured and warm-up: gpu_time_ms), where its shard says;
    key -> what its engine recorded (the gate, the host-side phases)."""
    from gcexplore.analysis.tuning import gpu_time_ms
    from gcexplore.campaigns.store import CampaignFolder

    out, frames = {}, CampaignFolder(folder).scan()[0]
    for key, df in frames.items():
        try:
            out[key] = gpu_time_ms(df) / 1000.0
        except (KeyError, ValueError, TypeError):  # not a timing result (the CPU stand-in's)
            continue
    return out, engine_records(frames)


def _host_steps(run: dict, done: list) -> dict:
    """Summed over the tasks: experiment time = GPU time of the repetitions + the host-side steps outside them
    (set-up, partitions, warm, nvml, drain, close; checkpoint appends) + the rest (enqueueing, waiting, Python)."""
    steps: dict[str, float] = {}
    for r in done:
        for k, v in (r.get("host_s") or {}).items():
            steps[k] = steps.get(k, 0.0) + v
    exp = sum(r.get("experiment_s", 0.0) for r in done)
    gpu = sum(run.get("gpu_s", {}).get(r["key"], 0.0) for r in done) if run.get("gpu_s") else None
    ck = sum(r.get("checkpoint_s", 0.0) for r in done)
    rest = None if gpu is None else exp - gpu - sum(steps.values()) - ck
    return {"experiment_s": exp, "gpu_s": gpu, "checkpoint_s": ck, "steps": steps, "rest_s": rest,
            "phases": rest_phases(run.get("engine") or {}, [r["key"] for r in done], rest)}


HOST_STEPS = ("setup", "partitions", "warm", "nvml", "drain", "close")


def _workloads(recipe: dict) -> dict:
    """A task's workloads built here, on device 0, from its recipe (built-in names or a factory)."""
    from gcexplore.campaigns.grid import resolve_factory
    from gcexplore.workloads.spec import parse_recipe

    if "builtins" in recipe:
        return {name: parse_recipe(spec).build(device=0) for name, spec in recipe["builtins"].items()}
    return dict(resolve_factory(recipe["factory"])(device=0, **recipe.get("kwargs", {})))


def _prime_here() -> None:
    """Each pair built and called once in this process on device 0 before any timing, so that the libraries'
    pages (cuBLAS, NVRTC, ...) are in the page cache for the first run as for the later ones (without it the
    1-GPU run, first, primed its recipes 0.71 s against 0.26-0.29 s in the 2- and 4-GPU runs, batch e1)."""
    t = time.perf_counter()
    try:
        from cuda.core import Device

        from gcexplore.campaigns.grid import call_each

        dev = Device(0)
        dev.set_current()
        stream = dev.create_stream()
        for p in PAIRS:
            wls = _workloads({"factory": p} if isinstance(p, str) else {"builtins": {n: n for n in p}})
            try:
                call_each(wls, stream)
            finally:
                for w in wls.values():
                    if hasattr(w, "close"):
                        w.close()
        if "torch" in sys.modules:
            sys.modules["torch"].cuda.empty_cache()
        print(f"primed the pairs here before timing: {time.perf_counter() - t:.2f} s", flush=True)
    except Exception as e:  # only the page cache is at stake: the runs go on
        print(f"priming the pairs here failed ({type(e).__name__}: {e}); the first run may load libraries from disk",
              flush=True)


def _direct(run: dict, splits, repeats: int) -> tuple[dict, "object"]:
    """One task per pair (pair i with split set i), run alone in this process on the 1-GPU run's
    card (device 0 here is the first visible GPU, the one its worker had): key -> seconds, rows."""
    import pandas as pd

    from gcexplore.campaigns.grid import lookup_experiment
    from gcexplore.experiments.overlap import sweep

    picked = []
    by_pair: dict[str, list] = {}
    for t in sorted(run["tasks"].values(), key=lambda t: t["key"]):
        by_pair.setdefault(json.dumps(t["workloads"], sort_keys=True), []).append(t)
    for i, ts in enumerate(by_pair.values()):
        label = ",".join(map(str, splits[i % len(splits)]))
        picked += ([t for t in ts if t["split_set"] == label] or ts)[:1]  # cut tasks: a layout's own
    frames, seconds = [], {}
    for t in picked:
        wls = _workloads(t["workloads"])
        try:
            t0 = time.perf_counter()
            df = (sweep(wls, t["splits"], device=0, progress=False, **t["options"]) if t["experiment"] == "sweep"
                  else lookup_experiment(t["experiment"]).fn(wls, splits=t["splits"], device=0, checkpoint=str(
                      Path(tempfile.mkdtemp()) / "alone.jsonl"), **t["options"]))
            seconds[t["key"]] = time.perf_counter() - t0
        finally:
            for w in wls.values():
                if hasattr(w, "close"):
                    w.close()
        df["task_key"] = t["key"]
        frames.append(df)
    return seconds, pd.concat(frames, ignore_index=True)


def _decompose(run: dict) -> dict:
    done = [r for r in run["reports"].values() if r["status"] == "done"]
    cards: dict[int, list] = {}
    for r in done:
        cards.setdefault(r["pid"], []).append(r)
    busy = {pid: sum(r["ended_s"] - r["started_s"] for r in rs) for pid, rs in cards.items()}
    lead = {pid: min(r["started_s"] for r in rs) - run["wall0"] for pid, rs in cards.items()}
    tail = {pid: run["wall1"] - max(r["ended_s"] for r in rs) for pid, rs in cards.items()}
    # the card that ended last: end to end = its lead-in + its tasks + the gaps between them + after its last + close
    last = max(cards, key=lambda pid: max(r["ended_s"] for r in cards[pid]))
    span = max(r["ended_s"] for r in cards[last]) - min(r["started_s"] for r in cards[last])
    critical = {"lead_in_s": lead[last], "tasks_s": busy[last], "gaps_s": span - busy[last], "after_s": tail[last],
                "close_s": run.get("timings", {}).get("close_s", 0.0), "mean_tasks_s": statistics.mean(busy.values())}
    warm = []
    for w in run["warm_ups"].values():
        if "error" not in w:
            pre = w.get("preload", {})
            warm.append((pre.get("total_s", 0.0), sum(v for k, v in w.items() if k.endswith("_s") and isinstance(v, float))))
    phases = {k: sum(r.get(k, 0.0) for r in done) for k in ("build_s", "prime_s", "experiment_s", "checkpoint_s",
                                                              "cpu_s", "write_s")}
    task = lambda r: r["ended_s"] - r["started_s"]  # noqa: E731
    first = [task(r) for r in done if r.get("first")]
    rest = [task(r) for r in done if not r.get("first")]
    tm = run.get("timings", {})
    return {"start_steps": _start_steps(run), "preload_parts": _preload_parts(run), "critical": critical,
            "host_steps": _host_steps(run, done), "gpus": run["n"], "mode": run.get("mode", "cold"), "tasks": len(done),
            "failed": len(run["reports"]) - len(done),
            "cluster_start_s": tm.get("cluster_start_s"), "cluster_wait_s": tm.get("cluster_wait_s"),
            "plan_s": tm.get("plan_s"), "close_s": tm.get("close_s", 0.0),
            "close_background_s": tm.get("close_background_s"), "end_to_end_s": run["end_to_end_s"],
            "warm_up_at_start_s_mean": statistics.mean(w[0] for w in warm) if warm else None,
            "warm_up_task_s_mean": statistics.mean(w[1] for w in warm) if warm else None,
            "warm_up_steps": list(run["warm_ups"].values()),
            "lead_in_s_mean": statistics.mean(lead.values()), "lead_in_s_max": max(lead.values()),
            "task_time_per_card_s": sorted(busy.values()),
            "sum_task_s": sum(busy.values()), "idle_tail_s_max": max(tail.values()),
            "idle_tail_s_mean": statistics.mean(tail.values()), "phases_s": phases,
            "cached_tasks": sum(bool(r.get("cached")) for r in done),
            "first_task_s_mean": statistics.mean(first) if first else None,
            "other_task_s_mean": statistics.mean(rest) if rest else None,
            "experiment_s": {r["key"]: r["experiment_s"] for r in done},
            "sm_clock_mhz_median": (float(run["df"]["sm_clock_mhz"].median()) if "sm_clock_mhz" in run["df"]
                                    else None),
            "worker_cpus": {w: (v.get("preload") or {}).get("cpus") for w, v in run["warm_ups"].items()}}


def _start_steps(run: dict) -> dict | None:
    """The local cluster's start per worker, in seconds (slowest worker): forkserver (the start call to its imports
    done, where this campaign started it), spawn (to the worker process's birth), boot (Dask's worker set-up until
    its preload; a spawned worker's also Python's start and imports), the preload (gcexplore's import, then the
    factories' modules) and join (preload end to the cluster being up: a faster worker waits for the slowest);
    and when its GPU was ready (driver, context, kernels: beside boot and join, begun at the fork where forked)."""
    tm = run.get("timings", {})
    pres = [w["preload"] for w in run["warm_ups"].values() if "process_started_at" in w.get("preload", {})]
    if "cluster_started_at" not in tm or not pres:
        return None
    t0, up = tm["cluster_started_at"], tm["cluster_started_at"] + tm["cluster_start_s"]
    # the forkserver's part: from the start to its imports done, where this campaign started it (else 0: kept)
    ready = [max(0.0, p["forkserver"]["ended_at"] - t0) if (p.get("forkserver") or {}).get("ended_at")
             and (p["forkserver"].get("started_at") or 0) >= t0 - 0.05 else 0.0 for p in pres]
    steps = {"forkserver_s": ready,
             "spawn_s": [p["process_started_at"] - t0 - r for p, r in zip(pres, ready)],
             "boot_s": [p["started_at"] - p["process_started_at"] for p in pres],
             "gcexplore_import_s": [p["gcexplore_import_s"] for p in pres],
             "preload_rest_s": [p["total_s"] - p["gcexplore_import_s"] for p in pres],
             "join_s": [up - p["started_at"] - p["total_s"] for p in pres],
             # the GPU's start runs beside boot, preload and join (begun at the fork where forked): when it was done
             "gpu_ready_s": [p["gpu_ready_at"] - t0 for p in pres if isinstance(p.get("gpu_ready_at"), float)]}
    return {k: max(v) if v else None for k, v in steps.items()}


def _critical_line(r: dict, base: dict, goal: float | None) -> str:
    """End to end, along the card that ended last, against the one-GPU run's and the goal's."""
    c = r["critical"]
    text = (f"{r['gpus']} GPUs {r['mode']}: end to end {r['end_to_end_s']:.2f} s = tasks per card (mean) "
            f"{c['mean_tasks_s']:.2f} + the last card's tasks over the mean {c['tasks_s'] - c['mean_tasks_s']:.2f} + "
            f"its lead-in {c['lead_in_s']:.2f} + gaps between its tasks {c['gaps_s']:.2f} + after its last task "
            f"{c['after_s']:.2f} + close {c['close_s']:.2f}; one GPU: tasks {base['critical']['tasks_s']:.2f} + lead-in "
            f"{base['critical']['lead_in_s']:.2f} + the rest {base['end_to_end_s'] - base['critical']['tasks_s'] - base['critical']['lead_in_s']:.2f}")
    if goal:
        need = base["end_to_end_s"] / goal
        text += f"; {goal}x needs <= {need:.2f} s ({r['end_to_end_s'] - need:+.2f} s against it)"
    return text


def _preload_parts(run: dict) -> dict:
    """Of the worker's GPU start, per step (slowest worker): the driver's initialisation, the context, the built-in
    kernels; and the priming by its tasks."""
    pres = [w.get("preload", {}) for w in run["warm_ups"].values()]
    out = {k: max((p[k] for p in pres if isinstance(p.get(k), float)), default=None)
           for k in ("driver_init_s", "context_s", "kernels_s")}
    # priming: by each worker's first task of a recipe (its prime_s), summed per worker (slowest), and per recipe
    per: dict = {}
    each: dict[str, float] = {}
    for r in run["reports"].values():
        if r.get("primed"):
            per[r["pid"]] = per.get(r["pid"], 0.0) + r["prime_s"]
            pair = run["tasks"][r["key"]]["pair"]
            each[pair] = max(each.get(pair, 0.0), r["prime_s"])
    out["prime_s"], out["prime_each_s"] = max(per.values(), default=None), each
    return out


def _agreement(base, other) -> dict:
    """Per task, layout and mode: ``other``'s makespans against ``base``'s (one card, or the task alone).

    Two intervals of the ratio of medians: ``ratio_ci`` over repetitions (a run's repetitions
    as independent draws: it resolves the ~1% that separates two runs), and the combined
    interval ``compare`` uses (:func:`round_ratio_ci`: the round as unit, plus the card's
    recorded run-to-run floor, since the two sides are two runs)."""
    from gcexplore.analysis.stats import noise_floor, ratio_ci, round_ratio_ci

    keys = ["task_key", "layout", "mode", "rep"]

    def per_rep(df):
        df = df.assign(round=df["round"] if "round" in df.columns else 0)
        return df.groupby(keys).agg(makespan_ms=("makespan_ms", "max"), round=("round", "first"))

    a, b = per_rep(base), per_rep(other)
    groups = sorted(set(a.index.droplevel("rep")) & set(b.index.droplevel("rep")))
    joint = 1 - 0.05 / max(1, len(groups))
    inside = inside_joint = inside_rounds = 0
    worst, rows = (1.0, None), []
    floors = {}
    for g in groups:
        ga, gb = a.loc[g], b.loc[g]
        xa, xb = ga["makespan_ms"].to_numpy(), gb["makespan_ms"].to_numpy()
        est, lo, hi = ratio_ci(xa, xb, 0.95)
        inside += lo <= 1.0 <= hi
        _, jlo, jhi = ratio_ci(xa, xb, joint)
        inside_joint += jlo <= 1.0 <= jhi
        task = base[base["task_key"] == g[0]]
        if g[0] not in floors:
            floors[g[0]] = noise_floor(str(task["device_name"].iloc[0]) if "device_name" in task else "",
                                       sorted(set(task["workload"].astype(str))))
        r = round_ratio_ci(xa, xb, ga["round"].to_numpy(), gb["round"].to_numpy(), 0.95, floor=floors[g[0]])
        inside_rounds += r["low"] <= 1.0 <= r["high"]
        if worst[1] is None or abs(est - 1) > abs(worst[0] - 1):
            worst = (est, g)
        rows.append({"task_key": g[0], "layout": g[1], "mode": g[2], "reps": [len(xa), len(xb)],
                     "ratio": est, "low": lo, "high": hi, "rounds_ratio": r["ratio"], "rounds_low": r["low"],
                     "rounds_high": r["high"], "rounds": [r["rounds_a"], r["rounds_b"]],
                     "floor_run_sd": floors[g[0]].run_sd, "inside_rounds_95": bool(r["low"] <= 1.0 <= r["high"])})
    return {"comparisons": len(groups), "inside_95": int(inside), "inside_joint": int(inside_joint),
            "inside_rounds_95": int(inside_rounds), "worst_ratio": worst[0], "worst_at": list(map(str, worst[1] or ())),
            "floors": sorted({f.source for f in floors.values()}), "rows": rows}


def _misses(ag: dict, pairs: dict) -> str:
    """The comparisons outside the combined interval, named with their numbers."""
    out = [f"{pairs.get(r['task_key'], r['task_key'])} {r['layout']} {r['mode']} {r['rounds_ratio']:.4f} "
           f"[{r['rounds_low']:.4f}, {r['rounds_high']:.4f}]" for r in ag["rows"] if not r["inside_rounds_95"]]
    return "; ".join(out) or "none"


def _f(x, fmt="{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


#: issue 49's goals, end to end against one GPU of the same kind of run: (first or warm, GPUs) -> speedup
GOALS = {("first", 2): 1.85, ("first", 4): 3.4, ("first", 8): 6.5, ("warm", 4): 3.6, ("warm", 8): 7.0,
         ("cold", 2): 1.9, ("cold", 4): 3.6}


def _goal(r: dict) -> float | None:
    return None if ALSO in r["mode"] else GOALS.get((r["mode"].split(",")[0], r["gpus"]))


def _scaling(res: list[dict], bases: dict, missing: list[str]) -> list[str]:
    """One row per GPU count: each kind of run's end to end, its speedup and goal; the counts not run, said."""
    kinds = sorted({r["mode"] for r in res if ALSO not in r["mode"]}, key=lambda m: (m.split(",")[0] != "first", m))
    lines = ["| GPUs | " + " | ".join(f"{m}: end to end s, speedup (goal)" for m in kinds) + " |",
             "|---|" + "---|" * len(kinds)]
    for n in sorted({r["gpus"] for r in res}):
        cells = []
        for m in kinds:
            r = next((x for x in res if x["gpus"] == n and x["mode"] == m), None)
            base = bases.get(m)
            if r is None or base is None:
                cells.append("-")
                continue
            speed, goal = base["end_to_end_s"] / r["end_to_end_s"], _goal(r)
            cells.append(f"{r['end_to_end_s']:.2f}, {speed:.2f}x" + (
                f" ({goal}x: {'met' if speed >= goal else 'NOT met'})" if goal else ""))
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return lines + missing


def _table(res: list[dict], bases: dict) -> list[str]:
    """``bases``: mode -> the 1-GPU result of that mode (speedups compare like with like)."""
    lines = ["| GPUs | cluster | cluster start s (client waited) | warm-up s/worker (at start + task) | lead-in s "
             "(max) | task time per card s | sum of tasks s (vs 1 GPU) | idle tail s (max) | close s (background) | "
             "end to end s | speedup |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res:
        per, base = r["task_time_per_card_s"], bases.get(r["mode"], r)
        lines.append(
            f"| {r['gpus']} | {r['mode']} | {_f(r['cluster_start_s'])} ({_f(r['cluster_wait_s'])}) | "
            f"{_f(r['warm_up_at_start_s_mean'])} + {_f(r['warm_up_task_s_mean'])} | {r['lead_in_s_mean']:.2f} "
            f"({r['lead_in_s_max']:.2f}) | {statistics.mean(per):.2f} [{min(per):.2f}-{max(per):.2f}] | "
            f"{r['sum_task_s']:.2f} ({r['sum_task_s'] / base['sum_task_s'] - 1:+.1%}) | {r['idle_tail_s_max']:.2f} | "
            f"{r['close_s']:.2f} ({_f(r['close_background_s'])}) | {r['end_to_end_s']:.2f} | "
            f"{base['end_to_end_s'] / r['end_to_end_s']:.2f}x |")
    lines += ["", "| GPUs | cluster | forkserver s (started to imports done) | spawn s (to the worker's birth) | "
                  "boot s (Dask) | gcexplore import s | factories' modules s | join s | cluster start s | GPU ready s "
                  "(start call to context and kernels done, beside boot and join; of which driver init / context / "
                  "kernels) | priming s (first task of each recipe, per worker; per recipe) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res:
        st, pp = r.get("start_steps") or {}, r.get("preload_parts") or {}
        parts = " / ".join(_f(pp.get(k)) for k in ("driver_init_s", "context_s", "kernels_s"))
        lines.append(f"| {r['gpus']} | {r['mode']} | " + " | ".join(_f(st.get(k)) for k in (
            "forkserver_s", "spawn_s", "boot_s", "gcexplore_import_s", "preload_rest_s", "join_s"))
            + f" | {_f(r['cluster_start_s'])} | {_f(st.get('gpu_ready_s'))} ({parts}) | {_f(pp.get('prime_s'))} ("
            + ", ".join(f"{k} {v:.2f}" for k, v in (pp.get("prime_each_s") or {}).items()) + ") |")
    lines += ["", "| GPUs | cluster | build s | priming s | experiment s | of which checkpoint s | CPU s | write s | "
                  "cached tasks | first task s (mean) | other tasks s (mean) | SM clock MHz (median) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res:
        p = r["phases_s"]
        lines.append(f"| {r['gpus']} | {r['mode']} | {p['build_s']:.2f} | {p['prime_s']:.2f} | {p['experiment_s']:.2f} | "
                     f"{p['checkpoint_s']:.3f} | {p['cpu_s']:.2f} | {p['write_s']:.3f} | {r['cached_tasks']}/{r['tasks']} | "
                     f"{r['first_task_s_mean'] or 0:.2f} | {r['other_task_s_mean'] or 0:.2f} | "
                     f"{r['sm_clock_mhz_median'] or float('nan'):.0f} |")
    lines += ["", "| GPUs | cluster | experiment s (all tasks) | GPU time of the repetitions s | "
              + " | ".join(f"{k} s" for k in HOST_STEPS) + " | checkpoint s | the rest s (enqueue, waits, Python) |",
              "|---|---|---|---|" + "---|" * len(HOST_STEPS) + "---|---|"]
    for r in res:
        h = r.get("host_steps") or {}
        lines.append(f"| {r['gpus']} | {r['mode']} | {_f(h.get('experiment_s'))} | {_f(h.get('gpu_s'))} | "
                     + " | ".join(_f((h.get("steps") or {}).get(k)) for k in HOST_STEPS)
                     + f" | {_f(h.get('checkpoint_s'))} | {_f(h.get('rest_s'))} |")
    return lines + phase_table(res)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--repeats", type=int, default=60)
    p.add_argument("--step", type=int, default=8)
    p.add_argument("--gpus", default="1,2,4,8", help="the GPU counts (those above the GPUs here are said, not run)")
    p.add_argument("--no-fresh", dest="fresh", action="store_false",
                   help="the first runs in this process (a forkserver stopped before each) instead of each in a "
                        "fresh process, as `gcexplore campaign SPEC` runs")
    p.add_argument("--cut", choices=("layouts",), help="every run's tasks cut a layout each (campaign(cut=)): "
                                                       "against a run without, the comparison of the two options")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--no-durations", dest="durations", action="store_false",
                   help="order the N-GPU tasks by the grid's estimate, not by the 1-GPU run's task times")
    p.add_argument("--no-warm", dest="warm", action="store_false",
                   help="skip the runs on a cluster kept warm from an earlier campaign")
    p.add_argument("--no-cold", dest="cold", action="store_false",
                   help="only the runs on kept clusters (1 GPU first: its task times order the others); no tasks alone")
    p.add_argument("--no-direct", dest="direct", action="store_false",
                   help="skip the tasks run alone, outside a campaign")
    p.add_argument("--forkserver", choices=("cold", "kept"), default="cold",
                   help="cold: each campaign starts as a process's first (spawned workers); kept: a forkserver started before timing")
    p.add_argument("--gpu-start-too", choices=("serial", "together"),
                   help="after the cold runs, the --too-gpus counts again with GCEXPLORE_GPU_START set to this")
    p.add_argument("--cpus-too", type=lambda v: v.split(",") if set(v.split(",")) <= {"share", "local", "off"}
                   else p.error(f"--cpus-too takes share, local and off (comma-separated), got {v!r}"),
                   help="after the cold runs, the --too-gpus counts again with GCEXPLORE_WORKER_CPUS set to each "
                        "of these (comma-separated; the default, local, again: a drift check)")
    p.add_argument("--dispatch-too", choices=("eager", "ready"),
                   help="after the cold runs, the --too-gpus counts again with GCEXPLORE_DISPATCH set to this "
                        "(eager: every task to Dask at once, Dask's assignment; ready: one per free worker, the default)")
    p.add_argument("--gate-too", choices=("flag", "timed"),
                   help="after the cold runs, the --too-gpus counts again with GCEXPLORE_GATE set to this (the "
                        "engine's gate; with 1 in --too-gpus the N-GPU runs compare with that 1-GPU run)")
    p.add_argument("--too-gpus", help="the GPU counts the --*-too runs repeat (default the largest)")
    p.add_argument("--alone-again", action="store_true",
                   help="no GPU: compare OUT/campaign-1gpu with OUT/alone.parquet again (the floors recorded now)")
    args = p.parse_args()
    if args.child:
        return _child(json.loads(args.child))
    if args.alone_again:
        return _alone_again(Path(args.out))
    import gcexplore as gx
    from gcexplore.campaigns.grid import visible_gpus

    gpus = visible_gpus()
    asked = [int(x) for x in args.gpus.split(",")]
    counts = [n for n in asked if n <= len(gpus)]
    missing = [f"{n} GPU{'s' * (n > 1)}: not run, {len(gpus)} visible here (run this on a machine of {n} GPUs of one host)"
               for n in asked if n > len(gpus)]
    for line in missing:
        print(line, flush=True)
    if not counts or counts[0] != 1:
        print(f"needs at least one GPU for the baseline, found {len(gpus)} ({gpus})")
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    splits = _split_sets(args.step)
    print(f"{len(PAIRS)} pairs x {len(splits)} split sets {splits}, {args.repeats} repetitions; GPUs {counts}",
          flush=True)
    import gcexplore.workloads.torch_pairs  # noqa: F401 (the client's own import of the factories, paid before any timing)
    import distributed  # noqa: F401 (and of Dask: the first campaign of a process pays it, the later ones do not)

    _prime_here()

    if args.forkserver == "kept":
        from gcexplore.campaigns.cluster import start_forkserver

        t = time.perf_counter()
        fs = start_forkserver([p.split(":")[0] for p in PAIRS if isinstance(p, str)], wait=True)
        print(f"forkserver started before timing (kept for every campaign): ready in {time.perf_counter() - t:.2f} s, "
              f"its imports {_f(fs.get('preload_s'))} s ({fs.get('seconds')}; errors {fs.get('errors')})", flush=True)
    runs, direct, failed = [], None, 0
    again = [int(x) for x in args.too_gpus.split(",") if int(x) in counts] if args.too_gpus else counts[-1:]
    also = [(n, (TOO[k][0], v, TOO[k][1])) for k in TOO for v in _listed(getattr(args, k)) for n in again]
    plan = ([(n, False) for n in counts] + also
            + [("direct", None)] * args.direct
            + [(n, True) for n in reversed(counts)] * args.warm) if args.cold else [(n, True) for n in counts]
    for n, warm in plan:  # the report is rewritten after each step: a run cut short keeps the ones before
        if n == "direct":
            direct = _direct(runs[0], splits, args.repeats)
            gx.save(direct[1], out / "alone.parquet")  # with campaign-1gpu/: --alone-again recomputes the comparison
            print(f"direct: {len(direct[0])} tasks alone in {sum(direct[0].values()):.1f} s", flush=True)
        else:
            # the one-GPU run's task times order the others' tasks longest first (durations known from a run)
            first = out / ("campaign-1gpu" if args.cold else "campaign-1gpu-warm")
            known = first if (n > 1 or (warm and args.cold)) and args.durations else None
            name = f"campaign-{n}gpu" + ("-warm" if warm is True else f"-{warm[1]}" if warm else "")
            if warm is False and args.fresh and args.forkserver == "cold":  # as `gcexplore campaign SPEC` runs
                runs.append(_fresh(gpus[:n], out / name, splits, args.repeats, known, cut=args.cut))
            else:
                runs.append(_run(gpus[:n], out / name, splits, args.repeats, known, warm=warm is True,
                                 fork=args.forkserver, setting=warm if isinstance(warm, tuple) else None, cut=args.cut))
            print(f"{n} GPU(s) {runs[-1]['mode']}: {runs[-1]['end_to_end_s']:.1f} s end to end", flush=True)
        failed = _report(runs, direct, out, splits, args.repeats, missing)
    return 0 if not failed else 1


def _listed(value) -> list:
    return [] if not value else value if isinstance(value, list) else [value]


def _alone_again(out: Path) -> int:
    """Campaign vs alone from a run's saved files, with the floors recorded now (CPU only)."""
    import gcexplore as gx
    import pandas as pd

    alone, camp = gx.load(out / "alone.parquet"), gx.load_campaign(out / "campaign-1gpu")
    camp = camp[camp["task_key"].isin(set(alone["task_key"]))]
    ag = _agreement(alone, camp)
    pairs = dict(zip(camp["task_key"], camp["pair"]))
    pd.DataFrame(ag["rows"]).to_csv(out / "campaign_vs_alone_again.csv", index=False)
    print(f"campaign vs alone again: {ag['inside_rounds_95']} of {ag['comparisons']} in the combined interval "
          f"(floors {'; '.join(ag['floors'])}); {ag['inside_95']} of {ag['comparisons']} repetition intervals; "
          f"largest median ratio {ag['worst_ratio']:.4f} at {' '.join(ag['worst_at'])}\noutside: {_misses(ag, pairs)}")
    return 0


def _direct_lines(runs: list[dict], direct) -> tuple[list[str], dict]:
    """Each task alone against the same task in the 1-GPU campaign, on the same card."""
    seconds, alone = direct
    camp = runs[0]["df"]
    camp = camp[camp["task_key"].isin(set(alone["task_key"]))]
    ag = _agreement(alone, camp)
    exp = {k: runs[0]["reports"][k]["experiment_s"] for k in seconds}
    res = {**ag, "tasks": sorted(seconds), "alone_s": seconds, "campaign_s": exp}
    return [f"campaign vs each task alone (1-GPU cold campaign against the same {len(seconds)} tasks run alone in the "
            f"bench process, same card; one task per pair): median makespan per task x layout x mode, campaign over "
            f"alone: {ag['inside_95']} of {ag['comparisons']} ratio intervals contain 1 at 95% each, "
            f"{ag['inside_joint']} at 95% jointly, {ag['inside_rounds_95']} of {ag['comparisons']} in the combined "
            f"interval (compare's: rounds + the card's run floor, 95%; floor {'; '.join(ag['floors'])}); "
            f"largest median ratio {ag['worst_ratio']:.3f} at "
            f"{' '.join(ag['worst_at'])}; task seconds campaign/alone "
            + ", ".join(f"{runs[0]['tasks'][k]['pair']} [{runs[0]['tasks'][k]['split_set']}] {exp[k] / seconds[k]:.3f}"
                        for k in sorted(seconds)),
            "outside the combined interval (campaign over alone, ratio of medians [95% interval]): "
            + _misses(ag, {k: runs[0]["tasks"][k]["pair"] for k in seconds})], res


def _report(runs: list[dict], direct, out: Path, splits, repeats: int, missing: list[str] = ()) -> int:
    import gcexplore as gx

    res = [_decompose(r) for r in runs]
    bases = {r["mode"]: r for r in res if r["gpus"] == 1}
    base_run = {run["mode"]: run for run in runs if run["n"] == 1}
    for m in {r["mode"] for r in res if ALSO in r["mode"]} - set(bases):  # against the same 1-GPU run
        if m.split(ALSO)[0] in bases:
            bases[m], base_run[m] = bases[m.split(ALSO)[0]], base_run[m.split(ALSO)[0]]
    for r, run in zip(res, runs):
        base = bases.get(r["mode"], r)
        r["slowdown_per_task"] = {k: v / base["experiment_s"][k] for k, v in r["experiment_s"].items()
                                  if k in base["experiment_s"]}
        if "agreement" not in run:  # once per run: the report is rewritten after every later step
            # a 1-GPU run with a setting changed: against the plain 1-GPU run (the setting's A/B on one card)
            ref = base_run[r["mode"]] if r is not base else base_run.get(r["mode"].split(ALSO)[0]) if ALSO in r[
                "mode"] else None
            run["agreement"] = _agreement(ref["df"], run["df"]) if ref is not None and ref is not run else None
        r["agreement"] = run["agreement"]
    cards = sorted(set(runs[-1]["df"]["device_name"] + " " + runs[-1]["df"]["device_uuid"]))
    two = next((run for run in runs if run["n"] == 2), None)
    if two is not None:
        gx.save(two["df"], out / "campaign.parquet")
    lines = [f"cards: {', '.join(cards)}", f"grid: {len(PAIRS)} pairs x split sets {splits}, {repeats} "
             f"repetitions, {res[0]['tasks']} tasks", "first: `gcexplore campaign`'s path, a fresh process "
             "timed from its birth; cold: gx.campaign(..., devices=) in this process, starting and closing its own "
             "cluster; warm: the cluster of `gcexplore cluster start` (scheduler=), its start not timed",
             "", *_scaling(res, bases, list(missing)), "", *_table(res, bases), ""]
    for r in res:
        plain = bases.get(r["mode"].split(ALSO)[0])
        if r["gpus"] == 1 and r["agreement"] and plain is not None and plain is not r:
            ag = r["agreement"]
            lines.append(f"1 GPU {r['mode']} against 1 GPU {plain['mode']}: end to end {r['end_to_end_s']:.2f} s vs "
                         f"{plain['end_to_end_s']:.2f} s ({r['end_to_end_s'] / plain['end_to_end_s'] - 1:+.1%}); "
                         f"sum of task times {r['sum_task_s'] / plain['sum_task_s'] - 1:+.1%}; makespans: "
                         f"{ag['inside_rounds_95']} of {ag['comparisons']} in the combined interval (largest median "
                         f"ratio {ag['worst_ratio']:.3f} at {' '.join(ag['worst_at'])})")
        if r["gpus"] == 1 or r["mode"] not in bases:
            continue
        base = bases[r["mode"]]
        s = sorted(r["slowdown_per_task"].values())
        ag = r["agreement"]
        goal = _goal(r)
        speed = base["end_to_end_s"] / r["end_to_end_s"]
        lines += [f"{r['gpus']} GPUs {r['mode']}: speedup {speed:.2f}x"
                  + (f" (goal >= {goal}x: {'met' if speed >= goal else 'NOT met'})" if goal else "")
                  + f"; sum of task times {r['sum_task_s'] / base['sum_task_s'] - 1:+.1%} against 1 GPU (goal within "
                  f"10%: {'met' if abs(r['sum_task_s'] / base['sum_task_s'] - 1) <= 0.10 else 'NOT met'}); a task's "
                  f"experiment time x{statistics.median(s):.3f} median, x{s[-1]:.3f} at most against 1 GPU; "
                  f"makespans against 1 GPU: {ag['inside_95']} of {ag['comparisons']} ratio intervals contain 1 at "
                  f"95% each, {ag['inside_joint']} at 95% jointly, {ag['inside_rounds_95']} in the combined "
                  f"interval (rounds + run floor, 95%) (largest median ratio {ag['worst_ratio']:.3f} at "
                  f"{' '.join(ag['worst_at'])})"]
        lines.append(_critical_line(r, base, goal))
    from gcexplore.campaigns.worker_cpus import describe

    lines += [f"{r['gpus']} GPUs {r['mode']}: worker CPUs " + "; ".join(map(describe, r["worker_cpus"].values()))
              for r in res]
    alone = None
    if direct is not None:
        more, alone = _direct_lines(runs, direct)
        lines += more
        import pandas as pd

        pd.DataFrame(alone["rows"]).to_csv(out / "campaign_vs_alone.csv", index=False)
    (out / "campaign_bench.json").write_text(json.dumps({"cards": cards, "splits": splits, "repeats": repeats,
                                                         "runs": res, "alone": alone}, indent=1, default=str))
    failed = sum(r["failed"] for r in res)
    lines.append(f"failed tasks: {failed or 'none'}")
    text = "\n".join(lines)
    (out / "campaign_bench.md").write_text(text + "\n")
    print(text, flush=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
