"""gcexplore.prediction.ceiling (bench/predict_ceiling.py prints it): the separable fit recovers what is separable and nothing else, and the best-split
count reads the measured makespan of the predicted best."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gcexplore.prediction import ceiling as C

NAMES = ["a", "b", "c", "d", "e", "f"]
SIZES = list(range(8, 128, 8))


def _table(pair_term: float, seed: int = 1) -> tuple[pd.DataFrame, np.ndarray]:
    """Every pair of six workloads at every split, its log slowdown s_V(k) a_O(k') plus ``pair_term`` times a
    number of the pair alone; the model predicted no slowdown."""
    rng = np.random.default_rng(seed)
    s = {(w, k): rng.uniform(0.2, 1.0) * (128 - k) / 128 for w in NAMES for k in SIZES}
    a = {(w, k): rng.uniform(0.0, 0.6) * k / 128 for w in NAMES for k in SIZES}
    rows, y = [], []
    for i, v in enumerate(NAMES):
        for o in NAMES[i + 1:]:
            bump = rng.normal(0, 1)
            for k in SIZES:
                for vic, oth, kv, ko in ((v, o, k, 128 - k), (o, v, 128 - k, k)):
                    if ko not in SIZES or kv not in SIZES:
                        continue
                    t = s[vic, kv] * a[oth, ko] + pair_term * bump * kv / 128
                    alone = 10.0 / kv
                    rows.append({"run": "r", "pair": f"{v}+{o}", "checked": True, "layout": f"{k}+{128 - k}",
                                 "victim": vic, "other": oth, "k": kv, "k_other": ko, "predicted_ms": alone,
                                 "measured_ms": alone * np.exp(t), "alone_ms": alone})
                    y.append(t)
    df = pd.DataFrame(rows)
    df["makespan_ms"] = df.groupby(["pair", "layout"])["measured_ms"].transform("max")
    return df, np.array(y)


def test_a_separable_slowdown_is_recovered_and_a_pair_specific_one_is_not():
    df, y = _table(0.0)
    fit = C.separable_fit(df, y, rank=1, lam=1e-9, iters=200)
    assert np.abs(fit - y).max() < 1e-3
    df2, y2 = _table(0.3)
    fit2 = C.separable_fit(df2, y2, rank=1, lam=1e-9, iters=200)
    assert np.abs(fit2 - y2).max() > 0.05  # one number per pair is not a product of the two workloads' numbers


def test_rows_never_seen_by_the_fit_get_no_correction():
    df, y = _table(0.0)
    hidden = (df["victim"] == "a").to_numpy()
    fit = C.separable_fit(df, y, rank=1, visible=~hidden, lam=1e-9)
    assert np.all(fit[hidden] == 0.0) and np.abs(fit[~hidden] - y[~hidden]).max() < 1e-2


def test_best_gaps_read_the_measured_makespan_of_the_predicted_best():
    df, _ = _table(0.0)
    exact = C.best_gaps(df, df["measured_ms"])
    assert (exact["gap"] == 0).all() and exact["error"].max() == pytest.approx(0.0, abs=1e-12)
    wrong = df["measured_ms"].where(df["layout"] != "8+120", 1e-3)  # says the most lopsided split is best
    gaps = C.best_gaps(df, wrong).set_index("pair")["gap"]
    for pair, g in df.groupby("pair"):
        m = g.groupby("layout")["makespan_ms"].first()
        assert gaps[pair] == pytest.approx(m["8+120"] / m.min() - 1) and gaps[pair] > 0
