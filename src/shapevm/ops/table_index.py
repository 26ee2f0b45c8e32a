"""Rows of the op table that index with tensors: take, gathers, scatters, cumsum, flip.

Indices may be negative (counted from the end, as in NumPy and ONNX); an index out of range
raises ``IndexError`` in the kernel. Every kernel returns a new array, except ``flip``,
which is a view (``LAYOUT``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from shapevm.ops import shape_rules_index as rules
from shapevm.ops.core import REQUIRED, AttrKind, AttrSpec, OpFlag
from shapevm.ops.dtype_rules import (
    gather_dtype,
    index_dtype,
    numeric_dtype,
    same_dtype,
    scatter_dtype,
    values_and_indices_k,
)
from shapevm.ops.table import define
from shapevm.ops.table_layout import top_k_kernel

Array = np.ndarray[Any, Any]
Attrs = Mapping[str, Any]


def _take(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    x, idx = np.asarray(args[0]), np.asarray(args[1])
    return (np.take(x, idx, axis=attrs["axis"]),)


def _take_along_axis(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    x, idx = np.asarray(args[0]), np.asarray(args[1])
    axis = attrs["axis"] % x.ndim
    # off the axis the indices may cover less than the operand: select that part first
    part = x[tuple(slice(None) if a == axis else slice(0, n) for a, n in enumerate(idx.shape))]
    return (np.take_along_axis(part, idx.astype(np.intp, copy=False), axis=axis),)


def _nd_index(data: Array, idx: Array, batch: int) -> tuple[Any, ...]:
    """The fancy index of ``data`` that ``[..., k]`` index tuples with batch dims make."""
    k = idx.shape[-1]
    lead = idx.shape[:batch]
    n_batch = int(np.prod(lead, dtype=np.int64))
    flat = idx.reshape(n_batch, -1, k).astype(np.intp, copy=False)
    picks = tuple(flat[..., j] for j in range(k))
    if batch == 0:
        return tuple(p[0] for p in picks)
    rows = np.arange(n_batch)[:, None]
    return (rows, *picks)


def _gather_nd(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    data, idx = np.asarray(args[0]), np.asarray(args[1])
    batch = attrs["batch_dims"]
    k = idx.shape[-1]
    lead = data.reshape(-1, *data.shape[batch:]) if batch else data
    out = lead[_nd_index(data, idx, batch)]
    return (np.ascontiguousarray(out.reshape(*idx.shape[:-1], *data.shape[batch + k :])),)


_AT: dict[str, Callable[..., Any]] = {
    "add": np.add.at,
    "mul": np.multiply.at,
    "max": np.maximum.at,
    "min": np.minimum.at,
}


def _scatter(out: Array, index: tuple[Any, ...], updates: Array, reduction: str) -> Array:
    if reduction == "none":
        out[index] = updates
    else:
        _AT[reduction](out, index, updates)
    return out


def _scatter_nd(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    data, idx, upd = (np.asarray(a) for a in args)
    out = data.copy()
    k = idx.shape[-1]
    index = _nd_index(data, idx, 0)
    updates = upd.reshape(-1, *data.shape[k:])
    return (_scatter(out, index, updates, attrs["reduction"]),)


def _scatter_elements(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    data, idx, upd = (np.asarray(a) for a in args)
    axis = attrs["axis"] % data.ndim
    grid: list[Any] = list(np.indices(idx.shape, sparse=True))
    grid[axis] = idx.astype(np.intp, copy=False)
    return (_scatter(data.copy(), tuple(grid), upd, attrs["reduction"]),)


def _cumsum(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    x = np.asarray(args[0])
    axis = attrs["axis"] % x.ndim
    src = np.flip(x, axis) if attrs["reverse"] else x
    out = np.cumsum(src, axis=axis, dtype=x.dtype)
    if attrs["exclusive"]:
        shifted = np.zeros_like(out)
        body = [slice(None)] * x.ndim
        head = [slice(None)] * x.ndim
        body[axis], head[axis] = slice(1, None), slice(0, -1)
        shifted[tuple(body)] = out[tuple(head)]
        out = shifted
    return (np.flip(out, axis).copy() if attrs["reverse"] else out,)


def _flip(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    x = np.asarray(args[0])
    return (np.flip(x, tuple(attrs["axes"])) if attrs["axes"] else x,)


def _top_k_n(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    x, k = np.asarray(args[0]), int(np.asarray(args[1]).reshape(-1)[0])
    if not 0 <= k <= x.shape[-1]:
        raise ValueError(f"k = {k} is outside 0 .. {x.shape[-1]}, the size of the last axis")
    return top_k_kernel([x], {"k": (k,)})


def _shape_of(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    return (np.asarray(np.shape(args[0]), dtype=np.int64),)


_AXIS = AttrSpec("axis", AttrKind.INT, REQUIRED, "the axis indexed")
_REDUCTION = AttrSpec(
    "reduction", AttrKind.STR, "none", "none (overwrite), add, mul, max or min at each index"
)
define(
    "take",
    2,
    rules.take,
    gather_dtype,
    _take,
    OpFlag.NONE,
    "x indexed along axis by an int tensor, negative counts from the end (np.take)",
    (_AXIS,),
)
define(
    "take_along_axis",
    2,
    rules.take_along_axis,
    gather_dtype,
    _take_along_axis,
    OpFlag.NONE,
    "out[i][j] = x[i][idx[i][j]] along axis; the result has the indices' shape",
    (_AXIS,),
)
define(
    "gather_nd",
    2,
    rules.gather_nd,
    gather_dtype,
    _gather_nd,
    OpFlag.NONE,
    "slices of x at the index tuples idx[..., k], after batch_dims shared leading axes",
    (AttrSpec("batch_dims", AttrKind.INT, 0, "leading axes shared by x and idx"),),
)
define(
    "scatter_nd",
    3,
    rules.scatter_nd,
    scatter_dtype,
    _scatter_nd,
    OpFlag.NONE,
    "a copy of data with the slices updates written at the index tuples idx[..., k]",
    (_REDUCTION,),
)
define(
    "scatter_elements",
    3,
    rules.scatter_elements,
    scatter_dtype,
    _scatter_elements,
    OpFlag.NONE,
    "a copy of data with updates written at idx along axis (inverse of take_along_axis)",
    (_AXIS, _REDUCTION),
)
define(
    "cumsum",
    1,
    rules.along_axis,
    numeric_dtype,
    _cumsum,
    OpFlag.NONE,
    "running sum along axis, optionally exclusive (shifted by one) or from the end",
    (
        _AXIS,
        AttrSpec("exclusive", AttrKind.BOOL, False, "each sum leaves out its own element"),
        AttrSpec("reverse", AttrKind.BOOL, False, "sum from the last element"),
    ),
)
define(
    "flip",
    1,
    rules.flip,
    same_dtype,
    _flip,
    OpFlag.LAYOUT,
    "reverse the order of elements along axes (np.flip)",
    (AttrSpec("axes", AttrKind.INTS, REQUIRED, "the axes to reverse"),),
)
define(
    "top_k_n",
    2,
    rules.top_k_n,
    values_and_indices_k,
    _top_k_n,
    OpFlag.DATA_DEPENDENT,
    "top_k with k from an int tensor: k largest along the last axis and their i64 indices",
    num_outputs=2,
)
define(
    "shape_of",
    1,
    rules.shape_of,
    index_dtype,
    _shape_of,
    OpFlag.NONE,
    "the dimensions of x as an i64 vector, read when the program runs",
)
