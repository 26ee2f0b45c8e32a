"""Shape rules of the op table, over symbolic dimensions (see `shapevm.ops.core`).

Rules never decide a relation between symbolic dimensions themselves: they return it as a
`Condition` and the verifier decides it under the scope's constraints. A rule may compare
dimensions structurally (``==`` on ``DimExpr`` is total) to pick the simplest output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shapevm.ops.core import (
    Condition,
    RuleAttr,
    ShapeResult,
    ShapeRuleError,
    SymDim,
    SymShape,
)
from shapevm.shapes import DYNAMIC, DimExpr, Dynamic

Attrs = Mapping[str, RuleAttr]


def fmt_shape(shape: SymShape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def axis_index(axis: int, ndim: int, operand: int = 0) -> int:
    if not -ndim <= axis < ndim:
        raise ShapeRuleError(
            f"axis {axis} is out of range for rank {ndim}",
            expected=f"-{ndim} <= axis < {ndim}",
            found=f"axis={axis}, {{{operand}}} has rank {ndim}",
            fix="count axes from 0, or from -1 for the last one",
        )
    return axis % ndim


def dim_product(dims: Sequence[SymDim]) -> SymDim:
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
    axes = set(range(len(shape))) if axis is None else distinct_axes(axis, len(shape), "axis")
    keep = bool(attrs.get("keepdims"))
    out = tuple((1 if keep else None) if i in axes else d for i, d in enumerate(shape))
    return ShapeResult((tuple(d for d in out if d is not None),))


def distinct_axes(axes: RuleAttr, ndim: int, name: str) -> set[int]:
    """The axes of an ``INTS`` attribute, normalized; each must exist, once."""
    assert isinstance(axes, tuple)
    out: set[int] = set()
    for a in axes:
        assert isinstance(a, int)
        norm = axis_index(a, ndim)
        if norm in out:
            raise ShapeRuleError(
                f"axis {a} is repeated",
                expected="distinct axes",
                found=f"{name}={list(axes)}",
                fix="list each axis once",
            )
        out.add(norm)
    return out


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
        dim_product(new),
        "==",
        dim_product(shape),
        "reshape changes the number of elements",
        f"product of shape={fmt_shape(tuple(new))} == product of {{0}}.shape",
        "the new shape must hold exactly the elements of the operand",
    )
    return ShapeResult((tuple(new),), (cond,))


def transpose_perm(attrs: Attrs, ndim: int) -> tuple[int, ...]:
    """``transpose``'s permutation of ``ndim`` axes: ``perm``, or the axes reversed when it
    is absent (as `transpose` computes the shape)."""
    perm = attrs.get("perm")
    return tuple(range(ndim - 1, -1, -1)) if perm is None else tuple(perm)  # type: ignore[arg-type]


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
    axis = axis_index(raw, len(first))
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
    total = dim_sum([s[axis] for s in shapes])
    out = tuple(total if i == axis else d for i, d in enumerate(first))
    return ShapeResult((out,), tuple(conds))


def dim_sum(dims: Sequence[SymDim]) -> SymDim:
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


def sym_dims(attrs: Attrs, name: str) -> tuple[int | DimExpr, ...]:
    """A ``DIMS`` attribute as the verifier hands it over: ints and symbolic dimensions."""
    value = attrs[name]
    assert isinstance(value, tuple)
    out: list[int | DimExpr] = []
    for d in value:
        assert isinstance(d, (int, DimExpr))
        out.append(d)
    return tuple(out)


def int_list(attrs: Attrs, name: str) -> tuple[int, ...]:
    value = attrs[name]
    assert isinstance(value, tuple)
    out: list[int] = []
    for v in value:
        assert isinstance(v, int)
        out.append(v)
    return tuple(out)


def _trivially(lhs: SymDim, rel: str, rhs: SymDim) -> bool:
    """True when ``lhs rel rhs`` needs no deciding: equal expressions, or two ints."""
    if rel in ("==", "<=", ">=") and lhs == rhs and not isinstance(lhs, Dynamic):
        return True
    if isinstance(lhs, int) and isinstance(rhs, int):
        return bool({"==": lhs == rhs, "<=": lhs <= rhs, ">=": lhs >= rhs}.get(rel, False))
    return False


def conditions(*conds: Condition) -> tuple[Condition, ...]:
    """``conds`` less those that hold on their face, so the verifier decides only the rest."""
    return tuple(c for c in conds if not _trivially(c.lhs, c.rel, c.rhs))


def sizes(values: Sequence[int | DimExpr], attr: str) -> tuple[Condition, ...]:
    """Sizes given by an attribute are >= 0: an int is checked here, a symbol by the verifier."""
    conds: list[Condition] = []
    for i, d in enumerate(values):
        if isinstance(d, int) and d < 0:
            raise ShapeRuleError(
                f"{attr}[{i}] is negative",
                expected=f"{attr}[{i}] >= 0",
                found=f"{attr}={fmt_shape(tuple(values))}",
                fix="sizes and offsets count from 0",
            )
        what = f"{attr}[{i}] may be negative"
        conds.append(Condition(d, ">=", 0, what, f"{attr}[{i}] >= 0", "add a constraint"))
    return conditions(*conds)


def per_axis(values: Sequence[Any], attr: str, ndim: int) -> None:
    if len(values) != ndim:
        raise ShapeRuleError(
            f"{attr} needs one entry per axis of the operand",
            expected=f"{ndim} entries",
            found=f"{attr} has {len(values)}, {{0}} has rank {ndim}",
            fix=f"give {attr} for every axis",
        )


def arg_reduction(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """``argmax``/``argmin``: one ``axis`` (int), or ``None`` for the flattened operand."""
    (shape,) = shapes
    axis = attrs.get("axis")
    keep = bool(attrs.get("keepdims"))
    if axis is None:
        return ShapeResult(((1,) * len(shape) if keep else (),))
    assert isinstance(axis, int)
    ax = axis_index(axis, len(shape))
    out = tuple((1 if keep else None) if i == ax else d for i, d in enumerate(shape))
    return ShapeResult((tuple(d for d in out if d is not None),))


def broadcast_to(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """NumPy broadcasting of the operand to ``shape``: each dimension is 1 or the target's."""
    (shape,) = shapes
    target = sym_dims(attrs, "shape")
    if len(target) < len(shape):
        raise ShapeRuleError(
            "broadcast_to cannot lower the rank",
            expected=f"{{0}} of rank at most {len(target)}, the length of shape",
            found=f"{{0}} has rank {len(shape)}, shape={fmt_shape(target)}",
            fix="reshape or reduce the operand first",
        )
    offset = len(target) - len(shape)
    conds = [
        Condition(
            d,
            "==",
            target[offset + axis],
            "cannot broadcast to the target shape: dimensions differ",
            f"{{0}}.shape[{axis}] == shape[{offset + axis}]",
            "make the dimension equal to the target, or 1",
        )
        for axis, d in enumerate(shape)
        if not (isinstance(d, int) and d == 1)
    ]
    return ShapeResult((target,), sizes(target, "shape") + conditions(*conds))


