"""Saving and loading results next to other files: a save never destroys a file that is
not its own, a crash leaves a loadable result, hostile metadata is refused with a clear
error, and files get the permissions an ordinary write gives."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest

import _synthetic as S
from gcexplore.results import io as R
from gcexplore.results.chrome_trace import to_chrome_trace

ROOT = Path(__file__).resolve().parents[1]


def _entries(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


# ------------------------------------------------------------ other files kept


def test_a_csv_save_does_not_replace_an_unrelated_json_beside_it(tmp_path):
    config = tmp_path / "config.json"
    config.write_text('{"learning_rate": 0.1}')
    with pytest.raises(FileExistsError, match="is not the metadata sidecar"):
        R.save(S.sweep_df(splits=[8]), tmp_path / "config.csv")
    assert config.read_text() == '{"learning_rate": 0.1}'
    assert _entries(tmp_path) == {"config.json"}  # no CSV, no temporary left


def test_a_csv_save_replaces_its_own_sidecar(tmp_path):
    path = R.save(S.sweep_df(splits=[8]), tmp_path / "r.csv")
    R.save(S.sweep_df(splits=[8, 16]), path)
    assert len(R.load(path)) == len(S.sweep_df(splits=[8, 16]))


def test_a_csv_save_does_not_replace_a_checkpoint_of_the_same_name(tmp_path):
    ck = tmp_path / "r.json"
    ck.write_text('{"header": 1}\n{"layout": "8+124", "rows": []}\n')
    before = ck.read_bytes()
    with pytest.raises(FileExistsError):
        R.save(S.sweep_df(splits=[8]), tmp_path / "r.csv")
    assert ck.read_bytes() == before


CRASH_BETWEEN_RENAMES = """
import os, sys
sys.path.insert(0, {tests!r})
import _synthetic as S
from gcexplore.results import io as R
real, calls = os.replace, []

def crash_on_second(src, dst):
    calls.append(dst)
    if len(calls) == 2:
        os._exit(3)  # the process dies between the sidecar's rename and the CSV's: no cleanup runs
    return real(src, dst)

os.replace = crash_on_second
R.save(S.sweep_df(splits=[8, 16, 24]), {path!r})
"""


def test_a_crash_between_the_two_renames_leaves_the_old_result_loadable(tmp_path):
    old = S.sweep_df(splits=[8])
    path = R.save(old, tmp_path / "r.csv")
    code = CRASH_BETWEEN_RENAMES.format(tests=str(Path(__file__).parent), path=str(path))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 3, r.stderr  # it died where it should, not earlier
    left = [n for n in _entries(tmp_path) if n.endswith(".tmp")]
    assert left, "a real crash leaves the CSV's temporary behind"
    back = R.load(path)
    assert len(back) == len(old) and sorted(set(back["split_sm_count"])) == [8]
    R.save(S.sweep_df(splits=[8, 16, 24]), path)  # the next save completes and clears the dead writer's temporary
    assert len(R.load(path)) == len(S.sweep_df(splits=[8, 16, 24]))
    assert not [n for n in _entries(tmp_path) if n.endswith(".tmp")]


def _device_or_fifo(path: Path) -> Path:
    """A character device (a private /dev/null node, as root) or else a FIFO at ``path``;
    never a real /dev path, which code under test could replace."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError):
        os.mkfifo(path)
    return path


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
def test_saving_onto_a_device_or_pipe_is_refused(tmp_path, suffix):
    node = _device_or_fifo(tmp_path / f"r.{suffix}")
    kind = stat.S_IFMT(os.stat(node).st_mode)
    with pytest.raises(FileExistsError, match="device, pipe or socket, not a regular file"):
        R.save(S.sweep_df(splits=[8]), node)
    assert stat.S_IFMT(os.stat(node).st_mode) == kind
    assert _entries(tmp_path) == {node.name}


def test_saving_onto_a_folder_is_refused_and_leaves_no_temporary(tmp_path):
    folder = tmp_path / "r.parquet"
    folder.mkdir()
    for _ in range(3):
        with pytest.raises(IsADirectoryError, match="is a folder"):
            R.save(S.sweep_df(splits=[8]), folder)
    assert _entries(tmp_path) == {"r.parquet"} and not any(folder.iterdir())


def test_loading_a_folder_named_like_a_result_is_refused(tmp_path):
    folder = tmp_path / "r.parquet"
    folder.mkdir()
    R.save(S.sweep_df(splits=[8]), folder / "part-0.parquet")
    with pytest.raises(R.ResultFileError, match="is a folder"):
        R.load(folder)


def test_a_failed_rename_leaves_no_temporary(tmp_path, monkeypatch):
    def fail(src, dst):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="cannot write .*r.parquet"):
        R.save(S.sweep_df(splits=[8]), tmp_path / "r.parquet")
    assert _entries(tmp_path) == set()


