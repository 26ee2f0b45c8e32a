"""Rows of the op table for the rest of elementwise math: trigonometry, rounding, tests.

Models imported from ONNX use them (``Tan``, ``Asinh``, ``Round``, ``IsNaN``, ``Softplus``,
``Mod`` with ``fmod=1``); NumPy programs the accurate logarithms (``log1p``, ``log2``...).
Each is one NumPy ufunc. ``softplus``, ``expm1`` and the logarithms join fused native
kernels (``FUSIBLE``); the others are rare in hot code, so they run as their ufunc.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from shapevm.ops import shape_rules as rules
from shapevm.ops.core import OpFlag
from shapevm.ops.dtype_rules import float_dtype, numeric_dtype
from shapevm.ops.dtypes import DType
from shapevm.ops.table import define

Array = np.ndarray[Any, Any]


def _quiet(fn: Callable[..., Any]) -> Callable[[Sequence[Any], Mapping[str, Any]], Any]:
    """A kernel that gives NumPy's nan or inf outside the domain, without a warning."""

    def kernel(args: Sequence[Any], attrs: Mapping[str, Any]) -> tuple[Array, ...]:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return (np.asarray(fn(*args)),)

    return kernel


def _float_test(dtypes: Sequence[DType | None], attrs: Mapping[str, Any]) -> tuple[DType, ...]:
    """A float operand, a bool result (``isnan``, ``isinf``)."""
    float_dtype(dtypes, attrs)
    return (DType.BOOL,)


def _round(x: Any) -> Any:
    """Half to even, as ``np.rint``; ints stay as they are."""
    arr = np.asarray(x)
    return arr.copy() if arr.dtype.kind in "iub" else np.rint(arr)


def _softplus(x: Any) -> Any:
    """``log(1 + exp(x))`` without overflow or cancellation (``logaddexp(x, 0)``)."""
    arr = np.asarray(x)
    return np.logaddexp(arr, arr.dtype.type(0))


_EW = OpFlag.ELEMENTWISE
_TRIG: list[tuple[str, np.ufunc, str]] = [
    ("tan", np.tan, "elementwise tangent"),
    ("asin", np.arcsin, "elementwise arc sine (nan outside [-1, 1])"),
    ("acos", np.arccos, "elementwise arc cosine (nan outside [-1, 1])"),
    ("atan", np.arctan, "elementwise arc tangent"),
    ("sinh", np.sinh, "elementwise hyperbolic sine"),
    ("cosh", np.cosh, "elementwise hyperbolic cosine"),
    ("asinh", np.arcsinh, "elementwise inverse hyperbolic sine"),
    ("acosh", np.arccosh, "elementwise inverse hyperbolic cosine (nan below 1)"),
    ("atanh", np.arctanh, "elementwise inverse hyperbolic tangent (nan outside [-1, 1])"),
]
# Outside their domain the four inverse functions give nan; their ufunc would warn there when
# the interpreter runs it in place, so they keep to their (quiet) kernel.
_DOMAIN = {"asin", "acos", "acosh", "atanh"}
# The three of them vmath.h computes (as atan2 and hypot below) join fused kernels.
_FUSED_TRIG = {"asin", "acos", "atan"}
for _name, _fn, _doc in _TRIG:
    _uf = None if _name in _DOMAIN else _fn
    _flags = _EW | OpFlag.FUSIBLE if _name in _FUSED_TRIG else _EW
    define(_name, 1, rules.elementwise, float_dtype, _quiet(_fn), _flags, _doc, ufunc=_uf)

# The logarithms and exponentials NumPy computes without the cancellation of their
# spelled-out forms (log1p(1e-8) is 1e-8, log(1 + 1e-8) is 0 in float32), and exact where
# it matters (log2(8) is 3). They join fused kernels (vmath.h has each), as log and exp do.
for _name, _fn, _doc in (
    ("expm1", np.expm1, "elementwise exp(x) - 1, accurate near 0"),
    ("log1p", np.log1p, "elementwise log(1 + x), accurate near 0 (nan below -1)"),
    ("log2", np.log2, "elementwise base-2 logarithm (exact at powers of two)"),
    ("log10", np.log10, "elementwise base-10 logarithm"),
):
    _uf = np.expm1 if _name == "expm1" else None  # the logarithms warn below their domain
    define(_name, 1, rules.elementwise, float_dtype, _quiet(_fn), _EW | OpFlag.FUSIBLE, _doc,
           ufunc=_uf)  # fmt: skip

define(
    "round",
    1,
    rules.elementwise,
    numeric_dtype,
    _quiet(_round),
    _EW | OpFlag.FUSIBLE,
    "elementwise round to the nearest integer, halves to even (ints unchanged)",
)
define(
    "isnan",
    1,
    rules.elementwise,
    _float_test,
    _quiet(np.isnan),
    _EW | OpFlag.COMPARISON,
    "elementwise x is nan, as bool",
    ufunc=np.isnan,
)
define(
    "isinf",
    1,
    rules.elementwise,
    _float_test,
    _quiet(np.isinf),
    _EW | OpFlag.COMPARISON,
    "elementwise x is +inf or -inf, as bool",
    ufunc=np.isinf,
)
define(
    "softplus",
    1,
    rules.elementwise,
    float_dtype,
    _quiet(_softplus),
    _EW | OpFlag.FUSIBLE,
    "elementwise log(1 + exp(x)), computed without overflow",
)
for _name, _fn, _doc in (
    ("atan2", np.arctan2, "elementwise angle of the point (b, a): arctan(a / b) by quadrant"),
    ("hypot", np.hypot, "elementwise sqrt(a**2 + b**2) without overflow"),
):
    define(
        _name,
        2,
        rules.elementwise,
        float_dtype,
        _quiet(_fn),
        _EW | OpFlag.BINARY | OpFlag.FUSIBLE,
        _doc + ", broadcasting",
        ufunc=_fn,
    )
define(
    "fmod",
    2,
    rules.elementwise,
    numeric_dtype,
    _quiet(np.fmod),
    _EW | OpFlag.BINARY,
    "elementwise remainder with the sign of the dividend (C fmod), broadcasting",
    ufunc=np.fmod,
)
