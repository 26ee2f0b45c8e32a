"""Rows of the op table for contractions and windowed ops: einsum, conv2d, 2-D pooling.

The reference kernels are as fast as plain NumPy allows: conv2d lowers to im2col and one
batched GEMM (BLAS), pooling combines the ``kh * kw`` strided taps of the padded input.
The helpers here (`pad_hw`, `windows`, `compute_dtype`) are shared with the kernel
variants of the runtime's op scheduler.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from shapevm.ops import shape_rules_nn as rules
from shapevm.ops.core import REQUIRED, AttrKind, AttrSpec, OpFlag
from shapevm.ops.dtype_rules import float_dtype, numeric_dtype, same_dtype
from shapevm.ops.table import define

Array = np.ndarray[Any, Any]
Attrs = Mapping[str, Any]


def compute_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """f16 is computed in f32 (NumPy has no f16 BLAS and f16 sums lose digits)."""
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def pad_hw(x: Array, padding: Sequence[int], value: float) -> Array:
    """Pad the last two axes by ``(top, bottom, left, right)``."""
    if not any(padding):
        return x
    top, bottom, left, right = padding
    h, w = x.shape[-2:]
    # np.full + a slice assignment: the same bytes as np.pad without its Python overhead
    out = np.full((*x.shape[:-2], h + top + bottom, w + left + right), value, dtype=x.dtype)
    out[..., top : top + h, left : left + w] = x
    return out


def windows(
    xp: Array, kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int]
) -> Array:
    """A strided view ``[..., OH, OW, KH, KW]`` of every window of the padded input."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    view = sliding_window_view(xp, (dh * (kh - 1) + 1, dw * (kw - 1) + 1), axis=(-2, -1))
    return view[..., ::sh, ::sw, ::dh, ::dw]


