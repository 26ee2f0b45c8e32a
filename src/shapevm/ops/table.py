"""The op table: one row per op, read by the tracer, verifier, interpreter and JIT.

Rows start with what the bytecode tests need; the tracing frontend fills the table out.
Operands may be tensors or Python scalars (``maximum(t2, 0.0)``); a scalar is weakly typed
(its dtype rule input is ``None``) and takes the dtype of the tensors it meets, as in JAX.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from shapevm.ops import shape_rules as rules
from shapevm.ops import special
from shapevm.ops.core import (
    REQUIRED,
    AttrKind,
    AttrSpec,
    DTypeRule,
    Kernel,
    OpFlag,
    OpInfo,
    ShapeRule,
    register,
)
from shapevm.ops.dtype_rules import (
    arg_reduce_dtype,
    bool_result,
    cast_dtype,
    float_dtype,
    index_dtype,
    logical_dtype,
    mean_dtype,
    numeric_dtype,
    same_dtype,
    sum_dtype,
    where_dtype,
)
from shapevm.ops.dtypes import DType

_EW = OpFlag.ELEMENTWISE | OpFlag.FUSIBLE


def np_kernel(fn: Callable[..., Any]) -> Kernel:
    """A kernel from a NumPy function of the operands, attributes ignored."""

    def kernel(args: Sequence[Any], attrs: Mapping[str, Any]) -> tuple[np.ndarray[Any, Any], ...]:
        return (np.asarray(fn(*args)),)

    return kernel


def attr_kernel(fn: Callable[..., Any]) -> Kernel:
    """A kernel from a NumPy function of the operands and the attributes as keywords."""

    def kernel(args: Sequence[Any], attrs: Mapping[str, Any]) -> tuple[np.ndarray[Any, Any], ...]:
        return (np.asarray(fn(*args, **attrs)),)

    return kernel


def _reduce(fn: Callable[..., Any]) -> Kernel:
    def kernel(args: Sequence[Any], attrs: Mapping[str, Any]) -> tuple[np.ndarray[Any, Any], ...]:
        axis = attrs.get("axis")
        return (np.asarray(fn(args[0], axis=axis, keepdims=bool(attrs.get("keepdims")))),)

    return kernel


def _keep_ints(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Rounding leaves ints as they are (older NumPy would return float64)."""

    @functools.wraps(fn)
    def rounded(x: Any) -> Any:
        arr = np.asarray(x)
        return arr.copy() if arr.dtype.kind in "iu" else fn(arr)

    return rounded


def _quiet(fn: Callable[..., Any]) -> Kernel:
    """Division by zero gives NumPy's values (0 for ints, inf or nan for floats), no warning."""

    def kernel(args: Sequence[Any], attrs: Mapping[str, Any]) -> tuple[np.ndarray[Any, Any], ...]:
        with np.errstate(divide="ignore", invalid="ignore"):
            return (np.asarray(fn(*args)),)

    return kernel


