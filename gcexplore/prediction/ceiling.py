"""How far any model built from each workload alone can go: ceilings of the predicted best split.

``bench/predict_ceiling.py RUN_DIR ...`` prints :func:`ceilings` (no GPU; bench/predict.py's --out folders).
Every recorded pair of each run is predicted from that run's own profiles with the shipped terms; each workload's
log slowdown beside its co-runner (measured against the predicted one) is then replaced by what a stronger model
could know, and the predicted best split (checked-only pairs, within 3% of the measured best) counted again:

- *other runs*: the same pair's slowdowns measured in the other runs (how well a best split reproduces);
- *separable, fitted on the pairs scored*: the shipped prediction times exp(sum of rank terms s_V(k) a_O(k')), one
  sensitivity per workload and size and one effect per co-runner and size, fitted by least squares on every pair,
  the scored ones included: no model that gives each workload its own numbers (which is all a solo profile, however
  many probes beside however many references, can give) does better on these pairs without seeing them;
- *from the references' pairs*: the same terms fitted only on the pairs with a reference workload (``--references``:
  full sweeps beside each, far more than any probe), scored on the pairs between the others, beside the shipped
  model on those pairs.
"""

from __future__ import annotations

from typing import Any, cast

from pathlib import Path

import numpy as np
import pandas as pd

from ..results.io import load
from ..results.run import run_of
from .fit import ALL, FITS, members, run_profiles
from .model import PreparedProfiles, predict

GAP = 0.03  # the "predicted best within 3% of the measured best"


def pair_table(run: Path, kw: dict) -> pd.DataFrame:
    """Per pair, layout and workload of one bench/predict.py run: predicted, measured and alone durations."""
    prof = run_profiles(run)
    have, rows, ready = set(prof["workload"]), [], PreparedProfiles(prof)  # read once for every pair
    for pair, names in ALL.items():
        path = run / f"sweep_{pair}.parquet"
        if not path.exists() or len(members(names)) < 2 or not members(names) <= have:
            continue
        sweep, pred = load(path), predict(ready, names, **kw)
        conc = sweep[sweep["mode"] == "concurrent"]
        meas = conc.groupby(["layout", "workload"])["duration_ms"].median()
        span = run_of(sweep).rep_makespans("concurrent").groupby("layout")["makespan_ms"].median()
        size = pred.set_index(["layout", "workload"])["sm_count"]
        r: Any  # a row: its fields are the columns' values (pandas-stubs types each as any scalar)
        for r in pred.itertuples():
            other = next(n for n in pred["workload"].unique() if n != r.workload)
            rows.append({"run": str(run), "pair": pair, "checked": pair not in FITS, "layout": r.layout,
                         "victim": r.workload, "other": other, "k": int(r.sm_count),
                         "k_other": int(size[r.layout, other]), "predicted_ms": r.duration_ms,
                         "measured_ms": float(meas[r.layout, r.workload]), "alone_ms": r.alone_ms,
                         "makespan_ms": float(span[r.layout])})
    return pd.DataFrame(rows)


def best_gaps(df: pd.DataFrame, predicted) -> pd.DataFrame:
    """Per run and pair: the measured makespan of the layout whose predicted makespan (the larger of ``predicted``,
    per row) is lowest, against the measured best (``gap``), and the median |error| of the predicted makespan."""
    d = df.assign(p=np.asarray(predicted, dtype=float))
    out = []
    for (run, pair), g in d.groupby(["run", "pair"], sort=False):
        lay = g.groupby("layout").agg(m=("makespan_ms", "first"), p=("p", "max"))
        out.append({"run": run, "pair": pair, "gap": float(lay["m"][lay["p"].idxmin()] / lay["m"].min() - 1),
                    "error": float(np.median(np.abs(lay["p"] / lay["m"] - 1)))})
    return pd.DataFrame(out)


