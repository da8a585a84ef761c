"""``gcexplore demo``: a quick sweep of the built-in pair, its summary and its plots.

On a GPU it measures (a sweep of ``compute`` + ``memory`` over every valid split, then
the SM occupancy of the best split); without one it says so in one line and shows the
results recorded on the project's GPU the same way, labelled as recorded with the
card and the date. Either way it prints the summary table and writes PNG plots and
the results file into one folder.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import TextIO, cast

import pandas as pd

from ..results import kinds as _kinds
from ..views import plot as _plot
from ..views.report import layout_report

#: The built-in pair the demo sweeps: the first gets the swept partition.
PAIR = ("compute", "memory")


def _gpu_reason(device: int) -> str | None:
    """None when ``device`` can run green contexts, else why not (one line)."""
    from ..device.driver import UnsupportedError, device_info

    try:
        device_info(device).require("green_context_streams")
    except UnsupportedError as exc:
        return str(exc).split(";")[0]  # what is missing; the advice follows in the demo itself
    return None


def format_summary(df: pd.DataFrame) -> str:
    """The demo's printed summary of a sweep (see :func:`gcexplore.report.layout_report`)."""
    return layout_report(df)


def _recorded_occupancy(sweep_df: pd.DataFrame, present: set, out) -> pd.DataFrame | None:
    """The recorded occupancy at the sweep's best split when there is one; else the one
    recorded at another layout, and a line that says so."""
    from ..results import io as _results
    from ..analysis import best_layout, occupancy_layout

    best = best_layout(sweep_df)
    frames = [_results.load_recorded(n) for n in ("occupancy_best", "occupancy") if n in present]
    for occ in frames:
        if occupancy_layout(occ) == best:
            return occ
    if frames:
        print(f"gcexplore demo: the SM occupancy shown was recorded at {occupancy_layout(frames[0])}, "
              f"not at the best split {best} (no occupancy was recorded at that layout; "
              "bench/record.py records one as occupancy_best)", file=out)
        return frames[0]
    return None


#: Every file the demo may write; a rerun keeps them all and writes ``<stem>-2`` (then -3, ...).
_FILES = ("sweep.parquet", "sweep.png", "throughput.png", "occupancy.png", "scaling.png", "isolation.png")


def out_folder(out_dir) -> Path:
    """``out_dir`` created and writable, else ValueError in one line (before anything is measured)."""
    folder = Path(out_dir)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"the output folder {str(folder)!r} is a file; the demo writes its plots and results "
                         "file into a folder: give a folder name")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot create the output folder {str(folder)!r}: {e.strerror or e}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"the output folder {str(folder)!r} cannot be written (no write permission)")
    return folder


def _names(folder: Path, overwrite: bool) -> dict[str, Path]:
    """Where each file goes: its own name, or all with the first ``-N`` none of them has yet."""
    suffix, n = "", 2
    while not overwrite and any(os.path.lexists(folder / f"{Path(f).stem}{suffix}{Path(f).suffix}") for f in _FILES):
        suffix, n = f"-{n}", n + 1
    return {Path(f).stem if f.endswith(".png") else "results": folder / f"{Path(f).stem}{suffix}{Path(f).suffix}"
            for f in _FILES}


def _save_png(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    from ..results.files import write_figure

    try:
        write_figure(fig, path, dpi=120)  # a symlink there is replaced, never written through
    finally:
        plt.close(fig)
    return path


def run_demo(out_dir="gcexplore-out", *, device: int = 0, repeats: int = 5,
             recorded: bool = False, overwrite: bool = False, file: TextIO | None = None) -> dict[str, Path]:
    """Run (or replay) the demo and write its files.

    The output folder is checked before anything is measured, and the results file is
    written as soon as the sweep is measured, before anything else can fail.

    Parameters
    ----------
    out_dir : str or path, default "gcexplore-out"
        Folder for the PNGs and the results file (created if needed).
    device : int, default 0
        GPU to measure on.
    repeats : int, default 5
        Repetitions per mode and layout of the live sweep.
    recorded : bool, default False
        Show the recorded results even when a GPU is present.
    overwrite : bool, default False
        Replace files already in ``out_dir``; by default an earlier run's files (results
        and figures alike) are kept and this run's are written as ``sweep-2.parquet``,
        ``sweep-2.png``, ... (or the next free number), and the demo says so.
    file : text stream, optional
        Where to print (default ``sys.stdout``).

    Returns
    -------
    dict of str to pathlib.Path
        What was written: ``"results"`` (``sweep.parquet``), ``"sweep"``, ``"throughput"``,
        ``"occupancy"`` (PNGs, the last when occupancy records exist), ``"scaling"``,
        ``"isolation"`` (recorded only, when present).

    Raises
    ------
    ValueError
        ``out_dir`` is a file or cannot be created or written (nothing is measured).
    """
    from ..results import io as _results

    out = file or sys.stdout
    folder = out_folder(out_dir)
    names = _names(folder, overwrite)
    occupancy = extra = None
    if not recorded:
        reason = _gpu_reason(device)
        if reason is not None:
            print(f"gcexplore demo: no GPU for a live run ({reason}); showing the recorded "
                  "results instead", file=out)
            recorded = True
    if recorded:
        df = _results.load_recorded("sweep")
        written = {"results": _results.save(df, names["results"], overwrite=True)}
        present = set(_results.recorded_names())
        occupancy = _recorded_occupancy(df, present, out)
        extra = {n: _results.load_recorded(n) for n in ("scaling", "isolation") if n in present}
    else:
        from ..analysis import best_split
        from ..experiments.measure_occupancy import occupancy as measure_occupancy
        from ..experiments.overlap import sweep

        print(f"gcexplore demo: sweeping {' + '.join(PAIR)} over every valid split "
              f"({repeats} repetitions per mode)...", file=out)
        df = cast(pd.DataFrame, sweep(list(PAIR), repeats=repeats, device=device))  # trace=False: a frame
        written = {"results": _results.save(df, names["results"], overwrite=True)}  # before anything can fail
        best = int(best_split(df)["split_sm_count"])
        occupancy = measure_occupancy(list(PAIR), [best], device=device)
    if names["results"].name != "sweep.parquet":
        print(f"gcexplore demo: {folder} holds an earlier run's files and they are kept; this run's "
              f"end in {names['results'].stem[len('sweep'):]} ({names['results'].name}; --overwrite replaces them)",
              file=out)
    print(format_summary(df), file=out)
    figures = {"sweep": lambda: _plot.plot_sweep(df), "throughput": lambda: _plot.plot_throughput(df)}
    if occupancy is not None:
        figures["occupancy"] = lambda: _plot.plot_occupancy(occupancy)
    for name, frame in (extra or {}).items():  # each kind's figure, as its declaration names it
        figures[name] = functools.partial(_kinds.resolve(_kinds.get(_kinds.kind_of(frame)).figure), frame)
    for name, draw in figures.items():
        written[name] = _save_png(draw(), names[name])
    written["results"] = written.pop("results")  # listed last, as before
    print(f"wrote {', '.join(p.name for p in written.values())} to {folder}/", file=out)
    return written
