"""Workloads: callables ``fn(stream=...)`` that put work on a partition's stream. The built-in CUDA
kernels (compute, memory, copy, spin, latency) and adapters for PyTorch, CuPy and cuda.core kernels;
``gcexplore.workloads.compute()`` builds one. ``workload`` holds :class:`Workload` and the adapters,
``builtins`` the kernels, ``spec`` what an experiment is given turned into workloads."""

from .._lazy import face

PUBLIC = {"workload": ("Workload", "from_cupy", "from_kernel", "from_torch"), "builtins": ("builtin",)}
EXTRA = {"builtins": ("BUILTINS", "Recorder", "compute", "copy", "latency", "memory", "parse_builtin", "spin"),
         "spec": ("as_workload", "as_workloads", "workload_names"),
         "collectives": ("COLLECTIVES", "collective", "nccl_versions")}
__all__, __getattr__, __dir__, WHERE = face(__name__, PUBLIC, EXTRA)
