"""Dense layers against packed weights: both paths (calling thread, pool) against float64."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba", exc_type=ImportError)

from shapevm.jit.native import NativeKernelError, pack_weights, packed_matmul
from shapevm.jit.native._core import act_code
from tests.jit.native.reference import act, rel_err

EPILOGUES = ["none", "relu", "gelu_tanh", "gelu_erf", "silu"]


def _layer(rng: np.random.Generator, k: int, n: int, bias: bool = True):
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    b = (0.1 * rng.standard_normal(n)).astype(np.float32) if bias else None
    return w, b


def _ref(x, w, b, epilogue):
    y = x.astype(np.float64) @ w.astype(np.float64)
    if b is not None:
        y = y + b
    return act(epilogue, y)


@pytest.mark.parametrize("epilogue", EPILOGUES)
def test_odd_shapes_every_epilogue(epilogue: str) -> None:
    rng = np.random.default_rng(1)
    for k, n in [(1, 1), (7, 10), (33, 5), (64, 64), (300, 130)]:
        for has_bias in (True, False):
            w, b = _layer(rng, k, n, has_bias)
            packed = pack_weights(w, b)
            for m in [1, 2, 3, 4, 5, 6, 7, 9, 17]:
                x = rng.standard_normal((m, k)).astype(np.float32)
                out = np.full((m, n), np.nan, np.float32)
                assert packed_matmul(x, packed, out, epilogue) is out
                assert rel_err(out, _ref(x, w, b, epilogue)) < 1e-5, (k, n, m)


def test_paths_agree_with_reference_at_w1_shapes() -> None:
    rng = np.random.default_rng(2)
    gelu = act_code("t", "gelu_tanh")
    for k, n in [(256, 1024), (1024, 256)]:
        w, b = _layer(rng, k, n)
        packed = pack_weights(w, b)
        d = packed.dense
        for m in [1, 3, 8, 17, 32, 64]:
            x = rng.standard_normal((m, k)).astype(np.float32)
            ref = _ref(x, w, b, "gelu_tanh")
            out = np.empty((m, n), np.float32)
            packed_matmul(x, packed, out, "gelu_tanh")
            assert rel_err(out, ref) < 1e-5, (k, n, m)
            for kernel in (d._tiles, d._tiles_parallel):
                out[:] = np.nan
                kernel(x, d._scratch(m), d.panels, d.bias, out, gelu)
                assert rel_err(out, ref) < 1e-5, (k, n, m, kernel)


def test_long_dot_products_stay_within_1e_5_under_fastmath() -> None:
    # Reassociation splits each sum into many partial sums; it must not cost accuracy.
    rng = np.random.default_rng(3)
    k, n = 8192, 12
    w = rng.standard_normal((k, n)).astype(np.float32)
    x = (rng.standard_normal((5, k)) + 3.0).astype(np.float32)
    out = np.empty((5, n), np.float32)
    packed_matmul(x, pack_weights(w), out)
    assert rel_err(out, x.astype(np.float64) @ w) < 1e-5


def test_batched_input_is_flattened() -> None:
    rng = np.random.default_rng(4)
    w, b = _layer(rng, 16, 24)
    x = rng.standard_normal((2, 5, 16)).astype(np.float32)
    out = np.empty((2, 5, 24), np.float32)
    packed_matmul(x, pack_weights(w, b), out, "relu")
    assert rel_err(out, _ref(x, w, b, "relu")) < 1e-5


def test_strided_input_and_empty_batch() -> None:
    rng = np.random.default_rng(5)
    w, b = _layer(rng, 8, 6)
    packed = pack_weights(w, b)
    x = rng.standard_normal((8, 4)).astype(np.float32).T  # a non-contiguous view
    out = np.empty((4, 6), np.float32)
    packed_matmul(x, packed, out)
    assert rel_err(out, _ref(x, w, b, "none")) < 1e-5
    empty = np.empty((0, 6), np.float32)
    assert packed_matmul(np.empty((0, 8), np.float32), packed, empty).shape == (0, 6)


def test_packing_layout() -> None:
    w = np.arange(3 * 20, dtype=np.float32).reshape(3, 20)
    p = pack_weights(w)
    panels = p.dense.panels
    assert panels.shape == (2, 3, 16) and not p.has_bias and not p.dense.bias.any()
    assert np.array_equal(panels[0], w[:, :16]) and np.array_equal(panels[1, :, :4], w[:, 16:])
    assert not panels[1, :, 4:].any()
    assert p.nbytes == panels.nbytes + p.dense.bias.nbytes


def test_errors_say_expected_and_found() -> None:
    p = pack_weights(np.ones((4, 3), np.float32))
    x = np.ones((2, 4), np.float32)
    with pytest.raises(NativeKernelError) as e:
        packed_matmul(np.ones((2, 5), np.float32), p, np.empty((2, 3), np.float32))
    assert "expected: x: f32[M, 4] or f32[B, S, 4]" in str(e.value)
    assert "found:    x: f32[2, 5]" in str(e.value)
    with pytest.raises(NativeKernelError) as e:
        packed_matmul(x, p, np.empty((2, 4), np.float32))
    assert "out: f32[2, 3]" in str(e.value) and "found:    out: f32[2, 4]" in str(e.value)
    with pytest.raises(NativeKernelError) as e:
        packed_matmul(x, p, np.empty((2, 3), np.float32), "gelu")
    assert "unknown epilogue 'gelu'" in str(e.value) and "did you mean" in str(e.value)
    with pytest.raises(NativeKernelError) as e:
        packed_matmul(x.astype(np.float64), p, np.empty((2, 3), np.float32))
    assert "found:    x: f64[2, 4]" in str(e.value) and "x.astype(np.float32)" in str(e.value)
    with pytest.raises(NativeKernelError) as e:
        packed_matmul(x, p, np.empty((3, 2), np.float32).T)
    assert "must be C-contiguous" in str(e.value)
    with pytest.raises(NativeKernelError) as e:
        pack_weights(np.ones((2, 2, 2), np.float32))
    assert "pass a linear layer's weight [out, in] as weight.T" in str(e.value)
    with pytest.raises(NativeKernelError) as e:
        pack_weights(np.ones((2, 3), np.float32), np.ones(2, np.float32))
    assert "expected: bias: f32[3]" in str(e.value)
    read_only = np.empty((2, 3), np.float32)
    read_only.flags.writeable = False
    with pytest.raises(NativeKernelError, match="out is read-only"):
        packed_matmul(x, p, read_only)
