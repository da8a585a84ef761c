"""What the split tuner's search (:mod:`gcexplore.experiments.search`) looks for and how sure it must be:
:class:`Settings`, checked when built."""

from __future__ import annotations

import dataclasses

from .._checks import as_count, as_int, as_seconds_like
from ..analysis.stats import DEFAULT_FLOOR, Floor
from ..schema import MAX_TUNE_REPEATS

__all__ = ["Settings"]


def _fraction(name: str, value, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= float(value) <= hi:
        raise ValueError(f"{name} must be a number in [{lo:g}, {hi:g}], got {value!r}")
    return float(value)


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the tuner looks for and how sure it must be; checked when built.

    Parameters
    ----------
    slo_ms : float, optional
        Latency target of the first workload in ms; None (default) minimises the makespan.
    percentile : float, default 50
        Which percentile of the first workload's duration must meet ``slo_ms`` (0 < p < 100).
    tolerance : float, default 0.01
        The answer's median makespan may exceed the best by this fraction (0.001 to 0.5).
    confidence : float, default 0.9
        Level of the confidence intervals (0.5 to 0.999).
    repeats : int, default 5
        Repetitions at a layout's first measurement.
    max_repeats : int, default 40
        Most repetitions of one layout (``repeats`` to :data:`gcexplore.schema.MAX_TUNE_REPEATS`, 1,000).
    slack : float, default 0.05
        How much faster than linear scaling a workload may get before a bound is wrong.
    placement_slack : float, default 0.01
        How much faster a workload may be on fewer SMs (different SMs, noise).
    floor : Floor, optional
        The card's run-to-run noise (:func:`gcexplore.analysis.stats.noise_floor`), standing in for the
        between-round spread of a layout measured in a single round.
    spread : {"layout", "pooled"}, default "layout"
        A one-round layout's repetition spread: its own, or pooled over those measured
        (``stats.pooled_pair_sd``). With "pooled", a first round of 2 repetitions more than ``tolerance`` apart
        gets a third (a tie-break).
    settle : float, optional
        A rival within ``tolerance`` by its median is settled once the bound says it is not faster by more than
        ``settle`` (``tolerance`` to 0.5; None: ``tolerance``): a flat top costs no hair-splitting rounds.
    confirm_repeats : int, optional
        Repetitions at the first measurement of a layout that predictions say is slower than the answer by
        more than ``tolerance`` (1 to ``repeats``; None: ``repeats``): confirming a predicted loser rarely
        needs a full round, and one that turns out close gets more repetitions as any other.
    """

    slo_ms: float | None = None
    percentile: float = 50.0
    tolerance: float = 0.01
    confidence: float = 0.9
    repeats: int = 5
    max_repeats: int = 40
    slack: float = 0.05
    placement_slack: float = 0.01
    floor: Floor = DEFAULT_FLOOR
    spread: str = "layout"
    settle: float | None = None
    confirm_repeats: int | None = None

    def __post_init__(self):
        if self.slo_ms is not None:
            object.__setattr__(self, "slo_ms", as_seconds_like("slo_ms", self.slo_ms, unit="milliseconds",
                                                               maximum=1e6))
        p = _fraction("percentile", self.percentile, 0.0, 100.0)
        if not 0.0 < p < 100.0:
            raise ValueError(f"percentile must be in (0, 100), got {self.percentile!r}")
        object.__setattr__(self, "percentile", p)
        for name, lo, hi in (("tolerance", 0.001, 0.5), ("confidence", 0.5, 0.999), ("slack", 0.0, 1.0),
                             ("placement_slack", 0.0, 1.0)):
            object.__setattr__(self, name, _fraction(name, getattr(self, name), lo, hi))
        if self.settle is not None:
            object.__setattr__(self, "settle", _fraction("settle", self.settle, self.tolerance, 0.5))
        if self.spread not in ("layout", "pooled"):
            raise ValueError(f"spread must be 'layout' or 'pooled', got {self.spread!r}")
        if not isinstance(self.floor, Floor):
            raise TypeError(f"floor must be a gcexplore.analysis.stats.Floor, got {type(self.floor).__name__}")
        object.__setattr__(self, "repeats", as_count("repeats", self.repeats, maximum=MAX_TUNE_REPEATS))
        object.__setattr__(self, "max_repeats", as_int("max_repeats", self.max_repeats, minimum=self.repeats,
                                                       maximum=MAX_TUNE_REPEATS))
        if self.confirm_repeats is not None:
            object.__setattr__(self, "confirm_repeats", as_int("confirm_repeats", self.confirm_repeats, minimum=1,
                                                               maximum=self.repeats))

    @property
    def objective(self) -> str:
        """``"makespan"`` or ``"slo"``."""
        return "makespan" if self.slo_ms is None else "slo"

    def metadata(self) -> dict:
        """The settings as plain values (for ``df.attrs``)."""
        return {"objective": self.objective, **dataclasses.asdict(self)}
