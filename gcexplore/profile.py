"""The profiler's public face: ``profile_overlap``, ``sweep``, ``scaling``, ``isolation`` and
``occupancy``. Defined in :mod:`gcexplore.experiments`; results are tidy DataFrames (see
docs/guide.md for their columns)."""

from .experiments.measure_isolation import isolation
from .experiments.measure_occupancy import occupancy
from .experiments.measure_scaling import scaling
from .experiments.overlap import profile_overlap, sweep

__all__ = ["isolation", "occupancy", "profile_overlap", "scaling", "sweep"]