def separable_fit(df: pd.DataFrame, target, rank: int = 1, visible=None, lam: float = 1e-3,
                  iters: int = 60) -> np.ndarray:
    """Least-squares ``target ~ sum_r s_r(victim, k) a_r(other, k_other)`` (alternating, ridge ``lam``) on the
    ``visible`` rows (default all); the fitted value of every row (0 where a factor was never seen)."""
    y = np.asarray(target, dtype=float)
    vis = np.ones(len(df), bool) if visible is None else np.asarray(visible, bool)
    vi, nv = pd.factorize(pd.MultiIndex.from_arrays([df["victim"], df["k"]]))
    oi, no = pd.factorize(pd.MultiIndex.from_arrays([df["other"], df["k_other"]]))
    rng = np.random.default_rng(0)
    S, A = rng.normal(0, 0.1, (len(nv), rank)), rng.normal(0, 0.1, (len(no), rank))
    for _ in range(iters):
        for M, idx, other, oidx in ((S, vi, A, oi), (A, oi, S, vi)):
            X = other[oidx]
            for j in range(len(M)):
                m = (idx == j) & vis
                M[j] = np.linalg.solve(X[m].T @ X[m] + lam * np.eye(rank), X[m].T @ y[m]) if m.any() else 0.0
    return (S[vi] * A[oi]).sum(axis=1)


def _cross_run(df: pd.DataFrame) -> np.ndarray:
    """Each row's duration from the median log slowdown of the same pair, layout and workload in the other runs."""
    s = cast(pd.Series, np.log(df["measured_ms"] / df["alone_ms"]))  # a ufunc keeps the Series
    out = np.full(len(df), np.nan)
    key = ["pair", "layout", "victim"]
    for run in df["run"].unique():
        here = (df["run"] == run).to_numpy()
        others = s[~here].groupby([df.loc[~here, c] for c in key]).median()
        idx = pd.MultiIndex.from_frame(df.loc[here, key])
        out[here] = df.loc[here, "alone_ms"].to_numpy() * np.exp(others.reindex(idx).to_numpy())
    return out


def _line(name: str, g: pd.DataFrame) -> dict:
    worst = g.groupby("run")["error"].max()
    return {"model": name, "pair-runs": len(g), "best within 3%": int((g["gap"] <= GAP).sum()),
            "share": float((g["gap"] <= GAP).mean()), "worst pair per run": f"{worst.min():.3f}-{worst.max():.3f}",
            "runs worst <= 8%": f"{int((worst <= 0.08).sum())}/{len(worst)}"}


def ceilings(df: pd.DataFrame, references: list[str]) -> pd.DataFrame:
    """The table ``bench/predict_ceiling.py`` prints (checked-only pairs)."""
    resid = np.log(df["measured_ms"] / df["predicted_ms"])
    pred = df["predicted_ms"].to_numpy()
    chk = df.groupby(["run", "pair"], sort=False)["checked"].first().to_numpy()
    rows = [_line("shipped model", best_gaps(df, pred)[chk]),
            _line("the same pair's other runs", best_gaps(df, _cross_run(df))[chk])]
    for r in (1, 2):
        fitted = pred * np.exp(separable_fit(df, resid, rank=r))
        rows.append(_line(f"separable rank {r}, fitted on the pairs scored", best_gaps(df, fitted)[chk]))
    near = (df["victim"].isin(references) | df["other"].isin(references)).to_numpy()
    rest = ~df.groupby(["run", "pair"], sort=False)["victim"].agg(lambda v: bool(set(v) & set(references))).to_numpy()
    for r in (1, 2):
        fitted = pred * np.exp(separable_fit(df, resid, rank=r, visible=near, lam=0.1))
        rows.append(_line(f"separable rank {r} from the references' pairs", best_gaps(df, fitted)[chk & rest]))
    rows.append(_line("shipped model on those pairs", best_gaps(df, pred)[chk & rest]))
    return pd.DataFrame(rows)
