"""The tuner on a real GPU agrees with a concurrent-only sweep of the same pair."""

from __future__ import annotations

import math

import pytest

import gcexplore
from gcexplore import analysis as A
from gcexplore import workloads as W
from gcexplore.schema import columns

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def pair_and_sweep():
    pair = {"compute": W.compute(), "memory": W.memory()}
    sweep = gcexplore.sweep(pair, modes=("concurrent",), repeats=10, warmup=2, progress=False)
    yield pair, sweep
    for w in pair.values():
        w.close()


def test_tune_agrees_with_a_sweep_on_the_builtin_pair(pair_and_sweep):
    pair, sweep = pair_and_sweep
    df = gcexplore.tune(pair, progress=False)
    ms = A.makespan_stats(sweep, "concurrent").set_index("layout")["median_ms"]
    answer = df.attrs["answer"]
    print(f"\ntuner {answer} ({len(A.tune_table(df))} layouts, GPU {A.gpu_time_ms(df):.0f} ms); sweep best "
          f"{ms.idxmin()} {ms.min():.4f} ms, tuned layout in the sweep {ms[answer]:.4f} ms "
          f"(GPU {A.gpu_time_ms(sweep):.0f} ms)")
    print("\n".join(df.attrs["reason"] + df.attrs["notes"]))
    assert ms[answer] <= ms.min() * 1.02
    assert list(df.columns) == columns("tune") and set(df["mode"]) == {"concurrent"}
    assert A.gpu_time_ms(df) < A.gpu_time_ms(sweep) / 3
    assert set(df.attrs["unmeasured"]) | set(df["layout"]) == set(ms.index)


def test_latency_target_agrees_with_the_sweep(pair_and_sweep):
    pair, sweep = pair_and_sweep
    conc = sweep[(sweep["mode"] == "concurrent") & (sweep["workload"] == "compute")]
    lat = conc.groupby("split_sm_count")["duration_ms"].median()
    slo = math.sqrt(lat[40] * lat[48])  # between two sizes: the sweep says 48
    df = gcexplore.tune(pair, slo_ms=slo, progress=False)
    print(f"\ntarget {slo:.4f} ms: tuner {df.attrs['answer']}, sweep {A.slo_split(sweep, slo)}")
    print("\n".join(df.attrs["reason"]))
    assert df.attrs["answer"] == A.slo_split(sweep, slo) == "48+84"
    unmet = gcexplore.tune(pair, slo_ms=lat.min() / 3, progress=False)
    assert unmet.attrs["answer"] is None and not unmet.attrs["met"]
    assert "128+4" in set(unmet["layout"])


def test_interrupt_keeps_measured_rows(pair_and_sweep, monkeypatch):
    from gcexplore.experiments import tuner

    pair, _ = pair_and_sweep
    real, calls = tuner.measure_layout, []

    def stop_on_third(run, parts, rows, options=None, rnd=None):
        calls.append(parts.label)
        if len(calls) == 3:
            raise KeyboardInterrupt
        real(run, parts, rows, options, rnd=rnd)

    monkeypatch.setattr(tuner, "measure_layout", stop_on_third)
    with pytest.raises(gcexplore.MeasurementInterrupted) as info:
        gcexplore.tune(pair, progress=False)
    part = info.value.partial
    assert part.attrs["partial"] and part["layout"].nunique() == 2 and len(part) == 2 * 5 * 2
