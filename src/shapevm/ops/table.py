"""The op table: one row per op, read by the tracer, verifier, interpreter and JIT.

Rows start with what the bytecode tests need; the tracing frontend fills the table out.
Operands may be tensors or Python scalars (``maximum(t2, 0.0)``); a scalar is weakly typed
(its dtype rule input is ``None``) and takes the dtype of the tensors it meets, as in JAX.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from shapevm.ops import shape_rules as rules
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
    bool_result,
    cast_dtype,
    float_dtype,
    index_dtype,
    same_dtype,
    sum_dtype,
    where_dtype,
)
from shapevm.ops.dtypes import DType

_EW = OpFlag.ELEMENTWISE | OpFlag.FUSIBLE


def _np_kernel(fn: Callable[..., Any]) -> Kernel:
    """A kernel from a NumPy function of the operands, attributes ignored."""

    def kernel(args: Sequence[Any], attrs: Mapping[str, Any]) -> tuple[np.ndarray[Any, Any], ...]:
        return (np.asarray(fn(*args)),)

    return kernel


def _attr_kernel(fn: Callable[..., Any]) -> Kernel:
    def kernel(args: Sequence[Any], attrs: Mapping[str, Any]) -> tuple[np.ndarray[Any, Any], ...]:
        return (np.asarray(fn(*args, **attrs)),)

    return kernel


def _reduce(fn: Callable[..., Any]) -> Kernel:
    def kernel(args: Sequence[Any], attrs: Mapping[str, Any]) -> tuple[np.ndarray[Any, Any], ...]:
        axis = attrs.get("axis")
        return (np.asarray(fn(args[0], axis=axis, keepdims=bool(attrs.get("keepdims")))),)

    return kernel


def _op(
    name: str,
    arity: int | tuple[int, int | None],
    shape_rule: ShapeRule,
    dtype_rule: DTypeRule,
    kernel: Kernel,
    flags: OpFlag,
    doc: str,
    attrs: tuple[AttrSpec, ...] = (),
    num_outputs: int = 1,
) -> OpInfo:
    lo, hi = (arity, arity) if isinstance(arity, int) else arity
    return register(
        OpInfo(name, lo, hi, num_outputs, attrs, shape_rule, dtype_rule, kernel, flags, doc)
    )


_UNARY: list[tuple[str, Callable[..., Any], DTypeRule, str]] = [
    ("neg", np.negative, same_dtype, "elementwise negation"),
    ("abs", np.abs, same_dtype, "elementwise absolute value"),
    ("exp", np.exp, float_dtype, "elementwise e**x"),
    ("log", np.log, float_dtype, "elementwise natural logarithm"),
    ("sqrt", np.sqrt, float_dtype, "elementwise square root"),
    ("tanh", np.tanh, float_dtype, "elementwise hyperbolic tangent"),
]
for _name, _fn, _dt, _doc in _UNARY:
    _op(_name, 1, rules.elementwise, _dt, _np_kernel(_fn), _EW, _doc)

_COMM = OpFlag.BINARY | OpFlag.COMMUTATIVE
_BINARY: list[tuple[str, Callable[..., Any], OpFlag, str]] = [
    ("add", np.add, _COMM, "elementwise sum, broadcasting"),
    ("sub", np.subtract, OpFlag.BINARY, "elementwise difference, broadcasting"),
    ("mul", np.multiply, _COMM, "elementwise product, broadcasting"),
    ("div", np.true_divide, OpFlag.BINARY, "elementwise quotient, broadcasting"),
    ("maximum", np.maximum, _COMM, "elementwise maximum, broadcasting"),
    ("minimum", np.minimum, _COMM, "elementwise minimum, broadcasting"),
    ("pow", np.power, OpFlag.BINARY, "elementwise power, broadcasting"),
]
for _name, _fn, _flags, _doc in _BINARY:
    _op(_name, 2, rules.elementwise, same_dtype, _np_kernel(_fn), _EW | _flags, _doc)

_CMP: list[tuple[str, Callable[..., Any], OpFlag, str]] = [
    ("less", np.less, OpFlag.NONE, "elementwise a < b as bool"),
    ("greater", np.greater, OpFlag.NONE, "elementwise a > b as bool"),
    ("equal", np.equal, OpFlag.COMMUTATIVE, "elementwise a == b as bool"),
]
for _name, _fn, _flags, _doc in _CMP:
    _flags |= _EW | OpFlag.BINARY | OpFlag.COMPARISON
    _op(_name, 2, rules.elementwise, bool_result, _np_kernel(_fn), _flags, _doc)

_op(
    "cast",
    1,
    rules.elementwise,
    cast_dtype,
    _attr_kernel(lambda x, dtype: np.asarray(x).astype(DType.parse(dtype).numpy.newbyteorder("="))),
    _EW,
    "convert elements to another dtype",
    (AttrSpec("dtype", AttrKind.DTYPE, REQUIRED, "the result dtype"),),
)
_op(
    "where",
    3,
    rules.elementwise,
    where_dtype,
    _np_kernel(np.where),
    _EW,
    "pick from x where cond is true, else from y, broadcasting",
)
_op(
    "matmul",
    2,
    rules.matmul,
    same_dtype,
    _np_kernel(np.matmul),
    OpFlag.NONE,
    "matrix product with batch broadcasting (np.matmul)",
)
_AXIS = AttrSpec("axis", AttrKind.INTS, None, "axes to reduce; all when absent")
_KEEP = AttrSpec("keepdims", AttrKind.BOOL, False, "keep reduced axes with size 1")
_RED = OpFlag.REDUCTION | OpFlag.FUSIBLE
_op("sum", 1, rules.reduction, sum_dtype, _reduce(np.sum), _RED, "sum over axes", (_AXIS, _KEEP))
_op("max", 1, rules.reduction, same_dtype, _reduce(np.max), _RED, "max over axes", (_AXIS, _KEEP))
_op(
    "reshape",
    1,
    rules.reshape,
    same_dtype,
    _attr_kernel(lambda x, shape: np.reshape(x, shape)),
    OpFlag.LAYOUT,
    "same elements in a new shape",
    (AttrSpec("shape", AttrKind.DIMS, REQUIRED, "the new dimensions"),),
)
_op(
    "transpose",
    1,
    rules.transpose,
    same_dtype,
    _attr_kernel(lambda x, perm: np.transpose(x, perm)),
    OpFlag.LAYOUT,
    "permute axes (reversed when perm is absent)",
    (AttrSpec("perm", AttrKind.INTS, None, "new order of the axes"),),
)
_op(
    "concatenate",
    (1, None),
    rules.concatenate,
    same_dtype,
    lambda args, attrs: (np.concatenate(list(args), axis=attrs.get("axis", 0)),),
    OpFlag.LAYOUT,
    "join tensors along an existing axis",
    (AttrSpec("axis", AttrKind.INT, 0, "the axis to join along"),),
)
_op(
    "nonzero",
    1,
    rules.nonzero,
    index_dtype,
    _np_kernel(np.argwhere),
    OpFlag.DATA_DEPENDENT,
    "indices of the non-zero elements as [n, rank] i64 (np.argwhere)",
)
