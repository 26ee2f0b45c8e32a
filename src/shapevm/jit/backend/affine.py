"""What follows a product per output channel, folded into its weights.

A bias, a batch norm in eval mode written out (``(h - mean) / std * gamma + beta``), a scale
(``h * 0.5``, ``h / temperature``): each op is ``scale * h + shift`` per channel of the
product's result, and a run of them is one such map. `fold` finds the run after a dense
layer (channels on the last axis) or a convolution (channels on axis 1); the lowering then
multiplies the weights' output channels by ``scale`` and makes ``scale * bias + shift``
the bias, as ONNX Runtime's Conv+Mul / Conv+Add fusions do. The ops must be enabled as
native chains in the capability table (they are what the kernel now computes), constants
finite, and a division by a constant nonzero; ``k / h`` is not affine and ends the run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from shapevm.jit.graph import Op
from shapevm.runtime.scheduler import native_enabled

ChannelShape = Callable[[tuple[int, ...], int], bool]


def last_axis(shape: tuple[int, ...], n: int) -> bool:
    """A constant per column of a dense layer's result: ``[n]``, ``[1, n]``..."""
    return len(shape) >= 1 and shape[-1] == n and all(d == 1 for d in shape[:-1])


def channel_axis(shape: tuple[int, ...], n: int) -> bool:
    """A constant per channel of an NCHW result: ``[c, 1, 1]`` or ``[1, c, 1, 1]``."""
    return shape in ((n, 1, 1), (1, n, 1, 1))


def _values(low: Any, operand: tuple[str, Any], n: int, per_channel: ChannelShape) -> Any:
    """The operand as ``f64[n]`` (a literal or a one-element constant for all channels),
    or None."""
    kind, val = operand
    if kind == "c":
        if isinstance(val, bool) or not isinstance(val, (int, float)):
            return None
        out = np.full(n, float(val))
    else:
        array = low.const_array(val)
        if array is None or array.dtype != np.float32:
            return None
        if array.size == 1:
            out = np.full(n, float(array.reshape(())))
        elif per_channel(array.shape, n):
            out = array.reshape(n).astype(np.float64)
        else:
            return None
    return out if np.isfinite(out).all() else None


def step(low: Any, op: Op, h: int, n: int, per_channel: ChannelShape) -> tuple[Any, Any] | None:
    """``op`` as ``(scale, shift)`` over ``h``'s channels, or None."""
    from shapevm.jit.backend.lower import _shape_equal

    info = op.info
    operands = low.literals(op)
    if info is None or info.name not in ("add", "sub", "mul", "div") or len(operands) != 2:
        return None
    if not native_enabled(info.name, "native_chain"):
        return None
    if not _shape_equal(low.graph.value(op.outs[0]).shape, low.graph.value(h).shape):
        return None
    first = operands[0] == ("v", h)
    other = operands[1] if first else operands[0]
    if other == ("v", h):
        return None  # h with itself
    k = _values(low, other, n, per_channel)
    if k is None:
        return None
    one, zero = np.ones(n), np.zeros(n)
    if info.name == "add":
        return one, k
    if info.name == "sub":
        return (one, -k) if first else (-one, k)
    if info.name == "mul":
        return k, zero
    if not first or not np.all(k != 0.0):  # k / h is not affine; h / 0 stays as it is
        return None
    return 1.0 / k, zero


def fold(low: Any, h: int, n: int, per_channel: ChannelShape) -> tuple[int, list[int], Any, Any]:
    """The run of affine ops after value ``h``: (its last value, their positions, the
    composed ``scale`` and ``shift``, float64)."""
    scale, shift = np.ones(n), np.zeros(n)
    positions: list[int] = []
    while (user := low.sole_user(h)) is not None:
        found = step(low, user, h, n, per_channel)
        if found is None:
            break
        scale, shift = found[0] * scale, found[0] * shift + found[1]
        h = user.outs[0]
        positions.append(user.pos)
    return h, positions, scale, shift


def folded_bias(bias: Any, scale: Any, shift: Any) -> Any:
    """The bias after the run (None when there was none and the run adds nothing)."""
    if bias is None and not np.any(shift != 0.0):
        return None
    old = np.zeros(len(scale)) if bias is None else np.asarray(bias, np.float64).reshape(-1)
    return (scale * old + shift).astype(np.float32)
