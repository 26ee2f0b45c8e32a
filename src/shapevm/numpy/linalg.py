"""``shapevm.numpy.linalg``: the norms of NumPy's ``linalg`` (see
`shapevm.frontend.numpy_linalg`)."""

from shapevm.frontend.numpy_linalg import *  # noqa: F403
from shapevm.frontend.numpy_linalg import __all__ as _all
from shapevm.frontend.numpy_linalg import __getattr__ as __getattr__

__all__ = list(_all)
