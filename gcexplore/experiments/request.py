"""Which sizes an experiment may measure, checked before anything is compiled or allocated.

Pure functions over a :class:`gcexplore.DeviceInfo` and the request: the sizes a sweep
or a scaling run covers, whether the workloads fit a split's partitions, whether a
Partitioning handed in can be used. Each error names what is valid.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from .._checks import as_int
from ..device.driver import DeviceInfo, plan_split

__all__ = ["MAX_TUNE_COMBINATIONS", "as_sizes", "check_enumeration", "check_partitioning", "fit_workloads",
           "scaling_sizes", "sweep_sizes"]

#: Most combinations of partition sizes the tuner enumerates (5 workloads on an H100:
#: 16 x 16**3 = 65,536, about a second); 7 would be 16**6, minutes before any measurement.
MAX_TUNE_COMBINATIONS = 100_000


def check_enumeration(info: DeviceInfo, n_workloads: int, n_firsts: int, others) -> None:
    """ValueError, before anything is enumerated, when searching every middle size of
    ``n_workloads`` workloads would mean more than :data:`MAX_TUNE_COMBINATIONS` size combinations."""
    if others is not None or n_workloads < 3:
        return
    n = n_firsts * len(info.valid_sm_counts()) ** (n_workloads - 2)
    if n > MAX_TUNE_COMBINATIONS:
        raise ValueError(
            f"tuning {n_workloads} workloads with every middle partition size searched means {n:,} combinations "
            f"of sizes on {info.name} (the limit is {MAX_TUNE_COMBINATIONS:,}); fix the middle workloads' sizes "
            "with others= (--others), give fewer first sizes (sm_counts=, --sizes), or tune fewer workloads")


def fit_workloads(plan, n_workloads: int) -> None:
    """ValueError unless ``n_workloads`` fit the partitions of ``plan``.

    Workloads go on the requested groups in order; the remainder takes the last one
    when the split names one group fewer than there are workloads.
    """
    groups = len(plan.groups)
    if n_workloads <= groups or (n_workloads == groups + 1 and plan.remainder > 0):
        return
    have = f"{groups} group(s) {plan.granted}" + (f" plus a remainder of {plan.remainder} SMs"
                                                 if plan.remainder else " and no remainder")
    raise ValueError(
        f"{n_workloads} workloads but the split {plan.requested} on {plan.info.name} gives {have}; "
        f"give {n_workloads - 1} or {n_workloads} SM counts (the remainder takes the last workload "
        "when there is one fewer count than workloads)")


def check_partitioning(parts, info: DeviceInfo) -> None:
    if parts.is_closed:
        raise ValueError(f"the Partitioning {parts.label} is closed; make a new one with gcexplore.split()")
    if parts.info.index != info.index:
        raise ValueError(f"split is a Partitioning of device {parts.info.index} ({parts.info.name}) but "
                         f"device={info.index}; pass device={parts.info.index}")


def as_sizes(name: str, values) -> list[int]:
    if isinstance(values, bool) or not isinstance(values, (Sequence, int)) or isinstance(values, str):
        if not hasattr(values, "__index__"):
            raise TypeError(f"{name} must be an int or a sequence of ints, got {values!r}")
    one = hasattr(values, "__index__") and not isinstance(values, Sequence)
    seq = [values] if one else list(cast(Sequence, values))
    return [as_int(f"{name} entry", v) for v in seq]


def sweep_sizes(info: DeviceInfo, n_workloads: int, sm_counts, others: Sequence[int],
                 rounding: str = "up") -> list[int]:
    """First-partition sizes a sweep measures; ValueError naming the valid sizes otherwise."""
    if n_workloads < 2:
        raise ValueError(f"a sweep needs at least two workloads (the first on k SMs, the last on "
                         f"the rest), got {n_workloads}")
    others = as_sizes("others", others)
    if len(others) != n_workloads - 2:
        raise ValueError(
            f"{n_workloads} workloads need {n_workloads - 2} fixed size(s) in others= for the "
            f"middle workload(s) (the first is swept, the last takes the remainder), got {others}")
    valid = []
    for k in info.valid_sm_counts():
        try:
            plan = plan_split(info, [k, *others], rounding=rounding)
        except ValueError:
            continue
        if plan.remainder > 0:
            valid.append(k)
    if not valid:
        raise ValueError(f"no first-partition size leaves a remainder on {info.name} with others={others}")
    if sm_counts is None:
        return valid
    sizes = as_sizes("sm_counts", sm_counts)
    bad = [k for k in sizes if k not in valid]
    if bad or not sizes:
        raise ValueError(
            f"cannot sweep first-partition size(s) {bad or sizes} on {info.name} ({info.sm_count} SMs): "
            f"valid sizes (leaving SMs for the last workload) are {', '.join(map(str, valid))}")
    return list(dict.fromkeys(sizes))


def scaling_sizes(info: DeviceInfo, sm_counts) -> list[int]:
    valid = info.valid_sm_counts()
    if sm_counts is None:
        return list(valid)
    sizes = as_sizes("sm_counts", sm_counts)
    bad = [k for k in sizes if k not in valid]
    if bad or not sizes:
        raise ValueError(f"cannot time {bad or sizes} SMs on {info.name} ({info.sm_count} SMs); "
                         f"valid partition sizes are {', '.join(map(str, valid))}")
    return sizes
