"""Cutting a campaign's tasks finer (a layout each) and their order: a pure function, no cluster."""

from __future__ import annotations

import pytest

from gcexplore.campaigns.dispatch import cut_layouts, task_seconds
from gcexplore.campaigns.grid import plan_tasks

PAIRS = [["compute", "memory"], ["compute", "copy"]]


def test_every_task_of_several_sizes_becomes_one_per_layout_with_the_keys_of_one_size_split_sets():
    tasks, _ = plan_tasks("sweep", PAIRS, [[8, 16, 24], [32], None])
    cut, parents, seconds = cut_layouts(tasks)
    one_size, _ = plan_tasks("sweep", PAIRS, [[8], [16], [24], [32], None])
    assert set(cut) == set(one_size) and all(cut[k] == one_size[k] for k in cut)
    whole = {k for k, t in tasks.items() if t["split_set"] in ("32", "all")}
    assert whole <= set(cut) and not whole & set(parents)  # one size, or every valid size: left whole
    assert sorted(set(parents.values())) == sorted(k for k in tasks if tasks[k]["split_set"] == "8,16,24")
    for k, p in parents.items():  # a piece takes its share of its task's estimated time
        assert seconds[k] == pytest.approx(task_seconds(tasks)[p] / 3)
    order = list(cut)
    assert order == sorted(cut, key=lambda k: (-seconds[k], k))  # longest first, ties by key
    assert cut[order[0]]["split_set"] == "all"  # every valid size (16 layouts estimated) is the longest


def test_first_cuts_only_that_many_of_the_longest_and_known_durations_order_them():
    tasks, _ = plan_tasks("sweep", PAIRS, [[8, 16], [24, 32, 40]])
    keys = {(t["pair"], t["split_set"]): k for k, t in tasks.items()}
    known = {keys[("compute+memory", "8,16")]: 9.0, keys[("compute+copy", "8,16")]: 1.0,
             keys[("compute+memory", "24,32,40")]: 6.0, keys[("compute+copy", "24,32,40")]: 3.0}
    cut, parents, seconds = cut_layouts(tasks, known, first=2)
    assert set(parents.values()) == {keys[("compute+memory", "8,16")], keys[("compute+memory", "24,32,40")]}
    assert [seconds[k] for k in cut] == [4.5, 4.5, 3.0, 2.0, 2.0, 2.0, 1.0]  # 9/2 twice, the 3-s task, 6/3 ...
    assert [cut[k]["split_set"] for k in cut][2] == "24,32,40"  # kept whole: not among the 2 longest
    assert cut_layouts(tasks, known, first=0)[0].keys() == tasks.keys()


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_a_bad_count_is_refused(bad):
    tasks, _ = plan_tasks("sweep", PAIRS, [[8, 16]])
    with pytest.raises(ValueError, match="how many of the longest tasks"):
        cut_layouts(tasks, first=bad)


def test_campaign_refuses_a_bad_cut_before_anything(tmp_path):
    import gcexplore as gx

    with pytest.raises(ValueError, match="cut is None, 'layouts'"):
        gx.campaign(PAIRS, [[8, 16]], folder=tmp_path / "c", cut="all", progress=False)
    with pytest.raises(ValueError, match="cards='any' only"):
        gx.campaign(PAIRS, [[8, 16]], folder=tmp_path / "c", cut="layouts", cards="each", progress=False)
    assert not (tmp_path / "c").exists()
