"""What the families plug into the core, by name: the core looks a family's part up here and never
imports the family.

A family's ``__init__`` registers its command-line subcommand as a ``"module:function"`` string and
names the module that declares its result kinds (:mod:`gcexplore.results.kinds`), so registering
imports nothing; the part is imported when first used (:func:`resolve`, and the kind registry's
first lookup). ``gcexplore/__init__`` imports every family package (a table each),
so the registrations are in place before any core module runs.
"""

from __future__ import annotations

import importlib

#: CLI subcommand -> ``"module:function"`` that adds it to the ``gcexplore`` command's subparsers,
#: in registration order (the order ``gcexplore --help`` lists them).
COMMANDS: dict[str, str] = {}
#: Modules that declare a family's result kinds when imported (each kind's summary, check and figure
#: are in its declaration), imported by the kind registry on its first use.
KIND_MODULES: list[str] = []


def _add(table: dict[str, str], what: str, name: str, ref: str) -> None:
    if not isinstance(ref, str) or ref.count(":") != 1:
        raise ValueError(f"{what} {name!r}: give 'module:function', got {ref!r}")
    if table.get(name, ref) != ref:
        raise ValueError(f"{what} {name!r} is already registered as {table[name]!r}")
    table[name] = ref


def register_command(name: str, ref: str) -> None:
    """Add the ``gcexplore NAME`` subcommand: ``ref`` names ``add(subparsers)``."""
    _add(COMMANDS, "command", name, ref)


def register_kinds(module: str) -> None:
    """``module`` declares result kinds (:func:`gcexplore.results.kinds.register`) when imported."""
    if not isinstance(module, str) or not module:
        raise ValueError(f"register_kinds takes a module name, got {module!r}")
    if module not in KIND_MODULES:
        KIND_MODULES.append(module)


def resolve(ref: str):
    """The function ``"module:function"`` names (its module imported now)."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)
