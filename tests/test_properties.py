"""Property-based tests (hypothesis): split planning, and save/load round trips of every
result kind."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import _synthetic as S
import gcexplore
from gcexplore.results import io as R
from gcexplore.schema import parse_layout

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@st.composite
def devices(draw):
    alignment = draw(st.sampled_from([1, 2, 4, 8]))
    min_size = alignment * draw(st.integers(1, 2))
    sm = draw(st.integers(2 * min_size, 264))
    return gcexplore.DeviceInfo(name="described GPU", index=0, compute_capability=(9, 0), sm_count=sm,
                                min_partition_size=min_size, alignment=alignment, driver_version=13000)


@given(devices(), st.lists(st.integers(-4, 300), min_size=1, max_size=4), st.sampled_from(["up", "down", "exact"]))
@settings(max_examples=300, deadline=None)
def test_a_plan_is_valid_or_refused_with_the_valid_sizes(info, counts, rounding):
    try:
        plan = gcexplore.plan_split(info, counts, rounding=rounding)
    except ValueError as e:
        assert info.name in str(e) or "SM counts must be positive" in str(e)
        return
    valid = set(info.valid_sm_counts())
    for g in plan.groups:
        assert g.granted in valid
        assert g.granted % info.alignment == 0 and g.granted >= info.min_partition_size
        if rounding == "up":
            assert g.requested <= g.granted < max(g.requested, info.min_partition_size) + info.alignment
        elif rounding == "down":
            assert g.requested - info.alignment < g.granted <= g.requested
        else:
            assert g.granted == g.requested
    assert sum(plan.granted) + plan.remainder == info.sm_count and plan.remainder >= 0
    assert sum(parse_layout(plan.label)) == info.sm_count


@given(devices(), st.lists(st.floats(allow_nan=True), min_size=1, max_size=3))
@settings(max_examples=50, deadline=None)
def test_floats_are_never_truncated_to_sm_counts(info, counts):
    with pytest.raises(TypeError, match="SM counts must be ints"):
        gcexplore.plan_split(info, counts)


_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12)
_FLOATS = st.one_of(st.floats(allow_nan=False, allow_infinity=False, width=64), st.just(math.nan),
                    st.sampled_from([5e-324, 1e308, -1e308, 1e-300]))


@st.composite
def results(draw):
    kind = draw(st.sampled_from(["sweep", "scaling", "isolation", "occupancy"]))
    df = {"sweep": S.sweep_df(splits=[8]), "scaling": S.scaling_df(), "isolation": S.isolation_df(),
          "occupancy": S.occupancy_df()}[kind].head(12).copy()
    names = draw(st.lists(_TEXT, min_size=1, max_size=3, unique=True))
    df["workload"] = [names[i % len(names)] for i in range(len(df))]
    if "partition" in df and kind == "sweep":
        df["partition"] = [f"p{i % len(names)}" if i % len(names) < len(names) - 1 else "remainder"
                           for i in range(len(df))]
    floats = [c for c in df.columns if str(df[c].dtype) == "float64"]
    for c in floats:
        df[c] = [draw(_FLOATS) for _ in range(len(df))]
    if "requested_sm_count" in df:
        df["requested_sm_count"] = pd.array([draw(st.one_of(st.none(), st.integers(1, 132)))
                                             for _ in range(len(df))], dtype="Int64")
    df.attrs["note"] = draw(_TEXT)
    df.attrs["nested"] = {"sizes": (8, 124), "ratio": draw(st.floats(allow_nan=False, allow_infinity=False))}
    return df


@given(results(), st.sampled_from(["parquet", "csv"]), _TEXT.filter(lambda t: "/" not in t and t not in (".", "..")))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_save_then_load_gives_back_rows_dtypes_and_attrs(tmp_path, df, fmt, stem):
    path = tmp_path / f"{stem.strip() or 'r'}.{fmt}"
    back = R.load(R.save(df, path))
    pd.testing.assert_frame_equal(back, df, check_exact=True)
    assert back.attrs == {**df.attrs, "recorded": True}


def test_device_info_can_be_described_for_planning_without_a_gpu():
    h800 = gcexplore.DeviceInfo(name="NVIDIA H800", index=0, compute_capability=(9, 0), sm_count=132,
                                min_partition_size=8, alignment=8, driver_version=13000)
    assert gcexplore.plan_split(h800, [20]).label == "24+108"  # 20 SMs is granted as 24
    assert gcexplore.plan_split(dataclasses.replace(h800, alignment=4), [20]).label == "20+112"
