"""Calibration of :func:`gcexplore.compare` on a real GPU: null pairs, true shifts, the noise floor.

Each side is its own run (its own :func:`gcexplore.scaling` call with its own run id, engine,
partitions and freshly allocated tensors). Per kind of work, ``--runs`` unshifted runs ``u1..uk``
and as many shifted runs ``s1..sk`` (the same work plus ``--shift`` more of it: one more matmul of
a chain of 32, one more batch of 32, 3% more iterations or elements) are measured interleaved
(u1 s1 u2 s2 ...). Null comparisons are consecutive unshifted runs (u1-u2, u2-u3, ...), true
shifts u_i against s_i. Reported per kind and overall: the false FAST/SLOW rate over compared
rows, the false CI-gate rates per null comparison (``--fail-on-regression 2``: exit 1, some row's
interval wholly above +2%; exit 3, none but some reaching beyond +2%), the power (SLOW share of shifted rows), and the same numbers
for the old method (one interval from all repetitions of a run, the round ignored) on the same
data. From the null runs: the noise floor per card and workload (``noise_floor.csv``: the
between-round standard deviation of log time within a run, and what runs add beyond it).

Also measured: the cost of the new defaults against today's 20 repetitions after 3 warm-ups (a
built-in sweep and a scaling side of each kind), and what makes rounds differ (``causes``): a
PyTorch GEMM chain timed in rounds with nothing re-drawn, a fresh partition each round, fresh
tensors each round, or both, with the round medians' spread in time and in clock-normalised time.

Work kinds (``--kinds``): compute and memory (built-ins), gemm (a chain of bf16 2048^3 matmuls
through cuBLAS), attention (scaled-dot-product attention, bf16), sort (torch.sort of float32),
fft (torch.fft.fft2 of a batch of complex64 images); not by default, the campaign bench's workloads
by their names (copy: the built-in; gemm_chain: 4 fp16 2048^3 matmuls; layer_norm: 8192 x 4096 fp16),
so that its campaign-vs-alone check finds their floors. ``--processes N --process-kinds K1,K2``:
N separate Python processes, each measuring every named kind once: the floors of those kinds then
take their run part from processes, not from runs inside one process. Run on the GPU machine from the project
root: ``python3 bench/compare_real.py --out DIR`` (about 2 minutes on an H100 at the defaults;
``--runs 3 --sizes 16,96`` for a quick look). Writes ``compare_real.parquet`` (every compared
row), ``compare_real_raw.parquet`` (every side's repetitions, for :func:`recompute`),
``summary.json`` (the tables) and ``noise_floor.csv`` into ``--out``.
``--recompute RAW`` redoes the comparisons from a recorded raw file on any machine (no GPU),
with the noise floor the package now ships (``--use-rounds N --use-reps M``: only each side's
first N rounds and each round's first M repetitions, what a cheaper setting would have measured).
``--redraw``: the PyTorch kinds are built with ``from_torch(setup=...)``, so their tensors are
allocated afresh in every round and the rounds see what a fresh allocation changes (by default a
side allocates once, as a workload built from ``fn`` does).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

import gcexplore
from gcexplore import workloads as W
from gcexplore.analysis import stats as S
from gcexplore.analysis.comparison import compare, decide
from gcexplore.analysis.tuning import gpu_time_ms
from gcexplore.cli.needs import needs

KINDS = ("compute", "memory", "gemm", "attention", "sort", "fft")
#: The campaign bench's workloads (bench/campaign.py, bench/campaign_pairs.py), measured by name so
#: that its campaign-vs-alone check finds their floors: not in the default set.
CAMPAIGN_KINDS = ("copy", "gemm_chain", "layer_norm")
TORCH_KINDS = {"gemm", "attention", "sort", "fft", "gemm_chain", "layer_norm"}


# ------------------------------------------------------------------------------ work


def build(kind: str, shift: float, device: int, redraw: bool = False):
    """One workload of ``kind`` with ``shift`` (0: none) more work, tensors made now; with
    ``redraw``, a PyTorch kind is built with ``from_torch(setup=...)``: its tensors are allocated
    afresh in every round (at the round's first call), as a separate run would."""
    if kind == "compute":
        return W.compute(iters=int(round(1536 * (1 + shift))), device=device)
    if kind == "memory":
        n = int(round((1 << 27) * (1 + shift) / 4096)) * 4096
        return W.memory(n=n, device=device)
    if kind == "copy":  # the built-in's default size (the campaign's), 3% more floats when shifted
        return W.copy(n=int(round((3 << 27) * (1 + shift) / 4096)) * 4096, device=device)
    if kind not in TORCH_KINDS:
        raise ValueError(f"unknown kind {kind!r}; kinds are {', '.join(KINDS + CAMPAIGN_KINDS)}")
    import torch

    make, flops = torch_work(kind, shift, f"cuda:{device}")
    if redraw:
        return W.from_torch(setup=make, name=kind, device=device, flops=flops)
    fn = make()
    torch.cuda.synchronize()
    return W.from_torch(fn, name=kind, device=device, flops=flops)  # fn holds its tensors


def torch_work(kind: str, shift: float, dev: str):
    """(make, flops): ``make()`` allocates the tensors of ``kind`` and returns the call to time."""
    import torch

    grow = lambda n: n + max(1, int(round(n * shift))) if shift else n  # noqa: E731
    if kind == "gemm":
        links = grow(32)

        def make():
            a = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16) / 45.0
            x = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)

            def fn():
                t = x
                for _ in range(links):
                    t = torch.matmul(t, a)
            return fn
        return make, 2.0 * 2048 ** 3 * links
    if kind == "attention":
        b = grow(32)

        def make():
            q, k, v = (torch.randn(b, 16, 1024, 64, device=dev, dtype=torch.bfloat16) for _ in range(3))
            return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return make, 4.0 * b * 16 * 1024 ** 2 * 64
    if kind == "gemm_chain":  # bench/campaign_pairs.gemm_layernorm's: 4 fp16 2048^3 GEMMs
        cols = int(round(4 * 2048 * shift / 64)) * 64  # shifted: one more 2048 x 2048 x cols GEMM

        def make():
            a, b = (torch.randn(2048, 2048, device=dev, dtype=torch.float16) for _ in range(2))

            def fn():
                y = a
                for _ in range(4):
                    y = y @ b
                return y @ b[:, :cols] if cols else y
            return fn
        return make, 2.0 * 2048 ** 2 * (4 * 2048 + cols)
    if kind == "layer_norm":  # campaign_pairs' layer norm of 8192 x 4096 fp16 (more rows when shifted)
        rows = int(round(8192 * (1 + shift)))

        def make():
            x = torch.randn(rows, 4096, device=dev, dtype=torch.float16)
            return lambda: torch.nn.functional.layer_norm(x, (4096,))
        return make, None
    if kind == "sort":
        n = int(round((1 << 24) * (1 + shift)))

        def make():
            x = torch.rand(n, device=dev)
            return lambda: torch.sort(x)
        return make, None
    b = grow(32)

    def make():
        x = torch.randn(b, 1024, 1024, device=dev, dtype=torch.complex64)
        return lambda: torch.fft.fft2(x)
    return make, None


