"""Where the predictor misses, by co-runner: what each workload does to its neighbours, measured and predicted.

``python3 bench/predict_residuals.py RUN_DIR ...`` (no GPU; bench/predict.py's --out folders): the shipped model's
terms (``gcexplore/data/predict_profiles`` attrs["fit"]) predict every recorded pair of each run from that run's
own profiles; for every workload beside every co-runner with the workload on ``--sms`` SMs, the median over runs of
its log slowdown against alone, measured and predicted. Each co-runner's *index* is the least-squares scale of its
column against the DRAM-saturating triad's (``memory``: 1 by definition): one number for what it does to a
neighbour, as the card shows it and as the model says; a co-runner whose two indices differ is where the model's
terms, not the pair, are wrong. The predicted best split's misses (more than 3% above the measured best) are
listed per pair with the number of runs they happen in.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import gcexplore as gx
from gcexplore.prediction import check as PC
from gcexplore.prediction.fit import ALL, FITS, members, run_profiles


def _rows(run: Path, kw: dict) -> tuple[list[dict], list[dict]]:
    prof = run_profiles(run)
    have, rows, best = set(prof["workload"]), [], []
    for pair, names in ALL.items():
        path = run / f"sweep_{pair}.parquet"
        if not path.exists() or not members(names) <= have:
            continue
        sweep, pred = gx.load(path), gx.predict(prof, names, **kw)
        if pair not in FITS:
            f = gx.prediction_facts(pred, sweep)
            best.append({"run": str(run), "pair": pair, "gap": f["best_gap"], "predicted": f["predicted_best"],
                         "measured": f["measured_best"]})
        if len(members(names)) < 2:
            continue
        meas = sweep[sweep["mode"] == "concurrent"].groupby(["layout", "workload"])["duration_ms"].median()
        for r in pred.itertuples():
            other = next(n for n in names if n != r.workload)
            rows.append({"run": str(run), "victim": r.workload, "other": other, "sm_count": int(r.sm_count),
                         "measured": float(np.log(meas[r.layout, r.workload] / r.alone_ms)),
                         "predicted": float(np.log(r.duration_ms / r.alone_ms))})
    return rows, best


def _index(table: pd.DataFrame) -> pd.Series:
    """Each co-runner's scale against the triad's column, over the victims the triad slows by more than 5%."""
    ref = table["memory"]
    out = {}
    for col in table.columns:
        ok = table[col].notna() & ref.notna() & (ref.abs() > 0.05)
        if ok.sum() >= 3:
            out[col] = float((table.loc[ok, col] * ref[ok]).sum() / (ref[ok] ** 2).sum())
    return pd.Series(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="bench/predict.py --out folders")
    ap.add_argument("--sms", type=int, default=64, help="the victim's SMs (default 64)")
    args = ap.parse_args(argv)
    kw = PC.predict_kwargs(gx.load_recorded("predict_profiles").attrs["fit"])
    rows, best = [], []
    for run in args.runs:
        r, b = _rows(Path(run), kw)
        rows += r
        best += b
    df = pd.DataFrame(rows)
    df = df[df["sm_count"] == args.sms]
    idx = pd.DataFrame({k: _index(df.groupby(["victim", "other"])[k].median().unstack()) for k in ("measured",
                                                                                                  "predicted")})
    idx["predicted / measured"] = idx["predicted"] / idx["measured"]
    print(f"co-runner index (log slowdown of a neighbour on {args.sms} SMs, against the triad's = 1), "
          f"{len(args.runs)} runs, the shipped terms:")
    print(idx.sort_values("measured", ascending=False).to_string(float_format="{:.2f}".format))
    b = pd.DataFrame(best)
    miss = b[b["gap"] > 0.03].groupby("pair").agg(runs=("gap", "size"), mean_gap=("gap", "mean"),
                                                   predicted=("predicted", "first"), measured=("measured", "first"))
    print(f"\npredicted best within 3% of the measured best: {int((b['gap'] <= 0.03).sum())} of {len(b)} checked-only "
          f"pair-runs ({(b['gap'] <= 0.03).mean():.1%}); the misses:")
    print(miss.sort_values(["runs", "mean_gap"], ascending=False).to_string(float_format="{:.3f}".format))
    return 0


if __name__ == "__main__":
    sys.exit(main())
