"""``import shapevm.numpy as snp``: NumPy's API for functions traced by `shapevm.jit`.

Inside a traced function these record bytecode with symbolic shapes; on plain NumPy arrays
they compute at once. A name of NumPy's that is not here raises an `AttributeError` that
says so (and how to do without it), not Python's bare one.
"""

from typing import Any as _Any

import numpy as _np

from shapevm.frontend import methods as _methods  # noqa: F401  (Tracer operators)
from shapevm.frontend.numpy_api import *  # noqa: F403
from shapevm.frontend.numpy_api import __all__ as _api_all
from shapevm.frontend.numpy_more import *  # noqa: F403
from shapevm.frontend.numpy_more import __all__ as _more_all
from shapevm.numpy import linalg

__all__ = [*_api_all, *_more_all, "linalg"]


def __getattr__(name: str) -> _Any:
    if not name.startswith("_") and hasattr(_np, name):
        raise AttributeError(
            f"shapevm.numpy has no {name!r}: NumPy's {name} is not one of the functions a "
            "traced program records (README.md, 'Inside traced functions', lists them). "
            "Write it with those, or compute it with NumPy outside the traced function and "
            "pass the result in as an argument or a constant"
        )
    raise AttributeError(f"module 'shapevm.numpy' has no attribute {name!r}")