def side(kind: str, shift: float, args, **kw) -> tuple[pd.DataFrame, float]:
    """One run of ``kind``: a scaling over ``args.sizes`` and the whole device; (rows, wall s)."""
    wl = build(kind, shift, args.device, getattr(args, "redraw", False))
    try:
        t0 = time.perf_counter()
        df = gcexplore.scaling(wl, args.sizes, device=args.device, progress=False, **kw)
        return df, time.perf_counter() - t0
    finally:
        wl.close()
        if "torch" in sys.modules:  # each side's fresh streams leave cached blocks behind
            sys.modules["torch"].cuda.empty_cache()


def gpu_ms(df: pd.DataFrame) -> float:
    """Measured plus warm-up GPU time of a scaling result (warm-ups at the round's median)."""
    per = df.groupby(["sm_count", "round"])["duration_ms"]
    return float(per.sum().sum() + int(df.attrs.get("warmup", 0)) * per.median().sum())


# ---------------------------------------------------------------------------- decisions


def old_verdicts(a: pd.DataFrame, b: pd.DataFrame, level: float, min_effect: float) -> list[tuple]:
    """The old method on the same rows: one Mann-Whitney interval per size from all repetitions."""
    out = []
    for k, ga in a.groupby("sm_count"):
        gb = b[b["sm_count"] == k]
        _, lo, hi = S.ratio_ci(ga["duration_ms"], gb["duration_ms"], level)
        out.append((int(k), decide(lo, hi, min_effect)[0], lo))
    return out


