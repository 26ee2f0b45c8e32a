"""Rows of the op table for N-d window ops: pooling, transposed convolution, resizing.

``max_pool`` and ``avg_pool`` pool any number of trailing axes with dilation, asymmetric
padding and ``ceil_mode`` (ONNX and PyTorch semantics); ``max_pool2d``/``avg_pool2d`` are
their 2-D special case that the JIT has native kernels for. Kernels loop over the kernel
taps and combine strided views of the padded input, so the work is NumPy's.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from shapevm.ops import shape_rules_window as rules
from shapevm.ops.core import REQUIRED, AttrKind, AttrSpec, OpFlag
from shapevm.ops.dtype_rules import float_dtype, numeric_dtype, numeric_index_dtype
from shapevm.ops.resize import resize_along
from shapevm.ops.table import define
from shapevm.ops.table_nn import compute_dtype

Array = np.ndarray[Any, Any]
Attrs = Mapping[str, Any]


class _Geometry:
    """Per spatial axis: kernel, stride, dilation, leading pad and output size."""

    __slots__ = ("dil", "kernel", "lead", "out", "pad", "stride")

    def __init__(self, x: Array, attrs: Attrs) -> None:
        self.kernel = tuple(attrs["kernel"])
        n = len(self.kernel)
        self.stride = tuple(attrs["stride"] or (1,) * n)
        self.dil = tuple(attrs["dilation"] or (1,) * n)
        pads = tuple(attrs["pads"] or (0,) * (2 * n))
        self.pad = tuple(zip(pads[:n], pads[n:], strict=True))
        self.lead = x.ndim - n
        self.out = tuple(
            _out_size(
                x.shape[self.lead + i],
                self.kernel[i],
                self.pad[i],
                self.stride[i],
                self.dil[i],
                bool(attrs["ceil_mode"]),
            )
            for i in range(n)
        )

    def padded(self, x: Array, fill: float) -> Array:
        """``x`` padded at the front and as far at the back as the last window reaches."""
        shape = list(x.shape[: self.lead])
        inner = []
        for i, (k, s, d, (lo, _), o) in enumerate(
            zip(self.kernel, self.stride, self.dil, self.pad, self.out, strict=True)
        ):
            n = x.shape[self.lead + i]
            need = max((o - 1) * s + (k - 1) * d + 1, lo + n)
            shape.append(need)
            inner.append(slice(lo, lo + n))
        out = np.full(shape, fill, dtype=x.dtype)
        body: tuple[Any, ...] = (Ellipsis, *inner)
        out[body] = x
        return out

    def taps(self) -> Any:
        """Each kernel tap as (tap index per axis, the strided index of its values)."""
        for tap in itertools.product(*(range(k) for k in self.kernel)):
            index = tuple(
                slice(t * d, t * d + (o - 1) * s + 1, s)
                for t, d, o, s in zip(tap, self.dil, self.out, self.stride, strict=True)
            )
            yield tap, (..., *index)


def _out_size(n: int, k: int, pad: tuple[int, int], s: int, d: int, ceil: bool) -> int:
    room = n + pad[0] + pad[1] - (d * (k - 1) + 1)
    if not ceil:
        return room // s + 1
    return min((room + s - 1) // s + 1, (n + pad[0] - 1) // s + 1)


def _lowest(dtype: np.dtype[Any]) -> float:
    return -np.inf if dtype.kind == "f" else int(np.iinfo(dtype).min)


def _max_pool(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    x = np.asarray(args[0])
    geo = _Geometry(x, attrs)
    xp = geo.padded(x, _lowest(x.dtype))
    acc: Array | None = None
    for _, index in geo.taps():
        acc = xp[index].copy() if acc is None else np.maximum(acc, xp[index], out=acc)
    assert acc is not None
    return (acc,)


def _max_pool_indices(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    """Where each maximum is, as a flat index into the whole input (padding excluded);
    ``storage_order`` 1 counts the spatial axes in column-major order."""
    x = np.asarray(args[0])
    geo = _Geometry(x, attrs)
    xp = geo.padded(x, _lowest(x.dtype))
    best: Array | None = None
    where = np.zeros(xp[next(geo.taps())[1]].shape, dtype=np.int64)
    spatial = x.shape[geo.lead :]
    n_sp = len(spatial)
    order = list(range(n_sp))[:: -1 if attrs["storage_order"] else 1]
    for tap, index in geo.taps():
        values = xp[index]
        flat = np.zeros((1,) * n_sp, dtype=np.int64)
        for i in order:  # the input position of this tap, per output element
            pos = np.arange(geo.out[i]) * geo.stride[i] + tap[i] * geo.dil[i] - geo.pad[i][0]
            flat = flat * spatial[i] + pos.reshape((-1,) + (1,) * (n_sp - 1 - i))
        if best is None:
            best = values.copy()
            where[...] = flat
            continue
        better = values > best
        best = np.where(better, values, best)
        where = np.where(better, flat, where)
    lead = np.arange(int(np.prod(x.shape[: geo.lead], dtype=np.int64))).reshape(
        x.shape[: geo.lead] + (1,) * n_sp
    )
    return (where + lead * int(np.prod(spatial, dtype=np.int64)),)


def _avg_pool(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    x = np.asarray(args[0])
    calc = compute_dtype(x.dtype)
    geo = _Geometry(x, attrs)
    xp = geo.padded(x.astype(calc, copy=False), 0)
    acc: Array | None = None
    for _, index in geo.taps():
        acc = xp[index].copy() if acc is None else np.add(acc, xp[index], out=acc)
    assert acc is not None
    count = np.ones((), dtype=calc)
    for i in range(len(geo.kernel)):
        along = _window_counts(x.shape[geo.lead + i], geo, i, bool(attrs["count_include_pad"]))
        count = np.multiply.outer(count, along.astype(calc))
    return ((acc / count).astype(x.dtype, copy=False),)


def _window_counts(n: int, geo: _Geometry, i: int, include_pad: bool) -> Array:
    """How many taps of each window along axis ``i`` count: inside the input, or inside
    the input and its padding (never the part a ceil-mode window hangs over)."""
    lo, hi = geo.pad[i]
    starts = np.arange(geo.out[i]) * geo.stride[i]
    taps = starts[:, None] + np.arange(geo.kernel[i])[None, :] * geo.dil[i]
    first, last = (0, lo + n + hi) if include_pad else (lo, lo + n)
    counts: Array = ((taps >= first) & (taps < last)).sum(axis=1)
    return np.maximum(counts, 1)


def _conv_transpose(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    """Each input element scatters ``x * w`` over a window of the output: one product per
    group for all taps, then one strided add per kernel tap."""
    x, w = np.asarray(args[0]), np.asarray(args[1])
    calc = compute_dtype(x.dtype)
    g = attrs["groups"]
    n = x.shape[0]
    cg, og = w.shape[0] // g, w.shape[1]
    kernel, spatial = w.shape[2:], x.shape[2:]
    nsp = len(kernel)
    stride = tuple(attrs["stride"] or (1,) * nsp)
    dil = tuple(attrs["dilation"] or (1,) * nsp)
    pads = tuple(attrs["pads"] or (0,) * (2 * nsp))
    extra = tuple(attrs["output_padding"] or (0,) * nsp)
    length = int(np.prod(spatial, dtype=np.int64))
    cols = x.reshape(n, g, cg, length).transpose(0, 1, 3, 2).astype(calc)  # [N, G, L, Cg]
    wm = w.reshape(g, cg, og * int(np.prod(kernel, dtype=np.int64))).astype(calc)
    prod = np.matmul(cols, wm).reshape(n, g, *spatial, og, *kernel)  # [N, G, *in, Og, *k]
    full = [
        s * (i - 1) + d * (k - 1) + 1 + e
        for s, i, d, k, e in zip(stride, spatial, dil, kernel, extra, strict=True)
    ]
    out = np.zeros((n, g, og, *full), dtype=calc)
    moved = np.moveaxis(prod, 2 + nsp, 2)  # [N, G, Og, *in, *k]
    for tap in itertools.product(*(range(k) for k in kernel)):
        index = tuple(
            slice(t * d, t * d + s * (i - 1) + 1, s)
            for t, d, s, i in zip(tap, dil, stride, spatial, strict=True)
        )
        into, tap_values = (slice(None),) * 3 + index, (Ellipsis, *tap)
        out[into] += moved[tap_values]
    out = out.reshape(n, g * og, *full)
    crop = tuple(slice(lo, f - hi) for lo, hi, f in zip(pads[:nsp], pads[nsp:], full, strict=True))
    out = out[(slice(None),) * 2 + crop]
    if len(args) > 2:
        out = out + np.asarray(args[2]).astype(calc).reshape((-1,) + (1,) * nsp)
    return (np.ascontiguousarray(out, dtype=x.dtype),)


def _resize_axis(args: Sequence[Any], attrs: Attrs) -> tuple[Array, ...]:
    x = np.asarray(args[0])
    (size,) = attrs["size"]
    return (resize_along(x, attrs["axis"] % x.ndim, size, attrs),)


_N = "one value per pooled axis"
_POOL = (
    AttrSpec("kernel", AttrKind.INTS, REQUIRED, f"window size, {_N}"),
    AttrSpec("stride", AttrKind.INTS, None, f"step of the window, {_N}; 1 when absent"),
    AttrSpec("dilation", AttrKind.INTS, None, f"spacing of window taps, {_N}; 1 when absent"),
    AttrSpec("pads", AttrKind.INTS, None, "padding: the begins of each axis, then the ends"),
    AttrSpec(
        "ceil_mode",
        AttrKind.BOOL,
        False,
        "round the output size up (last window may hang over the end, but starts inside)",
    ),
)
define(
    "max_pool",
    1,
    rules.pool,
    numeric_dtype,
    _max_pool,
    OpFlag.NONE,
    "max over windows of the trailing len(kernel) axes (ONNX MaxPool)",
    _POOL,
)
define(
    "max_pool_indices",
    1,
    rules.pool,
    numeric_index_dtype,
    _max_pool_indices,
    OpFlag.NONE,
    "flat i64 index into x of each max_pool maximum (first one on ties)",
    (*_POOL, AttrSpec("storage_order", AttrKind.INT, 0, "0 row-major, 1 column-major")),
)
define(
    "avg_pool",
    1,
    rules.pool,
    float_dtype,
    _avg_pool,
    OpFlag.NONE,
    "mean over windows of the trailing len(kernel) axes (ONNX AveragePool)",
    (*_POOL, AttrSpec("count_include_pad", AttrKind.BOOL, False, "divide by taps in padding too")),
)
define(
    "conv_transpose",
    (2, 3),
    rules.conv_transpose,
    float_dtype,
    _conv_transpose,
    OpFlag.NONE,
    "transposed N-d convolution, [N, C, *in] input, [C, O/groups, *k] weight, bias [O]",
    (
        AttrSpec("stride", AttrKind.INTS, None, "step per spatial axis; 1 when absent"),
        AttrSpec("pads", AttrKind.INTS, None, "output cropped: begins, then ends"),
        AttrSpec("dilation", AttrKind.INTS, None, "spacing of kernel taps; 1 when absent"),
        AttrSpec("output_padding", AttrKind.INTS, None, "zeros added at the end of each axis"),
        AttrSpec("groups", AttrKind.INT, 1, "channel groups"),
    ),
)
define(
    "resize_axis",
    1,
    rules.resize_axis,
    numeric_dtype,
    _resize_axis,
    OpFlag.NONE,
    "x interpolated along one axis to size (nearest, linear or cubic; ONNX Resize per axis)",
    (
        AttrSpec("axis", AttrKind.INT, REQUIRED, "the axis resized"),
        AttrSpec("size", AttrKind.DIMS, REQUIRED, "the new size: one dimension"),
        AttrSpec("scale", AttrKind.FLOAT, 0.0, "the scale factor; 0 means size / input size"),
        AttrSpec("mode", AttrKind.STR, "nearest", "nearest, linear or cubic"),
        AttrSpec("coordinate", AttrKind.STR, "half_pixel", "ONNX coordinate_transformation_mode"),
        AttrSpec("nearest", AttrKind.STR, "round_prefer_floor", "ONNX nearest_mode"),
        AttrSpec("cubic_a", AttrKind.FLOAT, -0.75, "the cubic coefficient a"),
        AttrSpec("exclude_outside", AttrKind.BOOL, False, "weights outside the input are 0"),
        AttrSpec("antialias", AttrKind.BOOL, False, "widen the filter when downsampling"),
        AttrSpec("roi_start", AttrKind.FLOAT, 0.0, "tf_crop_and_resize: start of the region"),
        AttrSpec("roi_end", AttrKind.FLOAT, 1.0, "tf_crop_and_resize: end of the region"),
        AttrSpec("extrapolation", AttrKind.FLOAT, 0.0, "tf_crop_and_resize: value outside"),
    ),
)
