"""One owner of a run's per-repetition makespans and of its card's noise floor.

``Run.rep_makespans`` (gcexplore.results.run) gives one makespan per (layout, mode, round, repetition);
compare's samples, the overlap bound's work rates and the tuner's GPU time read it, and give the numbers
they gave when each grouped the rows itself (the reference groupings below are those of before). Every
floor lookup outside the table's own reader goes through ``run_floor``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gcexplore as gx
from gcexplore.analysis import comparison, overlap, stats, tuning
from gcexplore.results import run as R

import _synthetic as S

ROOT = Path(__file__).resolve().parents[1]


def _two_rounds():
    df = S.sweep_df(splits=[8, 64], repeats=6)
    df["round"] = (df["rep"] >= 3).astype(int)
    df.attrs.update(warmup=3, warmup_later_modes=1, modes=["alone", "concurrent", "sequential", "streams"],
                    warmup_later_rounds=[1, 0, 0, 0])
    return df


def _results():
    return [gx.load_recorded("sweep"), gx.load_recorded("sweep_twice"), _two_rounds()]


def _gpu_time_before(df: pd.DataFrame) -> float:
    """gpu_time_ms as it grouped the rows itself before the run owned the makespans."""
    keys = [c for c in ("layout", "mode", "step") if c in df.columns]
    keys += ["round"] if "round" in df.columns else []
    per_rep = df.groupby([*keys, "rep"], sort=False)["makespan_ms"].max()
    warm = int(df.attrs.get("warmup", 0) or 0)
    medians = per_rep.groupby(level=list(range(len(keys))), sort=False).median()
    modes = list(df.attrs.get("modes") or dict.fromkeys(df["mode"]))
    later = int(df.attrs.get("warmup_later_modes", warm))
    counts = np.array([warm if m == modes[0] else later for m in medians.index.get_level_values("mode")])
    again = df.attrs.get("warmup_later_rounds")
    if "round" in keys and isinstance(again, (list, tuple)) and len(again) == len(modes):
        per_mode = dict(zip(modes, (int(n) for n in again)))
        calls = set(df.attrs.get("warmup_calls") or ())
        idx = medians.index
        again_counts = [per_mode.get(m, later) + int(m == modes[0] and lay in calls)
                        for lay, m in zip(idx.get_level_values("layout"), idx.get_level_values("mode"))]
        counts = np.where(idx.get_level_values("round") > 0, again_counts, counts)
    return float(per_rep.sum() + (medians.to_numpy() * counts).sum())


@pytest.mark.parametrize("which", [0, 1, 2], ids=["sweep", "sweep_twice", "two_rounds"])
def test_compare_overlap_bound_and_gpu_time_read_the_owners_makespans(which):
    df = _results()[which]
    per = R.run_of(df).rep_makespans()
    assert {"layout", "mode", "round", "rep", "makespan_ms"} <= set(per.columns)
    # compare's samples: the owner's makespans, in its order, each with its run and round
    samples = comparison._samples(df, "overlap")
    assert np.array_equal(samples["value"].to_numpy(), per["makespan_ms"].to_numpy())
    assert list(samples["layout"]) == list(per["layout"]) and list(samples["group"]) == list(per["mode"])
    assert list(samples["round"]) == [f"{r}/{k}" for r, k in zip(per["run_id"], per["round"])]
    # before: one row per (run_id, layout, mode, rep), the largest makespan, the mean clock
    before = df.assign(_c=comparison._clock(df)).groupby(["run_id", "layout", "mode", "rep"], sort=False).agg(
        v=("makespan_ms", "max"), c=("_c", "mean"))
    assert np.array_equal(samples["value"].to_numpy(), before["v"].to_numpy())
    assert np.allclose(samples["clock"].to_numpy(), before["c"].to_numpy(), equal_nan=True)
    # the bound's per-repetition work rates
    work = overlap.rep_work(df, "bytes")
    assert np.array_equal(work["makespan_ms"].to_numpy(), per["makespan_ms"].to_numpy())
    old = df.groupby(["run_id", "layout", "mode", "rep"], sort=False).agg(w=("bytes", "sum"))
    assert np.array_equal(work["work"].to_numpy(), old["w"].to_numpy())
    # the GPU time: the same number as when it grouped the rows itself (one run at a time)
    for _, one in df.groupby("run_id", sort=False):
        one.attrs = dict(df.attrs)
        assert tuning.gpu_time_ms(one) == pytest.approx(_gpu_time_before(one), rel=1e-12)


def test_the_three_follow_the_owner(monkeypatch):
    """Doubling what the owner returns doubles what the three read: none groups the rows on its own."""
    df = _two_rounds()
    samples, work, gpu = comparison._samples(df, "overlap"), overlap.rep_work(df, "bytes"), tuning.gpu_time_ms(df)
    real = R.Run.rep_makespans

    def doubled(self, mode=None):
        out = real(self, mode).copy()
        out["makespan_ms"] *= 2
        return out

    monkeypatch.setattr(R.Run, "rep_makespans", doubled)
    fresh = df.copy()  # a new token: nothing memoised
    fresh.attrs = dict(df.attrs)
    assert np.allclose(comparison._samples(fresh, "overlap")["value"], 2 * samples["value"])
    assert np.allclose(overlap.rep_work(fresh, "bytes")["makespan_ms"], 2 * work["makespan_ms"])
    assert tuning.gpu_time_ms(fresh) == pytest.approx(2 * gpu)


def test_the_noise_floor_is_looked_up_through_run_floor_only():
    """No module but the table's own (analysis/stats.py) calls noise_floor: every reader asks run_floor."""
    callers = []
    for path in sorted((ROOT / "gcexplore").rglob("*.py")):
        if path.name == "stats.py" and path.parent.name == "analysis":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if name == "noise_floor":
                    callers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert callers == []


def test_run_floor_of_a_frame_and_of_a_card_agree():
    df = gx.load_recorded("sweep")
    card, names = str(df["device_name"].iloc[0]), sorted(set(df["workload"].astype(str)))
    assert stats.run_floor(df) == stats.noise_floor(card, names)
    assert stats.run_floor(device_name=card, workloads=reversed(names)) == stats.run_floor(df)
