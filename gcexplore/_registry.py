"""What the families plug into the core, by name: the core looks a family's part up here and never
imports the family.

A family's ``__init__`` registers its command-line subcommand as a ``"module:function"`` string, so
registering imports nothing; the part is imported when first used (:func:`resolve`). Its result kinds
register in :mod:`gcexplore.results.kinds` (their summary, check and figure named the same way).
``gcexplore/__init__`` imports every family package (a table each), so the registrations are in
place before any core module runs.
"""

from __future__ import annotations

import importlib

#: CLI subcommand -> ``"module:function"`` that adds it to the ``gcexplore`` command's subparsers,
#: in registration order (the order ``gcexplore --help`` lists them).
COMMANDS: dict[str, str] = {}


def _add(table: dict[str, str], what: str, name: str, ref: str) -> None:
    if not isinstance(ref, str) or ref.count(":") != 1:
        raise ValueError(f"{what} {name!r}: give 'module:function', got {ref!r}")
    if table.get(name, ref) != ref:
        raise ValueError(f"{what} {name!r} is already registered as {table[name]!r}")
    table[name] = ref


def register_command(name: str, ref: str) -> None:
    """Add the ``gcexplore NAME`` subcommand: ``ref`` names ``add(subparsers)``."""
    _add(COMMANDS, "command", name, ref)


def resolve(ref: str):
    """The function ``"module:function"`` names (its module imported now)."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)