def slice_(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """Basic slicing ``x[start:stop:step]`` per axis, with normalized indices and step > 0."""
    (shape,) = shapes
    start, step = sym_dims(attrs, "start"), int_list(attrs, "step")
    stop = _stops(attrs, shape)
    for name, values in (("start", start), ("stop", stop), ("step", step)):
        per_axis(values, name, len(shape))
    out: list[SymDim] = []
    conds: list[Condition] = []
    for axis, (d, lo, hi, st) in enumerate(zip(shape, start, stop, step, strict=True)):
        if st <= 0:
            raise ShapeRuleError(
                f"step[{axis}] is not positive",
                expected="step > 0 on every axis",
                found=f"step={list(step)}",
                fix="reverse an axis with a separate op, then slice with a positive step",
            )
        if isinstance(hi, Dynamic):  # to the end of a data-dependent axis
            out.append(d if (isinstance(lo, int) and lo == 0 and st == 1) else DYNAMIC)
            continue
        out.append(hi - lo if st == 1 else (hi - lo + st - 1) // st)
        conds += _slice_bounds(axis, d, lo, hi)
    return ShapeResult((tuple(out),), sizes(start, "start") + conditions(*conds))


def _stops(attrs: Attrs, shape: SymShape) -> tuple[SymDim, ...]:
    """``stop`` per axis; ``dynamic`` means the end of an axis whose size is data-dependent."""
    value = attrs["stop"]
    assert isinstance(value, tuple)
    for axis, d in enumerate(value):
        if isinstance(d, Dynamic) and not (axis < len(shape) and isinstance(shape[axis], Dynamic)):
            raise ShapeRuleError(
                f"stop[{axis}] is dynamic but axis {axis} is not data-dependent",
                expected="a dynamic stop only on an axis of dynamic size",
                found=f"stop={list(value)}",
                fix="give the stop as a constant or a symbolic dimension",
            )
        assert isinstance(d, (int, DimExpr, Dynamic))
    return tuple(value)


def _slice_bounds(axis: int, d: SymDim, lo: SymDim, hi: SymDim) -> list[Condition]:
    past = Condition(
        hi,
        "<=",
        d,
        f"stop[{axis}] is past the end of axis {axis}",
        f"stop[{axis}] <= {{0}}.shape[{axis}]",
        "clamp stop to the dimension when tracing",
    )
    order = Condition(
        lo,
        "<=",
        hi,
        f"start[{axis}] is after stop[{axis}]",
        f"start[{axis}] <= stop[{axis}]",
        "an empty slice has start == stop",
    )
    return [past, order]


def pad(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """Constant padding: ``low[i]`` elements before and ``high[i]`` after axis ``i``."""
    (shape,) = shapes
    low, high = sym_dims(attrs, "low"), sym_dims(attrs, "high")
    per_axis(low, "low", len(shape))
    per_axis(high, "high", len(shape))
    out = tuple(dim_sum([lo, d, hi]) for lo, d, hi in zip(low, shape, high, strict=True))
    return ShapeResult((out,), sizes(low, "low") + sizes(high, "high"))


def sort(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """Same shape; ``axis`` must exist."""
    (shape,) = shapes
    axis = attrs.get("axis", -1)
    assert isinstance(axis, int)
    axis_index(axis, len(shape))
    return ShapeResult((shape,))


def top_k(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """The ``k`` largest along the last axis: values and their indices, ``[..., k]`` each."""
    (shape,) = shapes
    k_dims = sym_dims(attrs, "k")
    if len(k_dims) != 1 or len(shape) == 0:
        raise ShapeRuleError(
            "top_k takes one k and an operand of rank at least 1",
            expected="k=[one dimension], rank >= 1",
            found=f"k={fmt_shape(k_dims)}, {{0}} has rank {len(shape)}",
            fix="reshape a scalar to [1] first",
        )
    (k,) = k_dims
    cond = Condition(
        k,
        "<=",
        shape[-1],
        "k is larger than the last dimension",
        f"k <= {{0}}.shape[{len(shape) - 1}]",
        "take at most as many elements as the axis holds",
    )
    out = (*shape[:-1], k)
    return ShapeResult((out, out), sizes(k_dims, "k") + conditions(cond))


def full(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """A new tensor of dimensions ``shape``."""
    target = sym_dims(attrs, "shape")
    return ShapeResult((target,), sizes(target, "shape"))


def iota(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """``[size]``: the numbers 0 to size - 1."""
    size = sym_dims(attrs, "size")
    if len(size) != 1:
        raise ShapeRuleError(
            "iota takes one size",
            expected="size=[one dimension]",
            found=f"size={fmt_shape(size)}",
            fix="make a vector with iota, then reshape or broadcast it",
        )
    return ShapeResult((size,), sizes(size, "size"))


def dim_value(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """``[len(dims)]``, or ``[]`` with ``scalar`` (then exactly one dimension)."""
    dims = sym_dims(attrs, "dims")
    if attrs.get("scalar"):
        if len(dims) != 1:
            raise ShapeRuleError(
                "a scalar dim_value takes exactly one dimension",
                expected="dims=[one dimension] with scalar=true",
                found=f"dims={fmt_shape(dims)}",
                fix="set scalar=false for a vector of dimensions",
            )
        return ShapeResult(((),))
    return ShapeResult(((len(dims),),))


def mask_select(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """``x[mask]``: the mask covers the leading axes of x; ``[dynamic, *rest]``."""
    x, mask = shapes
    if len(mask) > len(x):
        raise ShapeRuleError(
            "the mask has a higher rank than the operand",
            expected=f"{{1}} of rank at most {len(x)}",
            found=f"{{0}} has rank {len(x)}, {{1}} has rank {len(mask)}",
            fix="the mask covers the leading axes of the operand",
        )
    conds = [
        Condition(
            m,
            "==",
            d,
            f"mask dimension {axis} differs from the operand's",
            f"{{1}}.shape[{axis}] == {{0}}.shape[{axis}]",
            "the mask has the shape of the leading axes of the operand",
        )
        for axis, (m, d) in enumerate(zip(mask, x, strict=False))
    ]
    return ShapeResult(((DYNAMIC, *x[len(mask) :]),), conditions(*conds))
