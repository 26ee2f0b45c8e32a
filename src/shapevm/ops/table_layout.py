"""Rows of the op table that move, select or create data: slicing, padding, sorting, masks.

Kernels receive ``DIMS`` attributes evaluated to ints, and indices already normalized by the
tracer (``0 <= start <= stop <= dim``), so each is a line or two of NumPy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from shapevm.ops import shape_rules as rules
from shapevm.ops.core import REQUIRED, AttrKind, AttrSpec, OpFlag
from shapevm.ops.dtype_rules import (
    arg_reduce_dtype,
    full_dtype,
    int_or_float_attr_dtype,
    mask_dtype,
    same_dtype,
    values_and_indices,
)
from shapevm.ops.dtypes import DType
from shapevm.ops.table import define

Array = np.ndarray[Any, Any]
Attrs = Mapping[str, Any]


def _broadcast_to(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    return (np.broadcast_to(args[0], tuple(attrs["shape"])),)


def _slice_index(attrs: Attrs) -> tuple[slice, ...]:
    return tuple(
        slice(lo, hi, st)
        for lo, hi, st in zip(attrs["start"], attrs["stop"], attrs["step"], strict=True)
    )


def _slice(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    index = _slice_index(attrs)
    return (np.asarray(np.asarray(args[0])[index]),)  # a rank-0 index gives a NumPy scalar


def _slice_view(attrs: Attrs) -> Any:
    index = (*_slice_index(attrs), Ellipsis)  # with the ellipsis rank 0 gives an array too
    return lambda x: x[index]


def _pad(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    x = np.asarray(args[0])
    if x.ndim == 0:  # np.pad refuses a scalar even with nothing to pad
        return (x.copy(),)
    widths = list(zip(attrs["low"], attrs["high"], strict=True))
    return (np.pad(x, widths, constant_values=attrs["value"]),)


def _sort(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    axis = attrs["axis"]
    out = np.sort(args[0], axis=axis)
    return (np.flip(out, axis) if attrs["descending"] else out,)


def _argsort(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    """Stable: equal values by lower index first in both orders (descending sorts the
    reversed axis and reads it backwards, as `top_k_kernel`); nan last ascending, first
    descending, as `sort`."""
    x = np.asarray(args[0])
    axis = attrs["axis"] % x.ndim if x.ndim else 0
    if x.ndim == 0:
        return (np.zeros((), np.int64),)
    if not attrs["descending"]:
        return (np.argsort(x, axis=axis, kind="stable").astype(np.int64),)
    order = np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    return ((x.shape[axis] - 1 - order).astype(np.int64),)


def top_k_kernel(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    """Largest first; equal values by lower index first, as ``jax.lax.top_k``.

    A stable ascending sort of the reversed axis, read backwards, orders equal values by
    their original index: that gives the tie rule for every dtype, unsigned and bool too.
    """
    x = np.asarray(args[0])
    (k,) = attrs["k"]
    n = x.shape[-1]
    if 0 < k < n and x.dtype != np.bool_:
        return _top_k_partitioned(x, k)
    order = np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1][..., :k]
    index = (n - 1 - order).astype(np.int64)
    return np.take_along_axis(x, index, axis=-1), index


def _top_k_partitioned(x: Array, k: int) -> tuple[Array, ...]:
    """`top_k_kernel`'s result without sorting whole rows (a stable sort of [64, 500]
    took 1.1 ms; this 0.18): the k-th largest value by a partition, the k entries above it
    (NaN above every number, as the sort has it) and, of those equal to it, the first by
    index; then those k sorted as the kernel sorts."""
    n = x.shape[-1]
    t = np.partition(x, n - k, axis=-1)[..., n - k : n - k + 1]
    if x.dtype.kind == "f":
        nan_x, nan_t = np.isnan(x), np.isnan(t)
        above = (x > t) | (nan_x & ~nan_t)
        tied = (x == t) | (nan_x & nan_t)
    else:
        above, tied = x > t, x == t
    room = k - np.count_nonzero(above, axis=-1)[..., None]
    if np.any(np.count_nonzero(tied, axis=-1)[..., None] != room):  # more ties than room
        tied &= np.cumsum(tied, axis=-1) <= room
    picked = np.nonzero((above | tied).reshape(-1, n))[1].reshape(*x.shape[:-1], k)
    v = np.take_along_axis(x, picked, axis=-1)
    order = k - 1 - np.argsort(v[..., ::-1], axis=-1, kind="stable")[..., ::-1]
    index = np.take_along_axis(picked, order, axis=-1).astype(np.int64)
    return np.take_along_axis(x, index, axis=-1), index


def _numpy_dtype(name: str) -> np.dtype[Any]:
    dtype: np.dtype[Any] = DType.parse(name).numpy.newbyteorder("=")
    return dtype


def _full(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    return (np.full(tuple(attrs["shape"]), attrs["value"], dtype=_numpy_dtype(attrs["dtype"])),)


def _iota(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    (size,) = attrs["size"]
    return (np.arange(size, dtype=_numpy_dtype(attrs["dtype"])),)


def _dim_value(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    out = np.asarray(tuple(attrs["dims"]), dtype=_numpy_dtype(attrs["dtype"]))
    return (out.reshape(()) if attrs["scalar"] else out,)


def _mask_select(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    x, mask = args
    return (np.asarray(x)[np.asarray(mask, dtype=bool)],)


_DTYPE = AttrSpec("dtype", AttrKind.DTYPE, REQUIRED, "the dtype of the result")
define(
    "broadcast_to",
    1,
    rules.broadcast_to,
    same_dtype,
    _broadcast_to,
    OpFlag.LAYOUT,
    "broadcast to shape by NumPy's rules (np.broadcast_to)",
    (AttrSpec("shape", AttrKind.DIMS, REQUIRED, "the target dimensions"),),
)
define(
    "slice",
    1,
    rules.slice_,
    same_dtype,
    _slice,
    OpFlag.LAYOUT,
    "x[start:stop:step] on every axis; indices normalized, step > 0",
    (
        AttrSpec("start", AttrKind.DIMS, REQUIRED, "first index per axis, 0 <= start"),
        AttrSpec("stop", AttrKind.DIMS, REQUIRED, "end per axis, start <= stop <= dim"),
        AttrSpec("step", AttrKind.INTS, REQUIRED, "stride per axis, > 0"),
    ),
    view=_slice_view,
)
define(
    "pad",
    1,
    rules.pad,
    same_dtype,
    _pad,
    OpFlag.LAYOUT,
    "pad every axis with low and high copies of value",
    (
        AttrSpec("low", AttrKind.DIMS, REQUIRED, "elements before each axis"),
        AttrSpec("high", AttrKind.DIMS, REQUIRED, "elements after each axis"),
        AttrSpec("value", AttrKind.FLOAT, 0.0, "the padding value"),
    ),
)
# sort and top_k compare elements and full/iota/dim_value make new ones: neither is a mere
# view, so they are not LAYOUT (which a pass may lower to a change of strides).
_SORT_ATTRS = (
    AttrSpec("axis", AttrKind.INT, -1, "the axis to sort"),
    AttrSpec("descending", AttrKind.BOOL, False, "largest first"),
)
for _name, _dtype_rule, _kernel, _doc in (
    ("sort", same_dtype, _sort, "sort along axis (nan last ascending, first descending)"),
    (
        "argsort",
        arg_reduce_dtype,
        _argsort,
        "i64 indices that sort along axis, stable (ties: lower index first; nan as in sort)",
    ),
):
    define(_name, 1, rules.sort, _dtype_rule, _kernel, OpFlag.NONE, _doc, _SORT_ATTRS)
define(
    "top_k",
    1,
    rules.top_k,
    values_and_indices,
    top_k_kernel,
    OpFlag.NONE,
    "k largest along the last axis, and their i64 indices (ties: lower index first)",
    (AttrSpec("k", AttrKind.DIMS, REQUIRED, "how many: one dimension"),),
    num_outputs=2,
)
define(
    "full",
    0,
    rules.full,
    full_dtype,
    _full,
    OpFlag.NONE,
    "a new tensor of shape with every element value",
    (
        AttrSpec("shape", AttrKind.DIMS, REQUIRED, "the dimensions"),
        AttrSpec("value", AttrKind.FLOAT, REQUIRED, "every element"),
        _DTYPE,
    ),
)
define(
    "iota",
    0,
    rules.iota,
    int_or_float_attr_dtype,
    _iota,
    OpFlag.NONE,
    "the vector 0, 1, ..., size - 1 (np.arange)",
    (AttrSpec("size", AttrKind.DIMS, REQUIRED, "the length: one dimension"), _DTYPE),
)
define(
    "dim_value",
    0,
    rules.dim_value,
    int_or_float_attr_dtype,
    _dim_value,
    OpFlag.NONE,
    "the values of dims as a tensor: [len(dims)], or [] with scalar",
    (
        AttrSpec("dims", AttrKind.DIMS, REQUIRED, "the dimensions to read"),
        AttrSpec("dtype", AttrKind.DTYPE, "i32", "the dtype of the result"),
        AttrSpec("scalar", AttrKind.BOOL, False, "a scalar of the one dimension"),
    ),
)
define(
    "mask_select",
    2,
    rules.mask_select,
    mask_dtype,
    _mask_select,
    OpFlag.DATA_DEPENDENT,
    "x[mask] with a bool mask over the leading axes: [n, *rest], n known at run time",
)
