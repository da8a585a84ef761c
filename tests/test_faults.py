"""Faults injected without a GPU: torn checkpoints, a full disk, unwritable folders,
kill -9 and Ctrl-C mid-sweep, damaged files. Each must lose no measured row and end in
a clear error."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import _synthetic as S
import gcexplore
from gcexplore.cli import commands as cli
from gcexplore.results import io as R
from gcexplore.results.chrome_trace import to_chrome_trace
from gcexplore.experiments import runner
from gcexplore.schema import frame

ROOT = Path(__file__).resolve().parents[1]
NAN = float("nan")


LAYOUTS = [(f"{k}+{132 - k}", k) for k in range(8, 72, 8)]


def _measure(calls):
    def measure(k, out):
        calls.append(k)
        out.extend(S.layout_row(k, rep) for rep in range(2))
    return measure


def _build(rows):
    return frame(rows, "sweep", {"kind": "sweep", "device_name": "synthetic", "run_id": "r"})


# ------------------------------------------------------------------- checkpoints


def _checkpoint_bytes(tmp_path, n_layouts):
    path = tmp_path / "full.jsonl"
    runner.run_layouts(LAYOUTS[:n_layouts], _measure([]), build=_build,
                       checkpoint=runner.Checkpoint(path, {"w": 1}))
    return path.read_bytes()


def test_a_torn_record_at_every_byte_offset_loses_no_finished_layout(tmp_path):
    data = _checkpoint_bytes(tmp_path, 3)
    lines = data.split(b"\n")
    head = b"\n".join(lines[:3]) + b"\n"  # header + two finished layouts
    last = lines[3] + b"\n"
    for cut in range(len(last)):
        path = tmp_path / f"torn{cut}.jsonl"
        path.write_bytes(head + last[:cut])
        calls = []
        rows, resumed = runner.run_layouts(LAYOUTS[:4], _measure(calls), build=_build,
                                           checkpoint=runner.Checkpoint(path, {"w": 1}))
        assert resumed == [LAYOUTS[0][0], LAYOUTS[1][0]], cut
        assert calls == [24, 32], cut  # the torn layout and the next are measured again
        done = runner.Checkpoint(path, {"w": 1}).load()
        assert list(done) == [lab for lab, _ in LAYOUTS[:4]], cut  # each exactly once, all readable
        assert sum(len(r) for r in done.values()) == 8


def test_a_record_left_without_its_newline_is_not_glued_to_the_next(tmp_path):
    path = tmp_path / "ck.jsonl"
    ck = runner.Checkpoint(path, {"w": 1})
    ck.load()
    ck.append("8+124", [S.layout_row(8, 0)])
    path.write_bytes(path.read_bytes()[:-1])  # a crash before the newline was written
    ck.append("16+116", [S.layout_row(16, 0)])
    done = runner.Checkpoint(path, {"w": 1}).load()
    assert list(done) == ["8+124", "16+116"]


@pytest.mark.parametrize("header, what", [(b"null", "NoneType"), (b"[1, 2]", "list"),
                                          (b'{"a": 1}', "not a checkpoint header"), (b"{oops", "not JSON")])
def test_a_checkpoint_with_a_bad_header_is_named(tmp_path, header, what):
    path = tmp_path / "ck.jsonl"
    path.write_bytes(header + b"\n")
    with pytest.raises(ValueError, match=f"{path}.*{what}"):
        runner.Checkpoint(path, {"w": 1}).load()


def test_a_checkpoint_entry_without_rows_is_named(tmp_path):
    path = tmp_path / "ck.jsonl"
    runner.Checkpoint(path, {"w": 1}).load()
    with open(path, "a") as f:
        f.write(json.dumps({"layout": "8+124"}) + "\n")
        f.write(json.dumps({"layout": "16+116", "rows": []}) + "\n")
    with pytest.raises(ValueError, match=f"{path}.*line 2 is not a layout record"):
        runner.Checkpoint(path, {"w": 1}).load()


def test_a_checkpoint_in_a_missing_folder_is_created(tmp_path):
    path = tmp_path / "a" / "b" / "ck.jsonl"
    runner.run_layouts(LAYOUTS[:2], _measure([]), build=_build, checkpoint=runner.Checkpoint(path, {"w": 1}))
    assert len(path.read_text().splitlines()) == 3


def test_a_failing_partial_frame_does_not_replace_the_original_error():
    def broken_build(rows):
        raise RuntimeError("the frame cannot be built")

    def measure(k, out):
        out.append(S.layout_row(k, 0))
        if k == 24:
            raise ZeroDivisionError("the workload failed")

    with pytest.raises(runner.MeasurementFailed, match="ZeroDivisionError.*the workload failed") as ei:
        runner.run_layouts(LAYOUTS, measure, build=broken_build)
    assert isinstance(ei.value.__cause__, ZeroDivisionError)
    assert len(ei.value.partial) == 3 and ei.value.partial.attrs["partial"] is True


# ----------------------------------------------------------------- a full disk


_FSIZE = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
"""


