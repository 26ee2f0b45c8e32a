"""The values of an ONNX graph while it is imported: traced tensors, constants, shape values.

A value is one of
- a `Tracer`: a tensor known only when the program runs;
- a NumPy array: a constant (an initializer, or anything computed from constants only);
- a `SymInts`: an integer tensor whose elements are known at import as ints and symbolic
  dimensions (``[b, s, 256]`` from ``Shape``). Shape subgraphs compute on these with
  dimension arithmetic, so ``Reshape(x, Concat(Gather(Shape(x), 0), [-1]))`` gets the
  target ``(b, 2*s)`` at import, not at run time.

A `SymInts` becomes a tensor (``dim_value``) only where a tensor op consumes it.

>>> import shapevm as sv
>>> b, s = sv.symbolic_shape("b, s")
>>> v = SymInts.make(np.array([b, s, 256], dtype=object), np.dtype(np.int64))
>>> v
SymInts(i64[b, s, 256])
>>> sym_binary("mul", v.values[:2], np.array([2, 1], dtype=object)).tolist()
[2*b, s]
>>> SymInts.make(np.array([3, 4], dtype=object), np.dtype(np.int64))
array([3, 4])
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import numpy as np

from shapevm.frontend import numpy_api as snp
from shapevm.frontend.tracer import Tracer, bind_op
from shapevm.ops import DType, Dynamic
from shapevm.shapes import DimExpr, bounds, max_dim, min_dim

Array = np.ndarray[Any, Any]


class SymInts:
    """An integer tensor of ints and symbolic dimensions (at least one symbolic)."""

    __slots__ = ("dtype", "values")

    def __init__(self, values: Array, dtype: np.dtype[Any]) -> None:
        self.values = values
        self.dtype = dtype

    @classmethod
    def make(cls, values: Array, dtype: np.dtype[Any]) -> SymInts | Array:
        """A `SymInts`, or a plain int array when no element is symbolic."""
        flat = values.reshape(-1)
        if any(isinstance(v, DimExpr) for v in flat):
            return cls(values, dtype)
        out: Array = np.asarray([int(v) for v in flat], dtype=dtype).reshape(values.shape)
        return out

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape)

    def __repr__(self) -> str:
        dt = DType.from_numpy(self.dtype)
        return f"SymInts({dt}[{', '.join(str(v) for v in self.values.reshape(-1))}])"


Value: TypeAlias = "Tracer | Array | SymInts"


class NeedsValue(Exception):
    """An operand must be known at import (a shape, an axis) but is only known at run time."""


class Undecided(Exception):
    """A comparison of symbolic dimensions that holds for some sizes and not for others."""


def is_known(v: Value) -> bool:
    return not isinstance(v, Tracer)


def dtype_of(v: Value) -> np.dtype[Any]:
    if isinstance(v, SymInts):
        return v.dtype
    if isinstance(v, Tracer):
        return v.dtype
    return np.asarray(v).dtype


def shape_of(v: Value) -> tuple[Any, ...]:
    if isinstance(v, Tracer):
        return tuple(v.shape)
    return tuple(np.shape(v.values if isinstance(v, SymInts) else v))


def known(v: Value) -> Array | None:
    """The elements of a known value (an object array for `SymInts`), else ``None``."""
    if isinstance(v, SymInts):
        return v.values
    if isinstance(v, Tracer):
        return None
    return np.asarray(v)


def tensor(v: Value) -> Any:
    """``v`` as an operand of a tensor op: a `SymInts` is computed when the program runs."""
    if isinstance(v, SymInts):
        flat = tuple(v.values.reshape(-1))
        dt = DType.from_numpy(v.dtype).value
        if v.values.ndim == 0:
            return bind_op("dim_value", [], {"dims": flat, "dtype": dt, "scalar": True})
        out = bind_op("dim_value", [], {"dims": flat, "dtype": dt, "scalar": False})
        return out if v.values.ndim == 1 else snp.reshape(out, v.shape)
    return v


def constant(v: Value, what: str) -> Array:
    """The value of a constant operand; `NeedsValue` when it is only known at run time."""
    if isinstance(v, Tracer):
        raise NeedsValue(what)
    if isinstance(v, SymInts):
        raise NeedsValue(f"{what} (it depends on the symbolic sizes {v})")
    return np.asarray(v)


def dims(v: Value | None, what: str) -> tuple[int | DimExpr, ...]:
    """A 1-D (or scalar) known integer value as dimensions: ints and symbolic sizes."""
    arr = known(_given(v, what))
    if arr is None:
        raise NeedsValue(what)
    return tuple(x if isinstance(x, DimExpr) else int(x) for x in arr.reshape(-1))


def ints(v: Value | None, what: str) -> tuple[int, ...]:
    return tuple(int(x) for x in constant(_given(v, what), what).reshape(-1))


def _given(v: Value | None, what: str) -> Value:
    if v is None:
        raise ValueError(f"{what} is missing: the node leaves out an input it needs")
    return v


# -- symbolic integer arithmetic ----------------------------------------------------------


def decide(op: str, a: Any, b: Any) -> bool:
    """``a op b`` for ints and symbolic dimensions, or `Undecided`."""
    if isinstance(a, DimExpr) or isinstance(b, DimExpr):
        if op == "==" and not isinstance(a - b, DimExpr) and (a - b) == 0:
            return True
        lo, hi = bounds(a - b)
        verdict = {
            "==": (False if lo > 0 or hi < 0 else None),
            "!=": (True if lo > 0 or hi < 0 else None),
            "<": (True if hi < 0 else False if lo >= 0 else None),
            "<=": (True if hi <= 0 else False if lo > 0 else None),
            ">": (True if lo > 0 else False if hi <= 0 else None),
            ">=": (True if lo >= 0 else False if hi < 0 else None),
        }[op]
        if verdict is None:
            raise Undecided(f"{a} {op} {b}")
        return verdict
    return bool(_PY_CMP[op](int(a), int(b)))


_PY_CMP: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _nonneg(a: Any) -> bool:
    return not isinstance(a, DimExpr) or bounds(a)[0] >= 0


def _trunc_div(a: Any, b: Any) -> Any:
    """Integer division rounding toward zero (ONNX ``Div`` of ints)."""
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise Undecided("division by zero")
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b > 0) else -q
    if isinstance(b, int) and b != 0 and _nonneg(a):
        return a // b if b > 0 else -(a // -b)
    if _nonneg(a) and isinstance(b, DimExpr) and _nonneg(b) and bounds(b)[0] > 0:
        return a // b
    raise Undecided(f"{a} / {b}")


def _mod(a: Any, b: Any) -> Any:
    if (isinstance(b, int) and b > 0) or (isinstance(b, DimExpr) and bounds(b)[0] > 0):
        if isinstance(a, DimExpr) or isinstance(b, DimExpr):
            return a % b if _nonneg(a) else _undecided(f"{a} % {b}")
        return a % b
    if isinstance(a, int) and isinstance(b, int) and b != 0:
        return a % b
    raise Undecided(f"{a} % {b}")


def _undecided(text: str) -> Any:
    raise Undecided(text)


def _abs(a: Any) -> Any:
    if isinstance(a, int):
        return abs(a)
    lo, hi = bounds(a)
    if lo >= 0:
        return a
    if hi <= 0:
        return -a
    raise Undecided(f"abs({a})")


_SYM_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": _trunc_div,
    "mod": _mod,
    "max": max_dim,
    "min": min_dim,
}


def sym_binary(op: str, a: Array, b: Array) -> Array:
    """Elementwise ``op`` of two object arrays of ints and dimensions, broadcasting."""
    fn = _SYM_BINARY[op]
    out: Array = np.frompyfunc(lambda x, y: fn(_py(x), _py(y)), 2, 1)(a, b)
    return np.asarray(out, dtype=object)


def sym_compare(op: str, a: Array, b: Array) -> Array:
    out = np.frompyfunc(lambda x, y: decide(op, _py(x), _py(y)), 2, 1)(a, b)
    return np.asarray(out, dtype=bool)


def sym_unary(op: str, a: Array) -> Array:
    fn = {"neg": operator.neg, "abs": _abs}[op]
    out: Array = np.frompyfunc(lambda x: fn(_py(x)), 1, 1)(a)
    return np.asarray(out, dtype=object)


def sym_reduce(op: str, a: Array, axes: tuple[int, ...] | None, keepdims: bool) -> Array:
    """A sum, product, max or min of an object array over ``axes`` (all when ``None``)."""
    fn: Callable[[Any, Any], Any] = {
        "sum": operator.add,
        "prod": operator.mul,
        "max": max_dim,
        "min": min_dim,
    }[op]
    axes = tuple(range(a.ndim)) if axes is None else tuple(ax % max(a.ndim, 1) for ax in axes)
    keep = [i for i in range(a.ndim) if i not in axes]
    moved = np.transpose(a, keep + list(axes)).reshape(*[a.shape[i] for i in keep], -1)
    out = np.empty(moved.shape[:-1], dtype=object)
    for index in np.ndindex(out.shape):
        row = [_py(x) for x in moved[index]]
        if not row and op in ("max", "min"):
            raise Undecided(f"{op} of nothing")
        out[index] = functools.reduce(fn, row, {"sum": 0, "prod": 1}.get(op, row[0] if row else 0))
    if keepdims:
        out = out.reshape([1 if i in axes else n for i, n in enumerate(a.shape)])
    return out


def _py(x: Any) -> Any:
    return x if isinstance(x, DimExpr) else int(x)


def object_array(v: Value) -> Array:
    """A known integer value as an object array (ints as Python ints)."""
    arr = known(v)
    assert arr is not None
    if arr.dtype == object:
        return arr
    out: Array = np.asarray(arr.astype(np.int64).tolist(), dtype=object).reshape(arr.shape)
    return out


def has_dynamic(shape: Sequence[Any]) -> bool:
    return any(isinstance(d, Dynamic) for d in shape)
