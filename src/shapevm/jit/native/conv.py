"""3x3 convolution (NCHW, padding 1, stride 1 or 2) with bias and activation fused, and
global average pooling.

NumPy's usual route is im2col (a 9x copy of the input) and one big matrix product, then bias
and activation as two more passes. Two kernels here, chosen by what was faster per core
(CPU time, one thread, AMD EPYC with AVX2):

Direct rows, for stride 1 and fewer than `DIRECT_MAX_C_IN` input channels. The input is
copied once with a zero border, ``xp[B, C, H+2, W+2]``. An output row of one channel is a
sum over input channels of nine shifted input rows times nine scalar weights: one loop over
the row that LLVM vectorizes with the nine weights in registers, no patches, no horizontal
sums. 37-44 GFLOP/s whatever the channel count: 5x NumPy at 3 input channels (where
dot products of 27 taps are mostly overhead), still ahead of the patch kernel at 16.

Patch tiles, for stride 2 and for many input channels (55 GFLOP/s at 32 channels, stride
1, as fast as OpenBLAS on im2col, without its 9x copy). The input is copied once into a
zero-bordered channels-last buffer ``xp[B, H+2, W+2, C]``, so that the patch of an output
pixel is nine contiguous runs of C floats. Tiles of `TILE` output pixels are then
independent tasks:

1. gather the tile's patches into scratch ``[TILE, R]`` (R = 9 C, the K of the product);
2. run the dot micro-kernels with the packed weights ``[C_out, R]`` as rows and the
   patches as columns, which writes ``out[b, co, pixel]`` in NCHW order directly;
3. add the bias and apply the activation to each channel's run of the tile, still in cache.

The patch scratch (72 KiB at C = 32) stays in L2, unlike im2col's whole-image matrix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numba import prange

from shapevm.jit.native._core import (
    NativeKernelError,
    act_code,
    act_vec_inplace,
    check_c_contiguous,
    check_f32,
    check_shape,
    kernel,
    parallel_kernel,
    spec,
)
from shapevm.jit.native._dot import matmul_nt
from shapevm.jit.native._threads import use_threads

Array = np.ndarray[Any, Any]

TILE: Final = 64
"""Output pixels per patch task: patches of 64 x 9 C floats fit L2 next to the weights."""
ROWS: Final = 4
"""Output rows per direct task."""
DIRECT_MAX_C_IN: Final = 24
"""Below this many input channels stride-1 convolutions use the direct kernel (measured
crossover: direct 37 vs patches 25 GFLOP/s at 16 channels, 44 vs 55 at 32)."""
PARALLEL_MIN_MACS: Final = 1 << 20
"""Smaller convolutions run on the calling thread; above, `entries.ThreadChoice` measures."""


@dataclass(frozen=True, eq=False)
class PackedConv:
    """Weights of a 3x3 convolution laid out once for `conv2d_3x3`.

    ``wt`` is f32[c_out, r_padded] with ``wt[co, (ky * 3 + kx) * c_in + ci] = w[co, ci, ky, kx]``
    (zeros past 9 c_in, up to a multiple of 8 so that the dot loops have no scalar tail);
    ``bias`` is f32[c_out]; ``w`` is the weight in its own layout, for the direct kernel.
    """

    wt: Array
    bias: Array
    w: Array
    c_in: int
    c_out: int


def pack_conv3x3(w: Array, bias: Array | None = None) -> PackedConv:
    """Pack a PyTorch-layout weight ``w: f32[C_out, C_in, 3, 3]`` and ``bias: f32[C_out]``.

    >>> import numpy as np
    >>> p = pack_conv3x3(np.ones((8, 3, 3, 3), np.float32))
    >>> p.wt.shape, p.c_in, p.c_out
    ((8, 32), 3, 8)
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
    r = 9 * c_in
    wt = np.zeros((c_out, -(-r // 8) * 8), np.float32)
    wt[:, :r] = w.transpose(0, 2, 3, 1).reshape(c_out, r)
    b = np.zeros(c_out, np.float32)
    if bias is not None:
        check_f32("pack_conv3x3", "bias", bias)
        check_shape("pack_conv3x3", "bias", bias, (c_out,))
        b[:] = bias
    return PackedConv(wt=wt, bias=b, w=np.ascontiguousarray(w), c_in=c_in, c_out=c_out)


@kernel
def _pad_plane(x: Any, xp: Any, b: int, c: int) -> None:
    """Channel ``c`` of image ``b`` into ``xp[b, c]`` with a zero border of 1."""
    h, w = x.shape[2], x.shape[3]
    dst = xp[b, c]
    for i in range(w + 2):
        dst[0, i] = 0.0
        dst[h + 1, i] = 0.0
    for y in range(h):
        d = dst[y + 1]
        src = x[b, c, y]
        d[0] = 0.0
        d[w + 1] = 0.0
        for i in range(w):
            d[i + 1] = src[i]


@kernel
def _direct_rows(
    xp: Any, w: Any, bias: Any, out: Any, b: int, oy0: int, oy1: int, act: int
) -> None:
    """Output rows ``oy0 <= oy < oy1`` of image ``b``, every channel (stride 1)."""
    c_out, c_in = w.shape[0], w.shape[1]
    wo = out.shape[3]
    for co in range(c_out):
        for oy in range(oy0, oy1):
            o = out[b, co, oy]
            for i in range(wo):
                o[i] = 0.0
            for ci in range(c_in):
                r0 = xp[b, ci, oy]
                r1 = xp[b, ci, oy + 1]
                r2 = xp[b, ci, oy + 2]
                k = w[co, ci]
                w00, w01, w02 = k[0, 0], k[0, 1], k[0, 2]
                w10, w11, w12 = k[1, 0], k[1, 1], k[1, 2]
                w20, w21, w22 = k[2, 0], k[2, 1], k[2, 2]
                for i in range(wo):
                    o[i] += (
                        w00 * r0[i]
                        + w01 * r0[i + 1]
                        + w02 * r0[i + 2]
                        + w10 * r1[i]
                        + w11 * r1[i + 1]
                        + w12 * r1[i + 2]
                        + w20 * r2[i]
                        + w21 * r2[i + 1]
                        + w22 * r2[i + 2]
                    )
            act_vec_inplace(o, bias[co], act)


@kernel
def _direct_serial(x: Any, xp: Any, w: Any, bias: Any, out: Any, act: int) -> None:
    batch, c_in = x.shape[0], x.shape[1]
    for t in range(batch * c_in):
        _pad_plane(x, xp, t // c_in, t % c_in)
    ho = out.shape[2]
    blocks = -(-ho // ROWS)
    for t in range(batch * blocks):
        oy0 = (t % blocks) * ROWS
        _direct_rows(xp, w, bias, out, t // blocks, oy0, min(oy0 + ROWS, ho), act)


@parallel_kernel
def _direct_parallel(x: Any, xp: Any, w: Any, bias: Any, out: Any, act: int) -> None:
    batch, c_in = x.shape[0], x.shape[1]
    for t in prange(batch * c_in):
        _pad_plane(x, xp, t // c_in, t % c_in)
    ho = out.shape[2]
    blocks = -(-ho // ROWS)
    for t in prange(batch * blocks):
        oy0 = (t % blocks) * ROWS
        _direct_rows(xp, w, bias, out, t // blocks, oy0, min(oy0 + ROWS, ho), act)


@kernel
def _pad_row(x: Any, xp: Any, b: int, y: int) -> None:
    """Row ``y`` of the zero-bordered channels-last copy ``xp`` of image ``b``."""
    c_in, h, w = x.shape[1:]
    row = xp[b, y]
    if y == 0 or y == h + 1:
        for i in range(w + 2):
            for c in range(c_in):
                row[i, c] = 0.0
        return
    for c in range(c_in):
        row[0, c] = 0.0
        row[w + 1, c] = 0.0
        src = x[b, c, y - 1]
        for i in range(w):
            row[i + 1, c] = src[i]


@kernel
def _conv_task(
    xp: Any, wt: Any, bias: Any, out2: Any, b: int, p0: int, stride: int, wo: int, act: int
) -> None:
    """Output pixels ``p0 <= p < p0 + TILE`` (flattened y, x) of image ``b``, all channels.

    ``out2`` is ``out[b]`` as [C_out, H_out * W_out].
    """
    c_in = xp.shape[3]
    p1 = min(p0 + TILE, out2.shape[1])
    n = p1 - p0
    patches = np.empty((TILE, wt.shape[1]), np.float32)
    r = 9 * c_in
    for p in range(TILE):
        prow = patches[p]
        if p >= n:
            # Read by the last blocks of the tile, never stored: zeros keep them harmless.
            for c in range(prow.size):
                prow[c] = 0.0
            continue
        oy = (p0 + p) // wo
        ox = (p0 + p) % wo
        for ky in range(3):
            src_row = xp[b, oy * stride + ky]
            for kx in range(3):
                src = src_row[ox * stride + kx]
                base = (ky * 3 + kx) * c_in
                for c in range(c_in):
                    prow[base + c] = src[c]
        for c in range(r, prow.size):
            prow[c] = 0.0
    matmul_nt(wt, patches, out2[:, p0:p1], 0, n)
    for co in range(wt.shape[0]):
        act_vec_inplace(out2[co, p0:p1], bias[co], act)


@kernel
def _conv_serial(x: Any, xp: Any, wt: Any, bias: Any, out: Any, stride: int, act: int) -> None:
    batch, _, h, _ = x.shape
    c_out, ho, wo = out.shape[1:]
    for t in range(batch * (h + 2)):
        _pad_row(x, xp, t // (h + 2), t % (h + 2))
    tiles = -(-(ho * wo) // TILE)
    for t in range(batch * tiles):
        b = t // tiles
        out2 = out[b].reshape(c_out, ho * wo)
        _conv_task(xp, wt, bias, out2, b, (t % tiles) * TILE, stride, wo, act)


@parallel_kernel
def _conv_parallel(x: Any, xp: Any, wt: Any, bias: Any, out: Any, stride: int, act: int) -> None:
    batch, _, h, _ = x.shape
    c_out, ho, wo = out.shape[1:]
    for t in prange(batch * (h + 2)):
        _pad_row(x, xp, t // (h + 2), t % (h + 2))
    tiles = -(-(ho * wo) // TILE)
    for t in prange(batch * tiles):
        b = t // tiles
        out2 = out[b].reshape(c_out, ho * wo)
        _conv_task(xp, wt, bias, out2, b, (t % tiles) * TILE, stride, wo, act)


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
    act = act_code(name, epilogue)
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
    x = np.ascontiguousarray(x)
    parallel = use_threads(batch * ho * wo * packed.c_out * 9 * packed.c_in, PARALLEL_MIN_MACS)
    if stride == 1 and packed.c_in < DIRECT_MAX_C_IN:
        xp = np.empty((batch, packed.c_in, h + 2, w + 2), np.float32)
        direct = _direct_parallel if parallel else _direct_serial
        direct(x, xp, packed.w, packed.bias, out, act)
    else:
        xp = np.empty((batch, h + 2, w + 2, packed.c_in), np.float32)
        tiles = _conv_parallel if parallel else _conv_serial
        tiles(x, xp, packed.wt, packed.bias, out, stride, act)
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