def judge(a, b, kind, what, pair, args) -> list[dict]:
    c = compare(a, b, min_effect=args.min_effect, floor=getattr(args, "floor", None))
    t = c.table[c.table["present"] == "both"]
    old = {k: (v, lo) for k, v, lo in old_verdicts(a, b, c.settings["level"], args.min_effect)}
    from gcexplore.analysis.gate import gate as ci_gate

    code = ci_gate(c.table, 2.0)[0]  # --fail-on-regression 2: 1 a regression shown, 3 one not ruled out
    gate, unsure = code == 1, code == 3
    old_gate = any(v == "SLOW" and lo > 1.02 for v, lo in old.values())
    rows = []
    for r in t.itertuples():
        ov, _ = old[int(r.sm_a)]
        rows.append({"kind": kind, "what": what, "pair": pair, "sm_count": int(r.sm_a), "ratio": r.ratio,
                     "low": r.ratio_low, "high": r.ratio_high, "verdict": r.verdict, "old_verdict": ov,
                     "rounds_a": r.rounds_a, "rounds_b": r.rounds_b, "rounds_needed": r.rounds_needed,
                     "cycles_ratio": r.cycles_ratio, "gate": gate, "gate_unsure": unsure, "old_gate": old_gate})
    return rows


def rates(rows: pd.DataFrame) -> dict:
    null, shift = rows[rows["what"] == "null"], rows[rows["what"] == "shift"]
    pairs = null.drop_duplicates(["kind", "pair"])
    out = {"null_rows": len(null), "null_comparisons": len(pairs), "shift_rows": len(shift)}
    for col, tag in (("verdict", "new"), ("old_verdict", "old")):
        out[f"{tag}_false_decisions"] = float(null[col].isin(["FAST", "SLOW"]).mean()) if len(null) else math.nan
        out[f"{tag}_power"] = float((shift[col] == "SLOW").mean()) if len(shift) else math.nan
        out[f"{tag}_wrong_way"] = float((shift[col] == "FAST").mean()) if len(shift) else math.nan
    out["new_false_gate"] = float(pairs["gate"].mean()) if len(pairs) else math.nan
    # exit 3 ("cannot rule out"): a CI job failing on any non-zero exit fails these nulls too
    out["new_gate_unsure"] = float(pairs["gate_unsure"].mean()) if len(pairs) and "gate_unsure" in pairs else math.nan
    out["old_false_gate"] = float(pairs["old_gate"].mean()) if len(pairs) else math.nan
    out["shift_median_ratio"] = float(shift["ratio"].median()) if len(shift) else math.nan
    return out


# ------------------------------------------------------------------------------ floor


def floor_rows(runs: list[pd.DataFrame], kind: str, device_name: str, batch: str = "") -> dict:
    """Between-round sd of log round medians within a run (pooled), and the run excess from
    consecutive null runs: E[(mean_b - mean_a)^2] = 2 run_var + 2 round_var / R."""
    ss = df = 0.0
    diffs, rounds = [], []
    means = []
    for d in runs:  # rounds far off their side's others set aside, as compare does
        m = np.log(d.groupby(["sm_count", "round"])["duration_ms"].median()).groupby(level=0)
        kept = {k: S.steady_rounds(x.to_numpy())[0] for k, x in m}
        ss += sum(float(((x - x.mean()) ** 2).sum()) for x in kept.values())
        df += sum(x.size - 1 for x in kept.values())
        means.append(pd.Series({k: x.mean() for k, x in kept.items()}))
        rounds.append(float(np.mean([x.size for x in kept.values()])))
    round_var = ss / df if df else math.nan
    for x, y in zip(means, means[1:]):
        diffs.extend((y - x).dropna().tolist())
    r = float(np.mean(rounds))
    run_var = max(0.0, float(np.mean(np.square(diffs))) / 2.0 - round_var / r) if diffs else 0.0
    return {"device_name": device_name, "workload": kind, "round_sd": round(math.sqrt(round_var), 5),
            "run_sd": round(math.sqrt(run_var), 5), "rounds": int(r), "runs": len(runs),
            "source": ", ".join(x for x in (f"bench/compare_real.py {time.strftime('%Y-%m-%d')}", batch) if x)}


