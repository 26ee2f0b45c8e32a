"""Sizes used as values, running sums, integer reductions and ``take_along_axis`` run in
the native call: ``h.sum(axis=1) / h.shape[1]`` (a mean written by hand), ``x.shape`` as an
array and a diagonal's row stride are the executor's sizes kernel; ``cumsum`` (positions
from a padding mask) its scan kernel; ``mask.sum(axis=1)`` of integers (lengths) its
integer reduction; the last real token's state its ``take_along_axis`` kernel; a top k by
``argsort`` its stable sort; a uint8 image made float32 its cast kernel. Each was
interpreted and cut the function in pieces; each agrees with the interpreter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import shapevm as sv
import shapevm.numpy as snp

RNG = np.random.default_rng(8)
W = (RNG.standard_normal((16, 8)) * 0.3).astype(np.float32)


def _jitted(fn: Callable[..., Any], *specs: tuple[str, Any]) -> tuple[Any, Any]:
    scope = sv.SymbolicScope()
    structs = [sv.ShapeDtypeStruct(sv.symbolic_shape(s, scope=scope), dt) for s, dt in specs]
    exp = sv.export(sv.jit(fn))(*structs)
    return exp, exp.jit(hot_threshold=1, background=False, tier3=False)


def _function(jitted: Any) -> Any:
    rec = next(r for r in jitted.engines[0].records() if r.variant)
    return rec.variant.function


def _labels(function: Any) -> list[str]:
    return [k.label for r in function.regions for k in r.lowered.kernels]


SIZES: dict[str, Callable[[Any], Any]] = {
    "a mean by hand": lambda x: snp.tanh(x @ W).sum(axis=1) / x.shape[1],
    "over every element": lambda x: (x @ W).sum() / (x.shape[0] * x.shape[1]) + x[:, 0] * 0,
    "the shape as an array": lambda x: (x @ W)[:, 0, :2] * snp.asarray(x.shape[1:]),
    "a diagonal": lambda x: snp.diagonal(x[0, :, :] @ x[0, :, :].T) + x.shape[0],
}


@pytest.mark.parametrize("name", list(SIZES))
def test_sizes_as_values_run_in_the_native_call(name: str) -> None:
    exp, fast = _jitted(SIZES[name], ("b, s, 16", np.float32))
    for shape in [(2, 5, 16), (1, 1, 16), (3, 40, 16), (2, 5, 16)]:
        x = RNG.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(fast(x), exp.call(x), rtol=2e-5, atol=2e-5)
    function = _function(fast)
    assert function.whole and not function.interpreted, function.interpreted
    assert "sizes" in _labels(function), _labels(function)


def test_a_size_that_may_be_negative_stays_interpreted() -> None:
    """``s - 5`` is negative for ``s < 5``: no view has that size, so its ``dim_value``
    stays in the interpreter, which gives the negative value."""
    exp, fast = _jitted(lambda x: x.sum(axis=1) * (x.shape[1] - 5), ("b, s", np.float32))
    for shape in [(2, 3), (1, 9)]:
        x = RNG.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(fast(x), exp.call(x), rtol=2e-5, atol=2e-5)
    function = _function(fast)
    assert [str(p.reason) for p in function.interpreted] == ["dim_value has no native kernel"]


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_positions_from_a_padding_mask_are_one_native_call(dtype: Any) -> None:
    """Positions counted along each row of a mask padded on the left (``cumsum(mask, 1) -
    1``, clipped, as Hugging Face models make ``position_ids``), looked up in a table, with
    a float running sum beside them: exact integers, float32 sums as NumPy adds them."""
    table = RNG.standard_normal((64, 8)).astype(np.float32)

    def embed(mask: Any, x: Any) -> Any:
        pos = snp.clip(snp.cumsum(mask, axis=1) - 1, 0, 63)
        return snp.asarray(table)[pos], pos, snp.cumsum(x, axis=0)

    exp, fast = _jitted(embed, ("b, s", dtype), ("b, s", np.float32))
    for b, s in [(2, 5), (1, 1), (3, 90), (4, 7)]:
        mask = (np.arange(s)[None, :] >= RNG.integers(0, s, (b, 1))).astype(dtype)
        x = RNG.standard_normal((b, s)).astype(np.float32)
        for got, want in zip(fast(mask, x), exp.call(mask, x), strict=True):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    function = _function(fast)
    assert function.whole and not function.interpreted, function.interpreted
    assert _labels(function).count("cumsum") == 2, _labels(function)


INT_REDUCTIONS: dict[str, Callable[[Any], Any]] = {
    "lengths": lambda m: m.sum(axis=1),
    "over every element, kept": lambda m: snp.sum(m, keepdims=True),
    "max over the batch": lambda m: m.max(axis=0),
    "min over both axes": lambda m: snp.min(m, axis=(0, 1)),
    "product of rows": lambda m: snp.prod(m % 3 + 1, axis=1),
}


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
@pytest.mark.parametrize("name", list(INT_REDUCTIONS))
def test_integer_reductions_are_exact_in_the_native_call(name: str, dtype: Any) -> None:
    """Reductions of int32/int64 tensors over any axes: exact past 2**24 (where float32
    lanes would round), wrapping around in the result's type as NumPy's."""
    exp, fast = _jitted(INT_REDUCTIONS[name], ("b, s", dtype))
    top = np.iinfo(dtype).max
    for b, s in [(2, 5), (1, 1), (3, 90), (4, 7)]:
        m = RNG.integers(-(2**28), 2**28, (b, s)).astype(dtype)
        m.flat[0] = top
        with np.errstate(over="ignore"):
            want = exp.call(m)
        got = fast(m)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    function = _function(fast)
    assert function.whole and not function.interpreted, function.interpreted


def _last_state(h: Any, mask: Any) -> Any:
    last = (mask.sum(axis=1) - 1)[:, None, None] * snp.ones((1, 1, 4), dtype=np.int64)
    return snp.take_along_axis(h, last, axis=1)[:, 0] * 2.0


def test_the_last_real_tokens_state_is_taken_in_the_native_call() -> None:
    """``take_along_axis`` of the state at each row's last real token (its index from the
    mask's length), negative indices counting from the end as NumPy's; an index out of
    range fails the call as the interpreter does, naming it."""
    exp, fast = _jitted(_last_state, ("b, s, 4", np.float32), ("b, s", np.int64))
    for b, s in [(2, 5), (1, 1), (3, 40)]:
        h = RNG.standard_normal((b, s, 4)).astype(np.float32)
        mask = (np.arange(s)[None, :] < RNG.integers(0, s + 1, (b, 1))).astype(np.int64)
        np.testing.assert_array_equal(fast(h, mask), exp.call(h, mask))  # length 0: index -1
    function = _function(fast)
    assert function.whole and "take_along_axis" in _labels(function), _labels(function)
    h, mask = np.zeros((2, 3, 4), np.float32), np.full((2, 3), 2, np.int64)  # lengths 6
    with pytest.raises(sv.RuntimeOpError) as native_error:
        fast(h, mask)
    with pytest.raises(sv.RuntimeOpError) as interpreted:
        exp.call(h, mask)
    assert "take_along_axis" in str(native_error.value) and "5" in str(native_error.value)
    assert "take_along_axis" in str(interpreted.value)


MEAN, STD = np.array([0.5, 0.4, 0.3], np.float32), np.array([0.2, 0.25, 0.3], np.float32)


def _preprocess_and_rank(img: Any) -> Any:
    x = (img.astype(np.float32) / 255.0 - MEAN) / STD  # a uint8 image, NHWC
    score = x.mean(axis=(1, 2)) @ np.ones((3, 6), np.float32) * np.arange(6, dtype=np.float32)
    top = snp.argsort(-snp.floor(score * 10) / 10, axis=-1)[:, :3]  # ties: lower index first
    return x.astype(np.float64), top, snp.argsort(img[:, 0, :, 0], axis=-1)


def test_a_uint8_image_and_a_top_k_by_argsort_run_in_the_native_call() -> None:
    """A uint8 image cast to float32 (the executor's cast kernel: a chain reads float32,
    bool and int32/int64 only), a float64 result, and a top k by ``argsort`` of scores with
    ties and of uint8 pixels: one native call, the interpreter's results exactly."""
    exp, fast = _jitted(_preprocess_and_rank, ("b, h, w, 3", np.uint8))
    for shape in [(2, 4, 5, 3), (1, 1, 1, 3), (3, 16, 9, 3)]:
        img = RNG.integers(0, 256, shape).astype(np.uint8)
        img[0, 0, :2, 0] = 7  # equal pixels
        for got, want in zip(fast(img), exp.call(img), strict=True):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    function = _function(fast)
    assert function.whole and not function.interpreted, function.interpreted
    labels = _labels(function)
    # the top 3 read of six scores: only those selected; the pixels' whole lines sorted
    assert labels.count("argsort") == 1 and "argsort (first 3)" in labels, labels
    assert "cast" in labels, labels


