"""Converters of ONNX reductions, arg-reductions, TopK and the softmax family.

Reductions take their axes from an attribute (older opsets) or a constant input; the ``L1``,
``L2``, ``LogSum``, ``LogSumExp`` and ``SumSquare`` variants are compositions of the op
table's ``sum`` and ``max``. A product or sum of shape values folds (``ReduceProd`` of a
shape is the symbolic element count).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shapevm import nn
from shapevm.onnx import values as V
from shapevm.onnx.convert_math import call, call_n
from shapevm.onnx.convert_shape import reshape_to
from shapevm.onnx.node import Node, Op
from shapevm.onnx.values import SymInts, Value
from shapevm.ops import DType

_AXES_INPUT_SINCE = {"ReduceSum": 13}  # every other reduction takes axes as an input from 18


def _axes(n: Node, x: Value, axes: Value | None) -> tuple[int, ...] | None:
    """The reduced axes, normalized; ``None`` for all; ``()`` for none (a no-op)."""
    rank = len(V.shape_of(x))
    since = _AXES_INPUT_SINCE.get(n.op_type, 18)
    if n.opset < since:
        raw = n.attr("axes")
        return None if raw is None else tuple(int(a) % max(rank, 1) for a in raw)
    picked = None if axes is None else V.ints(axes, "axes")
    if not picked:
        return () if n.attr("noop_with_empty_axes", 0) else None
    return tuple(int(a) % max(rank, 1) for a in picked)


def reduction(kind: str) -> Any:
    def convert(n: Node, x: Value, axes: Value | None = None) -> Any:
        ax = _axes(n, x, axes)
        keep = bool(n.attr("keepdims", 1))
        if ax == ():
            return _noop(kind, x)
        if isinstance(x, SymInts) and kind in ("sum", "prod", "max", "min"):
            try:
                return SymInts.make(V.sym_reduce(kind, x.values, ax, keep), x.dtype)
            except V.Undecided:
                pass
        return _REDUCE[kind](x, ax, keep)

    convert.__name__ = kind
    return convert


def _red(name: str, x: Any, ax: tuple[int, ...] | None, keep: bool) -> Any:
    return call(name, x, axis=ax, keepdims=keep)


def _mean(x: Any, ax: Any, keep: bool) -> Any:
    out = _red("mean", x, ax, keep)
    if V.dtype_of(x).kind in "iu":  # ONNX keeps the integer type
        return call("cast", out, dtype=DType.from_numpy(V.dtype_of(x)).value)
    return out


def _log_sum_exp(x: Any, ax: Any, keep: bool) -> Any:
    top = _red("max", x, ax, True)
    safe = call("where", call("isinf", top), 0.0, top)  # all -inf (or empty): shift by 0
    total = _red("sum", call("exp", call("sub", x, safe)), ax, keep)
    shift = safe if keep else _red("max", safe, ax, False)
    return call("add", call("log", total), shift)


_REDUCE: dict[str, Any] = {
    "sum": lambda x, ax, k: _red("sum", x, ax, k),
    "mean": _mean,
    "max": lambda x, ax, k: _red("max", x, ax, k),
    "min": lambda x, ax, k: _red("min", x, ax, k),
    "prod": lambda x, ax, k: _red("prod", x, ax, k),
    "l1": lambda x, ax, k: _red("sum", call("abs", x), ax, k),
    "l2": lambda x, ax, k: call("sqrt", _red("sum", call("mul", x, x), ax, k)),
    "sum_square": lambda x, ax, k: _red("sum", call("mul", x, x), ax, k),
    "log_sum": lambda x, ax, k: call("log", _red("sum", x, ax, k)),
    "log_sum_exp": _log_sum_exp,
}


def _noop(kind: str, x: Value) -> Value:
    """``noop_with_empty_axes``: the input, with the elementwise part of the reduction."""
    if kind == "l1":
        return call("abs", x)
    if kind == "l2":
        return call("abs", x)
    if kind == "sum_square":
        return call("mul", x, x)
    if kind == "log_sum":
        return call("log", x)
    return x


# -- arg reductions and top k -------------------------------------------------------------


def arg_reduction(name: str) -> Any:
    def convert(n: Node, x: Value) -> Any:
        rank = len(V.shape_of(x))
        axis = int(n.attr("axis", 0)) % max(rank, 1)
        keep = bool(n.attr("keepdims", 1))
        if not n.attr("select_last_index", 0):
            return call(name, x, axis=axis, keepdims=keep)
        last = call(name, call("flip", x, axes=(axis,)), axis=axis, keepdims=keep)
        d = V.shape_of(x)[axis]
        size = V.tensor(SymInts.make(np.asarray(d - 1, dtype=object), np.dtype(np.int64)))
        return call("sub", size, last)

    convert.__name__ = name
    return convert


def top_k(n: Node, x: Value, k: Value | None = None) -> tuple[Value, Value]:
    rank = len(V.shape_of(x))
    axis = int(n.attr("axis", -1)) % rank
    perm = (*(i for i in range(rank) if i != axis), axis)
    moved = call("transpose", x, perm=perm) if axis != rank - 1 else V.tensor(x)
    key = moved
    if not n.attr("largest", 1):
        dt = V.dtype_of(x)
        key = call("sub", int(np.iinfo(dt).max), moved) if dt.kind == "u" else call("neg", moved)
    if n.opset < 10:
        _, idx = call_n("top_k", key, k=(int(n.attr("k")),))
    elif k is None or V.is_known(k):  # a size known at import (maybe symbolic)
        _, idx = call_n("top_k", key, k=V.dims(k, "K"))
    else:  # k computed from data: the result's last size is only known when it runs
        _, idx = call_n("top_k_n", key, k)
    values = call("take_along_axis", moved, idx, axis=rank - 1)
    if axis == rank - 1:
        return values, idx
    back = tuple(int(i) for i in np.argsort(perm))
    return call("transpose", values, perm=back), call("transpose", idx, perm=back)


# -- softmax family -----------------------------------------------------------------------


def _coerced(n: Node, x: Value, fn: Any) -> Any:
    """Before opset 13 the softmax family works on x flattened to 2-D at ``axis``."""
    dims_ = V.shape_of(x)
    rank = len(dims_)
    if n.opset >= 13:
        return fn(V.tensor(x), int(n.attr("axis", -1)) % max(rank, 1))
    axis = int(n.attr("axis", 1)) % max(rank, 1)
    rows: Any = 1
    for d in dims_[:axis]:
        rows = rows * d
    cols: Any = 1
    for d in dims_[axis:]:
        cols = cols * d
    flat = reshape_to(x, (rows, cols))
    return reshape_to(fn(V.tensor(flat), 1), tuple(dims_))


def softmax(n: Node, x: Value) -> Any:
    return _coerced(n, x, lambda t, a: nn.softmax(t, axis=a))


def log_softmax(n: Node, x: Value) -> Any:
    return _coerced(n, x, lambda t, a: nn.log_softmax(t, axis=a))


def hardmax(n: Node, x: Value) -> Any:
    def fn(t: Any, a: int) -> Any:
        dims_ = V.shape_of(t)
        best = call("argmax", t, axis=a, keepdims=True)
        shape = tuple(dims_[a] if i == a else 1 for i in range(len(dims_)))
        iota = reshape_to(call("iota", size=(dims_[a],), dtype="i64"), shape)
        return call("cast", call("equal", best, iota), dtype=DType.from_numpy(t.dtype).value)

    return _coerced(n, x, fn)


OPS: dict[str, Op] = {
    "ReduceSum": Op(reduction("sum"), known=(1,)),
    "ReduceMean": Op(reduction("mean"), known=(1,)),
    "ReduceMax": Op(reduction("max"), arith=False, known=(1,)),
    "ReduceMin": Op(reduction("min"), arith=False, known=(1,)),
    "ReduceProd": Op(reduction("prod"), known=(1,)),
    "ReduceL1": Op(reduction("l1"), known=(1,)),
    "ReduceL2": Op(reduction("l2"), known=(1,)),
    "ReduceSumSquare": Op(reduction("sum_square"), known=(1,)),
    "ReduceLogSum": Op(reduction("log_sum"), known=(1,)),
    "ReduceLogSumExp": Op(reduction("log_sum_exp"), known=(1,)),
    "ArgMax": Op(arg_reduction("argmax"), arith=False),
    "ArgMin": Op(arg_reduction("argmin"), arith=False),
    "TopK": Op(top_k, arith=False),
    "Softmax": Op(softmax),
    "LogSoftmax": Op(log_softmax),
    "Hardmax": Op(hardmax),
}