def pooled_floor(raw: pd.DataFrame, confidence: float = 0.95) -> dict:
    """One floor from runs recorded in several batches (``raw``: columns set, role, side = run,
    sm_count, round, duration_ms): per set and role the variance of the runs' mean log round
    medians (rounds far off set aside), averaged over sizes, less the rounds' share (round
    variance / rounds); pooled with runs - 1 degrees of freedom each (sizes share a run's effect,
    so no more are counted), and the run part's upper bound at ``confidence`` (chi-square,
    Wilson-Hilferty)."""
    from statistics import NormalDist

    parts = []
    for (name, role), g in raw.groupby(["set", "role"], sort=False):
        ss = dfr = 0.0
        means, rounds = {}, []
        for side, d in g.groupby("side"):
            m = np.log(d.groupby(["sm_count", "round"])["duration_ms"].median()).groupby(level=0)
            kept = {k: S.steady_rounds(x.to_numpy())[0] for k, x in m}
            ss += sum(float(((x - x.mean()) ** 2).sum()) for x in kept.values())
            dfr += sum(x.size - 1 for x in kept.values())
            means[side] = pd.Series({k: x.mean() for k, x in kept.items()})
            rounds.append(np.mean([x.size for x in kept.values()]))
        if len(means) < 2:
            continue
        run_means = pd.DataFrame(means)
        parts.append({"set": name, "role": role, "runs": run_means.shape[1], "dof": run_means.shape[1] - 1,
                      "between": float(run_means.var(axis=1, ddof=1).mean()),
                      "round_var": ss / dfr, "rounds": float(np.mean(rounds))})
    t = pd.DataFrame(parts)
    dof = float(t["dof"].sum())
    between = float((t["between"] * t["dof"]).sum() / dof)
    share = float((t["round_var"] / t["rounds"] * t["dof"]).sum() / dof)
    z = NormalDist().inv_cdf(1.0 - confidence)
    chi2 = dof * (1.0 - 2.0 / (9.0 * dof) + z * math.sqrt(2.0 / (9.0 * dof))) ** 3
    per_set = t.assign(run_var=t["between"] - t["round_var"] / t["rounds"]).groupby("set", sort=False).apply(
        lambda x: math.sqrt(max(0.0, float((x["run_var"] * x["dof"]).sum() / x["dof"].sum()))), include_groups=False)
    return {"runs": int(t["runs"].sum()), "dof": int(dof),
            "round_sd": math.sqrt(float((t["round_var"] * t["dof"]).sum() / dof)),
            "run_sd": math.sqrt(max(0.0, between - share)),
            "run_sd_upper": math.sqrt(max(0.0, between * dof / chi2 - share)), "confidence": confidence,
            "per_set": {k: round(v, 5) for k, v in per_set.items()}}


# ----------------------------------------------------------------------------- causes


def causes(args) -> list[dict]:
    """Round-to-round spread of a GEMM chain with each kind of state drawn again per round."""
    from gcexplore.device import partitions
    from gcexplore.experiments.engine import Engine, Slot

    info = gcexplore.device_info(args.device)
    out = []
    with Engine(info) as eng:
        for cond in ("nothing", "partition", "tensors", "both"):
            for k in args.cause_sizes:
                wl = build("gemm", 0.0, args.device)
                parts = partitions.split([k], device=args.device) if k < info.sm_count else None
                meds, cyc = [], []
                try:
                    for r in range(args.cause_rounds):
                        if r and cond in ("tensors", "both"):
                            wl.close()
                            wl = build("gemm", 0.0, args.device)
                        if r and cond in ("partition", "both") and parts is not None:
                            parts.close()
                            parts = partitions.split([k], device=args.device)
                        if r and cond in ("partition", "both"):
                            eng.new_round()
                        p = parts[0] if parts is not None else eng.whole
                        slot = Slot(wl, p, p.stream)
                        eng.run_group([slot])
                        c0, _ = eng.nvml.read()
                        v = [eng.run_group([slot])[0][0][0][1] for _ in range(args.cause_reps)]
                        c1, _ = eng.nvml.read()
                        meds.append(float(np.median(v)))
                        cyc.append(float(np.median(v)) * (c0 + c1) / 2.0)
                finally:
                    wl.close()
                    if parts is not None:
                        parts.close()
                lt, lc = np.log(meds), np.log(cyc)
                out.append({"condition": cond, "sm_count": k, "rounds": len(meds), "median_ms": float(np.median(meds)),
                            "round_sd": float(np.std(lt, ddof=1)),
                            "round_sd_cycles": float(np.std(lc, ddof=1)) if np.isfinite(lc).all() else math.nan})
    return out