def _top_k(p: Any) -> Any:
    top = snp.argsort(-p, axis=1)[:, :4]  # a beam's or a router's top k
    return top, snp.take_along_axis(p, top, axis=1), snp.argsort(p.T, axis=0)[:2]


def _ranks_and_top(p: Any) -> Any:
    order = snp.argsort(p, axis=1)
    return order[:, :3], order[:, 2:5]  # a reader past the first: the whole line sorted


def test_a_top_k_by_argsort_selects_the_first_k_only() -> None:
    """``argsort(-p)[..., :k]`` (every reader takes a line's first k): the kernel selects
    those k, stable, with NaN and ties where a sort puts them (a sort of each line was 6x
    the work: 451 us against 75 for the top 5 of 1000 lines of 50); a result also read
    past its first positions, or returned whole, is sorted whole."""
    for fn, firsts in ((_top_k, ["argsort (first 4)", "argsort (first 2)"]),
                       (_ranks_and_top, ["argsort"])):  # fmt: skip
        exp, fast = _jitted(fn, ("n, 9", np.float32))
        for shape in [(2, 9), (1, 9), (70, 9)]:
            p = np.floor(RNG.standard_normal(shape) * 2).astype(np.float32)  # many ties
            p.flat[::5] = np.nan
            p.flat[1::7] = -0.0
            p.flat[2::9] = 0.0
            for got, want in zip(fast(p), exp.call(p), strict=True):
                np.testing.assert_array_equal(got, want)
        function = _function(fast)
        assert function.whole and not function.interpreted, function.interpreted
        labels = [x for x in _labels(function) if x.startswith("argsort")]
        assert sorted(labels) == sorted(firsts), labels