def _run_child(code: str, *args, limit=None, **kw):
    prefix = _FSIZE.format(limit=limit) if limit else ""
    src = prefix + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", src, *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, **kw)


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
def test_disk_full_during_an_overwrite_keeps_the_old_result(tmp_path, suffix):
    old = S.sweep_df(splits=[8])
    path = R.save(old, tmp_path / f"r.{suffix}")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    code = """
        import sys, _synthetic as S
        from gcexplore.results import io as R
        big = S.sweep_df(repeats=200)
        try:
            R.save(big, sys.argv[1])
        except OSError as e:
            print("refused:", e.errno); sys.exit(3)
    """
    r = _run_child(f"import sys; sys.path.insert(0, {str(ROOT / 'tests')!r})\n" + textwrap.dedent(code), path,
                   limit=path.stat().st_size + 4096)
    assert r.returncode == 3, r.stdout + r.stderr
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert after == before  # the old file and its sidecar untouched, no temporary left
    pd.testing.assert_frame_equal(R.load(path), R.load(path))
    assert len(R.load(path)) == len(old)


def test_disk_full_during_a_checkpoint_append_keeps_every_row(tmp_path):
    path = tmp_path / "ck.jsonl"
    code = """
        import sys
        from gcexplore.experiments import runner
        from gcexplore.schema import frame
        def measure(k, out):
            out.extend({"layout": f"{k}+{132-k}", "split_sm_count": k, "mode": "concurrent", "rep": r,
                        "workload": "w" * 2000, "partition": "p0", "sm_count": k, "duration_ms": 1.0,
                        "makespan_ms": 1.0} for r in range(2))
        build = lambda rows: frame(rows, "sweep", {"kind": "sweep"})
        try:
            runner.run_layouts([(f"{k}+{132-k}", k) for k in range(8, 72, 8)], measure, build=build,
                               checkpoint=runner.Checkpoint(sys.argv[1], {"w": 1}))
        except runner.MeasurementFailed as e:
            print(len(e.partial), type(e.__cause__).__name__); sys.exit(3)
    """
    r = _run_child(code, path, limit=12_000)
    assert r.returncode == 3, r.stdout + r.stderr
    n_rows, cause = r.stdout.split()
    assert cause == "OSError"
    done = runner.Checkpoint(path, {"w": 1}).load()  # what reached the disk still loads
    assert 0 < len(done) < 8
    assert int(n_rows) == 2 * (len(done) + 1)  # every finished layout plus the one being written


def test_save_into_a_folder_that_cannot_exist_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OSError):
        R.save(S.scaling_df(), blocker / "r.parquet")
    assert blocker.read_text() == "x"


_RO_SAVE = """
import errno, sys
from gcexplore.results import io as R
import _synthetic as S
try:
    R.save(S.sweep_df(), sys.argv[1])
except OSError as e:
    print("refused", errno.errorcode.get(e.errno), e)
    sys.exit(0)
print("written")
sys.exit(1)
"""


