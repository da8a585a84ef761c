"""CUPTI features by the version of the library loaded (gcexplore/trace/features.py), from
stand-in CUPTI modules of each version: what is offered, what is refused and with which sentence."""

from __future__ import annotations

import _synthetic_trace as T
import pytest

import gcexplore
from gcexplore.analysis import trace as busy
from gcexplore.trace import collector as tracing
from gcexplore.trace import features as F
from gcexplore.results.validate import ResultError


@pytest.fixture(autouse=True)
def _fresh_context_records(monkeypatch):
    """Each fake CUPTI stands for a new process: no context records kept from an earlier test's fake
    (the collector keeps them per process, and the fakes reuse context ids)."""
    monkeypatch.setattr(tracing, "_CONTEXTS_SEEN", {})

LIB = "/env/site-packages/nvidia/cu13/lib/libcupti.so.13"


def _maps(tmp_path, *, cupti=True, cuda=True):
    lines = ["7f00-7f01 r-xp 0 00:00 0 /usr/lib/libc.so.6"]
    if cupti:
        lines.append(f"7f10-7f11 r-xp 0 00:00 0 {LIB}")
    if cuda:
        lines.append("7f20-7f21 r-xp 0 00:00 0 /usr/lib/x86_64-linux-gnu/libcuda.so.580.159")
    p = tmp_path / "maps"
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def _offers(tmp_path, **stand_in):
    info = F.describe(T.FakeCupti(**stand_in), maps=_maps(tmp_path))
    return info, F.offers(info)


def _one_sentence(text: str) -> None:
    assert text.endswith(".") and ". " not in text and "\n" not in text, text


@pytest.mark.parametrize(("api", "expected"), [(130001, (13, 0)), (130101, (13, 1)), (130202, (13, 2)),
                                               (130301, (13, 3)), (130401, (13, 4)), (130500, (13, 5)), (26, None)])
def test_api_numbers_of_each_release_read_as_major_minor(api, expected):
    assert F.version_from_api(api) == expected


def test_pytorch_cupti_13_0_traces_kernels_and_refuses_tpc_map_and_pm_sampling(tmp_path):
    # what pip installs beside PyTorch 2.14: cupti-python 13.0.1 over nvidia-cuda-cupti 13.0.85
    info, got = _offers(tmp_path, api=130001, package="13.0.1", green=False, pm=False)
    assert info.version[:2] == (13, 0) and info.library == LIB and info.how == "cuptiGetVersion 130001"
    assert got["kernel_trace"] is None
    tpc, pm = got["tpc_map"], got["pm_sampling"]
    for sentence in (tpc, pm):
        _one_sentence(sentence)
        assert "this process loaded CUPTI 13.0.0" in sentence and LIB in sentence
        assert 'pip install "cupti-python>=13.4" "nvidia-cuda-cupti>=13.4"' in sentence
        assert "LD_PRELOAD" in sentence
    assert tpc.startswith("the TPC map (GREEN_CONTEXT records with logical TPC masks) needs CUPTI 13.2 or newer")
    assert "cupti-python 13.0.1 has no API for it (cupti-python 13.2 adds it)" in tpc
    assert pm.startswith("PM sampling (dram_timeline) needs CUPTI 13.3 or newer")
    assert "cupti-python 13.0.1 has no API for it (cupti-python 13.3 adds it)" in pm


def test_new_package_over_the_frameworks_13_0_library_is_refused_by_the_library(tmp_path):
    # cupti-python 13.4 over PyTorch's libcupti 13.0: on the GPU, ERROR_NOT_COMPATIBLE / ERROR_INVALID_PARAMETER
    _, got = _offers(tmp_path, api=130001, package="13.4.0")
    assert got["kernel_trace"] is None
    for name in ("tpc_map", "pm_sampling"):
        _one_sentence(got[name])
        assert "needs CUPTI 13.4 or newer, but this process loaded CUPTI 13.0.0" in got[name]
        assert "has no API" not in got[name]


def test_13_2_offers_green_context_records_but_not_pm_sampling(tmp_path):
    _, got = _offers(tmp_path, api=130202, package="13.2.0", pm=False)
    assert got["kernel_trace"] is None and got["tpc_map"] is None
    assert got["pm_sampling"].startswith("PM sampling (dram_timeline) needs CUPTI 13.3 or newer")


def test_a_library_older_than_the_package_reads_is_named(tmp_path):
    _, got = _offers(tmp_path, api=130202, package="13.4.0")
    assert "needs CUPTI 13.4 or newer, but this process loaded CUPTI 13.2.0" in got["tpc_map"]
    assert "older than the cupti-python 13.4.0 that reads it" in got["tpc_map"]


@pytest.mark.parametrize("api", [130401, 130500])
def test_13_4_and_newer_offer_everything(tmp_path, api):
    _, got = _offers(tmp_path, api=api, package="13.4.0")
    assert got == {"kernel_trace": None, "tpc_map": None, "pm_sampling": None}


def test_an_unknown_version_still_traces_kernels_and_says_why_it_refuses_the_rest(tmp_path):
    class NoVersion(T.FakeCupti):
        get_version = None

    info = F.describe(NoVersion(), maps=_maps(tmp_path, cupti=False))
    assert info.version is None and info.library == ""
    got = F.offers(info)
    assert got["kernel_trace"] is None
    assert "this process loaded a CUPTI of unknown version" in got["tpc_map"]


