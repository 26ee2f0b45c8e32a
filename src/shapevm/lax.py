"""``shapevm.lax``: lower-level operations (JAX's names), usable in traced functions.

>>> import numpy as np, shapevm as sv
>>> from shapevm import lax
>>> lax.top_k(np.array([[3, 1, 4, 1, 5]]), 2)[0]
array([[5, 4]])
"""

from __future__ import annotations

from typing import Any

from shapevm.frontend import methods as _methods  # noqa: F401  (Tracer operators)
from shapevm.frontend.control import cond, fori_loop
from shapevm.frontend.numpy_api import _as_tensor
from shapevm.frontend.tracer import Tracer, bind_op


def top_k(x: Any, k: Any) -> tuple[Any, Any]:
    """The ``k`` largest entries along the last axis, sorted descending, and their indices
    (ties: lower index first). ``k`` may be a symbolic dimension."""
    out = bind_op("top_k", [_as_tensor(x)], {"k": (k,)})
    assert isinstance(out, tuple)
    return out[0], out[1]


def slice_in_dim(x: Any, start_index: Any, limit_index: Any, stride: int = 1, axis: int = 0) -> Any:
    """``x`` sliced along ``axis`` from ``start_index`` to ``limit_index`` (may be symbolic)."""
    if not isinstance(x, Tracer):
        x = _as_tensor(x)
    ndim = len(x.shape)
    index = [slice(None)] * ndim
    index[axis % ndim] = slice(start_index, limit_index, stride)
    return x[tuple(index)]


__all__ = ["cond", "fori_loop", "slice_in_dim", "top_k"]
