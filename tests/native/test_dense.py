"""Dense layers and batched products against float64, at every instruction-set level:
hypothesis draws M, N, K (1 to a few hundred, odd sizes), the weight's layout, the
epilogue and the thread count; results are within 1e-5 relative of float64."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shapevm import native
from tests.native.reference import NO_FAULT_COUNTS, act64, rel_err, warm_faults

Array = np.ndarray[Any, Any]

sizes = st.one_of(st.integers(1, 40), st.integers(41, 300))


def _data(seed: int, *shape: int) -> Array:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    m=sizes,
    n=sizes,
    k=st.one_of(st.integers(1, 40), st.integers(41, 700)),
    layout=st.sampled_from(["in_out", "out_in"]),
    act=st.sampled_from(native.ACTIVATIONS),
    bias=st.booleans(),
    residual=st.sampled_from(["none", "add", "mul"]),
    threads=st.sampled_from([0, 1]),
    alpha=st.sampled_from([1.0, 0.125]),
)
def test_dense_matches_float64(
    isa: str,
    m: int,
    n: int,
    k: int,
    layout: str,
    act: str,
    bias: bool,
    residual: str,
    threads: int,
    alpha: float,
) -> None:
    w = _data(1, k, n) / np.float32(np.sqrt(k))
    b = _data(2, n) if bias else None
    x = _data(3, m, k)
    r = _data(4, m, n)
    packed = native.pack_dense(
        w if layout == "in_out" else np.ascontiguousarray(w.T), b, layout=layout
    )
    y = native.dense(
        x,
        packed,
        activation=act,
        residual=r if residual == "add" else None,
        gate=r if residual == "mul" else None,
        alpha=alpha,
        threads=threads,
    )
    h = alpha * (x.astype(np.float64) @ w.astype(np.float64))
    if b is not None:
        h = h + b
    ref = act64(act, h)
    ref = ref + r if residual == "add" else ref * r if residual == "mul" else ref
    assert y.shape == (m, n) and y.dtype == np.float32
    # A sum's rounding scales with its terms' sizes, not with the sum: a product that
    # cancels (1 x 1 with k = 95: 0.0041 from terms of about 0.8 in all) is held to 1e-5
    # of the terms, not of itself.
    terms = abs(alpha) * (np.abs(x.astype(np.float64)) @ np.abs(w.astype(np.float64)))
    if residual == "mul":
        terms = terms * np.abs(r)
    scale = max(float(np.abs(ref).max()), float(terms.max()))
    assert float(np.abs(y - ref).max()) < 1e-5 * scale


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=sizes,
    k=st.one_of(st.integers(1, 40), st.integers(41, 700)),
    act=st.sampled_from(native.ACTIVATIONS),
    bias=st.booleans(),
    residual=st.sampled_from(["none", "add", "mul"]),
    threads=st.sampled_from([0, 1]),
    alpha=st.sampled_from([1.0, 0.125]),
)
def test_dense_row_is_the_same_bits_for_any_row_count(
    isa: str, n: int, k: int, act: str, bias: bool, residual: str, threads: int, alpha: float
) -> None:
    """A row's result does not depend on the other rows of the call (tile heights, panels per
    call, k chunks, threads): the server joins requests along the rows on this promise."""
    w = _data(1, k, n) / np.float32(np.sqrt(k))
    packed = native.pack_dense(w, _data(2, n) if bias else None)
    x, r = _data(3, 40, k), _data(4, 40, n)

    def call(rows: slice) -> Array:
        res = r[rows] if residual == "add" else None
        gate = r[rows] if residual == "mul" else None
        return native.dense(
            x[rows], packed, activation=act, residual=res, gate=gate, alpha=alpha, threads=threads
        )

    alone = np.concatenate([call(slice(i, i + 1)) for i in range(40)])
    for m in (2, 3, 5, 7, 12, 13, 25, 40):
        np.testing.assert_array_equal(call(slice(0, m)), alone[:m], err_msg=f"{m} rows")
    np.testing.assert_array_equal(call(slice(17, 40)), alone[17:])


def test_dense_keeps_leading_dims_and_strided_rows(isa: str) -> None:
    w = _data(5, 64, 48)
    packed = native.pack_dense(w)
    big = _data(6, 2, 5, 100)
    x = big[:, :, 10:74]  # rows 100 floats apart, 64 used
    y = native.dense(x, packed)
    assert y.shape == (2, 5, 48)
    assert rel_err(y, x.astype(np.float64) @ w) < 1e-5
    out = np.full((2, 5, 60), 7.0, np.float32)
    native.dense(x, packed, out=out[:, :, 4:52])
    assert rel_err(out[:, :, 4:52], x.astype(np.float64) @ w) < 1e-5
    assert (out[:, :, :4] == 7.0).all() and (out[:, :, 52:] == 7.0).all()


def test_dense_residual_may_be_the_output(isa: str) -> None:
    w, x = _data(7, 32, 32), _data(8, 9, 32)
    acc = _data(9, 9, 32)
    expected = acc.astype(np.float64) + np.maximum(x.astype(np.float64) @ w, 0.0)
    native.dense(x, native.pack_dense(w), activation="relu", residual=acc, out=acc)
    assert rel_err(acc, expected) < 1e-5


def test_dense_strided_weights_pack_like_contiguous(isa: str) -> None:
    w = _data(10, 70, 90)
    x = _data(11, 13, 35)
    a = native.dense(x, native.pack_dense(w[::2, ::3]))
    b = native.dense(x, native.pack_dense(np.ascontiguousarray(w[::2, ::3])))
    np.testing.assert_array_equal(a, b)


def test_large_weights_packed_on_the_pool_pack_as_on_one_thread(isa: str) -> None:
    """Packs of 2^17 floats and more are shared among the pool's threads: every layout,
    with a last panel of 5 columns, multiplies as the same weights packed small."""
    w = _data(12, 700, 261)  # [out, in]: 182700 floats
    x = _data(13, 9, 261)
    strided = _data(14, 522, 1400)[::2, ::2]  # [in, out], neither stride 1
    for packed, weight in [
        (native.pack_dense(w, layout="out_in"), w.T),
        (native.pack_dense(np.ascontiguousarray(w.T)), w.T),
        (native.pack_dense(strided), strided),
    ]:
        native.set_num_threads(1)
        try:
            one = native.dense(x, native.pack_dense(np.ascontiguousarray(weight)))
        finally:
            native.set_num_threads(0)
        np.testing.assert_array_equal(native.dense(x, packed), one)
        assert rel_err(one, x.astype(np.float64) @ weight) < 1e-5


def test_empty_rows_and_zero_k(isa: str) -> None:
    packed = native.pack_dense(np.zeros((0, 5), np.float32), np.arange(5, dtype=np.float32))
    y = native.dense(np.zeros((3, 0), np.float32), packed, activation="relu")
    np.testing.assert_array_equal(y, np.tile(np.arange(5, dtype=np.float32), (3, 1)))
    assert native.dense(
        np.zeros((0, 4), np.float32), native.pack_dense(np.ones((4, 2), np.float32))
    ).shape == (0, 2)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batch_a=st.sampled_from([(), (1,), (3,), (2, 3)]),
    batch_b=st.sampled_from([(), (1,), (3,), (2, 1)]),
    m=sizes,
    n=st.integers(1, 130),
    k=st.integers(1, 130),
    ta=st.booleans(),
    tb=st.booleans(),
)
def test_matmul_broadcasts_and_takes_any_strides(
    isa: str,
    batch_a: tuple[int, ...],
    batch_b: tuple[int, ...],
    m: int,
    n: int,
    k: int,
    ta: bool,
    tb: bool,
) -> None:
    try:
        np.broadcast_shapes(batch_a, batch_b)
    except ValueError:
        return
    a = _data(12, *batch_a, k, m).swapaxes(-1, -2) if ta else _data(12, *batch_a, m, k)
    b = _data(13, *batch_b, n, k).swapaxes(-1, -2) if tb else _data(13, *batch_b, k, n)
    y = native.matmul(a, b, alpha=0.5)
    ref = 0.5 * (a.astype(np.float64) @ b.astype(np.float64))
    assert y.shape == ref.shape
    assert rel_err(y, ref) < 1e-5


@pytest.mark.parametrize("k", [300, 700])
@pytest.mark.parametrize("gated", [False, True])
def test_dense_into_its_own_residual(k: int, gated: bool) -> None:
    """``out=residual`` (the executor's in-place ``x @ W + r``, or ``* r``) with k past one
    chunk of the kernel: a chunk's partial sums must not overwrite the residual before it is
    added (or multiplied)."""
    x, w, r = _data(5, 20, k), _data(6, k, 24) / np.float32(np.sqrt(k)), _data(7, 20, 24)
    h = x.astype(np.float64) @ w.astype(np.float64)
    want = act64("silu", h) * r if gated else h + r
    if gated:
        y = native.dense(x, native.pack_dense(w), activation="silu", gate=r, out=r)
    else:
        y = native.dense(x, native.pack_dense(w), residual=r, out=r)
    assert y is r or np.shares_memory(y, r)
    assert rel_err(r, want) < 1e-5


def test_dense_gate_is_checked_and_named() -> None:
    """A gate of the wrong shape is refused under its own name; residual and gate together
    are refused (the kernel does one or the other)."""
    x, packed = _data(16, 6, 8), native.pack_dense(_data(17, 8, 10))
    with pytest.raises(native.NativeKernelError, match=r"gate does not match out"):
        native.dense(x, packed, gate=_data(18, 5, 10))
    with pytest.raises(native.NativeKernelError, match=r"residual and gate both given"):
        native.dense(x, packed, residual=_data(18, 6, 10), gate=_data(19, 6, 10))


def test_leaky_relu_takes_its_slope_as_a_pair() -> None:
    x = _data(8, 5, 7)
    w = _data(9, 7, 20)
    packed = native.pack_dense(w)
    h = x.astype(np.float64) @ w
    y = native.dense(x, packed, activation=("leaky_relu", 0.2))
    assert rel_err(y, np.where(h < 0, np.float32(0.2) * h, h)) < 1e-5
    with pytest.raises(native.NativeKernelError, match=r"\('leaky_relu', slope\)"):
        native.dense(x, packed, activation=("relu", 0.2))
    with pytest.raises(native.NativeKernelError, match=r"finite slope"):
        native.dense(x, packed, activation=("leaky_relu", float("nan")))


def test_a_slope_that_is_not_a_finite_float32_number_is_refused() -> None:
    packed = native.pack_dense(_data(10, 3, 4))
    for slope in ("0.2", None, 1e40, float("inf")):
        with pytest.raises(native.NativeKernelError, match=r"finite slope"):
            native.dense(_data(11, 2, 3), packed, activation=("leaky_relu", slope))


def test_dense_into_its_own_residual_with_rows_backwards_or_apart() -> None:
    """out=residual read with a negative row stride is still the same memory (k kept in one
    chunk); a residual that starts at out but steps its rows differently is refused."""
    x, w = _data(12, 40, 300), _data(13, 300, 24) / np.float32(np.sqrt(300))
    packed = native.pack_dense(w)
    r = _data(14, 40, 24)[::-1]
    want = x.astype(np.float64) @ w.astype(np.float64) + r
    native.dense(x, packed, residual=r, out=r)
    assert rel_err(r, want) < 1e-5
    buf = _data(15, 40, 48)
    apart = np.lib.stride_tricks.as_strided(buf, (40, 24), (96, 4))
    with pytest.raises(native.NativeKernelError, match=r"residual does not match out"):
        native.dense(x, packed, residual=apart, out=buf[:, :24])


@pytest.mark.skipif(native.info()["debug"], reason=NO_FAULT_COUNTS)
def test_matmul_of_two_arrays_keeps_its_packs() -> None:
    """The packed right operand (1 MiB here) and the copy of a strided left one are the
    thread's scratch: allocated per call, each was a new mapping, 256 faults a call."""
    for left in ("a", "np.asfortranarray(a)"):
        faults = warm_faults(
            "a = rng.standard_normal((64, 512), np.float32)\n"
            "b = rng.standard_normal((512, 512), np.float32)",
            f"native.matmul({left}, b)",
        )
        assert faults <= 5, f"20 warm products of {left} and b faulted in {faults} pages"
