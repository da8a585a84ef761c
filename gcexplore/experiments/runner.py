"""Keeping what was measured: the layout loop, its checkpoint file and the aborting exceptions.

- :func:`run_layouts` measures layout after layout and keeps every row: when a
  workload raises or the user interrupts, it raises :class:`MeasurementFailed` or
  :class:`MeasurementInterrupted` with all rows so far in ``exc.partial``.
- :func:`round_plan` lays the layouts out in rounds: every layout once per round, each round in
  a fresh shuffled order (seeded by the run id), so drift and the state drawn per round fall on
  every layout alike; each visit is one unit of :func:`run_layouts` (and of the checkpoint).
- :class:`Checkpoint` appends each finished layout to a JSON-lines file (flushed and
  fsynced per layout); a rerun with the same file skips the layouts already there. A
  torn last line (a crash mid-write) is cut off before anything is appended, so a
  finished layout is never glued to a fragment and lost. The file is never opened
  through a symlink (``O_NOFOLLOW``) and a new one is made from an exclusive temporary.

Pure Python and pandas; nothing here touches the GPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import random
import stat
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..device.driver import GreenContextError
from ..schema import round_sizes

__all__ = [
    "HOST_S",
    "Checkpoint",
    "MeasurementAborted",
    "MeasurementFailed",
    "MeasurementInterrupted",
    "Round",
    "round_plan",
    "host_add",
    "closing_bar",
    "keeping",
    "progress_lines",
    "run_layouts",
]

#: Seconds this process spent in an experiment's host-side steps outside its repetitions, summed by step
#: (``setup``, ``partitions``, ``warm``, ``nvml``, ``drain``, ``close``): a campaign task reports its share,
#: to tell which step slows when several cards' processes run at once.
HOST_S: dict[str, float] = {}


def host_add(step: str, seconds: float) -> None:
    HOST_S[step] = HOST_S.get(step, 0.0) + seconds


@dataclasses.dataclass(frozen=True)
class Round:
    """One round of a measurement: its index, its measured repetitions, the ``rep`` of its first
    (repetitions count on across rounds, so ``(layout, mode, rep)`` still names one repetition)."""

    index: int = 0
    repeats: int = 1
    first_rep: int = 0


def round_plan(layouts: Sequence[tuple[str, Any]], repeats: int, rounds: int, seed: str = "") -> list[tuple[str, Any]]:
    """``(key, (arg, Round))`` for every layout in every round, round by round.

    With one round the layouts keep their order and their labels as keys; with more, each
    round is shuffled afresh (``random.Random(seed)``) and the keys read ``"<label> round <k>"``.
    """
    rng = random.Random(str(seed))
    out, first = [], 0
    for k, n in enumerate(round_sizes(repeats, rounds)):
        order = list(layouts)
        if rounds > 1:
            rng.shuffle(order)
        out.extend((label if rounds == 1 else f"{label} round {k}", (arg, Round(k, n, first))) for label, arg in order)
        first += n
    return out


class MeasurementAborted(BaseException):
    """Base of the two ways a measurement stops early; ``.partial`` holds the rows so far.

    Not raised itself: see :class:`MeasurementFailed` and :class:`MeasurementInterrupted`.
    """

    def __init__(self, message: str, partial):
        super().__init__(message)
        self.partial = partial


class MeasurementFailed(MeasurementAborted, GreenContextError):
    """A workload (or the driver) raised during a measurement.

    The original exception is ``__cause__``; the rows measured before it are
    ``.partial``.
    """


class MeasurementInterrupted(MeasurementAborted, KeyboardInterrupt):
    """The user interrupted a measurement (Ctrl-C); ``.partial`` holds the rows so far."""


def _jsonable(v):
    if v is None or str(v) == "<NA>":
        return None
    if hasattr(v, "item") and not isinstance(v, (list, dict, str)):
        v = v.item()  # numpy scalars
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def _restore(v):
    return {"inf": math.inf, "-inf": -math.inf}.get(v, v) if isinstance(v, str) else v


class Checkpoint:
    """Rows of finished layouts in a JSON-lines file, for resuming a sweep.

    Line 1 is a header describing the run (``gcexplore_checkpoint``: the format
    version, the options, the workloads, the run id); each further line is
    ``{"layout": label, "rows": [...]}``. Values that JSON cannot hold (NaN,
    infinities) are stored as null / "inf".

    Parameters
    ----------
    path : str or path
        The file; its folder is created if needed.
    header : dict
        What must match for a resume (the ``run_id`` key is taken from the file).
    """

    VERSION = 1
    #: The largest checkpoint read, in bytes (about half a million measured rows).
    MAX_BYTES = 512 << 20
    #: Seconds this process spent appending and fsyncing layouts (a campaign task reports its share).
    write_s = 0.0
    #: Header keys that differ between a run and its resume.
    _PER_PROCESS = ("run_id",)

    def __init__(self, path, header: dict):
        self.path = os.fspath(path)
        self.header = {"gcexplore_checkpoint": self.VERSION, **header}

    def _fail(self, what: str) -> ValueError:
        return ValueError(f"{self.path} is not a usable gcexplore checkpoint: {what}; "
                          "pass another checkpoint path or delete the file")

    def load(self) -> dict[str, list[dict]]:
        """The finished layouts in the file (creating it with the header if new).

        A torn last line is cut off the file. Raises ValueError naming the file for a
        header that is not a checkpoint header or belongs to another run, and for a
        damaged line that is not the last.
        """
        folder = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(folder, exist_ok=True)
        if not os.path.lexists(self.path):
            self._write_new()
            return {}
        with self._open(os.O_RDONLY, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > self.MAX_BYTES:  # checked before reading: a sparse 30 GiB file is refused at once
                raise self._fail(f"it is {size / 2**30:.1f} GiB, over the {self.MAX_BYTES >> 20} MiB a checkpoint of "
                                 "measured layouts can reach")
            data = f.read(self.MAX_BYTES + 1)
        if not data:
            self._write_new()
            return {}
        lines = data.split(b"\n")
        torn = lines[-1] != b""  # the last record lacks its newline
        complete = lines[:-1]
        if not complete:
            raise self._fail("its header line is incomplete")
        header = self._parse_header(complete[0])
        self.header["run_id"] = header.get("run_id", self.header.get("run_id"))
        done: dict[str, list[dict]] = {}
        for number, raw in enumerate(complete[1:], start=2):
            entry = self._parse_entry(raw, number)
            if entry is None:  # only the last line may be damaged
                if number != len(complete):
                    raise self._fail(f"line {number} is damaged and is not the last line")
                torn = True
                complete = complete[:-1]
                break
            done[entry["layout"]] = [{k: _restore(v) for k, v in r.items()} for r in entry["rows"]]
        if torn:
            self._truncate(sum(len(line) + 1 for line in complete))
        return done

    def _parse_header(self, raw: bytes) -> dict:
        try:
            header = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise self._fail(f"its first line is not JSON ({e})") from e
        if not isinstance(header, dict) or "gcexplore_checkpoint" not in header:
            raise self._fail(f"its first line is {type(header).__name__} {str(header)[:60]!r}, "
                             "not a checkpoint header")
        diff = {k: (header.get(k), v) for k, v in self.header.items()
                if k not in self._PER_PROCESS and header.get(k) != v}
        if diff:
            what = "; ".join(f"{k}: file has {a!r}, this run {b!r}" for k, (a, b) in diff.items())
            raise ValueError(f"checkpoint {self.path} was written by a different run ({what}); "
                             "pass another checkpoint path or delete the file")
        return header

    def _parse_entry(self, raw: bytes, number: int) -> dict | None:
        try:
            entry = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
        if (not isinstance(entry, dict) or not isinstance(entry.get("layout"), str)
                or not isinstance(entry.get("rows"), list)
                or not all(isinstance(r, dict) for r in entry["rows"])):
            raise self._fail(f"line {number} is not a layout record "
                             "({'layout': str, 'rows': [dict, ...]})")
        return entry

    def _open(self, flags: int, mode: str):
        """The checkpoint opened never through a symlink, and only when it is a plain file."""
        try:
            fd = os.open(self.path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as e:
            if os.path.islink(self.path):
                raise self._fail("it is a symlink (gcexplore never writes through one)") from e
            raise
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise self._fail("it is not a plain file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode)

    def _write_new(self) -> None:
        from ..results.files import new_file_mode

        folder = os.path.dirname(os.path.abspath(self.path))
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(self.path)}.", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps(self.header) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, new_file_mode())  # the umask's, as any new file (077: the rows are the user's own)
            os.replace(tmp, self.path)  # replaces a symlink planted at the name, never writes through it
        except BaseException:
            if os.path.lexists(tmp):
                os.unlink(tmp)
            raise

    def _truncate(self, size: int) -> None:
        with self._open(os.O_RDWR, "r+b") as f:
            f.truncate(size)
            f.flush()
            os.fsync(f.fileno())

    def append(self, label: str, rows: list[dict]) -> None:
        """Append one finished layout as one line, flushed and fsynced."""
        clean = [{k: _jsonable(v) for k, v in r.items()} for r in rows]
        line = (json.dumps({"layout": label, "rows": clean}, allow_nan=False) + "\n").encode()
        t0 = time.perf_counter()
        with self._open(os.O_RDWR | os.O_APPEND, "r+b") as f:
            end = f.seek(0, os.SEEK_END)
            if end > 0:
                f.seek(end - 1)
                if f.read(1) != b"\n":  # never glue a record to a fragment
                    line = b"\n" + line
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        Checkpoint.write_s += time.perf_counter() - t0


def _progress(total: int, desc: str, enabled: bool, initial: int = 0, unit: str = "layout"):
    """A tqdm.auto bar (on stderr, or a notebook's widget) counting ``unit`` up to ``total``; None when
    not ``enabled`` or tqdm is missing. The caller closes it (also on an error)."""
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, desc=desc, unit=unit)


def progress_lines(progress, total: int, desc: str, *, unit: str):
    """(say(line), bar) of an experiment whose ``progress`` is a bool or a callable (``serve``, ``comm_sweep``):
    a callable gets each line, True a bar (:func:`_progress`) counting ``unit`` with the line as its postfix,
    False or None nothing. Close the bar with :func:`closing_bar`."""
    if callable(progress):
        return progress, None
    if not isinstance(progress, bool) and progress is not None:
        raise TypeError(f"{desc}: progress is True (a bar), False or a callable taking a line, got {progress!r}")
    bar = _progress(total, desc, bool(progress), unit=unit)
    if bar is None:
        return (lambda line: None), None

    def say(line: str) -> None:
        bar.set_postfix_str(line[:60])
        bar.update(1)

    return say, bar


@contextlib.contextmanager
def closing_bar(bar):
    """Close ``bar`` (None: nothing) when the block ends, also on an error or Ctrl-C."""
    try:
        yield
    finally:
        if bar is not None:
            bar.close()


def _partial(build: Callable[[list[dict]], Any], rows: list[dict]):
    """The rows as a result frame marked partial; the raw rows if even that fails."""
    try:
        df = build(rows)
        df.attrs["partial"] = True
        return df
    except Exception:  # never let this replace the original error
        import pandas as pd

        df = pd.DataFrame.from_records(rows)
        df.attrs["partial"] = True
        return df


@contextlib.contextmanager
def keeping(rows: list[dict], build: Callable[[list[dict]], Any], what: str):
    """Inside, an exception or Ctrl-C ends as :class:`MeasurementFailed` / :class:`MeasurementInterrupted`
    with every row of ``rows`` measured so far, framed by ``build``, in ``.partial`` (what
    :func:`run_layouts` does for the layouts of a sweep, for the experiments that measure otherwise)."""
    try:
        yield rows
    except MeasurementAborted:
        raise
    except KeyboardInterrupt as e:
        raise MeasurementInterrupted(f"{what} interrupted; the {len(rows)} rows measured so far are in exc.partial",
                                     _partial(build, rows)) from e
    except Exception as e:
        raise MeasurementFailed(f"{type(e).__name__} while measuring {what} ({e}); the {len(rows)} rows measured "
                                "so far are in exc.partial", _partial(build, rows)) from e


def run_layouts(layouts: Sequence[tuple[str, Any]], measure: Callable[[Any, list], None], *,
                build: Callable[[list[dict]], Any], checkpoint: Checkpoint | None = None,
                progress: bool = False, desc: str = "sweep") -> tuple[list[dict], list[str]]:
    """Measure each layout with ``measure(arg, rows_out)``, keeping every row.

    Returns ``(rows, resumed_labels)``. On an exception raises
    :class:`MeasurementFailed` / :class:`MeasurementInterrupted` with all rows so far
    (including those of a half-measured layout) as ``.partial``.
    """
    done = checkpoint.load() if checkpoint is not None else {}
    rows: list[dict] = []
    resumed = [label for label, _ in layouts if label in done]
    for label in resumed:
        rows.extend(done[label])
    bar = _progress(len(layouts), desc, progress, initial=len(resumed))
    finished = len(resumed)
    try:
        for label, arg in layouts:
            if label in done:
                continue
            if bar is not None:
                bar.set_postfix_str(label)
            layout_rows: list[dict] = []
            try:
                measure(arg, layout_rows)
            finally:
                rows.extend(layout_rows)
            if checkpoint is not None:
                checkpoint.append(label, layout_rows)
            finished += 1
            if bar is not None:
                bar.update(1)
    except KeyboardInterrupt as e:
        raise MeasurementInterrupted(
            f"interrupted after {finished} of {len(layouts)} layout(s); the {len(rows)} rows measured "
            "so far are in exc.partial", _partial(build, rows)) from e
    except Exception as e:
        raise MeasurementFailed(
            f"{type(e).__name__} while measuring ({e}); {finished} of {len(layouts)} layout(s) finished, "
            f"the {len(rows)} rows measured so far are in exc.partial", _partial(build, rows)) from e
    finally:
        if bar is not None:
            bar.close()
    return rows, resumed
