"""Does the predictor take the plateau into account? Its misses on recorded pairs, on and off the plateau sizes.

``python3 bench/predict_plateau.py [--out DIR] [--extra PROFILES=SWEEPS.parquet ...]`` (no GPU). The solo curve
is the profile's median per measured size, so it carries a plateau (sizes whose time does not fall as SMs
grow, ``gcexplore.fit_table``) wherever it was measured; ``plateau_residuals`` says whether the predicted
solo time there is the plateau's and whether the largest per-workload misses on a measured sweep fall at
plateau sizes. Prints, per recorded profile set (``predict_profiles``, H100; ``predict_profiles_h200``), each
workload's plateaus; then for the recorded ``predict_sweep`` against ``predict_profiles`` (and each ``--extra``
pair, e.g. ``predict_profiles_h200=tests/data/predict_sweeps_h200.parquet``) the residuals per (layout,
workload), the facts and the sentence the guide carries. ``--out``: ``plateaus.csv``, ``residuals.csv``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

import gcexplore as gx
from gcexplore.prediction.check import plateau_residuals, plateau_sentence


def plateaus(name: str) -> pd.DataFrame:
    """Per workload and profile position of a recorded profile set: its plateaus and the SMs they waste."""
    prof = gx.load_recorded(name)
    rows = []
    for pos in ("first", "last"):
        t = gx.fit_table(prof[prof["position"] == pos])
        for (w, pid), g in t[t["on_plateau"]].groupby(["workload", "plateau"]):
            rows.append({"profiles": name, "workload": w, "position": pos, "from_sm": int(g["sm_count"].min()),
                         "to_sm": int(g["sm_count"].max()), "median_ms": float(g["median_ms"].iloc[0]),
                         "wasted_sms": int(g["wasted_sms"].max())})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="folder for plateaus.csv and residuals.csv")
    ap.add_argument("--extra", action="append", default=[], metavar="PROFILES=SWEEPS",
                    help="a recorded profile set and a sweeps file of runs to check beside predict_sweep")
    args = ap.parse_args(argv)
    pd.set_option("display.width", 200)
    pl = pd.concat([plateaus(n) for n in ("predict_profiles", "predict_profiles_h200")], ignore_index=True)
    print("== plateaus of the recorded solo curves (gcexplore.fit_table per profile position)")
    print(pl.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    pairs = [("predict_profiles", gx.load_recorded("predict_sweep"))]
    for spec in args.extra:
        name, sep, path = spec.partition("=")
        if not sep:
            ap.error(f"--extra takes PROFILES=SWEEPS.parquet, got {spec!r}")
        pairs.append((name, gx.load(path)))
    res = []
    for name, sweeps in pairs:
        r = plateau_residuals(gx.load_recorded(name), sweeps)
        f = r.attrs["facts"]
        print(f"\n== {name} against {f['runs']} run(s) ({', '.join(r.attrs['runs'][:6])}"
              f"{', ...' if f['runs'] > 6 else ''}); skipped (a workload not profiled): {len(r.attrs['skipped_runs'])}")
        worst = r.reindex(r["residual"].abs().sort_values(ascending=False).index).head(12)
        print(worst[["run_id", "layout", "workload", "sm_count", "on_plateau", "alone_ms", "predicted_ms",
                     "measured_ms", "residual"]].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        print("facts:", {k: (round(v, 4) if isinstance(v, float) else v) for k, v in f.items()})
        print("sentence:", plateau_sentence(r))
        res.append(r.assign(profiles=name))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        pl.to_csv(args.out / "plateaus.csv", index=False)
        pd.concat(res, ignore_index=True).to_csv(args.out / "residuals.csv", index=False)
        print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
