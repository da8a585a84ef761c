"""The profiler's public face: ``profile_overlap``, ``sweep``, ``scaling``, ``isolation`` and
``occupancy``. Defined in :mod:`gcexplore.experiments`; results are tidy DataFrames (see
docs/guide.md for their columns)."""

from .experiments.overlap import isolation, occupancy, profile_overlap, scaling, sweep

__all__ = ["isolation", "occupancy", "profile_overlap", "scaling", "sweep"]
