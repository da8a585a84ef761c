"""Workloads: callables ``fn(stream=...)`` that put work on a partition's stream. The built-in CUDA
kernels (compute, memory, copy, spin, latency) and adapters for PyTorch, CuPy and cuda.core kernels;
``gcexplore.workloads.compute()`` builds one. ``workload`` holds :class:`Workload` and the adapters,
``builtins`` the kernels, ``spec`` what an experiment is given turned into workloads (and the one
recipe grammar, ``"memory:n=1048576"``, every entry point accepts)."""

from .._lazy import face

PUBLIC = {"workload": ("Workload", "from_cupy", "from_kernel", "from_torch"), "builtins": ("builtin",)}
EXTRA = {"builtins": ("BUILTINS", "Recorder", "compute", "copy", "latency", "memory", "polite", "spin"),
         "spec": ("Recipe", "as_workload", "as_workloads", "is_recipe", "parse_builtin", "parse_recipe",
                  "workload_names")}
# names this package offered before the families had packages of their own
MOVED = {**dict.fromkeys(("decoder_stack", "serving_roles", "ARRIVALS", "ModelShape", "ServingModel", "arrivals"),
                         "gcexplore.serving.roles"),
         **dict.fromkeys(("COLLECTIVES", "collective", "nccl_versions"), "gcexplore.comm.collectives")}
__all__, __getattr__, __dir__, WHERE = face(__name__, PUBLIC, EXTRA, MOVED)