# ---------------------------------------------------------------------------- processes


def processes(args, out: Path, device_name: str) -> tuple[list[pd.DataFrame], list[dict]]:
    """``--processes`` runs of each of ``--process-kinds``, each run its own Python process (one
    process measures every kind once: an unshifted and a shifted side); the shifted side of process
    i + 1 is compared with the unshifted side of process i (each side its own process). Returns the
    sides and one floor per kind whose run part comes from the processes."""
    import subprocess

    kinds = [k for k in args.process_kinds.split(",") if k]
    frames: dict[str, list[pd.DataFrame]] = {k: [] for k in kinds}
    i = 0  # processes that returned their sides: a failed one is left out, its neighbours paired
    for n in range(args.processes):
        path = out / f"_process_{n}.parquet"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(path), "--kinds", ",".join(kinds),
               "--device", str(args.device), "--sizes", ",".join(map(str, args.sizes)), "--repeats", str(args.repeats),
               "--rounds", str(args.rounds), "--warmup", str(args.warmup), "--shift", str(args.shift)]
        cmd += ["--redraw"] if args.redraw else []
        t0 = time.perf_counter()
        try:
            subprocess.run(cmd, check=True, timeout=args.process_timeout)
            d = pd.read_parquet(path)
        except (subprocess.SubprocessError, OSError) as e:
            print(f"process {n} failed ({e}); left out", flush=True)
            continue
        finally:
            path.unlink(missing_ok=True)
        print(f"process {n}: {time.perf_counter() - t0:.1f} s", flush=True)
        for kind, g in d.groupby("kind", sort=False):
            frames[kind].append(g.assign(kind=f"{kind}@process", side=np.where(g["role"] == "u", i, i - 1)))
        i += 1
        save_raw([f for fs in frames.values() for f in fs], out, "process_raw.parquet")  # kept if stopped later
    out_frames, floors = [], []
    for kind, fs in frames.items():
        fs = [f[f["side"] >= 0] for f in fs]  # process 0's shifted side has no earlier partner
        runs = [f[f["role"] == "u"] for f in fs if (f["role"] == "u").any()]
        fl = floor_rows(runs, kind, device_name)
        fl["source"] = ", ".join(x for x in (f"bench/compare_real.py {time.strftime('%Y-%m-%d')}",
                                             f"{len(runs)} separate processes", args.batch) if x)
        floors.append(fl)
        out_frames.extend(fs)
    return out_frames, floors


# ---------------------------------------------------------------------------- recompute


def recompute(raw_path, args) -> dict:
    """The comparisons and rates from recorded sides (no GPU): each side back as a scaling frame."""
    return recompute_frames(pd.read_parquet(raw_path), args)


def subsample(raw: pd.DataFrame, rounds: int = 0, reps: int = 0) -> pd.DataFrame:
    """The first ``rounds`` rounds of every side and the first ``reps`` repetitions of every round
    (0: all): what a cheaper setting would have measured, from one recording."""
    keep = np.ones(len(raw), dtype=bool)
    if rounds:
        keep &= raw["round"].to_numpy() < rounds
    if reps:
        cols = [c for c in ("kind", "role", "side", "sm_count", "round") if c in raw.columns]
        keep &= raw.sort_values("rep").groupby(cols).cumcount().reindex(raw.index).to_numpy() < reps
    return raw[keep]


