"""How close a run came to its SLO's attainment, in requests: the sentence an advice rests on.

A run meets ``TTFT <= ttft_ms for attainment of requests`` when at least ``attainment x requests``
of its requests were within the bound. With 43 requests and 90%, 38.7 are needed: 39 met is the
fewest that meets, and one request more missed fails it. :func:`slo_margin` counts that margin
from a :func:`~gcexplore.serving.analysis.serving_table` row; its sentence names the margin where
it is within :data:`CLOSE_REQUESTS` requests.
"""

from __future__ import annotations

import math

__all__ = ["CLOSE_REQUESTS", "slo_margin"]

#: A margin of this many requests or fewer (more misses that would fail the run) is said.
CLOSE_REQUESTS = 3

_WORDS = {1: "one", 2: "two", 3: "three"}


def slo_margin(row, slo) -> dict:
    """The TTFT attainment margin of one run.

    Parameters
    ----------
    row : mapping or pandas.Series
        A :func:`~gcexplore.serving.analysis.serving_table` row computed with ``slo`` (``requests``,
        ``ttft_attainment``).
    slo : ServingSLO

    Returns
    -------
    dict
        ``met`` (requests within ``slo.ttft_ms``), ``requests``, ``needed`` (``attainment x requests``),
        ``fails_after`` (how many more missed requests would fail the run: 0 where it does not meet),
        ``close`` (``0 < fails_after <= CLOSE_REQUESTS``) and ``text``: "39 of 43 requests within
        30.16 ms, 38.7 needed: one more missed would fail it" (the clause after the colon where close).
    """
    n, share = int(row["requests"]), float(row["ttft_attainment"])
    if n <= 0 or not math.isfinite(share):
        return {"met": 0, "requests": n, "needed": math.nan, "fails_after": 0, "close": False,
                "text": "no request recorded"}
    met = int(round(share * n))  # the share is a count over n
    needed = slo.attainment * n
    fewest = math.ceil(needed - 1e-9)  # the fewest met requests that meet the attainment
    fails_after = max(0, met - fewest + 1)
    close = 0 < fails_after <= CLOSE_REQUESTS
    text = f"{met} of {n} requests within {slo.ttft_ms:g} ms, {needed:.3g} needed"
    if close:
        text += f": {_WORDS.get(fails_after, fails_after)} more missed would fail it"
    return {"met": met, "requests": n, "needed": needed, "fails_after": fails_after, "close": close, "text": text}
