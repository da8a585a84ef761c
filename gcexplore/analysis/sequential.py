"""Compare until decided: measure the undecided rows again, as new runs, until compare decides them.

:func:`compare_until_decided` takes two callables that each measure one side once more (a new
run: its own engine, partitions and run id) and returns the :class:`~gcexplore.analysis.comparison.Comparison`
of everything measured. After each look, the rows still UNCLEAR are measured again on both sides
(only their layouts), up to ``max_runs`` runs per side. A run adds what rounds cannot: the card's
run-to-run offset (``Floor.run_sd``) averages over the runs a side pools, so a GEMM chain whose
single run is UNCLEAR at a 3% shift can be decided by two or three. The sides take turns at being
measured first (A B, then B A, ...): whatever the first run after a pause pays is paid by both.

The stopping rule is fixed in advance and safe under optional stopping: every look is made at
confidence ``1 - (1 - confidence) / max_runs`` (Bonferroni over the at most ``max_runs`` looks, on
top of compare's Bonferroni over the rows), and a row keeps the verdict of the look that first
decided it. So the chance that any row is ever called FAST / SLOW wrongly, at any look, stays
below ``1 - confidence``, however the looks turned out. Pure: the measuring is the callables'.

Below it, compare calibrated on recorded runs (``bench/compare_real.py`` and ``bench/until_decided.py``
measure them on a GPU and print these): the card's noise floor from null runs, the false-decision
rate and power of null pairs and true shifts (with the old per-repetition method on the same rows
beside them), and ``compare_until_decided`` run over pairs and replayed on a recording. All pure
(recorded frames in, numbers out), so a recording shipped in ``gcexplore/data/calibration`` is
recomputed on any machine. A recorded side (``raw``) is the long frame those benches write: one row
per repetition, with ``kind``, ``role`` (``u`` unshifted, ``s`` shifted), ``side`` (the run),
``sm_count``, ``round``, ``duration_ms``, ``device_name`` and ``run_id``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

from ..results.files import atomic_write
from . import stats as S
from .comparison import Comparison, compare, decide
from .stats import Floor

__all__ = ["RanOut", "compare_until_decided", "floor_rows", "gpu_ms", "judge", "logged", "old_verdicts",
           "pair_processes", "pooled_floor", "rates", "recompute_frames", "replay", "replayer", "run_pairs",
           "subsample", "summarize", "what_of", "write_floors"]

DECIDED = ("FAST", "SLOW", "SAME")


def _sizes(undecided: pd.DataFrame) -> list[int]:
    """The first partition's SMs of the undecided rows, as scaling and sweep take them."""
    return sorted({int(v) for v in undecided["sm_a"].dropna()})


