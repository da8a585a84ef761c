"""Every derived number, computed here and only here (pure pandas, no GPU): statistics, overlap
tables and bounds, summaries of every result kind, kernel-trace analysis, the occupancy estimate,
PM numbers and tuning tables. Views, explorers, the CLI and notebooks call these and compute none
of them. Nothing here imports the measuring wing. The families (``prediction``, ``serving``,
``comm``, ``campaigns``) keep their own numbers in their packages."""

from .._lazy import face

PUBLIC = {
    "summaries": ("summarize",),
    "overlap": ("best_split", "layout_table"),
    "occupancy": ("sm_busy",),
    "tuning": ("tune_table",),
    "trace": ("busy_time", "kernel_gaps", "tpc_map"),
    "occupancy_estimate": ("estimate_occupancy", "sm_usage"),
    "waves": ("fit_table", "partition_fit"),
    "pm": ("dram_summary",),
    "comparison": ("compare",),
    "sequential": ("compare_until_decided",),
}
EXTRA = {
    "stats": ("NOISY_FRACTION", "STAT_COLUMNS", "quantiles"),
    "overlap": ("OVERLAP_SUMMARY_COLUMNS", "SPAN_INCLUDES_WAIT", "baseline_choice", "baseline_ms", "best_layout",
                "launch_limits", "lower_bound", "makespan_stats", "resource_bound", "verdict_facts"),
    "display": ("RATES", "modes_in", "placement", "rate_quantiles", "rates", "workload_order"),
    "occupancy": ("busy_shares", "occupancy_layout"),
    "tuning": ("TUNE_TABLE_COLUMNS", "gpu_time_ms", "slo_split"),
    "clusters": ("cluster_labels", "group_modes", "rep_mode", "sample_modes", "trace_modes"),
    "pm": ("dram_headline",),
    "scaling": ("scaling_facts",),
    "waves": ("LAUNCH_WAVE_COLUMNS", "fit_hints", "fit_notes", "launch_waves"),
}
# names this package offered before the families had packages of their own
MOVED = {"predict": "gcexplore.prediction.model",
         **dict.fromkeys(("predict_error", "prediction_facts", "fit_model", "predict_kwargs"),
                         "gcexplore.prediction.check"),
         **dict.fromkeys(("ServingSLO", "goodput_table", "serving_table", "Advice", "SERVING_TABLE_COLUMNS", "advise",
                          "advise_recorded", "deadline_of", "loads_of", "predict_serving", "prediction_errors",
                          "trade_facts", "ttft_queue"), "gcexplore.serving.analysis"),
         **dict.fromkeys(("bandwidth_table", "comm_answer", "comm_dram", "comm_table", "nccl_attribution",
                          "zero_sm_table", "PM_TAG", "bus_bw_gbs", "bus_factor", "comm_steps", "pm_step_dram"),
                         "gcexplore.comm.analysis"),
         "task_best_splits": "gcexplore.campaigns.best_splits"}
__all__, __getattr__, __dir__, WHERE = face(__name__, PUBLIC, EXTRA, MOVED)
