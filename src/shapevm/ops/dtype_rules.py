"""Dtype rules of the op table: the result dtypes of an op from its operand dtypes.

A rule gets one entry per operand, ``None`` for a Python scalar (weakly typed: it takes the
dtype of the tensors it meets, as in JAX), and the op's attributes. It raises
`ShapeRuleError` for dtypes the op does not take, with the texts ``{0}``, ``{1}``... standing
for the operand names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from shapevm.ops.core import RuleAttr, ShapeRuleError
from shapevm.ops.dtypes import DType

Attrs = Mapping[str, RuleAttr]
DTypes = Sequence["DType | None"]


def _fmt_dtypes(dtypes: DTypes) -> str:
    return ", ".join(f"{{{i}}}: {d or 'scalar'}" for i, d in enumerate(dtypes))


def same_dtype(dtypes: DTypes, attrs: Attrs) -> tuple[DType, ...]:
    """All tensor operands share one dtype, which is the result's; scalars adopt it."""
    typed = [d for d in dtypes if d is not None]
    if not typed:
        raise ShapeRuleError(
            "at least one operand must be a tensor",
            expected="a tensor operand",
            found="only scalars",
            fix="load the scalar as a constant tensor",
        )
    if any(d != typed[0] for d in typed):
        raise ShapeRuleError(
            "operand dtypes differ",
            expected=f"all operands {typed[0]}",
            found=_fmt_dtypes(dtypes),
            fix="cast one operand first (op cast)",
        )
    return (typed[0],)


def float_dtype(dtypes: DTypes, attrs: Attrs) -> tuple[DType, ...]:
    (out,) = same_dtype(dtypes, attrs)
    if not out.is_float:
        raise ShapeRuleError(
            "operand must have a floating dtype",
            expected="f16, f32 or f64",
            found=_fmt_dtypes(dtypes),
            fix="cast the operand to a float dtype first (op cast)",
        )
    return (out,)


def numeric_dtype(dtypes: DTypes, attrs: Attrs) -> tuple[DType, ...]:
    """Ints and floats, not bool: the op does arithmetic that bool has no meaning for."""
    (out,) = same_dtype(dtypes, attrs)
    if out is DType.BOOL:
        raise ShapeRuleError(
            "operand must have a numeric dtype, not bool",
            expected="an int or float dtype",
            found=_fmt_dtypes(dtypes),
            fix="cast the operand to an int or float dtype first (op cast)",
        )
    return (out,)


def bool_result(dtypes: DTypes, attrs: Attrs) -> tuple[DType, ...]:
    same_dtype(dtypes, attrs)
    return (DType.BOOL,)


def logical_dtype(dtypes: DTypes, attrs: Attrs) -> tuple[DType, ...]:
    """Bool tensor operands only (scalars adopt bool), bool result."""
    if any(d not in (DType.BOOL, None) for d in dtypes):
        raise ShapeRuleError(
            "logical ops take bool operands",
            expected="every operand bool",
            found=_fmt_dtypes(dtypes),
            fix="compare to produce bool tensors first (e.g. op not_equal with 0)",
        )
    return bool_result(dtypes, attrs)


def sum_dtype(dtypes: DTypes, attrs: Attrs) -> tuple[DType, ...]:
    (out,) = same_dtype(dtypes, attrs)
    return (DType.I64,) if out is DType.BOOL else (out,)


def mean_dtype(dtypes: DTypes, attrs: Attrs) -> tuple[DType, ...]:
    """A float keeps its dtype; the mean of ints or bools is f32."""
    (out,) = same_dtype(dtypes, attrs)
    return (out,) if out.is_float else (DType.F32,)


def where_dtype(dtypes: DTypes, attrs: Attrs) -> tuple[DType, ...]:
    if dtypes[0] not in (DType.BOOL, None):
        raise ShapeRuleError(
            "the condition of where must be bool",
            expected="{0}: bool",
            found=_fmt_dtypes(dtypes),
            fix="compare to produce a bool tensor (e.g. op greater)",
        )
    return same_dtype(dtypes[1:], attrs)


