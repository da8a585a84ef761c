"""The ``gcexplore`` command (``info``, ``profile``, ``sweep``, ``tune``, ``demo``)."""

from .commands import main  # noqa: F401 (the entry point gcexplore.cli:main)

__all__: list[str] = []  # the command is not part of the Python API
