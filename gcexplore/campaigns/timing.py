"""Where a campaign's time goes, from what it reported (pure: the reports, warm-ups, timings and result
of :func:`gcexplore.campaign` in, numbers and table lines out): per card the lead-in, the tasks and the
idle tail; along the card that ended last, end to end in parts; the local cluster's start per worker
step; the host-side steps of the experiments; and a run's makespans against another's (the same tasks
on one card, or run alone), with the interval over repetitions and the combined one ``compare`` uses.
:mod:`gcexplore.campaigns.scaling` (``bench/campaign.py``) runs the campaigns and prints these.

A *run* here is the dict :func:`gcexplore.campaigns.scaling` records per campaign: ``n`` (GPUs),
``mode``, ``end_to_end_s``, ``timings``, ``wall0`` / ``wall1`` (the call's start and end, epoch s),
``reports``, ``warm_ups``, ``tasks`` and ``df`` (the campaign's rows), optionally ``gpu_s`` and ``engine``.
"""

from __future__ import annotations

import statistics

from .phases import rest_phases
from .phases import table as phases_table

__all__ = ["ALSO", "GOALS", "HOST_STEPS", "agreement", "critical_line", "decompose", "fmt_s", "goal_of", "host_steps",
           "misses", "preload_parts", "scaling_lines", "start_steps", "table"]

#: A run with a setting changed (``--gpu-start-too``, ``--cpus-too``, ...): its mode's label ends with this.
ALSO = ", with "


def host_steps(run: dict, done: list) -> dict:
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