def mask_dtype(dtypes: DTypes, attrs: Attrs) -> tuple[DType, ...]:
    """``mask_select(x, mask)``: the mask is a bool tensor, the result has x's dtype."""
    if dtypes[1] is not DType.BOOL or dtypes[0] is None:
        raise ShapeRuleError(
            "mask_select takes a tensor and a bool mask tensor",
            expected="{0}: a tensor, {1}: a bool tensor",
            found=_fmt_dtypes(dtypes),
            fix="compare to produce a bool mask (e.g. op greater)",
        )
    return (dtypes[0],)


def cast_dtype(dtypes: DTypes, attrs: Attrs) -> tuple[DType, ...]:
    return (_attr_dtype(attrs),)


def index_dtype(dtypes: DTypes, attrs: Attrs) -> tuple[DType, ...]:
    return (DType.I64,)


def arg_reduce_dtype(dtypes: DTypes, attrs: Attrs) -> tuple[DType, ...]:
    same_dtype(dtypes, attrs)
    return (DType.I64,)


def values_and_indices(dtypes: DTypes, attrs: Attrs) -> tuple[DType, ...]:
    """``top_k``: the values keep the operand's dtype, the indices are i64."""
    (out,) = same_dtype(dtypes, attrs)
    return (out, DType.I64)


def _attr_dtype(attrs: Attrs) -> DType:
    target = attrs["dtype"]
    assert isinstance(target, str)
    return DType.parse(target)


def full_dtype(dtypes: DTypes, attrs: Attrs) -> tuple[DType, ...]:
    """The ``dtype`` attribute; ``value`` must be representable in it (ints: a whole number)."""
    out = _attr_dtype(attrs)
    value = attrs["value"]
    assert isinstance(value, (int, float))
    if out.is_int:
        bits = 8 * out.itemsize
        lo, hi = (
            (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if out.value[0] == "i" else (0, 2**bits - 1)
        )
        if not (math.isfinite(value) and value == int(value) and lo <= value <= hi):
            raise ShapeRuleError(
                f"value {value} does not fit dtype {out}",
                expected=f"a whole number from {lo} to {hi}",
                found=f"value={value}",
                fix="pick a value of the dtype, or a float dtype",
            )
    return (out,)


def int_or_float_attr_dtype(dtypes: DTypes, attrs: Attrs) -> tuple[DType, ...]:
    """The ``dtype`` attribute, which must not be bool (``iota``, ``dim_value``)."""
    out = _attr_dtype(attrs)
    if out is DType.BOOL:
        raise ShapeRuleError(
            "the dtype must be an int or float dtype, not bool",
            expected="dtype an int or float dtype",
            found='dtype="bool"',
            fix='use dtype="i64" or "i32"',
        )
    return (out,)


def _int_indices(dtypes: DTypes, operand: int) -> None:
    d = dtypes[operand]
    if d is None or not d.is_int:
        raise ShapeRuleError(
            "indices must be an integer tensor",
            expected=f"{{{operand}}}: i32 or i64 (any int dtype)",
            found=_fmt_dtypes(dtypes),
            fix="cast the indices to i64 first (op cast)",
        )


def gather_dtype(dtypes: DTypes, attrs: Attrs) -> tuple[DType, ...]:
    """``op(x, indices)``: the result has x's dtype; indices are an int tensor."""
    _int_indices(dtypes, 1)
    return same_dtype(dtypes[:1], attrs)


def scatter_dtype(dtypes: DTypes, attrs: Attrs) -> tuple[DType, ...]:
    """``op(data, indices, updates)``: updates have data's dtype, indices are ints."""
    _int_indices(dtypes, 1)
    return same_dtype([dtypes[0], dtypes[2]], attrs)


def numeric_index_dtype(dtypes: DTypes, attrs: Attrs) -> tuple[DType, ...]:
    """A numeric operand, an i64 result (positions of elements, e.g. ``max_pool_indices``)."""
    numeric_dtype(dtypes, attrs)
    return (DType.I64,)


def values_and_indices_k(dtypes: DTypes, attrs: Attrs) -> tuple[DType, ...]:
    """``top_k_n(x, k)``: values of x's dtype and i64 indices; k is an int tensor."""
    _int_indices(dtypes, 1)
    return values_and_indices(dtypes[:1], attrs)