def _read_only_runner():
    """How this machine makes a folder read-only for its own user: chmod for an ordinary user; for
    root (CI), whom chmod does not stop, a read-only bind mount in a private mount namespace."""
    if os.geteuid() != 0:
        return "chmod"
    import shutil

    if shutil.which("unshare") and subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0:
        return "mount"
    pytest.fail("running as root without unshare -rm: no way to make a folder read-only for root here")


def test_save_into_a_read_only_folder_keeps_what_is_there(tmp_path):
    path = R.save(S.scaling_df(), tmp_path / "r.parquet")
    before = path.read_bytes()
    child = tmp_path.parent / f"{tmp_path.name}-child.py"
    child.write_text(_RO_SAVE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(ROOT), str(ROOT / "tests")))}
    how = _read_only_runner()
    if how == "chmod":
        tmp_path.chmod(0o500)
        try:
            r = subprocess.run([sys.executable, str(child), str(path)], capture_output=True, text=True, env=env)
        finally:
            tmp_path.chmod(0o700)
    else:
        script = (f'mount --bind "{tmp_path}" "{tmp_path}" && mount -o remount,bind,ro "{tmp_path}" && '
                  f'exec "{sys.executable}" "{child}" "{path}"')
        r = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stdout.startswith("refused"), (how, r.stdout, r.stderr)
    assert ("EROFS" if how == "mount" else "EACCES") in r.stdout and ".tmp" not in r.stdout, r.stdout
    assert path.read_bytes() == before and R.load(path).attrs["kind"] == "scaling"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.parquet"]  # no temporary left


# -------------------------------------------------------- kill -9 and Ctrl-C


_SWEEP_CHILD = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell's background job starts with SIGINT ignored
from gcexplore.experiments import runner
from gcexplore.schema import frame
path, delay = sys.argv[1], float(sys.argv[2])
def measure(k, out):
    for rep in range(3):
        time.sleep(delay)
        out.append({"layout": f"{k}+{132-k}", "split_sm_count": k, "mode": "concurrent", "rep": rep,
                    "workload": "w", "partition": "p0", "sm_count": k, "duration_ms": 1.0, "makespan_ms": 1.0})
        print("row", flush=True)
build = lambda rows: frame(rows, "sweep", {"kind": "sweep"})
try:
    runner.run_layouts([(f"{k}+{132-k}", k) for k in range(8, 136, 8) if k < 132], measure, build=build,
                       checkpoint=runner.Checkpoint(path, {"w": 1}))
except runner.MeasurementInterrupted as e:
    from gcexplore.results import io as results
    results.save(e.partial, path + ".partial.parquet")
    print("saved", len(e.partial), flush=True)
    sys.exit(130)
