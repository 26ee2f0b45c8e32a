"""``import shapevm.numpy as snp``: NumPy's API for functions traced by `shapevm.jit`.

Inside a traced function these record bytecode with symbolic shapes; on plain NumPy arrays
they compute at once.
"""

from shapevm.frontend import methods as _methods  # noqa: F401  (Tracer operators)
from shapevm.frontend.numpy_api import *  # noqa: F403
from shapevm.frontend.numpy_api import __all__ as _api_all
from shapevm.frontend.numpy_more import *  # noqa: F403
from shapevm.frontend.numpy_more import __all__ as _more_all

__all__ = [*_api_all, *_more_all]
