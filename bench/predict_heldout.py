"""The interval's margins calibrated on many recorded runs and judged on runs whose pairs set none of them.

``python3 bench/predict_heldout.py HOST:RUN_DIR[:TRAFFIC_DIR] ...`` (no GPU; bench/predict.py's --out folders):
the shipped model's terms (``gcexplore/data/predict_profiles`` attrs["fit"]) predict every recorded pair of each
run from that run's own profiles (counted traffic from the run, else from TRAFFIC_DIR); then, per rule of
``prediction_check.MARGIN_RULES``, each host is left out in turn: the margins come from the other hosts' pairs
(``prediction_check.held_out_coverage``) and the coverage is counted on the left-out host's checked-only pairs (every
group but fitted / fitted4). Left out of the calibration: the pairs the shipped terms were fitted on
(``--fitted-run``'s FITTED) and, with ``--one-buffer HOST,...``, memory_a+memory_b of those hosts (batches before
h2 handed both triads one buffer). ``--calibrate checked`` calibrates on checked-only pairs only. ``--judge HOST:RUN``
(repeatable) adds runs that calibrate nothing: the margins from every other run are judged on them alone.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import gcexplore as gx
from gcexplore.prediction import check as PC
from gcexplore.prediction import traffic_profile as TP
from gcexplore.prediction.fit import COPY_BYTES, GROUPS, members

FIT_GROUPS = ("fitted", "fitted4")


def _run_errors(run: Path, traffic: Path | None, kw: dict) -> pd.DataFrame:
    prof = gx.load_profiles(run / "profiles.parquet")
    src = run if (run / "traffic.parquet").exists() else traffic
    if src is not None:
        prof = TP.attach_traffic(prof, pd.read_parquet(src / "traffic.parquet"))
    prof = TP.with_traffic_columns(prof)
    if prof["probe_copy_bytes"].isna().all():  # batch f1 did not record it: the default copy's
        prof["probe_copy_bytes"] = np.where(prof["probe_ms"].notna(), COPY_BYTES, np.nan)
    cases, meta = [], []
    for group, pairs in GROUPS:
        for pair, names in pairs.items():
            path = run / f"sweep_{pair}.parquet"
            if path.exists() and members(names) <= set(prof["workload"]):
                cases.append((prof, names, gx.load(path)))
                meta.append((group, pair))
    e = PC.layout_errors(cases, **kw)
    e["group"] = e["_case"].map(lambda i: meta[i][0])
    e["pair"] = e["_case"].map(lambda i: meta[i][1])
    return e


def _spec(text: str) -> tuple[str, Path, Path | None]:
    host, _, rest = text.partition(":")
    run, _, traffic = rest.partition(":")
    if not host or not run:
        raise SystemExit(f"expected HOST:RUN_DIR[:TRAFFIC_DIR], got {text!r}")
    return host, Path(run), Path(traffic) if traffic else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="HOST:RUN_DIR[:TRAFFIC_DIR]")
    ap.add_argument("--judge", action="append", default=[], help="HOST:RUN_DIR[:TRAFFIC_DIR] that calibrates nothing")
    ap.add_argument("--fitted-run", default=None, help="the run the shipped terms were fitted on (its FITTED pairs "
                                                       "calibrate nothing)")
    ap.add_argument("--one-buffer", default="", help="hosts whose memory_a+memory_b shared one buffer (comma-separated)")
    ap.add_argument("--calibrate", choices=("all", "checked"), default="all")
    ap.add_argument("--quantile", type=float, default=0.9)
    args = ap.parse_args(argv)
    fit = gx.load_recorded("predict_profiles").attrs["fit"]
    kw = {k: v for k, v in PC.predict_kwargs(fit).items() if k != "model_error"}
    frames = []
    for i, text in enumerate([*args.runs, *args.judge]):
        host, run, traffic = _spec(text)
        e = _run_errors(run, traffic, kw)
        frames.append(e.assign(host=host, run=str(run), judge_only=i >= len(args.runs),
                               _case=str(run) + ":" + e["pair"]))
    e = pd.concat(frames, ignore_index=True)
    e["checked"] = ~e["group"].isin(FIT_GROUPS)
    fitted = (e["run"] == str(Path(args.fitted_run))) & (e["group"] == "fitted") if args.fitted_run else False
    one = (e["pair"] == "memory_a+memory_b") & e["host"].isin([h for h in args.one_buffer.split(",") if h])
    e["calibrating"] = ~(fitted | one | e["judge_only"]) & (e["checked"] if args.calibrate == "checked" else True)
    rec = e[~e["judge_only"]]
    print(f"{rec['_case'].nunique()} recorded pairs of {rec['run'].nunique()} runs on {rec['host'].nunique()} hosts, "
          f"{int(e.loc[e['calibrating'], '_case'].nunique())} calibrating ({args.calibrate}); shipped terms {kw}")
    for rule in PC.MARGIN_RULES:
        t = PC.held_out_coverage(rec, "host", judged="checked", calibrating="calibrating", rule=rule,
                                 quantile=args.quantile)
        print(f"\nrule {rule!r}, leave-one-host-out: the checked-only layouts of each host inside the margins of the "
              f"others: pooled {t.attrs['coverage']:.2%} (goal >= {args.quantile:.0%}; the measured median inside "
              f"them: {t.attrs['coverage_strict']:.2%})")
        with pd.option_context("display.width", 200, "display.float_format", "{:.4f}".format):
            print(t.to_string(index=False))
        m = PC.margins_of(e[e["calibrating"]], rule=rule, quantile=args.quantile)
        print(f"from every calibrating pair: below / above {m['model_error'][0]:.4f} / {m['model_error'][1]:.4f} "
              f"({m['pairs']} pairs)")
        for run, g in e[e["judge_only"] & e["checked"]].groupby("run", sort=False):
            hit = ((g["predicted_low_ms"] * (1 - m["model_error"][0]) <= g["measured_high_ms"])
                   & (g["measured_low_ms"] <= g["predicted_high_ms"] * (1 + m["model_error"][1])))
            print(f"  judged on {run} (calibrated nothing): {hit.mean():.2%} of {len(g)} checked-only layouts "
                  f"({g['_case'].nunique()} pairs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
