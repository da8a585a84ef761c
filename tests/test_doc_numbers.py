"""Numbers the docs state, recomputed from the shipped data with today's code (issue 46): the guide's
calibration block (bench/compare_real.py's recorded H100 run) and the README's context-leak sentence.
A rate that drifts from its recomputation fails here, naming both."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "gcexplore" / "data" / "calibration"


def _block() -> str:
    """The calibration block, wherever the docs keep it (between its two markers)."""
    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text()
        m = re.search(r"<!-- calibration:.*?-->(.*?)<!-- /calibration -->", text, re.S)
        if m:
            return " ".join(m.group(1).split())
    pytest.fail("no <!-- calibration --> block in docs/")


@pytest.fixture(scope="module")
def recomputed():
    from gcexplore.analysis.sequential import recompute_frames

    recorded = json.loads((DATA / "compare_real.json").read_text())
    return recompute_frames(pd.read_parquet(DATA / "compare_real_raw.parquet"),
                            min_effect=recorded["args"]["min_effect"], warmup=recorded["args"]["warmup"])


def _pooled(rates: dict, kinds) -> dict:
    """Rates of several kinds together (each rate is a mean over rows or pairs: weighted by their count)."""
    def mean(key, by):
        n = sum(rates[k][by] for k in kinds)
        return sum(rates[k][key] * rates[k][by] for k in kinds) / n
    return {"null_rows": sum(rates[k]["null_rows"] for k in kinds),
            "null_comparisons": sum(rates[k]["null_comparisons"] for k in kinds),
            "shift_rows": sum(rates[k]["shift_rows"] for k in kinds),
            **{key: mean(key, "null_rows") for key in ("new_false_decisions", "old_false_decisions")},
            **{key: mean(key, "shift_rows") for key in ("new_power", "old_power", "new_wrong_way")},
            "new_false_gate": mean("new_false_gate", "null_comparisons"),
            "new_gate_unsure": mean("new_gate_unsure", "null_comparisons")}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def test_the_guides_calibration_rates_are_todays_recomputation(recomputed):
    text = _block()
    kinds = [k for k in recomputed if k != "overall" and "@" not in k]
    one = _pooled(recomputed, kinds)
    gates = round(one["new_false_gate"] * one["null_comparisons"])
    unsure = round(one["new_gate_unsure"] * one["null_comparisons"])
    said = {
        "null": f"{one['null_comparisons']} null comparisons (the same work twice; {one['null_rows']} rows): "
                f"{_pct(one['new_false_decisions'])} of rows FAST or SLOW; `--fail-on-regression 2` exits 1 (a "
                f"regression) on {gates} of {one['null_comparisons']} and 3 (cannot rule one out) on {unsure}",
        "shift": f"{one['shift_rows']} rows with 3% more work",
        "power": f"SLOW at {_pct(one['new_power'])}, FAST at {_pct(one['new_wrong_way'])}",
        "per kind": "Power per kind: " + "; ".join(f"{k} {_pct(recomputed[k]['new_power'])}" for k in kinds) + ".",
        "old": f"{_pct(one['old_false_decisions'])} false FAST/SLOW, {_pct(one['old_power'])} power",
    }
    proc = [k for k in recomputed if k.endswith("@process")]
    if proc:
        p = recomputed[proc[0]]
        said["processes"] = (f"{_pct(p['new_false_decisions'])} false FAST/SLOW (old method "
                             f"{_pct(p['old_false_decisions'])}), false gate {round(p['new_false_gate'] * p['null_comparisons'])}"
                             f" of {p['null_comparisons']}, power {_pct(p['new_power'])}")
    missing = {what: s for what, s in said.items() if s not in text}
    assert not missing, "the guide's calibration block does not state today's recomputation:\n" + "\n".join(
        f"  {what}: recomputed {s!r}" for what, s in missing.items())


def test_the_readme_context_leak_sentence_multiplies_out():
    """The per-cycle leak the README states is its measured total over its cycles (4.9 MiB x 300 was
    1.4 GiB, not the 1.2 GiB measured); the code's comments say the same figure."""
    text = " ".join((ROOT / "README.md").read_text().split())
    m = re.search(r"(\d[\d,]*) create/destroy cycles lost ([\d.]+) (MiB|GiB).*?about ([\d.]+) MiB per cycle", text)
    assert m, "the README's context-leak sentence: its cycles, total and per-cycle figure"
    cycles, total, unit, per = int(m.group(1).replace(",", "")), float(m.group(2)), m.group(3), float(m.group(4))
    total_mib = total * (1024 if unit == "GiB" else 1)
    assert total_mib / cycles == pytest.approx(per, abs=0.05 + total_mib / cycles * 0.05 / total), (cycles, total, per)
    for module in ("device/green.py", "device/partitions.py"):
        said = set(re.findall(r"about ([\d.]+) MiB", (ROOT / "gcexplore" / module).read_text()))
        assert said == {m.group(4)}, (module, said)
