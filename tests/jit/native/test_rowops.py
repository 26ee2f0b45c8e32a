"""Layer norm, softmax, bias + activation and attention against float64 references."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba", exc_type=ImportError)

from shapevm.jit.native import (
    NativeKernelError,
    attention,
    bias_act,
    layer_norm,
    rowops,
    softmax_rows,
    thread_stats,
)
from tests.jit.native import reference as ref
from tests.jit.native.reference import rel_err

SHAPES = [(1,), (7,), (3, 256), (2, 5, 33), (4, 1)]


@pytest.mark.parametrize("shape", SHAPES)
def test_layer_norm_with_and_without_residual(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 3 + 100).astype(np.float32)  # a large mean
    r = rng.standard_normal(shape).astype(np.float32)
    g = (1 + 0.1 * rng.standard_normal(shape[-1])).astype(np.float32)
    b = (0.1 * rng.standard_normal(shape[-1])).astype(np.float32)
    out = np.empty_like(x)
    layer_norm(x, g, b, 1e-5, out)
    assert rel_err(out, ref.layer_norm(x, g, b, 1e-5)) < 1e-5
    layer_norm(x, g, b, 1e-5, out, residual=r)
    assert rel_err(out, ref.layer_norm(x, g, b, 1e-5, r)) < 1e-5
    expected = ref.layer_norm(x, g, b, 1e-5)
    layer_norm(x, g, b, 1e-5, x)  # in place
    assert rel_err(x, expected) < 1e-5


@pytest.mark.usefixtures("threads_on")
def test_layer_norm_many_rows_use_threads() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((300, 256)).astype(np.float32)
    r = rng.standard_normal((300, 256)).astype(np.float32)
    g, b = np.ones(256, np.float32), np.zeros(256, np.float32)
    before = thread_stats()["parallel"]
    out = layer_norm(x, g, b, 1e-5, np.empty_like(x), residual=r)
    assert rel_err(out, ref.layer_norm(x, g, b, 1e-5, r)) < 1e-5
    assert thread_stats()["parallel"] == before + 1


@pytest.mark.parametrize("shape", [*SHAPES, (200, 200)])
def test_softmax_rows(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(sum(shape) + 1)
    x = (rng.standard_normal(shape) * 20).astype(np.float32)
    for scale in (1.0, 0.125, -2.0):
        out = softmax_rows(x, np.empty_like(x), scale)
        assert rel_err(out, ref.softmax(x, scale)) < 1e-5
    expected = ref.softmax(x)
    softmax_rows(x, x)  # in place
    assert rel_err(x, expected) < 1e-5


def test_softmax_masks_and_nan() -> None:
    x = np.float32([[0.0, -np.inf, np.log(3.0)], [1.0, np.nan, 0.0]])
    out = softmax_rows(x, np.empty_like(x))
    assert np.allclose(out[0], [0.25, 0.0, 0.75], rtol=1e-6)
    assert np.isnan(out[1]).all()


@pytest.mark.parametrize("name", ["none", "relu", "gelu_tanh", "gelu_erf", "silu"])
def test_bias_act(name: str) -> None:
    rng = np.random.default_rng(11)
    for shape in [(5,), (3, 7), (2, 3, 64), (200, 256)]:
        x = (3 * rng.standard_normal(shape)).astype(np.float32)
        b = rng.standard_normal(shape[-1]).astype(np.float32)
        out = bias_act(x, b, name, np.empty_like(x))
        assert rel_err(out, ref.act(name, x.astype(np.float64) + b)) < 1e-5
        out = bias_act(x, None, name, np.empty_like(x))
        assert rel_err(out, ref.act(name, x)) < 1e-5
        expected = ref.act(name, x.astype(np.float64) + b)
        bias_act(x, b, name, x)  # in place
        assert rel_err(x, expected) < 1e-5


def _qkv(rng: np.random.Generator, b: int, s: int, h: int, d: int):
    """q, k, v as the strided views of one fused projection, as in BENCHMARKS.md's W3."""
    qkv = rng.standard_normal((b, s, 3 * h * d)).astype(np.float32)
    qkv = qkv.reshape(b, s, 3, h, d).transpose(2, 0, 3, 1, 4)
    return qkv[0], qkv[1], qkv[2]


