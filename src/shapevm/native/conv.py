"""2-D convolution and pooling in shapevm's C kernel library, on NCHW float32 arrays.

A convolution's weights (PyTorch and ONNX layout ``[cout, cin/groups, kh, kw]``) are packed
once with their stride, padding, dilation and groups (`pack_conv2d`); `conv2d` then runs
``act(conv(x, w) + bias) + residual`` in one pass over any batch and image size. Inside,
16 channels of a pixel are kept together (NCHW16c) and every block of 16 output channels
is an indirect matrix product on the library's micro-kernel; a 1x1 convolution is a plain
one. `conv2d_blocked` returns that blocked layout itself (``[N, ceil(C/16), H, W, 16]``,
channels past C zero) and both take it as input, so that consecutive convolutions need no
reorder between them; `to_blocked` and `from_blocked` convert elsewhere.

>>> import numpy as np
>>> from shapevm import native
>>> w = np.ones((2, 1, 3, 3), np.float32)                 # 2 output channels, one input
>>> layer = native.pack_conv2d(w, np.float32([0.0, -4.0]), padding=1)
>>> x = np.ones((1, 1, 3, 3), np.float32)
>>> native.conv2d(x, layer, activation="relu")[0]        # 3x3 sums of ones, bias, relu
array([[[4., 6., 4.],
        [6., 9., 6.],
        [4., 6., 4.]],
<BLANKLINE>
       [[0., 2., 0.],
        [2., 5., 2.],
        [0., 2., 0.]]], dtype=float32)
>>> native.max_pool2d(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4), 2)
array([[[[ 5.,  7.],
         [13., 15.]]]], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import numpy as np

from shapevm import _native
from shapevm.bytecode.errors import format_message

Activation = str | tuple[str, float]
"""An activation of a fused epilogue: a name of `shapevm.native.ACTIVATIONS`, or
``("leaky_relu", slope)``."""

Array = np.ndarray[Any, Any]
IntOrInts = int | Sequence[int]

NativeKernelError = _native.NativeKernelError
PackedConv = _native.PackedConv

BLOCK: Final = 16
"""Channels per block of the blocked layout ``[N, ceil(C/16), H, W, 16]``."""


def _refuse(kernel: str, what: str, *, expected: str, found: str, fix: str) -> Exception:
    """A `NativeKernelError` laid out and annotated as the C entry points' are."""
    err = NativeKernelError(
        format_message(f"{kernel}: {what}", expected=expected, found=found, fix=fix)
    )
    err.kernel, err.what, err.expected, err.found, err.fix = kernel, what, expected, found, fix
    return err


def _ints(kernel: str, name: str, value: IntOrInts, sizes: tuple[int, ...]) -> tuple[int, ...]:
    """``value`` as ``sizes[-1]`` integers: one int for all, or a sequence of one of
    ``sizes``' lengths (a pair ``(h, w)`` of a padding means ``(h, h, w, w)``)."""
    items: tuple[Any, ...] = (value,) if not isinstance(value, Sequence) else tuple(value)
    if all(isinstance(v, int | np.integer) for v in items) and len(items) in (1, *sizes):
        if len(items) == 1:
            return tuple(int(items[0]) for _ in range(sizes[-1]))
        if len(items) == 2 and sizes[-1] == 4:
            return (int(items[0]), int(items[0]), int(items[1]), int(items[1]))
        return tuple(int(v) for v in items)
    raise _refuse(
        kernel,
        f"{name} must be an int or {' or '.join(map(str, sizes))} ints",
        expected=f"{name}: an int or {sizes[-1]} ints"
        + (" (top, bottom, left, right), or (h, w)" if sizes[-1] == 4 else " (h, w)"),
        found=f"{name}={value!r}",
        fix=f"pass {name} as integers",
    )


