"""CUPTI features by the library loaded, on a real GPU (issue 16).

Runs with whatever CUPTI the environment gives; set ``GCX_EXPECT_CUPTI`` (e.g. ``13.0``
for PyTorch's CUPTI with cupti-python 13.0.1, ``13.4`` with cupti-python 13.4.0 and
nvidia-cuda-cupti 13.4.92) to also check that the run loaded the CUPTI it was meant to.
With every CUPTI 13.x, each kernel of the PyTorch pair lands in its partition with the
partition's SM count; the TPC map and PM sampling work or refuse in one sentence.
"""

from __future__ import annotations

import os

import pytest

import gcexplore
from gcexplore.analysis import trace as busy
from gcexplore.results.validate import ResultError

pytestmark = pytest.mark.gpu


def _trace_pair(*, n: int, mib: int, repeats: int):
    """The PyTorch pair at 24 + rest, every mode, traced on fresh contexts (as bench/cupti_features.py runs it)."""
    from gcexplore.workloads.torch_pairs import matmul_sigmoid

    gcexplore.release_contexts()  # new contexts, so CUPTI reports their creation
    return gcexplore.profile_overlap(matmul_sigmoid(0, n=n, mib=mib), [24], repeats=repeats, warmup=1, trace=True)


@pytest.fixture(scope="module")
def pair():
    pytest.importorskip("torch")
    from gcexplore.trace import collector as tracing

    try:
        tracing.require_cupti()
    except gcexplore.TraceUnavailable as e:
        pytest.skip(str(e))
    df, tr = _trace_pair(n=4096, mib=128, repeats=3)
    print("\n", tr.attrs["cupti_version"], tr.attrs["cupti_refused"], "\n", busy.attribution(df, tr).to_string())
    return df, tr


def test_the_loaded_cupti_is_recorded_and_is_the_one_expected(pair):
    _, tr = pair
    info = tr.attrs["cupti"]
    assert info["library"] and "libcupti" in info["library"] and info["version"], info
    expect = os.environ.get("GCX_EXPECT_CUPTI")
    if expect:
        assert info["version"].startswith(expect + "."), (expect, tr.attrs["cupti_version"])


def test_every_kernel_of_the_torch_pair_lands_in_its_partition_with_its_sm_count(pair):
    df, tr = pair
    table = busy.attribution(df, tr)
    assert set(table["mode"]) == set(df["mode"]) and (table["kernels"] > 0).all(), table
    assert (table["right_pct"] == 100).all(), table
    total = gcexplore.device_info(0).sm_count
    conc = table[table["mode"] == "concurrent"].set_index("workload")
    assert conc.loc["sigmoid", "sm_count"] + conc.loc["matmul", "sm_count"] == total, conc
    # CUPTI's own context records (CONTEXT on 13.0, GREEN_CONTEXT on 13.2+) give the same SM counts
    assert dict(zip(conc["partition"], conc["cupti_sm_count"])) == {"p0": 24, "remainder": total - 24}, conc
    d = tr.attrs["trace_diagnostics"]
    assert d.get("unknown_context", 0) == 0 and d.get("partition_mismatch", 0) == 0, d


def test_tpc_map_works_or_refuses_in_the_recorded_sentence(pair):
    _, tr = pair
    refused = tr.attrs["cupti_refused"].get("tpc_map")
    if refused is None:
        per = busy.tpc_map(tr).groupby("partition")["tpc"].nunique().to_dict()
        assert 2 * per["p0"] == 24 and per["p0"] + per["remainder"] == gcexplore.device_info(0).sm_count // 2, per
        return
    assert tuple(int(p) for p in tr.attrs["cupti"]["version"].split(".")[:2]) < (13, 4)
    assert "needs CUPTI 13." in refused and 'pip install "cupti-python>=13.4"' in refused
    with pytest.raises(ResultError) as e:
        busy.tpc_map(tr)
    assert str(e.value) == refused


def test_dram_timeline_refuses_in_one_sentence_where_the_cupti_lacks_pm_sampling(pair):
    _, tr = pair
    refused = tr.attrs["cupti_refused"].get("pm_sampling")
    if refused is None:
        pytest.skip(f"{tr.attrs['cupti_version']} offers PM sampling: tests/test_pm_gpu.py measures it")
    with pytest.raises(gcexplore.TraceUnavailable) as e:  # as bench/cupti_features.py's what_refuses asks
        gcexplore.dram_timeline({"m24": "memory", "m108": "memory"}, [24], repeats=1, warmup=0)
    text = f"refused: {e.value}"
    assert text.startswith("refused: PM sampling (dram_timeline) needs CUPTI 13."), text
    assert text.count(". ") == 0, text