"""


def _child(path, delay):
    return subprocess.Popen([sys.executable, "-c", _SWEEP_CHILD, str(path), str(delay)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize("kill_after_rows", [4, 9, 13])
def test_kill_9_mid_sweep_then_resume_returns_every_layout_once(tmp_path, kill_after_rows):
    path = tmp_path / "ck.jsonl"
    p = _child(path, 0.01)
    for _ in range(kill_after_rows):
        p.stdout.readline()
    p.kill()
    p.wait()
    calls = []
    layouts = [(f"{k}+{132 - k}", k) for k in range(8, 132, 8)]
    rows, resumed = runner.run_layouts(layouts, lambda k, out: (calls.append(k), out.extend(
        {**S.layout_row(k, rep)} for rep in range(3))), build=_build, checkpoint=runner.Checkpoint(path, {"w": 1}))
    df = _build(rows)
    counts = df.groupby("layout").size()
    assert sorted(counts.index) == sorted(lab for lab, _ in layouts)
    assert (counts == 3).all()  # every layout exactly once, three repetitions each
    assert len(resumed) >= kill_after_rows // 3 - 1 and set(calls).isdisjoint(
        int(lab.split("+")[0]) for lab in resumed)


def test_ctrl_c_mid_layout_keeps_every_measured_row(tmp_path):
    path = tmp_path / "ck.jsonl"
    p = _child(path, 0.05)
    seen = 0
    for _ in range(7):  # two layouts and one row of the third
        assert p.stdout.readline().startswith("row")
        seen += 1
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 130
    saved = int(out.strip().splitlines()[-1].split()[1])
    part = R.load(f"{path}.partial.parquet")
    assert saved == len(part) >= seen
    assert part.attrs["partial"] is True
    done = runner.Checkpoint(path, {"w": 1}).load()
    assert len(done) == len(part) // 3  # finished layouts are in the checkpoint too


# ------------------------------------------------------------ CLI and demo


def test_cli_writes_what_was_measured_when_the_sweep_fails(tmp_path, monkeypatch, capsys):
    partial = S.sweep_df(splits=[8, 16])
    partial.attrs["partial"] = True

    def failing_sweep(*a, **k):
        raise runner.MeasurementFailed("RuntimeError while measuring (boom)", partial)

    monkeypatch.setattr(cli, "_build_workloads", lambda parsed, device: {})
    monkeypatch.setattr("gcexplore.experiments.overlap.sweep", failing_sweep)
    out = tmp_path / "sub" / "r.parquet"
    code = cli.main(["sweep", "compute", "memory", "--out", str(out), "--quiet"])
    assert code == 1
    assert len(R.load(out)) == len(partial)
    err = capsys.readouterr()
    assert "boom" in err.err and "partial" in err.out


def test_demo_never_overwrites_an_earlier_result(tmp_path, capsys):
    from gcexplore.cli.demo import run_demo

    first = run_demo(tmp_path, recorded=True)["results"]
    marker = first.read_bytes()
    second = run_demo(tmp_path, recorded=True)["results"]
    assert first.name == "sweep.parquet" and second.name == "sweep-2.parquet"
    assert first.read_bytes() == marker
    assert "holds an earlier run's files and they are kept" in capsys.readouterr().out
    assert run_demo(tmp_path, recorded=True, overwrite=True)["results"] == first


# --------------------------------------------------------------- damaged files


def test_damaged_and_empty_files_are_named(tmp_path):
    good = R.save(S.sweep_df(splits=[8]), tmp_path / "r.parquet")
    data = good.read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(R.ResultFileError, match="cut.parquet.*not a readable parquet file"):
        R.load(tmp_path / "cut.parquet")
    (tmp_path / "empty.parquet").write_bytes(b"")
    with pytest.raises(R.ResultFileError, match="is empty"):
        R.load(tmp_path / "empty.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet at all" * 10)
    with pytest.raises(R.ResultFileError, match="not a readable parquet"):
        R.load(tmp_path / "junk.parquet")


def test_a_csv_cut_at_a_line_boundary_is_refused(tmp_path):
    path = R.save(S.sweep_df(), tmp_path / "r.csv")
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:44]))
    with pytest.raises(R.ResultFileError, match="does not match its sidecar.*cut short"):
        R.load(path)


@pytest.mark.parametrize("content, what", [
    (b"{not json", "not UTF-8 JSON"), (b"\xff\xfe\x00", "not UTF-8 JSON"), (b"[1, 2]", "list data"),
])
def test_a_bad_sidecar_is_named(tmp_path, content, what):
    path = R.save(S.sweep_df(splits=[8]), tmp_path / "r.csv")
    path.with_suffix(".json").write_bytes(content)
    with pytest.raises(R.ResultFileError, match=what):
        R.load(path)


def test_another_results_sidecar_is_refused(tmp_path):
    a = R.save(S.sweep_df(splits=[8]), tmp_path / "a.csv")
    b = R.save(S.scaling_df(), tmp_path / "b.csv")
    b.with_suffix(".json").write_bytes(a.with_suffix(".json").read_bytes())
    with pytest.raises(R.ResultFileError, match="belongs to 'a.csv', not to 'b.csv'"):
        R.load(b)


def test_overwriting_a_csv_replaces_its_sidecar_with_it(tmp_path):
    path = R.save(S.sweep_df(splits=[8]), tmp_path / "r.csv")
    R.save(S.scaling_df(), path)
    assert R.load(path).attrs["kind"] == "scaling"


def test_text_that_looks_missing_stays_text(tmp_path):
    df = S.sweep_df(splits=[8])
    names = {"compute": "NA", "memory": "None"}
    df["workload"] = df["workload"].map(names)
    df.loc[df["workload"] == "None", "workload"] = "n/a"
    for suffix in ("csv", "parquet"):
        back = R.load(R.save(df, tmp_path / f"r.{suffix}"))
        assert set(back["workload"]) == {"NA", "n/a"}


def test_colliding_targets_are_refused(tmp_path):
    with pytest.raises(ValueError, match="sidecar would have the same name"):
        R.save(S.sweep_df(splits=[8]), tmp_path / "r.json", format="csv")
    R.save(S.sweep_df(splits=[8]), tmp_path / "r.csv")
    with pytest.raises(ValueError, match="is the metadata sidecar of"):
        to_chrome_trace(S.sweep_df(splits=[8]), tmp_path / "r.json")


# ------------------------------------------------------------------ bad rows


def _sweep_with(col, value, where=None):
    df = S.sweep_df(splits=[8, 16])
    df.loc[df.index[:3] if where is None else where, col] = value
    return df


@pytest.mark.parametrize("value", [-1.0, 0.0, NAN, np.inf])
def test_bad_durations_are_named_not_summarized(value):
    df = _sweep_with("duration_ms", value)
    for fn in (gcexplore.summarize, gcexplore.best_split, gcexplore.plot_sweep, gcexplore.plot_throughput):
        with pytest.raises(ValueError, match="3 of .* rows have a duration_ms that is not a finite positive"):
            fn(df)


def test_all_nan_makespans_are_named():
    df = S.sweep_df(splits=[8])
    df["makespan_ms"] = NAN
    with pytest.raises(ValueError, match="makespan_ms that is not a finite positive"):
        gcexplore.best_split(df)


def test_blocks_ending_before_they_start_are_named():
    occ = S.occupancy_df()
    occ.loc[occ.index[0], "end_ns"] = occ["start_ns"].iloc[0] - 5
    with pytest.raises(ValueError, match="1 blocks end before they start"):
        gcexplore.plot_occupancy(occ)


def test_missing_split_sizes_are_named():
    df = S.sweep_df(splits=[8])
    df["split_sm_count"] = df["split_sm_count"].astype(float)
    df.loc[df.index[0], "split_sm_count"] = NAN
    with pytest.raises(ValueError, match="no split size"):
        gcexplore.summarize(df)


def test_the_wrong_kind_of_result_is_named():
    with pytest.raises(ValueError, match="plot_scaling needs a scaling result .*got a sweep result"):
        gcexplore.plot_scaling(S.sweep_df())
    with pytest.raises(ValueError, match="plot_scaling needs a scaling result .*got an isolation result"):
        gcexplore.plot_scaling(S.isolation_df())
    with pytest.raises(ValueError, match="plot_isolation needs an isolation result"):
        gcexplore.plot_isolation(S.scaling_df())


def test_metadata_that_contradicts_the_rows_is_named():
    df = S.sweep_df(splits=[8])
    df.attrs["device_sm_count"] = 114
    with pytest.raises(ValueError, match="adds up to 132 SMs but the metadata says .* 114"):
        gcexplore.summarize(df)


def test_one_workload_name_on_two_partitions_is_named():
    df = S.sweep_df(splits=[8])
    df["workload"] = "same"
    with pytest.raises(ValueError, match="workload 'same' ran on two partitions"):
        gcexplore.summarize(df)


def test_chrome_trace_is_valid_json_and_counts_repetitions(tmp_path):
    df = S.sweep_df(splits=[8])
    df["throughput_tflops"] = NAN
    df.attrs["peak"] = float("nan")
    path = to_chrome_trace(df, tmp_path / "t.json")

    def refuse(token):
        raise ValueError(f"bare {token} in the trace")

    json.loads(path.read_text(), parse_constant=refuse)
    with pytest.raises(ValueError, match="reps must be an int >= 1, got -1"):
        to_chrome_trace(df, tmp_path / "t2.json", reps=-1)


def test_numbers_follow_one_rule(h100_like):
    with pytest.raises(TypeError, match="SM counts must be ints, got 24.9"):
        gcexplore.plan_split(h100_like, [24.9])
    with pytest.raises(TypeError, match="sm_counts entry must be an int"):
        gcexplore.sweep(["compute", "memory"], sm_counts=[24.9])
    with pytest.raises(ValueError, match=r"pacer_us must be a number of microseconds in \(0, 1e\+06\]"):
        gcexplore.isolation("latency", "compute", pacer_us=float("inf"))
    with pytest.raises(ValueError, match="pacer_us"):
        gcexplore.isolation("latency", "compute", pacer_us=1e300)
    with pytest.raises(ValueError, match=r"launches must be an int in \[1, 10000\]"):
        gcexplore.isolation("latency", "compute", launches=0)


def test_sweep_checks_arguments_before_the_gpu():
    with pytest.raises(ValueError, match="repeats must be an int in"):
        gcexplore.sweep(["compute", "memory"], repeats=0)
    with pytest.raises(ValueError, match="unknown mode"):
        gcexplore.profile_overlap(["compute", "memory"], [24], modes=["fast"])


# ------------------------------------------- CLI: measured rows saved first


def _fake_profile(monkeypatch, result, *, before_return=None):
    """The CLI's profile measuring nothing: ``result`` comes back as if measured."""
    def profile_overlap(*a, **k):
        if before_return is not None:
            before_return()
        return result

    monkeypatch.setattr(cli, "_build_workloads", lambda parsed, device: {})
    monkeypatch.setattr("gcexplore.experiments.overlap.profile_overlap", profile_overlap)
    monkeypatch.setattr("gcexplore.trace.collector.require_cupti", lambda: None)


