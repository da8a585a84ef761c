"""Campaign scaling on 1, 2, 4 and 8 GPUs of one host, first and warm runs, with where the time goes.

The runs and the report of ``bench/campaign.py`` (its docstring says what each run is and what the
report holds; ``python3 bench/campaign.py --help`` the options): one grid of 4 pairs x 4 split sets run
as a fresh process's first campaign, cold (``campaign(devices=)`` starting its own cluster) and warm
(the kept cluster of ``gcexplore cluster start``) on each GPU count, the tasks alone, and the A/B runs
with one setting changed. :mod:`gcexplore.campaigns.timing` computes where the time went; this module
runs the campaigns and writes ``campaign_bench.md`` and ``.json``. :func:`main` takes the bench's
command line; ``PAIRS`` and ``EXPERIMENT`` are the grid's (a CPU test swaps in stand-ins).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from ..results.files import atomic_write
from ..schema import identity_name
from . import timing as T
from .phases import engine_records

__all__ = ["main"]

ALSO = T.ALSO


def _gx():
    """The calls this harness makes, from the package's own modules (a module inside imports no face)."""
    import types

    from ..device.driver import device_info
    from ..results.io import load, save
    from .grid import campaign
    from .store import load_campaign

    return types.SimpleNamespace(device_info=device_info, campaign=campaign, load_campaign=load_campaign, save=save,
                                 load=load)


PAIRS = [["compute", "memory"], ["compute", "copy"], "gcexplore.workloads.torch_pairs:attention_sort",
         "gcexplore.workloads.torch_pairs:gemm_layernorm"]


EXPERIMENT = "sweep"  # (the CPU test swaps in the stand-in experiment and pairs)


def _split_sets(step: int) -> list[list[int]]:
    gx = _gx()

    info = gx.device_info(0)
    valid = [k for k in info.valid_sm_counts() if k % step == 0 and k < info.sm_count]
    picks = [valid[round(i * (len(valid) - 1) / 7)] for i in range(8)]
    return [picks[i:i + 2] for i in range(0, 8, 2)]


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
    subprocess.run([sys.executable, "-m", __name__, "--child", json.dumps(job), "--out", str(out.parent)], check=True)
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
    atomic_write(Path(job["out"]), lambda tmp: Path(tmp).write_bytes(pickle.dumps(run)))
    return 0


def _run(devices, folder, splits, repeats, durations=None, warm=False, fork="cold", setting=None, cut=None,
         imported=True) -> dict:
    """One campaign on ``devices``, timed as its caller sees it. Cold (the default a user gets):
    ``gx.campaign(..., devices=...)`` starts its own local cluster (its workers warm up as they start, while
    the client plans), runs, and hands the cluster's shutdown to a background thread once every row is on
    disk. Warm: on a cluster kept from an earlier campaign (``client=``), its start and a priming campaign
    not timed. ``setting``: ``(variable, value, words)``, an environment variable set for this run only
    (GCEXPLORE_GPU_START: the workers' driver and context serial/together; GCEXPLORE_WORKER_CPUS: their CPUs)."""
    gx = _gx()

    from .cluster import stop_forkserver

    state = address = None
    if fork == "cold" and not warm and imported:
        stop_forkserver()  # this campaign starts as the first of a process does
    if warm:  # the warm cluster of `gcexplore cluster start` (a server process of its own), primed by one campaign
        from . import warm as kept

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
            assert old is not None  # the branch above took the unset one
            os.environ[setting[0]] = old
        if warm:
            from . import warm as kept

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
    from ..analysis.tuning import gpu_time_ms
    from .store import CampaignFolder

    out, frames = {}, CampaignFolder(folder).scan()[0]
    for key, df in frames.items():
        try:
            out[key] = gpu_time_ms(df) / 1000.0
        except (KeyError, ValueError, TypeError):  # not a timing result (the CPU stand-in's)
            continue
    return out, engine_records(frames)


def _workloads(recipe: dict) -> dict:
    """A task's workloads built here, on device 0, from its recipe (built-in names or a factory)."""
    from .grid import resolve_factory
    from ..workloads.spec import parse_recipe

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

        from .grid import call_each

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

    from .grid import lookup_experiment
    from ..experiments.overlap import sweep

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
        df = cast(pd.DataFrame, df)  # no task traces: sweep gives a frame
        df["task_key"] = t["key"]
        frames.append(df)
    return seconds, pd.concat(frames, ignore_index=True)


