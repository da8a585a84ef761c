"""Green contexts of one layout of a device: the driver split (one call, the structured split, or one
group at a time on driver 13.0), the contexts made over the groups and the remainder, and the pool
that keeps a closed layout's contexts for the next split of the same layout (driver 13.0 never
returns about 4.1 MiB per destroyed green context). :mod:`.partitions` wraps them in handles.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading

from .driver import DeviceInfo, GreenContextError, SplitPlan, UnsupportedError, use

__all__ = ["Layout", "close_each", "destroy_layout", "keep_layout", "new_layout", "release_contexts",
           "split_groups", "stream_factory", "take_layout"]


def close_each(items) -> list[Exception]:
    """Close every item, keeping on after a failure; return the errors."""
    errors = []
    for item in items:
        try:
            item.close()
        except Exception as e:
            errors.append(e)
    return errors


def split_groups(dev, info: DeviceInfo, granted: list[int], *, coscheduled):
    """Split the device's SMs into ``granted`` groups. Returns (groups, remainder, method, temps)."""
    from cuda.core import ContextOptions, SMResourceOptions

    full = dev.resources.sm
    if len(set(granted)) == 1 and coscheduled is None:
        groups, rem = full.split(SMResourceOptions(count=list(granted)))
        method = "single"
    elif info.features["structured_split"]:
        groups, rem = full.split(SMResourceOptions(count=list(granted), coscheduled_sm_count=coscheduled))
        method = "structured"
    else:
        # Driver 13.0: cuda.core refuses unequal counts in one split; split one group
        # at a time from what is left, so groups stay disjoint by construction.
        groups, rem, method, temps = [], full, "successive", []
        try:
            for g in granted:
                try:
                    (grp,), nxt = rem.split(SMResourceOptions(count=g))
                except Exception:
                    # Some drivers refuse to split a remainder directly; split it through
                    # a context made over it (kept alive until the partitioning closes).
                    ctx = dev.create_context(ContextOptions(resources=[rem]))
                    temps.append(ctx)
                    (grp,), nxt = ctx.resources.sm.split(SMResourceOptions(count=g))
                    method = "successive-via-context"
                groups.append(grp)
                rem = nxt
        except BaseException:
            close_each(temps)  # a later step failed: the temporary contexts would leak
            raise
        return list(groups), rem, method, temps
    return list(groups), rem, method, []


@dataclasses.dataclass
class Layout:
    """The green contexts of one split, kept together so they stay disjoint."""

    key: tuple
    contexts: list  # one per group, then the remainder's
    temps: list  # contexts made only to split a remainder further
    method: str
    sm_counts: list[int]
    sm_ids: list  # cached %smid sets, one per context (None until measured)


# Driver 13.0 keeps about 4.1 MiB of device memory for every green context it has
# destroyed (measured: 300 create/destroy cycles of cuGreenCtxCreate/cuGreenCtxDestroy
# lost 1.2 GiB). Closed layouts are therefore kept and handed to the next split
# of the same layout instead of being destroyed.
_pool: dict[tuple, list[Layout]] = {}
_pool_lock = threading.Lock()


def destroy_layout(layout: Layout) -> list[Exception]:
    return close_each(layout.contexts + layout.temps)


def release_contexts() -> int:
    """Destroy the green contexts kept for reuse by closed partitionings.

    Returns the number of contexts destroyed. On driver 13.0 each destroyed green
    context leaves about 4.1 MiB of device memory unreturned, so call this only when
    no more splits will follow (it is never needed for correctness).
    """
    with _pool_lock:
        layouts = [lay for lays in _pool.values() for lay in lays]
        _pool.clear()
    errors, n = [], 0
    for lay in layouts:
        n += len(lay.contexts) + len(lay.temps)
        errors += destroy_layout(lay)
    if errors:
        raise GreenContextError(f"destroying kept green contexts failed: {errors[0]}") from errors[0]
    return n


def take_layout(key: tuple) -> Layout | None:
    """A kept layout of ``key`` (an earlier, closed split of the same layout), or None."""
    with _pool_lock:
        kept = _pool.get(key)
        return kept.pop() if kept else None


def keep_layout(layout: Layout) -> None:
    """Keep a closed split's contexts for the next split of the same layout."""
    with _pool_lock:
        _pool.setdefault(layout.key, []).append(layout)


def stream_factory(ctx, device_index: int):
    """A function that makes a non-blocking stream on green context ``ctx`` (priority optional)."""
    from cuda.core import StreamOptions

    def make(priority=None):
        # cuda.core wants some context of the device current to create a stream.
        with use(device_index):
            return ctx.create_stream(StreamOptions(nonblocking=True, priority=priority))

    return make


def new_layout(info: DeviceInfo, plan: SplitPlan, key, coscheduled) -> Layout:
    """Fresh green contexts for ``plan``'s groups and the remainder, all from one split of the device."""
    from cuda.core import ContextOptions

    granted = plan.granted
    temps, contexts = [], []
    try:
        with use(info.index) as dev:
            try:
                groups, rem, method, temps = split_groups(dev, info, granted, coscheduled=coscheduled)
            except UnsupportedError:
                raise
            except Exception as e:
                raise GreenContextError(f"splitting {info.name} into {granted} SMs failed: {e}") from e
            got = [int(g.sm_count) for g in groups]
            if got != granted:
                raise GreenContextError(
                    f"the driver granted {got} SMs for the request {plan.requested}, "
                    f"but the plan expected {granted}; this is a gcexplore bug on {info.name}"
                )
            resources = list(groups) + ([rem] if int(rem.sm_count) else [])
            for res in resources:
                contexts.append(dev.create_context(ContextOptions(resources=[res])))
    except BaseException:
        for ctx in contexts + temps:
            with contextlib.suppress(Exception):
                ctx.close()
        raise
    return Layout(key=key, contexts=contexts, temps=temps, method=method,
                   sm_counts=[int(r.sm_count) for r in resources], sm_ids=[None] * len(contexts))
