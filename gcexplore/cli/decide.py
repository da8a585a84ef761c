"""``gcexplore compare A B --until-decided N``: both sides measured again (new runs) until decided.

Only sides that can be measured again as themselves qualify (:mod:`gcexplore.experiments.rerun`):
built-in recipes (``gcexplore sweep`` records them), this card, driver and versions. Two sides
with the same recipes and options are refused: new runs of both would measure one thing twice, not
what made the recorded sides differ (a day, a code change); that needs a new run of the changed
side, through :func:`gcexplore.compare_until_decided` and the user's own ``measure`` callables.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from .args import Usage, writable_file

__all__ = ["compare_until_decided_cli", "recipes_text", "runs_folder"]


def recipes_text(parsed) -> dict[str, str]:
    """``{workload name: recipe}`` of the CLI's parsed built-ins (``(key, name, options)``), as a
    result records them (``attrs["workload_specs"]``) so that it can be measured again."""
    from ..workloads.spec import parse_recipe

    out = {}
    for key, name, kwargs in parsed:
        opts = ",".join(f"{k}={v}" for k, v in kwargs.items())
        out[key] = parse_recipe(f"{name}:{opts}" if opts else name).text
    return out


def _read(x: str, name: str):
    from ..analysis.comparison import load_side  # compare's own reading: a path or a recorded name

    try:
        return load_side(x, name)[0]
    except FileNotFoundError as e:
        raise Usage(f"--until-decided: {e}") from None


def runs_folder(out: str | None) -> Path:
    """Where the new runs go: ``out``, else ``gcexplore-out/until-decided-<time>``; refused (Usage) where
    it cannot be written or already holds runs (a second comparison would mix its runs with them)."""
    folder = Path(out) if out else Path("gcexplore-out") / f"until-decided-{time.strftime('%Y%m%d-%H%M%S')}"
    if folder.exists() and not folder.is_dir():
        raise Usage(f"--out {str(folder)!r} is a file; give a folder for the new runs")
    held = sorted(p.name for side in ("A", "B") for p in folder.glob(f"{side}-run*.parquet")) if folder.is_dir() else []
    if held:
        names = ", ".join(held[:3]) + (", ..." if len(held) > 3 else "")
        raise Usage(f"--out {str(folder)!r} already holds runs ({names}): give a new folder, so that each "
                    "comparison's runs stay apart")
    writable_file(str(folder / "A-run2.parquet"), (".parquet",), "--out")
    return folder


def _kept(measure, side: str, folder: Path, written: list):
    """``measure`` that saves each new run as soon as it is measured (``<side>-run<k>.parquet``; run 1 is
    the recorded side, already a file), and the rows a failed or interrupted run measured
    (``-partial``): a fault at a later look loses no run."""
    from ..experiments.runner import MeasurementAborted
    from ..results.io import save

    calls = [0]

    def run(sizes):
        calls[0] += 1
        try:
            df = measure(sizes)
        except MeasurementAborted as e:
            if e.partial is not None and len(e.partial):
                path = save(e.partial, folder / f"{side}-run{calls[0]}-partial.parquet", overwrite=False)
                print(f"gcexplore compare: wrote {path} (the rows run {calls[0]} of {side} measured before it "
                      "stopped)", file=sys.stderr)
            raise
        if calls[0] > 1:
            written.append(save(df, folder / f"{side}-run{calls[0]}.parquet", overwrite=False))
        return df
    return run


def compare_until_decided_cli(args):
    """The Comparison of ``args.a`` and ``args.b`` after up to ``args.until_decided`` runs per side, and
    the files of the new runs (in :func:`runs_folder`, each written as soon as it was measured)."""
    from ..analysis.sequential import compare_until_decided
    from ..experiments.rerun import measure_again, recipes_and_options

    if args.b is None or args.by:
        raise Usage("--until-decided measures both sides again: give two results A B (not --by)")
    a, b = _read(args.a, "A"), _read(args.b, "B")
    folder = runs_folder(args.out)
    try:
        if recipes_and_options(a, "A") == recipes_and_options(b, "B"):
            raise Usage("A and B measured the same recipes with the same options: new runs of both would measure "
                        "one thing twice, not what made them differ; --until-decided decides a difference the "
                        "options make (e.g. --graphs or --l2-flush against without)")
        ma = measure_again(a, device=args.device, label="A")
        mb = measure_again(b, device=args.device, label="B")
    except ValueError as e:
        raise Usage(str(e)) from None
    written: list = []
    c = compare_until_decided(_kept(ma, "A", folder, written), _kept(mb, "B", folder, written),
                              max_runs=args.until_decided, min_effect=args.threshold / 100.0,
                              confidence=args.confidence, labels=(Path(args.a).stem, Path(args.b).stem))
    return c, written