def _accumulate(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Sum and product in the operand's dtype (NumPy widens small ints); bool in i64."""

    def reduce(x: Any, **kw: Any) -> Any:
        arr = np.asarray(x)
        return fn(arr, dtype=np.int64 if arr.dtype == np.bool_ else arr.dtype, **kw)

    return reduce


def _mean(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    arr = np.asarray(x)
    if arr.dtype.kind == "f" and arr.size:
        # sum, then scale: np.mean's Python wrapper costs more than the sum of a small row
        total = np.add.reduce(arr, axis=axis, keepdims=bool(keepdims))  # type: ignore[call-overload]
        count = arr.size // max(np.asarray(total).size, 1)
        return np.multiply(total, arr.dtype.type(1.0 / count), dtype=arr.dtype)
    out = np.mean(arr, axis=axis, keepdims=keepdims)  # ints average in f64, round once to f32
    return np.asarray(out).astype(arr.dtype if arr.dtype.kind == "f" else np.float32)


def _extremum(fn: Callable[..., Any], lowest: bool) -> Callable[..., Any]:
    """``np.max``/``np.min`` that give the identity over no elements (``-inf`` for a max of
    floats, the smallest int for ints, False for bools) instead of raising."""

    def reduce(x: Any, **kw: Any) -> Any:
        arr = np.asarray(x)
        if arr.size:
            return fn(arr, **kw)
        if arr.dtype.kind == "f":
            start: Any = -np.inf if lowest else np.inf
        elif arr.dtype.kind == "b":
            start = not lowest
        else:
            info = np.iinfo(arr.dtype)
            start = info.min if lowest else info.max
        return fn(arr, initial=start, **kw)

    return reduce


def _index_of(fn: Callable[..., Any]) -> Callable[..., Any]:
    def index(x: Any, **kw: Any) -> Any:
        return np.asarray(fn(x, **kw)).astype(np.int64)

    return index


def define(
    name: str,
    arity: int | tuple[int, int | None],
    shape_rule: ShapeRule,
    dtype_rule: DTypeRule,
    kernel: Kernel,
    flags: OpFlag,
    doc: str,
    attrs: tuple[AttrSpec, ...] = (),
    num_outputs: int = 1,
    ufunc: np.ufunc | None = None,
    view: Callable[[Mapping[str, Any]], Callable[[Any], Any]] | None = None,
) -> OpInfo:
    """Register a row; ``arity`` is a count or ``(min, max)`` with ``None`` for no maximum."""
    lo, hi = (arity, arity) if isinstance(arity, int) else arity
    return register(
        OpInfo(
            name,
            lo,
            hi,
            num_outputs,
            attrs,
            shape_rule,
            dtype_rule,
            kernel,
            flags,
            doc,
            ufunc,
            view,
        )
    )


def _ufunc_of(fn: Callable[..., Any]) -> np.ufunc | None:
    """The ufunc a kernel function is, or wraps for float operands (`_keep_ints`)."""
    fn = getattr(fn, "__wrapped__", fn)
    return fn if isinstance(fn, np.ufunc) else None


_UNARY: list[tuple[str, Callable[..., Any], DTypeRule, str]] = [
    ("neg", np.negative, numeric_dtype, "elementwise negation"),
    ("abs", np.abs, same_dtype, "elementwise absolute value"),
    ("exp", np.exp, float_dtype, "elementwise e**x"),
    ("log", np.log, float_dtype, "elementwise natural logarithm"),
    ("sqrt", np.sqrt, float_dtype, "elementwise square root"),
    ("tanh", np.tanh, float_dtype, "elementwise hyperbolic tangent"),
    ("sin", np.sin, float_dtype, "elementwise sine"),
    ("cos", np.cos, float_dtype, "elementwise cosine"),
    ("erf", special.erf, float_dtype, "elementwise error function"),
    ("sigmoid", special.sigmoid, float_dtype, "elementwise logistic 1 / (1 + exp(-x))"),
    ("floor", _keep_ints(np.floor), numeric_dtype, "elementwise round down (ints unchanged)"),
    ("ceil", _keep_ints(np.ceil), numeric_dtype, "elementwise round up (ints unchanged)"),
    ("sign", np.sign, numeric_dtype, "elementwise -1, 0 or 1 by sign (nan stays nan)"),
    ("logical_not", np.logical_not, logical_dtype, "elementwise not of a bool tensor"),
]
for _name, _fn, _dt, _doc in _UNARY:
    define(_name, 1, rules.elementwise, _dt, np_kernel(_fn), _EW, _doc, ufunc=_ufunc_of(_fn))

_COMM = OpFlag.BINARY | OpFlag.COMMUTATIVE
# NumPy has no bool negative or subtract, turns bool ** bool into i8 and any int quotient
# into f64: the dtype rules say so instead of promising what the kernels do not give.
_BINARY: list[tuple[str, Callable[..., Any], DTypeRule, OpFlag, str]] = [
    ("add", np.add, same_dtype, _COMM, "elementwise sum, broadcasting"),
    ("sub", np.subtract, numeric_dtype, OpFlag.BINARY, "elementwise difference, broadcasting"),
    ("mul", np.multiply, same_dtype, _COMM, "elementwise product, broadcasting"),
    ("div", np.true_divide, float_dtype, OpFlag.BINARY, "elementwise float quotient, broadcasting"),
    ("maximum", np.maximum, same_dtype, _COMM, "elementwise maximum, broadcasting"),
    ("minimum", np.minimum, same_dtype, _COMM, "elementwise minimum, broadcasting"),
    ("pow", np.power, numeric_dtype, OpFlag.BINARY, "elementwise power, broadcasting"),
]
for _name, _fn, _dt, _flags, _doc in _BINARY:
    define(
        _name, 2, rules.elementwise, _dt, np_kernel(_fn), _EW | _flags, _doc, ufunc=_ufunc_of(_fn)
    )

_INT_DIV: list[tuple[str, Callable[..., Any], str]] = [
    (
        "floordiv",
        np.floor_divide,
        "elementwise a // b rounded down, broadcasting (int x // 0 is 0)",
    ),
    ("mod", np.mod, "elementwise a % b with the sign of b, broadcasting (int x % 0 is 0)"),
]
for _name, _fn, _doc in _INT_DIV:
    define(_name, 2, rules.elementwise, numeric_dtype, _quiet(_fn), _EW | OpFlag.BINARY, _doc)

_LOGICAL: list[tuple[str, Callable[..., Any], str]] = [
    ("logical_and", np.logical_and, "elementwise and of bool tensors, broadcasting"),
    ("logical_or", np.logical_or, "elementwise or of bool tensors, broadcasting"),
    ("logical_xor", np.logical_xor, "elementwise exclusive or of bool tensors, broadcasting"),
]
for _name, _fn, _doc in _LOGICAL:
    define(_name, 2, rules.elementwise, logical_dtype, np_kernel(_fn), _EW | _COMM, _doc)

_CMP: list[tuple[str, Callable[..., Any], OpFlag, str]] = [
    ("less", np.less, OpFlag.NONE, "elementwise a < b as bool"),
    ("greater", np.greater, OpFlag.NONE, "elementwise a > b as bool"),
    ("equal", np.equal, OpFlag.COMMUTATIVE, "elementwise a == b as bool"),
    ("less_equal", np.less_equal, OpFlag.NONE, "elementwise a <= b as bool"),
    ("greater_equal", np.greater_equal, OpFlag.NONE, "elementwise a >= b as bool"),
    ("not_equal", np.not_equal, OpFlag.COMMUTATIVE, "elementwise a != b as bool"),
]
for _name, _fn, _flags, _doc in _CMP:
    _flags |= _EW | OpFlag.BINARY | OpFlag.COMPARISON
    define(
        _name, 2, rules.elementwise, bool_result, np_kernel(_fn), _flags, _doc, ufunc=_ufunc_of(_fn)
    )

define(
    "cast",
    1,
    rules.elementwise,
    cast_dtype,
    attr_kernel(lambda x, dtype: np.asarray(x).astype(DType.parse(dtype).numpy.newbyteorder("="))),
    _EW,
    "convert elements to another dtype",
    (AttrSpec("dtype", AttrKind.DTYPE, REQUIRED, "the result dtype"),),
)
define(
    "where",
    3,
    rules.elementwise,
    where_dtype,
    np_kernel(np.where),
    _EW,
    "pick from x where cond is true, else from y, broadcasting",
)
define(
    "matmul",
    2,
    rules.matmul,
    same_dtype,
    np_kernel(np.matmul),
    OpFlag.NONE,
    "matrix product with batch broadcasting (np.matmul)",
)
_AXIS = AttrSpec("axis", AttrKind.INTS, None, "axes to reduce; all when absent")
_KEEP = AttrSpec("keepdims", AttrKind.BOOL, False, "keep reduced axes with size 1")
_RED = OpFlag.REDUCTION | OpFlag.FUSIBLE
_REDUCTIONS: list[tuple[str, Callable[..., Any], DTypeRule, str]] = [
    ("sum", _accumulate(np.sum), sum_dtype, "sum over axes"),
    ("max", _extremum(np.max, True), same_dtype, "max over axes (-inf or the lowest int if none)"),
    ("min", _extremum(np.min, False), same_dtype, "min over axes (inf or the highest int if none)"),
    ("prod", _accumulate(np.prod), sum_dtype, "product over axes"),
    ("mean", _mean, mean_dtype, "mean over axes (f32 for ints and bool)"),
]
for _name, _fn, _dt, _doc in _REDUCTIONS:
    define(_name, 1, rules.reduction, _dt, _reduce(_fn), _RED, _doc, (_AXIS, _KEEP))

_ARG_AXIS = AttrSpec(
    "axis", AttrKind.INT, None, "the axis to search; the flattened operand when absent"
)
for _name, _fn in (("argmax", np.argmax), ("argmin", np.argmin)):
    define(
        _name,
        1,
        rules.arg_reduction,
        arg_reduce_dtype,
        _reduce(_index_of(_fn)),
        OpFlag.REDUCTION,
        f"i64 index of the first {_name[3:]}imum along axis (np.{_name})",
        (_ARG_AXIS, _KEEP),
    )


def _reshape_view(attrs: Mapping[str, Any]) -> Callable[[Any], Any]:
    shape = tuple(attrs["shape"])
    return lambda x: x.reshape(shape)


def _transpose_view(attrs: Mapping[str, Any]) -> Callable[[Any], Any]:
    perm = attrs.get("perm")
    if perm is None:
        return lambda x: x.transpose()
    axes = tuple(perm)
    return lambda x: x.transpose(axes)


define(
    "reshape",
    1,
    rules.reshape,
    same_dtype,
    attr_kernel(lambda x, shape: np.reshape(x, shape)),
    OpFlag.LAYOUT,
    "same elements in a new shape",
    (AttrSpec("shape", AttrKind.DIMS, REQUIRED, "the new dimensions"),),
    view=_reshape_view,
)
define(
    "transpose",
    1,
    rules.transpose,
    same_dtype,
    attr_kernel(lambda x, perm: np.transpose(x, perm)),
    OpFlag.LAYOUT,
    "permute axes (reversed when perm is absent)",
    (AttrSpec("perm", AttrKind.INTS, None, "new order of the axes"),),
    view=_transpose_view,
)
define(
    "concatenate",
    (1, None),
    rules.concatenate,
    same_dtype,
    lambda args, attrs: (np.concatenate(list(args), axis=attrs.get("axis", 0)),),
    OpFlag.LAYOUT,
    "join tensors along an existing axis",
    (AttrSpec("axis", AttrKind.INT, 0, "the axis to join along"),),
)
define(
    "nonzero",
    1,
    rules.nonzero,
    index_dtype,
    np_kernel(np.argwhere),
    OpFlag.DATA_DEPENDENT,
    "indices of the non-zero elements as [n, rank] i64 (np.argwhere)",
)
