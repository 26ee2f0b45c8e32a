"""Row operations over the last axis and attention, in the C kernel library.

Every function takes float32 arrays whose last axis has unit stride (leading axes may have
any strides), allocates its result unless ``out`` is given, and runs on the library's pool
for large inputs (``threads``: at most this many threads, 0 for the pool's size). Optional
operands broadcast against the input as in NumPy; an output may be an input itself, but may
not partly overlap one. Accuracy: within 1e-5 relative of a float64 reference (tests).

>>> import numpy as np
>>> from shapevm.native import rowops
>>> x = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
>>> rowops.layer_norm(x).round(4)
array([[-1.3416, -0.4472,  0.4472,  1.3416]], dtype=float32)
>>> rowops.softmax(x, mask=np.float32([0, 0, -np.inf, -np.inf])).round(4)
array([[0.2689, 0.7311, 0.    , 0.    ]], dtype=float32)
>>> rowops.layer_norm(x, np.ones(3, np.float32))
Traceback (most recent call last):
...
shapevm.native.NativeKernelError: layer_norm: gamma does not match the rows
  expected: gamma: f32[4] (unit stride)
  found:    f32[3]
  fix:      pass one value per element of a row
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shapevm import _native

Array = np.ndarray[Any, Any]


def layer_norm(
    x: Array,
    gamma: Array | None = None,
    beta: Array | None = None,
    *,
    eps: float = 1e-5,
    residual: Array | None = None,
    sum_out: Array | None = None,
    out: Array | None = None,
    threads: int = 0,
) -> Array:
    """``(h - mean(h)) / sqrt(var(h) + eps) * gamma + beta`` over the last axis, where
    ``h = x + residual`` (``residual`` broadcasts to ``x``; ``h = x`` without it).

    ``sum_out`` (x's shape) receives ``h`` as well, the residual stream of the next block;
    it may be ``residual`` itself. ``gamma``, ``beta``: ``f32[n]`` or ``None``.

    >>> x = np.float32([[0.0, 2.0]])
    >>> h = np.empty_like(x)
    >>> layer_norm(x, residual=np.float32([1.0, 1.0]), sum_out=h, eps=0.0).tolist(), h.tolist()
    ([[-1.0, 1.0]], [[1.0, 3.0]])
    """
    return _native.layer_norm(x, gamma, beta, eps, residual, out, sum_out, threads, False)


def rms_norm(
    x: Array,
    gamma: Array | None = None,
    beta: Array | None = None,
    *,
    eps: float = 1e-5,
    residual: Array | None = None,
    sum_out: Array | None = None,
    out: Array | None = None,
    threads: int = 0,
) -> Array:
    """``h / sqrt(mean(h * h) + eps) * gamma + beta`` over the last axis, ``h`` as in
    `layer_norm` (the same operands and options).

    >>> rms_norm(np.float32([[3.0, -4.0]]), eps=0.0).round(4)
    array([[ 0.8485, -1.1314]], dtype=float32)
    """
    return _native.layer_norm(x, gamma, beta, eps, residual, out, sum_out, threads, True)


def _mask_rows(mask: Array | None, n: int) -> Array | None:
    """A float32 mask whose last axis is 1 or strided, spread to ``n`` unit-stride columns."""
    if isinstance(mask, np.ndarray) and mask.dtype == np.float32 and mask.ndim >= 1:
        spread = mask.shape[-1] == 1 and n != 1
        strided = mask.shape[-1] == n and mask.strides[-1] != 4
        if spread or strided:
            return np.ascontiguousarray(np.broadcast_to(mask, (*mask.shape[:-1], n)))
    return mask


def softmax(
    x: Array,
    *,
    scale: float = 1.0,
    mask: Array | None = None,
    out: Array | None = None,
    threads: int = 0,
) -> Array:
    """``softmax(x * scale + mask)`` over the last axis; ``mask`` is additive (``-inf``
    removes a column) and broadcasts to ``x``. A row that is all ``-inf`` gives NaN, as the
    NumPy formula does.

    >>> softmax(np.float32([[0.0, 0.0]]), scale=3.0).tolist()
    [[0.5, 0.5]]
    """
    mask = _mask_rows(mask, x.shape[-1]) if isinstance(x, np.ndarray) and x.ndim else mask
    return _native.softmax(x, scale, mask, out, threads, False)


def log_softmax(
    x: Array,
    *,
    scale: float = 1.0,
    mask: Array | None = None,
    out: Array | None = None,
    threads: int = 0,
) -> Array:
    """``log(softmax(x * scale + mask))`` over the last axis, without forming the softmax
    (no ``log(0)`` for tiny probabilities).

    >>> log_softmax(np.float32([[0.0, 0.0]])).round(4)
    array([[-0.6931, -0.6931]], dtype=float32)
    """
    mask = _mask_rows(mask, x.shape[-1]) if isinstance(x, np.ndarray) and x.ndim else mask
    return _native.softmax(x, scale, mask, out, threads, True)


def attention(
    q: Array,
    k: Array,
    v: Array,
    *,
    scale: float | None = None,
    mask: Array | None = None,
    causal: bool = False,
    out: Array | None = None,
    threads: int = 0,
) -> Array:
    """``softmax(q @ k^T * scale + mask) @ v`` per head for ``q: f32[..., s_q, d]``,
    ``k: f32[..., s_k, d]``, ``v: f32[..., s_k, d_v]`` (batch dims broadcast; any strides
    but unit along the last axis, so ``qkv.transpose(...)`` views cost nothing).

    ``scale`` defaults to ``1 / sqrt(d)``; ``mask`` is additive and broadcasts to
    ``[..., s_q, s_k]``; ``causal=True`` lets query ``i`` see keys ``j <= i`` (top-left
    aligned, as ``torch``'s ``is_causal``). Scores are computed a block at a time and never
    stored whole.

    >>> q = np.float32([[[1.0, 0.0]]])
    >>> kv = np.float32([[[1.0, 0.0], [0.0, 1.0]]])
    >>> attention(q, kv, kv, scale=0.0).tolist()
    [[[0.5, 0.5]]]
    >>> attention(q, kv, kv, causal=True).tolist()
    [[[1.0, 0.0]]]
    """
    if isinstance(q, np.ndarray) and isinstance(k, np.ndarray) and q.ndim >= 2 and k.ndim >= 2:
        mask = _mask_rows(mask, k.shape[-2])
    return _native.attention(q, k, v, scale, mask, causal, out, threads)


__all__ = ["attention", "layer_norm", "log_softmax", "rms_norm", "softmax"]
