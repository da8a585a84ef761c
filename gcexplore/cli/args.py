"""Argument types and checks of the ``gcexplore`` command, all made before the GPU is asked:
numbers, SM counts, modes, built-in workload specs (against the factory's signature), and the
files a run writes (suffix, folder, no collision between --out, --trace, --kernel-trace,
their sidecars and --checkpoint)."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

RESULT_SUFFIXES = (".parquet", ".csv")


class Usage(Exception):
    """A bad argument found by our own checks (exit 2)."""


def int_arg(minimum: int, maximum: int | None = None, why: str = ""):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {v}")
        if maximum is not None and v > maximum:
            raise argparse.ArgumentTypeError(f"must be <= {maximum}{why}, got {v}")
        return v

    return parse


def int_list(text: str) -> list[int]:
    parts = [x.strip() for x in text.replace("+", ",").split(",") if x.strip()]
    try:
        counts = [int(x) for x in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated SM counts such as 24 or 8,16, got {text!r}")
    if not counts or any(c <= 0 for c in counts):
        raise argparse.ArgumentTypeError(f"SM counts must be positive integers, got {text!r}")
    return counts


def mode_list(text: str) -> tuple[str, ...]:
    from ..schema import check_modes

    try:
        return check_modes([m.strip() for m in text.split(",") if m.strip()])
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def writable_file(path: str, suffixes: tuple[str, ...], what: str) -> Path:
    """``path`` if it has a valid suffix and could be written; else Usage. Creates nothing: a
    run that fails before it measures (no GPU) leaves no empty folder behind; the folder is made
    when the file is written."""
    p = Path(path)
    if p.suffix.lower() not in suffixes:
        raise Usage(f"{what} {path!r} must end in {' or '.join(suffixes)}")
    if p.is_dir():
        raise Usage(f"{what} {path!r} is a folder; give a file name ending in {' or '.join(suffixes)}")
    existing = p.parent if str(p.parent) else Path(".")
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise Usage(f"cannot create the folder of {what} {path!r}: {str(existing)!r} is a file")
    if not os.access(existing, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise Usage(f"{what} {path!r} cannot be written (no write permission in {str(existing)!r})")
    side = p.with_suffix(".json")
    if p.suffix.lower() == ".csv" and side.exists():
        from ..results.io import is_sidecar

        if not is_sidecar(side, p.name):  # found now, not after measuring (the save would refuse)
            raise Usage(f"{what} {path!r}: {str(side)!r} exists and is not its metadata sidecar; saving the "
                        "CSV would replace it: choose another name, move that file, or use .parquet")
    return p


def parse_workload(spec: str) -> tuple[str, dict]:
    """A built-in recipe (``name`` or ``name:key=value,...``, e.g. ``spin:us=100``) -> (name, options),
    checked by :func:`gcexplore.workloads.spec.parse_recipe` (the one grammar); no GPU."""
    from ..workloads.spec import parse_recipe

    try:
        r = parse_recipe(spec)
    except ValueError as e:
        raise Usage(str(e)) from None
    return r.name, dict(r.options)


def workload_names(specs) -> list[tuple[str, str, dict]]:
    from ..workloads.spec import unique_names

    parsed = [parse_workload(spec) for spec in specs]
    return [(key, name, kwargs) for key, (name, kwargs) in zip(unique_names([n for n, _ in parsed]), parsed)]


def kernel_trace_file(args, out: Path) -> Path | None:
    """The --kernel-trace file, checked: suffix, folder, no collision with --out, --trace or a sidecar."""
    if not args.kernel_trace:
        return None
    kt = writable_file(args.kernel_trace, RESULT_SUFFIXES, "--kernel-trace")
    mine = {kt.resolve(), kt.with_suffix(".json").resolve()}  # the file and its sidecar
    if {out.resolve(), out.with_suffix(".json").resolve()} & mine:
        raise Usage(f"--kernel-trace {args.kernel_trace!r} and --out {args.out!r} would overwrite each "
                     "other or share a metadata sidecar; give them different names")
    if args.trace and Path(args.trace).resolve() in mine:
        raise Usage(f"--trace {args.trace!r} would overwrite --kernel-trace {args.kernel_trace!r} or its "
                     "metadata sidecar")
    return kt


def check_checkpoint(args, out: Path, kernels: Path | None) -> None:
    """Usage when --checkpoint names a folder or a file this run writes (a save there would
    destroy the checkpoint a rerun resumes from)."""
    ck = Path(args.checkpoint)
    if ck.is_dir():
        raise Usage(f"--checkpoint {args.checkpoint!r} is a folder; give a file name (JSON lines)")
    taken = {out.resolve(): "--out"}
    if out.suffix.lower() == ".csv":
        taken[out.with_suffix(".json").resolve()] = "the metadata sidecar of --out"
    if args.trace:
        taken[Path(args.trace).resolve()] = "--trace"
    if kernels is not None:
        taken[kernels.resolve()] = "--kernel-trace"
        if kernels.suffix.lower() == ".csv":
            taken[kernels.with_suffix(".json").resolve()] = "the metadata sidecar of --kernel-trace"
    if ck.resolve() in taken:
        raise Usage(f"--checkpoint {args.checkpoint!r} is also {taken[ck.resolve()]}: saving the results "
                     f"would destroy the checkpoint a rerun resumes from; give it its own name, e.g. "
                     f"{str(out.with_suffix('.ckpt.jsonl'))!r}")


def percent_arg(text: str) -> float:
    """A finite, non-negative percentage (``nan`` or ``inf`` would switch a gate off)."""
    v = float_arg(text)
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"expected a finite percentage >= 0 such as 5, got {text!r}")
    return v


def float_arg(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
