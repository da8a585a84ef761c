"""Campaign scaling on 1, 2 and 4 GPUs of one host, with where the time goes.

Usage (a 4-GPU machine, from the project root, Dask distributed and PyTorch installed)::

    python3 bench/campaign.py --out DIR [--repeats 60] [--gpus 1,2,4] [--step 16]

One grid (16 tasks: 4 pairs -- compute+memory, compute+copy, a PyTorch attention+sort
and a GEMM-chain+layer-norm factory from bench/campaign_pairs.py -- x 4 split sets of 2
sizes) runs on a fresh local cluster of 1, then 2, then 4 workers (one per GPU). For each
it reports the decomposition of the end-to-end time:

- cluster start (local_cluster + every worker up), close (client and cluster); the client
  imports the factories' module before any timing (as it has in every run after the first);
- the 2- and 4-GPU runs order their tasks longest first by the 1-GPU run's task times
  (``durations=``; ``--no-durations``: by the grid's estimate, which cannot tell these apart);
- the campaign: warm-up per worker (its steps: imports, context, kernels), the lead-in
  (campaign start to a card's first task), task time per card (the sum of its tasks),
  the idle tail (a card's last task to the campaign's end);
- the phases of the tasks summed over the cards (build, experiment, of which checkpoint
  appends, process CPU time, shard write), the first task of a worker against the rest,
  the median SM clock the sweeps recorded (neighbouring cards' power and heat);
- per task, its experiment time on N cards over on one (the slowdown when N run at once);
- per task, layout and mode: the makespans on N cards against one card (the ratio's 95%
  interval, and at 95% jointly over the comparisons), so that speed is not bought with noise.

Written to DIR/campaign_bench.md and .json; DIR/campaign-<N>gpu are the campaign folders
and DIR/campaign.parquet the 2-GPU result as one file (bench/campaign_folder.py turns it into the
folder gcexplore/data/campaign, notebook 04's recording).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))  # the workers

PAIRS = [["compute", "memory"], ["compute", "copy"], "bench.campaign_pairs:attention_sort",
         "bench.campaign_pairs:gemm_layernorm"]


def _split_sets(step: int) -> list[list[int]]:
    import gcexplore as gx

    info = gx.device_info(0)
    valid = [k for k in info.valid_sm_counts() if k % step == 0 and k < info.sm_count]
    picks = [valid[round(i * (len(valid) - 1) / 7)] for i in range(8)]
    return [picks[i:i + 2] for i in range(0, 8, 2)]


def _run(devices, folder, splits, repeats, durations=None) -> dict:
    import gcexplore as gx
    from distributed import Client
    from gcexplore.experiments.campaigns import local_cluster

    t0 = time.perf_counter()
    cluster = local_cluster(devices)
    client = Client(cluster)
    client.wait_for_workers(len(devices))
    start_s = time.perf_counter() - t0
    try:
        w0, t1 = time.time(), time.perf_counter()
        c = gx.campaign(PAIRS, splits, options={"repeats": repeats}, folder=folder, client=client, progress=False,
                        durations=durations)
        campaign_s, w1 = time.perf_counter() - t1, time.time()
    finally:
        t2 = time.perf_counter()
        client.close()
        cluster.close()
        close_s = time.perf_counter() - t2
    df = gx.load_campaign(folder)
    return {"n": len(devices), "start_s": start_s, "campaign_s": campaign_s, "close_s": close_s,
            "wall0": w0, "wall1": w1, "reports": c.reports, "warm_ups": c.warm_ups, "df": df}


def _decompose(run: dict) -> dict:
    done = [r for r in run["reports"].values() if r["status"] == "done"]
    cards: dict[int, list] = {}
    for r in done:
        cards.setdefault(r["pid"], []).append(r)
    busy = {pid: sum(r["ended_s"] - r["started_s"] for r in rs) for pid, rs in cards.items()}
    lead = {pid: min(r["started_s"] for r in rs) - run["wall0"] for pid, rs in cards.items()}
    tail = {pid: run["wall1"] - max(r["ended_s"] for r in rs) for pid, rs in cards.items()}
    warm = [sum(v for k, v in w.items() if k.endswith("_s")) for w in run["warm_ups"].values() if "error" not in w]
    phases = {k: sum(r.get(k, 0.0) for r in done) for k in ("build_s", "experiment_s", "checkpoint_s", "cpu_s",
                                                              "write_s")}
    task = lambda r: r["ended_s"] - r["started_s"]  # noqa: E731
    first = [task(r) for r in done if r.get("first")]
    rest = [task(r) for r in done if not r.get("first")]
    return {"gpus": run["n"], "tasks": len(done), "failed": len(run["reports"]) - len(done),
            "cluster_start_s": run["start_s"], "campaign_s": run["campaign_s"], "close_s": run["close_s"],
            "end_to_end_s": run["start_s"] + run["campaign_s"] + run["close_s"],
            "warm_up_s_mean": statistics.mean(warm) if warm else None,
            "warm_up_steps": list(run["warm_ups"].values()),
            "lead_in_s_mean": statistics.mean(lead.values()), "task_time_per_card_s": sorted(busy.values()),
            "sum_task_s": sum(busy.values()), "idle_tail_s_max": max(tail.values()),
            "idle_tail_s_mean": statistics.mean(tail.values()), "phases_s": phases,
            "cached_tasks": sum(bool(r.get("cached")) for r in done),
            "first_task_s_mean": statistics.mean(first) if first else None,
            "other_task_s_mean": statistics.mean(rest) if rest else None,
            "experiment_s": {r["key"]: r["experiment_s"] for r in done},
            "sm_clock_mhz_median": (float(run["df"]["sm_clock_mhz"].median()) if "sm_clock_mhz" in run["df"]
                                    else None)}


def _agreement(base, other) -> dict:
    """Per task, layout and mode: the N-card makespans against the one-card ones."""
    from gcexplore.analysis.stats import ratio_ci

    keys = ["task_key", "layout", "mode", "rep"]
    a = base.groupby(keys)["makespan_ms"].max()
    b = other.groupby(keys)["makespan_ms"].max()
    groups = sorted(set(a.index.droplevel("rep")) & set(b.index.droplevel("rep")))
    joint = 1 - 0.05 / max(1, len(groups))
    inside = inside_joint = 0
    worst = (1.0, None)
    for g in groups:
        xa, xb = a.loc[g].to_numpy(), b.loc[g].to_numpy()
        est, lo, hi = ratio_ci(xa, xb, 0.95)
        inside += lo <= 1.0 <= hi
        _, jlo, jhi = ratio_ci(xa, xb, joint)
        inside_joint += jlo <= 1.0 <= jhi
        if worst[1] is None or abs(est - 1) > abs(worst[0] - 1):
            worst = (est, g)
    return {"comparisons": len(groups), "inside_95": int(inside), "inside_joint": int(inside_joint),
            "worst_ratio": worst[0], "worst_at": list(map(str, worst[1] or ()))}


def _table(res: list[dict], base: dict) -> list[str]:
    lines = ["| GPUs | cluster start s | warm-up s/worker | lead-in s | campaign s | task time per card s | "
             "sum of tasks s (vs 1 GPU) | idle tail s (max) | close s | end to end s | speedup |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res:
        per = r["task_time_per_card_s"]
        lines.append(
            f"| {r['gpus']} | {r['cluster_start_s']:.2f} | {r['warm_up_s_mean'] or 0:.2f} | {r['lead_in_s_mean']:.2f} | "
            f"{r['campaign_s']:.2f} | {statistics.mean(per):.2f} [{min(per):.2f}-{max(per):.2f}] | "
            f"{r['sum_task_s']:.2f} ({r['sum_task_s'] / base['sum_task_s'] - 1:+.1%}) | {r['idle_tail_s_max']:.2f} | "
            f"{r['close_s']:.2f} | {r['end_to_end_s']:.2f} | {base['end_to_end_s'] / r['end_to_end_s']:.2f}x |")
    lines += ["", "| GPUs | build s | experiment s | of which checkpoint s | CPU s | write s | cached tasks | "
                  "first task s (mean) | other tasks s (mean) | SM clock MHz (median) |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in res:
        p = r["phases_s"]
        lines.append(f"| {r['gpus']} | {p['build_s']:.2f} | {p['experiment_s']:.2f} | {p['checkpoint_s']:.3f} | "
                     f"{p['cpu_s']:.2f} | {p['write_s']:.3f} | {r['cached_tasks']}/{r['tasks']} | "
                     f"{r['first_task_s_mean'] or 0:.2f} | {r['other_task_s_mean'] or 0:.2f} | "
                     f"{r['sm_clock_mhz_median'] or float('nan'):.0f} |")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--repeats", type=int, default=60)
    p.add_argument("--step", type=int, default=8)
    p.add_argument("--gpus", default="1,2,4")
    p.add_argument("--no-durations", dest="durations", action="store_false",
                   help="order the 2- and 4-GPU tasks by the grid's estimate, not by the 1-GPU run's task times")
    args = p.parse_args()
    from gcexplore.experiments.campaigns import visible_gpus

    gpus = visible_gpus()
    counts = [n for n in (int(x) for x in args.gpus.split(",")) if n <= len(gpus)]
    if not counts or counts[0] != 1:
        print(f"needs at least one GPU for the baseline, found {len(gpus)} ({gpus})")
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    splits = _split_sets(args.step)
    print(f"{len(PAIRS)} pairs x {len(splits)} split sets {splits}, {args.repeats} repetitions; GPUs {counts}",
          flush=True)
    import bench.campaign_pairs  # noqa: F401 (the client's own import of the factories, paid before any timing)

    runs, failed = [], 0
    for n in counts:  # the report is rewritten after each run: a run cut short keeps the ones before
        # the one-GPU run's task times order the others' tasks longest first (durations known from a run)
        known = out / "campaign-1gpu" if n > 1 and args.durations else None
        runs.append(_run(gpus[:n], out / f"campaign-{n}gpu", splits, args.repeats, known))
        print(f"{n} GPU(s): {runs[-1]['campaign_s']:.1f} s campaign", flush=True)
        failed = _report(runs, out, splits, args.repeats)
    return 0 if not failed else 1


def _report(runs: list[dict], out: Path, splits, repeats: int) -> int:
    import gcexplore as gx

    res = [_decompose(r) for r in runs]
    base = res[0]
    for r, run in zip(res, runs):
        r["slowdown_per_task"] = {k: v / base["experiment_s"][k] for k, v in r["experiment_s"].items()
                                  if k in base["experiment_s"]}
        r["agreement"] = _agreement(runs[0]["df"], run["df"]) if r is not base else None
    cards = sorted(set(runs[-1]["df"]["device_name"] + " " + runs[-1]["df"]["device_uuid"]))
    two = next((run for run in runs if run["n"] == 2), None)
    if two is not None:
        gx.save(two["df"], out / "campaign.parquet")
    (out / "campaign_bench.json").write_text(json.dumps({"cards": cards, "splits": splits, "repeats": repeats,
                                                         "runs": res}, indent=1, default=str))
    lines = [f"cards: {', '.join(cards)}", f"grid: {len(PAIRS)} pairs x split sets {splits}, {repeats} "
             f"repetitions, {base['tasks']} tasks", "", *_table(res, base), ""]
    for r in res[1:]:
        s = sorted(r["slowdown_per_task"].values())
        ag = r["agreement"]
        goal = 3.6 if r["gpus"] == 4 else 1.9 if r["gpus"] == 2 else None
        speed = base["end_to_end_s"] / r["end_to_end_s"]
        lines += [f"{r['gpus']} GPUs: speedup {speed:.2f}x"
                  + (f" (goal >= {goal}x: {'met' if speed >= goal else 'NOT met'})" if goal else "")
                  + f"; sum of task times {r['sum_task_s'] / base['sum_task_s'] - 1:+.1%} against 1 GPU (goal within "
                  f"10%: {'met' if abs(r['sum_task_s'] / base['sum_task_s'] - 1) <= 0.10 else 'NOT met'}); a task's "
                  f"experiment time x{statistics.median(s):.3f} median, x{s[-1]:.3f} at most against 1 GPU; "
                  f"makespans against 1 GPU: {ag['inside_95']} of {ag['comparisons']} ratio intervals contain 1 at "
                  f"95% each, {ag['inside_joint']} at 95% jointly (largest median ratio {ag['worst_ratio']:.3f} at "
                  f"{' '.join(ag['worst_at'])})"]
    failed = sum(r["failed"] for r in res)
    lines.append(f"failed tasks: {failed or 'none'}")
    text = "\n".join(lines)
    (out / "campaign_bench.md").write_text(text + "\n")
    print(text, flush=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
