"""Shape rules of the N-d window ops: pooling, transposed convolution, resizing one axis.

Spatial sizes are symbolic: ``(h + 2 - 3) // 2 + 1`` stays an expression of ``h``, and the
condition that a window fits the padded input goes to the verifier like any other.
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
from shapevm.ops.shape_rules import axis_index, conditions, fmt_shape, int_list, sizes, sym_dims
from shapevm.shapes import DYNAMIC, Dynamic, min_dim

Attrs = Mapping[str, RuleAttr]


def _ints(attrs: Attrs, name: str, n: int, default: int, lowest: int) -> tuple[int, ...]:
    """An ``INTS`` attribute with ``n`` values >= ``lowest``; ``default`` each when absent."""
    values = (default,) * n if attrs.get(name) is None else int_list(attrs, name)
    if len(values) != n or any(v < lowest for v in values):
        raise ShapeRuleError(
            f"{name} needs {n} values >= {lowest}",
            expected=f"{name} with {n} values, each >= {lowest}",
            found=f"{name}={list(values)}",
            fix=f"give one value per spatial axis ({n})" + (", begins then ends" if n > 3 else ""),
        )
    return values


def _spatial(x: SymShape, n: int, what: str) -> None:
    if len(x) < n + 1:
        raise ShapeRuleError(
            f"{what} over {n} spatial axes needs an operand of rank at least {n + 1}",
            expected=f"{{0}} of rank >= {n + 1} ([N, C, *spatial])",
            found=f"{{0}}: {fmt_shape(x)}",
            fix="reshape the operand to [N, C, *spatial]",
        )


def window_size(
    d: SymDim, k: int, pads: tuple[int, int], stride: int, dil: int, ceil: bool, axis: int
) -> tuple[SymDim, list[Condition]]:
    """Output size of a window along one axis; with ``ceil`` the last window may hang
    over the end but must start inside the input or its leading padding."""
    if isinstance(d, Dynamic):
        return DYNAMIC, []
    span = dil * (k - 1) + 1
    room: Any = d + pads[0] + pads[1] - span
    cond = Condition(
        d + pads[0] + pads[1],
        ">=",
        span,
        f"the window is larger than the padded input along axis {axis}",
        f"{{0}}.shape[{axis}] + {pads[0] + pads[1]} >= {span} (window span)",
        "pad the input, or use a smaller kernel or dilation",
    )
    if not ceil:
        return room // stride + 1, [cond]
    last_start: Any = (d + pads[0] - 1) // stride + 1
    out: SymDim = min_dim((room + stride - 1) // stride + 1, last_start)
    return out, [cond]


def pool(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """Pool the trailing ``len(kernel)`` axes (``stride``, ``dilation``, ``pads``: begins
    then ends, ``ceil_mode``)."""
    (x,) = shapes
    kernel = int_list(attrs, "kernel")
    n = len(kernel)
    _ints(attrs, "kernel", n, 1, 1)
    _spatial(x, n, "pooling")
    stride = _ints(attrs, "stride", n, 1, 1)
    dilation = _ints(attrs, "dilation", n, 1, 1)
    pads = _ints(attrs, "pads", 2 * n, 0, 0)
    ceil = bool(attrs.get("ceil_mode"))
    lead = len(x) - n
    out = list(x[:lead])
    conds: list[Condition] = []
    for i in range(n):
        size, c = window_size(
            x[lead + i], kernel[i], (pads[i], pads[n + i]), stride[i], dilation[i], ceil, lead + i
        )
        out.append(size)
        conds += c
    return ShapeResult((tuple(out),), conditions(*conds))


def conv_transpose(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """``[N, C, *in]`` with weight ``[C, O/groups, *k]`` and optional bias ``[O]``:
    ``[N, O, *out]``, ``out = stride*(in-1) + output_padding + dilation*(k-1) + 1 - pads``."""
    x, w = shapes[0], shapes[1]
    n = len(w) - 2
    if n < 1 or len(x) != n + 2 or (len(shapes) == 3 and len(shapes[2]) != 1):
        raise ShapeRuleError(
            "conv_transpose takes [N, C, *in], a weight [C, O/groups, *k] and a bias [O]",
            expected="{0} and {1} of the same rank >= 3, bias of rank 1",
            found=", ".join(f"{{{i}}}: {fmt_shape(s)}" for i, s in enumerate(shapes)),
            fix="reshape to [N, C, *spatial]",
        )
    stride = _ints(attrs, "stride", n, 1, 1)
    dilation = _ints(attrs, "dilation", n, 1, 1)
    pads = _ints(attrs, "pads", 2 * n, 0, 0)
    extra = _ints(attrs, "output_padding", n, 0, 0)
    groups = attrs.get("groups", 1)
    assert isinstance(groups, int) and groups >= 1
    o: Any = w[1] * groups if not isinstance(w[1], Dynamic) else DYNAMIC
    conds = [
        Condition(
            x[1],
            "==",
            w[0],
            "input channels differ from the weight's first dimension",
            "{0}.shape[1] == {1}.shape[0]",
            "the weight of a transposed convolution is [in, out/groups, *k]",
        )
    ]
    if len(shapes) == 3:
        conds.append(
            Condition(shapes[2][0], "==", o, "bias size differs", "{2}.shape[0] == output channels")
        )
    out: list[SymDim] = [x[0], o]
    for i in range(n):
        d, k = x[2 + i], w[2 + i]
        if isinstance(d, Dynamic) or isinstance(k, Dynamic):
            out.append(DYNAMIC)
            continue
        size: Any = (
            stride[i] * (d - 1) + extra[i] + dilation[i] * (k - 1) + 1 - pads[i] - pads[n + i]
        )
        out.append(size)
        conds.append(
            Condition(
                size,
                ">=",
                0,
                f"pads remove more than the output along axis {2 + i}",
                f"output size along axis {2 + i} >= 0",
                "use smaller pads",
            )
        )
    return ShapeResult((tuple(out),), conditions(*conds))


def resize_axis(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """The operand with dimension ``axis`` resized to ``size``."""
    (x,) = shapes
    if not x:
        raise ShapeRuleError(
            "resize_axis needs an operand of rank at least 1",
            expected="{0} of rank >= 1",
            found="{0} is a scalar",
            fix="reshape the operand first",
        )
    value = attrs["axis"]
    assert isinstance(value, int)
    axis = axis_index(value, len(x))
    size = sym_dims(attrs, "size")
    if len(size) != 1:
        raise ShapeRuleError(
            "resize_axis takes one size",
            expected="size=[one dimension]",
            found=f"size={fmt_shape(size)}",
            fix="resize one axis per op",
        )
    out = tuple(size[0] if i == axis else d for i, d in enumerate(x))
    return ShapeResult((out,), sizes(size, "size"))
