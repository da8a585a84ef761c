"""``python -m gcexplore``: the ``gcexplore`` command, where the console script is not on PATH. The
working folder, first on the import path, was already dropped by ``gcexplore/__init__.py`` (it runs
before this file): a module planted beside a campaign spec is never imported."""

import sys

from .cli.commands import main

if __name__ == "__main__":
    sys.exit(main())
