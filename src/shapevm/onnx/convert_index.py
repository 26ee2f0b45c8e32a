"""Converters of ONNX operators that index, scatter, pad or build masks.

``Gather`` of a shape value with constant indices folds (``Gather(Shape(x), 0)`` is ``b``);
on tensors it is the op table's ``take``. Masks (``Trilu``, ``OneHot``) are comparisons of
``iota`` vectors, so their sizes stay symbolic.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shapevm.frontend import numpy_api as snp
from shapevm.onnx import values as V
from shapevm.onnx.convert_math import call
from shapevm.onnx.convert_shape import concat_values, layout, reshape_to, slice_axis
from shapevm.onnx.node import Node, Op, attr_is
from shapevm.onnx.values import SymInts, Value
from shapevm.ops import DType


def _axis(n: Node, x: Value, default: int = 0) -> int:
    rank = len(V.shape_of(x))
    a = int(n.attr("axis", default))
    return a % rank if rank else 0


def gather(n: Node, x: Value, idx: Value) -> Any:
    axis = _axis(n, x)
    picks = V.known(idx)
    if V.is_known(x) and picks is not None and not isinstance(idx, SymInts):
        return layout(x, lambda a: np.take(a, picks.astype(np.intp), axis=axis), None)
    return call("take", x, idx, axis=axis)


def gather_elements(n: Node, x: Value, idx: Value) -> Value:
    return call("take_along_axis", x, idx, axis=_axis(n, x))


def gather_nd(n: Node, x: Value, idx: Value) -> Value:
    return call("gather_nd", x, idx, batch_dims=int(n.attr("batch_dims", 0)))


def scatter_nd(n: Node, x: Value, idx: Value, upd: Value) -> Value:
    return call("scatter_nd", x, idx, upd, reduction=n.attr("reduction", "none"))


def scatter_elements(n: Node, x: Value, idx: Value, upd: Value) -> Value:
    reduction = n.attr("reduction", "none")
    return call("scatter_elements", x, idx, upd, axis=_axis(n, x), reduction=reduction)


_REDUCTIONS = ("none", "add", "mul", "max", "min")


# -- padding ------------------------------------------------------------------------------


def pad(
    n: Node,
    x: Value,
    pads: Value | None = None,
    value: Value | None = None,
    axes: Value | None = None,
) -> Any:
    dims_ = V.shape_of(x)
    rank = len(dims_)
    if n.opset < 11:
        widths = list(n.attr("pads") if n.opset >= 2 else n.attr("paddings"))
        fill = float(n.attr("value", 0.0))
    else:
        widths = list(V.dims(pads, "pads"))
        fill = (
            0.0
            if value is None or V.shape_of(value) == (0,)
            else (float(V.constant(value, "the constant value").reshape(-1)[0]))
        )
    which = list(range(rank)) if axes is None else [a % rank for a in V.ints(axes, "axes")]
    lows, highs = [0] * rank, [0] * rank
    half = len(widths) // 2
    for i, a in enumerate(which):
        lows[a], highs[a] = widths[i], widths[half + i]
    mode = n.attr("mode", "constant")
    out = x
    for a in range(rank):
        lo, hi = lows[a], highs[a]
        if isinstance(lo, int) and lo < 0:
            out, lo = slice_axis(out, a, -lo, V.shape_of(out)[a], 1), 0
        if isinstance(hi, int) and hi < 0:
            out, hi = slice_axis(out, a, 0, V.shape_of(out)[a] + hi, 1), 0
        lows[a], highs[a] = lo, hi
    if mode == "constant":
        if all(isinstance(v, int) and v == 0 for v in (*lows, *highs)):
            return out
        if V.is_known(out) and all(isinstance(v, int) for v in (*lows, *highs)):
            return layout(
                out,
                lambda arr: np.pad(arr, list(zip(lows, highs, strict=True)), constant_values=fill),
                None,
            )
        return call("pad", out, low=tuple(lows), high=tuple(highs), value=fill)
    for a in range(rank):
        out = _pad_axis(out, a, lows[a], highs[a], mode)
    return out


def _pad_axis(x: Value, a: int, lo: Any, hi: Any, mode: str) -> Any:
    """``edge``, ``reflect`` or ``wrap`` padding of one axis, as slices joined together."""
    if (isinstance(lo, int) and lo == 0) and (isinstance(hi, int) and hi == 0):
        return x
    d = V.shape_of(x)[a]
    flip = {"axes": (a,)}
    if mode == "edge":
        before = _repeat(slice_axis(x, a, 0, 1, 1), a, lo)
        after = _repeat(slice_axis(x, a, d - 1, d, 1), a, hi)
    elif mode == "reflect":
        before = call("flip", slice_axis(x, a, 1, lo + 1, 1), **flip)
        after = call("flip", slice_axis(x, a, d - hi - 1, d - 1, 1), **flip)
    else:  # wrap
        before = slice_axis(x, a, d - lo, d, 1)
        after = slice_axis(x, a, 0, hi, 1)
    return concat_values([before, x, after], a)


def _repeat(edge: Value, a: int, count: Any) -> Any:
    dims_ = list(V.shape_of(edge))
    dims_[a] = count
    return snp.broadcast_to(V.tensor(edge), tuple(dims_))


# -- masks and scans ----------------------------------------------------------------------


def _iota(n: Any, shape: tuple[Any, ...]) -> Any:
    return snp.reshape(call("iota", size=(n,), dtype="i64"), shape)


def trilu(n: Node, x: Value, k: Value | None = None) -> Value:
    dims_ = V.shape_of(x)
    rows, cols = dims_[-2], dims_[-1]
    diag = call("sub", _iota(cols, (1, cols)), _iota(rows, (rows, 1)))
    shift: Any = 0 if k is None else V.tensor(k)
    if isinstance(shift, np.ndarray):
        shift = int(shift.reshape(-1)[0])
    keep = call("greater_equal" if n.attr("upper", 1) else "less_equal", diag, shift)
    zero = np.zeros((), V.dtype_of(x))
    return call("where", keep, x, zero)


def cumsum(n: Node, x: Value, axis: Value) -> Value:
    (a,) = V.ints(axis, "axis")
    return call(
        "cumsum",
        x,
        axis=a % len(V.shape_of(x)),
        exclusive=bool(n.attr("exclusive", 0)),
        reverse=bool(n.attr("reverse", 0)),
    )


def nonzero(n: Node, x: Value) -> Value:
    return call("transpose", call("nonzero", x), perm=(1, 0))


def one_hot(n: Node, idx: Value, depth: Value, values: Value) -> Value:
    (size,) = (
        V.dims(depth, "depth")
        if V.dtype_of(depth).kind in "iu"
        else ((int(V.constant(depth, "depth").reshape(-1)[0]),))
    )
    rank = len(V.shape_of(idx)) + 1
    axis = int(n.attr("axis", -1)) % rank
    wide = call("cast", idx, dtype="i64") if V.dtype_of(idx) != np.int64 else idx
    wide = call("where", call("less", wide, 0), call("add", wide, V.tensor(_as_i64(size))), wide)
    shape = tuple(size if i == axis else 1 for i in range(rank))
    hot = call("equal", snp.expand_dims(V.tensor(wide), axis), _iota(size, shape))
    off = slice_axis(values, 0, 0, 1, 1)
    on = slice_axis(values, 0, 1, 2, 1)
    return call("where", hot, reshape_to(on, ()), reshape_to(off, ()))


def _as_i64(d: Any) -> Value:
    return SymInts.make(np.asarray(d, dtype=object), np.dtype(np.int64))


def compress(n: Node, x: Value, condition: Value) -> Value:
    """The slices of ``x`` along ``axis`` (of the flattened ``x`` without one) where
    ``condition`` is true: a data-dependent size, unless the condition is a constant."""
    if not n.has("axis"):
        x, axis = reshape_to(x, (-1,)), 0
    else:
        axis = _axis(n, x)
    picks = V.known(condition)
    if picks is not None and not isinstance(condition, SymInts):
        where = np.flatnonzero(picks.astype(bool)).astype(np.int64)
        return call("take", x, where, axis=axis)
    rank = len(V.shape_of(x))
    perm = (axis, *(i for i in range(rank) if i != axis))
    front = call("transpose", x, perm=perm) if axis else V.tensor(x)
    length = V.shape_of(condition)[0]
    front = slice_axis(front, 0, 0, length, 1)
    picked = call("mask_select", front, call("cast", condition, dtype="bool"))
    back = tuple(int(i) for i in np.argsort(perm))
    return call("transpose", picked, perm=back) if axis else picked


def depth_to_space(n: Node, x: Value) -> Any:
    b = int(n.attr("blocksize"))
    nn, c, h, w = V.shape_of(x)
    if n.attr("mode", "DCR") == "DCR":
        t = reshape_to(x, (nn, b, b, c // (b * b), h, w))
        t = call("transpose", t, perm=(0, 3, 4, 1, 5, 2))
    else:
        t = reshape_to(x, (nn, c // (b * b), b, b, h, w))
        t = call("transpose", t, perm=(0, 1, 4, 2, 5, 3))
    return reshape_to(t, (nn, c // (b * b), h * b, w * b))


def space_to_depth(n: Node, x: Value) -> Any:
    b = int(n.attr("blocksize"))
    nn, c, h, w = V.shape_of(x)
    t = reshape_to(x, (nn, c, h // b, b, w // b, b))
    if n.attr("mode", "DCR") == "DCR":
        t = call("transpose", t, perm=(0, 3, 5, 1, 2, 4))
    else:
        t = call("transpose", t, perm=(0, 1, 3, 5, 2, 4))
    return reshape_to(t, (nn, c * b * b, h // b, w // b))


def eye_like(n: Node, x: Value) -> Value:
    rows, cols = V.shape_of(x)
    diag = call("sub", _iota(cols, (1, cols)), _iota(rows, (rows, 1)))
    on = call("equal", diag, int(n.attr("k", 0)))
    code = n.attr("dtype")
    from shapevm.onnx.model_io import ONNX_DTYPES

    dt = ONNX_DTYPES[int(code)] if code is not None else DType.from_numpy(V.dtype_of(x))
    return call("cast", on, dtype=dt.value)


OPS: dict[str, Op] = {
    "Gather": Op(gather, arith=False),
    "GatherElements": Op(gather_elements, arith=False),
    "GatherND": Op(gather_nd, arith=False),
    "ScatterND": Op(scatter_nd, arith=False, check=attr_is("reduction", _REDUCTIONS, "none")),
    "ScatterElements": Op(
        scatter_elements, arith=False, check=attr_is("reduction", _REDUCTIONS, "none")
    ),
    "Pad": Op(
        pad,
        arith=False,
        known=(1, 2, 3),
        check=attr_is("mode", ("constant", "reflect", "edge", "wrap"), "constant"),
    ),
    "Trilu": Op(trilu, arith=False),
    "CumSum": Op(cumsum, known=(1,)),
    "NonZero": Op(nonzero, arith=False),
    "OneHot": Op(one_hot, arith=False, known=(1,)),
    "Compress": Op(compress, arith=False),
    "DepthToSpace": Op(depth_to_space, arith=False),
    "SpaceToDepth": Op(space_to_depth, arith=False),
    "EyeLike": Op(eye_like, arith=False),
}
