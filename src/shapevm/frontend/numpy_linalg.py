"""``shapevm.numpy.linalg``: the norms of NumPy's ``linalg``, written with the op table's
ops (so the JIT fuses them with what is around them).

``norm`` takes what ``np.linalg.norm`` does: vector norms along one axis (``ord`` ``None``
or 2, 1, ``inf``, ``-inf``, 0, any other number as ``sum(|x|**ord)**(1/ord)``) and matrix
norms over two (``None``/``"fro"``, 1, -1, ``inf``, ``-inf``). Norms that need a singular
value decomposition (``ord`` 2, -2, ``"nuc"`` of a matrix) and the solvers (``inv``,
``solve``, ``det``...) are not here: their names raise an error that says so. Integer
arrays give float32 norms, as the package's other float functions (NumPy: float64).
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from shapevm.frontend import numpy_api as api
from shapevm.frontend.numpy_api import _as_tensor, _axis
from shapevm.frontend.numpy_more import _as_float, _bad, _kind

_VECTOR_ORDS = "None, 2, 1, inf, -inf, 0 or any other number"
_MATRIX_ORDS = "None, 'fro', 1, -1, inf or -inf"


def vector_norm(x: Any, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Any:
    """NumPy 2's ``linalg.vector_norm``: ``axis`` None is the whole array as one vector."""
    a = _as_tensor(x)
    if _kind(a) != "f":
        a = _as_float(a)
    if axis is None:
        out = _vector(api.ravel(a), (0,), False, ord)
        return api.reshape(out, (1,) * api.ndim(a)) if keepdims else out
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    return _vector(a, tuple(_axis(i, api.ndim(a)) for i in axes), keepdims, ord)


def matrix_norm(x: Any, keepdims: bool = False, ord: Any = "fro") -> Any:
    """NumPy 2's ``linalg.matrix_norm`` over the last two axes."""
    a = _as_tensor(x)
    if api.ndim(a) < 2:
        raise _bad(
            "matrix_norm of an array of fewer than 2 dimensions",
            "a stack of matrices (at least 2 dimensions)",
            f"{api.ndim(a)} dimensions",
            "use vector_norm, or norm(x, axis=...)",
        )
    n = api.ndim(a)
    return _matrix(a if _kind(a) == "f" else _as_float(a), (n - 2, n - 1), keepdims, ord)


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """``np.linalg.norm``: with ``axis`` None, a 1-D array's vector norm, a 2-D array's
    matrix norm (``ord`` None: the 2-norm of the array flattened, for any rank)."""
    a = _as_tensor(x)
    if _kind(a) != "f":
        a = _as_float(a)
    nd = api.ndim(a)
    if axis is None:
        if ord is None:
            out = api.sqrt(api.sum(a * a))
            return api.reshape(out, (1,) * nd) if keepdims else out
        if nd == 1:
            return _vector(a, (0,), keepdims, ord)
        if nd == 2:
            return _matrix(a, (0, 1), keepdims, ord)
        raise _bad(
            f"norm of order {ord!r} of an array of {nd} dimensions",
            "ord=None, or a 1-D or 2-D array, or axis=",
            f"{nd} dimensions",
            "pass axis= (one axis: a vector norm; two: a matrix norm)",
        )
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    axes = tuple(_axis(i, nd) for i in axes)
    if len(axes) == 1:
        return _vector(a, axes, keepdims, 2 if ord is None else ord)
    if len(axes) == 2 and axes[0] != axes[1]:
        return _matrix(a, axes, keepdims, ord)
    raise _bad(
        "norm over these axes",
        "one axis, or two different axes",
        f"axis={axis!r}",
        "pass one axis for a vector norm, two for a matrix norm",
    )


def _vector(a: Any, axes: tuple[int, ...], keepdims: bool, ord: Any) -> Any:
    if isinstance(ord, str) or not isinstance(ord, (int, float, np.number)):
        raise _bad("vector norm of an unknown order", _VECTOR_ORDS, repr(ord), _fix_ord())
    p = float(ord)
    if p == 2.0:
        return api.sqrt(api.sum(a * a, axis=axes, keepdims=keepdims))
    m = api.abs(a)
    if p == np.inf:
        return api.max(m, axis=axes, keepdims=keepdims)
    if p == -np.inf:
        return api.min(m, axis=axes, keepdims=keepdims)
    if p == 1.0:
        return api.sum(m, axis=axes, keepdims=keepdims)
    if p == 0.0:
        nonzero = api.not_equal(a, 0.0).astype(a.dtype)
        return api.sum(nonzero, axis=axes, keepdims=keepdims)
    total = api.sum(api.power(m, np.dtype(a.dtype).type(p)), axis=axes, keepdims=keepdims)
    return api.power(total, np.dtype(a.dtype).type(1.0 / p))


def _matrix(a: Any, axes: tuple[int, int], keepdims: bool, ord: Any) -> Any:
    row, col = axes
    if ord is None or ord == "fro":
        return api.sqrt(api.sum(a * a, axis=axes, keepdims=keepdims))
    if isinstance(ord, str) or ord not in (1, -1, np.inf, -np.inf):
        raise _bad(
            f"matrix norm of order {ord!r}",
            _MATRIX_ORDS,
            repr(ord),
            "the 2-norm and the nuclear norm need singular values, which shapevm does not "
            "trace: compute them with NumPy outside the traced function",
        )
    # 1: the largest column sum of |a| (summed over the rows); inf: the largest row sum
    summed, kept = (row, col) if builtins.abs(ord) == 1 else (col, row)
    sums = api.sum(api.abs(a), axis=summed, keepdims=True)
    pick = api.max if ord > 0 else api.min
    out = pick(sums, axis=kept, keepdims=True)
    if keepdims:
        return out
    return api.squeeze(out, axis=(row, col))


def _fix_ord() -> str:
    return "pass ord as a number (inf for the largest magnitude), or leave it out for the 2-norm"


def __getattr__(name: str) -> Any:
    if hasattr(np.linalg, name):
        raise AttributeError(
            f"shapevm.numpy.linalg has no {name!r}: of NumPy's linalg it traces the norms "
            "(norm, vector_norm, matrix_norm); compute it with NumPy outside the traced "
            "function and pass the result in as an argument or a constant"
        )
    raise AttributeError(f"module 'shapevm.numpy.linalg' has no attribute {name!r}")


__all__ = ["matrix_norm", "norm", "vector_norm"]
