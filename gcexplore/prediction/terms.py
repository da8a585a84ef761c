"""The model's terms as one value: how :func:`~gcexplore.prediction.model.predict` shares DRAM and L2 and
how saturation slows a workload (what :func:`~gcexplore.prediction.check.fit_model` chooses), apart from
the inputs every call names (profiles, workloads, layouts, the interval's margins, the card).

``predict(profiles, terms=ModelTerms(sharing="equal"))`` or ``terms={"sharing": "equal"}``; the old
keywords (``predict(..., sharing="equal")``) still work for a release, with a DeprecationWarning.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping

__all__ = ["ModelTerms", "TERMS", "model_terms"]

#: How a saturated DRAM is divided: by outstanding requests (SMs x per-SM rate), by the
#: bandwidth each drew alone, or equally (max-min fair).
SHARING = ("pressure", "demand", "equal")


@dataclasses.dataclass(frozen=True)
class ModelTerms:
    """The terms of the model beyond its inputs (checked when made).

    Parameters
    ----------
    sharing : {"pressure", "demand", "equal"}, default "pressure"
        How saturated DRAM is divided (:data:`~gcexplore.prediction.model.SHARING`).
    l2_bandwidth_gbs : float, optional
        The L2's bandwidth as a second shared resource (each asks for its counted L2 traffic / solo
        time); default not modelled.
    bandwidth_gain : float, default 1
        What DRAM gives workloads together, as a multiple of the best any drew alone (in [0.5, 2]).
    loaded_latency : float, default 0
        Below saturation a workload is slowed by ``1 + loaded_latency x`` (its per-SM DRAM rate / the
        highest any profile drew per SM) ``x`` (the others' demand / DRAM's), in [0, 4].
    saturation_onset : float, optional
        Beside others drawing more than this fraction of the card's DRAM bandwidth, a probed workload
        is slowed toward its slowdown beside the copy (:func:`~.saturation.saturation_slowdown`);
        default not modelled.
    saturation_share, saturation_load, saturation_aggression, saturation_ramp : optional
        How that excess follows the workload's share of the SMs (:data:`~.saturation.SHARE_RULES`), whose
        demand drives the ramp (:data:`~.saturation.SATURATION_LOADS`), a scale of each co-runner's measured
        aggression (None: all of its demand), and where the ramp starts
        (:data:`~.saturation.SATURATION_RAMPS`).
    saturation_polite : bool, default True
        Beside co-runners that starve the copy less, a workload not memory-bound takes its slowdown beside
        the polite streamer more than beside the copy (:func:`~.saturation.polite_excess`).
    """

    sharing: str = "pressure"
    l2_bandwidth_gbs: float | None = None
    bandwidth_gain: float = 1.0
    loaded_latency: float = 0.0
    saturation_onset: float | None = None
    saturation_share: str = "flat"
    saturation_load: str = "others"
    saturation_aggression: float | None = None
    saturation_ramp: str = "fitted"
    saturation_polite: bool = True

    def __post_init__(self):
        from .saturation import check_saturation

        if self.sharing not in SHARING:
            raise ValueError(f"sharing must be one of {SHARING}, got {self.sharing!r}")
        l2 = self.l2_bandwidth_gbs
        if l2 is not None and not (isinstance(l2, (int, float)) and not isinstance(l2, bool) and 0 < l2 < 1e7):
            raise ValueError(f"l2_bandwidth_gbs must be a positive number of GB/s or None, got {l2!r}")
        gain = self.bandwidth_gain
        if not (isinstance(gain, (int, float)) and not isinstance(gain, bool) and 0.5 <= gain <= 2):
            raise ValueError(f"bandwidth_gain must be a factor in [0.5, 2], got {gain!r}")
        lat = self.loaded_latency
        if not (isinstance(lat, (int, float)) and not isinstance(lat, bool) and 0 <= lat <= 4):
            raise ValueError(f"loaded_latency must be a factor in [0, 4], got {lat!r}")
        check_saturation(self.saturation_onset, self.saturation_share, self.saturation_load,
                         self.saturation_aggression, self.saturation_ramp, self.saturation_polite)


#: The terms' names, in order (the keywords ``predict`` took before :class:`ModelTerms`).
TERMS = tuple(f.name for f in dataclasses.fields(ModelTerms))


def model_terms(terms=None, old: Mapping | None = None, *, where: str = "predict") -> ModelTerms:
    """One :class:`ModelTerms` from ``terms`` (a ModelTerms, a mapping of its fields, or None: the defaults)
    and ``old`` (the deprecated keywords of ``where``: each warns, and may not repeat one ``terms`` sets).

    Raises
    ------
    TypeError
        An unknown keyword (naming the valid ones), or ``terms`` of another type.
    """
    old = dict(old or {})
    unknown = sorted(set(old) - set(TERMS))
    if unknown:
        raise TypeError(f"{where}() got unexpected keyword arguments {unknown}; the model's terms are "
                        f"{', '.join(TERMS)} (pass them as terms=ModelTerms(...) or terms={{...}})")
    if isinstance(terms, ModelTerms):
        base = dataclasses.asdict(terms)
    elif isinstance(terms, Mapping):
        if bad := sorted(set(terms) - set(TERMS)):
            raise TypeError(f"{where}: terms has unknown keys {bad}; valid: {', '.join(TERMS)}")
        base = {**dataclasses.asdict(ModelTerms()), **terms}
    elif terms is None:
        base = dataclasses.asdict(ModelTerms())
    else:
        raise TypeError(f"{where}: terms must be a ModelTerms, a mapping of its fields or None, got "
                        f"{type(terms).__name__}")
    if old:
        if terms is not None and (both := sorted(set(old) & set(terms if isinstance(terms, Mapping) else TERMS))):
            raise TypeError(f"{where}: {both} given both as keywords and in terms=; give each once, in terms=")
        warnings.warn(f"{where}({', '.join(f'{k}=' for k in old)}) is deprecated: pass "
                      f"terms=ModelTerms({', '.join(f'{k}=...' for k in old)}) (gcexplore.prediction.ModelTerms)",
                      DeprecationWarning, stacklevel=3)
        base.update(old)
    return ModelTerms(**base)