def decompose(run: dict) -> dict:
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
            steps = sum(v for k, v in w.items() if k.endswith("_s") and isinstance(v, float))
            warm.append((pre.get("total_s", 0.0), steps))
    phases = {k: sum(r.get(k, 0.0) for r in done) for k in ("build_s", "prime_s", "experiment_s", "checkpoint_s",
                                                              "cpu_s", "write_s")}
    task = lambda r: r["ended_s"] - r["started_s"]  # noqa: E731
    first = [task(r) for r in done if r.get("first")]
    rest = [task(r) for r in done if not r.get("first")]
    tm = run.get("timings", {})
    return {"start_steps": start_steps(run), "preload_parts": preload_parts(run), "critical": critical,
            "host_steps": host_steps(run, done), "gpus": run["n"], "mode": run.get("mode", "cold"), "tasks": len(done),
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


def start_steps(run: dict) -> dict | None:
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


def critical_line(r: dict, base: dict, goal: float | None) -> str:
    """End to end, along the card that ended last, against the one-GPU run's and the goal's."""
    c, one = r["critical"], base["critical"]
    text = (f"{r['gpus']} GPUs {r['mode']}: end to end {r['end_to_end_s']:.2f} s = tasks per card (mean) "
            f"{c['mean_tasks_s']:.2f} + the last card's tasks over the mean {c['tasks_s'] - c['mean_tasks_s']:.2f} + "
            f"its lead-in {c['lead_in_s']:.2f} + gaps between its tasks {c['gaps_s']:.2f} + after its last task "
            f"{c['after_s']:.2f} + close {c['close_s']:.2f}; one GPU: tasks {one['tasks_s']:.2f} + lead-in "
            f"{one['lead_in_s']:.2f} + the rest {base['end_to_end_s'] - one['tasks_s'] - one['lead_in_s']:.2f}")
    if goal:
        need = base["end_to_end_s"] / goal
        text += f"; {goal}x needs <= {need:.2f} s ({r['end_to_end_s'] - need:+.2f} s against it)"
    return text


def preload_parts(run: dict) -> dict:
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


def agreement(base, other) -> dict:
    """Per task, layout and mode: ``other``'s makespans against ``base``'s (one card, or the task alone).

    Two intervals of the ratio of medians: ``ratio_ci`` over repetitions (a run's repetitions
    as independent draws: it resolves the ~1% that separates two runs), and the combined
    interval ``compare`` uses (:func:`round_ratio_ci`: the round as unit, plus the card's
    recorded run-to-run floor, since the two sides are two runs)."""
    from ..analysis.stats import ratio_ci, round_ratio_ci, run_floor

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
            floors[g[0]] = run_floor(device_name=str(task["device_name"].iloc[0]) if "device_name" in task else "",
                                     workloads=task["workload"].astype(str))
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


def misses(ag: dict, pairs: dict) -> str:
    """The comparisons outside the combined interval, named with their numbers."""
    out = [f"{pairs.get(r['task_key'], r['task_key'])} {r['layout']} {r['mode']} {r['rounds_ratio']:.4f} "
           f"[{r['rounds_low']:.4f}, {r['rounds_high']:.4f}]" for r in ag["rows"] if not r["inside_rounds_95"]]
    return "; ".join(out) or "none"


def fmt_s(x, fmt="{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


#: issue 49's goals, end to end against one GPU of the same kind of run: (first or warm, GPUs) -> speedup
GOALS = {("first", 2): 1.85, ("first", 4): 3.4, ("first", 8): 6.5, ("warm", 4): 3.6, ("warm", 8): 7.0,
         ("cold", 2): 1.9, ("cold", 4): 3.6}


def goal_of(r: dict) -> float | None:
    return None if ALSO in r["mode"] else GOALS.get((r["mode"].split(",")[0], r["gpus"]))


def scaling_lines(res: list[dict], bases: dict, missing: list[str]) -> list[str]:
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
            speed, goal = base["end_to_end_s"] / r["end_to_end_s"], goal_of(r)
            cells.append(f"{r['end_to_end_s']:.2f}, {speed:.2f}x" + (
                f" ({goal}x: {'met' if speed >= goal else 'NOT met'})" if goal else ""))
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return lines + missing


def table(res: list[dict], bases: dict) -> list[str]:
    """``bases``: mode -> the 1-GPU result of that mode (speedups compare like with like)."""
    lines = ["| GPUs | cluster | cluster start s (client waited) | warm-up s/worker (at start + task) | lead-in s "
             "(max) | task time per card s | sum of tasks s (vs 1 GPU) | idle tail s (max) | close s (background) | "
             "end to end s | speedup |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res:
        per, base = r["task_time_per_card_s"], bases.get(r["mode"], r)
        lines.append(
            f"| {r['gpus']} | {r['mode']} | {fmt_s(r['cluster_start_s'])} ({fmt_s(r['cluster_wait_s'])}) | "
            f"{fmt_s(r['warm_up_at_start_s_mean'])} + {fmt_s(r['warm_up_task_s_mean'])} | {r['lead_in_s_mean']:.2f} "
            f"({r['lead_in_s_max']:.2f}) | {statistics.mean(per):.2f} [{min(per):.2f}-{max(per):.2f}] | "
            f"{r['sum_task_s']:.2f} ({r['sum_task_s'] / base['sum_task_s'] - 1:+.1%}) | {r['idle_tail_s_max']:.2f} | "
            f"{r['close_s']:.2f} ({fmt_s(r['close_background_s'])}) | {r['end_to_end_s']:.2f} | "
            f"{base['end_to_end_s'] / r['end_to_end_s']:.2f}x |")
    lines += ["", "| GPUs | cluster | forkserver s (started to imports done) | spawn s (to the worker's birth) | "
                  "boot s (Dask) | gcexplore import s | factories' modules s | join s | cluster start s | GPU ready s "
                  "(start call to context and kernels done, beside boot and join; of which driver init / context / "
                  "kernels) | priming s (first task of each recipe, per worker; per recipe) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res:
        st, pp = r.get("start_steps") or {}, r.get("preload_parts") or {}
        parts = " / ".join(fmt_s(pp.get(k)) for k in ("driver_init_s", "context_s", "kernels_s"))
        lines.append(f"| {r['gpus']} | {r['mode']} | " + " | ".join(fmt_s(st.get(k)) for k in (
            "forkserver_s", "spawn_s", "boot_s", "gcexplore_import_s", "preload_rest_s", "join_s"))
            + f" | {fmt_s(r['cluster_start_s'])} | {fmt_s(st.get('gpu_ready_s'))} ({parts}) | "
            f"{fmt_s(pp.get('prime_s'))} ("
            + ", ".join(f"{k} {v:.2f}" for k, v in (pp.get("prime_each_s") or {}).items()) + ") |")
    lines += ["", "| GPUs | cluster | build s | priming s | experiment s | of which checkpoint s | CPU s | write s | "
                  "cached tasks | first task s (mean) | other tasks s (mean) | SM clock MHz (median) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res:
        p = r["phases_s"]
        lines.append(f"| {r['gpus']} | {r['mode']} | {p['build_s']:.2f} | {p['prime_s']:.2f} | "
                     f"{p['experiment_s']:.2f} | {p['checkpoint_s']:.3f} | {p['cpu_s']:.2f} | {p['write_s']:.3f} | "
                     f"{r['cached_tasks']}/{r['tasks']} | "
                     f"{r['first_task_s_mean'] or 0:.2f} | {r['other_task_s_mean'] or 0:.2f} | "
                     f"{r['sm_clock_mhz_median'] or float('nan'):.0f} |")
    lines += ["", "| GPUs | cluster | experiment s (all tasks) | GPU time of the repetitions s | "
              + " | ".join(f"{k} s" for k in HOST_STEPS) + " | checkpoint s | the rest s (enqueue, waits, Python) |",
              "|---|---|---|---|" + "---|" * len(HOST_STEPS) + "---|---|"]
    for r in res:
        h = r.get("host_steps") or {}
        lines.append(f"| {r['gpus']} | {r['mode']} | {fmt_s(h.get('experiment_s'))} | {fmt_s(h.get('gpu_s'))} | "
                     + " | ".join(fmt_s((h.get("steps") or {}).get(k)) for k in HOST_STEPS)
                     + f" | {fmt_s(h.get('checkpoint_s'))} | {fmt_s(h.get('rest_s'))} |")
    return lines + phases_table(res)
