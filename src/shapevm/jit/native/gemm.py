"""Small-batch matrix products against constant weights, packed once.

``y = act(x @ w + bias)`` for x: f32[M, K] (or [B, S, K]) and constant w: f32[K, N]. NumPy
hands each call to OpenBLAS, which repacks ``w`` every time; with few rows that repacking is
most of the work (W1 at b = 3: 0.69 ms in NumPy, 0.10 ms in ONNX Runtime, which packs once).

Layout. `pack_weights` stores ``w`` transposed, ``wt[j, :] = w[:, j]``: every output column is
a contiguous run of K floats, rows padded with zeros to a multiple of 8, 64-byte aligned,
which is what the dot-product micro-kernels of `_dot` read (why dot products and not the
BLAS-style broadcast panel: see there).

Epilogue. Bias and activation run over each finished tile of ``out`` while it is still in
cache, as one vectorized loop per activation (`_core.act_rows_inplace`).

Threads. Column chunks are independent; above `PARALLEL_MIN_MACS` multiply-adds they are
spread over numba's thread pool. For many rows BLAS's cache blocking wins: `choose_gemm`
names the faster path for a shape and `packed_matmul` takes it (``np.matmul`` into ``out``,
then the same fused epilogue).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np
from numba import prange

from shapevm.jit.native._core import (
    NativeKernelError,
    act_code,
    act_rows_inplace,
    check_c_contiguous,
    check_f32,
    check_shape,
    kernel,
    parallel_kernel,
    spec,
)
from shapevm.jit.native._dot import matmul_nt
from shapevm.jit.native._threads import pool_available, use_threads

F32 = np.ndarray[Any, np.dtype[np.float32]]

COLUMN_CHUNK: Final = 32
"""Columns per task: its weights (32 x K floats) stay in L2 while every row block uses them."""
PARALLEL_MIN_MACS: Final = 1 << 19
"""Below this many multiply-adds (~15 us on one core) a launch of the pool, even of spinning
workers (2-7 us, see `_threads`), saves too little; above, `entries.ThreadChoice` measures
which way is faster."""
BLAS_MIN_ROWS: Final = 32
"""From this many rows on, OpenBLAS's packing pays for itself on one core (see choose_gemm)."""
BLAS_MIN_ROWS_THREADED: Final = 8
"""The same when both cores are free: OpenBLAS's threads start cheaper than ours."""


@dataclass(frozen=True, eq=False)
class Packed:
    """Weights of ``x @ w + bias``, laid out once for `packed_matmul`.

    ``wt`` is f32[n_padded, k] (column j of ``w`` is row j, zero rows past ``n``); ``bias``
    is f32[n_padded] (zeros when the layer has none); ``w`` is a C-ordered copy of the
    weights for the BLAS path (OpenBLAS is 4-30% slower on the transposed view of ``wt``,
    so the layer keeps both: twice the weight memory).
    """

    wt: F32
    bias: F32
    w: F32
    k: int
    n: int
    has_bias: bool

    @property
    def nbytes(self) -> int:
        return int(self.wt.nbytes + self.bias.nbytes + self.w.nbytes)


def _aligned_zeros(shape: tuple[int, ...], align: int = 64) -> F32:
    count = int(np.prod(shape))
    raw = np.zeros(count * 4 + align, np.uint8)
    start = (-raw.ctypes.data) % align
    out: F32 = raw[start : start + count * 4].view(np.float32).reshape(shape)
    return out


