"""A campaign's tasks in numbers: per task, its best split and whether that split sits at the
edge of the task's split set (then the optimum may lie outside the sizes it measured)."""

from __future__ import annotations

import pandas as pd

from ..schema import identity_name, parse_layout
from ..analysis.overlap import best_split

__all__ = ["task_best_splits"]

_CARD = [identity_name(k) for k in ("name", "uuid", "index")]  # how a task's card is named


def task_best_splits(df: pd.DataFrame) -> pd.DataFrame:
    """Per task of a sweep campaign (:func:`gcexplore.load_campaign`): the best split and its edge.

    Returns
    -------
    pandas.DataFrame
        ``card`` (name, index, UUID prefix), ``pair``, ``split_set``, ``best_split`` (the layout of
        :func:`gcexplore.best_split` over the task's rows), ``at_edge`` (True when that split is
        the smallest or largest first-partition size the task measured and the card has valid
        sizes beyond it: the optimum may lie outside the set), ``rows``; sorted by card, pair and
        split set.
    """
    missing = [c for c in ("task_key", "pair", "split_set", "split_sm_count", "layout") if c not in df.columns]
    if missing:
        raise ValueError(f"task_best_splits needs the rows of a sweep campaign (gcexplore.load_campaign); "
                         f"these lack {', '.join(missing)}")
    rows = []
    for _, g in df.groupby("task_key", sort=False):
        best = str(best_split(g)["layout"])
        first = parse_layout(best)[0]
        sizes = sorted(set(int(k) for k in g["split_sm_count"]))
        step = min((b - a for a, b in zip(sizes, sizes[1:])), default=sizes[0])
        total = sum(parse_layout(best))
        beyond_low = first == sizes[0] and first - step >= step
        beyond_high = first == sizes[-1] and first + step < total
        name, uuid, index = (g[c].iloc[0] if c in g.columns else "" for c in _CARD)
        card = f"{name} #{index} ({str(uuid)[:8]})" if name else ""
        rows.append({"card": card, "pair": g["pair"].iloc[0], "split_set": g["split_set"].iloc[0], "best_split": best,
                     "at_edge": bool(len(sizes) > 1 and (beyond_low or beyond_high)), "rows": len(g)})
    cols = ["card", "pair", "split_set", "best_split", "at_edge", "rows"]
    out = pd.DataFrame(rows, columns=cols)
    return out.sort_values(["card", "pair", "split_set"], kind="stable").reset_index(drop=True)
