"""Synthetic sweep results, for trying :func:`gcexplore.compare` and its error rates without a GPU (not
measurements: the frames say so in ``device_name``). Makespans per repetition are log-normal around a toy
curve, with round and run effects; the SM clock is recorded as the profiler records it (once per layout
and mode). ``bench/compare_stats.py`` draws them to print compare's error rates; the tests use them too."""

from __future__ import annotations

from typing import cast

import numpy as np
import pandas as pd

__all__ = ["MODES", "SYNTHETIC", "sweep", "typical_spread"]

SYNTHETIC = "synthetic GPU (not a measurement)"
MODES = ("alone", "concurrent", "sequential", "streams")


def typical_spread() -> float:
    """Median over the recorded H100 sweeps' (layout, mode) configurations of the standard
    deviation of log makespan over repetitions: this project's typical repetition spread."""
    from .io import load_recorded

    sds = []
    for name in ("sweep", "torch_sweep"):
        df = load_recorded(name)
        per = df.groupby(["layout", "mode", "rep"])["makespan_ms"].max()
        sds.append(cast(pd.Series, np.log(per)).groupby(level=["layout", "mode"]).std())
    return float(pd.concat(sds).median())


def sweep(seed: int, *, total: int = 132, step: int = 8, reps: int = 20, sigma: float = 0.0025,
          shift: float = 1.0, clock_mhz: float = 1980.0, workloads=("compute", "memory"), run_id=None,
          device_name: str = SYNTHETIC, modes=MODES, curve=None, rounds: int = 5, round_sigma: float = 0.002,
          run_sigma: float = 0.0) -> pd.DataFrame:
    """A sweep-shaped result: every layout ``k + (total - k)``, ``k`` in steps of ``step``.

    ``shift`` multiplies every makespan (a true effect); ``curve(fraction) -> ms`` sets the
    concurrent makespan (default: a bowl with its minimum at 60% of the SMs). The ``reps``
    repetitions fall in ``rounds`` rounds; each (layout, mode) moves by a log-normal factor of
    ``round_sigma`` per round and ``run_sigma`` per run (the run-to-run noise a single run's
    repetitions cannot see), ``sigma`` per repetition.
    """
    rng = np.random.default_rng(seed)
    per_round = [len(x) for x in np.array_split(np.arange(reps), rounds)]
    curve = curve or (lambda f: 1.0 + 4.0 * (f - 0.6) ** 2)
    rows = []
    for k in range(step, total, step):
        layout, f = f"{k}+{total - k}", k / total
        for mode in modes:
            base = curve(f) if mode == "concurrent" else {"alone": 1.2, "sequential": 1.5, "streams": 1.4}[mode]
            effect = np.repeat(rng.normal(0.0, round_sigma, rounds), per_round) + rng.normal(0.0, run_sigma)
            spans = base * shift * np.exp(rng.normal(0.0, sigma, reps) + effect)
            rnd = np.repeat(np.arange(rounds), per_round)
            for rep, span in enumerate(spans):
                for i, (wl, part, sm) in enumerate(((workloads[0], "p0", k), (workloads[1], "remainder", total - k))):
                    rows.append((layout, k, mode, rep, int(rnd[rep]), wl, part, sm, span * (0.9 if i else 0.8), span,
                                 clock_mhz))
    df = pd.DataFrame(rows, columns=["layout", "split_sm_count", "mode", "rep", "round", "workload", "partition",
                                     "sm_count", "duration_ms", "makespan_ms", "sm_clock_mhz"])
    df["start_ms"] = 0.0
    df["device_name"] = device_name
    df["run_id"] = run_id or f"synthetic-{seed}"
    df.attrs.update(kind="sweep", device_name=device_name, device_sm_count=total, repeats=reps, rounds=rounds,
                    run_id=df["run_id"].iloc[0], driver_version="13.0")
    return df
