"""``gcexplore demo``: a quick sweep of the built-in pair, its summary and its plots.

On a GPU it measures (a sweep of ``compute`` + ``memory`` over every valid split, then
the SM occupancy of the best split); without one it says so in one line and shows the
results recorded on the project's GPU the same way, labelled as recorded with the
card and the date. Either way it prints the summary table and writes PNG plots and
the results file into one folder.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TextIO

import pandas as pd

from . import plot as _plot

#: The built-in pair the demo sweeps: the first gets the swept partition.
PAIR = ("compute", "memory")


def _gpu_reason(device: int) -> str | None:
    """None when ``device`` can run green contexts, else why not (one line)."""
    from .api import UnsupportedError, device_info

    try:
        device_info(device).require("green_context_streams")
    except UnsupportedError as exc:
        return str(exc)
    return None


def _layout_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One line per layout: median makespans per mode and the comparisons."""
    first = summary.drop_duplicates("layout").set_index("layout")
    ms = (summary.drop_duplicates(["layout", "mode"])
          .pivot(index="layout", columns="mode", values="makespan_median_ms"))
    table = pd.DataFrame({
        "split": first["split_sm_count"].astype(int),
        "concurrent_ms": ms.get("concurrent"),
        "sequential_ms": ms.get("sequential"),
        "streams_ms": ms.get("streams"),
        "vs_sequential": first["speedup_vs_sequential"],
        "vs_streams": first["speedup_vs_streams"],
        "lower_bound_ms": first["lower_bound_ms"],
        "efficiency": first["efficiency"],
    })
    return table.sort_values("split")


def format_summary(df: pd.DataFrame) -> str:
    """The demo's printed summary of a sweep: a line per layout, the best marked.

    Parameters
    ----------
    df : pandas.DataFrame
        A :func:`gcexplore.sweep` result (live or recorded).

    Returns
    -------
    str
        The heading (workloads, device, recorded or live, date), the table (speedups
        are sequential / concurrent and streams / concurrent makespans; efficiency is
        lower bound / concurrent) and a closing line naming the best split.
    """
    from .profile import best_split, summarize

    table = _layout_table(summarize(df))
    best = best_split(df)
    shown = table.drop(columns="split").rename_axis("layout").reset_index()
    shown.insert(0, "best", ["*" if lay == best["layout"] else "" for lay in shown["layout"]])
    text = shown.to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep="-")

    def x(v):
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}x"

    names = " + ".join(dict.fromkeys(
        df[df["mode"] == "concurrent"].sort_values("partition", key=lambda s: s.map(
            _plot._partition_key))["workload"]))
    head = f"{names} — {_plot.figure_stamp(df.attrs)}"
    verdict = ("overlap pays" if best["speedup_vs_sequential"] > 1.0
               else "overlap does not pay here")
    tail = (f"best split {best['layout']}: concurrent {best['concurrent_ms']:.3f} ms, "
            f"{x(best['speedup_vs_sequential'])} vs sequential "
            f"({best['sequential_ms']:.3f} ms), {x(best['speedup_vs_streams'])} vs plain "
            f"streams ({best['streams_ms']:.3f} ms), lower bound "
            f"{best['lower_bound_ms']:.3f} ms (efficiency {best['efficiency']:.2f}) — "
            f"{verdict}")
    return f"{head}\n{text}\n{tail}"


def _save_png(fig, path: Path) -> Path:
    fig.savefig(path, dpi=120)
    return path


def run_demo(out_dir="gcexplore-out", *, device: int = 0, repeats: int = 5,
             recorded: bool = False, file: TextIO | None = None) -> dict[str, Path]:
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
    file : text stream, optional
        Where to print (default ``sys.stdout``).

    Returns
    -------
    dict of str to pathlib.Path
        What was written: ``"sweep"``, ``"throughput"``, ``"occupancy"`` (PNGs, the
        last when occupancy records exist), ``"scaling"``, ``"isolation"`` (recorded
        only, when present) and ``"results"`` (``sweep.parquet``).
    """
    from . import results as _results

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
        occupancy = _results.load_recorded("occupancy") if "occupancy" in present else None
        extra = {n: _results.load_recorded(n) for n in ("scaling", "isolation") if n in present}
    else:
        from .profile import best_split, occupancy as measure_occupancy, sweep

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
    written["results"] = _results.save(df, folder / "sweep.parquet")
    print(f"wrote {', '.join(p.name for p in written.values())} to {folder}/", file=out)
    return written
