"""The ipywidgets front ends' public face: ``Explorer`` (one split), ``SweepExplorer`` (every
split), ``MechanismsExplorer`` (a mechanisms result, pair by pair), ``explore`` and the pure
``render_*`` functions behind them. Defined in :mod:`gcexplore.explorers`; importing this touches
no GPU."""

from .explorers.compare_explorer import CompareExplorer
from .explorers.explorer import Explorer, explore
from .explorers.mechanisms_explorer import (MechanismsExplorer, render_mechanisms, render_mechanisms_sentences,
                                            render_mechanisms_table)
from .explorers.render import (render_occupancy, render_summary, render_sweep, render_throughput,
                               render_trace)
from .explorers.sweep_explorer import SweepExplorer

__all__ = ["CompareExplorer", "Explorer", "MechanismsExplorer", "SweepExplorer", "explore", "render_mechanisms",
           "render_mechanisms_sentences", "render_mechanisms_table", "render_occupancy", "render_summary",
           "render_sweep", "render_throughput", "render_trace"]
