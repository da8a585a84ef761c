"""What the CUPTI library this process loaded can do for gcexplore, by its version.

PyTorch (and other frameworks) pin their own libcupti (PyTorch 2.14:
nvidia-cuda-cupti 13.0.85), and a process keeps the first libcupti it loads, so
gcexplore decides features by the library actually loaded, not by the cupti-python
package installed. Each feature names the first CUPTI that has it:

==================  ============  ===========================================================
feature             first CUPTI   how it was established
==================  ============  ===========================================================
``kernel_trace``    13.0          GPU: CUPTI 13.0.85 (cupti-python 13.0.1 and 13.4.0) gave
                                  kernel records with context ids and CONTEXT records with
                                  ``num_multiprocessors`` and a parent for green contexts
                                  (fields since CUPTI 12.4, its release notes)
``tpc_map``         13.2          headers: ``CUPTI_ACTIVITY_KIND_GREEN_CONTEXT`` first in
                                  nvidia-cuda-cupti 13.2.86 (not in 13.1.115); cupti-python
                                  13.2.0 release notes add ``ActivityKind.GREEN_CONTEXT``;
                                  GPU: 13.0.85 refused it (ERROR_NOT_COMPATIBLE), 13.4.92 gave
                                  TPC masks
``pm_sampling``     13.3          cupti-python 13.3.0 release notes add ``cupti.pm_sampling``
                                  (the C API is older); GPU: 13.0.85 refused it
                                  (ERROR_INVALID_PARAMETER), 13.4.92 sampled and decoded
==================  ============  ===========================================================

The two newer features also need the loaded libcupti to be at least the cupti-python
package's own minor version: cupti-python X requires nvidia-cuda-cupti ~= X because it
reads their records and parameter structs in CUPTI X's layout (kernel records were
measured to work across that gap; these two were not).

:func:`offers` is pure: it maps a :class:`LoadedCupti` (built by :func:`describe` from
the ``cupti.cupti`` module, or by hand in tests) to ``{feature: None or the sentence
that refuses it}``.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import importlib.util
from importlib import metadata

__all__ = ["FEATURES", "LoadedCupti", "describe", "offers", "refusal", "version_from_api"]


@dataclasses.dataclass(frozen=True)
class Feature:
    name: str
    what: str  # the sentence's subject
    first: tuple[int, int]  # the first CUPTI release that has it
    needs_package_minor: bool  # the loaded libcupti must be >= cupti-python's minor too


FEATURES = {f.name: f for f in (
    Feature("kernel_trace", "trace=True (kernel records with their green context)", (13, 0), False),
    Feature("tpc_map", "the TPC map (GREEN_CONTEXT records with logical TPC masks)", (13, 2), True),
    Feature("pm_sampling", "PM sampling (dram_timeline)", (13, 3), True),
)}

#: What to install where the framework's pin keeps an older CUPTI (13.4: measured on driver 580).
GET_NEWER = ('in an environment without the framework\'s CUPTI pin run pip install "cupti-python>=13.4" '
             '"nvidia-cuda-cupti>=13.4", or beside it pip install --no-deps "cupti-python>=13.4" pyelftools and '
             'start Python with LD_PRELOAD set to a CUDA toolkit\'s CUPTI of 13.4 or newer '
             '(<toolkit>/extras/CUPTI/lib64/libcupti.so.13)')


@dataclasses.dataclass(frozen=True)
class LoadedCupti:
    """The libcupti a process loaded and the cupti-python package over it.

    ``version`` is ``(major, minor, patch)``; ``how`` says where it came from
    (``cuptiGetVersion`` of the loaded library, or the pip package that owns its file).
    ``green_kind`` / ``pm_module``: the package has ``ActivityKind.GREEN_CONTEXT`` /
    ``cupti.pm_sampling``.
    """

    library: str = ""
    version: tuple[int, int, int] | None = None
    api_version: int | None = None
    how: str = "unknown"
    package: str | None = None
    green_kind: bool = False
    pm_module: bool = False

    @property
    def label(self) -> str:
        """``CUPTI 13.0.85`` (or ``a CUPTI of unknown version``) for sentences and attrs."""
        if self.version is None:
            return "a CUPTI of unknown version"
        return "CUPTI " + ".".join(map(str, self.version))

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["version"] = ".".join(map(str, self.version)) if self.version else None
        return d


def version_from_api(api: int) -> tuple[int, int] | None:
    """``cuptiGetVersion``'s number as (major, minor): 130001 -> (13, 0), 130401 -> (13, 4).

    From the headers of nvidia-cuda-cupti 13.0.85 ... 13.5.25 (``CUPTI_API_VERSION``
    130001, 130101, 130202, 130301, 130401, 130500); CUPTI 12 and older count 1, 2 ... 26.
    """
    api = int(api)
    if api >= 10000:
        return api // 10000, api // 100 % 100
    return None


def _minor(text: str | None) -> tuple[int, int] | None:
    parts = [int(p) for p in (text or "").split(".")[:2] if p.isdigit()]
    return (parts[0], parts[1]) if len(parts) == 2 else None


def refusal(name: str, info: LoadedCupti) -> str | None:
    """None where ``info`` offers feature ``name``; else the one sentence that refuses it."""
    f = FEATURES[name]
    need = f.first
    package = _minor(info.package)
    if f.needs_package_minor and package is not None:
        need = max(need, package)
    have = info.version[:2] if info.version else None
    api_ok = {"tpc_map": info.green_kind, "pm_sampling": info.pm_module}.get(name, True)
    if api_ok and (have >= need if have is not None else f.first <= (13, 0)):
        return None  # an unknown version still traces kernels: Collector.probe checks that it works
    where = f" ({info.library})" if info.library else ""
    reasons = []
    if have is None or have < need:
        reasons.append(f"this process loaded {info.label}{where}"
                       + (f", older than the cupti-python {info.package} that reads it"
                          if have is not None and have >= f.first else ""))
    if not api_ok:
        reasons.append(f"cupti-python {info.package or '(version unknown)'} has no API for it "
                       f"(cupti-python {f.first[0]}.{f.first[1]} adds it)")
    return f"{f.what} needs CUPTI {need[0]}.{need[1]} or newer, but {' and '.join(reasons)}: {GET_NEWER}."


def offers(info: LoadedCupti) -> dict[str, str | None]:
    """``{feature: None (offered) or the sentence that refuses it}`` for every feature."""
    return {name: refusal(name, info) for name in FEATURES}


# ---------------------------------------------------------------------------
# Finding out what is loaded (reads the process; the stand-ins in tests pass what they know)
# ---------------------------------------------------------------------------


def loaded_libraries(maps: str = "/proc/self/maps") -> tuple[set[str], bool]:
    """Paths of the libcupti files this process mapped, and whether libcuda is mapped."""
    try:
        with open(maps) as f:
            paths = {line.split()[-1] for line in f if "/" in line}
    except OSError:
        return set(), False
    return ({p for p in paths if "libcupti" in p.rsplit("/", 1)[-1]},
            any(p.rsplit("/", 1)[-1].startswith("libcuda.so") for p in paths))


def _owner_version(path: str) -> str | None:
    """The version of the pip package nvidia-cuda-cupti that owns ``path``, if one does."""
    import os

    real = os.path.realpath(path)
    for dist in metadata.distributions(name="nvidia-cuda-cupti"):
        for f in dist.files or ():
            if f.name.startswith("libcupti.so") and os.path.realpath(str(dist.locate_file(f))) == real:
                return dist.version
    return None


def _api_version(cupti, path: str, driver_loaded: bool) -> int | None:
    """cuptiGetVersion: the module's ``get_version`` (cupti-python 13.5+) or the library's.

    Called only where libcuda is loaded: without a driver CUPTI 13.2.86's cuptiGetVersion
    crashed the process (13.3+ return an error, 13.0 and 13.1 the number).
    """
    get = getattr(cupti, "get_version", None)
    with contextlib.suppress(Exception):
        if get is not None:
            return int(get())
        if driver_loaded and path:
            v = ctypes.c_uint32(0)
            if ctypes.CDLL(path).cuptiGetVersion(ctypes.byref(v)) == 0:
                return int(v.value)
    return None


def describe(cupti, *, maps: str = "/proc/self/maps") -> LoadedCupti:
    """What the ``cupti.cupti`` module ``cupti`` runs over in this process."""
    libs, driver = loaded_libraries(maps)
    path = min(libs) if libs else ""
    api = _api_version(cupti, path, driver)
    owner = _owner_version(path) if path else None
    version, how = None, "unknown"
    parsed = version_from_api(api) if api is not None else None
    if parsed:
        major, minor = parsed
        patch = int(owner.split(".")[2]) if owner and _minor(owner) == (major, minor) else 0
        version, how = (major, minor, patch), f"cuptiGetVersion {api}"
    elif owner is not None:
        version = tuple(int(p) for p in (owner.split(".") + ["0", "0"])[:3] if p.isdigit())
        how = f"nvidia-cuda-cupti {owner} owns the file"
    try:
        package = metadata.version("cupti-python")
    except metadata.PackageNotFoundError:
        package = None
    kinds = getattr(cupti, "ActivityKind", None)
    pm = getattr(cupti, "pm_sampling_available", None)
    if pm is None:
        with contextlib.suppress(ImportError, ValueError):
            pm = importlib.util.find_spec("cupti.pm_sampling") is not None
    return LoadedCupti(library=", ".join(sorted(libs)), version=version if version and len(version) == 3 else None,
                       api_version=api, how=how, package=getattr(cupti, "package_version", package),
                       green_kind=hasattr(kinds, "GREEN_CONTEXT"), pm_module=bool(pm))
