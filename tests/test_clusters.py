"""Modes of a sample: separate clusters of repetitions are found, one cluster stays one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gcexplore.analysis import cluster_labels, group_modes, rep_mode, sample_modes


def test_two_clusters_far_apart_are_two_modes():
    rng = np.random.default_rng(1)
    waits = np.concatenate([rng.uniform(0.002, 0.005, 13), rng.uniform(1.30, 1.33, 7)])
    rng.shuffle(waits)
    m = sample_modes(waits)
    assert list(m["count"]) == [13, 7]
    assert m["median"].iloc[0] == pytest.approx(np.median(waits[waits < 1]))
    assert m["median"].iloc[1] == pytest.approx(np.median(waits[waits > 1]))
    labels = cluster_labels(waits)
    assert ((labels == 1) == (waits > 1)).all()  # in the input's order


@pytest.mark.parametrize("seed", range(20))
def test_unimodal_samples_stay_one_mode(seed):
    rng = np.random.default_rng(seed)
    for sample in (rng.normal(1.0, 0.05, 20), rng.lognormal(0.0, 0.3, 50), rng.uniform(1.0, 1.1, 8)):
        assert len(sample_modes(sample)) == 1


def test_a_lone_outlier_is_not_a_mode_and_equal_values_never_split():
    assert len(sample_modes([1.0] * 10 + [5.0])) == 1
    assert len(sample_modes([1.0, 1.0, 1.0, 1.0001, 1.0001])) == 1
    assert len(sample_modes([1.0, 1.0, 5.0, 5.0], min_count=2)) == 2


def test_bad_values_are_refused():
    with pytest.raises(ValueError, match="finite"):
        sample_modes([1.0, float("nan")])
    assert sample_modes([]).empty


def test_group_modes_and_the_mode_of_one_repetition():
    per_rep = pd.DataFrame({"layout": "8+8", "mode": "streams", "workload": ["a"] * 6 + ["b"] * 6,
                            "rep": list(range(6)) * 2,
                            "wait_ms": [0.01, 1.3, 0.01, 1.31, 0.02, 0.01] + [0.01] * 6,
                            "event_ms": [0.4, 1.7, 0.4, 1.7, 0.4, 0.4] + [1.0] * 6})
    m = group_modes(per_rep, "wait_ms", also=("event_ms",))
    a = m[m["workload"] == "a"]
    assert list(a["count"]) == [4, 2] and list(a["clusters"]) == [2, 2]
    assert a["reps"].iloc[1] == (1, 3) and a["event_ms_median"].iloc[1] == pytest.approx(1.7)
    assert len(m[m["workload"] == "b"]) == 1
    one = rep_mode(m, 1).set_index("workload")
    assert one.loc["a", "cluster"] == 1 and one.loc["a", "others"] == [(4, pytest.approx(0.01))]
    assert one.loc["b", "others"] == []
    with pytest.raises(ValueError, match="wait_ms"):
        group_modes(per_rep.drop(columns="wait_ms"), "wait_ms")
