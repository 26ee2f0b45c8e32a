"""3x3 convolution and global average pooling against a float64 reference."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba", exc_type=ImportError)

from shapevm.jit.native import (
    NativeKernelError,
    conv2d_3x3,
    conv_out_hw,
    global_avg_pool,
    pack_conv3x3,
)
from tests.jit.native import reference as ref
from tests.jit.native.reference import rel_err

CASES = [
    # batch, c_in, c_out, h, w, stride
    (1, 1, 1, 1, 1, 1),
    (1, 3, 5, 7, 5, 1),
    (2, 4, 6, 9, 10, 2),
    (1, 3, 32, 17, 19, 1),
    (1, 5, 7, 8, 3, 2),
    (2, 2, 3, 2, 9, 2),
    (1, 32, 8, 6, 7, 1),
    (2, 24, 5, 5, 4, 1),
]


def _conv(rng: np.random.Generator, c_in: int, c_out: int):
    w = (rng.standard_normal((c_out, c_in, 3, 3)) / np.sqrt(9 * c_in)).astype(np.float32)
    b = (0.1 * rng.standard_normal(c_out)).astype(np.float32)
    return w, b


@pytest.mark.parametrize("batch,c_in,c_out,h,w,stride", CASES)
def test_conv_matches_reference(batch, c_in, c_out, h, w, stride) -> None:
    rng = np.random.default_rng(batch + c_in * 10 + h)
    weight, bias = _conv(rng, c_in, c_out)
    x = rng.standard_normal((batch, c_in, h, w)).astype(np.float32)
    ho, wo = conv_out_hw(h, w, stride)
    packed = pack_conv3x3(weight, bias)
    for epilogue in ("none", "relu"):
        out = np.full((batch, c_out, ho, wo), np.nan, np.float32)
        assert conv2d_3x3(x, packed, out, stride, epilogue) is out
        expected = ref.act(epilogue, ref.conv3x3(x, weight, bias, stride))
        assert rel_err(out, expected) < 1e-5


def test_w2_layers_on_the_calling_thread_and_the_pool() -> None:
    rng = np.random.default_rng(9)
    for c_in, c_out, stride in [(3, 32, 1), (32, 32, 2), (32, 64, 1)]:
        weight, bias = _conv(rng, c_in, c_out)
        x = rng.standard_normal((2, c_in, 20, 18)).astype(np.float32)
        ho, wo = conv_out_hw(20, 18, stride)
        expected = ref.act("relu", ref.conv3x3(x, weight, bias, stride))
        kernel = pack_conv3x3(weight, bias).kernel(stride, "relu")
        for fn in (kernel._serial, kernel._parallel):
            out = np.full((2, c_out, ho, wo), np.nan, np.float32)
            kernel._run(fn, x, out)
            assert rel_err(out, expected) < 1e-5, (c_in, c_out, stride, fn)


def test_global_avg_pool() -> None:
    rng = np.random.default_rng(5)
    for shape in [(1, 1, 1, 1), (2, 3, 5, 7), (2, 64, 40, 40)]:
        x = rng.standard_normal(shape).astype(np.float32) + 1
        out = global_avg_pool(x, np.empty(shape[:2], np.float32))
        assert rel_err(out, x.astype(np.float64).mean((2, 3))) < 1e-5


def test_packing_keeps_the_weight_and_one_kernel_per_stride_and_epilogue() -> None:
    w = np.arange(2 * 3 * 9, dtype=np.float32).reshape(2, 3, 3, 3)
    p = pack_conv3x3(w)
    assert np.array_equal(p.w, w) and p.w.flags.c_contiguous and not p.bias.any()
    x = np.ones((1, 3, 4, 4), np.float32)
    out = np.empty((1, 2, 4, 4), np.float32)
    conv2d_3x3(x, p, out, 1, "relu")
    conv2d_3x3(x, p, out, 1, "relu")
    conv2d_3x3(x, p, np.empty((1, 2, 2, 2), np.float32), 2, "relu")
    assert sorted(p.kernels) == [(1, "relu"), (2, "relu")]


def test_conv_errors() -> None:
    p = pack_conv3x3(np.ones((4, 3, 3, 3), np.float32))
    x = np.ones((1, 3, 8, 8), np.float32)
    with pytest.raises(NativeKernelError) as e:
        conv2d_3x3(np.ones((1, 2, 8, 8), np.float32), p, np.empty((1, 4, 8, 8), np.float32))
    assert "expected: x: f32[B, 3, H, W]" in str(e.value) and "found:    x: f32[1, 2, 8, 8]" in str(
        e.value
    )
    with pytest.raises(NativeKernelError) as e:
        conv2d_3x3(x, p, np.empty((1, 4, 8, 8), np.float32), stride=3)
    assert "found:    stride 3" in str(e.value)
    with pytest.raises(NativeKernelError) as e:
        conv2d_3x3(x, p, np.empty((1, 4, 8, 8), np.float32), stride=2)
    assert "expected: out: f32[1, 4, 4, 4]" in str(e.value)
    with pytest.raises(NativeKernelError, match="PyTorch's"):
        pack_conv3x3(np.ones((4, 3, 5, 5), np.float32))
    with pytest.raises(NativeKernelError, match="NCHW batch"):
        global_avg_pool(np.ones((3, 8, 8), np.float32), np.empty((1, 3), np.float32))
