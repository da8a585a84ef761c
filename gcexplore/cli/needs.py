"""What a script needs, checked before it starts: when something is missing, one line saying what
and where to run it, and exit 2 (no traceback). The bench scripts call :func:`needs` first."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

__all__ = ["needs"]


def needs(*, gpu: bool = True, modules: tuple[str, ...] = ()) -> None:
    """Exit 2 with one line on stderr unless a green-context GPU (``gpu``) and ``modules`` are here.

    Parameters
    ----------
    gpu : bool
        Require device 0 to run green-context streams (driver, cuda.core and a card that splits).
    modules : tuple of str
        Importable module names the script needs (``("torch",)``).
    """
    script = f"bench/{Path(sys.argv[0]).name}"
    if gpu:
        from ..device.driver import UnsupportedError, device_info

        try:
            device_info(0).require("green_context_streams")
        except UnsupportedError as e:
            sys.exit(print(f"{script} needs a CUDA GPU with green contexts ({str(e).split(';')[0]}); run it on "
                           "the GPU machine", file=sys.stderr) or 2)
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        sys.exit(print(f"{script} needs {', '.join(missing)}, not installed here", file=sys.stderr) or 2)