def compare_until_decided(measure_a, measure_b, *, max_runs: int = 4, min_effect: float = 0.01,
                          confidence: float = 0.95, floor: Floor | None = None, budget_s: float | None = None,
                          labels=("A", "B")) -> Comparison:
    """Compare two sides, measuring the undecided rows again (new runs) until each is decided.

    Parameters
    ----------
    measure_a, measure_b : callable
        ``measure(sizes)`` measures its side once more and returns the result (a scaling, sweep or
        overlap frame): ``sizes`` is ``None`` for the first run (everything), then the sorted first
        partition SM counts of the rows still undecided (what :func:`gcexplore.scaling` and
        :func:`gcexplore.sweep` take as ``sizes``; a scaling's whole-device row appears as the
        card's SM count). Each call must be a new run (its own run id). A run the callable returns is
        kept only in the Comparison's pooled sides, not past a later failure or Ctrl-C: a callable whose
        runs must survive one saves them (``gcexplore compare --until-decided`` saves each to ``--out``).
    max_runs : int, default 4
        Most runs per side, and the number of looks the error rate is split over.
    min_effect, confidence, floor
        As :func:`gcexplore.compare`; ``confidence`` holds jointly over all rows and all looks.
    budget_s : float, optional
        Wall-clock seconds after which no further run starts (stopping early keeps the guarantee).
    labels : tuple of str

    Returns
    -------
    Comparison
        Of all runs measured, with each row's verdict from the look that first decided it;
        ``settings["looks"]`` lists per look the runs per side and the verdict counts,
        ``settings["runs_per_side"]``, ``settings["look_confidence"]``; the table gains a ``look``
        column (the look that decided the row, the last look for rows still UNCLEAR).
    """
    if isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1:
        raise ValueError(f"compare_until_decided: max_runs must be a whole number >= 1, got {max_runs!r}")
    if not (callable(measure_a) and callable(measure_b)):
        raise ValueError("compare_until_decided: measure_a and measure_b must be callables measure(sizes) -> result")
    if budget_s is not None and not (isinstance(budget_s, (int, float)) and budget_s > 0):
        raise ValueError(f"compare_until_decided: budget_s must be a positive number of seconds, got {budget_s!r}")
    if not 0.5 < confidence < 1:
        raise ValueError(f"compare_until_decided: confidence must be in (0.5, 1), got {confidence!r}")
    level = 1.0 - (1.0 - confidence) / max_runs
    t0 = time.perf_counter()
    sides: tuple[list, list] = ([], [])
    frozen: dict[tuple, dict] = {}  # (group, layout_a, layout_b) -> the row as first decided, with its look
    looks, sizes, c = [], None, None
    for look in range(1, max_runs + 1):
        # A then B at odd looks, B then A at even ones: on an H100 the side measured first after the
        # pause for a look's comparison ran 0.6% slower (GEMM chain, batch d1), a bias more runs would
        # only sharpen; alternating cancels it at every even look
        first = 0 if look % 2 else 1
        for i in (first, 1 - first):
            df = (measure_a, measure_b)[i](sizes)
            if not isinstance(df, pd.DataFrame) or df.empty:
                raise ValueError(f"compare_until_decided: measure({sizes!r}) returned no result rows")
            sides[i].append(df)
        a, b = (pd.concat(s, ignore_index=True) for s in sides)
        a.attrs, b.attrs = dict(sides[0][0].attrs), dict(sides[1][0].attrs)
        c = compare(a, b, labels=labels, min_effect=min_effect, confidence=level, floor=floor)
        if not isinstance(c, Comparison):
            raise ValueError("compare_until_decided: the sides measured several workload sets; "
                             "compare one set at a time")
        t = c.table[c.table["present"] == "both"]
        for r in t.itertuples():
            key = (r.group, r.layout_a, r.layout_b)
            if key not in frozen and r.verdict in DECIDED:
                frozen[key] = {**r._asdict(), "look": look}
        undecided = t[[(r.group, r.layout_a, r.layout_b) not in frozen for r in t.itertuples()]]
        looks.append({"look": look, "first": labels[first], "runs_per_side": look,
                      "elapsed_s": time.perf_counter() - t0, "undecided": len(undecided),
                      **{v.lower(): sum(1 for f in frozen.values() if f["verdict"] == v) for v in DECIDED}})
        sizes = _sizes(undecided)
        if undecided.empty or not sizes or (budget_s is not None and time.perf_counter() - t0 >= budget_s):
            break
    c = cast(Comparison, c)  # max_runs >= 1 looks, each one workload set a side: one Comparison
    table = c.table.copy()
    table["look"] = looks[-1]["look"]
    for i, r in enumerate(table.itertuples()):
        f = frozen.get((r.group, r.layout_a, r.layout_b))
        if f is not None:
            for col in table.columns:
                if col in f:
                    table.at[i, col] = f[col]
            table.at[i, "look"] = f["look"]
    settings = {**c.settings, "confidence": confidence, "look_confidence": level, "max_runs": max_runs,
                "runs_per_side": looks[-1]["runs_per_side"], "looks": looks}
    return dataclasses.replace(c, table=table, settings=settings)


# =========================================================== compare calibrated on recorded runs
# ------------------------------------------------------------------------------ cost

def gpu_ms(df: pd.DataFrame) -> float:
    """Measured plus warm-up GPU time of a scaling result (warm-ups at the round's median)."""
    per = df.groupby(["sm_count", "round"])["duration_ms"]
    return float(per.sum().sum() + int(df.attrs.get("warmup", 0)) * per.median().sum())


# ---------------------------------------------------------------------------- decisions

def old_verdicts(a: pd.DataFrame, b: pd.DataFrame, level: float, min_effect: float) -> list[tuple]:
    """The old method on the same rows: one Mann-Whitney interval per size from all repetitions."""
    out, (ka, va), (kb, vb) = [], *((d["sm_count"].to_numpy(), d["duration_ms"].to_numpy(float)) for d in (a, b))
    for k in np.unique(ka[pd.notna(ka)]):  # groupby's sizes, in order; columns read once, no frame per size
        _, lo, hi = S.ratio_ci(va[ka == k], vb[kb == k], level)
        out.append((int(cast(int, k)), decide(lo, hi, min_effect)[0], lo))
    return out