def conv2d_im2col(args: Sequence[Any], attrs: Attrs, max_cols: int | None = None) -> Array:
    """im2col + GEMM: the windows as columns of a matrix, one matmul per group.

    The column matrix is ``[C/groups * KH * KW, N * OH * OW]`` per group, laid out so the
    gather copies whole output rows (contiguous for stride 1). ``max_cols`` bounds the
    columns built at once, a whole number of images; ``None`` builds it whole.
    """
    x, w = np.asarray(args[0]), np.asarray(args[1])
    calc = compute_dtype(x.dtype)
    groups = attrs["groups"]
    n = x.shape[0]
    o, cg, kh, kw = w.shape
    og = o // groups
    win = windows(pad_hw(x, attrs["padding"], 0), (kh, kw), attrs["stride"], attrs["dilation"])
    oh, ow = win.shape[2:4]
    # [G, C/G, KH, KW, N, OH, OW]: rows of the column matrix, then output pixels
    win = win.reshape(n, groups, cg, oh, ow, kh, kw).transpose(1, 2, 5, 6, 0, 3, 4)
    wm = w.reshape(groups, og, cg * kh * kw).astype(calc, copy=False)
    out = np.empty((n, groups, og, oh * ow), dtype=calc)
    step = n if max_cols is None else max(1, max_cols // max(oh * ow, 1))
    if groups == 1 or n == 1:
        # one image at a time: the product lands in the output without a transposed copy
        for i in range(n):
            cols = win[:, :, :, :, i].astype(calc, order="C").reshape(groups, cg * kh * kw, -1)
            np.matmul(wm, cols, out=out[i])
        return finish_conv(out.reshape(n, o, oh, ow), args, x.dtype)
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        cols = win[:, :, :, :, lo:hi].astype(calc, order="C").reshape(groups, cg * kh * kw, -1)
        res = np.matmul(wm, cols).reshape(groups, og, hi - lo, oh * ow)
        out[lo:hi] = res.transpose(2, 0, 1, 3)
    return finish_conv(out.reshape(n, o, oh, ow), args, x.dtype)


def finish_conv(out: Array, args: Sequence[Any], dtype: np.dtype[Any]) -> Array:
    """Add the bias (if any) in the compute dtype, then round once to ``dtype``."""
    if len(args) > 2:
        out += np.asarray(args[2]).astype(out.dtype, copy=False)[:, None, None]
    return np.ascontiguousarray(out, dtype=dtype)


def _conv2d(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    return (conv2d_im2col(args, attrs),)


def _pool(
    x: Array, attrs: Attrs, fill: float, combine: Callable[..., Any], calc: np.dtype[Any]
) -> Array:
    """Fold the ``kh * kw`` strided taps of the padded input with ``combine``."""
    kh, kw = attrs["kernel"]
    sh, sw = attrs["stride"] or attrs["kernel"]
    xp = pad_hw(x, attrs["padding"], fill)
    oh = (xp.shape[-2] - kh) // sh + 1
    ow = (xp.shape[-1] - kw) // sw + 1
    acc = np.empty((*x.shape[:-2], oh, ow), dtype=calc)
    for i in range(kh):
        for j in range(kw):
            tap = xp[..., i : i + sh * (oh - 1) + 1 : sh, j : j + sw * (ow - 1) + 1 : sw]
            if i == j == 0:
                acc[...] = tap
            else:
                combine(acc, tap, out=acc)
    return acc


def _lowest(dtype: np.dtype[Any]) -> float:
    return -np.inf if dtype.kind == "f" else int(np.iinfo(dtype).min)


def _max_pool2d(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    x = np.asarray(args[0])
    return (_pool(x, attrs, _lowest(x.dtype), np.maximum, x.dtype),)


def _avg_pool2d(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    x = np.asarray(args[0])
    total = _pool(x, attrs, 0, np.add, compute_dtype(x.dtype))
    kh, kw = attrs["kernel"]
    if attrs["count_include_pad"]:
        return ((total / (kh * kw)).astype(x.dtype),)
    # The count of real (unpadded) elements of a window is rows in it times columns in it.
    sh, sw = attrs["stride"] or attrs["kernel"]
    top, bottom, left, right = attrs["padding"]
    rows = _real_counts(x.shape[-2], kh, sh, top, bottom)
    cols = _real_counts(x.shape[-1], kw, sw, left, right)
    return ((total / np.multiply.outer(rows, cols).astype(total.dtype)).astype(x.dtype),)


def _real_counts(size: int, k: int, stride: int, low: int, high: int) -> Array:
    """How many elements of each window along one axis lie in the input, not the padding."""
    starts = np.arange((size + low + high - k) // stride + 1) * stride - low
    counts: Array = np.minimum(starts + k, size) - np.maximum(starts, 0)
    return counts


def _einsum(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    # optimize=True finds a pairwise order and hands contractions to BLAS (tensordot); for
    # one operand there is nothing to order and the search only costs time.
    return (np.asarray(np.einsum(attrs["equation"], *args, optimize=len(args) > 1)),)


define(
    "einsum",
    (1, None),
    rules.einsum,
    same_dtype,
    _einsum,
    OpFlag.NONE,
    "Einstein summation with an explicit output, e.g. equation='bij,bjk->bik' (np.einsum)",
    (AttrSpec("equation", AttrKind.STR, REQUIRED, "input terms, '->', output term"),),
)
define(
    "conv2d",
    (2, 3),
    rules.conv2d,
    float_dtype,
    _conv2d,
    OpFlag.NONE,
    "2-D convolution (cross-correlation), NCHW input, [O, C/groups, KH, KW] weight, bias [O]",
    (
        AttrSpec("stride", AttrKind.INTS, (1, 1), "step of the window (h, w)"),
        AttrSpec("padding", AttrKind.INTS, (0, 0, 0, 0), "zeros (top, bottom, left, right)"),
        AttrSpec("dilation", AttrKind.INTS, (1, 1), "spacing of kernel elements (h, w)"),
        AttrSpec("groups", AttrKind.INT, 1, "channel groups; C and O divisible by it"),
    ),
)
_POOL = (
    AttrSpec("kernel", AttrKind.INTS, REQUIRED, "window size (h, w)"),
    AttrSpec("stride", AttrKind.INTS, None, "step of the window (h, w); the kernel when absent"),
    AttrSpec("padding", AttrKind.INTS, (0, 0, 0, 0), "(top, bottom, left, right), <= kernel/2"),
)
define(
    "max_pool2d",
    1,
    rules.pool2d,
    numeric_dtype,
    _max_pool2d,
    OpFlag.NONE,
    "max over windows of the last two axes, padding with -inf (PyTorch semantics)",
    _POOL,
)
define(
    "avg_pool2d",
    1,
    rules.pool2d,
    float_dtype,
    _avg_pool2d,
    OpFlag.NONE,
    "mean over windows of the last two axes, padding with zeros (PyTorch semantics)",
    (*_POOL, AttrSpec("count_include_pad", AttrKind.BOOL, True, "divide by the whole window")),
)
