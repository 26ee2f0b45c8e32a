"""Resizing one axis by interpolation: the kernel of the ``resize_axis`` op.

ONNX ``Resize`` is separable, so an N-d resize is one ``resize_axis`` per resized axis.
Each output position ``y`` maps to a source coordinate ``x`` by the coordinate transform
(``half_pixel``: ``(y + 0.5) / scale - 0.5``...), and takes a weighted sum of the input
elements nearest to ``x``: two for ``linear``, four for ``cubic``, more with ``antialias``
when downsampling, one for ``nearest``. Indices past the ends are clamped (edge padding).
The weights are computed in float64 for the whole axis at once, the sum in the input's
float dtype (f32 for f16), and integer inputs are rounded back with saturation.

>>> import numpy as np
>>> x = np.array([[1.0, 2.0, 4.0]], np.float32)
>>> resize_along(x, 1, 6, {"mode": "linear", "coordinate": "align_corners"}).astype(float).round(4)
array([[1. , 1.4, 1.8, 2.4, 3.2, 4. ]])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]

_DEFAULTS: dict[str, Any] = {
    "scale": 0.0,
    "mode": "nearest",
    "coordinate": "half_pixel",
    "nearest": "round_prefer_floor",
    "cubic_a": -0.75,
    "exclude_outside": False,
    "antialias": False,
    "roi_start": 0.0,
    "roi_end": 1.0,
    "extrapolation": 0.0,
}


def source_coordinates(
    mode: str, y: Array, scale: float, n_in: int, n_out: int, roi: tuple[float, float]
) -> Array:
    """The input coordinate of each output position ``y`` (ONNX's coordinate transforms)."""
    width = scale * n_in  # the exact, unrounded output size, as ONNX defines the transforms
    if mode == "align_corners":
        return np.zeros_like(y) if width == 1 else y * (n_in - 1) / (width - 1)
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_crop_and_resize":
        lo, hi = roi
        if width == 1:
            return np.full_like(y, (hi - lo) * (n_in - 1) / 2 + lo * (n_in - 1))
        return y * (hi - lo) * (n_in - 1) / (width - 1) + lo * (n_in - 1)
    if mode == "pytorch_half_pixel":
        return np.full_like(y, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / width)
        return offset + (y + 0.5) / scale - 0.5
    raise ValueError(f"unknown coordinate transformation mode {mode!r}")


def _nearest(ratio: Array, rule: str) -> Array:
    whole = ratio == 1.0
    if rule == "round_prefer_floor":
        right = ratio > 0.5
    elif rule == "round_prefer_ceil":
        right = ratio >= 0.5
    elif rule == "floor":
        right = np.zeros_like(whole)
    elif rule == "ceil":
        right = np.ones_like(whole)
    else:
        raise ValueError(f"unknown nearest mode {rule!r}")
    right = right | whole
    return np.stack([~right, right], axis=1).astype(np.float64)


def _cubic(distance: Array, a: float) -> Array:
    d = np.abs(distance)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    out: Array = np.where(d <= 1, near, np.where(d < 2, far, 0.0))
    return out


def weights(ratio: Array, scale: float, attrs: Mapping[str, Any]) -> Array:
    """``[n_out, taps]`` weights of the taps around each source coordinate."""
    mode = attrs["mode"]
    if mode == "nearest":
        return _nearest(ratio, attrs["nearest"])
    if mode not in ("linear", "cubic"):
        raise ValueError(f"unknown resize mode {mode!r}")
    support = 1 if mode == "linear" else 2
    s = min(scale, 1.0) if attrs["antialias"] else 1.0  # a wider filter when downsampling
    start = int(np.floor(-support / s) + 1)
    offsets = np.arange(start, 2 - start)
    dist = (offsets[None, :] - ratio[:, None]) * s
    w = np.clip(1 - np.abs(dist), 0, 1) if mode == "linear" else _cubic(dist, attrs["cubic_a"])
    if attrs["antialias"]:
        w = w / w.sum(axis=1, keepdims=True)
    return w


def _neighbours(x: Array, taps: int) -> Array:
    """``[n_out, taps]`` indices of the taps nearest ``x`` (ties to the smaller index)."""
    pad = -(-taps // 2)
    xp = x + pad
    base = np.floor(xp).astype(np.int64)
    frac = xp - base
    if taps % 2 == 0:
        offset = np.where(frac == 0, -(taps // 2), -(taps // 2) + 1)
    else:
        low = -((taps - 1) // 2)
        offset = np.where(frac <= 0.5, low, low + 1)
    start = base + offset
    out: Array = start[:, None] + np.arange(taps)[None, :] - pad
    return out


def resize_along(x: Array, axis: int, n_out: int, attrs: Mapping[str, Any]) -> Array:
    """``x`` resized along ``axis`` to ``n_out`` elements (see the module doc)."""
    opts = {**_DEFAULTS, **attrs}
    n_in = x.shape[axis]
    scale = float(opts["scale"]) or n_out / max(n_in, 1)
    if n_out == 0 or n_in == 0:
        shape = list(x.shape)
        shape[axis] = n_out
        return np.zeros(shape, dtype=x.dtype)
    roi = (float(opts["roi_start"]), float(opts["roi_end"]))
    y = np.arange(n_out, dtype=np.float64)
    src = source_coordinates(opts["coordinate"], y, scale, n_in, n_out, roi)
    floor = np.floor(src)
    ratio = np.where(src == floor, 1.0, src - floor)
    w = weights(ratio, scale, opts)
    idx = _neighbours(src, w.shape[1])
    if opts["exclude_outside"]:
        w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
        total = w.sum(axis=1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    calc = np.float64 if x.dtype == np.float64 else np.float32
    taken = np.take(x, np.clip(idx, 0, n_in - 1), axis=axis).astype(calc, copy=False)
    shape = (1,) * axis + w.shape + (1,) * (x.ndim - axis - 1)
    out = (taken * w.astype(calc).reshape(shape)).sum(axis=axis + 1)
    if opts["coordinate"] == "tf_crop_and_resize":
        outside = ((src < 0) | (src > n_in - 1)).reshape((1,) * axis + (n_out,) + shape[axis + 2 :])
        out = np.where(outside, calc(opts["extrapolation"]), out)
    return _round_to(out, x.dtype)


def _round_to(values: Array, dtype: np.dtype[Any]) -> Array:
    if dtype.kind == "f":
        return values.astype(dtype)
    info = np.iinfo(dtype)
    out: Array = np.rint(np.clip(values, info.min, info.max)).astype(dtype)
    return out