def judge(a, b, kind, what, pair, *, min_effect: float = 0.01, floor=None) -> list[dict]:
    """One comparison of sides ``a`` and ``b`` (``what``: ``"null"`` or ``"shift"``), a row per size
    measured on both: compare's ratio, interval and verdict, the CI gate's answer at +2%, and the old
    method's verdict and gate on the same rows (:func:`old_verdicts`)."""
    c = cast(Comparison, compare(a, b, min_effect=min_effect, floor=floor))  # one workload a side: one Comparison
    t = c.table[c.table["present"] == "both"]
    old = {k: (v, lo) for k, v, lo in old_verdicts(a, b, c.settings["level"], min_effect)}
    from .gate import gate as ci_gate

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
    """False FAST/SLOW share of null rows, SLOW share (power) and FAST share (wrong way) of shifted rows,
    for compare and the old method; the false CI-gate share per null comparison; the shifts' median ratio."""
    null, shift = rows[rows["what"] == "null"], rows[rows["what"] == "shift"]
    pairs = null.drop_duplicates(["kind", "pair"])
    out: dict[str, float] = {"null_rows": len(null), "null_comparisons": len(pairs), "shift_rows": len(shift)}
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
        m = cast(pd.Series, np.log(d.groupby(["sm_count", "round"])["duration_ms"].median())).groupby(level=0)
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
            m = cast(pd.Series, np.log(d.groupby(["sm_count", "round"])["duration_ms"].median())).groupby(level=0)
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


def write_floors(floors: list[dict], path) -> None:
    """Floor rows (:func:`floor_rows`) as a ``noise_floor.csv`` in the columns the package reads."""
    table = pd.DataFrame(floors, columns=S.FLOOR_COLUMNS)
    atomic_write(Path(path), lambda tmp: table.to_csv(tmp, index=False))


def pair_processes(frames: list[pd.DataFrame], kinds, device_name: str, source: str = "") -> tuple[list, list]:
    """Sides measured in separate processes (``frames``: one per process that returned, in order, each
    with an unshifted and a shifted side of every kind): the shifted side of process i + 1 is paired
    with the unshifted side of process i (each side its own process). Returns the paired sides (kind
    ``KIND@process``, ``side`` the pair's index) and one floor per kind whose run part comes from the
    processes (``source`` appended to its source)."""
    per: dict[str, list[pd.DataFrame]] = {k: [] for k in kinds}
    for i, d in enumerate(frames):
        for kind, g in d.groupby("kind", sort=False):
            kind = cast(str, kind)  # pandas-stubs: a group key is any scalar
            per.setdefault(kind, []).append(g.assign(kind=f"{kind}@process", side=np.where(g["role"] == "u", i, i - 1)))
    out_frames, floors = [], []
    for kind, fs in per.items():
        fs = [f[f["side"] >= 0] for f in fs]  # process 0's shifted side has no earlier partner
        runs = [f[f["role"] == "u"] for f in fs if (f["role"] == "u").any()]
        fl = floor_rows(runs, kind, device_name)
        fl["source"] = ", ".join(x for x in (f"bench/compare_real.py {time.strftime('%Y-%m-%d')}",
                                             f"{len(runs)} separate processes", source) if x)
        floors.append(fl)
        out_frames.extend(fs)
    return out_frames, floors


# ---------------------------------------------------------------------------- recompute

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