def pack_conv2d(
    w: Array,
    bias: Array | None = None,
    *,
    stride: IntOrInts = 1,
    padding: IntOrInts = 0,
    dilation: IntOrInts = 1,
    groups: int = 1,
) -> PackedConv:
    """Lay out a convolution's constant weight ``w: f32[cout, cin/groups, kh, kw]`` (and
    ``bias: f32[cout]``) once for `conv2d` and `conv2d_blocked`, with its geometry:
    ``stride`` and ``dilation`` (an int or ``(h, w)``), zero ``padding`` (an int, ``(h,
    w)``, or ``(top, bottom, left, right)``) and ``groups`` (depthwise when ``groups ==
    cin == cout``).

    >>> p = pack_conv2d(np.ones((8, 4, 3, 3), np.float32), stride=2, padding=(1, 0))
    >>> p.cin, p.cout, p.kernel, p.stride, p.padding
    (4, 8, (3, 3), (2, 2), (1, 1, 0, 0))
    """
    k = "pack_conv2d"
    return _native.pack_conv2d(
        w,
        bias,
        _ints(k, "stride", stride, (2,)),
        _ints(k, "padding", padding, (2, 4)),
        _ints(k, "dilation", dilation, (2,)),
        groups,
    )


def conv2d(
    x: Array,
    packed: PackedConv,
    *,
    activation: Activation = "none",
    residual: Array | None = None,
    out: Array | None = None,
    threads: int = 0,
    residual_first: bool = False,
) -> Array:
    """``act(conv(x, w) + bias) + residual`` for ``x: f32[N, cin, H, W]`` (C-contiguous;
    or blocked, ``[N, ceil(cin/16), H, W, 16]``), giving ``f32[N, cout, OH, OW]``.

    ``activation`` is an `Activation` (a name of `shapevm.native.ACTIVATIONS`, or
    ``("leaky_relu", slope)``); ``residual`` has the output's
    shape and may be ``out`` itself; ``out`` receives the result when given. ``threads``:
    at most this many (0: the pool's size; small convolutions run on the calling thread).
    ``residual_first=True`` adds the residual before the activation, ``act(conv(x, w) +
    bias + residual)``, as a ResNet block ends.

    >>> x = np.ones((1, 1, 3, 3), np.float32)
    >>> p = pack_conv2d(np.ones((1, 1, 1, 1), np.float32))
    >>> r = np.full((1, 1, 3, 3), -3.0, np.float32)
    >>> float(conv2d(x, p, activation="relu", residual=r)[0, 0, 0, 0])
    -2.0
    >>> float(conv2d(x, p, activation="relu", residual=r, residual_first=True)[0, 0, 0, 0])
    0.0
    """
    return _native.conv2d(x, packed, out, residual, activation, threads, residual_first)


def conv2d_blocked(
    x: Array,
    packed: PackedConv,
    *,
    activation: Activation = "none",
    residual: Array | None = None,
    out: Array | None = None,
    threads: int = 0,
    residual_first: bool = False,
) -> Array:
    """`conv2d` giving the blocked layout ``f32[N, ceil(cout/16), OH, OW, 16]`` (as are
    ``residual`` and ``out``), so that the next convolution reads it as it is; ``x`` is
    NCHW (an image starting a chain) or blocked.

    >>> x = np.random.default_rng(0).standard_normal((1, 3, 5, 5)).astype(np.float32)
    >>> p = pack_conv2d(np.ones((20, 3, 3, 3), np.float32), padding=1)
    >>> y = conv2d_blocked(x, p)
    >>> y.shape, bool(np.allclose(from_blocked(y, 20), conv2d(x, p), atol=1e-5))
    ((1, 2, 5, 5, 16), True)
    >>> q = pack_conv2d(np.ones((4, 20, 1, 1), np.float32))
    >>> conv2d(y, q).shape                                   # blocked in, NCHW out
    (1, 4, 5, 5)
    """
    return _native.conv2d_blocked(x, packed, out, residual, activation, threads, residual_first)


def to_blocked(x: Array, *, out: Array | None = None, threads: int = 0) -> Array:
    """``x: f32[N, C, H, W]`` in the blocked layout ``f32[N, ceil(C/16), H, W, 16]``,
    channels past C zero.

    >>> to_blocked(np.ones((2, 20, 3, 4), np.float32)).shape
    (2, 2, 3, 4, 16)
    """
    return _native.to_blocked(x, out, threads)


