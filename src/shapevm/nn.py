"""``shapevm.nn``: neural-network functions over `shapevm.numpy`, traced like any other.

Layouts follow PyTorch: linear weights ``[out, in]``, images NCHW, conv weights
``[out, in / groups, kh, kw]``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from shapevm.frontend import methods as _methods  # noqa: F401  (Tracer operators)
from shapevm.frontend import numpy_api as snp
from shapevm.frontend.numpy_api import _as_tensor
from shapevm.frontend.numpy_more import tri
from shapevm.frontend.tracer import bind_op
from shapevm.ops import DType

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def relu(x: Any) -> Any:
    return snp.maximum(x, 0.0 if snp._dtype_of(x) is None or _is_float(x) else 0)


def _is_float(x: Any) -> bool:
    dt = snp._dtype_of(x)
    return dt is not None and dt.is_float


def gelu(x: Any, approximate: bool = True) -> Any:
    """GELU; ``approximate=True`` is the tanh form (JAX's default), else the exact erf form."""
    if approximate:
        inner = snp.multiply(snp.add(x, snp.multiply(0.044715, x * x * x)), _SQRT_2_OVER_PI)
        return snp.multiply(snp.multiply(x, 0.5), snp.add(snp.tanh(inner), 1.0))
    return snp.multiply(snp.multiply(x, 0.5), snp.add(snp.erf(x * (1.0 / math.sqrt(2.0))), 1.0))


def sigmoid(x: Any) -> Any:
    return bind_op("sigmoid", [snp._common([x], to_float=True)[0][0]])


def silu(x: Any) -> Any:
    return snp.multiply(x, sigmoid(x))


def softmax(x: Any, axis: int = -1) -> Any:
    m = snp.max(x, axis=axis, keepdims=True)
    e = snp.exp(snp.subtract(x, m))
    return snp.divide(e, snp.sum(e, axis=axis, keepdims=True))


def log_softmax(x: Any, axis: int = -1) -> Any:
    shifted = snp.subtract(x, snp.max(x, axis=axis, keepdims=True))
    return snp.subtract(shifted, snp.log(snp.sum(snp.exp(shifted), axis=axis, keepdims=True)))


def layer_norm(
    x: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5, axis: int = -1
) -> Any:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over ``axis``."""
    mu = snp.mean(x, axis=axis, keepdims=True)
    xc = snp.subtract(x, mu)
    var = snp.mean(snp.multiply(xc, xc), axis=axis, keepdims=True)
    y = snp.multiply(xc, snp.divide(1.0, snp.sqrt(snp.add(var, eps))))
    if weight is not None:
        y = snp.multiply(y, weight)
    if bias is not None:
        y = snp.add(y, bias)
    return y


def rms_norm(x: Any, weight: Any = None, eps: float = 1e-6, axis: int = -1) -> Any:
    ms = snp.mean(snp.multiply(x, x), axis=axis, keepdims=True)
    y = snp.multiply(x, snp.divide(1.0, snp.sqrt(snp.add(ms, eps))))
    return y if weight is None else snp.multiply(y, weight)


def linear(x: Any, weight: Any, bias: Any = None) -> Any:
    """``x @ weight.T + bias`` with a PyTorch-layout weight ``[out, in]``."""
    w = weight.T if isinstance(weight, np.ndarray) else snp.transpose(weight)
    if isinstance(weight, np.ndarray):
        w = np.ascontiguousarray(w)
    y = snp.matmul(x, w)
    return y if bias is None else snp.add(y, bias)


def _pair(v: Any) -> tuple[Any, Any]:
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError(f"expected an int or a pair, found {v!r}")
        return v[0], v[1]
    return v, v


def _padding4(padding: Any) -> tuple[Any, Any, Any, Any]:
    if isinstance(padding, (tuple, list)) and len(padding) == 4:
        return padding[0], padding[1], padding[2], padding[3]
    ph, pw = _pair(padding)
    return ph, ph, pw, pw


def conv2d(
    x: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Any:
    """2-D convolution, NCHW, weight ``[out, in / groups, kh, kw]``; ``padding`` is an int,
    ``(ph, pw)`` or ``(top, bottom, left, right)``."""
    attrs = {
        "stride": tuple(int(s) for s in _pair(stride)),
        "padding": tuple(int(p) for p in _padding4(padding)),
        "dilation": tuple(int(d) for d in _pair(dilation)),
        "groups": int(groups),
    }
    args = [_as_tensor(x), _as_tensor(weight)]
    if bias is not None:
        args.append(_as_tensor(bias))
    return bind_op("conv2d", args, attrs)


def _pool_attrs(kernel_size: Any, stride: Any, padding: Any) -> dict[str, Any]:
    kernel = tuple(int(k) for k in _pair(kernel_size))
    return {
        "kernel": kernel,
        "stride": kernel if stride is None else tuple(int(s) for s in _pair(stride)),
        "padding": tuple(int(p) for p in _padding4(padding)),
    }


def max_pool2d(x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0) -> Any:
    return bind_op("max_pool2d", [_as_tensor(x)], _pool_attrs(kernel_size, stride, padding))


def avg_pool2d(
    x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, count_include_pad: bool = True
) -> Any:
    attrs = _pool_attrs(kernel_size, stride, padding)
    attrs["count_include_pad"] = bool(count_include_pad)
    return bind_op("avg_pool2d", [_as_tensor(x)], attrs)


def _is_bool(mask: Any) -> bool:
    return snp._dtype_of(mask) is DType.BOOL


def scaled_dot_product_attention(
    q: Any,
    k: Any,
    v: Any,
    mask: Any = None,
    scale: float | None = None,
    *,
    is_causal: bool = False,
) -> Any:
    """``softmax(q @ k^T * scale [masked]) @ v`` over the last two axes.

    ``mask`` is boolean (True keeps a position) or additive (added to the scores).
    ``scale`` defaults to ``1 / sqrt(q.shape[-1])``. ``is_causal`` keeps query ``i`` to the
    keys ``j <= i`` (PyTorch's: the mask's top left corner; with ``mask`` too, both apply).
    """
    if is_causal:
        causal = tri(snp.shape(q)[-2], snp.shape(k)[-2], dtype=np.bool_)
        if mask is None:
            mask = causal
        elif _is_bool(mask):
            mask = snp.logical_and(mask, causal)
        else:
            mask = snp.where(causal, mask, -np.inf)
    d = snp.shape(q)[-1]
    if scale is None:
        if not isinstance(d, int):
            raise TypeError(
                "scaled_dot_product_attention needs scale= when the head size is symbolic"
            )
        scale = 1.0 / math.sqrt(d)
    scores = snp.multiply(snp.matmul(q, snp.swapaxes(k, -1, -2)), scale)
    if mask is not None:
        if _is_bool(mask):
            scores = snp.where(mask, scores, -np.inf)
        else:
            scores = snp.add(scores, mask)
    return snp.matmul(softmax(scores, axis=-1), v)


__all__ = [
    "avg_pool2d",
    "conv2d",
    "gelu",
    "layer_norm",
    "linear",
    "log_softmax",
    "max_pool2d",
    "relu",
    "rms_norm",
    "scaled_dot_product_attention",
    "sigmoid",
    "silu",
    "softmax",
]