def recompute_frames(raw: pd.DataFrame, *, min_effect: float = 0.01, warmup: int = 1, floor=None,
                     use_rounds: int = 0, use_reps: int = 0) -> dict:
    """The comparisons' rates per kind and ``"overall"`` (:func:`rates`) from recorded sides, each side
    back as a scaling frame: consecutive unshifted sides as nulls, side i against its shifted twin as
    shifts; ``use_rounds`` / ``use_reps`` (0: all) as in :func:`subsample`."""
    from ..schema import frame

    raw = subsample(raw, use_rounds, use_reps)
    kw = {"min_effect": min_effect, "floor": floor}
    out, rows = {}, []
    for kind, g in raw.groupby("kind", sort=False):
        name = str(g["device_name"].iloc[0])

        def sides(role):  # "gemm@process" is gemm work: its floor is gemm's
            rows = g[g["role"] == role].assign(workload=cast(str, kind).split("@")[0], requested_sm_count=g["sm_count"])
            return [frame(d.to_dict("records"), "scaling",
                          {"device_name": name, "run_id": str(d["run_id"].iloc[0]), "warmup": warmup})
                    for _, d in rows.groupby("side", sort=True)]
        u, s = sides("u"), sides("s")
        r = [x for i in range(1, len(u)) for x in judge(u[i - 1], u[i], kind, "null", i, **kw)]
        r += [x for i, (a, b) in enumerate(zip(u, s)) for x in judge(a, b, kind, "shift", i, **kw)]
        out[kind] = rates(pd.DataFrame(r))
        rows.extend(r)
    out["overall"] = rates(pd.DataFrame(rows))
    return out


# ------------------------------------------------------------------- compare until decided

class RanOut(Exception):
    """A replayed side has no further recorded run."""


def logged(measure, log: list, tag: str, what: str = ""):
    """``measure(sizes) -> frame`` that also appends each frame it returns to ``log``, labelled with
    ``tag`` (the pair and side, ``"0a"``), ``what`` (``"null"`` or ``"shift"``) and ``call`` (that side's
    how many-th run): the log :func:`run_pairs` reads and a recording's ``until_raw.parquet`` holds."""
    def wrapped(sizes):
        df = measure(sizes)
        log.append(df.assign(tag=tag, what=what, call=sum(1 for x in log if x["tag"].iloc[0] == tag)))
        return df
    return wrapped


def replayer(raw: pd.DataFrame, tag: str, log: list):
    """``measure(sizes)`` over a recorded side: its next recorded run, at the sizes asked for that
    it measured (a size it did not measure then keeps its earlier runs only)."""
    calls = [d.drop(columns=["tag", "call", "what"], errors="ignore")
             for _, d in raw[raw["tag"] == tag].groupby("call", sort=True)]

    def measure(sizes):
        n = sum(1 for x in log if x["tag"].iloc[0] == tag)
        if n >= len(calls):
            raise RanOut(tag)
        df = calls[n]
        if sizes is not None:  # what measurer() would have measured: a partition size always
            total, smallest = int(raw["sm_count"].max()), int(raw["sm_count"].min())
            keep = [k for k in sizes if k < total] or [smallest]
            df = df[df["sm_count"].isin(keep + ([total] if total in sizes else []))]
        if df.empty:
            raise RanOut(tag)
        df = df.copy()
        df.attrs.update(kind="scaling", device_name=str(df["device_name"].iloc[0]))
        log.append(df.assign(tag=tag, call=n))
        return df
    return measure


def _verdicts(c) -> pd.Series:
    return c.table.loc[c.table["present"] == "both", "verdict"]


def run_pairs(order, make, max_runs: int, budget_s: float = 0.0, out: Path | None = None, floor=None, *,
              echo=None) -> list[dict]:
    """compare_until_decided on each (what, shift) of ``order``; ``make(i, side, shift, log)`` gives a
    side's measure callable (:func:`logged`). One record per pair (a replayed pair that ran out is left out);
    ``echo(line)`` is told each record and what was left out (a script passes ``print``); ``out``: the
    log is written to ``out/until_raw.parquet`` after every pair."""
    say = echo or (lambda line: None)
    log: list[pd.DataFrame] = []
    pairs, t0 = [], time.perf_counter()
    for i, (what, shift) in enumerate(order):
        if budget_s and time.perf_counter() - t0 > budget_s:
            say(f"budget of {budget_s} s spent after {i} pairs")
            break
        try:
            c = compare_until_decided(make(i, "a", 0.0, log), make(i, "b", shift, log), max_runs=max_runs, floor=floor)
        except RanOut as e:
            say(f"pair {i}: the recording has no further run of side {e}; left out")
            continue
        sides = {t: [d for d in log if d["tag"].iloc[0] == t] for t in (f"{i}a", f"{i}b")}
        first = compare(sides[f"{i}a"][0], sides[f"{i}b"][0], floor=floor)  # the first run alone
        v, v1 = _verdicts(c), _verdicts(first)
        pairs.append({"pair": i, "what": what, "rows": len(v), "runs_per_side": c.settings["runs_per_side"],
                      "verdicts": v.value_counts().to_dict(), "first_run_verdicts": v1.value_counts().to_dict(),
                      "looks": c.settings["looks"], "gpu_ms": sum(gpu_ms(d) for s in sides.values() for d in s),
                      "gpu_ms_one_run": sum(gpu_ms(s[0]) for s in sides.values()),
                      "floor": c.settings["floor_text"], "ratio_median": float(c.table["ratio"].median())})
        say(json.dumps(pairs[-1], default=str))
        if out is not None:  # kept if stopped later
            sides_so_far = pd.concat(log, ignore_index=True)
            atomic_write(Path(out) / "until_raw.parquet", sides_so_far.to_parquet)
    return pairs


