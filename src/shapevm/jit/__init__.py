"""The JIT: native kernels for hot, shape-stable regions.

`shapevm.jit.native` holds kernels compiled with numba. numba is optional: importing
``shapevm`` or ``shapevm.jit`` never needs it, and `native_available` says whether the native
kernels can be used in this process.

>>> isinstance(native_available(), bool)
True
"""

from __future__ import annotations

import importlib.util


def native_available() -> bool:
    """Whether numba is installed, so that `shapevm.jit.native` can be imported."""
    return importlib.util.find_spec("numba") is not None


__all__ = ["native_available"]
