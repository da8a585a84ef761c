"""The measuring experiments: overlap profiles and sweeps, scaling, isolation, occupancy, the split
tuner, DRAM sampling; and what they share (the timing engine, the layout loop, the checks of a
request made before any GPU work). ``gcexplore.profile`` is the profiler's public face. The families
(``prediction``, ``serving``, ``comm``, ``campaigns``) build on these."""

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
}
# names this package offered before the families had packages of their own
MOVED = {**dict.fromkeys(("card_bandwidth", "load_profiles", "save_profiles", "solo_profile"),
                         "gcexplore.prediction.solo"),
         **dict.fromkeys(("Campaign", "campaign", "register_experiment"), "gcexplore.campaigns.grid"),
         **dict.fromkeys(("serve", "SERVING_MODES"), "gcexplore.serving.experiment"),
         "advise_split": "gcexplore.serving.advisor",
         **dict.fromkeys(("CommLaunchError", "comm_sweep"), "gcexplore.comm.launch"),
         "CommSpec": "gcexplore.comm.rank", "recommend_comm": "gcexplore.comm.tune"}
__all__, __getattr__, __dir__, WHERE = face(__name__, PUBLIC, moved=MOVED)