def test_cli_writes_the_result_when_the_kernel_trace_cannot_be_written(tmp_path, monkeypatch, capsys):
    from gcexplore.trace.collector import TracedResult

    trace, overlap = R.load_recorded("trace"), R.load_recorded("trace_overlap")
    kernels = tmp_path / "k.parquet"
    # the kernel-trace name passes the checks, then turns into a folder while "measuring"
    _fake_profile(monkeypatch, TracedResult(overlap, trace), before_return=kernels.mkdir)
    out = tmp_path / "r.parquet"
    code = cli.main(["profile", "compute", "memory", "--split", "24", "--out", str(out),
                     "--kernel-trace", str(kernels), "--trace", str(tmp_path / "t.json")])
    err = capsys.readouterr()
    assert code == 1
    assert len(R.load(out)) == len(overlap)  # the measured rows are on disk
    assert (tmp_path / "t.json").is_file()  # and the timeline, after the failed kernel trace
    assert "could not write the kernel trace" in err.err and f"({out} is written)" in err.err


@pytest.mark.parametrize("value", [0.0, NAN])
def test_cli_saves_rows_whose_summary_fails(tmp_path, monkeypatch, capsys, value):
    df = S.sweep_df(splits=[8])
    df = df[df["layout"] == df["layout"].iloc[0]].copy()
    df.attrs["kind"] = "overlap"
    df.loc[df.index[0], "duration_ms"] = value
    _fake_profile(monkeypatch, df)
    out = tmp_path / "r.csv"
    code = cli.main(["profile", "compute", "memory", "--split", "8", "--out", str(out)])
    err = capsys.readouterr()
    assert code == 1  # a failed summary, not a bad argument (2)
    back = R.load(out)
    assert len(back) == len(df)
    assert "the summary of the measured rows failed" in err.err and f"saved in {out}" in err.err
    assert f"wrote {out}" in err.out


