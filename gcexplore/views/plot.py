"""Figures drawn from gcexplore's result DataFrames (no GPU needed).

Every function takes the DataFrame a profiler call returned (or one loaded with
:mod:`gcexplore.results`; columns in docs/contract.md) and returns a
:class:`matplotlib.figure.Figure`. Nothing here measures, imports the CUDA layers at
module import, or touches pyplot's global state: figures are built with the object
API so they work under Agg, in scripts, in threads and in notebooks alike. Every
figure names, in its heading, the device the data came from, whether they were
recorded (loaded from a saved file) or measured in this session, and the date.

Statistics drawn here are descriptive (median and the p10/p90 band of the raw
repetitions); the derived quantities that have one definition in the profiler (the
lower bound of the makespan) are taken from :func:`gcexplore.summarize`.
"""

# The figures live in one module per result kind; this module keeps the names where
# they always were (gcexplore.plot, gcexplore.views.plot).
from ._style import (WORKLOAD_COLORS, figure_stamp, mode_color, mode_label, new_figure,  # noqa: F401
                     ratio_text, require_result, stamp)
from .isolation import plot_isolation
from .occupancy import occupancy_rows, plot_occupancy
from .overlap import plot_sweep, plot_throughput
from .scaling import plot_scaling
from ..schema import MODES  # noqa: F401

__all__ = [
    "plot_sweep",
    "plot_throughput",
    "plot_scaling",
    "plot_occupancy",
    "plot_isolation",
    "figure_stamp",
    "occupancy_rows",
    "require_result",
    "mode_color",
    "mode_label",
    "new_figure",
    "stamp",
    "ratio_text",
    "WORKLOAD_COLORS",
]
