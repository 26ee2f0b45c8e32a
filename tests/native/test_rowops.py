"""Layer norm, RMS norm, softmax and log-softmax against float64, at every instruction-set
level: hypothesis draws the leading shape, the row length, broadcast residuals and masks,
strided views, in-place outputs and thread counts; results are within 1e-5 relative."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shapevm import native
from tests.native.reference import rel_err

Array = np.ndarray[Any, Any]

leads = st.sampled_from([(), (1,), (3,), (2, 5), (4, 1, 3), (70,), (300,)])
row_lens = st.one_of(st.integers(1, 40), st.sampled_from([64, 255, 256, 257, 1000, 4099]))


def _data(seed: int, *shape: int, loc: float = 0.0) -> Array:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 2.0 + loc).astype(np.float32)


def norm64(h: Array, gamma: Array | None, beta: Array | None, eps: float, rms: bool) -> Array:
    h = h.astype(np.float64)
    if rms:
        y = h / np.sqrt((h * h).mean(-1, keepdims=True) + eps)
    else:
        c = h - h.mean(-1, keepdims=True)
        y = c / np.sqrt((c * c).mean(-1, keepdims=True) + eps)
    if gamma is not None:
        y = y * gamma
    return y + beta if beta is not None else y


def softmax64(t: Array, log: bool) -> Array:
    t = t.astype(np.float64)
    with np.errstate(invalid="ignore"):
        s = t - t.max(-1, keepdims=True)
        e = np.exp(s)
        total = e.sum(-1, keepdims=True)
        return s - np.log(total) if log else e / total


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lead=leads,
    n=row_lens,
    rms=st.booleans(),
    affine=st.sampled_from(["none", "gamma", "both"]),
    residual=st.sampled_from(["none", "full", "row"]),
    loc=st.sampled_from([0.0, 1000.0]),
    threads=st.sampled_from([0, 1]),
)
def test_norms_match_float64(
    isa: str,
    lead: tuple[int, ...],
    n: int,
    rms: bool,
    affine: str,
    residual: str,
    loc: float,
    threads: int,
) -> None:
    x = _data(1, *lead, n, loc=loc)
    g = _data(2, n) if affine != "none" else None
    b = _data(3, n) if affine == "both" else None
    r = {"none": None, "full": _data(4, *lead, n), "row": _data(5, n)}[residual]
    fn = native.rms_norm if rms else native.layer_norm
    y = fn(x, g, b, eps=1e-5, residual=r, threads=threads)
    h = x + r if r is not None else x  # the sum in float32, as the program computes it
    assert y.shape == x.shape and y.dtype == np.float32
    assert rel_err(y, norm64(h, g, b, 1e-5, rms)) < 1e-5


def test_norm_writes_the_sum_and_works_in_place(isa: str) -> None:
    x, r, g = _data(6, 5, 96), _data(7, 5, 96), _data(8, 96)
    expected_h = x + r
    expected = norm64(expected_h, g, None, 1e-5, False)
    native.layer_norm(x, g, residual=r, sum_out=r, out=x)  # r <- x + r, x <- norm
    assert np.array_equal(r, expected_h) and rel_err(x, expected) < 1e-5


def test_norm_takes_strided_rows_and_outputs(isa: str) -> None:
    big = _data(9, 6, 4, 50)
    x = big[::2, :, 5:45]  # leading strides that do not merge
    out = np.full((3, 4, 60), 7.0, np.float32)
    native.rms_norm(x, out=out[:, :, 10:50])
    assert rel_err(out[:, :, 10:50], norm64(x, None, None, 1e-5, True)) < 1e-5
    assert (out[:, :, :10] == 7.0).all() and (out[:, :, 50:] == 7.0).all()


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lead=leads,
    n=row_lens,
    log=st.booleans(),
    scale=st.sampled_from([1.0, 0.125, -2.0]),
    mask=st.sampled_from(["none", "full", "row", "column"]),
    threads=st.sampled_from([0, 1]),
)
def test_softmax_matches_float64(
    isa: str,
    lead: tuple[int, ...],
    n: int,
    log: bool,
    scale: float,
    mask: str,
    threads: int,
) -> None:
    x = _data(10, *lead, n) * 4.0
    m = {
        "none": None,
        "full": _data(11, *lead, n),
        "row": np.where(np.arange(n) % 3 == 1, -np.inf, 0.0).astype(np.float32),
        "column": _data(12, *lead, 1),
    }[mask]
    if mask == "row" and n % 3 == 2 and n < 3:
        m = None
    fn = native.log_softmax if log else native.softmax
    y = fn(x, scale=scale, mask=m, threads=threads)
    t = x.astype(np.float64) * scale + (m if m is not None else 0.0)
    ref = softmax64(t, log)
    finite = np.isfinite(ref)
    assert np.array_equal(np.isfinite(y), finite)
    assert rel_err(y[finite], ref[finite]) < 1e-5


def test_softmax_in_place_and_extremes(isa: str) -> None:
    x = np.float32([[1e30, -1e30, 0.0], [np.inf, 0.0, 0.0], [-np.inf] * 3, [np.nan, 0, 1]])
    y = native.softmax(x.copy())
    assert y[0].tolist() == [1.0, 0.0, 0.0]
    assert np.isnan(y[1:]).all()  # inf - inf and an all -inf row: NaN, as the formula gives
    for n, at in ((16, 9), (37, 20), (37, 36)):  # a NaN in any lane of any vector: a NaN row
        w = _data(14, 2, n)
        w[1, at] = np.nan
        got = native.softmax(w, scale=-0.5)
        assert np.isnan(got[1]).all() and rel_err(got[0], softmax64(w[:1] * -0.5, False)[0]) < 1e-5
    z = _data(13, 3, 40)
    expected = softmax64(z, False)
    native.softmax(z, out=z)
    assert rel_err(z, expected) < 1e-5


@pytest.mark.parametrize("log", [False, True])
def test_short_rows_in_blocks(isa: str, log: bool) -> None:
    """Rows of up to 8 go a block of rows at a time: every length 1-9, row counts that
    leave a partial block, leading dims that do not merge (runs restarting mid-task across
    threads), a mask per row and one for all rows, NaN, +-inf and an all -inf row."""
    fn = native.log_softmax if log else native.softmax
    for n in range(1, 10):
        big = _data(20 + n, 3, 4101, n + 3) * 4.0
        x = big[:, :4100:2, 1 : n + 1]  # [3, 2050, n]: leading strides that do not merge
        x[0, 5, 0] = np.nan
        x[1, 17, :] = -np.inf
        x[2, 40, -1] = np.inf
        for m in (None, _data(40 + n, 3, 2050, n), _data(60 + n, n)):
            for threads in (0, 1):
                y = fn(x, scale=0.5, mask=m, threads=threads)
                t = x.astype(np.float64) * 0.5 + (m if m is not None else 0.0)
                ref = softmax64(t, log)
                assert np.array_equal(np.isnan(y), np.isnan(ref)), (n, threads)
                finite = np.isfinite(ref)
                assert np.array_equal(np.isfinite(y), finite)
                assert rel_err(y[finite], ref[finite]) < 1e-5, (n, threads)
        for rows in (1, 15, 16, 17, 33):  # in place, a partial last block
            z = _data(80 + rows, rows, n)
            expected = softmax64(z, log)
            fn(z, out=z)
            assert rel_err(z, expected) < 1e-5


def test_empty_inputs(isa: str) -> None:
    assert native.layer_norm(np.zeros((0, 8), np.float32)).shape == (0, 8)
    assert native.softmax(np.zeros((3, 0), np.float32)).shape == (3, 0)


@pytest.mark.parametrize(
    ("call", "headline", "found"),
    [
        (
            lambda: native.layer_norm(np.ones((2, 4), np.float32), eps=-1.0),
            "layer_norm: eps must be a non-negative number",
            "eps=-1",
        ),
        (
            lambda: native.layer_norm(np.ones((2, 4))),
            "layer_norm: x must be float32",
            "f64[2, 4]",
        ),
        (
            lambda: native.layer_norm(np.ones((4, 2), np.float32).T),
            "layer_norm: x must have unit stride along its last axis",
            "not C-contiguous",
        ),
        (
            lambda: native.rms_norm(np.ones((1,) * 10, np.float32)),
            "rms_norm: x has the wrong rank 10",
            "f32[1, 1, 1",
        ),
        (
            lambda: native.layer_norm(np.ones((2, 4), np.float32), None, np.ones(5, np.float32)),
            "layer_norm: beta does not match the rows",
            "f32[5]",
        ),
        (
            lambda: native.layer_norm(
                np.ones((2, 4), np.float32), residual=np.ones((3, 4), np.float32)
            ),
            "layer_norm: residual does not broadcast to the input",
            "f32[3, 4]",
        ),
        (
            lambda: native.layer_norm(
                np.ones((2, 4), np.float32), sum_out=np.ones((2, 4), np.float32)
            ),
            "layer_norm: sum_out needs a residual",
            "sum_out without residual",
        ),
        (
            lambda: native.layer_norm(
                np.ones((2, 4), np.float32),
                residual=np.ones(4, np.float32),
                sum_out=np.ones((1, 4), np.float32),
            ),
            "layer_norm: sum_out does not have the input's shape",
            "f32[1, 4]",
        ),
        (
            lambda: native.layer_norm(
                np.ones((2, 4), np.float32), out=np.ones((2, 4), np.float32)[:, ::-1]
            ),
            "layer_norm: out must have unit stride along its last axis",
            "not C-contiguous",
        ),
        (
            lambda: native.layer_norm(np.ones((2, 4), np.float32), out=np.ones((4,), np.float32)),
            "layer_norm: out does not have the input's shape",
            "f32[4]",
        ),
        (lambda: _partial_alias("out"), "layer_norm: out overlaps x", "partly shared memory"),
        (
            lambda: _partial_alias("residual"),
            "layer_norm: out overlaps residual",
            "partly shared memory",
        ),
        (
            lambda: _partial_alias("sum_out"),
            "layer_norm: sum_out overlaps x",
            "partly shared memory",
        ),
        (
            lambda: native.softmax(np.ones((2, 4), np.float32), mask=np.ones((3, 4), np.float32)),
            "softmax: mask does not broadcast to the input",
            "f32[3, 4]",
        ),
        (
            lambda: native.log_softmax(np.ones((2, 4), np.float32), mask=[0.0]),
            "log_softmax: mask must be a NumPy array",
            "list",
        ),
    ],
)
def test_row_ops_refuse_bad_arguments(call: Any, headline: str, found: str) -> None:
    with pytest.raises(native.NativeKernelError) as info:
        call()
    text = str(info.value)
    assert text.splitlines()[0] == headline
    assert found in info.value.found and "fix:" in text


def _partial_alias(which: str) -> Array:
    buf = np.ones((3, 8), np.float32)
    x, shifted = buf[:2], buf[1:]
    if which == "out":
        return native.layer_norm(x, out=shifted)
    if which == "residual":
        return native.layer_norm(np.ones((2, 8), np.float32), residual=x, out=shifted)
    return native.layer_norm(x, residual=np.ones(8, np.float32), sum_out=shifted)
