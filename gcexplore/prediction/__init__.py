"""The prediction family: a concurrent makespan predicted from solo profiles. ``traffic`` counts a
workload's DRAM and L2 bytes, ``solo`` measures the profiles, ``traffic_profile`` attaches the counted
traffic, ``saturation`` models workloads sharing DRAM, ``model`` predicts (``predict``), ``check``
sets a prediction against a measured sweep and fits the model, ``view`` draws it. Built on the core;
nothing in the core imports it."""

from .._lazy import face

PUBLIC = {
    "solo": ("card_bandwidth", "load_profiles", "save_profiles", "solo_profile"),
    "model": ("predict",),
    "check": ("predict_error", "prediction_facts"),
    "view": ("plot_predict",),
}
EXTRA = {"check": ("fit_model", "predict_kwargs"), "terms": ("ModelTerms",)}
__all__, __getattr__, __dir__, WHERE = face(__name__, PUBLIC, EXTRA)
