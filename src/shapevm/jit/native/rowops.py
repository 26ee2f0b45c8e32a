"""Fused row kernels: layer norm (residual added first), softmax, bias + activation, and
attention for short sequences, each writing into a caller-provided ``out``.

All work along the last axis; leading axes are flattened into rows. Rows are independent,
so above `PARALLEL_MIN_ELEMENTS` elements (or heads, for attention) they are spread over
numba's thread pool. NumPy spends most of its time on these ops in temporaries (layer norm
is 8 passes over memory in NumPy; here it is 3 over one row that stays in L1).
"""

from __future__ import annotations

import functools
from typing import Any, Final

import numpy as np
from numba import prange

from shapevm.jit.native._core import (
    NativeKernelError,
    act_code,
    act_rows_inplace,
    bias_act_rows,
    check_c_contiguous,
    check_f32,
    check_shape,
    exp32,
    kernel,
    parallel_kernel,
    spec,
)
from shapevm.jit.native._threads import use_threads
from shapevm.jit.native.ukernel import MR, NR, pack_a6, tile_6x16

Array = np.ndarray[Any, Any]

PARALLEL_MIN_ELEMENTS: Final = 1 << 17
"""Below this many elements a row op is done before the second thread would start; above,
`entries.ThreadChoice` measures which way is faster."""
ATTENTION_PARALLEL_MIN: Final = 1 << 20
"""Multiply-adds of q @ k^T from which the fused attention spreads heads over threads."""
ATTENTION_BLAS_MIN_SCORES: Final = 32 * 32
"""From this many scores per head on, attention's two products go to BLAS: per core, the
fused kernel is 1.16x NumPy at 16 x 16 and 0.74-0.94x from 37 x 37 on (W3 shapes)."""

_Z = np.float32(0.0)
_ONE = np.float32(1.0)
_NEG_INF = np.float32(-np.inf)


# ---------------------------------------------------------------------------- layer norm


@kernel
def _ln_row(t: Any, g: Any, b: Any, eps: Any, o: Any) -> None:
    """``o = (t - mean) / sqrt(var + eps) * g + b``; two passes for the statistics, so that
    a large mean does not cancel the variance."""
    n = np.float32(t.size)
    s = _Z
    for j in range(t.size):
        s += t[j]
    mean = s / n
    v = _Z
    for j in range(t.size):
        d = t[j] - mean
        v += d * d
    inv = _ONE / np.sqrt(v / n + eps)
    for j in range(t.size):
        o[j] = (t[j] - mean) * inv * g[j] + b[j]


@kernel
def _ln_row_inplace(o: Any, g: Any, b: Any, eps: Any) -> None:
    # The same as _ln_row(o, g, b, eps, o), in a form LLVM vectorizes (one array, no
    # overlap check to fail).
    n = np.float32(o.size)
    s = _Z
    for j in range(o.size):
        s += o[j]
    mean = s / n
    v = _Z
    for j in range(o.size):
        d = o[j] - mean
        v += d * d
    inv = _ONE / np.sqrt(v / n + eps)
    for j in range(o.size):
        o[j] = (o[j] - mean) * inv * g[j] + b[j]


@kernel
def _ln_rows(x: Any, r: Any, g: Any, b: Any, eps: Any, out: Any, i0: int, i1: int) -> None:
    # x is out itself when the caller normalizes in place (and passes no residual).
    inplace = r is None and x.ctypes.data == out.ctypes.data
    for i in range(i0, i1):
        if inplace:
            _ln_row_inplace(out[i], g, b, eps)
        elif r is None:
            _ln_row(x[i], g, b, eps, out[i])
        else:
            o = out[i]
            xi = x[i]
            ri = r[i]
            for j in range(o.size):
                o[j] = xi[j] + ri[j]
            _ln_row_inplace(o, g, b, eps)


@kernel
def _ln_serial(x: Any, r: Any, g: Any, b: Any, eps: Any, out: Any) -> None:
    _ln_rows(x, r, g, b, eps, out, 0, x.shape[0])