def recompute_frames(raw: pd.DataFrame, args) -> dict:
    from gcexplore.schema import frame

    raw = subsample(raw, getattr(args, "use_rounds", 0), getattr(args, "use_reps", 0))
    out, rows = {}, []
    for kind, g in raw.groupby("kind", sort=False):
        name = str(g["device_name"].iloc[0])

        def sides(role):  # "gemm@process" is gemm work: its floor is gemm's
            rows = g[g["role"] == role].assign(workload=kind.split("@")[0], requested_sm_count=g["sm_count"])
            return [frame(d.to_dict("records"), "scaling",
                          {"device_name": name, "run_id": str(d["run_id"].iloc[0]), "warmup": args.warmup})
                    for _, d in rows.groupby("side", sort=True)]
        u, s = sides("u"), sides("s")
        r = [x for i in range(1, len(u)) for x in judge(u[i - 1], u[i], kind, "null", i, args)]
        r += [x for i, (a, b) in enumerate(zip(u, s)) for x in judge(a, b, kind, "shift", i, args)]
        out[kind] = rates(pd.DataFrame(r))
        rows.extend(r)
    out["overall"] = rates(pd.DataFrame(rows))
    return out


# ------------------------------------------------------------------------------- main

RAW_COLUMNS = ["kind", "role", "side", "shift", "sm_count", "rep", "round", "duration_ms", "sm_clock_mhz_before",
               "power_w_before", "sm_clock_mhz", "power_w", "device_name", "run_id"]


def save_raw(raw: list[pd.DataFrame], out: Path, name: str = "compare_real_raw.parquet") -> None:
    if raw:
        pd.concat(raw, ignore_index=True)[RAW_COLUMNS].to_parquet(out / name)



