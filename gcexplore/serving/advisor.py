"""The serving advisor: the split with the highest goodput at an SLO, measured with as few serving
runs as its predictions allow (:func:`advise_split`; the search itself is
:func:`gcexplore.serving.analysis.advise`). A failure or Ctrl-C keeps every row measured so far."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import experiment as E
from .experiment import load_columns
from .roles import ServingModel, arrivals

__all__ = ["advise_split"]


def advise_split(model: ServingModel, decode_sm_counts: Sequence[int], slo, *, rates: Sequence[float],
                 pattern: str = "poisson", burst: int = 8, duration_s: float = 1.0, drain_s: float | None = None,
                 seed: int = 0, graphs: bool = True, device: int = 0, rounds: int = 1, alone=None, progress=None):
    """The decode share meeting ``slo`` (a :class:`~gcexplore.serving.analysis.ServingSLO`) with the
    highest goodput among ``decode_sm_counts`` x ``rates``, measuring only what it must: each role
    alone and both paired on every candidate partition (or the ``alone`` and ``paired`` rows given,
    as ``alone``), then the splits and rates
    that predictions from those cannot settle (:func:`gcexplore.serving.analysis.advise`). Each
    measurement is a :func:`~gcexplore.serving.experiment.serve` of ``rounds`` rounds.

    Returns ``(advice, measured)``: the :class:`~gcexplore.serving.analysis.Advice` (split, goodput,
    predictions, GPU-time cost) and the serving rows it measured (alone rows included).

    Raises
    ------
    MeasurementFailed, MeasurementInterrupted
        A measurement raised or the user pressed Ctrl-C: ``exc.partial`` holds every row measured
        before it, of every :func:`~gcexplore.serving.experiment.serve` call so far (the rows given as
        ``alone`` included), as ``measured`` would have held them.
    """
    import pandas as pd

    from ..experiments.runner import MeasurementAborted, MeasurementFailed, MeasurementInterrupted
    from .analysis import advise, serving_table

    kw: dict[str, Any] = dict(pattern=pattern, burst=burst, duration_s=duration_s, drain_s=drain_s, seed=seed,
                              graphs=graphs, device=device, rounds=rounds, progress=progress)
    frames: list = []

    def measured(more=None):
        parts = [f for f in (*frames, more) if f is not None and len(f)]
        if not parts:
            return pd.DataFrame()
        out = pd.concat(parts, ignore_index=True)
        out.attrs.update(parts[0].attrs)
        return out

    def measure(layout: str, rate: float):
        df = E.serve(model, [int(layout.split("+")[0])], rates=[rate], modes=("partitioned",), **kw)
        frames.append(df)
        return serving_table(df, slo)

    try:
        frames.append(alone if alone is not None else
                      E.serve(model, decode_sm_counts, rates=rates, modes=("alone", "paired"), **kw))
        loads = {load_columns(r, pattern, burst, duration_s, seed)["load"]:
                 (float(r), arrivals(r, duration_s, seed=seed, pattern=pattern, burst=burst)) for r in rates}
        drain = duration_s if drain_s is None else drain_s
        advice = advise(frames[0], loads, slo, measure, deadline_ms=(duration_s + drain) * 1e3)
    except BaseException as e:  # every serve() call's rows are kept, not only the failed one's
        inner = e.partial if isinstance(e, MeasurementAborted) else None
        cause = e.__cause__ if inner is not None and e.__cause__ is not None else e
        kept = measured(inner)
        kept.attrs["partial"] = True
        n = (f"the {len(kept)} rows of the {len(frames) + (inner is not None)} serving run(s) measured so far "
             "are in exc.partial")
        if isinstance(e, KeyboardInterrupt):
            raise MeasurementInterrupted(f"the advisor was interrupted; {n}", kept) from cause
        if isinstance(e, Exception):
            raise MeasurementFailed(f"{type(cause).__name__} while advising a split ({cause}); {n}", kept) from cause
        raise
    return advice, measured()
