# cuda.core takes its names at import time from cuda.core.cu12 or cu13 (it swaps its __path__), and
# its own stubs import through that swap, so a checker resolves none of them: each is Any here.
from typing import Any

def __getattr__(name: str) -> Any: ...
