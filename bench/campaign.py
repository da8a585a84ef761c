"""Campaign on two GPUs against one: speedup, per-task overhead, agreement with a direct sweep.

Usage (the 2-GPU machine, from the project root)::

    python3 bench/campaign.py --out DIR [--repeats 20] [--step 16]

The same campaign (four pairs of built-ins, sweeps over every ``--step`` SMs split into
two split sets per pair, so eight tasks) runs on a local cluster of one worker (GPU 0),
then of two workers (GPUs 0 and 1). Printed and written to DIR/campaign_bench.md and
DIR/campaign_bench.json:

- wall time of each (cluster already started) and the speedup (goal >= 1.8x);
- per-task overhead: the gap between a worker's tasks (scheduling), the shard write and
  the final gather (load_campaign) per task, as % of a task's experiment time (goal <= 2%);
- agreement: one task's sweep run directly with gcexplore.sweep on GPU 0 against the same
  task's rows of the one-GPU campaign (also GPU 0): per layout and mode, the medians'
  ratio lies inside compare's combined interval (rounds as the unit) at every layout and mode.

DIR/campaign-2gpu is the two-GPU campaign folder (gcexplore.load_campaign reads it),
DIR/campaign-1gpu the one-GPU one; DIR/campaign.parquet is the two-GPU result as one file,
the recorded campaign of notebook 04 (copy it to gcexplore/data/campaign.parquet).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PAIRS = [["compute", "memory"], ["compute", "copy"], ["latency", "memory"], ["compute", "spin:us=300"]]


def _split_sets(step: int) -> list[list[int]]:
    import gcexplore as gx

    valid = [k for k in gx.device_info(0).valid_sm_counts() if k % step == 0 and k < gx.device_info(0).sm_count]
    half = (len(valid) + 1) // 2
    return [valid[:half], valid[half:]]


def _timed(devices, folder, splits, repeats):
    import gcexplore as gx
    from distributed import Client
    from gcexplore.experiments.campaigns import local_cluster

    cluster = local_cluster(devices)
    client = Client(cluster)
    try:
        client.wait_for_workers(len(devices))
        t0 = time.perf_counter()
        c = gx.campaign(PAIRS, splits, options={"repeats": repeats}, folder=folder, client=client, progress=True)
        t1 = time.perf_counter()
        df = gx.load_campaign(folder)
        gather = time.perf_counter() - t1
    finally:
        client.close()
        cluster.close()
    return c, df, t1 - t0, gather


def _overhead(c, gather_s: float) -> dict:
    reports = [r for r in c.reports.values() if r["status"] == "done"]
    gaps = []
    for pid in {r["pid"] for r in reports}:
        mine = sorted((r for r in reports if r["pid"] == pid), key=lambda r: r["started_s"])
        gaps += [b["started_s"] - a["ended_s"] for a, b in zip(mine, mine[1:])]
    exp = statistics.mean(r["experiment_s"] for r in reports)
    write = statistics.mean(r["write_s"] for r in reports)
    gap = statistics.mean(gaps) if gaps else 0.0
    per_task = gap + write + gather_s / len(reports)
    return {"tasks": len(reports), "experiment_s_mean": exp, "gap_s_mean": gap, "write_s_mean": write,
            "gather_s": gather_s, "overhead_s_per_task": per_task, "overhead_pct": 100 * per_task / exp}


def _agreement(df_campaign, folder, splits, repeats) -> dict:
    """One task of the campaign (its own shard, with its run's metadata) against gcexplore.sweep on GPU 0."""
    import gcexplore as gx
    from gcexplore.results.campaign_store import CampaignFolder

    pick = (df_campaign["pair"] == "+".join(PAIRS[0])) & (df_campaign["split_set"] == ",".join(map(str, splits[0])))
    (key,) = df_campaign.loc[pick, "task_key"].unique()
    shard = CampaignFolder(folder).read_shard(key)
    wls = {n: gx.builtin(n) for n in PAIRS[0]}
    try:
        direct = gx.sweep(wls, splits[0], repeats=repeats, progress=False)
    finally:
        for w in wls.values():
            w.close()
    # every difference must lie inside the combined interval (rounds as the unit, gcexplore.compare)
    t = gx.compare(shard, direct).table
    t = t[t["present"] == "both"].copy()
    t["agree"] = (t["ratio_low"] <= 1.0) & (1.0 <= t["ratio_high"])
    worst = t.loc[(t["ratio"] - 1.0).abs().idxmax()]
    return {"rows": len(t), "agree": int(t["agree"].sum()),
            "worst": {"layout": worst["layout_a"], "mode": worst["group"], "ratio": round(float(worst["ratio"]), 4),
                      "interval": [round(float(worst["ratio_low"]), 4), round(float(worst["ratio_high"]), 4)]},
            "same_uuid": sorted(set(shard["device_uuid"]))}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--step", type=int, default=16)
    args = p.parse_args()
    import gcexplore as gx
    from gcexplore.experiments.campaigns import visible_gpus

    gpus = visible_gpus()
    if len(gpus) < 2:
        print(f"needs two GPUs, found {len(gpus)} ({gpus})")
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    splits = _split_sets(args.step)
    print(f"{len(PAIRS)} pairs x {len(splits)} split sets {splits}, {args.repeats} repetitions")
    one, df1, wall1, gather1 = _timed(gpus[:1], out / "campaign-1gpu", splits, args.repeats)
    two, df2, wall2, gather2 = _timed(gpus[:2], out / "campaign-2gpu", splits, args.repeats)
    res = {"cards": sorted(set(df2["device_name"] + " " + df2["device_uuid"])), "wall_1gpu_s": wall1,
           "wall_2gpu_s": wall2, "speedup": wall1 / wall2, "overhead_1gpu": _overhead(one, gather1),
           "overhead_2gpu": _overhead(two, gather2), "agreement": _agreement(df1, out / "campaign-1gpu", splits, args.repeats),
           "failed": {**df1.attrs["failed"], **df2.attrs["failed"]}}
    gx.save(df2, out / "campaign.parquet")  # the recorded campaign of notebook 04 (gcexplore/data/campaign.parquet)
    (out / "campaign_bench.json").write_text(json.dumps(res, indent=1, default=str))
    o1, o2, ag = res["overhead_1gpu"], res["overhead_2gpu"], res["agreement"]
    lines = [
        f"cards: {', '.join(res['cards'])}",
        "",
        "| run | wall s | tasks | experiment s/task | gap s | write s | gather s | overhead % |",
        "|---|---|---|---|---|---|---|---|",
        *[f"| {n} | {w:.1f} | {o['tasks']} | {o['experiment_s_mean']:.2f} | {o['gap_s_mean']:.3f} | "
          f"{o['write_s_mean']:.3f} | {o['gather_s']:.3f} | {o['overhead_pct']:.2f} |"
          for n, w, o in (("1 GPU", wall1, o1), ("2 GPUs", wall2, o2))],
        "",
        f"speedup 2 GPUs vs 1: {res['speedup']:.2f}x (goal >= 1.8x: {'met' if res['speedup'] >= 1.8 else 'NOT met'})",
        f"overhead per task: {max(o1['overhead_pct'], o2['overhead_pct']):.2f}% of its experiment time "
        f"(goal <= 2%: {'met' if max(o1['overhead_pct'], o2['overhead_pct']) <= 2 else 'NOT met'})",
        f"campaign vs direct sweep on {', '.join(ag['same_uuid'])}: {ag['agree']} of {ag['rows']} differences "
        f"inside compare's combined interval (rounds as the unit); largest at {ag['worst']}",
        f"failed tasks: {res['failed'] or 'none'}",
    ]
    text = "\n".join(lines)
    (out / "campaign_bench.md").write_text(text + "\n")
    print(text)
    return 0 if not res["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
