"""Error paths on a real GPU: bad input is refused before anything is built or launched,
and after every injected failure the current context is what it was, no stream is left
open, device free memory is back within 1%, and the exception says what failed."""

from __future__ import annotations

import gc

import pytest

import gcexplore
from gcexplore.device import driver as api
from gcexplore.device import green
from gcexplore.experiments import measure_isolation
from gcexplore import workloads as W

pytestmark = pytest.mark.gpu


def _free_bytes() -> int:
    from cuda.bindings import driver

    with api.use(0):
        return api.check(driver.cuMemGetInfo(), "cuMemGetInfo")[0]


def _open_streams() -> int:
    from cuda.core import Stream

    gc.collect()
    n = 0
    for o in gc.get_objects():
        if isinstance(o, Stream):
            try:
                n += int(o.handle) != 0
            except Exception:
                pass  # closed
    return n


class _State:
    """The device state before an injected failure, and the check after it."""

    def __init__(self, info):
        gcexplore.launch_gap(0)  # calibrated once, outside the measured window
        self.total = info.sm_count
        self.ctx = int(api.current_context())
        self.free = _free_bytes()
        self.streams = _open_streams()

    def check(self):
        assert int(api.current_context()) == self.ctx
        assert _open_streams() == self.streams
        assert abs(_free_bytes() - self.free) <= 0.01 * self.free


def test_a_workload_of_another_device_is_refused_before_launch(info):
    calls = []
    foreign = W.Workload("elsewhere", lambda *, stream: calls.append(1), device=info.index + 1)
    with pytest.raises(ValueError, match=r"elsewhere \(device 1\) hold memory of another device.*device=0"):
        gcexplore.profile_overlap({"a": W.spin(20.0), "elsewhere": foreign}, [16], repeats=1)
    assert calls == []


def test_closed_partitioning_is_refused_with_what_to_do(info):
    parts = gcexplore.split([16])
    parts.close()
    with pytest.raises(ValueError, match="is closed; make a new one with gcexplore.split"):
        gcexplore.profile_overlap({"a": W.spin(20.0), "b": W.spin(20.0)}, parts, repeats=1)


def test_bad_split_is_refused_before_any_builtin_is_allocated(info):
    state = _State(info)
    with pytest.raises(ValueError, match="valid partition sizes"):
        gcexplore.profile_overlap(["memory", "compute"], [200], repeats=1)
    with pytest.raises(ValueError, match="names must be unique"):
        gcexplore.profile_overlap(["memory", "memory"], [24], repeats=1)
    state.check()


def test_builtins_made_from_names_are_freed(info):
    gcexplore.profile_overlap(["memory", "compute"], [24], repeats=1, warmup=0, modes=["concurrent"])
    state = _State(info)  # "memory" alone holds 3 x 1 GiB while it runs
    gcexplore.profile_overlap(["memory", "compute"], [24], repeats=1, warmup=0, modes=["concurrent"])
    state.check()


def test_isolation_failing_to_make_its_pacer_leaks_nothing(info, monkeypatch):
    crit, bg = W.spin(20.0, name="crit"), W.spin(50.0, name="bg")
    state = _State(info)

    def broken_spin(*a, **k):
        raise RuntimeError("injected: pacer")

    monkeypatch.setattr(measure_isolation, "spin", broken_spin)
    with pytest.raises(RuntimeError, match="injected: pacer"):
        gcexplore.isolation(crit, bg, 16, repeats=1, warmup=0, launches=2)
    state.check()


def test_a_stream_failing_midway_closes_the_earlier_ones(info, monkeypatch):
    state = _State(info)
    real = green.stream_factory

    def flaky(ctx, index):
        make, made = real(ctx, index), []

        def once_then_fail(priority=None):
            if made:
                raise RuntimeError("injected: second stream")
            made.append(1)
            return make(priority)

        return once_then_fail

    monkeypatch.setattr(green, "stream_factory", flaky)
    with pytest.raises(RuntimeError, match="injected: second stream"):
        gcexplore.split([24], streams=3)
    monkeypatch.undo()
    state.check()


def test_failed_graph_instantiation_leaks_nothing(info, monkeypatch):
    from cuda.bindings import driver

    state = _State(info)
    monkeypatch.setattr(driver, "cuGraphInstantiate",
                        lambda graph, flags: (driver.CUresult.CUDA_ERROR_INVALID_VALUE, None))
    with pytest.raises(gcexplore.MeasurementFailed, match="cuGraphInstantiate failed"):
        gcexplore.profile_overlap({"a": W.spin(20.0), "b": W.spin(20.0)}, [16], repeats=1, warmup=0,
                                  modes=["concurrent"], graphs=True)
    monkeypatch.undo()
    state.check()