def main(argv=None) -> int:
    assert __doc__ is not None  # this module's docstring
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
                   help="cold: each campaign starts as a process's first (spawned workers); "
                        "kept: a forkserver started before timing")
    p.add_argument("--gpu-start-too", choices=("serial", "together"),
                   help="after the cold runs, the --too-gpus counts again with GCEXPLORE_GPU_START set to this")
    p.add_argument("--cpus-too", type=lambda v: v.split(",") if set(v.split(",")) <= {"share", "local", "off"}
                   else p.error(f"--cpus-too takes share, local and off (comma-separated), got {v!r}"),
                   help="after the cold runs, the --too-gpus counts again with GCEXPLORE_WORKER_CPUS set to each "
                        "of these (comma-separated; the default, local, again: a drift check)")
    p.add_argument("--dispatch-too", choices=("eager", "ready"),
                   help="after the cold runs, the --too-gpus counts again with GCEXPLORE_DISPATCH set to this "
                        "(eager: every task to Dask at once, Dask's assignment; "
                        "ready: one per free worker, the default)")
    p.add_argument("--gate-too", choices=("flag", "timed"),
                   help="after the cold runs, the --too-gpus counts again with GCEXPLORE_GATE set to this (the "
                        "engine's gate; with 1 in --too-gpus the N-GPU runs compare with that 1-GPU run)")
    p.add_argument("--too-gpus", help="the GPU counts the --*-too runs repeat (default the largest)")
    p.add_argument("--alone-again", action="store_true",
                   help="no GPU: compare OUT/campaign-1gpu with OUT/alone.parquet again (the floors recorded now)")
    args = p.parse_args(argv)
    if args.child:
        return _child(json.loads(args.child))
    if args.alone_again:
        return _alone_again(Path(args.out))
    gx = _gx()
    from .grid import visible_gpus

    gpus = visible_gpus()
    asked = [int(x) for x in args.gpus.split(",")]
    counts = [n for n in asked if n <= len(gpus)]
    missing = [f"{n} GPU{'s' * (n > 1)}: not run, {len(gpus)} visible here "
               f"(run this on a machine of {n} GPUs of one host)"
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
    import importlib

    importlib.import_module("gcexplore.workloads.torch_pairs")  # the client's import of the factories, untimed
    import distributed  # noqa: F401 (and of Dask: the first campaign of a process pays it, the later ones do not)

    _prime_here()

    if args.forkserver == "kept":
        from .cluster import start_forkserver

        t = time.perf_counter()
        fs = start_forkserver([p.split(":")[0] for p in PAIRS if isinstance(p, str)], wait=True)
        print(f"forkserver started before timing (kept for every campaign): ready in {time.perf_counter() - t:.2f} s, "
              f"its imports {T.fmt_s(fs.get('preload_s'))} s ({fs.get('seconds')}; errors {fs.get('errors')})",
              flush=True)
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
    gx = _gx()
    import pandas as pd

    alone, camp = gx.load(out / "alone.parquet"), gx.load_campaign(out / "campaign-1gpu")
    camp = camp[camp["task_key"].isin(set(alone["task_key"]))]
    ag = T.agreement(alone, camp)
    pairs = dict(zip(camp["task_key"], camp["pair"]))
    atomic_write(out / "campaign_vs_alone_again.csv", lambda tmp: pd.DataFrame(ag["rows"]).to_csv(tmp, index=False))
    print(f"campaign vs alone again: {ag['inside_rounds_95']} of {ag['comparisons']} in the combined interval "
          f"(floors {'; '.join(ag['floors'])}); {ag['inside_95']} of {ag['comparisons']} repetition intervals; "
          f"largest median ratio {ag['worst_ratio']:.4f} at {' '.join(ag['worst_at'])}\noutside: {T.misses(ag, pairs)}")
    return 0


def _direct_lines(runs: list[dict], direct) -> tuple[list[str], dict]:
    """Each task alone against the same task in the 1-GPU campaign, on the same card."""
    seconds, alone = direct
    camp = runs[0]["df"]
    camp = camp[camp["task_key"].isin(set(alone["task_key"]))]
    ag = T.agreement(alone, camp)
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
            + T.misses(ag, {k: runs[0]["tasks"][k]["pair"] for k in seconds})], res


def _report(runs: list[dict], direct, out: Path, splits, repeats: int, missing: Sequence[str] = ()) -> int:
    gx = _gx()

    res = [T.decompose(r) for r in runs]
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
            run["agreement"] = T.agreement(ref["df"], run["df"]) if ref is not None and ref is not run else None
        r["agreement"] = run["agreement"]
    last = runs[-1]["df"]
    cards = sorted(set(last["device_name"] + " " + last[identity_name("uuid")]))
    two = next((run for run in runs if run["n"] == 2), None)
    if two is not None:
        gx.save(two["df"], out / "campaign.parquet")
    lines = [f"cards: {', '.join(cards)}", f"grid: {len(PAIRS)} pairs x split sets {splits}, {repeats} "
             f"repetitions, {res[0]['tasks']} tasks", "first: `gcexplore campaign`'s path, a fresh process "
             "timed from its birth; cold: gx.campaign(..., devices=) in this process, starting and closing its own "
             "cluster; warm: the cluster of `gcexplore cluster start` (scheduler=), its start not timed",
             "", *T.scaling_lines(res, bases, list(missing)), "", *T.table(res, bases), ""]
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
        goal = T.goal_of(r)
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
        lines.append(T.critical_line(r, base, goal))
    from .worker_cpus import describe

    lines += [f"{r['gpus']} GPUs {r['mode']}: worker CPUs " + "; ".join(map(describe, r["worker_cpus"].values()))
              for r in res]
    alone = None
    if direct is not None:
        more, alone = _direct_lines(runs, direct)
        lines += more
        import pandas as pd

        atomic_write(out / "campaign_vs_alone.csv", lambda tmp: pd.DataFrame(alone["rows"]).to_csv(tmp, index=False))
    data = json.dumps({"cards": cards, "splits": splits, "repeats": repeats, "runs": res, "alone": alone}, indent=1,
                      default=str)
    atomic_write(out / "campaign_bench.json", lambda tmp: Path(tmp).write_text(data))
    failed = sum(r["failed"] for r in res)
    lines.append(f"failed tasks: {failed or 'none'}")
    text = "\n".join(lines)
    atomic_write(out / "campaign_bench.md", lambda tmp: Path(tmp).write_text(text + "\n"))
    print(text, flush=True)
    return failed


if __name__ == "__main__":  # the fresh process of a first run (--child), and python -m
    sys.exit(main())