def test_version_comes_from_the_owning_pip_package_when_cupti_cannot_be_asked(tmp_path, monkeypatch):
    class NoVersion(T.FakeCupti):
        get_version = None

    monkeypatch.setattr(F, "_owner_version", lambda path: "13.0.85" if path == LIB else None)
    info = F.describe(NoVersion(package="13.0.1", green=False), maps=_maps(tmp_path, cuda=False))
    assert info.version == (13, 0, 85) and info.how == "nvidia-cuda-cupti 13.0.85 owns the file"
    assert info.api_version is None  # no driver mapped: cuptiGetVersion is not called (13.2.86 crashed there)
    assert "this process loaded CUPTI 13.0.85" in F.offers(info)["tpc_map"]


def _trace_on(fake):
    """A traced pair through a collector over ``fake``, the contexts sent as CONTEXT records."""
    collector = tracing.Collector(cupti=fake).start()
    try:
        for name in ("p0", "remainder", "device"):
            collector.watch(T.PARTS[name])
        fake.context(T.P0_CTX, 24)
        fake.context(T.REM_CTX, 108)
        T.run_pair(collector, fake)
        return collector, collector.frame(T.S.attrs("overlap"))
    finally:
        collector.close()


def test_trace_on_cupti_13_0_attributes_every_kernel_and_tpc_map_says_why_not():
    fake = T.FakeCupti(api=130001, package="13.0.1", green=False, pm=False)
    _, tr = _trace_on(fake)
    assert 59 not in fake.enabled  # not asked for: CUPTI 13.0 has no GREEN_CONTEXT kind
    conc = tr[tr["mode"] == "concurrent"]
    assert len(conc) and set(zip(conc["workload"], conc["partition"], conc["sm_count"])) == {
        ("matmul", "p0", 24), ("sigmoid", "remainder", 108)}
    greens = {g["partition"]: g for g in tr.attrs["green_contexts"]}
    assert {p: (g["source"], g["num_multiprocessors"]) for p, g in greens.items() if p != "device"} == {
        "p0": ("CONTEXT", 24), "remainder": ("CONTEXT", 108)}
    assert tr.attrs["cupti"]["version"].startswith("13.0") and tr.attrs["cupti"]["package"] == "13.0.1"
    assert tr.attrs["cupti_version"].startswith("CUPTI 13.0") and "cupti-python 13.0.1" in tr.attrs["cupti_version"]
    assert set(tr.attrs["cupti_refused"]) == {"tpc_map", "pm_sampling"}
    with pytest.raises(ResultError) as e:
        busy.tpc_map(tr)
    assert str(e.value) == tr.attrs["cupti_refused"]["tpc_map"]
    _one_sentence(str(e.value))


def test_a_refused_green_context_kind_becomes_the_tpc_map_sentence():
    fake = T.FakeCupti(refuse_kinds={59})  # offered by version, refused by CUPTI when enabled
    _, tr = _trace_on(fake)
    sentence = tr.attrs["cupti_refused"]["tpc_map"]
    assert "refused GREEN_CONTEXT records (CUPTI_ERROR_NOT_COMPATIBLE)" in sentence
    _one_sentence(sentence)
    with pytest.raises(ResultError, match="refused GREEN_CONTEXT records"):
        busy.tpc_map(tr)


def test_trace_on_cupti_13_4_keeps_the_tpc_map():
    collector, _, _ = T.traced_pair()
    tr = collector.frame(T.S.attrs("overlap"))
    collector.close()
    assert tr.attrs["cupti_refused"] == {}
    assert set(busy.tpc_map(tr)["partition"]) == {"p0", "remainder"}


def test_a_cupti_older_than_13_refuses_trace_true_in_one_sentence(tmp_path, monkeypatch):
    monkeypatch.setattr(F, "loaded_libraries", lambda maps="": ({LIB}, True))
    monkeypatch.setattr(F, "_owner_version", lambda path: "12.8.90")
    with pytest.raises(gcexplore.TraceUnavailable, match=r"trace=True .* needs CUPTI 13\.0 or newer, but this "
                                                         r"process loaded CUPTI 12\.8\.90"):
        tracing.Collector(cupti=T.FakeCupti(api=26, package="13.0.1"))


def test_dram_timeline_refuses_before_its_child_when_cupti_python_has_no_pm_sampling(monkeypatch):
    from gcexplore.experiments import pm

    real = pm.importlib.util.find_spec
    monkeypatch.setattr(pm.importlib.util, "find_spec",
                        lambda name, *a: None if name == "cupti.pm_sampling" else real(name, *a))
    if real("cupti") is None:
        pytest.skip("cupti-python is not installed here")
    monkeypatch.setattr(pm, "_child_command", lambda *a: pytest.fail("the child must not start"))
    with pytest.raises(gcexplore.TraceUnavailable, match=r"PM sampling \(dram_timeline\) needs CUPTI 13\.\d or "
                                                         r"newer.*has no API for it"):
        gcexplore.dram_timeline({"a": "memory", "b": "memory"}, [24])
