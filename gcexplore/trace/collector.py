"""Kernel-level truth from CUPTI: every kernel, the green context it ran in, and whose it was.

CUDA events time a stream; CUPTI activity records time each kernel on the GPU's own
clock and name the context it ran in (how Nsight Systems and PyTorch's Kineto build
their timelines). This module collects them off the hot path and turns them into a
result of kind ``"trace"`` (one row per kernel, memcpy or memset; columns in
:data:`gcexplore.schema.COLUMNS`).

How each record is attributed, without guessing from times:

- **partition**: the record's ``context_id``, matched with
  ``cupti.get_context_id(partition.context)`` of every partition a workload ran on;
- **workload, launch, mode, repetition**: an external correlation id pushed around
  every launch (:meth:`Collector.tag`), joined to the record through CUPTI's
  EXTERNAL_CORRELATION records (correlation id -> external id);
- **repetition start**: the end of the repetition's gate kernel, after which the
  engine records the common start event on the same stream; ``start_ms`` and
  ``end_ms`` are relative to it, like ``start_ms`` of an overlap result.

Records are kept in CUPTI's buffers while a layout is measured and flushed when the
next layout starts (and at the end), so the timed repetitions never wait for them.

Public names: :class:`Collector` (what the engine uses under ``trace=True``),
:func:`kernel_trace` (a context manager for the user's own code on partitions),
:class:`TraceUnavailable`, :class:`TracedResult`; records become rows in
:mod:`gcexplore.cupti_records` (pure).

cupti-python is imported inside functions only: ``import gcexplore`` never loads it.
When it is missing, or another profiler holds CUPTI, tracing fails with one sentence
and event timing works as before.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any, NamedTuple

from ..device.driver import UnsupportedError
from .features import FEATURES, GET_NEWER, describe, offers
from .records import context_record, copy_record, gate_ends, kernel_record, trace_rows

__all__ = [
    "Collector",
    "TraceUnavailable",
    "TracedResult",
    "newest_pip_cupti",
    "preload_cupti",
    "require_cupti",
    "traced",
]

#: The combinations measured on the project's GPU machine (driver 580 = CUDA 13.0).
TESTED = ("cupti-python 13.4.0 with nvidia-cuda-cupti 13.4.92 (every feature); cupti-python 13.0.1 with "
          "PyTorch's nvidia-cuda-cupti 13.0.85 (kernel traces)")
_INSTALL = ("pip install 'cupti-python>=13.0.1,<14' (it brings the nvidia-cuda-cupti it needs, or matches the "
            "framework's; wheels exist for Linux x86_64 and aarch64)")
_BUFFER_BYTES = 16 << 20  # per CUPTI buffer: about 60,000 kernel records
_SPIN_NS = 1_000  # the probe kernel's length


class TraceUnavailable(UnsupportedError):
    """Kernel tracing cannot run here: no cupti-python, or CUPTI is held by another profiler."""


class TracedResult(NamedTuple):
    """What an experiment run with ``trace=True`` returns: ``result, trace = sweep(...)``.

    ``result`` is the usual event-timed DataFrame; ``trace`` the kernel trace (kind
    ``"trace"``) of the same repetitions.
    """

    result: Any
    trace: Any


def traced(df, collector: Collector | None):
    """``df`` itself without a collector; with one, ``TracedResult(df, trace)``."""
    return df if collector is None else TracedResult(df, collector.frame(df.attrs))


def _version_key(text: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in text.split(".")[:4])


def preload_cupti() -> str | None:
    """Load the newest pip-installed libcupti (and its nvperf libraries) by path; the path.

    cupti-python finds libcupti by scanning site-packages, and a process keeps the first
    libcupti it loads; where PyTorch's older CUPTI sits in site-packages too, the scan
    can pick it (no green-context records, no PM sampling). Loading the newest
    ``nvidia-cuda-cupti`` by path first makes it the one every caller gets. Does
    nothing (returns None) where a libcupti is already loaded or none is installed.
    Call it before importing torch.
    """
    import ctypes

    if _loaded_cupti_paths():
        return None
    newest = newest_pip_cupti()
    if newest is None:
        return None
    path = newest[1]
    folder = path.rsplit("/", 1)[0]
    with contextlib.suppress(OSError):  # PM sampling needs them; tracing does not
        for lib in ("libnvperf_host.so", "libnvperf_target.so"):
            ctypes.CDLL(f"{folder}/{lib}", mode=ctypes.RTLD_GLOBAL)
    try:
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return None
    return path


def newest_pip_cupti() -> tuple[str, str] | None:
    """``(version, libcupti path)`` of the newest pip-installed nvidia-cuda-cupti, or None."""
    from importlib import metadata

    found = []
    for dist in metadata.distributions(name="nvidia-cuda-cupti"):
        for f in dist.files or ():
            if f.name.startswith("libcupti.so"):
                found.append((_version_key(dist.version), dist.version, str(dist.locate_file(f))))
    return max(found)[1:] if found else None


def require_cupti():
    """The ``cupti.cupti`` module; :class:`TraceUnavailable` in one sentence when it cannot load."""
    preload_cupti()
    try:
        from cupti import cupti
    except (ImportError, OSError) as e:
        raise TraceUnavailable(
            f"trace=True needs cupti-python, which cannot be imported here ({type(e).__name__}: {e}); "
            f"install it with {_INSTALL}, or leave trace off: event timing works without it") from e
    return cupti


# ---------------------------------------------------------------------------
# The collector (GPU)
# ---------------------------------------------------------------------------

_state = threading.Lock()
_active: Collector | None = None
_registered_with: Any = None  # the cupti module our buffer callbacks are registered with
#: Context records seen in this process (a reused green context sends none the second time).
_CONTEXTS_SEEN: dict[int, dict] = {}


def _buffer_requested():
    return _BUFFER_BYTES, 0


def _buffer_completed(activities) -> None:
    c = _active
    if c is not None:
        c.take(activities)


class _Pushed:
    """An external correlation id pushed on enter and popped on exit (cheap, reusable)."""

    __slots__ = ("_cupti", "_kind", "_id")

    def __init__(self, cupti, kind, ext_id: int):
        self._cupti, self._kind, self._id = cupti, kind, ext_id

    def __enter__(self):
        self._cupti.activity_push_external_correlation_id(self._kind, self._id)
        return self

    def __exit__(self, *exc):
        self._cupti.activity_pop_external_correlation_id(self._kind)


def _handle(ctx) -> int:
    h = getattr(ctx, "handle", ctx)
    return int(h)


def _loaded_cupti_paths() -> set[str]:
    try:
        with open("/proc/self/maps") as f:
            return {line.split()[-1] for line in f if "libcupti" in line}
    except OSError:
        return set()


def _loaded_cupti() -> str:
    """The libcupti file this process loaded: the first one loaded serves every caller, and
    an older one (e.g. PyTorch's CUPTI 13.0 loaded first) has no green-context records."""
    return ", ".join(sorted(_loaded_cupti_paths())) or "not loaded yet"


class Collector:
    """CUPTI activity records of one experiment or one :func:`kernel_trace` block.

    One collector traces at a time in a process. The engine calls :meth:`group` at the
    start of every repetition and :meth:`tag` around every launch; :meth:`frame`
    returns the trace. Records of a layout are flushed when the next layout's first
    labelled repetition starts.

    Parameters
    ----------
    copies : bool, default True
        Also record memcpy and memset activity.
    cupti : module, optional
        The ``cupti.cupti`` module (default: imported; tests pass a stand-in).
    """

    def __init__(self, *, copies: bool = True, cupti=None):
        self._cupti = cupti if cupti is not None else require_cupti()
        #: the loaded libcupti and, per feature it lacks, the sentence that says so
        self.cupti_info = describe(self._cupti)
        self.refused = {k: v for k, v in offers(self.cupti_info).items() if v}
        if "kernel_trace" in self.refused:
            raise TraceUnavailable(self.refused["kernel_trace"])
        self.copies = copies
        self._lock = threading.Lock()
        self._raw: list[dict] = []
        self._ext: dict[int, int] = {}
        self._tags: dict[int, tuple] = {}
        self._groups: dict[int, tuple | None] = {}
        self._contexts: dict[int, tuple] = {}
        self._parts: dict[int, tuple[Any, str]] = {}
        self._rows: list[dict] = []
        self._gates: dict[int, int] = {}
        self._diag: Counter = Counter()
        self._enabled: list = []
        self._layout = None
        self._closed = True
        cupti = self._cupti
        self._ext_kind = cupti.ExternalCorrelationKind.CUSTOM1
        self._kinds = {}
        for attr, name in (("CONCURRENT_KERNEL", "kernel"), ("MEMCPY", "memcpy"), ("MEMSET", "memset"),
                           ("EXTERNAL_CORRELATION", "external"), ("CONTEXT", "context"),
                           ("GREEN_CONTEXT", "green"), ("RUNTIME", "api"), ("DRIVER", "api")):
            kind = getattr(cupti.ActivityKind, attr, None)
            if name == "green" and "tpc_map" in self.refused:
                continue  # the loaded CUPTI lacks them: CONTEXT records still give each partition's SMs
            if kind is not None and (copies or name not in ("memcpy", "memset")):
                self._kinds[int(kind)] = (kind, name)

    # -- life cycle ----------------------------------------------------------
    def start(self) -> Collector:
        """Enable the activity kinds; :class:`TraceUnavailable` in one sentence when CUPTI refuses."""
        global _active, _registered_with
        with _state:
            if _active is not None:
                raise TraceUnavailable("another gcexplore trace is already running in this process; "
                                       "finish it before starting one more")
            _active = self
        self._closed = False
        cupti = self._cupti
        try:
            if _registered_with is not cupti:
                cupti.activity_register_callbacks(_buffer_requested, _buffer_completed)
                _registered_with = cupti
            for kind, name in self._kinds.values():
                try:
                    cupti.activity_enable(kind)
                    self._enabled.append(kind)
                except Exception as e:  # noqa: BLE001 - what CUPTI said goes into the message / diagnostics
                    if name in ("kernel", "external"):
                        raise
                    if name == "green":
                        self.refused["tpc_map"] = (
                            f"{FEATURES['tpc_map'].what} is not available: {self.cupti_info.label} refused "
                            f"GREEN_CONTEXT records ({e}): {GET_NEWER}.")
                    self._diag[f"not enabled: {kind.name} ({e}; CUPTI library {_loaded_cupti()})"] += 1
        except Exception as e:  # noqa: BLE001
            self.close()
            raise TraceUnavailable(
                f"CUPTI refused to start tracing ({type(e).__name__}: {e}); another profiler (Nsight Systems, "
                "Nsight Compute or torch.profiler) may hold CUPTI in this process: run trace=True outside it, "
                "or leave trace off (event timing works without it)") from e
        return self

    def close(self) -> None:
        """Disable the activity kinds (idempotent); records not yet flushed are dropped."""
        global _active
        if self._closed:
            return
        self._closed = True
        for kind in reversed(self._enabled):
            with contextlib.suppress(Exception):
                self._cupti.activity_disable(kind)
        self._enabled.clear()
        with contextlib.suppress(Exception):
            self._cupti.activity_flush_all(1)
        with _state:
            if _active is self:
                _active = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # -- the CUPTI thread ----------------------------------------------------
    def take(self, activities) -> None:
        """Buffer callback: keep plain copies of the records (called by CUPTI)."""
        raw, ext, seen = [], {}, Counter()
        for a in activities:
            try:
                self._take_one(a, raw, ext, seen)
            except Exception as e:  # noqa: BLE001 - never raise into CUPTI's thread; counted instead
                seen[f"unreadable ({type(e).__name__}: {str(e)[:80]})"] += 1
        with self._lock:
            self._raw.extend(raw)
            self._ext.update(ext)
            self._diag.update({f"cupti {k} records": v for k, v in seen.items()})

    def _take_one(self, a, raw: list, ext: dict, seen: Counter) -> None:
        kind, name = self._kinds.get(int(a.kind), (None, "other"))
        seen[name] += 1
        if name == "kernel":
            raw.append(kernel_record(a))
        elif name in ("memcpy", "memset"):
            raw.append(copy_record(a, name))
        elif name == "external" and int(a.external_kind) == int(self._ext_kind):
            ext[int(a.correlation_id)] = int(a.external_id)
        elif name in ("context", "green"):
            rec = context_record(a, name == "green")
            old = _CONTEXTS_SEEN.get(rec["context_id"])
            if old is None or old["source"] != "GREEN_CONTEXT":
                _CONTEXTS_SEEN[rec["context_id"]] = rec

    # -- the engine's hooks ---------------------------------------------------
    def watch(self, partition) -> str:
        """Remember ``partition``'s CUPTI context id (once per partition object); its name."""
        key = id(partition)
        if key not in self._parts:
            cid = int(self._cupti.get_context_id(_handle(partition.context)))
            self._parts[key] = (partition, partition.name)
            self._contexts[cid] = (partition.name, int(partition.sm_count))
        return self._parts[key][1]

    def group(self, label: tuple | None) -> None:
        """A repetition starts: ``(layout, mode, rep)`` (rep None: warm-up), or None.

        The first repetition of a new layout flushes the previous layout's records
        first (its work has finished: every repetition ends in a sync).
        """
        if label is not None:
            if self._layout is not None and label[0] != self._layout:
                self.flush()
            self._layout = label[0]
        self._groups[len(self._groups)] = label

    def tag(self, role: str, slot=None, launch: int = 0, *, workload: str = "") -> _Pushed:
        """The external correlation id of one launch (a context manager) in the current group."""
        part = ""
        if slot is not None:
            workload, part = slot.workload.name, self.watch(slot.partition)
        ext_id = len(self._tags) + 1  # 0 reads as "none" in some tools
        self._tags[ext_id] = (len(self._groups) - 1, role, workload, part, launch)
        return _Pushed(self._cupti, self._ext_kind, ext_id)

    def probe(self, launch, stream) -> None:
        """Launch one tagged kernel, wait, flush: :class:`TraceUnavailable` saying what CUPTI
        returned when the kernel or its external correlation does not come back."""
        self.group(None)
        with self.tag("probe"):
            launch()
        stream.sync()
        probe_id = len(self._tags)
        for _ in range(50):  # a forced flush delivers at once; wait a little in case it does not
            self._cupti.activity_flush_all(1)
            with self._lock:
                kernels = [r for r in self._raw if r["activity"] == "kernel"]
                mine = [r for r in kernels if self._ext.get(r["correlation_id"]) == probe_id]
                n_ext = len(self._ext)
            if mine:
                return
            time.sleep(0.02)
        if not kernels:
            raise TraceUnavailable(
                "CUPTI started but returned no kernel record for a test kernel; another profiler (Nsight "
                "Systems, torch.profiler) probably holds CUPTI in this process (what CUPTI delivered: "
                f"{self.report()}); run trace=True outside it, or leave trace off")
        if not mine:
            raise TraceUnavailable(
                f"CUPTI returned {len(kernels)} kernel record(s) but none carried gcexplore's external "
                f"correlation id ({n_ext} external correlation record(s); first kernel record {kernels[0]}; "
                f"{self.report()}), so kernels cannot be attributed to workloads; leave trace off here")

    # -- results -------------------------------------------------------------
    def flush(self) -> None:
        """Ask CUPTI for every record so far and turn the new ones into rows."""
        if not self._closed:
            self._cupti.activity_flush_all(1)
        with self._lock:
            raw, self._raw = self._raw, []
            ext = dict(self._ext)
        self._gates.update(gate_ends(raw, ext, self._tags))
        rows, diag = trace_rows(raw, ext, self._tags, self._groups, self._contexts, greens=_CONTEXTS_SEEN,
                                gates=self._gates, **self._row_options(raw))
        self._rows.extend(rows)
        self._diag.update(diag)

    def _row_options(self, raw) -> dict:
        return {}

    def green_contexts(self) -> list[dict]:
        """The watched partitions' context records: SMs, TPCs and the logical TPC mask, from
        GREEN_CONTEXT records where CUPTI sent one, else from CONTEXT records, else from
        gcexplore's own partition (``source`` says which); and, unnamed, the GREEN_CONTEXT records
        of contexts the kernels ran in that nobody watched (``tpc_map`` names them)."""
        out = []
        layouts: dict[int, str] = {}
        for r in self._rows:
            layouts.setdefault(r["context_id"], r["layout"])
        for cid, (name, sm_count) in self._contexts.items():
            rec = dict(_CONTEXTS_SEEN.get(cid) or {"context_id": cid, "source": "gcexplore",
                                                    "num_multiprocessors": sm_count})
            rec.update(partition=name, layout=layouts.get(cid, ""), sm_count=sm_count)
            out.append(rec)
        seen = {cid: _CONTEXTS_SEEN.get(cid) or {} for cid in layouts.keys() - self._contexts.keys()}
        return out + [{**rec, "partition": "", "layout": layouts[cid], "sm_count": int(rec["num_multiprocessors"])}
                      for cid, rec in seen.items() if rec.get("source") == "GREEN_CONTEXT"]

    def rep_origins(self) -> list[dict]:
        """``{layout, mode, rep, group, origin_ns, workloads}`` of every measured repetition so far;
        ``group`` is the rows' ``group`` column (what joins them, :func:`gcexplore.schema.trace_groups`)."""
        names: dict[int, set] = {}
        for group, role, workload, _, _ in self._tags.values():
            if role == "workload":
                names.setdefault(group, set()).add(workload)
        return [{"layout": lab[0], "mode": lab[1], "rep": int(lab[2]), "group": int(g),
                 "origin_ns": int(self._gates[g]), "workloads": sorted(names.get(g, ()))}
                for g, lab in self._groups.items() if lab is not None and lab[2] is not None and g in self._gates]

    def diagnostics(self) -> dict[str, int]:
        """Counts of the records CUPTI delivered and of what became rows or was left out."""
        with self._lock:
            return dict(self._diag)

    def report(self) -> str:
        """The diagnostics in one line (printed by the GPU tests and benches)."""
        d = self.diagnostics()
        return ", ".join(f"{k}: {v}" for k, v in sorted(d.items())) or "no records"

    def frame(self, attrs: Mapping | None = None):
        """The trace so far as a result of kind ``"trace"`` (flushes first).

        ``attrs`` (the experiment's metadata) are copied; added: ``trace_of`` (the
        experiment's kind), ``green_contexts`` (:meth:`green_contexts`),
        ``trace_diagnostics`` (:meth:`diagnostics`), ``cupti_version`` (the loaded
        libcupti's version and file, and the cupti-python package), ``cupti`` (the same
        as fields), ``cupti_refused`` (feature -> the sentence saying what the loaded
        CUPTI lacks: ``tpc_map`` raises it) and ``rep_origins`` (each repetition's time zero on the GPU clock,
        ns: what lines up other GPU-timestamped data such as PM samples with the rows).
        """
        from ..schema import frame

        self.flush()
        a = dict(attrs or {})
        a.update(kind="trace", trace_of=a.get("kind", ""), green_contexts=self.green_contexts(),
                 trace_diagnostics=self.diagnostics(), cupti_version=self.cupti_version(),
                 cupti=self.cupti_info.as_dict(), cupti_refused=dict(self.refused),
                 rep_origins=self.rep_origins())
        return frame(self._rows, "trace", a)

    def cupti_version(self) -> str:
        """``CUPTI 13.0.85 (path; nvidia-cuda-cupti 13.0.85 owns the file), cupti-python 13.0.1``."""
        i = self.cupti_info
        return f"{i.label} ({i.library or 'no libcupti file seen'}; {i.how}), cupti-python {i.package or 'unknown'}"


# ---------------------------------------------------------------------------
# A user's own code
# ---------------------------------------------------------------------------


