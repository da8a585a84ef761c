"""gcexplore: explore and profile CUDA green contexts.

Split a GPU's SMs into partitions, run workloads on them through explicit streams,
measure what overlap buys, and look at it in Jupyter. Importing gcexplore touches
no GPU and loads no heavy library: each public name below is imported from its
module on first use (matplotlib with the plots, ipywidgets with the explorers,
pyarrow with parquet files, CUPTI with a kernel trace; PM sampling runs in a child process).
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> the module that defines it
_WHERE = {
    **dict.fromkeys((
        "DeviceInfo", "GreenContextError", "PlannedGroup", "SplitPlan", "UnsupportedError",
        "device_count", "device_info", "gpu_available", "plan_split", "require_stream", "use",
    ), "api"),
    **dict.fromkeys(("Partition", "Partitioning", "release_contexts", "split", "whole_device"), "partitions"),
    **dict.fromkeys(("Workload", "builtin", "from_cupy", "from_kernel", "from_torch"), "workloads"),
    **dict.fromkeys(("MODES", "SCENARIOS", "Options"), "schema"),
    **dict.fromkeys(("MeasurementAborted", "MeasurementFailed", "MeasurementInterrupted"), "runner"),
    "launch_gap": "engine",
    **dict.fromkeys(("isolation", "occupancy", "profile_overlap", "scaling", "sweep"), "profile"),
    **dict.fromkeys(("best_split", "layout_table", "sm_busy", "summarize", "tune_table"), "analysis"),
    "tune": "tuner",
    **dict.fromkeys(("Campaign", "campaign", "register_experiment"), "experiments.campaign"),
    **dict.fromkeys(("campaign_status", "load_campaign"), "results.campaign_store"),
    **dict.fromkeys(("TraceUnavailable", "TracedResult", "kernel_trace"), "tracing"),
    **dict.fromkeys(("busy_time", "kernel_gaps", "tpc_map"), "busy"),
    **dict.fromkeys(("estimate_occupancy", "sm_usage"), "occupancy_estimate"),
    **dict.fromkeys(("load", "load_recorded", "save", "to_chrome_trace"), "results"),
    **dict.fromkeys(("figure_stamp", "plot_isolation", "plot_occupancy", "plot_scaling", "plot_sweep",
                     "plot_throughput"), "plot"),
    **dict.fromkeys(("plot_sm_usage", "plot_timeline"), "timeline"),
    "plot_tune": "tune_plot",
    **dict.fromkeys(("DramTimeline", "PmSamplingError", "dram_summary", "dram_timeline"), "pm"),
    "plot_dram_timeline": "pm_plot",
    **dict.fromkeys(("Explorer", "SweepExplorer", "explore"), "widgets"),
}

__all__ = sorted([*_WHERE, "__version__"])

# submodules reachable as attributes (``gcexplore.workloads.compute()``), imported on first use
_SUBMODULES = ("analysis", "api", "partitions", "plot", "profile", "report", "results", "schema", "widgets",
               "workloads")


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'gcexplore' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_WHERE) | set(_SUBMODULES))