@pytest.mark.parametrize("b,s,h,d", [(1, 1, 1, 64), (1, 16, 4, 64), (2, 37, 4, 64), (1, 5, 2, 7)])
def test_attention_on_strided_views(b: int, s: int, h: int, d: int) -> None:
    rng = np.random.default_rng(b * 100 + s)
    q, k, v = _qkv(rng, b, s, h, d)
    o = np.empty((b, s, h, d), np.float32)
    out = o.transpose(0, 2, 1, 3)  # writes [b, s, h, d] directly
    attention(q, k, v, out, 1.0 / np.sqrt(d))
    assert rel_err(out, ref.attention(q, k, v, 1.0 / np.sqrt(d))) < 1e-5


@pytest.mark.usefixtures("threads_on")
@pytest.mark.parametrize("s,t", [(20, 30), (50, 70)])
def test_attention_cross_lengths_fused_on_threads_and_through_blas(s: int, t: int) -> None:
    rng = np.random.default_rng(s)
    q = rng.standard_normal((2, 4, s, 64)).astype(np.float32)
    k = rng.standard_normal((2, 4, t, 64)).astype(np.float32)
    v = rng.standard_normal((2, 4, t, 64)).astype(np.float32)
    fused = s * t < rowops.ATTENTION_BLAS_MIN_SCORES
    before = thread_stats()["parallel"]
    out = attention(q, k, v, np.empty_like(q), 0.125)
    assert rel_err(out, ref.attention(q, k, v, 0.125)) < 1e-5
    if fused:
        assert thread_stats()["parallel"] == before + 1


def test_row_op_errors() -> None:
    x = np.ones((2, 4), np.float32)
    with pytest.raises(NativeKernelError) as e:
        layer_norm(x, np.ones(3, np.float32), np.ones(4, np.float32), 1e-5, np.empty_like(x))
    assert "expected: gamma: f32[4]" in str(e.value) and "found:    gamma: f32[3]" in str(e.value)
    with pytest.raises(NativeKernelError, match="out has the wrong shape"):
        softmax_rows(x, np.empty((4, 2), np.float32))
    with pytest.raises(NativeKernelError, match="x must have at least one axis"):
        softmax_rows(np.array(1.0, np.float32), np.empty((), np.float32))
    with pytest.raises(NativeKernelError) as e:
        softmax_rows([1.0, 2.0], np.empty(2, np.float32))
    assert "found:    x: list (not an array)" in str(e.value)
    assert "np.asarray(x, np.float32)" in str(e.value)
    with pytest.raises(NativeKernelError, match="did you mean 'relu'"):
        bias_act(x, None, "relu6", np.empty_like(x))
    q = np.ones((1, 2, 3, 4), np.float32)
    with pytest.raises(NativeKernelError) as e:
        attention(q[0], q, q, q, 1.0)
    assert "q must have rank 4" in str(e.value) and "x.reshape(B, S, H, D)" in str(e.value)
    with pytest.raises(NativeKernelError, match="expected: k: f32"):
        attention(q, np.ones((1, 2, 3, 5), np.float32), q, np.empty_like(q), 1.0)


def test_partially_overlapping_out_is_read_before_written() -> None:
    buf = np.float32([0.0, 1.0, 2.0, 3.0, 4.0])
    x = buf[0:4].reshape(2, 2)
    expected = ref.softmax(x)
    softmax_rows(x, buf[1:5].reshape(2, 2))
    assert rel_err(buf[1:5].reshape(2, 2), expected) < 1e-6
    buf = np.arange(6, dtype=np.float32)
    expected = ref.act("gelu_tanh", buf[0:4] + 1.0)
    bias_act(buf[0:4], np.ones(4, np.float32), "gelu_tanh", buf[2:6])
    assert rel_err(buf[2:6], expected) < 1e-6
