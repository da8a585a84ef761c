"""``python -m gcexplore.cli``. The working folder, first on the import path, was already dropped by
``gcexplore/__init__.py`` (it runs before this file, before anything a planted module could shadow)."""

import sys

from .commands import main

sys.exit(main())
