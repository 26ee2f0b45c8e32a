"""The native pattern lowerings against the interpreter, the reference semantics.

Each pattern is compiled (synchronously, from the first call) on many shapes and compared
with the interpreted call: max |y - ref| / max |ref| within 1e-5, as float32 arithmetic in a
different order allows. Near misses (a different constant, axis, stride, an intermediate
value read elsewhere) must fall back to the default lowering and still agree.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import shapevm as sv
import shapevm.numpy as snp
from shapevm import nn
from shapevm.jit import native_lowering as nl
from tests.jit.programs import interpreted

pytest.importorskip("numba")

TOL = 1e-5
RNG = np.random.default_rng(20)


def rel_err(got: Any, ref: Any) -> float:
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.shape == ref.shape and got.dtype == ref.dtype, (got.shape, ref.shape)
    scale = max(float(np.max(np.abs(ref))), 1e-30) if ref.size else 1.0
    return float(np.max(np.abs(got.astype(np.float64) - ref))) / scale if ref.size else 0.0


def f32(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (RNG.normal(size=shape) * scale).astype(np.float32)


def check(fun: Any, spec: str, shapes: list[tuple[int, ...]], patterns: set[str]) -> Any:
    """Compile ``fun`` per shape; every call agrees with the interpreter; the variants used
    exactly ``patterns`` (native ones; elementwise chains may come and go)."""
    j = sv.jit(fun, shapes=[spec], hot_threshold=1, background=False)
    for shape in shapes:
        x = f32(*shape)
        for _ in range(2):  # the first call compiles, the second runs the variant
            got = j(x)
            (ref,) = interpreted(j, x)
            assert rel_err(got, ref) <= TOL, (shape, rel_err(got, ref))
    info = j.jit_info()
    assert all(r["status"] == "ready" for r in info), info
    assert j.jit_stats()["compiled_calls"] >= len(shapes)
    used = {p for r in info for p in r["patterns"]} - {"elementwise_chain"}
    assert used == patterns, (used, patterns)
    return j


ROWS = [(1, 24), (3, 24), (5, 24), (8, 24), (17, 24), (49, 24), (64, 24)]


# -- dense ------------------------------------------------------------------------------------


@pytest.mark.parametrize("act", ["none", "relu", "gelu"])
@pytest.mark.parametrize("bias", [True, False])
def test_dense_with_epilogue_matches_on_many_row_counts(act: str, bias: bool) -> None:
    w, b = f32(24, 40, scale=0.2), f32(40)

    def f(x: Any) -> Any:
        y = x @ w
        if bias:
            y = y + b
        if act == "relu":
            y = nn.relu(y)
        elif act == "gelu":
            y = nn.gelu(y, approximate=True)
        return y

    j = check(f, "n, 24", ROWS, {"dense"})
    text = j.engines[0].variant(j.jit_info()[0]["key"]).describe()
    expect = {"none": "dense 24x40", "relu": "relu", "gelu": "gelu_tanh"}[act]
    assert expect in text
    assert ("+bias" in text) == bias


def test_dense_of_a_batch_of_sequences_flattens_rows() -> None:
    w, b = f32(16, 12), f32(12)
    check(
        lambda x: nn.relu(x @ w + b), "b, s, 16", [(1, 1, 16), (2, 5, 16), (3, 17, 16)], {"dense"}
    )


def test_dense_leaves_out_what_is_read_elsewhere() -> None:
    w, b = f32(16, 8), f32(8)

    def f(x: Any) -> Any:
        y = x @ w + b
        return nn.relu(y) + y  # y is read twice: relu is not the dense's epilogue

    j = check(f, "n, 16", [(3, 16), (9, 16)], {"dense"})
    text = j.engines[0].variant(j.jit_info()[0]["key"]).describe()
    assert "dense 16x8 +bias [" in text and "relu" not in text.split("dense 16x8")[1].split("[")[0]


def test_near_misses_are_not_claimed() -> None:
    w, b = f32(16, 8), f32(8)
    wv = f32(16, 8)

    def not_relu(x: Any) -> Any:
        return snp.maximum(x @ w + b, 0.5)

    def not_gelu(x: Any) -> Any:  # 0.04 instead of 0.044715
        y = x @ w + b
        inner = snp.multiply(snp.add(y, snp.multiply(0.04, y * y * y)), math.sqrt(2 / math.pi))
        return snp.multiply(snp.multiply(y, 0.5), snp.add(snp.tanh(inner), 1.0))

    j = check(not_relu, "n, 16", [(2, 16), (5, 16)], {"dense"})
    assert "relu" not in j.engines[0].variant(j.jit_info()[0]["key"]).describe()
    j = check(not_gelu, "n, 16", [(2, 16), (5, 16)], {"dense"})
    assert "gelu" not in j.engines[0].variant(j.jit_info()[0]["key"]).describe()
    # weights that are an argument, not a constant: the default matmul
    g = sv.jit(lambda x, v: x @ v, shapes=["n, 16", "16, 8"], hot_threshold=1, background=False)
    x = f32(3, 16)
    for _ in range(2):
        np.testing.assert_allclose(g(x, wv), interpreted(g, x, wv)[0], rtol=1e-6)
    assert "dense" not in g.jit_info()[0]["patterns"]


def test_weights_are_packed_once_for_every_key_and_variant() -> None:
    w, b = f32(32, 32), f32(32)
    before = nl._PACKS[0]
    j = check(lambda x: nn.relu(x @ w + b) @ w, "n, 32", [(1, 32), (2, 32), (7, 32)], {"dense"})
    assert len(j.jit_info()) == 3
    assert nl._PACKS[0] - before == 2  # w with b, and w alone, each packed once


# -- layer norm -------------------------------------------------------------------------------


@pytest.mark.parametrize("affine", ["gb", "g", "b", ""])
def test_layer_norm_with_and_without_gain_and_shift(affine: str) -> None:
    g, b = f32(20) + 1.0, f32(20)

    def f(x: Any) -> Any:
        return nn.layer_norm(
            x, g if "g" in affine else None, b if "b" in affine else None, eps=1e-5
        )

    check(f, "n, 20", [(1, 20), (4, 20), (33, 20), (2000, 20)], {"layer_norm"})


def test_layer_norm_takes_the_residual_add_when_nothing_else_reads_the_sum() -> None:
    g, b = f32(20) + 1.0, f32(20)

    def fused(x: Any) -> Any:
        return nn.layer_norm(x + snp.tanh(x), g, b, eps=1e-6)

    def shared(x: Any) -> Any:
        y = x + snp.tanh(x)
        return nn.layer_norm(y, g, b, eps=1e-6) + y

    j = check(fused, "n, 20", [(1, 20), (6, 20)], {"layer_norm"})
    assert "+residual" in j.engines[0].variant(j.jit_info()[0]["key"]).describe()
    j = check(shared, "n, 20", [(1, 20), (6, 20)], {"layer_norm"})
    assert "+residual" not in j.engines[0].variant(j.jit_info()[0]["key"]).describe()


def test_layer_norm_of_a_3d_tensor_with_large_mean() -> None:
    g, b = f32(64) + 1.0, f32(64)
    j = sv.jit(lambda x: nn.layer_norm(x, g, b), shapes=["b, s, 64"], hot_threshold=1,
               background=False)  # fmt: skip
    for shape in [(1, 1, 64), (2, 7, 64), (3, 40, 64)]:
        x = f32(*shape) + 100.0
        j(x)
        assert rel_err(j(x), interpreted(j, x)[0]) <= TOL
    assert j.jit_info()[0]["patterns"] == ("layer_norm",)


def test_normalizing_another_axis_is_not_layer_norm() -> None:
    def f(x: Any) -> Any:
        return nn.layer_norm(x, axis=0)

    j = sv.jit(f, shapes=["n, 12"], hot_threshold=1, background=False)
    x = f32(5, 12)
    j(x)
    assert rel_err(j(x), interpreted(j, x)[0]) <= TOL
    assert "layer_norm" not in j.jit_info()[0]["patterns"]


# -- softmax and attention --------------------------------------------------------------------


def test_softmax_over_the_last_axis_with_and_without_scale() -> None:
    check(nn.softmax, "n, 30", [(1, 30), (7, 30), (1200, 30)], {"softmax"})
    check(lambda x: nn.softmax(x * 0.25), "a, n, 30", [(2, 3, 30), (1, 1, 30)], {"softmax"})


def test_softmax_over_another_axis_is_not_claimed() -> None:
    j = sv.jit(lambda x: nn.softmax(x, axis=0), shapes=["n, 6"], hot_threshold=1,
               background=False)  # fmt: skip
    x = f32(4, 6)
    j(x)
    assert rel_err(j(x), interpreted(j, x)[0]) <= TOL
    assert "softmax" not in j.jit_info()[0]["patterns"]


def _attention(merge: bool, scale: float | None) -> Any:
    w = f32(32, 96, scale=0.2)

    def f(x: Any) -> Any:
        b, s, _ = x.shape
        qkv = (x @ w).reshape(b, s, 3, 2, 16).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = q @ k.transpose(0, 1, 3, 2)
        if scale is not None:
            scores = scores * scale
        o = nn.softmax(scores, axis=-1) @ v
        return o.transpose(0, 2, 1, 3).reshape(b, s, 32) if merge else o

    return f


@pytest.mark.parametrize("merge", [True, False])
@pytest.mark.parametrize("scale", [0.25, None])
def test_attention_on_views_of_a_fused_qkv(merge: bool, scale: float | None) -> None:
    shapes = [(1, 1, 32), (1, 9, 32), (2, 16, 32), (3, 70, 32)]
    check(_attention(merge, scale), "b, s, 32", shapes, {"attention", "dense"})


# -- convolution --------------------------------------------------------------------------------


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_conv3x3_on_many_image_sizes(stride: int, relu: bool, bias: bool) -> None:
    w, b = f32(6, 4, 3, 3, scale=0.3), f32(6)

    def f(x: Any) -> Any:
        y = nn.conv2d(x, w, b if bias else None, stride=stride, padding=1)
        return nn.relu(y) if relu else y

    shapes = [(1, 4, 1, 1), (1, 4, 5, 7), (2, 4, 8, 8), (1, 4, 33, 20), (2, 4, 64, 64)]
    j = check(f, "b, 4, h, w", shapes, {"conv2d"})
    text = j.engines[0].variant(j.jit_info()[0]["key"]).describe()
    assert ("relu" in text) == relu


def test_other_convolutions_run_the_default_lowering() -> None:
    w5, w3 = f32(4, 3, 5, 5), f32(4, 3, 3, 3)
    for kw in [dict(w=w5, padding=2), dict(w=w3, padding=0), dict(w=w3, padding=1, dilation=2)]:
        weight = kw.pop("w")
        j = sv.jit(lambda x, weight=weight, kw=kw: nn.conv2d(x, weight, **kw),
                   shapes=["b, 3, 9, 9"], hot_threshold=1, background=False)  # fmt: skip
        x = f32(1, 3, 9, 9)
        j(x)
        assert rel_err(j(x), interpreted(j, x)[0]) <= TOL
        assert "conv2d" not in j.jit_info()[0]["patterns"]


@pytest.mark.parametrize("keepdims", [False, True])
def test_global_average_pool(keepdims: bool) -> None:
    def f(x: Any) -> Any:
        return snp.mean(x, axis=(2, 3), keepdims=keepdims)

    check(f, "b, c, h, w", [(1, 1, 1, 1), (2, 3, 5, 4), (2, 16, 70, 70)], {"global_avg_pool"})


# -- the benchmark workloads --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wid", "patterns"),
    [
        ("W1", {"dense", "layer_norm"}),
        ("W2", {"conv2d", "global_avg_pool", "dense"}),
        ("W3", {"attention", "dense", "layer_norm"}),
    ],
)
def test_workloads_compile_to_native_kernels_and_match_float64(
    wid: str, patterns: set[str]
) -> None:
    from shapevm.models import traced
    from shapevm.models import workloads as wl
    from tests.models.cases import case, weights

    exp = traced.export_workload(wid, weights(wid))
    fast = exp.jit(hot_threshold=1, background=False, cache_mode="bucket",
                   bucket_boundaries=[1, 4, 16, 64])  # fmt: skip
    small = {"W1": [(1, 256), (5, 256), (20, 256)], "W2": [(1, 3, 9, 11), (2, 3, 16, 16)],
             "W3": [(1, 3, 256), (2, 19, 256)]}[wid]  # fmt: skip
    for i, shape in enumerate(small):
        x, ref64 = case(wid, shape, 300 + i)
        fast(x)
        got = fast(x)
        assert wl.accuracy(got, ref64) < TOL, (wid, shape)
        assert wl.accuracy(got, exp.call(x)) < TOL, (wid, shape)
    used = {p for r in fast.jit_info() for p in r["patterns"]} - {"elementwise_chain"}
    assert used == patterns
