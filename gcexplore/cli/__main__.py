import os
import sys

# `python -m gcexplore.cli` put the working folder first on the import path; a campaign spec
# names modules to import, and one planted beside the spec must not be what runs.
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from .commands import main  # noqa: E402

sys.exit(main())