def _clean_and_count(x: Any) -> Any:
    bad = snp.isnan(x) | snp.isinf(x)
    return (
        snp.where(bad, 0.0, x).sum(-1),
        snp.isfinite(x).sum(-1),
        (x > 0).sum(),
        snp.count_nonzero(snp.nan_to_num(x), axis=0),
    )


def test_nan_tests_fuse_and_counts_of_bools_are_exact_int64() -> None:
    """``isnan``/``isinf`` of floats are ``x != x`` and ``abs(x) == inf`` (a chain fuses
    them, where the ops were interpreted); a count of bools (``(x > 0).sum()``) is an int64
    as NumPy's, the executor's integer reduction (a chain sums float32 only)."""
    exp, fast = _jitted(_clean_and_count, ("b, n", np.float32))
    for shape in [(2, 5), (1, 1), (30, 70)]:
        x = RNG.standard_normal(shape).astype(np.float32)
        x.flat[::7] = np.nan
        x.flat[1::11] = np.inf
        x.flat[2::13] = -np.inf
        for got, want in zip(fast(x), exp.call(x), strict=True):
            assert got.dtype == want.dtype
            if got.dtype == np.float32:  # sums in another order
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
            else:
                np.testing.assert_array_equal(got, want)
    function = _function(fast)
    assert function.whole and not function.interpreted, function.interpreted
    assert "OP_CALL isnan(" not in exp.text() and "OP_CALL isinf(" not in exp.text()
