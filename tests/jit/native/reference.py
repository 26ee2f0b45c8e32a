"""float64 references for the native kernels, and the accuracy measure of BENCHMARKS.md."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]


def rel_err(y: Array, ref: Array) -> float:
    """max |y - ref| / max |ref| (0 when both are all zeros)."""
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    err = float(np.max(np.abs(y.astype(np.float64) - ref))) if ref.size else 0.0
    return err / scale if scale else err


_erf = np.vectorize(math.erf, otypes=[np.float64])


def act(name: str, v: Array) -> Array:
    v = v.astype(np.float64)
    if name == "none":
        return v
    if name == "relu":
        return np.maximum(v, 0.0)
    if name == "gelu_tanh":
        return 0.5 * v * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (v + 0.044715 * v**3)))
    if name == "gelu_erf":
        return 0.5 * v * (1.0 + _erf(v / np.sqrt(2.0)))
    if name == "silu":
        with np.errstate(over="ignore"):
            return v / (1.0 + np.exp(-v))
    raise ValueError(name)


def layer_norm(x: Array, g: Array, b: Array, eps: float, r: Array | None = None) -> Array:
    t = x.astype(np.float64) + (0.0 if r is None else r.astype(np.float64))
    mean = t.mean(-1, keepdims=True)
    var = ((t - mean) ** 2).mean(-1, keepdims=True)
    return (t - mean) / np.sqrt(var + eps) * g + b


def softmax(x: Array, scale: float = 1.0) -> Array:
    z = x.astype(np.float64) * scale
    z = np.exp(z - z.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


def attention(q: Array, k: Array, v: Array, scale: float) -> Array:
    s = np.einsum("bhsd,bhtd->bhst", q.astype(np.float64), k.astype(np.float64)) * scale
    return np.einsum("bhst,bhtd->bhsd", softmax(s), v.astype(np.float64))


def conv3x3(x: Array, w: Array, b: Array, stride: int) -> Array:
    """NCHW, padding 1: a sum of nine shifted products, nothing shared with the kernel."""
    x = x.astype(np.float64)
    _, _, h, wd = x.shape
    ho, wo = (h - 1) // stride + 1, (wd - 1) // stride + 1
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((x.shape[0], w.shape[0], ho, wo))
    for ky in range(3):
        for kx in range(3):
            patch = xp[
                :,
                :,
                ky : ky + stride * (ho - 1) + 1 : stride,
                kx : kx + stride * (wo - 1) + 1 : stride,
            ]
            out += np.einsum("bchw,oc->bohw", patch, w[:, :, ky, kx].astype(np.float64))
    return out + b.astype(np.float64)[None, :, None, None]
