"""3x3 convolution (NCHW, padding 1, stride 1 or 2) with bias and activation fused, and
global average pooling: the public functions, on the kernels the JIT's compiled regions run.

`pack_conv3x3` keeps the weight; `conv2d_3x3` checks its arguments and runs
`entries.Conv3x3`, built once per (stride, epilogue) on the packed weights: the
register-blocked micro-kernel tiles of `ukernel` (stride 1: six output channels by 16
neighbouring pixels read straight from a zero-bordered copy of the input; stride 2: six
pixels gathered by 16 output channels), with bias and activation applied once per finished
output row. NumPy's usual route, im2col (a 9x copy of the input) and one big matrix
product, then bias and activation as two more passes, is what the interpreter runs.

`global_avg_pool` is a row mean over each (batch, channel) plane.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
from numba import prange

from shapevm.jit.native._core import (
    NativeKernelError,
    act_code,
    check_c_contiguous,
    check_f32,
    check_shape,
    kernel,
    parallel_kernel,
    spec,
)
from shapevm.jit.native._threads import use_threads

Array = np.ndarray[Any, Any]

PARALLEL_MIN_MACS: Final = 1 << 20
"""Smaller convolutions run on the calling thread; above, `entries.ThreadChoice` measures."""


@dataclass(frozen=True, eq=False)
class PackedConv:
    """Weights of a 3x3 convolution kept once for `conv2d_3x3`: ``w`` f32[c_out, c_in, 3,
    3] (C-contiguous) and ``bias`` f32[c_out] (zeros when the layer has none). The kernels'
    own layouts are made by `entries.Conv3x3`, once per stride and epilogue."""

    w: Array
    bias: Array
    c_in: int
    c_out: int
    kernels: dict[tuple[int, str], Any] = field(default_factory=dict, repr=False)

    def kernel(self, stride: int, epilogue: str) -> Any:
        """The `entries.Conv3x3` of this layer for ``stride`` and ``epilogue``."""
        found = self.kernels.get((stride, epilogue))
        if found is None:
            from shapevm.jit.native.entries import Conv3x3

            found = self.kernels[(stride, epilogue)] = Conv3x3(self, stride, epilogue)
        return found


def pack_conv3x3(w: Array, bias: Array | None = None) -> PackedConv:
    """Pack a PyTorch-layout weight ``w: f32[C_out, C_in, 3, 3]`` and ``bias: f32[C_out]``.

    >>> import numpy as np
    >>> p = pack_conv3x3(np.ones((8, 3, 3, 3), np.float32))
    >>> p.w.shape, p.c_in, p.c_out, bool(p.bias.any())
    ((8, 3, 3, 3), 3, 8, False)
    """
    check_f32("pack_conv3x3", "w", w)
    if w.ndim != 4 or w.shape[2:] != (3, 3):
        raise NativeKernelError(
            "pack_conv3x3: w is not a 3x3 convolution weight",
            expected="w: f32[C_out, C_in, 3, 3]",
            found=f"w: {spec(w)}",
            fix="pass the weight in PyTorch's [out, in, kh, kw] layout",
        )
    c_out, c_in = w.shape[:2]
    b = np.zeros(c_out, np.float32)
    if bias is not None:
        check_f32("pack_conv3x3", "bias", bias)
        check_shape("pack_conv3x3", "bias", bias, (c_out,))
        b[:] = bias
    return PackedConv(w=np.ascontiguousarray(w), bias=b, c_in=c_in, c_out=c_out)


def conv_out_hw(h: int, w: int, stride: int) -> tuple[int, int]:
    """Output height and width of a 3x3 convolution with padding 1.

    >>> conv_out_hw(224, 224, 2), conv_out_hw(7, 5, 1)
    ((112, 112), (7, 5))
    """
    return (h - 1) // stride + 1, (w - 1) // stride + 1


def conv2d_3x3(
    x: Array, packed: PackedConv, out: Array, stride: int = 1, epilogue: str = "none"
) -> Array:
    """``out = act(conv3x3(x, w, padding=1, stride) + bias)`` in NCHW; returns ``out``.

    x: f32[B, C_in, H, W]; out: C-contiguous f32[B, C_out, H_out, W_out] (`conv_out_hw`).

    >>> import numpy as np
    >>> p = pack_conv3x3(np.ones((1, 1, 3, 3), np.float32), np.float32([-1.0]))
    >>> conv2d_3x3(np.ones((1, 1, 3, 3), np.float32), p, np.empty((1, 1, 3, 3), np.float32),
    ...            epilogue="relu")[0, 0]
    array([[3., 5., 3.],
           [5., 8., 5.],
           [3., 5., 3.]], dtype=float32)
    """
    name = "conv2d_3x3"
    act_code(name, epilogue)  # an unknown epilogue raises here, with the known ones
    check_f32(name, "x", x)
    check_f32(name, "out", out, writable=True)
    if x.ndim != 4 or x.shape[1] != packed.c_in:
        raise NativeKernelError(
            f"{name}: x does not match the packed weights",
            expected=f"x: f32[B, {packed.c_in}, H, W]",
            found=f"x: {spec(x)}",
            fix=f"the weights were packed for {packed.c_in} input channels (NCHW layout)",
        )
    if stride not in (1, 2):
        raise NativeKernelError(
            f"{name}: unsupported stride",
            expected="stride 1 or 2",
            found=f"stride {stride}",
            fix="use the im2col path of the interpreter for other strides",
        )
    batch, _, h, w = x.shape
    ho, wo = conv_out_hw(h, w, stride)
    check_shape(name, "out", out, (batch, packed.c_out, ho, wo))
    check_c_contiguous(name, "out", out)
    if out.size:
        packed.kernel(stride, epilogue)(x, out)
    return out


@kernel
def _mean_rows(x2: Any, out1: Any, i0: int, i1: int) -> None:
    for i in range(i0, i1):
        row = x2[i]
        s = np.float32(0.0)
        for j in range(row.size):
            s += row[j]
        out1[i] = s / np.float32(row.size)


@parallel_kernel
def _mean_rows_parallel(x2: Any, out1: Any) -> None:
    rows = x2.shape[0]
    tasks = min(rows, 8)
    for t in prange(tasks):
        _mean_rows(x2, out1, t * rows // tasks, (t + 1) * rows // tasks)


def global_avg_pool(x: Array, out: Array) -> Array:
    """``out[b, c] = mean(x[b, c, :, :])``; returns ``out``.

    >>> import numpy as np
    >>> global_avg_pool(np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2),
    ...                 np.empty((1, 2), np.float32))
    array([[1.5, 5.5]], dtype=float32)
    """
    name = "global_avg_pool"
    check_f32(name, "x", x)
    check_f32(name, "out", out, writable=True)
    if x.ndim != 4:
        raise NativeKernelError(
            f"{name}: x must be an NCHW batch",
            expected="x: f32[B, C, H, W]",
            found=f"x: {spec(x)}",
            fix="add the missing axes with x[None] or x.reshape(B, C, H, W)",
        )
    check_shape(name, "out", out, x.shape[:2])
    check_c_contiguous(name, "out", out)
    x2 = np.ascontiguousarray(x).reshape(x.shape[0] * x.shape[1], -1)
    out1 = out.reshape(-1)
    if use_threads(x.size, 1 << 16):
        _mean_rows_parallel(x2, out1)
    else:
        _mean_rows(x2, out1, 0, x2.shape[0])
    return out


__all__ = ["PackedConv", "conv2d_3x3", "conv_out_hw", "global_avg_pool", "pack_conv3x3"]