def from_blocked(x: Array, channels: int, *, out: Array | None = None, threads: int = 0) -> Array:
    """A blocked ``x: f32[N, ceil(channels/16), H, W, 16]`` back to ``f32[N, channels, H,
    W]``.

    >>> x = np.arange(40, dtype=np.float32).reshape(1, 20, 2, 1)
    >>> bool((from_blocked(to_blocked(x), 20) == x).all())
    True
    """
    return _native.from_blocked(x, channels, out, threads)


def _pool(
    kind: str,
    x: Array,
    kernel: IntOrInts,
    stride: IntOrInts | None,
    padding: IntOrInts,
    out: Array | None,
    threads: int,
) -> Array:
    k = kind.replace("_exclude_pad", "") + "_pool2d"
    size = _ints(k, "kernel", kernel, (2,))
    step = size if stride is None else _ints(k, "stride", stride, (2,))
    return _native.pool2d(x, kind, size, step, _ints(k, "padding", padding, (2, 4)), out, threads)


def max_pool2d(
    x: Array,
    kernel: IntOrInts,
    *,
    stride: IntOrInts | None = None,
    padding: IntOrInts = 0,
    out: Array | None = None,
    threads: int = 0,
) -> Array:
    """The maximum of each ``kernel`` window of the last two axes of ``x: f32[N, C, H, W]``
    (or ``[C, H, W]``), windows ``stride`` apart (default: the kernel), the padding never
    chosen (each padding at most half its window, as PyTorch and the op table require).
    NaN wins, as in `numpy.maximum`.
    """
    return _pool("max", x, kernel, stride, padding, out, threads)


def avg_pool2d(
    x: Array,
    kernel: IntOrInts,
    *,
    stride: IntOrInts | None = None,
    padding: IntOrInts = 0,
    count_include_pad: bool = True,
    out: Array | None = None,
    threads: int = 0,
) -> Array:
    """The mean of each ``kernel`` window (zero padding), divided by the whole window, or
    with ``count_include_pad=False`` by its elements inside the input.

    >>> x = np.ones((1, 1, 2, 2), np.float32)
    >>> avg_pool2d(x, 2, stride=1, padding=1)[0, 0]
    array([[0.25, 0.5 , 0.25],
           [0.5 , 1.  , 0.5 ],
           [0.25, 0.5 , 0.25]], dtype=float32)
    >>> avg_pool2d(x, 2, stride=1, padding=1, count_include_pad=False)[0, 0, 0]
    array([1., 1., 1.], dtype=float32)
    """
    kind = "avg" if count_include_pad else "avg_exclude_pad"
    return _pool(kind, x, kernel, stride, padding, out, threads)


def global_avg_pool(
    x: Array, *, keepdims: bool = False, out: Array | None = None, threads: int = 0
) -> Array:
    """The mean over the pixels of each channel of ``x: f32[N, C, H, W]``: ``f32[N, C]``,
    or ``[N, C, 1, 1]`` with ``keepdims`` (``out`` is then ``[N, C]`` or ``[N, C, 1, 1]``).

    >>> global_avg_pool(np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2))
    array([[1.5, 5.5]], dtype=float32)
    """
    y = _native.global_avg_pool(x, out, threads)
    return y.reshape(*y.shape, 1, 1) if keepdims and y.ndim == 2 else y


def global_avg_pool_blocked(
    x: Array, channels: int, *, out: Array | None = None, threads: int = 0
) -> Array:
    """`global_avg_pool` of a blocked ``x: f32[N, ceil(channels/16), H, W, 16]``:
    ``f32[N, channels]`` (``out`` may also be ``[N, channels, 1, 1]``)."""
    if channels < 1:
        raise _refuse(
            "global_avg_pool",
            "channels must be positive",
            expected="channels >= 1",
            found=f"channels={channels}",
            fix="pass the channel count of the NCHW tensor x was made from",
        )
    return _native.global_avg_pool(x, out, threads, channels)


__all__ = [
    "BLOCK",
    "PackedConv",
    "avg_pool2d",
    "conv2d",
    "conv2d_blocked",
    "from_blocked",
    "global_avg_pool",
    "global_avg_pool_blocked",
    "max_pool2d",
    "pack_conv2d",
    "to_blocked",
]