def pack_weights(w: Any, bias: Any = None) -> Packed:
    """Pack constant weights ``w: f32[K, N]`` (the ``x @ w`` orientation) and ``bias: f32[N]``.

    >>> import numpy as np
    >>> p = pack_weights(np.ones((3, 5), np.float32), np.arange(5, dtype=np.float32))
    >>> p.k, p.n, p.wt.shape, p.bias.tolist()
    (3, 5, (8, 3), [0.0, 1.0, 2.0, 3.0, 4.0, 0.0, 0.0, 0.0])
    """
    check_f32("pack_weights", "w", w)
    if w.ndim != 2:
        raise NativeKernelError(
            "pack_weights: w must be a matrix",
            expected="w: f32[K, N] (x @ w orientation)",
            found=f"w: {spec(w)}",
            fix="pass a linear layer's weight [out, in] as weight.T",
        )
    k, n = w.shape
    n_pad = -(-n // 8) * 8
    wt = _aligned_zeros((n_pad, k))
    wt[:n] = w.T
    b = np.zeros(n_pad, np.float32)
    if bias is not None:
        check_f32("pack_weights", "bias", bias)
        check_shape("pack_weights", "bias", bias, (n,))
        b[:n] = bias
    return Packed(wt=wt, bias=b, w=np.ascontiguousarray(w), k=k, n=n, has_bias=bias is not None)


def choose_gemm(m: int, k: int, n: int) -> Literal["packed", "blas"]:
    """The faster path for ``[m, k] @ [k, n]`` now, on this kind of machine.

    Measured on 2 cores of an AMD EPYC (AVX2) at (K, N) in {(256, 1024), (1024, 1024),
    (1024, 256)}. On one core the packed kernels are 2.5-3.8x OpenBLAS at 3 rows, 1.2-1.6x
    at 8, 1.0-1.2x at 17 and 0.85-0.95x at 32: below 32 rows they are used whenever our
    thread pool would not get both cores (`_threads.pool_available`). With both cores free
    OpenBLAS's two threads win from 8 rows on (measured while our pool's workers slept
    between launches, ~0.1 ms per wake; not measured again since they spin briefly, see
    `_threads`), so the limit drops to 8. One row is a matrix-vector product that
    OpenBLAS's gemv does 5-20% faster than our kernel, reading the packed rows (w's
    columns) as they lie.

    >>> choose_gemm(1, 1024, 1024), choose_gemm(3, 1024, 1024), choose_gemm(256, 1024, 1024)
    ('blas', 'packed', 'blas')
    """
    limit = BLAS_MIN_ROWS_THREADED if pool_available() else BLAS_MIN_ROWS
    return "packed" if 1 < m < limit else "blas"


@kernel
def _chunk(x: Any, wt: Any, bias: Any, out: Any, act: int, j0: int, j1: int) -> None:
    j1 = min(j1, out.shape[1])
    matmul_nt(x, wt, out, j0, j1)
    act_rows_inplace(out, bias, act, j0, j1)


@kernel
def _gemm_serial(x: Any, wt: Any, bias: Any, out: Any, act: int) -> None:
    n_pad = wt.shape[0]
    for j0 in range(0, n_pad, COLUMN_CHUNK):
        _chunk(x, wt, bias, out, act, j0, min(j0 + COLUMN_CHUNK, n_pad))


@parallel_kernel
def _gemm_parallel(x: Any, wt: Any, bias: Any, out: Any, act: int) -> None:
    n_pad = wt.shape[0]
    chunks = -(-n_pad // COLUMN_CHUNK)
    for c in prange(chunks):
        j0 = c * COLUMN_CHUNK
        _chunk(x, wt, bias, out, act, j0, min(j0 + COLUMN_CHUNK, n_pad))


@kernel
def _epilogue(out: Any, bias: Any, act: int) -> None:
    act_rows_inplace(out, bias, act, 0, out.shape[1])


def _rows(name: str, x: Any, out: Any, packed: Packed) -> tuple[F32, F32]:
    check_f32(name, "x", x)
    check_f32(name, "out", out, writable=True)
    if x.ndim not in (2, 3) or x.shape[-1] != packed.k:
        raise NativeKernelError(
            f"{name}: x does not match the packed weights",
            expected=f"x: f32[M, {packed.k}] or f32[B, S, {packed.k}]",
            found=f"x: {spec(x)}",
            fix=f"the weights were packed for K = {packed.k} inputs per row",
        )
    check_shape(name, "out", out, (*x.shape[:-1], packed.n))
    check_c_contiguous(name, "out", out)
    x2 = np.ascontiguousarray(x.reshape(-1, packed.k))
    return x2, out.reshape(-1, packed.n)


def packed_matmul(
    x: np.ndarray[Any, Any], packed: Packed, out: np.ndarray[Any, Any], epilogue: str = "none"
) -> np.ndarray[Any, Any]:
    """``out[...] = act(x @ w + bias)`` without allocating; returns ``out``.

    ``x``: f32[M, K] or f32[B, S, K]; ``out``: C-contiguous f32[M, N] or f32[B, S, N];
    ``epilogue``: ``"none"``, ``"relu"``, ``"gelu_tanh"``, ``"gelu_erf"`` or ``"silu"``.

    >>> import numpy as np
    >>> p = pack_weights(np.eye(3, dtype=np.float32), np.float32([0.5, -2.0, 0.0]))
    >>> packed_matmul(np.float32([[1, 1, -1]]), p, np.empty((1, 3), np.float32), "relu")
    array([[1.5, 0. , 0. ]], dtype=float32)
    """
    act = act_code("packed_matmul", epilogue)
    x2, out2 = _rows("packed_matmul", x, out, packed)
    m = x2.shape[0]
    if m == 0:
        return out
    if choose_gemm(m, packed.k, packed.n) == "blas":
        # One row: OpenBLAS's gemv reads the packed rows (w's columns) faster than w.
        w = packed.wt[: packed.n].T if m == 1 else packed.w
        np.matmul(x2, w, out=out2)
        if packed.has_bias or act:
            _epilogue(out2, packed.bias, act)
    elif use_threads(m * packed.k * packed.n, PARALLEL_MIN_MACS):
        _gemm_parallel(x2, packed.wt, packed.bias, out2, act)
    else:
        _gemm_serial(x2, packed.wt, packed.bias, out2, act)
    return out


__all__ = ["Packed", "choose_gemm", "pack_weights", "packed_matmul"]
