"""Dtype promotion for traced operations, JAX's way for scalars and mixed kinds.

Arrays keep their dtype when they meet Python scalars (a scalar is *weakly typed*): ``x_f32
* 2.0`` is f32, ``x_i32 + 1`` is i32. Only a float scalar meeting an integer or bool array
promotes the result, to f32. Two arrays of different dtypes promote along
``bool < integers < floats``, wider wins, an integer meeting a float becomes that float, and
signed meeting unsigned of the same width becomes the next wider signed type. A symbolic
dimension in an operation is a weakly typed integer.
"""

from __future__ import annotations

from collections.abc import Sequence

from shapevm.ops import DType

_SIGNED = [DType.I8, DType.I16, DType.I32, DType.I64]
_UNSIGNED = [DType.U8, DType.U16, DType.U32, DType.U64]
_FLOATS = [DType.F16, DType.F32, DType.F64]


def _kind(d: DType) -> int:
    if d is DType.BOOL:
        return 0
    if d.is_float:
        return 2
    return 1


def promote_pair(a: DType, b: DType) -> DType:
    """The dtype two arrays of dtypes ``a`` and ``b`` combine into."""
    if a is b:
        return a
    ka, kb = _kind(a), _kind(b)
    if ka != kb:
        return a if ka > kb else b
    if ka == 2:
        return a if a.itemsize >= b.itemsize else b
    if (a in _SIGNED) == (b in _SIGNED):
        return a if a.itemsize >= b.itemsize else b
    signed, unsigned = (a, b) if a in _SIGNED else (b, a)
    if signed.itemsize > unsigned.itemsize:
        return signed
    wider = [d for d in _SIGNED if d.itemsize > unsigned.itemsize]
    return wider[0] if wider else DType.F64


def result_dtype(typed: Sequence[DType], weak: Sequence[type]) -> DType:
    """The dtype of an operation on arrays of ``typed`` dtypes and weak scalars of ``weak``
    Python types (``bool``, ``int``, ``float``)."""
    if typed:
        out = typed[0]
        for d in typed[1:]:
            out = promote_pair(out, d)
    elif float in weak:
        return DType.F32
    elif int in weak:
        return DType.I32
    else:
        return DType.BOOL
    if float in weak and not out.is_float:
        return DType.F32
    if int in weak and out is DType.BOOL:
        return DType.I32
    return out


def float_of(d: DType) -> DType:
    """The float dtype an operation that needs floats computes ``d`` in (ints become f32)."""
    return d if d.is_float else DType.F32
