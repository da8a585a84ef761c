"""Saving, loading and trace export of results, without a GPU."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

import _synthetic as S
import gcexplore
import gcexplore as P
from gcexplore.schema import columns
from gcexplore.results import io as R
from gcexplore.results.chrome_trace import to_chrome_trace

FRAMES = {
    "sweep": lambda: S.sweep_df(),
    "summary": lambda: P.summarize(S.sweep_df()),
    "scaling": lambda: S.scaling_df(),
    "isolation": lambda: S.isolation_df(),
    "occupancy": lambda: S.occupancy_df(),
}


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
@pytest.mark.parametrize("kind", sorted(FRAMES))
def test_round_trip_keeps_rows_dtypes_and_attrs(tmp_path, kind, suffix):
    df = FRAMES[kind]()
    df.attrs["modes"] = ["alone", "concurrent"]
    df.attrs["nested"] = {"p0": 24, "remainder": 108}
    path = R.save(df, tmp_path / f"r.{suffix}")
    back = R.load(path)
    pd.testing.assert_frame_equal(back, df)
    expected = dict(df.attrs, recorded=True)
    assert back.attrs == expected
    assert back.attrs["compute_capability"] == (9, 0)  # tuples survive JSON
    assert back.attrs["recorded"] is True


def test_csv_keeps_text_columns_that_look_numeric(tmp_path):
    df = S.sweep_df(splits=[8])
    df["layout"] = "132"
    back = R.load(R.save(df, tmp_path / "r.csv"))
    assert back["layout"].iloc[0] == "132"
    assert back["requested_sm_count"].dtype == "Int64"
    assert back["requested_sm_count"].isna().sum() == df["requested_sm_count"].isna().sum()


def test_gcexplore_save_is_results_save(tmp_path):
    df = S.scaling_df()
    gcexplore.save(df, tmp_path / "a.parquet")
    assert gcexplore.load(tmp_path / "a.parquet").attrs["kind"] == "scaling"


def test_bad_paths_and_formats(tmp_path):
    df = S.scaling_df()
    with pytest.raises(ValueError, match=r"\.parquet or \.csv"):
        R.save(df, tmp_path / "r.xlsx")
    with pytest.raises(ValueError, match="valid formats are parquet, csv"):
        R.save(df, tmp_path / "r.bin", format="feather")
    with pytest.raises(FileNotFoundError, match="no results file"):
        R.load(tmp_path / "missing.parquet")
    df.to_csv(tmp_path / "bare.csv", index=False)
    with pytest.raises(FileNotFoundError, match="sidecar"):
        R.load(tmp_path / "bare.csv")
    with pytest.raises(TypeError, match="DataFrame"):
        R.save([1, 2], tmp_path / "x.parquet")


def test_load_recorded_names():
    with pytest.raises(ValueError, match="sweep, torch_sweep|isolation, occupancy"):
        R.load_recorded("nope")
    for name in R.recorded_names():
        df = R.load_recorded(name)
        assert df.attrs["recorded"] is True
        assert "device_name" in df.attrs and "kind" in df.attrs


def test_load_recorded_missing_file_says_how_to_make_it(monkeypatch, tmp_path):
    monkeypatch.setattr(R, "_data_dir", lambda: tmp_path)
    with pytest.raises(FileNotFoundError, match="bench/record.py"):
        R.load_recorded("sweep")
    R.save(S.sweep_df(), tmp_path / "sweep.parquet")
    assert R.load_recorded("sweep").attrs["recorded"] is True
    assert R.recorded_names() == ["sweep"]


def _slices(trace):
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def test_chrome_trace_of_occupancy(tmp_path):
    df = S.occupancy_df()
    trace = json.loads(to_chrome_trace(df, tmp_path / "t.json").read_text())
    xs = _slices(trace)
    assert len(xs) == len(df)
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert names == {"partition p0 (24 SMs)", "partition remainder (108 SMs)"}
    # slices on one track never overlap (Perfetto needs nesting)
    by_track = {}
    for e in xs:
        by_track.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for iv in by_track.values():
        iv.sort()
        assert all(a[1] <= b[0] for a, b in zip(iv, iv[1:]))
    # every slice is on a track of its own SM
    first = xs[0]
    assert first["tid"] // 64 == first["args"]["sm_id"]
    assert trace["otherData"]["kind"] == "occupancy"


def test_chrome_trace_overlapping_blocks_get_extra_slots(tmp_path):
    df = pd.DataFrame([("p0", "a", 3, 0, 0, 100), ("p0", "a", 3, 1, 50, 150), ("p0", "a", 3, 2, 120, 200)],
                      columns=columns("occupancy")[:6])
    xs = _slices(json.loads(to_chrome_trace(df, tmp_path / "t.json").read_text()))
    assert sorted(e["tid"] for e in xs) == [3 * 64, 3 * 64, 3 * 64 + 1]


def test_chrome_trace_of_a_sweep(tmp_path):
    df = S.sweep_df(splits=[24, 32], repeats=4)
    trace = json.loads(to_chrome_trace(df, tmp_path / "t.json", reps=2).read_text())
    xs = _slices(trace)
    # 2 layouts x 4 modes x 2 reps x 2 workloads
    assert len(xs) == 2 * 4 * 2 * 2
    procs = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert "24+108 concurrent" in procs and "32+100 streams" in procs
    threads = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {"p0", "remainder", "device", "device: compute"} <= threads
    one = [e for e in xs if e["cat"] == "concurrent" and e["args"]["rep"] == 0 and e["name"] == "compute"][0]
    assert one["dur"] == pytest.approx(df[(df["mode"] == "concurrent") & (df.rep == 0)
                                          & (df.workload == "compute")]["duration_ms"].iloc[0] * 1e3)


def test_chrome_trace_refuses_other_frames(tmp_path):
    with pytest.raises(ValueError, match="occupancy result"):
        to_chrome_trace(S.scaling_df(), tmp_path / "t.json")


# ------------------------------------------------------- docs checked against the data


def test_every_recorded_result_ships():
    assert set(R.RECORDED) == set(R.recorded_names())  # each name has its file in gcexplore/data, and no other


def test_the_readme_offline_example_prints_every_layout_table_column(capsys):
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    line = next(x for x in readme.splitlines() if "layout_table(df)" in x and x.startswith("print("))
    df = R.load_recorded("sweep")
    eval(compile(line.split("#")[0].strip(), "README.md", "eval"), {"gcexplore": gcexplore, "df": df})
    header = capsys.readouterr().out.splitlines()[0].split()
    assert header == list(gcexplore.layout_table(df).columns)
