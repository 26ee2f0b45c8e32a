"""Dot-product micro-kernels: a block of ``x @ wt.T`` with both operands K-contiguous.

Every output is a dot product over K. A 4x2 block keeps eight scalar accumulators that
LLVM's loop vectorizer turns into 8-wide registers: 8 FMAs per 6 loads, the partial sums
across lanes reduced once at the end. (The usual BLAS micro-kernel, a broadcast of x times a
panel of w, needs LLVM's SLP vectorizer, which numba leaves off: in numba it compiles to
scalar code.) Used by the dense layers and the stride-2 convolution.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shapevm.jit.native._core import kernel

_Z = np.float32(0.0)


@kernel
def _mk4x2(x: Any, wt: Any, out: Any, i: int, j: int, n: int) -> None:
    a0 = x[i]
    a1 = x[i + 1]
    a2 = x[i + 2]
    a3 = x[i + 3]
    b0 = wt[j]
    b1 = wt[j + 1]
    s00 = _Z
    s01 = _Z
    s10 = _Z
    s11 = _Z
    s20 = _Z
    s21 = _Z
    s30 = _Z
    s31 = _Z
    for k in range(a0.size):
        w0 = b0[k]
        w1 = b1[k]
        s00 += a0[k] * w0
        s01 += a0[k] * w1
        s10 += a1[k] * w0
        s11 += a1[k] * w1
        s20 += a2[k] * w0
        s21 += a2[k] * w1
        s30 += a3[k] * w0
        s31 += a3[k] * w1
    out[i, j] = s00
    out[i + 1, j] = s10
    out[i + 2, j] = s20
    out[i + 3, j] = s30
    if j + 1 < n:
        out[i, j + 1] = s01
        out[i + 1, j + 1] = s11
        out[i + 2, j + 1] = s21
        out[i + 3, j + 1] = s31


@kernel
def _mk3x2(x: Any, wt: Any, out: Any, i: int, j: int, n: int) -> None:
    a0 = x[i]
    a1 = x[i + 1]
    a2 = x[i + 2]
    b0 = wt[j]
    b1 = wt[j + 1]
    s00 = _Z
    s01 = _Z
    s10 = _Z
    s11 = _Z
    s20 = _Z
    s21 = _Z
    for k in range(a0.size):
        w0 = b0[k]
        w1 = b1[k]
        s00 += a0[k] * w0
        s01 += a0[k] * w1
        s10 += a1[k] * w0
        s11 += a1[k] * w1
        s20 += a2[k] * w0
        s21 += a2[k] * w1
    out[i, j] = s00
    out[i + 1, j] = s10
    out[i + 2, j] = s20
    if j + 1 < n:
        out[i, j + 1] = s01
        out[i + 1, j + 1] = s11
        out[i + 2, j + 1] = s21


@kernel
def _mk2x4(x: Any, wt: Any, out: Any, i: int, j: int, n: int) -> None:
    a0 = x[i]
    a1 = x[i + 1]
    b0 = wt[j]
    b1 = wt[j + 1]
    b2 = wt[j + 2]
    b3 = wt[j + 3]
    s00 = _Z
    s01 = _Z
    s02 = _Z
    s03 = _Z
    s10 = _Z
    s11 = _Z
    s12 = _Z
    s13 = _Z
    for k in range(a0.size):
        u = a0[k]
        v = a1[k]
        s00 += u * b0[k]
        s01 += u * b1[k]
        s02 += u * b2[k]
        s03 += u * b3[k]
        s10 += v * b0[k]
        s11 += v * b1[k]
        s12 += v * b2[k]
        s13 += v * b3[k]
    _store4(out, i, j, n, s00, s01, s02, s03)
    _store4(out, i + 1, j, n, s10, s11, s12, s13)


@kernel
def _mk1x4(x: Any, wt: Any, out: Any, i: int, j: int, n: int) -> None:
    a = x[i]
    b0 = wt[j]
    b1 = wt[j + 1]
    b2 = wt[j + 2]
    b3 = wt[j + 3]
    s0 = _Z
    s1 = _Z
    s2 = _Z
    s3 = _Z
    for k in range(a.size):
        u = a[k]
        s0 += u * b0[k]
        s1 += u * b1[k]
        s2 += u * b2[k]
        s3 += u * b3[k]
    _store4(out, i, j, n, s0, s1, s2, s3)


@kernel
def _mk1x8(x: Any, wt: Any, out: Any, i: int, j: int, n: int) -> None:
    # One row is a matrix-vector product, bound by streaming wt: eight columns per pass
    # halve the passes over x and the loop overhead of _mk1x4 (10-15% per core).
    a = x[i]
    b0, b1, b2, b3 = wt[j], wt[j + 1], wt[j + 2], wt[j + 3]
    b4, b5, b6, b7 = wt[j + 4], wt[j + 5], wt[j + 6], wt[j + 7]
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = _Z
    for k in range(a.size):
        u = a[k]
        s0 += u * b0[k]
        s1 += u * b1[k]
        s2 += u * b2[k]
        s3 += u * b3[k]
        s4 += u * b4[k]
        s5 += u * b5[k]
        s6 += u * b6[k]
        s7 += u * b7[k]
    _store4(out, i, j, n, s0, s1, s2, s3)
    if j + 4 < n:
        _store4(out, i, j + 4, n, s4, s5, s6, s7)


@kernel
def _store4(out: Any, i: int, j: int, n: int, s0: Any, s1: Any, s2: Any, s3: Any) -> None:
    out[i, j] = s0
    if j + 1 < n:
        out[i, j + 1] = s1
    if j + 2 < n:
        out[i, j + 2] = s2
    if j + 3 < n:
        out[i, j + 3] = s3


@kernel
def matmul_nt(x: Any, wt: Any, out: Any, j0: int, j1: int) -> None:
    """``out[i, j] = sum_k x[i, k] * wt[j, k]`` for every row ``i`` and ``j0 <= j < j1``.

    ``j0`` is a multiple of 8 and ``wt`` has rows up to the next multiple of 8 past ``j1``
    (zeros are fine): blocks read them but store only columns below ``j1``. Rows of ``x`` go
    in blocks of 4 (outer loop, so that they stay in L1 while the columns' rows of ``wt``
    stream from L2); the 1 to 3 rows left over use narrower blocks.
    """
    m = x.shape[0]
    n = j1
    m4 = m - m % 4
    for i in range(0, m4, 4):
        for j in range(j0, j1, 2):
            _mk4x2(x, wt, out, i, j, n)
    rest = m - m4
    if rest == 3:
        for j in range(j0, j1, 2):
            _mk3x2(x, wt, out, m4, j, n)
    elif rest == 2:
        for j in range(j0, j1, 4):
            _mk2x4(x, wt, out, m4, j, n)
    elif rest == 1:
        for j in range(j0, j1, 8):
            _mk1x8(x, wt, out, m4, j, n)
