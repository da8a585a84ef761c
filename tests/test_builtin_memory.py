"""A built-in's allocation on a card whose free memory PyTorch's or CuPy's allocator caches: released and retried
once, and only for running out of memory (no GPU: a stand-in device and stand-in frameworks)."""

from __future__ import annotations

import sys
import types

import pytest

from gcexplore.workloads import builtins as B


class _Dev:
    def __init__(self, fails: list[str]):
        self.fails, self.calls = list(fails), 0

    def allocate(self, n, stream):
        self.calls += 1
        if self.fails:
            raise RuntimeError(self.fails.pop(0))
        return ("buffer", n)


def _cupy(monkeypatch):
    freed = []
    pool = types.SimpleNamespace(free_all_blocks=lambda: freed.append("cupy"))
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(get_default_memory_pool=lambda: pool))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    return freed


def test_out_of_memory_releases_the_frameworks_caches_and_retries_once(monkeypatch):
    freed = _cupy(monkeypatch)
    dev = _Dev(["CUDA_ERROR_OUT_OF_MEMORY: The API call failed"])
    assert B._allocate(dev, 64, None) == ("buffer", 64)
    assert dev.calls == 2 and freed == ["cupy"]


def test_a_second_failure_and_any_other_error_are_raised(monkeypatch):
    freed = _cupy(monkeypatch)
    with pytest.raises(RuntimeError, match="OUT_OF_MEMORY"):
        B._allocate(_Dev(["CUDA_ERROR_OUT_OF_MEMORY"] * 2), 64, None)
    assert freed == ["cupy"]
    with pytest.raises(RuntimeError, match="INVALID_VALUE"):
        B._allocate(_Dev(["CUDA_ERROR_INVALID_VALUE"]), 64, None)
    assert freed == ["cupy"]  # nothing released for an error that is not memory


def test_without_a_framework_loaded_nothing_is_retried(monkeypatch):
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    dev = _Dev(["CUDA_ERROR_OUT_OF_MEMORY"])
    with pytest.raises(RuntimeError, match="OUT_OF_MEMORY"):
        B._allocate(dev, 64, None)
    assert dev.calls == 1
