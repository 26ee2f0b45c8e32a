"""Converters of ONNX shape and layout operators, the ones that fold shape subgraphs.

``Shape`` gives a `SymInts` of the input's symbolic dimensions; ``Gather``, ``Slice``,
``Concat``, ``Unsqueeze``, ``Squeeze``, ``Reshape`` and ``Expand`` of known values compute
with NumPy on object arrays, so a whole shape subgraph becomes dimension arithmetic and the
``Reshape`` at its end gets a target like ``(b, s, 4, 64)``. On tensors the same converters
emit layout ops with symbolic attributes.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from shapevm.frontend import numpy_api as snp
from shapevm.frontend.tracer import Tracer, bind_op
from shapevm.onnx import values as V
from shapevm.onnx.convert_math import call
from shapevm.onnx.model_io import tensor_array
from shapevm.onnx.node import Node, Op
from shapevm.onnx.values import SymInts, Value
from shapevm.ops import DType, Dynamic
from shapevm.shapes import DimExpr, max_dim, min_dim

# Slice bounds at or beyond this mean "to the end" (exporters write INT64_MAX or INT32_MAX).
_HUGE = 2**31 - 1
# Constants larger than this many elements are made when the program runs, not stored.
FOLD_LIMIT = 1 << 28


def layout(v: Value, on_array: Any, on_tensor: Any) -> Any:
    """Apply a layout change to a known value with NumPy, or to a tensor with ops."""
    if isinstance(v, SymInts):
        return SymInts.make(np.asarray(on_array(v.values), dtype=object), v.dtype)
    if isinstance(v, Tracer):
        return on_tensor(v)
    return np.asarray(on_array(np.asarray(v)))


def reshape_to(v: Value, target: tuple[Any, ...]) -> Any:
    if V.is_known(v) and all(isinstance(d, int) for d in target):
        return layout(v, lambda a: a.reshape(target), None)
    return snp.reshape(V.tensor(v), target)


def _axes(values: Any, rank: int) -> list[int]:
    return [int(a) % rank if rank else 0 for a in values]


# -- shapes -------------------------------------------------------------------------------


def shape(n: Node, x: Value) -> Value:
    dims_ = V.shape_of(x)
    rank = len(dims_)
    start, end = n.attr("start", 0), n.attr("end", rank)
    lo = max(0, min(rank, start + rank if start < 0 else start))
    hi = max(0, min(rank, end + rank if end < 0 else end))
    picked = dims_[lo:hi] if hi > lo else ()
    if V.has_dynamic(picked):
        full = call("shape_of", x)
        return call("slice", full, start=(lo,), stop=(max(hi, lo),), step=(1,))
    return SymInts.make(np.asarray(list(picked), dtype=object).reshape(-1), np.dtype(np.int64))


def size(n: Node, x: Value) -> Value:
    total: Any = 1
    for d in V.shape_of(x):
        if isinstance(d, Dynamic):
            return call("prod", call("shape_of", x))
        total = total * d
    return SymInts.make(np.asarray(total, dtype=object), np.dtype(np.int64))


def reshape(n: Node, x: Value, target: Value | None = None) -> Any:
    want = n.attr("shape") if n.opset < 5 else V.dims(target, "the target shape")
    in_shape = V.shape_of(x)
    allow_zero = n.attr("allowzero", 0)
    out = [
        in_shape[i] if (isinstance(d, int) and d == 0 and not allow_zero) else d
        for i, d in enumerate(want)
    ]
    return reshape_to(x, tuple(out))


def flatten(n: Node, x: Value) -> Any:
    dims_ = V.shape_of(x)
    axis = n.attr("axis", 1)
    axis = axis + len(dims_) if axis < 0 else axis
    return reshape_to(x, (_prod(dims_[:axis]), _prod(dims_[axis:])))


def _prod(dims_: Any) -> Any:
    out: Any = 1
    for d in dims_:
        out = out * d
    return out


def transpose(n: Node, x: Value) -> Any:
    rank = len(V.shape_of(x))
    perm = tuple(n.attr("perm", list(range(rank))[::-1]))
    return layout(x, lambda a: np.transpose(a, perm), lambda t: snp.transpose(t, perm))


def squeeze(n: Node, x: Value, axes: Value | None = None) -> Any:
    dims_ = V.shape_of(x)
    raw = n.attr("axes") if n.opset < 13 else (None if axes is None else V.ints(axes, "axes"))
    if raw is None:
        keep = [d for d in dims_ if not (isinstance(d, int) and d == 1)]
    else:
        drop = set(_axes(raw, len(dims_)))
        keep = [d for i, d in enumerate(dims_) if i not in drop]
    return reshape_to(x, tuple(keep))


def unsqueeze(n: Node, x: Value, axes: Value | None = None) -> Any:
    dims_ = list(V.shape_of(x))
    raw = n.attr("axes") if n.opset < 13 else V.ints(axes, "axes")
    rank = len(dims_) + len(raw)
    for a in sorted(_axes(raw, rank)):
        dims_.insert(a, 1)
    return reshape_to(x, tuple(dims_))


def concat(n: Node, *xs: Value) -> Any:
    parts = [x for x in xs if x is not None]
    return concat_values(parts, n.attr("axis", 1))


def concat_values(parts: list[Value], axis: int) -> Any:
    """``parts`` joined along ``axis``: by NumPy when all are known, else by the op."""
    rank = len(V.shape_of(parts[0]))
    axis = axis % rank if rank else 0
    if all(V.is_known(x) for x in parts):
        if any(isinstance(x, SymInts) for x in parts):
            joined = np.concatenate([V.object_array(x) for x in parts], axis=axis)
            return SymInts.make(joined, V.dtype_of(parts[0]))
        return np.concatenate([np.asarray(x) for x in parts], axis=axis)
    return snp.concatenate([V.tensor(x) for x in parts], axis=axis)


def split(n: Node, x: Value, sizes: Value | None = None) -> tuple[Value, ...]:
    dims_ = V.shape_of(x)
    axis = n.attr("axis", 0) % len(dims_)
    d = dims_[axis]
    count = len(n.proto.output)
    if sizes is not None or (n.opset < 13 and n.has("split")):
        parts = list(V.ints(sizes, "split") if sizes is not None else n.attr("split"))
    elif n.has("num_outputs"):
        count = int(n.attr("num_outputs"))
        step = (d + count - 1) // count  # the last part is smaller
        parts = [step] * (count - 1) + [d - step * (count - 1)]
    else:
        parts = [d // count] * count
    bounds: list[Any] = [0]
    for p in parts:
        bounds.append(bounds[-1] + p)
    return tuple(slice_axis(x, axis, lo, hi, 1) for lo, hi in itertools.pairwise(bounds))


def slice_axis(x: Value, axis: int, lo: Any, hi: Any, step: int) -> Any:
    """``x[lo:hi:step]`` along ``axis`` with normalized bounds (step > 0)."""
    rank = len(V.shape_of(x))
    index = tuple(slice(lo, hi, step) if i == axis else slice(None) for i in range(rank))
    if V.is_known(x) and isinstance(lo, int) and isinstance(hi, int):
        return layout(x, lambda a: a[index], None)
    dims_ = V.shape_of(x)
    starts = tuple(lo if i == axis else 0 for i in range(rank))
    stops = tuple(hi if i == axis else dims_[i] for i in range(rank))
    steps = tuple(step if i == axis else 1 for i in range(rank))
    return call("slice", x, start=starts, stop=stops, step=steps)


def _clamp(v: Any, lo: Any, hi: Any) -> Any:
    return min_dim(max_dim(v, lo), hi)


def _bound(v: Any, d: Any, step: int, is_start: bool) -> Any:
    """One ONNX slice bound, normalized against dimension ``d`` (may be symbolic)."""
    if isinstance(v, int) and v >= _HUGE:
        return d if step > 0 else d - 1
    if isinstance(v, int) and v <= -_HUGE:
        return 0 if step > 0 else -1
    if isinstance(v, int) and v < 0:
        v = d + v
    if step > 0:
        return _clamp(v, 0, d)
    return _clamp(v, 0, d - 1) if is_start else _clamp(v, -1, d - 1)


def slice_(n: Node, x: Value, *params: Value | None) -> Value:
    dims_ = V.shape_of(x)
    rank = len(dims_)
    if n.opset < 10:
        starts, ends = list(n.attr("starts")), list(n.attr("ends"))
        axes = list(n.attr("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts = list(V.dims(params[0], "starts"))
        ends = list(V.dims(params[1], "ends"))
        axes = (
            list(V.ints(params[2], "axes"))
            if len(params) > 2 and params[2] is not None
            else (list(range(len(starts))))
        )
        steps = (
            list(V.ints(params[3], "steps"))
            if len(params) > 3 and params[3] is not None
            else ([1] * len(starts))
        )
    out = x
    for a, s, e, st in zip(_axes(axes, rank), starts, ends, steps, strict=True):
        d = dims_[a]
        lo, hi = _bound(s, d, st, True), _bound(e, d, st, False)
        if st > 0:
            out = slice_axis(out, a, lo, max_dim(hi, lo), st)
            continue
        k = -st
        count = max_dim((lo - hi + k - 1) // k, 0)
        if isinstance(count, int) and count == 0:
            out = slice_axis(out, a, 0, 0, 1)
            continue
        first = lo % k if isinstance(hi, int) and hi == -1 else lo - (count - 1) * k
        picked = slice_axis(out, a, first, lo + 1, k)
        out = layout(
            picked, lambda arr, a=a: np.flip(arr, a), lambda t, a=a: call("flip", t, axes=(a,))
        )
    return out


# -- expanding ----------------------------------------------------------------------------


def broadcast_dims(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    """The bidirectional broadcast of two shapes (``Expand``)."""
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + tuple(a)
    b = (1,) * (rank - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b, strict=True):
        if isinstance(x, int) and x == 1:
            out.append(y)
        elif isinstance(y, int) and y == 1:
            out.append(x)
        else:
            out.append(x if not isinstance(x, (int, DimExpr)) or x == y else _larger(x, y))
    return tuple(out)


def _larger(x: Any, y: Any) -> Any:
    try:
        return x if V.decide(">=", x, y) else y
    except V.Undecided:
        return max_dim(x, y)


def expand(n: Node, x: Value, target: Value) -> Any:
    out = broadcast_dims(V.shape_of(x), V.dims(target, "the target shape"))
    if V.is_known(x) and all(isinstance(d, int) for d in out):
        return layout(x, lambda a: np.broadcast_to(a, out).copy(), None)
    return snp.broadcast_to(V.tensor(x), out)


def tile(n: Node, x: Value, repeats: Value) -> Any:
    reps = V.dims(repeats, "repeats")
    if V.is_known(x) and all(isinstance(r, int) for r in reps):
        counts = [int(r) for r in reps]
        return layout(x, lambda a: np.tile(a, counts), None)
    t = V.tensor(x)
    dims_ = V.shape_of(t)
    spread = tuple(v for d in dims_ for v in (1, d))
    wide = tuple(v for r, d in zip(reps, dims_, strict=True) for v in (r, d))
    out = snp.broadcast_to(snp.reshape(t, spread), wide)
    return snp.reshape(out, tuple(r * d for r, d in zip(reps, dims_, strict=True)))


# -- making values ------------------------------------------------------------------------


def constant(n: Node) -> Value:
    if n.has("value"):
        return tensor_array(n.attr("value"), None, n.where)
    for key, dtype in (
        ("value_float", np.float32),
        ("value_floats", np.float32),
        ("value_int", np.int64),
        ("value_ints", np.int64),
    ):
        if n.has(key):
            return np.asarray(n.attr(key), dtype=dtype)
    raise n.unsupported(
        "Constant without a tensor, float or int value",
        expected="value, value_float(s) or value_int(s)",
        found=", ".join(n.attrs) or "no attribute",
    )


def check_constant(n: Node) -> list[Any]:
    bad = [k for k in n.attrs if k in ("sparse_value", "value_string", "value_strings")]
    return (
        [
            n.problem(
                f"Constant with {bad[0]} is not supported",
                expected="value, value_float(s) or value_int(s)",
                found=bad[0],
            )
        ]
        if bad
        else []
    )


def constant_of_shape(n: Node, target: Value) -> Any:
    dims_ = V.dims(target, "the shape")
    fill = (
        tensor_array(n.attr("value"), None, n.where)
        if n.has("value")
        else (np.zeros(1, np.float32))
    )
    value = fill.reshape(-1)[0]
    count = _prod(dims_)
    if isinstance(count, int) and count <= FOLD_LIMIT:
        return np.full(dims_, value, dtype=fill.dtype)
    dt = DType.from_numpy(fill.dtype).value
    return bind_op("full", [], {"shape": dims_, "value": float(value), "dtype": dt}, lazy=True)


def range_(n: Node, start: Value, limit: Value, delta: Value) -> Any:
    a, b, c = (
        V.dims(v, "a Range bound")[0] if V.dtype_of(v).kind in "iu" else None
        for v in (start, limit, delta)
    )
    dtype = V.dtype_of(start)
    if a is None or b is None or c is None:
        lo, hi, step = (V.constant(v, "a Range bound").item() for v in (start, limit, delta))
        count = max(int(np.ceil((hi - lo) / step)), 0)
        return (lo + np.arange(count, dtype=np.float64) * step).astype(dtype)
    if all(isinstance(v, int) for v in (a, b, c)):
        return np.arange(int(a), int(b), int(c), dtype=dtype)
    if not isinstance(c, int) or c == 0:
        raise V.NeedsValue("the Range step")
    length = max_dim((b - a + c - 1) // c if c > 0 else (a - b - c - 1) // -c, 0)
    out = call("iota", size=(length,), dtype=DType.from_numpy(dtype).value)
    if c != 1:
        out = call("mul", out, c)
    return out if isinstance(a, int) and a == 0 else call("add", out, V.tensor(start))


def identity(n: Node, x: Value) -> Value:
    return x


def dropout(n: Node, x: Value, ratio: Value | None = None, training: Value | None = None) -> Any:
    if training is not None and bool(V.constant(training, "training_mode")):
        r = float(V.constant(ratio, "ratio")) if ratio is not None else 0.5
        if r > 0:
            raise n.unsupported(
                "Dropout in training mode draws random numbers",
                expected="training_mode false, or ratio 0",
                found=f"ratio={r}",
            )
    if len(n.proto.output) < 2 or not n.proto.output[1]:
        return x
    mask = (
        snp.full(V.shape_of(x), True, np.bool_)
        if isinstance(x, Tracer)
        else (np.ones(np.shape(x), bool))
    )
    return x, mask


OPS: dict[str, Op] = {
    "Shape": Op(shape, arith=False),
    "Size": Op(size, arith=False),
    "Reshape": Op(reshape, arith=False, known=(1,)),
    "Flatten": Op(flatten, arith=False),
    "Transpose": Op(transpose, arith=False),
    "Squeeze": Op(squeeze, arith=False, known=(1,)),
    "Unsqueeze": Op(unsqueeze, arith=False, known=(1,)),
    "Concat": Op(concat, arith=False),
    "Split": Op(split, arith=False, known=(1,)),
    "Slice": Op(slice_, arith=False, known=(1, 2, 3, 4)),
    "Expand": Op(expand, arith=False, known=(1,)),
    "Tile": Op(tile, arith=False, known=(1,)),
    "Constant": Op(constant, arith=False, check=check_constant),
    "ConstantOfShape": Op(constant_of_shape, arith=False, known=(0,)),
    "Range": Op(range_, arith=False, known=(0, 1, 2)),
    "Identity": Op(identity, arith=False),
    "Dropout": Op(dropout, arith=False, known=(1, 2)),
}