@parallel_kernel
def _ln_parallel(x: Any, r: Any, g: Any, b: Any, eps: Any, out: Any) -> None:
    rows = x.shape[0]
    tasks = min(rows, 8)
    for t in prange(tasks):
        _ln_rows(x, r, g, b, eps, out, t * rows // tasks, (t + 1) * rows // tasks)


def layer_norm(
    x: Array, gamma: Array, beta: Array, eps: float, out: Array, residual: Array | None = None
) -> Array:
    """``out = LN(x + residual)`` over the last axis (``LN(x)`` without ``residual``).

    >>> import numpy as np
    >>> x = np.float32([[1, 2, 3, 4]])
    >>> y = layer_norm(x, np.ones(4, np.float32), np.zeros(4, np.float32), 1e-5,
    ...                np.empty_like(x), residual=np.float32([[1, 0, -1, 0]]))
    >>> np.round(y, 3)
    array([[-0.577, -0.577, -0.577,  1.732]], dtype=float32)
    """
    name = "layer_norm"
    x2, out2 = _rows_like(name, x, out)
    d = x2.shape[1]
    for arg, a in (("gamma", gamma), ("beta", beta)):
        check_f32(name, arg, a)
        check_shape(name, arg, a, (d,))
    r2 = None
    if residual is not None:
        check_f32(name, "residual", residual)
        check_shape(name, "residual", residual, x.shape)
        r2 = _as_rows(residual)
    x2, _ = _alias(x2, out2)
    if r2 is not None:
        r2, _ = _alias(r2, out2)
    fn = _ln_parallel if use_threads(x2.size, PARALLEL_MIN_ELEMENTS) else _ln_serial
    fn(x2, r2, _contig(gamma), _contig(beta), np.float32(eps), out2)
    return out


# ------------------------------------------------------------------------------- softmax


@kernel
def _softmax_row(xr: Any, o: Any, scale: Any) -> None:
    m = _NEG_INF
    for j in range(xr.size):
        v = xr[j] * scale
        m = v if v > m else m
    s = _Z
    for j in range(xr.size):
        e = exp32(xr[j] * scale - m)
        o[j] = e
        s += e
    inv = _ONE / s
    for j in range(o.size):
        o[j] = o[j] * inv


@kernel
def _softmax_row_inplace(o: Any, scale: Any) -> None:
    # _softmax_row(o, o, scale) in a form LLVM vectorizes (no overlap check to fail).
    m = _NEG_INF
    for j in range(o.size):
        v = o[j] * scale
        m = v if v > m else m
    s = _Z
    for j in range(o.size):
        e = exp32(o[j] * scale - m)
        o[j] = e
        s += e
    inv = _ONE / s
    for j in range(o.size):
        o[j] = o[j] * inv


@kernel
def _softmax_rows(x: Any, out: Any, scale: Any, inplace: bool, i0: int, i1: int) -> None:
    for i in range(i0, i1):
        if inplace:
            _softmax_row_inplace(out[i], scale)
        else:
            _softmax_row(x[i], out[i], scale)


@kernel
def _softmax_serial(x: Any, out: Any, scale: Any, inplace: bool) -> None:
    _softmax_rows(x, out, scale, inplace, 0, x.shape[0])


@parallel_kernel
def _softmax_parallel(x: Any, out: Any, scale: Any, inplace: bool) -> None:
    rows = x.shape[0]
    tasks = min(rows, 8)
    for t in prange(tasks):
        _softmax_rows(x, out, scale, inplace, t * rows // tasks, (t + 1) * rows // tasks)


def softmax_rows(x: Array, out: Array, scale: float = 1.0) -> Array:
    """``out = softmax(scale * x)`` over the last axis; ``out`` may be ``x``.

    >>> import numpy as np
    >>> softmax_rows(np.float32([[0, 0, np.log(2)]]), np.empty((1, 3), np.float32))
    array([[0.25, 0.25, 0.5 ]], dtype=float32)
    """
    x2, out2 = _rows_like("softmax_rows", x, out)
    x2, inplace = _alias(x2, out2)
    fn = _softmax_parallel if use_threads(x2.size, PARALLEL_MIN_ELEMENTS) else _softmax_serial
    fn(x2, out2, np.float32(scale), inplace)
    return out


# ------------------------------------------------------------------------ bias + activation


@kernel
def _bias_act_serial(x: Any, bias: Any, act: int, out: Any) -> None:
    bias_act_rows(x, bias, act, out, 0, x.shape[1])


@kernel
def _act_inplace_serial(y: Any, bias: Any, act: int) -> None:
    act_rows_inplace(y, bias, act, 0, y.shape[1])


@parallel_kernel
def _bias_act_parallel(x: Any, bias: Any, act: int, out: Any, inplace: bool) -> None:
    rows = out.shape[0]
    tasks = min(rows, 8)
    for t in prange(tasks):
        i0 = t * rows // tasks
        i1 = (t + 1) * rows // tasks
        if inplace:
            act_rows_inplace(out[i0:i1], bias, act, 0, out.shape[1])
        else:
            bias_act_rows(x[i0:i1], bias, act, out[i0:i1], 0, out.shape[1])


@functools.lru_cache(maxsize=16)
def _zeros(n: int) -> Array:
    z = np.zeros(n, np.float32)
    z.flags.writeable = False
    return z


def bias_act(x: Array, bias: Array | None, act: str, out: Array) -> Array:
    """``out = act(x + bias)`` with ``bias`` along the last axis; ``out`` may be ``x``.

    ``act``: ``"none"``, ``"relu"``, ``"gelu_tanh"``, ``"gelu_erf"`` or ``"silu"``.

    >>> import numpy as np
    >>> bias_act(np.float32([[-1, 2]]), np.float32([0.5, 0.5]), "relu",
    ...          np.empty((1, 2), np.float32))
    array([[0. , 2.5]], dtype=float32)
    """
    code = act_code("bias_act", act)
    x2, out2 = _rows_like("bias_act", x, out)
    if bias is None:
        b = _zeros(x2.shape[1])
    else:
        check_f32("bias_act", "bias", bias)
        check_shape("bias_act", "bias", bias, (x2.shape[1],))
        b = _contig(bias)
    x2, inplace = _alias(x2, out2)
    if use_threads(x2.size, PARALLEL_MIN_ELEMENTS):
        _bias_act_parallel(x2, b, code, out2, inplace)
    elif inplace:
        _act_inplace_serial(out2, b, code)
    else:
        _bias_act_serial(x2, b, code, out2)
    return out


# ----------------------------------------------------------------------------- attention


@kernel
def _attend(q: Any, k: Any, v: Any, out: Any, scale: Any) -> None:
    """softmax(q @ k.T * scale) @ v for one head: q [S, D], k and v [T, D], out [S, D].

    Row by row: the scores of query i are built as a sum of rows of k^T (scaled, copied
    once into [D, T] scratch) times scalars of q, eight per pass, so each pass over the
    scores loads and stores them once for eight multiply-adds and the eight scalars stay in
    registers; the output row likewise from eight rows of v at a time. No horizontal sums,
    and the scratch is two copies of the head (k^T and v, contiguous whatever the strides
    of the caller's views) and one row of scores.
    """
    s_len, d = q.shape
    t_len = k.shape[0]
    kt = np.empty((d, t_len), np.float32)
    vs = np.empty((t_len, d), np.float32)
    for j in range(t_len):
        for c in range(d):
            kt[c, j] = k[j, c] * scale
            vs[j, c] = v[j, c]
    p = np.empty(t_len, np.float32)
    acc = np.empty(d, np.float32)
    for i in range(s_len):
        _combine_rows(q[i], kt, p)
        _softmax_row_inplace(p, _ONE)
        _combine_rows(p, vs, acc)
        o = out[i]
        for c in range(d):
            o[c] = acc[c]


@kernel
def _combine_rows(coef: Any, rows: Any, out: Any) -> None:
    """``out = coef @ rows`` for rows [N, M]: a sum of eight scaled rows per pass over
    ``out``, so each pass loads and stores ``out`` once for eight multiply-adds and the
    eight coefficients stay in registers. The scores of a query (``coef`` the query, rows
    of k^T) and its output (``coef`` the probabilities, rows of v) are both this."""
    n = rows.shape[0]
    n8 = n - n % 8
    for c in range(out.size):
        out[c] = 0.0
    for j in range(0, n8, 8):
        b0, b1, b2, b3 = coef[j], coef[j + 1], coef[j + 2], coef[j + 3]
        b4, b5, b6, b7 = coef[j + 4], coef[j + 5], coef[j + 6], coef[j + 7]
        r0, r1, r2, r3 = rows[j], rows[j + 1], rows[j + 2], rows[j + 3]
        r4, r5, r6, r7 = rows[j + 4], rows[j + 5], rows[j + 6], rows[j + 7]
        for c in range(out.size):
            out[c] += (
                b0 * r0[c]
                + b1 * r1[c]
                + b2 * r2[c]
                + b3 * r3[c]
                + b4 * r4[c]
                + b5 * r5[c]
                + b6 * r6[c]
                + b7 * r7[c]
            )
    for j in range(n8, n):
        b = coef[j]
        rj = rows[j]
        for c in range(out.size):
            out[c] += b * rj[c]


@kernel
def _attend_tiles(q: Any, k: Any, v: Any, out: Any, scale: Any) -> None:
    """`_attend` on the micro-kernel of `ukernel`, for D a multiple of 16 and rows of
    ``out`` contiguous: the scores of six queries by 16 keys per tile (k^T, scaled, packed
    once into 16-key panels), then the output of six queries by 16 channels (v packed into
    16-channel panels). Every scalar of k, v and the scores is loaded once per six rows
    instead of once per row."""
    s_len, d = q.shape
    t_len = k.shape[0]
    nbk = -(-t_len // NR)
    tp = nbk * NR
    nbd = d // NR
    bk = np.zeros((nbk, d, NR), np.float32)  # bk[jb, c, r] = k[16 jb + r, c] * scale
    for j in range(t_len):
        kj = k[j]
        jb = j // NR
        r = j % NR
        for c in range(d):
            bk[jb, c, r] = kj[c] * scale
    bv = np.empty((nbd, t_len, NR), np.float32)  # bv[jb, t, r] = v[t, 16 jb + r]
    for t in range(t_len):
        vt = v[t]
        for jb in range(nbd):
            for r in range(NR):
                bv[jb, t, r] = vt[jb * NR + r]
    panels = -(-s_len // MR)
    aq = np.empty(panels * MR * d, np.float32)
    pack_a6(q, aq)
    scores = np.empty((panels * MR, tp), np.float32)
    flat = scores.reshape(panels * MR * tp)
    for ib in range(panels):
        mr = min(MR, s_len - ib * MR)
        for jb in range(nbk):
            tile_6x16(
                aq,
                ib * MR * d,
                bk,
                jb * d * NR,
                aq,
                d,
                flat,
                ib * MR * tp + jb * NR,
                tp,
                mr,
                False,
                1,
            )
    for i in range(s_len):
        _softmax_row_inplace(scores[i, :t_len], _ONE)
    ap = np.empty(panels * MR * t_len, np.float32)
    pack_a6(scores[:s_len, :t_len], ap)
    ldc = out.strides[0] // 4
    for ib in range(panels):
        mr = min(MR, s_len - ib * MR)
        for jb in range(nbd):
            tile_6x16(
                ap,
                ib * MR * t_len,
                bv,
                jb * t_len * NR,
                ap,
                t_len,
                out,
                ib * MR * ldc + jb * NR,
                ldc,
                mr,
                False,
                1,
            )


@kernel
def _attend_best(q: Any, k: Any, v: Any, out: Any, scale: Any) -> None:
    """`_attend_tiles` where it applies (D a multiple of 16, 16 keys or more, rows of
    ``out`` contiguous), else `_attend`."""
    d = q.shape[1]
    if d % NR == 0 and k.shape[0] >= NR and out.strides[1] == 4:
        _attend_tiles(q, k, v, out, scale)
    else:
        _attend(q, k, v, out, scale)


@kernel
def _attention_serial(q: Any, k: Any, v: Any, out: Any, scale: Any) -> None:
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            _attend_best(q[b, h], k[b, h], v[b, h], out[b, h], scale)


@parallel_kernel
def _attention_parallel(q: Any, k: Any, v: Any, out: Any, scale: Any) -> None:
    heads = q.shape[1]
    for t in prange(q.shape[0] * heads):
        b = t // heads
        h = t % heads
        _attend_best(q[b, h], k[b, h], v[b, h], out[b, h], scale)


def attention(q: Array, k: Array, v: Array, out: Array, scale: float) -> Array:
    """``out = softmax(q @ k^T * scale) @ v`` per batch and head; returns ``out``.

    q: f32[B, H, S, D]; k, v: f32[B, H, T, D]; out: f32[B, H, S, D]. Any strides (views of a
    fused qkv buffer, or an ``out`` that is a transposed view of [B, S, H, D]). Short
    sequences run fused without temporaries; from `ATTENTION_BLAS_MIN_SCORES` scores per
    head the products go to BLAS around the fused softmax (one [B, H, S, T] temporary).

    >>> import numpy as np
    >>> q = np.zeros((1, 1, 2, 4), np.float32); k = np.zeros((1, 1, 3, 4), np.float32)
    >>> v = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)
    >>> np.round(attention(q, k, v, np.empty_like(q), 0.125)[0, 0], 4)
    array([[4., 5., 6., 7.],
           [4., 5., 6., 7.]], dtype=float32)
    """
    name = "attention"
    for arg, a in (("q", q), ("k", k), ("v", v)):
        check_f32(name, arg, a)
        if a.ndim != 4:
            raise NativeKernelError(
                f"{name}: {arg} must have rank 4",
                expected=f"{arg}: f32[B, H, S, D]",
                found=f"{arg}: {spec(a)}",
                fix="split heads first: x.reshape(B, S, H, D).transpose(0, 2, 1, 3)",
            )
    check_f32(name, "out", out, writable=True)
    b, h, _, d = q.shape
    check_shape(name, "k", k, (b, h, k.shape[2], d))
    check_shape(name, "v", v, k.shape)
    check_shape(name, "out", out, q.shape)
    s_len, t_len = q.shape[2], k.shape[2]
    if s_len * t_len >= ATTENTION_BLAS_MIN_SCORES:
        # Both products through BLAS (as NumPy does), the softmax fused and in place.
        scores = np.matmul(q, k.transpose(0, 1, 3, 2))
        softmax_rows(scores, scores, scale)
        if out.flags.c_contiguous:
            np.matmul(scores, v, out=out)
        else:  # matmul into a strided view leaves BLAS for a slow loop; copy instead
            out[...] = np.matmul(scores, v)
    elif b * h > 1 and use_threads(q.size * t_len, ATTENTION_PARALLEL_MIN):
        _attention_parallel(q, k, v, out, np.float32(scale))
    else:
        _attention_serial(q, k, v, out, np.float32(scale))
    return out


# ------------------------------------------------------------------------------ helpers


def _alias(a: Array, out: Array) -> tuple[Array, bool]:
    """``a`` as a kernel may read it while writing ``out``, and whether it is ``out`` itself
    (then the in-place kernels run); a partial overlap is resolved by a copy."""
    if a is out:
        return a, True
    if not np.may_share_memory(a, out):
        return a, False
    if _same_view(a, out):
        return a, True
    return a.copy(), False


def _same_view(a: Array, b: Array) -> bool:
    return bool(
        a.shape == b.shape
        and a.strides == b.strides
        and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    )


def _contig(a: Array) -> Array:
    return np.ascontiguousarray(a)


def _as_rows(a: Array) -> Array:
    return np.ascontiguousarray(a).reshape(-1, a.shape[-1]) if a.ndim else a.reshape(1, 1)


def _rows_like(name: str, x: Array, out: Array) -> tuple[Array, Array]:
    check_f32(name, "x", x)
    check_f32(name, "out", out, writable=True)
    if x.ndim == 0:
        raise NativeKernelError(
            f"{name}: x must have at least one axis",
            expected="x: f32[..., N]",
            found=f"x: {spec(x)}",
            fix="reshape a scalar to x.reshape(1)",
        )
    check_shape(name, "out", out, x.shape)
    check_c_contiguous(name, "out", out)
    out2 = out.reshape(-1, x.shape[-1])
    x2 = out2 if x is out else _as_rows(x)
    return x2, out2


__all__ = ["attention", "bias_act", "layer_norm", "softmax_rows"]
