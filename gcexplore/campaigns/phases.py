"""A campaign's per-phase split (bench/campaign.py prints it) of the host-side rest between repetitions,
from what each task's engine recorded (``Engine.metadata()``: the gate and ``engine_phases``): the GPU
waiting at the gate, the rest of it (the host between repetitions: the sync's return, collecting the
times, Python, launch latency), and the host's own time enqueueing, waiting and collecting (beside the
GPU's, so not parts of the rest)."""

from __future__ import annotations

from typing import Any

COUNTS = ("reps", "queued", "measured_again", "flag_timeouts")
SECONDS = ("gate_idle_s", "enqueue_s", "wait_s", "collect_s")


def engine_records(frames: dict) -> dict:
    """key -> ``{"gate", "gate_note", "host"}`` from each task's result attrs (older shards: none)."""
    out = {}
    for key, df in frames.items():
        a = getattr(df, "attrs", {}) or {}
        if isinstance(a.get("engine_phases"), dict):
            out[key] = {"gate": a.get("gate", "timed"), "gate_note": a.get("gate_note", ""), "host": a["engine_phases"]}
    return out


def rest_phases(engine: dict, keys, rest_s: float | None) -> dict | None:
    """The engine's totals over ``keys`` and the rest split: at the gate, and the rest besides it."""
    recs = [engine[k] for k in keys if k in engine]
    if not recs:
        return None
    tot: dict[str, Any] = {k: sum(r["host"].get(k, 0) for r in recs) for k in (*COUNTS, *SECONDS)}
    tot["gates"] = sorted({r["gate"] for r in recs})
    tot["notes"] = sorted({r["gate_note"] for r in recs if r["gate_note"]})
    tot["tasks"] = len(recs)
    tot["rest_s"] = rest_s
    tot["besides_gate_s"] = None if rest_s is None else rest_s - tot["gate_idle_s"]
    tot["rest_per_rep_us"] = None if rest_s is None or not tot["reps"] else rest_s / tot["reps"] * 1e6
    return tot


def table(res: list[dict]) -> list[str]:
    """The per-phase lines of bench/campaign.py's report, one per run that has them."""
    rows = [r for r in res if (r.get("host_steps") or {}).get("phases")]
    if not rows:
        return []
    f = lambda x, fmt="{:.2f}": "-" if x is None else fmt.format(x)  # noqa: E731
    lines = ["", "| GPUs | cluster | gate | repetitions (queued behind another; measured again; flag timeouts) | "
                 "the rest s | of which the GPU at the gate s | besides the gate s (sync, collect, Python) | "
                 "rest per repetition us | host enqueueing s | host waiting for the end s | host collecting s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        p = r["host_steps"]["phases"]
        lines.append(f"| {r['gpus']} | {r['mode']} | {', '.join(p['gates'])} | {p['reps']} ({p['queued']}; "
                     f"{p['measured_again']}; {p['flag_timeouts']}) | {f(p['rest_s'])} | {p['gate_idle_s']:.2f} | "
                     f"{f(p['besides_gate_s'])} | {f(p['rest_per_rep_us'], '{:.0f}')} | {p['enqueue_s']:.2f} | "
                     f"{p['wait_s']:.2f} | {p['collect_s']:.2f} |")
    notes = sorted({n for r in rows for n in r["host_steps"]["phases"]["notes"]})
    return lines + ([f"gate notes: {'; '.join(notes)}"] if notes else [])
