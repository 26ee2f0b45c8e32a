"""Shape rules of the op table, over symbolic dimensions (see `shapevm.ops.core`).

Rules never decide a relation between symbolic dimensions themselves: they return it as a
`Condition` and the verifier decides it under the scope's constraints. A rule may compare
dimensions structurally (``==`` on ``DimExpr`` is total) to pick the simplest output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shapevm.ops.core import (
    DYNAMIC,
    Condition,
    Dynamic,
    RuleAttr,
    ShapeResult,
    ShapeRuleError,
    SymDim,
    SymShape,
)

Attrs = Mapping[str, RuleAttr]


def fmt_shape(shape: SymShape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _axis(axis: int, ndim: int, operand: int = 0) -> int:
    if not -ndim <= axis < ndim:
        raise ShapeRuleError(
            f"axis {axis} is out of range for rank {ndim}",
            expected=f"-{ndim} <= axis < {ndim}",
            found=f"axis={axis}, {{{operand}}} has rank {ndim}",
            fix="count axes from 0, or from -1 for the last one",
        )
    return axis % ndim


def _product(dims: Sequence[SymDim]) -> SymDim:
    out: Any = 1
    for d in dims:
        if isinstance(d, Dynamic):
            return DYNAMIC
        out = out * d
    result: SymDim = out
    return result


def broadcast_shapes(shapes: Sequence[SymShape], what: str = "cannot broadcast") -> ShapeResult:
    """NumPy broadcasting; two different non-1 dimensions must be provably equal."""
    ndim = max((len(s) for s in shapes), default=0)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    out: list[SymDim] = []
    conds: list[Condition] = []
    for axis in range(ndim):
        chosen: SymDim = 1
        chosen_from = -1
        for i, shape in enumerate(padded):
            d = shape[axis]
            if isinstance(d, int) and d == 1:
                continue
            if chosen_from < 0:
                chosen, chosen_from = d, i
            elif isinstance(d, Dynamic) or isinstance(chosen, Dynamic):
                conds.append(_bcast_cond(d, chosen, i, chosen_from, axis, shapes, what))
                chosen = DYNAMIC
            elif d != chosen:
                conds.append(_bcast_cond(d, chosen, i, chosen_from, axis, shapes, what))
        out.append(chosen)
    return ShapeResult((tuple(out),), tuple(conds))


def _bcast_cond(
    d: SymDim, chosen: SymDim, i: int, j: int, axis: int, shapes: Sequence[SymShape], what: str
) -> Condition:
    ai = axis - (max(len(s) for s in shapes) - len(shapes[i]))
    aj = axis - (max(len(s) for s in shapes) - len(shapes[j]))
    return Condition(
        d,
        "==",
        chosen,
        f"{what}: dimensions differ",
        f"{{{i}}}.shape[{ai}] == {{{j}}}.shape[{aj}]",
        "make the dimensions equal, or 1 to broadcast",
    )


def elementwise(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """Elementwise ops of any arity broadcast their operands."""
    return broadcast_shapes(shapes, "cannot broadcast operands")


def matmul(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """``np.matmul``: ``[..., m, k] @ [..., k, n] -> [..., m, n]``; 1-D operands as NumPy."""
    a, b = shapes
    if len(a) == 0 or len(b) == 0:
        raise ShapeRuleError(
            "matmul needs operands of rank at least 1",
            expected="rank >= 1 for both operands",
            found=f"{{0}}: rank {len(a)}, {{1}}: rank {len(b)}",
            fix="use mul for scalars",
        )
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    inner = Condition(
        b2[-2],
        "==",
        a2[-1],
        "inner dimensions differ",
        f"{{1}}.shape[{len(b) - 2 if len(b) > 1 else 0}] == {{0}}.shape[{len(a) - 1}]",
        "transpose or reshape one operand",
    )
    batch = broadcast_shapes([a2[:-2], b2[:-2]], "cannot broadcast batch dimensions")
    out: tuple[SymDim, ...] = batch.shapes[0]
    if len(a) > 1:
        out += (a2[-2],)
    if len(b) > 1:
        out += (b2[-1],)
    return ShapeResult((out,), (inner, *batch.conditions))


def reduction(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """``axis`` (ints, all when absent) and ``keepdims`` (bool) as in NumPy."""
    (shape,) = shapes
    axis = attrs.get("axis")
    if axis is None:
        axes = set(range(len(shape)))
    else:
        assert isinstance(axis, tuple)
        axes = set()
        for a in axis:
            assert isinstance(a, int)
            norm = _axis(a, len(shape))
            if norm in axes:
                raise ShapeRuleError(
                    f"axis {a} is repeated",
                    expected="distinct axes",
                    found=f"axis={list(axis)}",
                    fix="list each axis once",
                )
            axes.add(norm)
    keep = bool(attrs.get("keepdims"))
    out = tuple((1 if keep else None) if i in axes else d for i, d in enumerate(shape))
    return ShapeResult((tuple(d for d in out if d is not None),))


def reshape(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """Same elements, new dimensions ``shape`` (ints and symbolic dimensions, no ``-1``)."""
    (shape,) = shapes
    target = attrs["shape"]
    assert isinstance(target, tuple)
    new: list[SymDim] = []
    for d in target:
        if isinstance(d, int) and d < 0:
            raise ShapeRuleError(
                f"reshape target has the negative dimension {d}",
                expected="dimensions >= 0",
                found=f"shape={fmt_shape(target)}",
                fix="resolve -1 to the dimension it stands for when tracing",
            )
        assert not isinstance(d, str)
        new.append(d)
    cond = Condition(
        _product(new),
        "==",
        _product(shape),
        "reshape changes the number of elements",
        f"product of shape={fmt_shape(tuple(new))} == product of {{0}}.shape",
        "the new shape must hold exactly the elements of the operand",
    )
    return ShapeResult((tuple(new),), (cond,))


def transpose(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """Permute axes by ``perm`` (reversed when absent)."""
    (shape,) = shapes
    perm = attrs.get("perm")
    if perm is None:
        return ShapeResult((tuple(reversed(shape)),))
    assert isinstance(perm, tuple)
    ints = [p for p in perm if isinstance(p, int)]
    if len(ints) != len(perm) or sorted(ints) != list(range(len(shape))):
        raise ShapeRuleError(
            "perm is not a permutation of the axes",
            expected=f"a permutation of {list(range(len(shape)))}",
            found=f"perm={list(perm)}",
            fix="list every axis of the operand exactly once",
        )
    return ShapeResult((tuple(shape[p] for p in ints),))


def concatenate(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """Join along ``axis``; the other dimensions must be equal."""
    first = shapes[0]
    raw = attrs.get("axis", 0)
    assert isinstance(raw, int)
    axis = _axis(raw, len(first))
    conds: list[Condition] = []
    for i, shape in enumerate(shapes[1:], start=1):
        if len(shape) != len(first):
            raise ShapeRuleError(
                "operands of concatenate have different ranks",
                expected=f"rank {len(first)} like {{0}}",
                found=f"{{{i}}} has rank {len(shape)}",
                fix="reshape the operands to the same rank",
            )
        for ax, (d, d0) in enumerate(zip(shape, first, strict=False)):
            if ax != axis and d != d0:
                conds.append(
                    Condition(
                        d,
                        "==",
                        d0,
                        f"dimension {ax} differs between operands of concatenate",
                        f"{{{i}}}.shape[{ax}] == {{0}}.shape[{ax}]",
                        f"only axis {axis} may differ",
                    )
                )
    total = _sum([s[axis] for s in shapes])
    out = tuple(total if i == axis else d for i, d in enumerate(first))
    return ShapeResult((out,), tuple(conds))


def _sum(dims: Sequence[SymDim]) -> SymDim:
    out: Any = 0
    for d in dims:
        if isinstance(d, Dynamic):
            return DYNAMIC
        out = out + d
    result: SymDim = out
    return result


def nonzero(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """``np.argwhere``: ``[dynamic, rank]``; the row count depends on the data."""
    (shape,) = shapes
    return ShapeResult(((DYNAMIC, len(shape)),))
