"""``gcexplore compare A B --until-decided N``: both sides measured again (new runs) until decided.

Only sides that can be measured again as themselves qualify (:mod:`gcexplore.experiments.rerun`):
built-in recipes (``gcexplore sweep`` records them), this card, driver and versions. Two sides
with the same recipes and options are refused: new runs of both would measure one thing twice, not
what made the recorded sides differ (a day, a code change); that needs a new run of the changed
side, through :func:`gcexplore.compare_until_decided` and the user's own ``measure`` callables.
"""

from __future__ import annotations

from pathlib import Path

from .args import Usage

__all__ = ["compare_until_decided_cli", "recipes_text"]


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


def compare_until_decided_cli(args):
    """The Comparison of ``args.a`` and ``args.b`` after up to ``args.until_decided`` runs per side."""
    from ..analysis.sequential import compare_until_decided
    from ..experiments.rerun import measure_again, recipes_and_options

    if args.b is None or args.by:
        raise Usage("--until-decided measures both sides again: give two results A B (not --by)")
    a, b = _read(args.a, "A"), _read(args.b, "B")
    try:
        if recipes_and_options(a, "A") == recipes_and_options(b, "B"):
            raise Usage("A and B measured the same recipes with the same options: new runs of both would measure "
                        "one thing twice, not what made them differ; --until-decided decides a difference the "
                        "options make (e.g. --graphs or --l2-flush against without)")
        ma = measure_again(a, device=args.device, label="A")
        mb = measure_again(b, device=args.device, label="B")
    except ValueError as e:
        raise Usage(str(e)) from None
    return compare_until_decided(ma, mb, max_runs=args.until_decided, min_effect=args.threshold / 100.0,
                                 confidence=args.confidence, labels=(Path(args.a).stem, Path(args.b).stem))
