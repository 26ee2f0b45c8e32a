"""Pooling against the op table's reference at every instruction-set level: hypothesis
draws the batch, channels, odd image sizes, windows, strides and asymmetric padding; max
pooling is exact, averages within 1e-5 relative of float64."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shapevm import native
from shapevm.ops import get_op
from tests.native.reference import rel_err

Array = np.ndarray[Any, Any]


def _data(seed: int, *shape: int) -> Array:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def reference(op: str, x: Array, dtype: type, **attrs: Any) -> Array:
    info = get_op(op)
    assert info is not None
    out: Array = info.kernel([x.astype(dtype)], info.filled_attrs(attrs))[0]
    return out


@st.composite
def windows(draw: st.DrawFn) -> dict[str, Any]:
    kernel = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    pad = tuple(draw(st.integers(0, kernel[i // 2] // 2)) for i in range(4))
    lead = draw(st.sampled_from([(1, 1), (2, 3), (3,), (1, 17)]))
    return {
        "shape": (
            *lead,
            max(draw(st.integers(1, 40)), kernel[0] - pad[0] - pad[1]),
            max(draw(st.integers(1, 40)), kernel[1] - pad[2] - pad[3]),
        ),
        "kernel": kernel,
        "stride": (draw(st.integers(1, 3)), draw(st.integers(1, 3))),
        "padding": pad,
    }


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(g=windows(), kind=st.sampled_from(["max", "avg", "avg_exclude_pad"]))
def test_pooling_matches_the_op_table(isa: str, g: dict[str, Any], kind: str) -> None:
    x = _data(1, *g["shape"])
    attrs = {k: g[k] for k in ("kernel", "stride", "padding")}
    if kind == "max":
        y = native.max_pool2d(x, **attrs)
        np.testing.assert_array_equal(y, reference("max_pool2d", x, np.float32, **attrs))
        return
    include = kind == "avg"
    y = native.avg_pool2d(x, **attrs, count_include_pad=include)
    ref = reference("avg_pool2d", x, np.float64, **attrs, count_include_pad=include)
    assert y.shape == ref.shape and y.dtype == np.float32
    assert rel_err(y, ref) < 1e-5


def test_max_pool_propagates_nan_and_ignores_padding(isa: str) -> None:
    x = -np.ones((1, 1, 4, 20), np.float32) * 5.0
    x[0, 0, 1, 9] = np.nan
    y = native.max_pool2d(x, 3, stride=1, padding=1)
    assert np.isnan(y[0, 0, :3, 8:11]).all()
    assert (y[0, 0, 3] == -5.0).all() and y[0, 0, 0, 0] == -5.0


def test_pooling_threads_and_out(isa: str) -> None:
    x = _data(2, 4, 32, 61, 63)
    out = np.empty((4, 32, 31, 32), np.float32)
    y = native.avg_pool2d(x, 3, stride=2, padding=1, out=out, threads=0)
    assert y is out
    one = native.avg_pool2d(x, 3, stride=2, padding=1, threads=1)
    np.testing.assert_array_equal(y, one)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(n=st.integers(1, 3), c=st.integers(1, 40), h=st.integers(1, 70), w=st.integers(1, 70))
def test_global_avg_pool(isa: str, n: int, c: int, h: int, w: int) -> None:
    x = _data(3, n, c, h, w) + np.float32(0.5)
    ref = x.astype(np.float64).mean((2, 3))
    assert rel_err(native.global_avg_pool(x), ref) < 1e-5
    assert rel_err(native.global_avg_pool_blocked(native.to_blocked(x), c), ref) < 1e-5
    kept = native.global_avg_pool(x, keepdims=True)
    assert kept.shape == (n, c, 1, 1)
    out = np.empty((n, c, 1, 1), np.float32)
    assert native.global_avg_pool(x, out=out, keepdims=True) is out
    np.testing.assert_array_equal(out, kept)


def test_global_avg_pool_of_many_pixels_on_the_pool(isa: str) -> None:
    x = _data(4, 2, 64, 112, 112)
    ref = x.astype(np.float64).mean((2, 3))
    scale = float(np.abs(x).mean())  # the mean of noise is small: compare with the data
    assert np.abs(native.global_avg_pool(x) - ref).max() / scale < 1e-5
    got = native.global_avg_pool_blocked(native.to_blocked(x), 64)
    assert np.abs(got - ref).max() / scale < 1e-5
