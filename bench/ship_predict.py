"""Ship bench/predict.py's GPU output as recorded results (no GPU; real GPU output only).

``python3 bench/ship_predict.py DIR`` reads DIR (``bench/predict.py --out DIR`` after its
traffic and measure stages) and writes to ``gcexplore/data/``:

- ``predict_profiles.parquet``: every workload's solo profile with its counted traffic
  attached (``bytes_source`` says measured / declared), and in ``attrs["fit"]`` the model
  fitted on the *fitted* pairs (sharing rule, interval margins, their coverage);
- ``predict_sweep.parquet``: the concurrent-only sweep of the CuPy FFT beside the bf16
  convolution (a recorded result of its own: one pair);

and to ``tests/data/predict_sweeps.parquet`` the sweeps of every pair, one frame with a
``pair`` column and ``attrs["pairs"]`` ({pair: {"workloads": [as for predict], "group":
"fitted", "checked", "fresh", "fresh2" or "confirm"}}), which the tests check the calibrated interval on.

So ``predict``, ``predict_error`` and ``plot_predict`` run offline (README). ``--sweeps-only GROUPS
--suffix _f1`` ships only another run's pair sweeps (``tests/data/predict_sweeps_f1``: pairs the shipped
profiles and fit are judged on across runs). ``--margins-from RUN,RUN --traffic DIR`` re-calibrates only
the shipped fit's interval margins on those runs' fitted pairs (``--margins-pairs checked``: their checked-only pairs;
``--margins-rule risk``: prediction_check's "risk" rule) (the model's terms kept). ``--suffix _h200``
ships another card's run beside it (``predict_profiles_h200``, ``tests/data/predict_sweeps_h200``;
no ``predict_sweep``): the cross-card check's second side. ``--strict-margins SWEEPS,...`` (no GPU; e.g. the
shipped ``tests/data/predict_sweeps.parquet,tests/data/predict_sweeps_f1.parquet,tests/data/predict_sweeps_k2.parquet``)
widens the shipped margins until 90% of a new pair's measured medians lie inside the interval, calibrated on those
runs' checked-only pairs (:func:`gcexplore.prediction.fit.calibrate_strict`), and records both counts per run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

import gcexplore as gx
from gcexplore.prediction.fit import calibrate_shipped, calibrate_strict, fit_run, run_profiles, run_sweeps, shipped_fit

DATA = Path(__file__).resolve().parents[1] / "gcexplore" / "data"


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", help="bench/predict.py's --out folder")
    ap.add_argument("--data", default=str(DATA), help="where to write (default: gcexplore/data)")
    ap.add_argument("--suffix", default="", help="names' suffix for a second card's run (e.g. _h200)")
    ap.add_argument("--sweeps-only", default=None, metavar="GROUPS",
                    help="only tests/data/predict_sweeps<suffix> of these groups (comma-separated): another "
                         "run's pairs that the shipped profiles and fit are judged on")
    ap.add_argument("--margins-from", action="store_true",
                    help="re-calibrate only the shipped fit's interval margins (the model's terms kept) on the "
                         "FITTED pairs of SRC (comma-separated run folders, each with its own profiles)")
    ap.add_argument("--traffic", default=None, help="with --margins-from: the folder whose traffic.parquet to attach")
    ap.add_argument("--margins-rule", default="pairs", choices=("pairs", "risk"),
                    help="with --margins-from: prediction_check.MARGIN_RULES (default fit_model's)")
    ap.add_argument("--margins-pairs", default="fitted", choices=("fitted", "checked"),
                    help="with --margins-from: calibrate on the FITTED pairs, or on every checked-only pair (every "
                         "group but fitted / fitted4: the pairs exchangeable with those the interval is judged on)")
    ap.add_argument("--margins-quantile", type=float, default=0.9,
                    help="with --margins-from: the coverage the margins promise (default 0.9)")
    ap.add_argument("--strict-margins", action="store_true",
                    help="SRC is comma-separated shipped pair sweeps (tests/data/predict_sweeps*.parquet): widen the "
                         "shipped margins to hold 90%% of medians counted strictly on their checked-only pairs")
    args = ap.parse_args(argv)
    src, data = Path(args.src), Path(args.data)
    if args.strict_margins:
        path = data / f"predict_profiles{args.suffix}.parquet"
        shipped = gx.load_profiles(path)
        runs = {Path(x).stem: gx.load(x) for x in args.src.split(",")}
        shipped.attrs["fit"] = fit = calibrate_strict(shipped, runs)
        gx.save_profiles(shipped, path)
        for run, c in fit["coverage_by_run"].items():
            print(f"{run}: {c['layouts']} layouts, the intervals meet in {c['inside'] / c['layouts']:.1%}, the "
                  f"measured median inside in {c['inside_strict'] / c['layouts']:.1%}")
        print(f"shipped margins below / above {fit['model_error'][0]:.4f} / {fit['model_error'][1]:.4f} (before "
              f"{fit['previous_model_error'][0]:.4f} / {fit['previous_model_error'][1]:.4f})")
        return 0
    if args.margins_from:
        fit = _margins_from([Path(x) for x in args.src.split(",")], data / f"predict_profiles{args.suffix}.parquet",
                            Path(args.traffic) if args.traffic else None, args.margins_rule, args.margins_pairs,
                            args.margins_quantile)
        print(f"shipped margins {fit['model_error']} (coverage {fit['coverage']:.1%}) from {len(fit['margins_from'])} "
              f"pairs of {len({m.partition(':')[0] for m in fit['margins_from']})} runs")
        return 0
    if args.sweeps_only:
        n = _ship_sweeps(src, args.suffix, set(args.sweeps_only.split(",")))
        print(f"shipped {n} pair sweeps of {src} as predict_sweeps{args.suffix}")
        return 0
    prof = run_profiles(src)
    prof.attrs["fit"] = shipped_fit(fit_run(src), src)
    gx.save_profiles(prof, data / f"predict_profiles{args.suffix}.parquet")
    sweeps = run_sweeps(src)
    _ship_sweeps(src, args.suffix)
    pairs = sweeps.attrs["pairs"]
    if args.suffix:
        print(f"shipped {prof['workload'].nunique()} profiles ({prof['device_name'].iloc[0]}) and {len(pairs)} sweeps")
        return 0
    one = sweeps[sweeps["pair"] == "fft+conv"].drop(columns="pair").reset_index(drop=True)
    one.attrs.update({k: v for k, v in sweeps.attrs.items() if k != "pairs"}, pair="fft+conv")
    gx.save(one, data / "predict_sweep.parquet")
    print(f"shipped {prof['workload'].nunique()} profiles and {len(pairs)} pair sweeps to {data}; "
          f"fit {prof.attrs['fit']}")
    return 0


def _margins_from(runs: list[Path], path: Path, traffic: Path | None, rule: str = "pairs",
                  pairs: str = "fitted", quantile: float = 0.9) -> dict:
    """The shipped profiles at ``path`` saved again with their margins re-calibrated on ``runs``
    (:func:`gcexplore.prediction.fit.calibrate_shipped`)."""
    shipped = gx.load_profiles(path)
    shipped.attrs["fit"] = fit = calibrate_shipped(shipped, runs, traffic, rule, pairs, quantile)
    gx.save_profiles(shipped, path)
    return fit


def _ship_sweeps(src: Path, suffix: str, groups: set[str] | None = None) -> int:
    sweeps = run_sweeps(src, groups)
    gx.save(sweeps, Path(__file__).resolve().parents[1] / "tests" / "data" / f"predict_sweeps{suffix}.parquet")
    return len(sweeps.attrs["pairs"])


if __name__ == "__main__":
    sys.exit(main())
