"""What follows a product per output channel, folded into its weights.

A bias, a batch norm in eval mode written out (``(h - mean) / std * gamma + beta``), a scale
(``h * 0.5``, ``h / temperature``): each op is ``scale * h + shift`` per channel of the
product's result, and a run of them is one such map. `fold` finds the run after a dense
layer (channels on the last axis) or a convolution (channels on axis 1); the lowering then
multiplies the weights' output channels by ``scale`` and makes ``scale * bias + shift``
the bias, as ONNX Runtime's Conv+Mul / Conv+Add fusions do. The ops must be enabled as
native chains in the capability table (they are what the kernel now computes). The program
computes in float32, so folding must not hide an overflow it has: each constant must be
finite in float32 and a divisor nonzero there, the composed ``scale`` and ``shift`` finite
in float32 (else the run ends before that op), and the folded weights and bias too (else
nothing is folded). ``k / h`` is not affine and ends the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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


def channel_axis_1d(shape: tuple[int, ...], n: int) -> bool:
    """A constant per channel of an NCT result (a 1-D convolution's): ``[c, 1]`` or
    ``[1, c, 1]``."""
    return shape in ((n, 1), (1, n, 1))


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
    single = _float32(out)
    return single.astype(np.float64) if np.isfinite(single).all() else None


def _float32(values: Any) -> Any:
    """``values`` rounded to float32 (out of range: infinite, without a warning)."""
    with np.errstate(over="ignore"):
        return np.asarray(values).astype(np.float32, copy=False)


def _finite32(*arrays: Any) -> bool:
    return all(np.isfinite(_float32(a)).all() for a in arrays)


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


@dataclass
class Folded:
    """A product's weights and bias with the run of affine ops after it folded in."""

    h: int  # the run's last value (the product's result when nothing folded)
    positions: list[int]  # the folded ops' positions
    weights: Any  # float32
    bias: Any  # float32[n], or None


def fold(
    low: Any, h: int, n: int, per_channel: ChannelShape, weights: Any, axis: int, bias: Any
) -> Folded:
    """The run of affine ops after value ``h`` folded into ``weights`` (output channels on
    ``axis``) and ``bias`` (None: none yet)."""
    scale, shift = np.ones(n), np.zeros(n)
    start, positions = h, []
    while (user := low.sole_user(h)) is not None:
        found = step(low, user, h, n, per_channel)
        if found is None:
            break
        k, c = found
        if not _finite32(k * scale, k * shift + c):
            break
        scale, shift = k * scale, k * shift + c
        h = user.outs[0]
        positions.append(user.pos)
    if not positions:
        return Folded(h, positions, weights, bias)
    new_bias = folded_bias(bias, scale, shift)
    new_weights = weights  # the program's own weights are its own business: not checked
    if np.any(scale != 1.0):
        shape = [1] * weights.ndim
        shape[axis] = n
        new_weights = _float32(weights * scale.reshape(shape))
        if not _finite32(new_weights):
            return Folded(start, [], weights, bias)  # the program's overflow stays its own
    if new_bias is not None and not _finite32(new_bias):
        return Folded(start, [], weights, bias)
    return Folded(h, positions, new_weights, new_bias)


def folded_bias(bias: Any, scale: Any, shift: Any) -> Any:
    """The bias after the run (None when there was none and the run adds nothing)."""
    if bias is None and not np.any(shift != 0.0):
        return None
    old = np.zeros(len(scale)) if bias is None else np.asarray(bias, np.float64).reshape(-1)
    return _float32(scale * old + shift)
