"""Kernel variants for the CPU, with the shapes each applies to and a cost estimate.

Every variant computes exactly what the op table's reference kernel computes; they differ
in how. For ``conv2d``:

- ``im2col_gemm``: any convolution. The windows become rows of a matrix and one batched
  GEMM per chunk of images does the rest; the column matrix is built a chunk at a time so
  its memory stays under `WORKSPACE_ELEMENTS`.
- ``pointwise_1x1``: a 1x1 kernel, stride 1, no padding, one group: a single matmul over
  channels, with no copy of the input at all.
- ``depthwise``: one input channel per group (``groups == C``): per kernel tap, a strided
  multiply-add over the whole batch; GEMMs with an inner dimension of 1 waste BLAS.
- ``direct``: any convolution, one GEMM per kernel tap accumulated into the output, so the
  workspace is one shifted copy of the input instead of KH*KW of them.

Costs are rough seconds from a simple machine model (`Machine`): BLAS throughput that falls
with a short inner dimension, a bandwidth for strided copies, a fixed cost per NumPy call.
They only need to rank the variants, which the scheduler's tests pin on typical shapes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from shapevm.ops.table_nn import compute_dtype, conv2d_im2col, finish_conv, pad_hw

Array = np.ndarray[Any, Any]
Shapes = Sequence[tuple[int, ...]]
Attrs = Mapping[str, Any]

WORKSPACE_ELEMENTS = 1 << 22  # column-matrix elements im2col_gemm builds at once (16 MiB f32)
DEPTHWISE_BLOCK = 1 << 16  # output elements depthwise accumulates at once (256 KiB f32)
IM2COL_SPILL = 1 << 26  # column elements of one image past which im2col_gemm costs extra


@dataclass(frozen=True, slots=True)
class Machine:
    """Throughputs of the cost model, per second (one core of a current x86 server)."""

    gemm_flops: float = 5e10  # BLAS on long inner dimensions
    gemm_half_k: float = 32.0  # inner dimension at which BLAS reaches half its peak
    stream_elements: float = 2e9  # contiguous reads of GEMM operands
    copy_elements: float = 1e9  # strided gathers (im2col, taps)
    tap_elements: float = 1e9  # multiply-adds of a depthwise tap on cached blocks
    call: float = 4e-6  # fixed cost of one NumPy call

    def gemm(self, m: int, n: int, k: int) -> float:
        """``[m, k] @ [k, n]``: the flops at a rate that falls with short ``k``, plus reading
        the operands (which dominates when one side is thin, as in grouped convolutions)."""
        flops = 2.0 * m * n * k / (self.gemm_flops * k / (k + self.gemm_half_k))
        return flops + (m * k + k * n + m * n) / self.stream_elements


MACHINE = Machine()


@dataclass(frozen=True, slots=True)
class ConvGeometry:
    """The sizes of one conv2d call, from concrete operand shapes and attributes."""

    n: int
    c: int
    o: int
    groups: int
    kh: int
    kw: int
    oh: int
    ow: int

    @classmethod
    def of(cls, shapes: Shapes, attrs: Attrs) -> ConvGeometry:
        n, c, h, w = shapes[0]
        o, _, kh, kw = shapes[1]
        (sh, sw), (dh, dw) = attrs["stride"], attrs["dilation"]
        pt, pb, pl, pr = attrs["padding"]
        oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
        ow = (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
        return cls(n, c, o, attrs["groups"], kh, kw, max(oh, 0), max(ow, 0))

    @property
    def pixels(self) -> int:
        return self.n * self.oh * self.ow

    @property
    def taps(self) -> int:
        return self.kh * self.kw


# im2col_gemm ---------------------------------------------------------------------------


def conv2d_im2col_gemm(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    cg, kh, kw = np.shape(args[1])[1:]
    return (conv2d_im2col(args, attrs, max_cols=WORKSPACE_ELEMENTS // max(cg * kh * kw, 1)),)


def im2col_gemm_cost(shapes: Shapes, attrs: Attrs) -> float:
    """Gather every window once, then GEMMs; one image's columns past `IM2COL_SPILL`
    elements are charged 4 times over: that much memory is better left to ``direct``."""
    g = ConvGeometry.of(shapes, attrs)
    k = g.c // g.groups * g.taps
    gather = g.pixels * g.c * g.taps / MACHINE.copy_elements
    gemm = g.groups * MACHINE.gemm(g.o // g.groups, g.pixels, k)
    spill = max(0, g.oh * g.ow * k - IM2COL_SPILL) * g.groups * g.n
    chunks = -(-g.pixels * k // WORKSPACE_ELEMENTS) if k else 1
    return gather + gemm + 4 * spill / MACHINE.copy_elements + MACHINE.call * (15 + 3 * chunks)


# pointwise_1x1 -------------------------------------------------------------------------


def pointwise_applies(shapes: Shapes, attrs: Attrs) -> bool:
    kh, kw = shapes[1][2:]
    return (
        (kh, kw) == (1, 1)
        and tuple(attrs["stride"]) == (1, 1)
        and not any(attrs["padding"])
        and attrs["groups"] == 1
    )


def conv2d_pointwise(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    x, w = np.asarray(args[0]), np.asarray(args[1])
    calc = compute_dtype(x.dtype)
    n, c, h, wd = x.shape
    wm = w.reshape(w.shape[0], c).astype(calc, copy=False)
    out = np.matmul(wm, x.reshape(n, c, h * wd).astype(calc, copy=False))  # [N, O, H*W]
    return (finish_conv(out.reshape(n, -1, h, wd), args, x.dtype),)


def pointwise_cost(shapes: Shapes, attrs: Attrs) -> float:
    g = ConvGeometry.of(shapes, attrs)
    return g.n * MACHINE.gemm(g.o, g.oh * g.ow, g.c) + MACHINE.call * 5


# depthwise -----------------------------------------------------------------------------


def depthwise_applies(shapes: Shapes, attrs: Attrs) -> bool:
    c, cg = shapes[0][1], shapes[1][1]
    return bool(attrs["groups"] == c and cg == 1)


def conv2d_depthwise(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    """Output channel ``o`` reads input channel ``o // mult`` (``mult = O / C``).

    Works on blocks of channels of one image whose output fits in cache, so the KH*KW
    multiply-adds of a block run on cached data instead of streaming through memory.
    """
    x, w = np.asarray(args[0]), np.asarray(args[1])
    calc = compute_dtype(x.dtype)
    n, c = x.shape[:2]
    o, _, kh, kw = w.shape
    mult = o // c
    xp = pad_hw(x, attrs["padding"], 0).astype(calc, copy=False)
    (sh, sw), (dh, dw) = attrs["stride"], attrs["dilation"]
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    wt = w.reshape(c, mult, kh, kw).astype(calc, copy=False)
    out = np.empty((n, c, mult, oh, ow), dtype=calc)
    per = max(1, DEPTHWISE_BLOCK // max(mult * oh * ow, 1))
    prod = np.empty((min(per, c), mult, oh, ow), dtype=calc)
    for b in range(n):
        for c0 in range(0, c, per):
            c1 = min(c, c0 + per)
            acc, tmp = out[b, c0:c1], prod[: c1 - c0]
            for i in range(kh):
                for j in range(kw):
                    r, q = i * dh, j * dw
                    tap = xp[
                        b,
                        c0:c1,
                        None,
                        r : r + sh * (oh - 1) + 1 : sh,
                        q : q + sw * (ow - 1) + 1 : sw,
                    ]
                    weight = wt[c0:c1, :, i, j, None, None]
                    if i == j == 0:
                        np.multiply(tap, weight, out=acc)
                    else:
                        acc += np.multiply(tap, weight, out=tmp)
    return (finish_conv(out.reshape(n, o, oh, ow), args, x.dtype),)


def depthwise_cost(shapes: Shapes, attrs: Attrs) -> float:
    """One multiply-add per output element and tap; strided taps read twice as slowly."""
    g = ConvGeometry.of(shapes, attrs)
    strided = 2.0 if tuple(attrs["stride"]) != (1, 1) else 1.0
    blocks = g.n * -(-g.o * g.oh * g.ow // (g.n * DEPTHWISE_BLOCK)) if g.n else 0
    return g.taps * g.pixels * g.o * strided / MACHINE.tap_elements + MACHINE.call * (
        6 + 2 * g.taps * blocks
    )


# direct --------------------------------------------------------------------------------


def conv2d_direct(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    """Sum over kernel taps of (weights of the tap) @ (input shifted by the tap)."""
    x, w = np.asarray(args[0]), np.asarray(args[1])
    calc = compute_dtype(x.dtype)
    groups = attrs["groups"]
    n = x.shape[0]
    o, cg, kh, kw = w.shape
    xp = pad_hw(x, attrs["padding"], 0)
    (sh, sw), (dh, dw) = attrs["stride"], attrs["dilation"]
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    wt = w.reshape(groups, o // groups, cg, kh, kw).astype(calc, copy=False)
    acc = np.zeros((n, groups, o // groups, oh * ow), dtype=calc)
    for i in range(kh):
        for j in range(kw):
            r, q = i * dh, j * dw
            tap = xp[:, :, r : r + sh * (oh - 1) + 1 : sh, q : q + sw * (ow - 1) + 1 : sw]
            cols = tap.astype(calc, order="C").reshape(n, groups, cg, oh * ow)  # the one copy
            acc += np.matmul(wt[:, :, :, i, j], cols)
    return (finish_conv(acc.reshape(n, o, oh, ow), args, x.dtype),)


def direct_cost(shapes: Shapes, attrs: Attrs) -> float:
    """Per tap: one shifted copy of the input, GEMMs with inner dimension C/groups, and
    accumulating into the output."""
    g = ConvGeometry.of(shapes, attrs)
    cg, og = g.c // g.groups, g.o // g.groups
    per_tap = (
        g.pixels * g.c / MACHINE.copy_elements
        + g.n * g.groups * MACHINE.gemm(og, g.oh * g.ow, cg)
        + g.pixels * g.o / MACHINE.stream_elements
        + MACHINE.call * 4
    )
    return g.taps * per_tap + MACHINE.call * 6
