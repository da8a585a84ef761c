"""A recorded campaign as a campaign folder: the rows of a flat campaign file (what
``load_campaign`` returned on the GPU machine; ``load_recorded("campaign")`` reads it) written
back as the folder ``campaign`` writes (gcexplore/data/campaign, ``recorded_folder("campaign")``),
so ``load_campaign`` and ``gcexplore campaign status`` can be tried without a GPU.

The tasks come from ``plan_tasks`` with the grid bench/campaign.py ran (4 pairs, two split
sets, 40 repetitions); every task key must be one of the file's, and every row goes to the
shard of its task, with the task and its identity (card UUID, index, host, driver, from the
rows) in the shard's ``attrs["campaign"]`` as a worker writes them. Nothing is measured here.

    python3 bench/campaign_folder.py gcexplore/data/campaign.parquet gcexplore/data/campaign
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import gcexplore as gx
from gcexplore.campaigns.grid import plan_tasks
from gcexplore.campaigns.store import CAMPAIGN_COLUMNS, CampaignFolder

PAIRS = [["compute", "memory"], ["compute", "copy"], ["latency", "memory"], ["compute", "spin:us=300"]]
SPLITS = [list(range(8, 65, 8)), list(range(72, 129, 8))]
IDENTITY = ("device_uuid", "device_index", "device_name", "host", "device_sm_count", "driver_version",
            "cuda_core_version", "cupti_version", "run_id")
# attrs of the whole campaign (load_campaign's), not of one task's run
CAMPAIGN_ATTRS = ("campaign_id", "tasks", "done", "failed", "pending", "torn", "folder", "recorded")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("flat", help="the campaign's rows in one file (load_campaign's result, saved)")
    ap.add_argument("folder", help="the campaign folder to write (must not exist)")
    ap.add_argument("--repeats", type=int, default=40)
    args = ap.parse_args(argv)
    df = gx.load(args.flat)
    out = Path(args.folder)
    if out.exists():
        sys.exit(f"{out} exists; give a new folder")
    tasks, _ = plan_tasks("sweep", PAIRS, SPLITS, {"repeats": args.repeats})
    keys = set(df["task_key"])
    if set(tasks) != keys:
        sys.exit(f"the grid's task keys {sorted(tasks)} are not the file's {sorted(keys)}: another grid or options")
    campaign_id = str(df["campaign_id"].iloc[0])
    store = CampaignFolder(out)
    store.write_spec(campaign_id, tasks, str(df.attrs.get("gcexplore_version", gx.__version__)))
    run_attrs = {k: v for k, v in df.attrs.items() if k not in CAMPAIGN_ATTRS}
    for key, task in tasks.items():
        rows = df[df["task_key"] == key].reset_index(drop=True)
        first = rows.iloc[0]
        ident = {k: (None if k not in rows.columns else first[k]) for k in IDENTITY}
        ident["device_index"] = int(ident["device_index"])
        ident["device_sm_count"] = int(ident["device_sm_count"])
        rows.attrs = {**run_attrs, "kind": "sweep", "device_name": ident["device_name"],
                      "campaign": {"key": key, "campaign_id": campaign_id, "identity": ident,
                                   **{k: task[k] for k in ("experiment", "pair", "split_set", "card", "splits",
                                                           "options", "workloads")},
                                   "started_s": float(first["task_started_s"]),
                                   "finished_s": float(first["task_finished_s"])}}
        store.write_shard(key, rows)
    back = gx.load_campaign(out)
    cols = [c for c in df.columns if c not in CAMPAIGN_COLUMNS]
    order = ["task_key", "layout", "mode", "rep", "workload"]
    a = df.sort_values(order).reset_index(drop=True)[cols]
    b = back.sort_values(order).reset_index(drop=True)[cols]
    assert a.equals(b), "the folder does not read back as the file's rows"
    print(f"wrote {out}: {len(tasks)} tasks, {len(back)} rows; load_campaign gives the file's rows back")
    return 0


if __name__ == "__main__":
    sys.exit(main())
