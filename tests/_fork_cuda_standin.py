"""A factory module that leaves CUDA initialised at import, as far as the forkserver's check can tell
(a stand-in ``torch`` whose ``cuda.is_initialized()`` is True): a worker forked after it must refuse."""

import sys
import types

if "torch" not in sys.modules:
    sys.modules["torch"] = types.SimpleNamespace(cuda=types.SimpleNamespace(is_initialized=lambda: True))


def pair(device=0):
    return {}
