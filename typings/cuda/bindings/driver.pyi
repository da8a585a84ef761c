# cuda.bindings.driver is a compiled module shipped without stubs: each name is Any here.
from typing import Any

def __getattr__(name: str) -> Any: ...
