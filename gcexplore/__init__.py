"""gcexplore: explore and profile CUDA green contexts.

Split a GPU's SMs into partitions, run workloads on them through explicit streams,
measure what overlap buys, and look at it in Jupyter. Importing gcexplore touches
no GPU and loads no heavy library: each public name is imported from its layer on
first use (matplotlib with the plots, ipywidgets with the explorers, pyarrow with
parquet files, CUPTI with a kernel trace; PM sampling runs in a child process).

The layers, bottom-up (each imports only the ones below it): ``schema`` and the checks;
``device`` -> ``workloads``, ``trace`` -> ``experiments`` (the measuring wing); ``results`` ->
``analysis`` -> ``views`` (the understanding wing); ``explorers`` and ``cli`` on top. ``api``,
``profile`` and ``widgets`` are the public faces of the device layer, the experiments and the
explorers. The families (``prediction``, ``serving``, ``comm``, ``campaigns``, ``mechanisms``) build on the core and
are imported by nothing in it. The public names are the union of the subpackages' ``__all__``.
"""

import sys as _sys


# `python -m gcexplore[.cli]` put the working folder first on the import path before this
# package ran: a campaign spec there names modules to import, and a json.py or plant_mod.py
# planted beside it must not be what runs. Dropped before anything else is imported.
def _run_as_module() -> bool:
    argv = list(getattr(_sys, "orig_argv", ()))  # the interpreter's -m is the first (argv[0] is "-m")
    for i, a in enumerate(argv[1:], 1):
        if a.startswith("-m"):
            name = a[2:] or (argv[i + 1] if i + 1 < len(argv) else "")
            return name.split(".")[0] == "gcexplore"
    return False


if _sys.argv[:1] == ["-m"] and _sys.path[:1] and _sys.path[0] in ("", _sys.modules["os"].getcwd()) \
        and _run_as_module():
    del _sys.path[0]
del _run_as_module

import importlib as _importlib  # noqa: E402
import warnings as _warnings  # noqa: E402

from . import analysis, device, experiments, explorers, results, trace, views, workloads  # noqa: E402
# The families after the core; imported here so their registrations (gcexplore._registry) are in place
# before any core module looks one up, in the order ``gcexplore --help`` lists their commands.
from . import campaigns, serving, comm, prediction, mechanisms  # noqa: I001, E402
from ._version import __version__  # noqa: F401, E402 (in __all__)

_LAYERS = (device, workloads, trace, experiments, results, analysis, views, explorers,
           prediction, serving, comm, campaigns, mechanisms)
_GROUND = {"schema": ("MODES", "SCENARIOS", "Options")}

# public name -> the module that defines it
_WHERE = {name: f"{layer.__name__.split('.', 1)[1]}.{module}"
          for layer in _LAYERS for name, module in layer.WHERE.items() if name in layer.__all__}
_WHERE.update({name: module for module, names in _GROUND.items() for name in names})

__all__ = sorted([*_WHERE, "__version__"])

# Modules reachable as attributes (``gcexplore.plot.plot_sweep``): the faces, the layers,
# and the names the flat modules of earlier versions had, kept so old code still runs.
_MODULES = {
    "api": "api", "profile": "profile", "widgets": "widgets", "schema": "schema", "cli": "cli",
    "partitions": "device.partitions", "kernels": "device.kernels", "tracing": "trace",
    "cupti_records": "trace.records", "engine": "experiments.engine", "runner": "experiments.runner",
    "tuner": "experiments.tuner", "search": "experiments.search", "pm": "experiments.pm",
    "sizes": "experiments.request", "validate": "results.validate", "busy": "analysis.trace",
    "occupancy_estimate": "analysis.occupancy_estimate", "plot": "views.plot", "timeline": "views.timeline",
    "tune_plot": "views.tune", "pm_plot": "views.pm", "report": "views.report",
}


# The flat modules of earlier versions (not the faces): importable for one more release, with
# a DeprecationWarning naming where they went.
_MOVED = {old: new for old, new in _MODULES.items() if old not in ("api", "profile", "widgets", "schema", "cli")}
# The families' modules, which lived in the core's folders before they had packages of their own.
_MOVED.update({
    "analysis.prediction": "prediction.model",
    "analysis.prediction_check": "prediction.check",
    "analysis.saturation": "prediction.saturation",
    "analysis.traffic_profile": "prediction.traffic_profile",
    "experiments.traffic": "prediction.traffic",
    "experiments.solo": "prediction.solo",
    "views.predict": "prediction.view",
    "workloads.serving": "serving.roles",
    "experiments.serving": "serving.experiment",
    "analysis.serving": "serving.analysis",
    "views.serving": "serving.view",
    "cli.serve": "serving.cli",
    "workloads.collectives": "comm.collectives",
    "experiments.comm": "comm.rank",
    "experiments.comm_launch": "comm.launch",
    "experiments.comm_tune": "comm.tune",
    "analysis.comm": "comm.analysis",
    "views.comm": "comm.view",
    "cli.comm": "comm.cli",
    "experiments.campaigns": "campaigns.grid",
    "experiments._campaign_task": "campaigns._task",
    "experiments.cluster": "campaigns.cluster",
    "experiments.dispatch": "campaigns.dispatch",
    "experiments._campaign_preload": "campaigns._preload",
    "experiments._fork_preload": "campaigns._fork_preload",
    "experiments.worker_cpus": "campaigns.worker_cpus",
    "results.campaign_store": "campaigns.store",
    "analysis.campaigns": "campaigns.best_splits",
    "cli.campaign": "campaigns.cli",
    "analysis.isolation": "analysis.scaling",  # its one summary joined the scaling module's
})


def _moved(old: str):
    _warnings.warn(f"gcexplore.{old} moved to gcexplore.{_MOVED[old]}; the old name goes in the next release",
                  DeprecationWarning, stacklevel=3)
    return _importlib.import_module(f".{_MOVED[old]}", __name__)


class _OldPaths:
    """``import gcexplore.report``, ``from gcexplore.runner import Checkpoint``: the module it
    moved to (a meta-path finder, so plain imports work, not only attribute access)."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        head, _, old = fullname.partition(".")
        if head != __name__ or old not in _MOVED:
            return None
        import importlib.util

        # typeshed's LoaderProtocol asks for the deprecated load_module; importlib needs create/exec_module
        return importlib.util.spec_from_loader(fullname, _OldPaths)  # pyright: ignore[reportArgumentType]

    @staticmethod
    def create_module(spec):
        module = _moved(spec.name.partition(".")[2])
        _OldPaths._spec = module.__spec__  # the import system sets the alias's spec on it; put it back
        return module

    @staticmethod
    def exec_module(module):
        module.__spec__ = _OldPaths._spec


if not any(isinstance(f, type) and f.__name__ == "_OldPaths" for f in _sys.meta_path):
    _sys.meta_path.append(_OldPaths)


def __getattr__(name: str):
    if name in _MOVED:
        return _moved(name)
    if name in _MODULES:
        return _importlib.import_module(f".{_MODULES[name]}", __name__)
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'gcexplore' has no attribute {name!r}")
    value = getattr(_importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


#: What ``dir(gcexplore)`` lists: the public names, the faces and the packages (not the flat modules of
#: earlier versions, nor what this module imports for itself).
_PUBLIC = sorted({*__all__, *(m for m in _MODULES if m not in _MOVED), *(p.__name__.split(".")[1] for p in _LAYERS)})


def __dir__():
    return _PUBLIC