def test_live_demo_checks_its_folder_before_measuring(tmp_path, monkeypatch):
    from gcexplore.cli import demo

    calls = []
    monkeypatch.setattr(demo, "_gpu_reason", lambda device: None)
    monkeypatch.setattr("gcexplore.experiments.overlap.sweep", lambda *a, **k: calls.append(a))
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(ValueError, match="is a file; the demo writes its plots"):
        demo.run_demo(afile)
    assert calls == [] and afile.read_text() == "x"


def test_live_demo_saves_the_sweep_before_the_occupancy_run(tmp_path, monkeypatch):
    from gcexplore.cli import demo

    def failing_occupancy(*a, **k):
        raise RuntimeError("occupancy failed")

    monkeypatch.setattr(demo, "_gpu_reason", lambda device: None)
    monkeypatch.setattr("gcexplore.experiments.overlap.sweep", lambda *a, **k: S.sweep_df(splits=[8, 16]))
    monkeypatch.setattr("gcexplore.experiments.measure_occupancy.occupancy", failing_occupancy)
    with pytest.raises(RuntimeError, match="occupancy failed"):
        demo.run_demo(tmp_path)
    assert len(R.load(tmp_path / "sweep.parquet")) == len(S.sweep_df(splits=[8, 16]))


def test_demo_figures_are_never_overwritten(tmp_path, capsys):
    from gcexplore.cli.demo import run_demo

    first = run_demo(tmp_path, recorded=True)
    before = {k: (p.stat().st_ino, p.stat().st_mtime_ns) for k, p in first.items()}
    second = run_demo(tmp_path, recorded=True)
    assert {k: p.name for k, p in second.items()} == {k: p.name.replace(p.stem, p.stem + "-2")
                                                     for k, p in first.items()}
    assert {k: (p.stat().st_ino, p.stat().st_mtime_ns) for k, p in first.items()} == before
    assert all(p.read_bytes()[:4] in (b"\x89PNG", b"PAR1") for p in second.values())


