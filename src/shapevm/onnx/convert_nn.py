"""Converters of ONNX network layers: convolutions, pooling, normalizations, Gemm, MatMul.

2-D convolutions and the pooling that PyTorch's 2-D layers do become ``conv2d``,
``max_pool2d`` and ``avg_pool2d`` (which the JIT has native kernels for); 1-D convolutions
are 2-D ones over a unit axis; 3-D ones are a sum of 2-D convolutions, one per depth tap.
Pooling with dilation, ``ceil_mode`` or more than 2 spatial axes becomes the N-d
``max_pool``/``avg_pool``. Normalizations are compositions of reductions and arithmetic;
with constant parameters, ``BatchNormalization`` folds them into one scale and one shift.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shapevm import nn
from shapevm.frontend import numpy_api as snp
from shapevm.frontend.tracer import bind_op
from shapevm.onnx import values as V
from shapevm.onnx.convert_math import call
from shapevm.onnx.convert_shape import reshape_to, slice_axis
from shapevm.onnx.node import Node, Op, attr_is, checks
from shapevm.onnx.values import Value
from shapevm.shapes import DimExpr, max_dim

_AUTO_PAD = attr_is("auto_pad", ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"), "NOTSET")


def window_pads(
    n: Node, spatial: tuple[Any, ...], kernel: list[int], strides: list[int], dil: list[int]
) -> list[Any]:
    """The pads (begins, then ends) of a convolution or pooling, from ``pads`` or
    ``auto_pad``; with ``SAME_*`` and a symbolic size they are expressions of it."""
    k = len(kernel)
    mode = n.attr("auto_pad", "NOTSET")
    if mode == "NOTSET":
        return list(n.attr("pads", [0] * 2 * k))
    if mode == "VALID":
        return [0] * 2 * k
    begins, ends = [], []
    for d, kk, s, dd in zip(spatial, kernel, strides, dil, strict=True):
        out = (d + s - 1) // s
        total = max_dim((out - 1) * s + (kk - 1) * dd + 1 - d, 0)
        small = total // 2
        begin = small if mode == "SAME_UPPER" else total - small
        begins.append(begin)
        ends.append(total - begin)
    return begins + ends


def _pad_explicitly(x: Any, pads: list[Any], fill: float) -> tuple[Any, list[int]]:
    """Pads that are expressions become a ``pad`` op; the window op then pads nothing."""
    if all(isinstance(p, int) for p in pads):
        return x, pads
    k = len(pads) // 2
    lead = len(V.shape_of(x)) - k
    low = (0,) * lead + tuple(pads[:k])
    high = (0,) * lead + tuple(pads[k:])
    return call("pad", x, low=low, high=high, value=fill), [0] * 2 * k


# -- convolutions -------------------------------------------------------------------------


def conv(n: Node, x: Value, w: Value, b: Value | None = None) -> Any:
    wshape = V.shape_of(w)
    k = len(wshape) - 2
    kernel = [int(d) for d in n.attr("kernel_shape", wshape[2:])]
    strides = list(n.attr("strides", [1] * k))
    dil = list(n.attr("dilations", [1] * k))
    groups = int(n.attr("group", 1))
    pads = window_pads(n, V.shape_of(x)[2:], kernel, strides, dil)
    t, pads = _pad_explicitly(V.tensor(x), pads, 0.0)
    if k == 2:
        return nn.conv2d(t, w, b, strides, (pads[0], pads[2], pads[1], pads[3]), dil, groups)
    if k == 1:
        n_, c, length = V.shape_of(t)
        wt = reshape_to(w, (wshape[0], wshape[1], 1, wshape[2]))
        y = nn.conv2d(
            reshape_to(t, (n_, c, 1, length)),
            wt,
            b,
            (1, strides[0]),
            (0, 0, pads[0], pads[1]),
            (1, dil[0]),
            groups,
        )
        yn, yo, _, yl = V.shape_of(y)
        return reshape_to(y, (yn, yo, yl))
    if k == 3:
        return _conv3d(t, w, b, strides, pads, dil, groups)
    raise n.unsupported(
        f"Conv over {k} spatial axes",
        expected="1, 2 or 3 spatial axes",
        found=f"weight of rank {len(wshape)}",
    )


def _conv3d(
    x: Any,
    w: Value,
    b: Value | None,
    strides: list[int],
    pads: list[Any],
    dil: list[int],
    groups: int,
) -> Any:
    """A 3-D convolution as a sum over depth taps of 2-D convolutions of depth slices,
    with the output depth folded into the batch."""
    if pads[0] or pads[3]:
        x = call("pad", x, low=(0, 0, pads[0], 0, 0), high=(0, 0, pads[3], 0, 0), value=0.0)
    n, c, d, h, wd = V.shape_of(x)
    o, cg, kd = V.shape_of(w)[:3]
    od = (d - dil[0] * (kd - 1) - 1) // strides[0] + 1
    total: Any = None
    for i in range(kd):
        start = i * dil[0]
        xi = slice_axis(x, 2, start, start + (od - 1) * strides[0] + 1, strides[0])
        xi = reshape_to(call("transpose", xi, perm=(0, 2, 1, 3, 4)), (n * od, c, h, wd))
        wi = reshape_to(slice_axis(w, 2, i, i + 1, 1), (o, cg, *V.shape_of(w)[3:]))
        yi = nn.conv2d(
            xi, wi, None, strides[1:], (pads[1], pads[4], pads[2], pads[5]), dil[1:], groups
        )
        total = yi if total is None else call("add", total, yi)
    _, _, oh, ow = V.shape_of(total)
    y = call("transpose", reshape_to(total, (n, od, o, oh, ow)), perm=(0, 2, 1, 3, 4))
    return y if b is None else call("add", y, reshape_to(b, (o, 1, 1, 1)))


def conv_transpose(n: Node, x: Value, w: Value, b: Value | None = None) -> Any:
    wshape = V.shape_of(w)
    k = len(wshape) - 2
    spatial = V.shape_of(x)[2:]
    kernel = [int(d) for d in n.attr("kernel_shape", wshape[2:])]
    strides = list(n.attr("strides", [1] * k))
    dil = list(n.attr("dilations", [1] * k))
    extra = list(n.attr("output_padding", [0] * k))
    full = [
        s * (i - 1) + (kk - 1) * dd + 1
        for s, i, kk, dd in zip(strides, spatial, kernel, dil, strict=True)
    ]
    mode = n.attr("auto_pad", "NOTSET")
    if n.has("output_shape") or (mode in ("SAME_UPPER", "SAME_LOWER") and not n.has("pads")):
        shape = list(n.attr("output_shape", [s * i for s, i in zip(strides, spatial, strict=True)]))
        shape = shape[-k:]
        begins = []
        for f, e, o in zip(full, extra, shape, strict=True):
            total = f + e - o
            small = total // 2
            begins.append(small if mode == "SAME_UPPER" else total - small)
    else:
        pads = list(n.attr("pads", [0] * 2 * k))
        begins = pads[:k]
        shape = [
            f + e - lo - hi for f, e, lo, hi in zip(full, extra, pads[:k], pads[k:], strict=True)
        ]
    # the output is full[begin : begin + size]; past the end of full it is zeros (+ bias)
    ends, more = [], []
    for f, lo, o in zip(full, begins, shape, strict=True):
        room = f - lo - o
        ends.append(max_dim(room, 0) if isinstance(room, DimExpr) else max(room, 0))
        more.append(0 if isinstance(room, DimExpr) else max(-room, 0))
    attrs = {
        "stride": tuple(strides),
        "dilation": tuple(dil),
        "groups": int(n.attr("group", 1)),
        "pads": tuple(begins) + tuple(ends),
        "output_padding": tuple(more),
    }
    args = [x, w] if b is None else [x, w, b]
    return call("conv_transpose", *args, **attrs)


# -- pooling ------------------------------------------------------------------------------


def _pool_params(n: Node, x: Value) -> tuple[list[int], list[int], list[int], list[Any]]:
    kernel = [int(v) for v in n.attr("kernel_shape")]
    k = len(kernel)
    strides = list(n.attr("strides", [1] * k))
    dil = list(n.attr("dilations", [1] * k))
    pads = window_pads(n, V.shape_of(x)[-k:], kernel, strides, dil)
    return kernel, strides, dil, pads


def _window_attrs(
    kernel: list[int], strides: list[int], dil: list[int], pads: list[Any], ceil: bool
) -> dict[str, Any]:
    return {
        "kernel": tuple(kernel),
        "stride": tuple(strides),
        "dilation": tuple(dil),
        "pads": tuple(pads),
        "ceil_mode": ceil,
    }


def _plain_2d(kernel: list[int], dil: list[int], pads: list[Any], ceil: bool, rank: int) -> bool:
    """Whether PyTorch's 2-D pooling (``max_pool2d``/``avg_pool2d``) computes the same."""
    if len(kernel) != 2 or rank != 4 or ceil or any(d != 1 for d in dil):
        return False
    return all(isinstance(p, int) and p <= kernel[i % 2] // 2 for i, p in enumerate(pads))


def max_pool(n: Node, x: Value) -> Any:
    kernel, strides, dil, pads = _pool_params(n, x)
    ceil = bool(n.attr("ceil_mode", 0))
    t, pads = _pad_explicitly(V.tensor(x), pads, -np.inf)
    attrs = _window_attrs(kernel, strides, dil, pads, ceil)
    if _plain_2d(kernel, dil, pads, ceil, len(V.shape_of(t))):
        y = nn.max_pool2d(t, kernel, strides, (pads[0], pads[2], pads[1], pads[3]))
    else:
        y = call("max_pool", t, **attrs)
    if len(n.proto.output) < 2 or not n.proto.output[1]:
        return y
    order = int(n.attr("storage_order", 0))
    return y, call("max_pool_indices", t, storage_order=order, **attrs)


def avg_pool(n: Node, x: Value) -> Any:
    kernel, strides, dil, pads = _pool_params(n, x)
    ceil = bool(n.attr("ceil_mode", 0))
    include = bool(n.attr("count_include_pad", 0))
    if not all(isinstance(p, int) for p in pads) and not include:
        raise n.unsupported(
            "AveragePool with SAME padding of a symbolic size, not counting pads",
            expected="count_include_pad=1, or static spatial sizes",
            found=f"pads {pads}",
        )
    t, pads = _pad_explicitly(V.tensor(x), pads, 0.0)
    if _plain_2d(kernel, dil, pads, ceil, len(V.shape_of(t))):
        return nn.avg_pool2d(t, kernel, strides, (pads[0], pads[2], pads[1], pads[3]), include)
    attrs = _window_attrs(kernel, strides, dil, pads, ceil)
    return call("avg_pool", t, count_include_pad=include, **attrs)


def lp_pool(n: Node, x: Value) -> Value:
    kernel, strides, dil, pads = _pool_params(n, x)
    p = float(n.attr("p", 2))
    powered = call("pow", call("abs", x), p)
    t, pads = _pad_explicitly(V.tensor(powered), pads, 0.0)
    attrs = _window_attrs(kernel, strides, dil, pads, False)
    mean = call("avg_pool", t, count_include_pad=True, **attrs)
    total = call("mul", mean, float(np.prod(kernel)))
    return call("pow", total, 1.0 / p)


def global_pool(kind: str) -> Any:
    def convert(n: Node, x: Value) -> Value:
        rank = len(V.shape_of(x))
        return call(kind, x, axis=tuple(range(2, rank)), keepdims=True)

    convert.__name__ = f"global_{kind}"
    return convert


# -- normalizations -----------------------------------------------------------------------


def _channels(v: Value, rank: int) -> Any:
    """A per-channel vector ``[C]`` shaped to broadcast over ``[N, C, *spatial]``."""
    c = V.shape_of(v)[0]
    return reshape_to(v, (c,) + (1,) * (rank - 2))


def batch_norm(n: Node, x: Value, scale: Value, bias: Value, mean: Value, var: Value) -> Any:
    rank = len(V.shape_of(x))
    eps = float(n.attr("epsilon", 1e-5))
    training = n.opset >= 14 and bool(n.attr("training_mode", 0))
    if training:
        return _batch_norm_training(n, x, scale, bias, mean, var, eps)
    params = [V.known(v) for v in (scale, bias, mean, var)]
    if all(p is not None for p in params):  # fold into one scale and one shift
        s, b, m, v = (np.asarray(p, np.float64) for p in params)
        mul = s / np.sqrt(v + eps)
        dt = V.dtype_of(x)
        shift = (b - m * mul).astype(dt)
        y = call("mul", x, _channels(mul.astype(dt), rank))
        return call("add", y, _channels(shift, rank))
    centered = call("sub", x, _channels(mean, rank))
    inv = call("div", _channels(scale, rank), call("sqrt", call("add", _channels(var, rank), eps)))
    return call("add", call("mul", centered, inv), _channels(bias, rank))


def _batch_norm_training(
    n: Node, x: Value, scale: Value, bias: Value, mean: Value, var: Value, eps: float
) -> Any:
    rank = len(V.shape_of(x))
    axes = (0, *range(2, rank))
    mu = call("mean", x, axis=axes, keepdims=True)
    centered = call("sub", x, mu)
    var_b = call("mean", call("mul", centered, centered), axis=axes, keepdims=True)
    y = call("mul", centered, call("div", 1.0, call("sqrt", call("add", var_b, eps))))
    y = call("add", call("mul", y, _channels(scale, rank)), _channels(bias, rank))
    momentum = float(n.attr("momentum", 0.9))
    c = V.shape_of(x)[1]
    new_mean = call(
        "add", call("mul", mean, momentum), call("mul", reshape_to(mu, (c,)), 1 - momentum)
    )
    new_var = call(
        "add", call("mul", var, momentum), call("mul", reshape_to(var_b, (c,)), 1 - momentum)
    )
    return y, new_mean, new_var


def _normalize(x: Any, axes: tuple[int, ...], eps: float) -> tuple[Any, Any, Any]:
    """``(x - mean) / sqrt(var + eps)`` over ``axes``, and the mean and 1/std it used."""
    mu = call("mean", x, axis=axes, keepdims=True)
    centered = call("sub", x, mu)
    var = call("mean", call("mul", centered, centered), axis=axes, keepdims=True)
    inv = call("div", 1.0, call("sqrt", call("add", var, eps)))
    return call("mul", centered, inv), mu, inv


def instance_norm(n: Node, x: Value, scale: Value, bias: Value) -> Value:
    rank = len(V.shape_of(x))
    y, _, _ = _normalize(x, tuple(range(2, rank)), float(n.attr("epsilon", 1e-5)))
    return call("add", call("mul", y, _channels(scale, rank)), _channels(bias, rank))


def layer_norm(n: Node, x: Value, scale: Value, bias: Value | None = None) -> Any:
    rank = len(V.shape_of(x))
    axis = int(n.attr("axis", -1)) % rank
    y, mu, inv = _normalize(x, tuple(range(axis, rank)), float(n.attr("epsilon", 1e-5)))
    y = call("mul", y, scale)
    if bias is not None:
        y = call("add", y, bias)
    return y, mu, inv


def group_norm(n: Node, x: Value, scale: Value, bias: Value) -> Value:
    dims_ = V.shape_of(x)
    rank = len(dims_)
    g = int(n.attr("num_groups"))
    nn_, c = dims_[:2]
    grouped = reshape_to(x, (nn_, g, c // g, *dims_[2:]))
    y, _, _ = _normalize(grouped, tuple(range(2, rank + 1)), float(n.attr("epsilon", 1e-5)))
    y = reshape_to(y, tuple(dims_))
    if n.opset < 21:  # scale and bias per group
        scale = reshape_to(snp.broadcast_to(reshape_to(scale, (g, 1)), (g, c // g)), (c,))
        bias = reshape_to(snp.broadcast_to(reshape_to(bias, (g, 1)), (g, c // g)), (c,))
    return call("add", call("mul", y, _channels(scale, rank)), _channels(bias, rank))


def lrn(n: Node, x: Value) -> Value:
    size = int(n.attr("size"))
    alpha, beta = float(n.attr("alpha", 1e-4)), float(n.attr("beta", 0.75))
    bias = float(n.attr("bias", 1.0))
    rank = len(V.shape_of(x))
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = call("mul", x, x)
    padded = call(
        "pad", sq, low=(0, lo) + (0,) * (rank - 2), high=(0, hi) + (0,) * (rank - 2), value=0.0
    )
    c = V.shape_of(x)[1]
    total = None
    for i in range(size):
        part = slice_axis(padded, 1, i, i + c, 1)
        total = part if total is None else call("add", total, part)
    scale = call("pow", call("add", call("mul", total, alpha / size), bias), beta)
    return call("div", x, scale)


def lp_norm(n: Node, x: Value) -> Value:
    rank = len(V.shape_of(x))
    axis = int(n.attr("axis", -1)) % rank
    p = int(n.attr("p", 2))
    if p == 1:
        norm = call("sum", call("abs", x), axis=(axis,), keepdims=True)
    else:
        norm = call("sqrt", call("sum", call("mul", x, x), axis=(axis,), keepdims=True))
    zero = call("equal", norm, 0)  # a zero vector stays zero (no 0 / 0)
    return call("div", x, call("where", zero, 1.0, norm))


def mvn(n: Node, x: Value) -> Any:
    axes = tuple(int(a) for a in n.attr("axes", [0, 2, 3]))
    y, _, _ = _normalize(x, axes, 1e-9)
    return y


def rms_norm(n: Node, x: Value, scale: Value) -> Value:
    rank = len(V.shape_of(x))
    axis = int(n.attr("axis", -1)) % rank
    ms = call("mean", call("mul", x, x), axis=tuple(range(axis, rank)), keepdims=True)
    inv = call("div", 1.0, call("sqrt", call("add", ms, float(n.attr("epsilon", 1e-5)))))
    return call("mul", call("mul", x, inv), scale)


# -- products -----------------------------------------------------------------------------


def matmul(n: Node, a: Value, b: Value) -> Value:
    return call("matmul", a, b)


def gemm(n: Node, a: Value, b: Value, c: Value | None = None) -> Any:
    alpha, beta = float(n.attr("alpha", 1.0)), float(n.attr("beta", 1.0))
    if n.attr("transA", 0):
        a = _t(a)
    if n.attr("transB", 0):
        b = _t(b)
    y = call("matmul", a, b)
    if alpha != 1.0:
        y = call("mul", y, alpha)
    if c is None or beta == 0.0:
        return y
    cc = V.known(c)
    if cc is not None and beta != 1.0:
        return call("add", y, (cc * beta).astype(cc.dtype))
    return call("add", y, c if beta == 1.0 else call("mul", c, beta))


def _t(v: Value) -> Any:
    # a transposed view, also of a constant weight: x @ W.T is the dense layer the JIT knows
    if V.is_known(v) and not isinstance(v, np.ndarray):
        return call("transpose", V.tensor(v), perm=(1, 0))
    return bind_op("transpose", [v], {"perm": (1, 0)}, lazy=True)


def einsum(n: Node, *xs: Value) -> Value:
    # NumPy's rule for an implicit output is ONNX's; the products where the equation is one
    out: Value = snp.einsum(str(n.attr("equation")), *(V.tensor(x) for x in xs))
    return out


OPS: dict[str, Op] = {
    "Conv": Op(conv, check=_AUTO_PAD),
    "ConvTranspose": Op(conv_transpose, check=_AUTO_PAD),
    "MaxPool": Op(max_pool, arith=False, check=_AUTO_PAD),
    "AveragePool": Op(avg_pool, check=_AUTO_PAD),
    "LpPool": Op(lp_pool, check=checks(_AUTO_PAD, attr_is("ceil_mode", (0,), 0))),
    "GlobalAveragePool": Op(global_pool("mean")),
    "GlobalMaxPool": Op(global_pool("max"), arith=False),
    "BatchNormalization": Op(batch_norm, check=attr_is("spatial", (1,), 1)),
    "InstanceNormalization": Op(instance_norm),
    "LayerNormalization": Op(layer_norm),
    "GroupNormalization": Op(group_norm),
    "RMSNormalization": Op(rms_norm),
    "LRN": Op(lrn),
    "LpNormalization": Op(lp_norm, check=attr_is("p", (1, 2), 2)),
    "MeanVarianceNormalization": Op(mvn),
    "MatMul": Op(matmul),
    "Gemm": Op(gemm),
    "Einsum": Op(einsum),
}
