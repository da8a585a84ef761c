"""`gcexplore demo`: offline over recorded results (real ones when present, synthetic
stand-ins otherwise), and the live path with the profiler calls replaced."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import _synthetic as S
import gcexplore
from gcexplore.cli import demo as _demo
from gcexplore.views import report
from gcexplore.results import io as results
from gcexplore import analysis as A

ROOT = Path(__file__).resolve().parents[1]
PNG = b"\x89PNG\r\n\x1a\n"


def _best_layout(df):
    return (df[df["mode"] == "concurrent"].drop_duplicates(["layout", "rep"])
            .groupby("layout")["makespan_ms"].median().idxmin())


@pytest.fixture
def synthetic_recorded(monkeypatch):
    """load_recorded() serving synthetic frames labelled recorded (never written to
    gcexplore/data), and no GPU."""
    import gcexplore.device.driver as api

    frames = {"sweep": S.sweep_df(recorded=True),
              "occupancy": S.occupancy_df(recorded=True),
              "scaling": S.scaling_df(), "isolation": S.isolation_df()}
    for f in frames.values():
        f.attrs["recorded"] = True

    def no_gpu(device=0):
        raise gcexplore.UnsupportedError("no CUDA driver found: test")

    monkeypatch.setattr(api, "device_info", no_gpu)
    monkeypatch.setattr(results, "load_recorded", lambda name: frames[name].copy())
    monkeypatch.setattr(results, "recorded_names", lambda: sorted(frames))
    return frames


def test_offline_demo_says_so_and_renders_recorded(tmp_path, capsys, synthetic_recorded):
    out = tmp_path / "out"
    written = _demo.run_demo(out)
    text = capsys.readouterr().out.splitlines()
    assert text[0] == ("gcexplore demo: no GPU for a live run (no CUDA driver found: test); "
                       "showing the recorded results instead")
    # the synthetic occupancy was taken at 24+108, not at the best split: the demo says so
    best = gcexplore.best_split(synthetic_recorded["sweep"])["layout"]
    assert best != "24+108"
    assert text[1].startswith(f"gcexplore demo: the SM occupancy shown was recorded at 24+108, "
                              f"not at the best split {best}")
    assert text[2] == "compute + memory — " + gcexplore.figure_stamp(
        synthetic_recorded["sweep"].attrs)
    assert "recorded 2000-01-01" in text[2]
    assert set(written) == {"sweep", "throughput", "occupancy", "scaling", "isolation",
                            "results"}
    for key in ("sweep", "throughput", "occupancy", "scaling", "isolation"):
        assert written[key] == out / f"{key}.png"
        assert written[key].read_bytes()[:8] == PNG
    assert text[-1] == ("wrote sweep.png, throughput.png, occupancy.png, scaling.png, "
                        f"isolation.png, sweep.parquet to {out}/")
    back = results.load(written["results"])
    assert len(back) == len(synthetic_recorded["sweep"])


def test_offline_demo_draws_the_occupancy_recorded_at_the_best_split(tmp_path, capsys, synthetic_recorded,
                                                                     monkeypatch):
    best = gcexplore.best_split(synthetic_recorded["sweep"])
    at_best = S.occupancy_df(recorded=True)
    at_best.attrs["layout"] = best["layout"]
    frames = {**synthetic_recorded, "occupancy_best": at_best}
    monkeypatch.setattr(results, "load_recorded", lambda name: frames[name].copy())
    monkeypatch.setattr(results, "recorded_names", lambda: sorted(frames))
    _demo.run_demo(tmp_path / "o")
    assert "SM occupancy shown was recorded at" not in capsys.readouterr().out


def test_summary_table_marks_best_and_matches_summarize(synthetic_recorded):
    df = synthetic_recorded["sweep"]
    text = _demo.format_summary(df).splitlines()
    best = gcexplore.best_split(df)
    assert best["layout"] == _best_layout(df)
    assert text[1].split() == ["best", *report.REPORT_COLUMNS]
    rows = text[2:-3]
    assert [r.split()[-10] for r in rows] == [f"{k}+{132 - k}" for k in range(8, 121, 8)]
    starred = [r for r in rows if r.split()[0] == "*"]
    assert len(starred) == 1 and starred[0].split()[1] == best["layout"]
    assert starred[0].split()[2] == f"{best['concurrent_ms']:.3f}"
    assert text[-3].startswith(
        f"best split {best['layout']}: concurrent {best['concurrent_ms']:.3f} ms")
    assert f"{best['speedup_vs_sequential']:.2f}x vs sequential" in text[-3]
    assert f"no layout can beat {best['lower_bound_ms']:.3f} ms" in text[-2]
    assert f"split loss {best['split_loss']:.2f}x" in text[-2]
    assert f"interference {best['interference']:.2f}x" in text[-2]
    assert text[-1].startswith("overlap pays")  # the toy model beats sequential at its best


def _scaled(df, factor):
    out = df.copy()
    conc = out["mode"] == "concurrent"
    out.loc[conc, "makespan_ms"] *= factor
    out.attrs = df.attrs
    return out


def test_summary_says_when_overlap_does_not_pay(synthetic_recorded):
    assert _demo.format_summary(_scaled(synthetic_recorded["sweep"], 3)).splitlines()[-1].startswith(
        "overlap does not pay here")


def test_verdict_follows_the_data_when_the_spreads_overlap(synthetic_recorded):
    # Concurrent made exactly as slow as sequential at the best layout: the spreads
    # overlap, and the sentence must say "about even", not "pays".
    df = synthetic_recorded["sweep"]
    facts = A.verdict_facts(df)
    ratio = facts["sequential"]["median_ms"] / facts["concurrent"]["median_ms"]
    even = _scaled(df, ratio)
    facts = A.verdict_facts(even)
    assert facts["vs_sequential"] == "even"
    assert report.outcome_sentence(facts).startswith("overlap is about even")
    assert _demo.format_summary(even).splitlines()[-1] == report.outcome_sentence(facts)


def test_live_demo_sweeps_then_records_occupancy_of_best(tmp_path, capsys, monkeypatch):
    import gcexplore.experiments.measure_occupancy as measure_occupancy
    import gcexplore.experiments.overlap as prof

    calls = []
    df = S.sweep_df()

    def sweep(workloads, *, repeats, device):
        calls.append(("sweep", workloads, repeats, device))
        return df

    def occupancy(workloads, split, *, device):
        calls.append(("occupancy", workloads, split, device))
        return S.occupancy_df()

    monkeypatch.setattr(_demo, "_gpu_reason", lambda device: None)
    monkeypatch.setattr(prof, "sweep", sweep)
    monkeypatch.setattr(measure_occupancy, "occupancy", occupancy)
    written = _demo.run_demo(tmp_path, repeats=3, device=1)
    best = int(_best_layout(df).split("+")[0])
    assert calls == [("sweep", ["compute", "memory"], 3, 1),
                     ("occupancy", ["compute", "memory"], [best], 1)]
    text = capsys.readouterr().out
    assert "measured live" in text and "no GPU" not in text
    assert written["occupancy"].read_bytes()[:8] == PNG
    assert "scaling" not in written  # recorded-only extras


def test_demo_cli_over_the_recorded_results(tmp_path):
    if "sweep" not in results.recorded_names():
        pytest.skip("no recorded results in gcexplore/data yet (recorded on the H100 with "
                    "bench/record.py)")
    r = subprocess.run([sys.executable, "-m", "gcexplore.cli", "demo", "--recorded", "--out",
                        str(tmp_path / "o")], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rec = results.load_recorded("sweep")
    assert f"recorded {str(rec.attrs['date'])[:10]}" in r.stdout
    assert str(rec.attrs["device_name"]) in r.stdout
    assert "best split" in r.stdout
    for name in ("sweep.png", "throughput.png", "sweep.parquet"):
        assert (tmp_path / "o" / name).is_file()
    assert (tmp_path / "o" / "sweep.png").read_bytes()[:8] == PNG


def test_demo_cli_help_lists_its_options():
    r = subprocess.run([sys.executable, "-m", "gcexplore.cli", "demo", "--help"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for opt in ("--out", "--device", "--repeats", "--recorded", "gcexplore-out"):
        assert opt in r.stdout