# ------------------------------------------------------- limits before the GPU


def test_max_repeats_is_bounded_with_the_limit_named():
    from gcexplore.experiments.search import Settings
    from gcexplore.schema import MAX_TUNE_REPEATS

    assert Settings(max_repeats=MAX_TUNE_REPEATS).max_repeats == MAX_TUNE_REPEATS
    with pytest.raises(ValueError, match=r"max_repeats must be an int in \[5, 1000\], got 100000"):
        Settings(max_repeats=100_000)


def test_tuning_many_workloads_is_refused_before_enumerating(h100_like):
    import time

    from gcexplore.experiments.tuner import candidates

    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"7 workloads .* 16,777,216 combinations .* limit is 100,000.*others="):
        candidates(h100_like, 7)
    assert time.perf_counter() - t0 < 1.0
    assert candidates(h100_like, 7, others=[8, 8, 8, 8, 8])  # fixed middle sizes: a short list
    assert len(candidates(h100_like, 4)) == 560  # small searches are unchanged


def test_cli_tune_of_seven_workloads_is_refused_before_any_workload_is_built(monkeypatch, capsys, h100_like,
                                                                            tmp_path):
    def build(parsed, device):
        raise AssertionError("workloads built")

    monkeypatch.setattr(cli, "_build_workloads", build)
    monkeypatch.setattr("gcexplore.device.driver.device_info", lambda device=0: h100_like)
    code = cli.main(["tune", *["compute"] * 7, "--out", str(tmp_path / "t.parquet")])
    err = capsys.readouterr().err
    assert code == 2 and "16,777,216 combinations" in err and "--others" in err
    assert len(err.strip().splitlines()) == 1
