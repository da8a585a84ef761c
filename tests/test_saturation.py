"""The polite reference of the saturation term: a co-runner's aggression placed between the two references'."""

from __future__ import annotations

import math

import pytest

from gcexplore.prediction import saturation as SAT


def test_a_co_runner_as_polite_as_the_polite_reference_gives_the_polite_probes_excess_and_the_copy_the_copys():
    refs = (2.3, 1.0)  # (copy, polite) aggressions
    assert SAT.polite_weight(1.0, refs) == 0.0 and SAT.polite_weight(2.3, refs) == 1.0
    assert SAT.polite_weight(1.65, refs) == pytest.approx(0.5)
    assert SAT.polite_weight(0.8, refs) == 0.0 and SAT.polite_weight(3.0, refs) == 1.0  # clipped
    assert SAT.polite_weight(math.nan, refs) == 1.0 and SAT.polite_weight(1.2, (math.nan, 1.0)) == 1.0  # unknown
    # a victim with excess 2.0 beside the copy and 1.2 beside the polite streamer, the co-runner drawing all of DRAM
    speed = lambda aggr, polite: SAT.saturation_speeds([1.0, 1.0], [100.0, 1000.0], [2.0, 1.0], [1.0, aggr], [
        math.nan, math.nan], 1000.0, 0.5, polite=polite, refs=[refs, refs])[0]  # noqa: E731
    assert speed(2.3, None) == pytest.approx(1 / 2.0)  # without the term: the copy's excess whatever the co-runner
    assert speed(2.3, [1.2, math.nan]) == pytest.approx(1 / 2.0)  # beside a copy-like co-runner: the copy's
    assert speed(1.0, [1.2, math.nan]) == pytest.approx(1 / 1.2)  # beside a polite one: the polite probe's
    assert speed(1.65, [1.2, math.nan]) == pytest.approx(1 / 1.6)  # halfway: halfway
    assert speed(1.0, [math.nan, math.nan]) == pytest.approx(1 / 2.0)  # not probed beside it: the copy's


def test_the_polite_probes_excess_reads_its_own_columns_and_is_nan_without_them_or_for_a_memory_bound_one():
    probe = {"probe_polite_sm_count": 64.0, "probe_polite_ms": 1.5, "probe_polite_alone_ms": 1.0,
             "probe_polite_copy_ms": 2.0, "probe_polite_copy_alone_ms": 2.0, "probe_polite_bytes": 0.0}
    assert SAT.polite_excess(probe, lambda k: 0.0, 3000.0) == pytest.approx(1.5)  # nothing shared: all of it excess
    assert math.isnan(SAT.polite_excess({}, lambda k: 0.0, 3000.0))
    # a memory-bound workload keeps the copy's excess: the polite reference does not say what two streamers do
    assert math.isnan(SAT.polite_excess(probe, lambda k: 0.0, 3000.0, "memory"))
    assert SAT.polite_excess(probe, lambda k: 0.0, 3000.0, "compute") == pytest.approx(1.5)
    assert all(math.isnan(a) for a in SAT.reference_aggressions({}, 3000.0))


def test_settings_of_the_polite_term_that_do_not_exist_are_refused_with_what_is_valid():
    with pytest.raises(ValueError, match="saturation_polite must be True or False"):
        SAT.check_saturation(0.5, "flat", "others", None, "fitted", "yes")
    import gcexplore as gx

    with pytest.raises(ValueError, match="probe must be False, True or 'polite'"):
        gx.solo_profile("memory", probe="copy")
