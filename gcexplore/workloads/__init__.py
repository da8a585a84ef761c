"""Workloads: callables ``fn(stream=...)`` that put work on a partition's stream. The built-in CUDA
kernels (compute, memory, copy, spin, latency) and adapters for PyTorch, CuPy and cuda.core kernels;
``gcexplore.workloads.compute()`` builds one."""

from .._lazy import face

PUBLIC = {"core": ("Workload", "builtin", "from_cupy", "from_kernel", "from_torch")}
EXTRA = {"core": ("BUILTINS", "Recorder", "as_workload", "as_workloads", "compute", "copy", "latency",
                  "memory", "spin", "workload_names")}
__all__, __getattr__, __dir__, WHERE = face(__name__, PUBLIC, EXTRA)
