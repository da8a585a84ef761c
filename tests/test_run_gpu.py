"""One live sweep read by every reader of the run: the explorer, the text report and compare agree on
its best split and its bound, and its identity names the card it ran on (GPU)."""

from __future__ import annotations

import pytest

import gcexplore
from gcexplore import workloads as W

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def live():
    pair = {"compute": W.compute(), "memory": W.memory()}
    try:
        df = gcexplore.sweep(pair, [16, 48, 80, 112], repeats=8, warmup=2, progress=False)
    finally:
        for w in pair.values():
            w.close()
    return df


def test_the_run_names_the_card_it_ran_on(live, info, tmp_path):
    from cuda.core import Device

    from gcexplore.results.run import run_of
    from gcexplore.schema import IDENTITY

    ident = run_of(live).identity
    assert ident["device_uuid"] == str(Device(info.index).uuid)  # the driver API read, as cuda.core reads it
    assert ident["pci_bus_id"] and ident["l2_cache_bytes"] > 0 and ident["device_sm_count"] == info.sm_count
    assert ident["host"] and ident["options"].startswith("repeats=8, warmup=2")
    for f in IDENTITY:  # every row carries the whole identity, one value per run
        assert live[f.name].astype(str).nunique() == 1, f.name
    back = gcexplore.load(gcexplore.save(live, tmp_path / "run.parquet"))
    assert run_of(back).identity == ident


def test_explorer_report_and_compare_agree_on_one_live_sweep(live):
    from gcexplore.explorers.sweep_explorer import SweepExplorer
    from gcexplore.views.report import layout_report

    best = gcexplore.best_split(live)
    sx = SweepExplorer.from_results(live)
    assert sx.layout == best["layout"] and sx.last_error is None
    conc = sx.figures["summary"].query("mode == 'concurrent'")
    assert (conc["lower_bound_ms"] == best["lower_bound_ms"]).all()
    assert (conc["efficiency"] == best["efficiency"]).all()
    text = layout_report(live)
    starred = [line for line in text.splitlines() if line.lstrip().startswith("*")]
    assert len(starred) == 1 and best["layout"] in starred[0]
    assert f"{best['lower_bound_ms']:.3f} ms" in text
    twin = live.copy()
    twin["run_id"] = "twin"
    c = gcexplore.compare(live, twin)
    assert c.best["a"]["layout"] == c.best["b"]["layout"] == best["layout"]
    n = c.counts()  # the same repetitions on both sides: no difference can be decided
    assert c.best["moved"] is False and n["FAST"] == n["SLOW"] == 0 and c.settings["compared"] > 0
    med = c.curves.query("side == 'a' and group == 'concurrent' and layout == @best['layout']")["median_ms"]
    assert float(med.iloc[0]) == pytest.approx(best["concurrent_ms"], rel=1e-9)
