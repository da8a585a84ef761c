"""Kernel traces with CUPTI: the collector behind ``trace=True`` (each kernel's start and end on
the GPU's clock and the green context it ran in), ``kernel_trace`` for your own code, and the pure
conversion of CUPTI records to rows."""

from .._lazy import face

PUBLIC = {"collector": ("TraceUnavailable", "TracedResult"), "user": ("kernel_trace",)}
# what gcexplore.tracing (the flat module of earlier versions) offered
EXTRA = {"collector": ("Collector", "newest_pip_cupti", "preload_cupti", "require_cupti", "traced"),
         "user": ("KernelTrace",)}
__all__, __getattr__, __dir__, WHERE = face(__name__, PUBLIC, EXTRA)
