# cuda.bindings as gcexplore uses it: its version, and the compiled driver module (driver.pyi)
__version__: str
