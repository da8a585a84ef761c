"""``gcexplore demo``: a quick sweep of the built-in pair, its summary and its plots.

On a GPU it measures (a sweep of ``compute`` + ``memory`` over every valid split, then
the SM occupancy of the best split); without one it says so in one line and shows the
results recorded on the project's GPU the same way, labelled as recorded with the
card and the date. Either way it prints the summary table and writes PNG plots and
the results file into one folder.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

import pandas as pd

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
        return str(exc)
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


def _save_png(fig, path: Path) -> Path:
    fig.savefig(path, dpi=120)
    return path


def run_demo(out_dir="gcexplore-out", *, device: int = 0, repeats: int = 5,
             recorded: bool = False, overwrite: bool = False, file: TextIO | None = None) -> dict[str, Path]:
    """Run (or replay) the demo and write its files.

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
        Replace a ``sweep.parquet`` already in ``out_dir``; by default an earlier
        result is kept and this one is written as ``sweep-2.parquet`` (or the next
        free number), and the demo says so.
    file : text stream, optional
        Where to print (default ``sys.stdout``).

    Returns
    -------
    dict of str to pathlib.Path
        What was written: ``"sweep"``, ``"throughput"``, ``"occupancy"`` (PNGs, the
        last when occupancy records exist), ``"scaling"``, ``"isolation"`` (recorded
        only, when present) and ``"results"`` (``sweep.parquet``).
    """
    from ..results import io as _results

    out = file or sys.stdout
    occupancy = extra = None
    if not recorded:
        reason = _gpu_reason(device)
        if reason is not None:
            print(f"gcexplore demo: no GPU for a live run ({reason}); showing the recorded "
                  "results instead", file=out)
            recorded = True
    if recorded:
        df = _results.load_recorded("sweep")
        present = set(_results.recorded_names())
        occupancy = _recorded_occupancy(df, present, out)
        extra = {n: _results.load_recorded(n) for n in ("scaling", "isolation") if n in present}
    else:
        from ..analysis import best_split
        from ..experiments.measure_occupancy import occupancy as measure_occupancy
        from ..experiments.overlap import sweep

        print(f"gcexplore demo: sweeping {' + '.join(PAIR)} over every valid split "
              f"({repeats} repetitions per mode)...", file=out)
        df = sweep(list(PAIR), repeats=repeats, device=device)
        best = int(best_split(df)["split_sm_count"])
        occupancy = measure_occupancy(list(PAIR), [best], device=device)

    print(format_summary(df), file=out)

    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    written = {
        "sweep": _save_png(_plot.plot_sweep(df), folder / "sweep.png"),
        "throughput": _save_png(_plot.plot_throughput(df), folder / "throughput.png"),
    }
    if occupancy is not None:
        written["occupancy"] = _save_png(_plot.plot_occupancy(occupancy),
                                         folder / "occupancy.png")
    for name, frame in (extra or {}).items():
        fn = {"scaling": _plot.plot_scaling, "isolation": _plot.plot_isolation}[name]
        written[name] = _save_png(fn(frame), folder / f"{name}.png")
    target = folder / "sweep.parquet"
    if not overwrite:
        n = 2
        while target.exists():
            target, n = folder / f"sweep-{n}.parquet", n + 1
        if target.name != "sweep.parquet":
            print(f"gcexplore demo: {folder / 'sweep.parquet'} holds an earlier result and is kept; "
                  f"this one goes to {target.name} (--overwrite replaces it)", file=out)
    written["results"] = _results.save(df, target, overwrite=True)
    print(f"wrote {', '.join(p.name for p in written.values())} to {folder}/", file=out)
    return written