def test_resumed_sweep_keeps_its_run_id(tmp_path, info):
    path = tmp_path / "ck.jsonl"
    first = gcexplore.sweep({"a": W.spin(20.0), "b": W.spin(20.0)}, [8], repeats=1, warmup=0,
                            modes=["concurrent"], checkpoint=path, progress=False)
    again = gcexplore.sweep({"a": W.spin(20.0), "b": W.spin(20.0)}, [8, 16], repeats=1, warmup=0,
                            modes=["concurrent"], checkpoint=path, progress=False)
    assert again["run_id"].nunique() == 1 and again["run_id"].iloc[0] == first["run_id"].iloc[0]
    assert (again["device_name"] == info.name).all()


_GPU_SWEEP = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell's background job starts with SIGINT ignored
import gcexplore
from gcexplore import workloads as W
path = sys.argv[1]
class Loud:
    # prints once per finished repetition so the parent knows where the sweep is
    def __init__(self):
        self.inner = W.spin(2000.0)
    def __call__(self, *, stream):
        print("call", flush=True)
        self.inner(stream=stream)
try:
    gcexplore.sweep({"a": W.spin(20.0), "b": Loud()}, repeats=3, warmup=0, modes=["concurrent"],
                    checkpoint=path, progress=False)
except gcexplore.MeasurementInterrupted as e:
    gcexplore.save(e.partial, path + ".partial.parquet")
    print("saved", len(e.partial), flush=True)
    sys.exit(130)
"""


def _gpu_child(path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    return subprocess.Popen([sys.executable, "-c", _GPU_SWEEP, str(path)], cwd=root, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": f"{root}:{os.environ.get('PYTHONPATH', '')}"})


def test_kill_9_of_a_real_sweep_then_resume_measures_every_layout_once(tmp_path, info):
    path = tmp_path / "ck.jsonl"
    p = _gpu_child(path)
    for _ in range(3 * 4 + 1):  # four layouts and the first call of the fifth
        assert p.stdout.readline().startswith("call")
    p.kill()
    p.wait()
    df = gcexplore.sweep({"a": W.spin(20.0), "b": W.spin(2000.0)}, repeats=3, warmup=0, modes=["concurrent"],
                         checkpoint=path, progress=False)
    sizes = [k for k in info.valid_sm_counts() if k < info.sm_count]
    counts = df.groupby("split_sm_count").size()
    assert sorted(counts.index) == sizes and (counts == 3 * 2).all()
    assert len(df.attrs["resumed_layouts"]) >= 4


def test_ctrl_c_of_a_real_sweep_keeps_every_measured_row(tmp_path):
    import signal

    path = tmp_path / "ck.jsonl"
    p = _gpu_child(path)
    for _ in range(3 * 2 + 2):  # two layouts and two repetitions of the third
        assert p.stdout.readline().startswith("call")
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 130, out
    part = gcexplore.load(f"{path}.partial.parquet")
    assert len(part) >= 2 * 3 * 2 + 2  # every finished repetition, the third layout's first included
    assert part.attrs["partial"] is True


@pytest.mark.multigpu
def test_a_partitioning_of_another_device_is_refused_before_launch():
    calls = []
    with gcexplore.split([16], device=1) as parts:
        with pytest.raises(ValueError, match=r"Partitioning of device 1 .* but device=0; pass device=1"):
            gcexplore.profile_overlap({"a": lambda *, stream: calls.append(1), "b": W.spin(20.0, device=0)},
                                      parts, device=0, repeats=1)
    assert calls == []


def test_a_builtin_allocates_where_cupys_pool_caches_the_free_memory():
    # a long sweep of CuPy (or PyTorch) workloads caches nearly the whole card in the framework's pool (freed
    # blocks are kept per stream and every partition's stream is new); the built-in's allocation must not fail
    # for memory nothing uses
    cp = pytest.importorskip("cupy")
    pool = cp.get_default_memory_pool()
    held = []
    try:
        while True:
            held.append(cp.empty(1 << 30, dtype=cp.uint8))
    except cp.cuda.memory.OutOfMemoryError:
        pass
    del held  # back in CuPy's pool, not the card's
    try:
        assert _free_bytes() < (3 << 30) and pool.total_bytes() > (40 << 30), "the pool kept too little to test"
        W.copy().close()  # allocates two 1.6 GB arrays
        assert pool.total_bytes() < (1 << 30)  # released, as CuPy would before failing its own allocation
    finally:
        pool.free_all_blocks()
