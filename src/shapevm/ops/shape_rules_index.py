"""Shape rules of the ops that index with tensors: take, gathers, scatters, cumsum, flip.

Index *values* are data: a rule only relates the shapes. Out-of-range indices are found by
the kernels when the program runs (an ``IndexError`` the interpreter reports with the
instruction).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from shapevm.ops.core import Condition, RuleAttr, ShapeResult, ShapeRuleError, SymShape
from shapevm.ops.shape_rules import axis_index, conditions, distinct_axes, fmt_shape
from shapevm.shapes import DYNAMIC

Attrs = Mapping[str, RuleAttr]


def _int_attr(attrs: Attrs, name: str) -> int:
    value = attrs[name]
    assert isinstance(value, int)
    return value


def _rank_at_least(shape: SymShape, n: int, operand: int, what: str) -> None:
    if len(shape) < n:
        raise ShapeRuleError(
            f"{what} needs an operand of rank at least {n}",
            expected=f"{{{operand}}} of rank >= {n}",
            found=f"{{{operand}}}: {fmt_shape(shape)}",
            fix="reshape the operand first",
        )


def take(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """``np.take(x, indices, axis)``: ``x.shape[:axis] + indices.shape + x.shape[axis+1:]``."""
    x, idx = shapes
    _rank_at_least(x, 1, 0, "take")
    axis = axis_index(_int_attr(attrs, "axis"), len(x))
    return ShapeResult(((*x[:axis], *idx, *x[axis + 1 :]),))


def take_along_axis(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """The result has the indices' shape; off the axis they may not exceed the operand's."""
    x, idx = shapes
    _same_rank(x, idx, "take_along_axis")
    axis = axis_index(_int_attr(attrs, "axis"), len(x))
    conds = [
        Condition(
            i,
            "<=",
            d,
            f"indices dimension {ax} is larger than the operand's",
            f"{{1}}.shape[{ax}] <= {{0}}.shape[{ax}]",
            "the indices select within the operand on every axis but the gathered one",
        )
        for ax, (d, i) in enumerate(zip(x, idx, strict=True))
        if ax != axis
    ]
    return ShapeResult((tuple(idx),), conditions(*conds))


def _same_rank(x: SymShape, idx: SymShape, what: str) -> None:
    if len(x) != len(idx) or not x:
        raise ShapeRuleError(
            f"{what} takes an operand and indices of the same rank (at least 1)",
            expected=f"{{1}} of rank {len(x)}",
            found=f"{{0}}: {fmt_shape(x)}, {{1}}: {fmt_shape(idx)}",
            fix="reshape the indices to the operand's rank",
        )


def _index_depth(data: SymShape, idx: SymShape, batch: int) -> int:
    """``k``, the length of one index tuple of gather_nd / scatter_nd (a constant)."""
    k = idx[-1] if idx else None
    if not isinstance(k, int) or not (batch < len(idx) and batch + k <= len(data)):
        raise ShapeRuleError(
            "the last dimension of the indices must be a constant k with batch_dims + k <= "
            "the operand's rank",
            expected=f"{{1}}.shape[-1] an int <= {len(data) - batch}",
            found=f"{{0}}: {fmt_shape(data)}, {{1}}: {fmt_shape(idx)}, batch_dims={batch}",
            fix="index tuples have a fixed length; reshape the indices",
        )
    return k


def _batch_conditions(data: SymShape, idx: SymShape, batch: int) -> list[Condition]:
    return [
        Condition(
            idx[ax],
            "==",
            data[ax],
            f"batch dimension {ax} differs between the operand and the indices",
            f"{{1}}.shape[{ax}] == {{0}}.shape[{ax}]",
            "the first batch_dims dimensions of both are equal",
        )
        for ax in range(batch)
    ]


def gather_nd(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """``indices[..., k]`` index tuples into ``data``: ``indices.shape[:-1] + data.shape[b+k:]``."""
    data, idx = shapes
    batch = _int_attr(attrs, "batch_dims")
    k = _index_depth(data, idx, batch)
    out = (*idx[:-1], *data[batch + k :])
    return ShapeResult((out,), conditions(*_batch_conditions(data, idx, batch)))


def scatter_nd(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """``data`` with ``updates`` written at the index tuples; updates are
    ``indices.shape[:-1] + data.shape[k:]``."""
    data, idx, upd = shapes
    k = _index_depth(data, idx, 0)
    want = (*idx[:-1], *data[k:])
    if len(upd) != len(want):
        raise ShapeRuleError(
            "the updates have the wrong rank",
            expected=f"{{2}} of shape {fmt_shape(want)}",
            found=f"{{2}}: {fmt_shape(upd)}",
            fix="updates hold one slice of data per index tuple",
        )
    conds = [
        Condition(u, "==", w, f"updates dimension {ax} is wrong", f"{{2}}.shape[{ax}] == {w}")
        for ax, (u, w) in enumerate(zip(upd, want, strict=True))
    ]
    return ShapeResult((tuple(data),), conditions(*conds))


def scatter_elements(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """``data`` with ``updates`` written at ``indices`` along ``axis`` (same shapes)."""
    data, idx, upd = shapes
    _same_rank(data, idx, "scatter_elements")
    axis_index(_int_attr(attrs, "axis"), len(data))
    conds = [
        Condition(
            u, "==", i, "updates and indices differ", f"{{2}}.shape[{ax}] == {{1}}.shape[{ax}]"
        )
        for ax, (u, i) in enumerate(zip(upd, idx, strict=False))
    ]
    if len(upd) != len(idx):
        raise ShapeRuleError(
            "updates and indices have different ranks",
            expected=f"{{2}} of shape {fmt_shape(idx)}",
            found=f"{{2}}: {fmt_shape(upd)}",
            fix="give one update per index",
        )
    return ShapeResult((tuple(data),), conditions(*conds))


def along_axis(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """Same shape; ``axis`` must exist (``cumsum``)."""
    (x,) = shapes
    _rank_at_least(x, 1, 0, "a scan along an axis")
    axis_index(_int_attr(attrs, "axis"), len(x))
    return ShapeResult((tuple(x),))


def flip(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """Same shape; each of ``axes`` must exist, once."""
    (x,) = shapes
    distinct_axes(attrs["axes"], len(x), "axes")
    return ShapeResult((tuple(x),))


def top_k_n(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """``top_k`` with ``k`` read from a tensor: ``[..., dynamic]`` values and indices."""
    x, k = shapes
    _rank_at_least(x, 1, 0, "top_k_n")
    if len(k) > 1 or (len(k) == 1 and k[0] != 1):
        raise ShapeRuleError(
            "k must be one number",
            expected="{1} of shape [] or [1]",
            found=f"{{1}}: {fmt_shape(k)}",
            fix="reshape k to a scalar",
        )
    out = (*x[:-1], DYNAMIC)
    return ShapeResult((out, out))


def shape_of(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """``[rank]``: one entry per dimension of the operand."""
    (x,) = shapes
    return ShapeResult(((len(x),),))
