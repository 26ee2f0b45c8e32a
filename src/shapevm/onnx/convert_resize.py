"""Converters of ONNX ``Resize`` and ``Upsample``: one ``resize_axis`` op per resized axis.

Interpolation in ONNX is separable, so resizing ``[N, C, H, W]`` by scales ``[1, 1, 2, 2]``
is a resize of axis 2, then of axis 3. An output size ``floor(h * scale)`` stays symbolic:
a float scale is an exact binary fraction ``p / 2**q``, so the size is ``(p*h) // 2**q``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from shapevm.onnx import values as V
from shapevm.onnx.convert_math import call
from shapevm.onnx.node import Node, Op, attr_is, checks
from shapevm.onnx.values import Value
from shapevm.shapes import DimExpr


def scaled_size(d: Any, scale: float) -> Any:
    """``floor(d * scale)``, exactly, for an int or a symbolic ``d``."""
    if isinstance(d, int):
        return int(np.floor(float(d) * scale))
    frac = Fraction(scale)
    if frac.denominator == 1:
        return d * frac.numerator
    return (d * frac.numerator) // frac.denominator


def _floats(v: Value | None, what: str) -> list[float] | None:
    if v is None or V.shape_of(v) == (0,):
        return None
    return [float(f) for f in V.constant(v, what).reshape(-1)]


def resize(
    n: Node,
    x: Value,
    roi: Value | None = None,
    scales: Value | None = None,
    sizes: Value | None = None,
) -> Value:
    dims_ = V.shape_of(x)
    rank = len(dims_)
    if n.opset < 11:  # Resize-10: (X, scales), asymmetric coordinates
        scales, roi = roi, None
    axes = [int(a) % rank for a in n.attr("axes", range(rank))]
    scale_list = _floats(scales, "scales")
    size_list = None if sizes is None or V.shape_of(sizes) == (0,) else V.dims(sizes, "sizes")
    outs, factors = _targets(n, dims_, axes, scale_list, size_list)
    rois = _floats(roi, "roi")
    opts = _options(n)
    out = x
    for i, a in enumerate(axes):
        roi_a = (rois[i], rois[len(axes) + i]) if rois else (0.0, 1.0)
        same_size = not isinstance(outs[i], DimExpr) and outs[i] == dims_[a]
        if factors[i] in (0.0, 1.0) and same_size and roi_a == (0.0, 1.0):
            continue
        out = call(
            "resize_axis",
            out,
            axis=a,
            size=(outs[i],),
            scale=factors[i],
            roi_start=roi_a[0],
            roi_end=roi_a[1],
            **opts,
        )
    return out


def _targets(
    n: Node,
    dims_: tuple[Any, ...],
    axes: list[int],
    scales: list[float] | None,
    sizes: tuple[Any, ...] | None,
) -> tuple[list[Any], list[float]]:
    """Output size and scale factor per resized axis (factor 0: output size / input size)."""
    if len(axes) < len(dims_) and scales is not None and len(scales) == len(dims_):
        scales = [scales[a] for a in axes]
    if scales is not None:
        return [scaled_size(dims_[a], s) for a, s in zip(axes, scales, strict=True)], scales
    if sizes is None:
        raise n.unsupported(
            "Resize without scales or sizes", expected="scales or sizes", found="neither"
        )
    if len(axes) < len(dims_) and len(sizes) == len(dims_):
        sizes = tuple(sizes[a] for a in axes)
    policy = n.attr("keep_aspect_ratio_policy", "stretch")
    if policy == "stretch":
        return list(sizes), [0.0] * len(axes)
    ins = [dims_[a] for a in axes]
    if not all(isinstance(d, int) for d in (*ins, *sizes)):
        raise n.unsupported(
            f"keep_aspect_ratio_policy={policy!r} with symbolic sizes",
            expected="static input and output sizes",
            found=str(ins),
        )
    ratios = [s / d for s, d in zip(sizes, ins, strict=True)]
    scale = min(ratios) if policy == "not_larger" else max(ratios)
    return [int(scale * d + 0.5) for d in ins], [scale] * len(axes)


def _options(n: Node) -> dict[str, Any]:
    mode = n.attr("mode", "nearest")
    if n.opset < 11:
        return {"mode": mode, "coordinate": "asymmetric", "nearest": "floor"}
    return {
        "mode": mode,
        "coordinate": n.attr("coordinate_transformation_mode", "half_pixel"),
        "nearest": n.attr("nearest_mode", "round_prefer_floor"),
        "cubic_a": float(n.attr("cubic_coeff_a", -0.75)),
        "exclude_outside": bool(n.attr("exclude_outside", 0)),
        "antialias": bool(n.attr("antialias", 0)),
        "extrapolation": float(n.attr("extrapolation_value", 0.0)),
    }


def upsample(n: Node, x: Value, scales: Value | None = None) -> Value:
    factors = list(n.attr("scales")) if n.opset < 9 else _floats(scales, "scales")
    assert factors is not None
    dims_ = V.shape_of(x)
    out = x
    for a, s in enumerate(factors):
        if s == 1.0:
            continue
        out = call(
            "resize_axis",
            out,
            axis=a,
            size=(scaled_size(dims_[a], s),),
            scale=float(s),
            mode=n.attr("mode", "nearest"),
            coordinate="asymmetric",
            nearest="floor",
        )
    return out


_COORDS = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_crop_and_resize",
)
OPS: dict[str, Op] = {
    "Resize": Op(
        resize,
        known=(1, 2, 3),
        check=checks(
            attr_is("mode", ("nearest", "linear", "cubic"), "nearest"),
            attr_is("coordinate_transformation_mode", _COORDS, "half_pixel"),
            attr_is(
                "nearest_mode",
                ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"),
                "round_prefer_floor",
            ),
            attr_is(
                "keep_aspect_ratio_policy", ("stretch", "not_larger", "not_smaller"), "stretch"
            ),
        ),
    ),
    "Upsample": Op(upsample, known=(1,), check=attr_is("mode", ("nearest", "linear"), "nearest")),
}
