"""The measuring experiments: overlap profiles and sweeps, scaling, isolation, occupancy, the split
tuner, DRAM sampling, serving splits (decode and prefill under load); and what they share (the timing engine, the layout loop, the checks of a
request made before any GPU work). ``gcexplore.profile`` is the profiler's public face."""

from .._lazy import face

PUBLIC = {
    "overlap": ("profile_overlap", "sweep"),
    "measure_scaling": ("scaling",),
    "measure_isolation": ("isolation",),
    "measure_occupancy": ("occupancy",),
    "runner": ("MeasurementAborted", "MeasurementFailed", "MeasurementInterrupted"),
    "engine": ("launch_gap",),
    "tuner": ("replay_tune", "tune"),
    "pm": ("DramTimeline", "PmSamplingError", "dram_timeline"),
    "solo": ("card_bandwidth", "load_profiles", "save_profiles", "solo_profile"),
    "campaigns": ("Campaign", "campaign", "register_experiment"),
    "serving": ("advise_split", "serve"),
    "comm_launch": ("CommLaunchError", "comm_sweep"),
    "comm": ("CommSpec",),
    "comm_tune": ("recommend_comm",),
}
EXTRA = {"serving": ("SERVING_MODES",)}
__all__, __getattr__, __dir__, WHERE = face(__name__, PUBLIC, EXTRA)
