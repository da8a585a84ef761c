"""Cross-process timing on one clock (pure): each MPS client's ``%globaltimer`` stamps, read on the
GPU before and after its workload in every repetition, become rows whose starts and makespan are
measured from the repetition's earliest stamp. ``%globaltimer`` is the GPU's own nanosecond clock,
the same for every process on the card, so no host clock enters a span.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["align_clients"]


def align_clients(stamps: Mapping[str, Sequence[tuple[int, int, float]]]) -> list[dict]:
    """Rows ``{rep, workload, start_ms, timer_span_ms, duration_ms, makespan_ms}`` of every client.

    Parameters
    ----------
    stamps : mapping of workload name to a sequence of ``(start_ns, end_ns, event_ms)``
        Per repetition: the client's ``%globaltimer`` stamp before its workload, the one after it
        (ns, the GPU's clock), and its own event span (ms). Every client has the same repetitions.

    Raises
    ------
    ValueError
        No clients, clients with different repetition counts, or a stamp that ends before it starts.
    """
    if not stamps:
        raise ValueError("no client stamps to align: pass {workload: [(start_ns, end_ns, event_ms), ...]}")
    counts = {name: len(s) for name, s in stamps.items()}
    if len(set(counts.values())) != 1:
        raise ValueError(
            f"clients measured different numbers of repetitions: {counts}; each repetition "
            "must be stamped by every client"
        )
    for name, s in stamps.items():
        bad = [i for i, (a, b, _) in enumerate(s) if int(b) < int(a)]
        if bad:
            raise ValueError(f"client {name!r}: stamp ends before it starts in repetition(s) {bad[:5]}")
    rows = []
    for rep in range(next(iter(counts.values()))):
        first = min(int(s[rep][0]) for s in stamps.values())
        last = max(int(s[rep][1]) for s in stamps.values())
        for name, s in stamps.items():
            start, end, event_ms = s[rep]
            rows.append(
                {
                    "rep": rep,
                    "workload": name,
                    "start_ms": (int(start) - first) / 1e6,
                    "timer_span_ms": (int(end) - int(start)) / 1e6,
                    "duration_ms": float(event_ms),
                    "makespan_ms": (last - first) / 1e6,
                }
            )
    return rows
