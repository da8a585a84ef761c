"""``python -m gcexplore``: the ``gcexplore`` command, where the console script is not on PATH."""

import sys

from .cli.commands import main

if __name__ == "__main__":
    sys.exit(main())
