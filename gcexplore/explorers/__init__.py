"""The ipywidgets explorers, live or over saved results. ``gcexplore.widgets`` is their public face."""

from .._lazy import face

PUBLIC = {"explorer": ("Explorer", "explore"), "sweep_explorer": ("SweepExplorer",),
          "compare_explorer": ("CompareExplorer",), "mechanisms_explorer": ("MechanismsExplorer",)}
__all__, __getattr__, __dir__, WHERE = face(__name__, PUBLIC)
