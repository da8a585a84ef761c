"""The user's guide, the measurements record and the contract hold what they claim.

- Every line of docs/guide.md and docs/measurements.md is under 120 characters (a measurements table row,
  which cannot wrap, excepted), and the guide's contents list names each of its sections in order.
- The guide's facts tables are recomputed here from the recorded results they name.
- docs/contract.md names exactly the result kinds of ``gcexplore.schema``, the identity columns in their
  order, and, in each kind's section, every column of that kind in the schema's order.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import gcexplore
from gcexplore import schema

DOCS = Path(__file__).resolve().parents[1] / "docs"
LIMIT = 120


def _text(name: str) -> str:
    return (DOCS / name).read_text()


@pytest.mark.parametrize("name", ["guide.md", "measurements.md"])
def test_every_line_is_under_the_limit(name):
    long = [(i, len(line)) for i, line in enumerate(_text(name).splitlines(), 1) if len(line) >= LIMIT
            and not (name == "measurements.md" and line.startswith("|"))]
    assert long == [], f"{name}: lines (number, length) at or over {LIMIT} characters: {long[:10]}"


def _slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_contents_list_names_every_section_in_order():
    text = _text("guide.md")
    contents = text.split("## Contents", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"\]\(#([\w-]+)\)", contents)
    sections = [_slug(h) for h in re.findall(r"^## (.+)$", text, re.M) if h != "Contents"]
    assert listed == sections


def _card(df) -> str:
    return df.attrs["device_name"].replace("NVIDIA ", "").replace(" 80GB HBM3", "")


def test_the_best_split_table_is_the_recorded_sweeps():
    guide = _text("guide.md")
    names = re.findall(r"^\| `(\w+)` \| \w+ \| \d+\+\d+ \|", guide, re.M)
    assert {"sweep", "torch_sweep"} <= set(names)
    for name in names:
        df = gcexplore.load_recorded(name)
        b = gcexplore.best_split(df)
        row = (f"| `{name}` | {_card(df)} | {b['layout']} | {b['concurrent_ms']:.3f} | "
               f"{b['speedup_vs_sequential']:.2f} | {b['speedup_vs_streams']:.2f} | {b['efficiency']:.0%} |")
        assert row in guide, row


def test_the_isolation_table_is_the_recorded_isolation():
    guide = _text("guide.md")
    iso = gcexplore.load_recorded("isolation")
    assert f"(`isolation`, {_card(iso)})" in guide
    s = gcexplore.summarize(iso).set_index(["role", "scenario"])
    for role in ("critical", "background"):
        r = s.loc[role]
        row = (f"| {role} | {r.loc['partitioned', 'workload']} | {r.loc['streams', 'slowdown_vs_alone']:.3g}x | "
               f"{r.loc['partitioned', 'slowdown_vs_alone']:.3g}x | {int(r.loc['partitioned', 'sm_count'])} |")
        assert row in guide, row


# ------------------------------------------------------------------------------- the contract

CONTRACT = _text("contract.md")
FRAMES = CONTRACT.split("## DataFrames", 1)[1].split("\n## Recorded results", 1)[0]


def _sections() -> dict[str, str]:
    """kind -> the text of its ``### ... (kind "...")`` section (a section may hold two kinds)."""
    out = {}
    for head, body in re.findall(r"^### (.+?)\n(.*?)(?=^### |\Z)", FRAMES, re.M | re.S):
        for kind in re.findall(r'"(\w+)"', head.split("kind", 1)[-1]):
            out[kind] = body
    return out


def _expand(text: str) -> str:
    """``grid_x/y/z`` -> ``grid_x`` ``grid_y`` ``grid_z``, as the columns are named."""
    return re.sub(r"`(\w+)_x/y/z`", lambda m: " ".join(f"`{m.group(1)}_{a}`" for a in "xyz"), text)


def test_the_contract_lists_the_schemas_kinds():
    listed = re.findall(r'"(\w+)"', FRAMES.split("`kind` (", 1)[1].split(")", 1)[0])
    assert sorted(listed) == sorted(schema.COLUMNS)
    assert sorted(_sections()) == sorted(schema.COLUMNS)


def test_the_contract_names_the_identity_columns_in_order():
    para = FRAMES.split("The identity of a run is one list", 1)[1].split("The measurement", 1)[0]
    assert re.findall(r"`(\w+)`", para.split(":", 1)[1]) == list(schema.IDENTITY_COLUMNS)
    assert "l2_bytes" not in CONTRACT


def test_the_contract_says_which_kinds_carry_the_whole_identity():
    para = FRAMES.split("The identity of a run is one list", 1)[1]
    full = re.findall(r"\w+", para.split("The measurement\nkinds (", 1)[1].split(")", 1)[0])
    sample = re.findall(r"\w+", para.split("the per-sample kinds (", 1)[1].split(":", 1)[0])
    whole = sorted(k for k, cols in schema.COLUMNS.items() if set(schema.IDENTITY_COLUMNS) <= set(cols))
    assert sorted(full) == whole
    assert sorted(sample) == sorted(set(schema.COLUMNS) - set(whole))
    for kind in sample:
        assert [c for c in schema.COLUMNS[kind] if c in schema.IDENTITY_COLUMNS] == ["device_name", "run_id"]


@pytest.mark.parametrize("kind", sorted(schema.COLUMNS))
def test_each_kinds_section_names_its_columns_in_order(kind):
    body = _expand(_sections()[kind])
    named = re.findall(r"`(\w+)`", body)
    identity = set(schema.IDENTITY_COLUMNS)
    want = [c for c in schema.COLUMNS[kind] if c not in identity]  # the identity: one paragraph for all
    missing = [c for c in want if c not in named]
    assert missing == [], f"the contract's {kind} section does not name {missing}"
    # in the schema's order: the columns are a subsequence of the names (a column may be mentioned earlier too)
    it = iter(named)
    out_of_order = [c for c in want if c not in it]
    assert out_of_order == [], f"the {kind} section names these out of the schema's order: {out_of_order}"
