"""Shared fixtures: GPU detection for the `gpu` and `multigpu` markers."""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path

import pytest

# The synthetic frames' card (tests/_compare_data.py) has a floor by construction: no run offset unless a
# test sets one. Recorded here (and for the CLI's subprocesses) so that only tests naming a card of their
# own meet the default floor with its run part (issue 46).
os.environ.setdefault("GCEXPLORE_NOISE_FLOOR", str(Path(__file__).parent / "data" / "noise_floor_synthetic.csv"))

# The GPU image may carry two CUPTI libraries (PyTorch's 13.0 and a newer one brought for
# cupti-python 13.4); the first one a process loads serves it, and only 13.2+ reports
# green-context records. Load the newest first, as gcexplore does.
with contextlib.suppress(Exception):
    from gcexplore.trace.collector import preload_cupti

    preload_cupti()


@functools.lru_cache(maxsize=None)
def _gpu_state() -> tuple[int, str]:
    """(number of usable devices, reason when there are none)."""
    import gcexplore

    try:
        n = gcexplore.device_count()
    except gcexplore.UnsupportedError as e:
        return 0, str(e)
    if n == 0:
        return 0, "the CUDA driver sees no device"
    try:
        gcexplore.device_info(0).require("green_context_streams")
    except gcexplore.UnsupportedError as e:
        return 0, str(e)
    return n, ""


def _short(reason: str) -> str:
    """The first clause of a driver message (what is missing), not its advice: one short skip reason."""
    return reason.split(";")[0].split(": ")[0].strip()


def pytest_collection_modifyitems(config, items):
    # the modules holding slow tests first (each module's tests kept together, in order): with -n the
    # workers take the long tests at the start and share the short ones at the end, instead of one
    # worker finishing a long test alone
    slow = {item.module for item in items if "slow" in item.keywords}
    items.sort(key=lambda item: item.module not in slow)
    n, reason = _gpu_state()
    for item in items:
        if "gpu" in item.keywords and n < 1:
            item.add_marker(pytest.mark.skip(reason=f"needs a CUDA GPU ({_short(reason)})"))
        elif "multigpu" in item.keywords and n < 2:
            item.add_marker(pytest.mark.skip(reason=f"needs two CUDA GPUs, found {n}"
                                                    + (f" ({_short(reason)})" if reason else "")))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker more than the cores. Some tests wait more than they compute (pip resolving
    against the registry, Dask clusters and notebook kernels starting, subprocesses of the command line);
    on a 2-core machine two workers left a core idle 8% of the suite, a third fills it."""
    return (os.cpu_count() or 1) + 1


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """With ``-n``, an idle worker takes tests queued on a busy one (pytest-xdist's work stealing) instead
    of waiting while the other finishes its share; ``--dist`` given otherwise is kept."""
    if config.getvalue("dist") == "load":
        from xdist.scheduler import WorkStealingScheduling

        return WorkStealingScheduling(config, log)
    return None


@pytest.fixture
def info():
    """DeviceInfo of device 0 (GPU tests only)."""
    import gcexplore

    return gcexplore.device_info(0)


@pytest.fixture
def h100_like():
    """A hand-built DeviceInfo with the H100's measured facts, for pure planning tests."""
    import gcexplore

    return gcexplore.DeviceInfo(
        name="NVIDIA H100 80GB HBM3", index=0, compute_capability=(9, 0), sm_count=132,
        min_partition_size=8, alignment=8, driver_version=13000,
    )


def pytest_terminal_summary(terminalreporter):
    """A skipped real-browser test is said at the end, apart from the GPU skips, with how to run it."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if "browser" in getattr(r, "keywords", {})]
    if skipped:
        reason = skipped[0].longrepr[2] if isinstance(skipped[0].longrepr, tuple) else str(skipped[0].longrepr)
        terminalreporter.write_sep("=", "the real-browser test did not run", yellow=True)
        terminalreporter.write_line(f"{len(skipped)} browser test(s) skipped: {reason.removeprefix('Skipped: ')}")
        terminalreporter.write_line(".ci/browser-setup installs Debian's Chromium and the browser extra "
                                    "(JupyterLab, Playwright); CI runs it there")