def test_a_temporary_left_by_a_killed_save_is_removed_by_the_next(tmp_path):
    code = ("import sys, os, signal, pandas as pd; sys.path.insert(0, 'tests');"
            "from gcexplore.results import io as R\n"
            "def die(tmp): open(tmp, 'wb').write(b'x' * 100000); os.kill(os.getpid(), signal.SIGKILL)\n"
            "R.atomic_write(R.Path(sys.argv[1]), die)")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "r.parquet")], cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True)
    assert r.returncode == -9, r.stderr
    assert len([n for n in _entries(tmp_path) if n.endswith(".tmp")]) == 1
    R.save(S.sweep_df(splits=[8]), tmp_path / "r.parquet")
    assert _entries(tmp_path) == {"r.parquet"}


# ---------------------------------------------------------------- permissions


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
def test_results_get_the_umask_permissions_not_0600(tmp_path, suffix):
    old = os.umask(0o022)
    try:
        path = R.save(S.sweep_df(splits=[8]), tmp_path / f"r.{suffix}")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    if suffix == "csv":
        assert stat.S_IMODE(path.with_suffix(".json").stat().st_mode) == 0o644


def test_a_save_over_a_group_writable_file_keeps_its_mode(tmp_path):
    path = R.save(S.sweep_df(splits=[8]), tmp_path / "r.parquet")
    path.chmod(0o664)
    R.save(S.sweep_df(splits=[8, 16]), path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o664


def test_a_chrome_trace_gets_the_umask_permissions(tmp_path):
    old = os.umask(0o027)
    try:
        path = to_chrome_trace(S.sweep_df(splits=[8]), tmp_path / "t.json")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


# ------------------------------------------------------------- hostile files


def _csv_with_sidecar(tmp_path, edit) -> Path:
    path = R.save(S.sweep_df(splits=[8]), tmp_path / "r.csv")
    side = json.loads(path.with_suffix(".json").read_text())
    edit(side)
    path.with_suffix(".json").write_text(json.dumps(side))
    return path


def test_a_huge_fixed_width_dtype_in_a_sidecar_is_refused(tmp_path):
    path = _csv_with_sidecar(tmp_path, lambda s: s["dtypes"].update(workload="S2000000000"))
    with pytest.raises(R.ResultFileError, match="'S2000000000', which save never writes"):
        R.load(path)


def test_an_unknown_dtype_in_a_sidecar_is_refused(tmp_path):
    path = _csv_with_sidecar(tmp_path, lambda s: s["dtypes"].update(workload="no-such-type"))
    with pytest.raises(R.ResultFileError, match="no-such-type"):
        R.load(path)


def _deep(n: int) -> str:
    return "[" * n + "]" * n


def test_sidecar_attrs_nested_100000_deep_are_refused(tmp_path):
    path = R.save(S.sweep_df(splits=[8]), tmp_path / "r.csv")
    side = path.with_suffix(".json")
    text = side.read_text()
    side.write_text(text.replace('"attrs": {', f'"attrs": {{"x": {_deep(100_000)}, ', 1))
    with pytest.raises(R.ResultFileError, match="nests deeper than 64 levels"):
        R.load(path)


def test_parquet_attrs_nested_deep_are_refused(tmp_path):
    import pyarrow.parquet as pq

    path = R.save(S.sweep_df(splits=[8]), tmp_path / "r.parquet")
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    for depth in (100, 100_000):
        meta[b"gcexplore.attrs"] = ('{"x": ' + _deep(depth) + "}").encode()
        pq.write_table(table.replace_schema_metadata(meta), path)
        with pytest.raises(R.ResultFileError, match="nests deeper"):
            R.load(path)


def test_saving_attrs_nested_deep_is_refused_before_writing(tmp_path):
    df = S.sweep_df(splits=[8])
    nested: list = []
    for _ in range(100_000):
        nested = [nested]
    df.attrs["x"] = nested
    for suffix in ("parquet", "csv"):
        with pytest.raises(ValueError, match="deeper than 64 levels"):
            R.save(df, tmp_path / f"r.{suffix}")
    with pytest.raises(ValueError, match="deeper than 64 levels"):
        to_chrome_trace(df, tmp_path / "t.json")
    assert _entries(tmp_path) == set()


@pytest.mark.parametrize("key, value, what", [
    (b"gcexplore.attrs", b"[1, 2]", "list data, not the attributes dict"),
    (b"pandas", b'{"columns": 5, "index_columns": "x"}', "pandas metadata stored in .* is damaged"),
    (b"gcexplore.attrs", b'{"x": {"__tuple__": 5}}', None),  # not our tuple tag: kept as the dict it is
])
def test_damaged_parquet_metadata_is_named(tmp_path, key, value, what):
    import pyarrow.parquet as pq

    path = R.save(S.sweep_df(splits=[8]), tmp_path / "r.parquet")
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({**table.schema.metadata, key: value}), path)
    if what is None:
        assert R.load(path).attrs["x"] == {"__tuple__": 5}
        return
    with pytest.raises(R.ResultFileError, match=what):
        R.load(path)