def summarize(pairs: list[dict]) -> dict:
    """Per ``"null"`` and ``"shift"``: the pairs and rows, the FAST/SLOW and SLOW shares after the looks
    and of the first run alone, the runs per side used and the GPU time against one run per side."""
    summary = {}
    for what in ("null", "shift"):
        ps = [p for p in pairs if p["what"] == what]
        rows = sum(p["rows"] for p in ps)
        if not rows:
            continue
        count = lambda key, vs: sum(p[key].get(x, 0) for p in ps for x in vs)  # noqa: E731
        summary[what] = {"pairs": len(ps), "rows": rows,
                         "fast_slow": count("verdicts", ("FAST", "SLOW")) / rows,
                         "slow": count("verdicts", ("SLOW",)) / rows,
                         "first_run_fast_slow": count("first_run_verdicts", ("FAST", "SLOW")) / rows,
                         "first_run_slow": count("first_run_verdicts", ("SLOW",)) / rows,
                         "runs_per_side_mean": float(np.mean([p["runs_per_side"] for p in ps])),
                         "gpu_x_one_run": float(sum(p["gpu_ms"] for p in ps) / sum(p["gpu_ms_one_run"] for p in ps))}
    return summary


def what_of(raw: pd.DataFrame, path: str, i: int) -> str:
    """"null" or "shift" for recorded pair ``i``: its rows' ``what``, else the recording's summary.json."""
    if "what" in raw.columns:
        return str(raw.loc[raw["tag"] == f"{i}b", "what"].iloc[0])
    pairs = json.loads((Path(path).parent / "summary.json").read_text())["pairs"]
    return next(p["what"] for p in pairs if p["pair"] == i)


def replay(path, *, max_runs: int, run_sd: float | None = None, use_rounds: int = 0, echo=None) -> dict:
    """The decisions of a recorded ``until_raw.parquet`` again, with other settings (no GPU): at most
    ``max_runs`` runs per side, the card's shipped floor (its run part ``run_sd`` where given), only
    each run's first ``use_rounds`` rounds (0: all). Returns the settings and :func:`summarize`'s
    numbers, each with ``gpu_x_recorded_run`` (GPU time against one recorded run per side)."""
    full = pd.read_parquet(path)
    raw = full[full["round"] < use_rounds] if use_rounds else full  # a cheaper run, from the same
    floor = None
    if run_sd is not None:
        f = S.run_floor(device_name=str(raw["device_name"].iloc[0]), workloads=raw["workload"].astype(str))
        floor = S.Floor(f.round_sd, run_sd, f"{f.source}, run part {run_sd:.2%} given")
    order = [(what_of(raw, path, i), 0.0) for i in sorted({int(t[:-1]) for t in raw["tag"]})]
    pairs = run_pairs(order, lambda i, side, shift, log: replayer(raw, f"{i}{side}", log), max_runs, 0.0,
                      None, floor, echo=echo)
    one = {t: gpu_ms(d.drop(columns=["tag", "call", "what"], errors="ignore"))
           for t, d in full[full["call"] == 0].groupby("tag")}  # each side's first run as recorded
    summary = summarize(pairs)
    for what in summary:  # GPU time against one recorded run per side (all its rounds)
        ps = [p for p in pairs if p["what"] == what]
        summary[what]["gpu_x_recorded_run"] = sum(p["gpu_ms"] for p in ps) / sum(
            one[f"{p['pair']}{x}"] for p in ps for x in "ab")
    return {"max_runs": max_runs, "run_sd": run_sd, "use_rounds": use_rounds, **summary}
