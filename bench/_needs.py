"""What a bench script needs, checked first: when it is missing, one line saying so and exit 2
(no traceback). GPU scripts run on the GPU machine (see shared/gpu/README.md)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def needs(*, gpu: bool = True, modules: tuple[str, ...] = ()) -> None:
    """Exit 2 with one line on stderr unless a green-context GPU (``gpu``) and ``modules`` are here."""
    script = f"bench/{Path(sys.argv[0]).name}"
    if gpu:
        import gcexplore

        try:
            gcexplore.device_info(0).require("green_context_streams")
        except gcexplore.UnsupportedError as e:
            sys.exit(print(f"{script} needs a CUDA GPU with green contexts ({str(e).split(';')[0]}); run it on "
                           "the GPU machine", file=sys.stderr) or 2)
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        sys.exit(print(f"{script} needs {', '.join(missing)}, not installed here", file=sys.stderr) or 2)