def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="compare_real_out")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--runs", type=int, default=5, help="unshifted (and as many shifted) runs per kind")
    ap.add_argument("--sizes", default="16,64,96,128", help="partition sizes (the whole device is added)")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--shift", type=float, default=0.03)
    ap.add_argument("--min-effect", type=float, default=0.01)
    ap.add_argument("--cause-sizes", default="64,132")
    ap.add_argument("--cause-rounds", type=int, default=6)
    ap.add_argument("--cause-reps", type=int, default=4)
    ap.add_argument("--no-causes", action="store_true")
    ap.add_argument("--recompute", metavar="RAW", help="recompute the rates from a compare_real_raw.parquet (no GPU)")
    ap.add_argument("--pool", metavar="RUNS", help="one floor pooled over the runs of several batches (a parquet "
                                                   "with set, role, side, sm_count, round, duration_ms; no GPU)")
    ap.add_argument("--use-rounds", type=int, default=0, help="with --recompute: only each side's first N rounds")
    ap.add_argument("--use-reps", type=int, default=0, help="with --recompute: only each round's first N repetitions")
    ap.add_argument("--processes", type=int, default=0,
                    help="also run --process-kind in this many separate processes (one unshifted and one shifted "
                         "side each): nulls and shifts across processes, and the floor's run part from them")
    ap.add_argument("--process-kinds", "--process-kind", dest="process_kinds", default="gemm",
                    help="comma-separated kinds for --processes (each process measures every one of them)")
    ap.add_argument("--process-timeout", type=float, default=120.0, help="seconds one process may take")
    ap.add_argument("--batch", default="", help="a name for the GPU batch, written into the floors' source")
    ap.add_argument("--no-cost", action="store_true", help="skip the default-sweep cost measurement")
    ap.add_argument("--redraw", action="store_true",
                    help="PyTorch kinds are built with from_torch(setup=): tensors allocated afresh in every round")
    ap.add_argument("--child", metavar="PARQUET", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.recompute:
        print(json.dumps(recompute(args.recompute, args), indent=1))
        return 0
    if args.pool:
        print(json.dumps(pooled_floor(pd.read_parquet(args.pool)), indent=1))
        return 0
    args.sizes = [int(x) for x in args.sizes.split(",") if x]
    if args.child:  # one process of --processes: an unshifted and a shifted side, rows to a file
        new = dict(repeats=args.repeats, rounds=args.rounds, warmup=args.warmup)
        parts = []
        for kind in [k for k in args.kinds.split(",") if k]:
            side(kind, 0.0, args, repeats=3, rounds=1, warmup=1)
            parts += [side(kind, sh, args, **new)[0].assign(role=r, shift=sh, kind=kind)
                      for r, sh in (("u", 0.0), ("s", args.shift))]
        pd.concat(parts, ignore_index=True).to_parquet(args.child)
        return 0
    args.cause_sizes = [int(x) for x in args.cause_sizes.split(",") if x]
    kinds = [k for k in args.kinds.split(",") if k]
    pkinds = set(args.process_kinds.split(",")) if args.processes else set()
    needs(modules=("torch",) if TORCH_KINDS & (set(kinds) | pkinds) else ())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info = gcexplore.device_info(args.device)
    summary: dict = {"device": info.name, "args": {k: v for k, v in vars(args).items()}, "kinds": {}, "cost": {}}
    new = dict(repeats=args.repeats, rounds=args.rounds, warmup=args.warmup)
    allrows, floors, raw = [], [], []
    for kind in kinds:
        side(kind, 0.0, args, repeats=3, rounds=1, warmup=1)  # compile, allocate, load libraries: untimed
        runs, shifted, walls = [], [], []
        for i in range(args.runs):
            for sh, bucket in ((0.0, runs), (args.shift, shifted)):
                df, wall = side(kind, sh, args, **new)
                bucket.append(df)
                walls.append((wall, gpu_ms(df)))
        rows = []
        for i in range(1, len(runs)):
            rows += judge(runs[i - 1], runs[i], kind, "null", i, args)
        for i, (u, s) in enumerate(zip(runs, shifted)):
            rows += judge(u, s, kind, "shift", i, args)
        old_df, old_wall = side(kind, 0.0, args, repeats=20, rounds=1, warmup=3)
        for role, dfs in (("u", runs), ("s", shifted), ("old", [old_df])):
            raw.extend(d.assign(kind=kind, role=role, side=i, shift=args.shift if role == "s" else 0.0)
                       for i, d in enumerate(dfs))
        summary["cost"][kind] = {"new_wall_s": float(np.median([w for w, _ in walls])),
                                 "new_gpu_ms": float(np.median([g for _, g in walls])),
                                 "old_wall_s": old_wall, "old_gpu_ms": gpu_ms(old_df)}
        floors.append(floor_rows(runs, kind, info.name, args.batch))
        r = pd.DataFrame(rows)
        summary["kinds"][kind] = rates(r)
        allrows.append(r)
        print(kind, json.dumps(summary["kinds"][kind]), json.dumps(summary["cost"][kind]), flush=True)
        save_raw(raw, out)  # after every kind: a run stopped later keeps what it measured
    table = pd.concat(allrows, ignore_index=True) if allrows else pd.DataFrame()
    summary["overall"] = rates(table) if allrows else {}
    summary["floor"] = floors
    if not args.no_cost:
        summary["cost"].update(sweep_cost(args))
    if not args.no_causes and "torch" in sys.modules:
        summary["causes"] = causes(args)
    if args.processes:
        prows, pfloors = processes(args, out, info.name)
        raw.extend(prows)
        summary["processes"] = recompute_frames(pd.concat(prows, ignore_index=True), args)
        done = {f["workload"] for f in pfloors}
        floors = [f for f in floors if f["workload"] not in done] + pfloors
        summary["floor"] = floors
    table.to_parquet(out / "compare_real.parquet")
    save_raw(raw, out)
    pd.DataFrame(floors, columns=S.FLOOR_COLUMNS).to_csv(out / "noise_floor.csv", index=False)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(json.dumps({"overall": summary["overall"], "cost": summary["cost"], "floor": floors,
                      "processes": summary.get("processes"), "causes": summary.get("causes")}, indent=1, default=str))
    return 0


def sweep_cost(args) -> dict:
    """The cost of a default sweep of the built-in pair: today's settings against the new defaults."""
    out = {}
    pair = {"compute": W.compute(device=args.device), "memory": W.memory(device=args.device)}
    try:
        sizes = [16, 48, 80, 112]
        gcexplore.sweep(pair, sizes, repeats=3, warmup=1, rounds=1, device=args.device, progress=False)
        for tag, kw in (("old", dict(repeats=20, warmup=3, rounds=1)), ("new", {})):
            t0 = time.perf_counter()
            df = gcexplore.sweep(pair, sizes, device=args.device, progress=False, **kw)
            out[f"sweep_{tag}"] = {"wall_s": time.perf_counter() - t0, "gpu_ms": gpu_time_ms(df),
                                   "settings": {k: df.attrs.get(k) for k in ("repeats", "warmup", "rounds")}}
    finally:
        for w in pair.values():
            w.close()
    return out


if __name__ == "__main__":
    sys.exit(main())