# --------------------------------------------------------- paths named plainly


@pytest.mark.parametrize("bad", [None, 3, ""])
def test_a_path_that_is_not_a_file_name_is_named(tmp_path, bad):
    with pytest.raises(TypeError, match="save needs a file name"):
        R.save(S.sweep_df(splits=[8]), bad)
    with pytest.raises(TypeError, match="load needs a file name"):
        R.load(bad)


def test_a_read_only_folder_error_names_the_target_not_the_temporary(tmp_path, monkeypatch):
    def read_only(*a, **k):
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_path / ".r.parquet.x.tmp"))

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    with pytest.raises(OSError) as e:
        R.save(S.sweep_df(splits=[8]), tmp_path / "r.parquet")
    assert str(e.value) == f"cannot write {str(tmp_path / 'r.parquet')!r}: Read-only file system"
    assert e.value.errno == errno.EROFS and ".tmp" not in str(e.value)


def test_a_round_trip_still_keeps_everything(tmp_path):
    df = S.sweep_df(splits=[8, 16])
    for suffix in ("parquet", "csv"):
        back = R.load(R.save(df, tmp_path / f"r.{suffix}"))
        pd.testing.assert_frame_equal(back.reset_index(drop=True), df.reset_index(drop=True), check_like=True)


def test_chrome_trace_paths_are_named_plainly(tmp_path):
    df = S.sweep_df(splits=[8])
    with pytest.raises(TypeError, match="to_chrome_trace needs a file name"):
        to_chrome_trace(df, None)
    (tmp_path / "t.json").mkdir()
    with pytest.raises(IsADirectoryError, match="is a folder"):
        to_chrome_trace(df, tmp_path / "t.json")
    assert _entries(tmp_path) == {"t.json"}


# ------------------------------------------------------------- bounded reads (issue 46)


def _parquet_bomb(path: Path, groups: int = 450, rows: int = 1_000_000) -> Path:
    """A few kB of parquet that decode to ``groups`` x ``rows`` zeros (450 million cells, 450 MB of int8
    here; the issue's 1.7 MB file held 9 GB), written a row group at a time in a few MB of memory."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    chunk = pa.table({"x": pa.array(np.zeros(rows, dtype=np.int8))})
    with pq.ParquetWriter(path, chunk.schema, compression="zstd") as w:
        for _ in range(groups):
            w.write_table(chunk)
    return path


def test_a_parquet_decompression_bomb_is_refused_from_its_footer(tmp_path):
    import time
    import tracemalloc

    bomb = _parquet_bomb(tmp_path / "bomb.parquet")
    assert bomb.stat().st_size < 5 << 20
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(R.ResultFileError, match="MAX_LOAD_CELLS"):
            R.load(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - t0 < 10 and peak < 50e6, peak  # decided before anything is decoded


def test_a_parquet_file_whose_columns_decode_past_the_byte_budget_is_refused(tmp_path, monkeypatch):
    path = R.save(S.sweep_df(splits=[8, 16]), tmp_path / "r.parquet")
    monkeypatch.setattr(R, "MAX_LOAD_BYTES", 1000)  # the same check the bomb meets, at a size a test can write
    with pytest.raises(R.ResultFileError, match="decompresses to .*MAX_LOAD_BYTES"):
        R.load(path)


@pytest.mark.parametrize("what", ["sidecar", "csv"])
def test_a_huge_sparse_csv_or_sidecar_is_refused_at_once(tmp_path, what):
    import time

    path = R.save(S.sweep_df(splits=[8]), tmp_path / "r.csv")
    target = path.with_suffix(".json") if what == "sidecar" else path
    with open(target, "r+b") as f:
        f.truncate(6 << 30)  # 6 GiB, sparse: nothing is written, every read of it would be
    t0 = time.perf_counter()
    with pytest.raises(R.ResultFileError, match="GiB, over the"):
        R.load(path)
    assert time.perf_counter() - t0 < 5


def test_a_30_gib_sparse_checkpoint_is_refused_at_once_and_named_in_status(tmp_path):
    import time

    from gcexplore.experiments.runner import Checkpoint

    ck = tmp_path / "c.jsonl"
    Checkpoint(ck, {"kind": "x"}).load()
    with open(ck, "r+b") as f:
        f.truncate(30 << 30)
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="30.0 GiB, over the"):
        Checkpoint(ck, {"kind": "x"}).load()
    assert time.perf_counter() - t0 < 5
