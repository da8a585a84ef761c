"""What every experiment shares: its set-up and tear-down (:func:`experiment`) and the state it
runs with (:class:`Experiment`).

The options are checked (:class:`gcexplore.schema.Options`), the caller's ``check`` sees the
device and the workload names before anything is compiled or allocated, built-in workloads made
from names are closed at the end, and the timing engine (:mod:`gcexplore.experiments.engine`) is
closed whatever happens. :func:`result_frame` is the one constructor of every kind's result frame
(identity from :data:`gcexplore.schema.IDENTITY`: the card's and the process's, the run id, the
options); :meth:`Experiment.frame` and the experiments that need no engine (serving, comm) call it.
"""

from __future__ import annotations

import contextlib
import math
import time

from ..device import partitions
from ..device.driver import DeviceInfo, device_info
from ..device.partitions import Partitioning
from ..schema import RECIPES_ATTR, Options, environment_identity, frame, new_run_id
from ..trace.collector import Collector
from ..workloads.spec import as_workloads, recipes_of, workload_names
from ..workloads.workload import Workload
from .engine import Engine, launch_gap
from .runner import host_add, round_plan

__all__ = ["Experiment", "experiment", "result_frame"]


def result_frame(rows: list[dict], kind: str, info: DeviceInfo, *, run_id: str, extra: dict | None = None):
    """A result of ``kind`` from measured rows: every kind's frame is built here.

    ``attrs``: the card's facts and identity (``info.metadata()``), the process's (host, PyTorch and
    CuPy versions: :func:`~gcexplore.schema.environment_identity`), ``kind``, ``recorded=False``,
    ``run_id``, then ``extra`` (options, the engine's settings, what the experiment adds). Rows carry
    the identity columns of ``attrs`` unless they hold their own (a rank's card).
    """
    from ..results import kinds

    kinds.get(kind)  # a family's kind declares its columns when its family is loaded
    a = info.metadata()
    a.update(environment_identity())
    a.update(kind=kind, recorded=False, run_id=run_id)
    a.update(extra or {})
    return frame(rows, kind, a)


class Experiment:
    """One experiment's device, options, workloads and engine; builds its result frames.

    ``options`` is fixed for the run; a caller that measures with other settings (the tuner's
    repetition counts) passes its own :class:`Options` to the measuring function.
    """

    def __init__(self, kind: str, info: DeviceInfo, options: Options, wls: list[Workload], run_id: str):
        self.kind, self.info, self.options, self.wls, self.run_id = kind, info, options, wls, run_id
        self.engine: Engine | None = None
        self.trace: Collector | None = None
        self.gap = math.nan
        self.extra: dict = {}
        self.warmed: dict[str, str] = {}  # layout -> how its later rounds warm up (its first round ran here)
        self._owned: list = []
        self._round = 0

    def adopt(self, resource):
        """Close ``resource`` (a workload or recorder) when the run ends."""
        self._owned.append(resource)
        return resource

    def rounds(self, layouts, options: Options | None = None):
        """The visits of ``layouts`` in this run's rounds (:func:`~gcexplore.experiments.runner.round_plan`)."""
        o = options or self.options
        return round_plan(layouts, o.repeats, o.rounds, seed=self.run_id)

    def enter_round(self, index: int) -> None:
        """Start round ``index`` (a no-op within a round): fresh whole-device streams and gate, and
        fresh inputs for workloads built with ``setup=``."""
        if index != self._round:
            if self.engine is not None:
                self.engine.new_round()
            self.redraw()
        self._round = index

    def redraw(self) -> None:
        """Workloads built with ``setup=`` allocate their inputs afresh at their next call."""
        for w in self.wls:
            new_round = getattr(w, "new_round", None)
            if new_round is not None:
                new_round()

    def partitioned(self, split):
        """The split's partitions: a Partitioning given (left open) or a new one (closed after)."""
        if isinstance(split, Partitioning):
            return contextlib.nullcontext(split)
        return partitions.split(split, device=self.info.index, rounding=self.options.rounding)

    def frame(self, rows: list[dict]):
        a = dict(launch_gap_us=self.gap, **self.options.metadata(self.kind))
        if self.engine is not None:
            a.update(self.engine.metadata())
        a.update(self.extra)
        return result_frame(rows, self.kind, self.info, run_id=self.run_id, extra=a)

    def close_owned(self) -> None:
        for r in reversed(self._owned):
            with contextlib.suppress(Exception):
                r.close()


def _foreign(run: Experiment) -> None:
    wrong = [f"{w.name} (device {w.device})" for w in run.wls if w.device not in (None, run.info.index)]
    if wrong:
        raise ValueError(f"workload(s) {', '.join(wrong)} hold memory of another device and cannot "
                         f"run on device {run.info.index} ({run.info.name}); build them with device={run.info.index}")


@contextlib.contextmanager
def experiment(kind: str, workloads, device, options: Options, *, check=None, streams: int = 2):
    """Set up an experiment of result kind ``kind``; yields an :class:`Experiment`.

    ``check(info, names)`` runs before any workload is built or any GPU memory is
    taken; it may return the run id to use (a resumed sweep's).
    """
    t0 = time.perf_counter()
    info = device_info(device)
    names = workload_names(workloads)
    run_id = check(info, names) if check is not None else None
    wls, made = as_workloads(workloads, device=info.index)
    run = Experiment(kind, info, options, wls, run_id or new_run_id())
    recipes = recipes_of(workloads)
    if recipes:  # what was measured, in the one recipe grammar (compare never pools two recipes)
        run.extra[RECIPES_ATTR] = recipes
    for w in made:
        run.adopt(w)
    closing = None
    try:
        _foreign(run)
        run.gap = launch_gap(info.index)
        run.trace = run.adopt(Collector().start()) if options.trace else None
        run.engine = Engine(info, streams=max(2, streams, len(wls)), l2_flush=options.l2_flush,
                            graphs=options.graphs, trace=run.trace)
        host_add("setup", time.perf_counter() - t0)
        try:
            yield run
        finally:
            closing = time.perf_counter()
            assert run.engine is not None  # set above; nothing unsets it
            run.engine.close()
    finally:
        run.close_owned()
        if closing is not None:  # not when the set-up itself failed
            host_add("close", time.perf_counter() - closing)
