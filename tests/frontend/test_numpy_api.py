"""shapevm.numpy and shapevm.nn traced with symbolic shapes agree with NumPy on many shapes."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import shapevm as sv
import shapevm.numpy as snp
from shapevm import lax, nn

RNG = np.random.default_rng(1)


def check(
    fn: Callable[..., Any],
    ref: Callable[..., Any],
    spec: str,
    shapes: list[tuple[int, ...]],
    dtype: Any = np.float32,
    rtol: float = 1e-5,
) -> None:
    exp = sv.export(sv.jit(fn))(sv.ShapeDtypeStruct(sv.symbolic_shape(spec), dtype))
    exp = sv.deserialize(exp.serialize())
    for shape in shapes:
        x = (RNG.standard_normal(shape) * 3).astype(dtype)
        got, want = exp.call(x), ref(x)
        if isinstance(want, tuple):
            for g, w in zip(got, want, strict=True):
                np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-5)
        else:
            np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-5)
            assert np.asarray(got).shape == np.asarray(want).shape


def concrete_shapes(spec: str, n: int = 3) -> list[tuple[int, ...]]:
    dims = sv.symbolic_shape(spec)
    names = sorted({v for d in dims if isinstance(d, sv.DimExpr) for v in d.free_vars()})
    out = []
    for i in range(n):
        env = {v: 1 + (i * 3 + k) % 5 for k, v in enumerate(names)}
        out.append(tuple(d if isinstance(d, int) else d.evaluate(env) for d in dims))
    return out


def mirrored(body: Callable[[Any, Any], Any], spec: str) -> tuple[Any, Any, str]:
    """A case written once over a namespace: traced with ``shapevm.numpy``, checked
    against the same code on NumPy."""
    return (lambda x: body(snp, x), lambda x: body(np, x), spec)


CASES: dict[str, tuple[Callable[..., Any], Callable[..., Any], str]] = {
    "arith": (
        lambda x: (x * 2 - 1) / (snp.abs(x) + 1) + x**2 % 3 - x // 2,
        lambda x: (x * 2 - 1) / (np.abs(x) + 1) + x**2 % 3 - x // 2,
        "b, 5",
    ),
    "unary": (
        lambda x: (
            snp.exp(-snp.abs(x)) + snp.tanh(x) + snp.sin(x) * snp.cos(x) + snp.sqrt(snp.abs(x))
        ),
        lambda x: np.exp(-np.abs(x)) + np.tanh(x) + np.sin(x) * np.cos(x) + np.sqrt(np.abs(x)),
        "b",
    ),
    "clip_where": (
        lambda x: snp.where(x > 0, snp.clip(x, 0.5, 2.0), snp.minimum(x, -1.0)),
        lambda x: np.where(x > 0, np.clip(x, 0.5, 2.0), np.minimum(x, -1.0)),
        "b, c",
    ),
    "reductions": (
        lambda x: (
            x.sum(axis=1),
            x.mean(axis=0),
            snp.max(x, axis=1, keepdims=True),
            x.min(),
            snp.prod(x[:, :2], axis=1),
        ),
        lambda x: (
            x.sum(axis=1),
            x.mean(axis=0),
            np.max(x, axis=1, keepdims=True),
            x.min(),
            np.prod(x[:, :2], axis=1),
        ),
        "b, c + 2",
    ),
    "argmax": (
        lambda x: (snp.argmax(x, axis=1), snp.argmin(x, axis=0)),
        lambda x: (np.argmax(x, axis=1), np.argmin(x, axis=0)),
        "b, c",
    ),
    "layout": (
        lambda x: snp.swapaxes(snp.expand_dims(x, 0), 1, 2).reshape(-1, x.shape[0]).T,
        lambda x: np.swapaxes(np.expand_dims(x, 0), 1, 2).reshape(-1, x.shape[0]).T,
        "b, c",
    ),
    "stack_split_concat": (
        lambda x: snp.concatenate(
            snp.split(snp.stack([x, x * 2], axis=1), 2, axis=1)[::-1], axis=0
        ),
        lambda x: np.concatenate(np.split(np.stack([x, x * 2], axis=1), 2, axis=1)[::-1], axis=0),
        "b, 3",
    ),
    "slices": (
        lambda x: (x[1:, ::2], x[-2:], x[:, None, 0], x[..., -1]),
        lambda x: (x[1:, ::2], x[-2:], x[:, None, 0], x[..., -1]),
        "b + 1, c",
    ),
    "reversing slices": (
        lambda x: (x[::-1], x[:, ::-2], x[None, ::-1, 0], x[1:][::-1], x[..., ::-1]),
        lambda x: (x[::-1], x[:, ::-2], x[None, ::-1, 0], x[1:][::-1], x[..., ::-1]),
        "b + 1, c",
    ),
    "pad_broadcast": (
        lambda x: (
            snp.pad(x, ((1, 0), (0, 2)), constant_values=7.0)
            + snp.broadcast_to(1.0, (x.shape[0] + 1, x.shape[1] + 2))
        ),
        lambda x: np.pad(x, ((1, 0), (0, 2)), constant_values=7.0) + 1.0,
        "b, c",
    ),
    "einsum_dot": (
        lambda x: snp.einsum("ij,kj->ik", x, x) + snp.dot(x, x.T),
        lambda x: np.einsum("ij,kj->ik", x, x) + np.dot(x, x.T),
        "b, c",
    ),
    "sort": (lambda x: snp.sort(x, axis=-1), lambda x: np.sort(x, axis=-1), "b, c"),
    "more unary": mirrored(
        lambda m, x: (
            m.tan(x / 4)
            + m.sinh(x / 4)
            + m.cosh(x / 4)
            + m.arctan(x)
            + m.arcsinh(x)
            + m.arcsin(m.tanh(x))
            + m.arccos(m.tanh(x))
            + m.arctanh(m.tanh(x) * 0.5)
            + m.arccosh(m.abs(x) + 1)
        ),
        "b, c",
    ),
    "statistics and tests": mirrored(
        lambda m, x: (
            x.std(axis=-1, keepdims=True),
            m.std(x),
            m.var(x, axis=0, ddof=1),
            m.std(x, axis=(0, 1), ddof=1),
            m.round(x * 2),
            x.round(),
            (x > 1).any(axis=1),
            m.all(x > -5, axis=0),
            m.any(x > 100),
            m.isfinite(m.where(x > 1, m.inf, x)),
            m.isnan(m.where(x < 0, m.nan, x)),
            m.isinf(m.where(x > 0, -m.inf, x)),
        ),
        "b + 1, c + 1",
    ),
    "scans and rearrangements": mirrored(
        lambda m, x: (
            x.cumsum(axis=1),
            m.cumsum(x),
            m.flip(x, axis=0),
            m.flip(x),
            m.repeat(x, 2, axis=1),
            x.repeat(3),
            m.tril(x),
            m.triu(x, 1),
            m.tril(m.ones((x.shape[1], x.shape[1])), -1),
            m.take_along_axis(x, m.argmax(x, axis=1, keepdims=True), axis=1),
        ),
        "b, c",
    ),
    "creation": (
        lambda x: x + snp.arange(x.shape[1]) * 1.0 + snp.ones((x.shape[0], 1)) + snp.zeros_like(x),
        lambda x: x + np.arange(x.shape[1]) + 1.0,
        "b, c",
    ),
    "dims_as_arrays": (
        lambda x: x / x.shape[0] + snp.asarray(x.shape).sum(),
        lambda x: x / x.shape[0] + sum(x.shape),
        "b, c",
    ),
    "top_k": (
        lambda x: lax.top_k(x, 2),
        lambda x: (-np.sort(-x, axis=-1)[:, :2], np.argsort(-x, axis=-1, kind="stable")[:, :2]),
        "b, c + 1",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_numpy_api(name: str) -> None:
    fn, ref, spec = CASES[name]
    check(fn, ref, spec, concrete_shapes(spec))


def _np_layer_norm(x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)


def _np_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


NN: dict[str, tuple[Callable[..., Any], Callable[..., Any], str]] = {
    "relu_silu": (
        lambda x: nn.relu(x) + nn.silu(x),
        lambda x: np.maximum(x, 0) + x / (1 + np.exp(-x)),
        "b, c",
    ),
    "gelu": (
        lambda x: (nn.gelu(x), nn.gelu(x, approximate=False)),
        lambda x: (
            0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
            0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
        ),
        "b, c",
    ),
    "softmax": (
        lambda x: (nn.softmax(x), nn.log_softmax(x, axis=0)),
        lambda x: (_np_softmax(x), np.log(_np_softmax(x, 0))),
        "b, c",
    ),
    "norms": (
        lambda x: (nn.layer_norm(x), nn.rms_norm(x)),
        lambda x: (_np_layer_norm(x), x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)),
        "b, c",
    ),
    "attention": (
        lambda x: nn.scaled_dot_product_attention(x, x, x, mask=snp.ones((x.shape[1],) * 2, bool)),
        lambda x: _np_softmax(x @ np.swapaxes(x, -1, -2) / np.sqrt(x.shape[-1])) @ x,
        "b, s, 8",
    ),
    "causal_attention": (  # PyTorch's is_causal: query i sees keys j <= i; with a mask too
        lambda x: (
            nn.scaled_dot_product_attention(x, x[:, :-1], x[:, :-1], is_causal=True),
            nn.scaled_dot_product_attention(x, x, x, x[0, :, :1] * 0.0, is_causal=True),
            nn.scaled_dot_product_attention(x, x, x, x[0, :, :1] < 9.0, is_causal=True),
        ),
        lambda x: (
            _np_causal(x, x[:, :-1]),
            _np_causal(x, x),
            _np_causal(x, x),
        ),
        "b, s + 2, 8",
    ),
}


def _np_causal(q: np.ndarray, kv: np.ndarray) -> np.ndarray:
    scores = q @ np.swapaxes(kv, -1, -2) / np.sqrt(q.shape[-1])
    keep = np.tri(q.shape[1], kv.shape[1], dtype=bool)
    return _np_softmax(np.where(keep, scores, -np.inf)) @ kv


@pytest.mark.parametrize("name", sorted(NN))
def test_nn(name: str) -> None:
    fn, ref, spec = NN[name]
    check(fn, ref, spec, concrete_shapes(spec), rtol=1e-4)


def _np_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int, pad: int) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, _, h, wd = xp.shape
    o, _, kh, kw = w.shape
    ho, wo = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, o, ho, wo))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i : i + stride * ho : stride, j : j + stride * wo : stride]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out + b[None, :, None, None]


@pytest.mark.parametrize("stride,pad,k", [(1, 1, 3), (2, 1, 3), (1, 0, 1)])
def test_conv_and_pool(stride: int, pad: int, k: int) -> None:
    w = RNG.standard_normal((4, 3, k, k)).astype(np.float32)
    b = RNG.standard_normal(4).astype(np.float32)

    def f(x):
        y = nn.conv2d(x, w, b, stride=stride, padding=pad)
        return y, nn.max_pool2d(y, 2), nn.avg_pool2d(y, 2, stride=1)

    def ref(x):
        y = _np_conv(x, w, b, stride, pad)
        n, c, h, wd = y.shape
        mp = y[:, :, : h // 2 * 2, : wd // 2 * 2].reshape(n, c, h // 2, 2, wd // 2, 2).max((3, 5))
        ap = (y[:, :, :-1, :-1] + y[:, :, 1:, :-1] + y[:, :, :-1, 1:] + y[:, :, 1:, 1:]) / 4
        return y, mp, ap

    check(f, ref, "b, 3, h + 3, w + 3", [(1, 3, 6, 7), (2, 3, 9, 5)], rtol=1e-4)


def test_data_dependent_sizes() -> None:
    def f(x):
        idx = snp.nonzero(x > 0)[0]
        return x[x > 0] * 2.0, idx

    check(f, lambda x: (x[x > 0] * 2.0, np.nonzero(x > 0)[0]), "b", [(5,), (9,), (1,)])


def test_asarray_of_a_table_in_a_trace_is_a_constant_sliced_by_symbolic_sizes() -> None:
    """Positional tables (``wpe[:s]``, rotary ``cos[:s]``): NumPy's own indexing needs an
    int, so inside a trace `snp.asarray` makes the table a traced constant (as
    `jax.numpy.asarray` does) that a symbolic size can slice; outside one it is NumPy's."""
    table = RNG.standard_normal((64, 8)).astype(np.float32)
    assert type(snp.asarray(table)) is np.ndarray

    def fn(x: Any) -> Any:
        return x + snp.asarray(table)[: x.shape[0]]

    (s,) = sv.symbolic_shape("s", constraints=["s <= 64"])
    exp = sv.export(sv.jit(fn))(sv.ShapeDtypeStruct((s, 8), np.float32))
    for n in (1, 5, 64):
        x = RNG.standard_normal((n, 8)).astype(np.float32)
        np.testing.assert_array_equal(exp.call(x), x + table[:n])
        np.testing.assert_array_equal(exp.jit()(x), x + table[:n])


def test_slicing_a_numpy_table_by_a_symbolic_size_says_how_to() -> None:
    table = np.zeros((64, 8), np.float32)
    with pytest.raises(sv.InconclusiveDimensionOperation, match=r"asarray\(table\)\[:s\]"):
        sv.export(sv.jit(lambda x: x + table[: x.shape[0]]))(
            sv.ShapeDtypeStruct(sv.symbolic_shape("s, 8", constraints=["s <= 64"]), np.float32)
        )


def test_an_integer_array_index_is_take_as_in_numpy() -> None:
    """An embedding lookup ``table[ids]``, ``x[:, ids]`` and `snp.take` (also flattened,
    with negative indices) agree with NumPy; an index past the axis raises when the
    program runs, as NumPy's does."""
    table = RNG.standard_normal((50, 6)).astype(np.float32)

    def fn(ids: Any, x: Any) -> Any:
        return (
            snp.asarray(table)[ids],
            x[:, ids[0]],
            snp.take(x, ids, axis=1),
            snp.take(x, ids[..., :1]),
            x[..., ids[0] % 3],
        )

    b, s, n = sv.symbolic_shape("b, s, n")
    exp = sv.export(sv.jit(fn))(
        sv.ShapeDtypeStruct((b, s), np.int32), sv.ShapeDtypeStruct((n, 6), np.float32)
    )
    for b, s, n in [(1, 1, 1), (2, 5, 3), (4, 3, 7)]:
        ids = RNG.integers(-6, 6, (b, s)).astype(np.int32)
        x = RNG.standard_normal((n, 6)).astype(np.float32)
        want = (table[ids], x[:, ids[0]], np.take(x, ids, axis=1), np.take(x, ids[..., :1]),
                x[..., ids[0] % 3])  # fmt: skip
        for got, ref in zip(exp.call(ids, x), want, strict=True):
            np.testing.assert_array_equal(got, ref)
        for got, ref in zip(exp.jit()(ids, x), want, strict=True):
            np.testing.assert_array_equal(got, ref)
    with pytest.raises(Exception, match="out of bounds"):
        exp.call(np.array([[6]], np.int32), np.zeros((1, 6), np.float32))


def test_integer_arrays_on_adjacent_axes_index_as_numpy() -> None:
    """``lp[arange(n), labels]`` (a loss's picked log-probabilities), arrays that broadcast
    (``x[rows[:, None], cols[None, :]]``), negative indices and later axes: NumPy's
    advanced index, interpreted and compiled; an index past its own axis fails the call
    (its flat index too), where a flat index would have wrapped into the next row."""

    def fn(x: Any, rows: Any) -> Any:
        cols = snp.arange(3)
        return (x[snp.arange(x.shape[0]), rows], x[rows[:, None], cols[None, :]],
                x[None][:, rows, rows % 2], x[:, :, None][[0, -1], [1, -2]])  # fmt: skip

    (b,) = sv.symbolic_shape("b")
    exp = sv.export(sv.jit(fn))(
        sv.ShapeDtypeStruct((b, 6), np.float32), sv.ShapeDtypeStruct((b,), np.int64)
    )
    jitted = exp.jit()
    for n in (1, 4, 9):
        x = RNG.standard_normal((n, 6)).astype(np.float32)
        rows = RNG.integers(-min(n, 6), min(n, 6), n)  # within both axes
        want = (x[np.arange(n), rows], x[rows[:, None], np.arange(3)[None, :]],
                x[None][:, rows, rows % 2], x[:, :, None][[0, -1], [1, -2]])  # fmt: skip
        for got in (exp.call(x, rows), *(jitted(x, rows) for _ in range(3))):
            for g, w in zip(got, want, strict=True):
                np.testing.assert_array_equal(g, w)
    with pytest.raises(sv.RuntimeOpError, match="out of bounds"):
        exp.call(np.zeros((2, 6), np.float32), np.array([0, 6]))  # row 1, column 6: past 6


def test_unsupported_array_indices_say_what_is_supported() -> None:
    spec = sv.ShapeDtypeStruct(sv.symbolic_shape("b, 6, 2"), np.float32)
    ids = np.array([0, 1])
    with pytest.raises(sv.TracingError, match=r"integer arrays on adjacent axes"):
        sv.export(sv.jit(lambda x: x[ids, :, ids]))(spec)
    with pytest.raises(sv.TracingError, match=r"integer arrays on adjacent axes"):
        sv.export(sv.jit(lambda x: x[1:, ids]))(spec)
    with pytest.raises(sv.TracingError, match=r"an array index that is not integer"):
        sv.export(sv.jit(lambda x: x[ids, np.array([0.5, 1.0])]))(spec)
    with pytest.raises(sv.TracingError, match=r"take needs integer indices"):
        sv.export(sv.jit(lambda x: snp.take(x, np.array([0.5]), axis=1)))(spec)


def test_a_min_that_a_constraint_would_settle_names_the_constraint() -> None:
    """``min(64, s) == s`` (a table cut to a sequence length, as ONNX's Slice gives) is
    undecided without a bound on ``s``; the fix names ``s <= 64``, the constraint a
    person would write, and where constraints go."""
    spec = sv.ShapeDtypeStruct(sv.symbolic_shape("s, 8"), np.float32)
    with pytest.raises(sv.TracingError, match=r"'s <= 64'.*shapevm\.onnx\.load"):
        sv.export(sv.jit(lambda x: x + snp.zeros((sv.min_dim(64, x.shape[0]), 8))))(spec)


def test_a_boolean_index_beside_other_indices_is_refused_not_taken() -> None:
    spec = sv.ShapeDtypeStruct(sv.symbolic_shape("b, 3"), np.float32)
    mask = np.array([True, False, True])
    for fn in (lambda x: x[:, mask], lambda x: x[:, x[0] > 0], lambda x: x[:, [True, False, True]]):
        with pytest.raises(sv.TracingError, match=r"boolean mask is supported only as the only"):
            sv.export(sv.jit(fn))(spec)
    rows = np.arange(12, dtype=np.float32).reshape(4, 3)
    alone = sv.export(sv.jit(lambda x: x[[True, False, True, True]]))(
        sv.ShapeDtypeStruct((4, 3), np.float32)
    )
    np.testing.assert_array_equal(alone.call(rows), rows[[True, False, True, True]])


def test_out_of_range_axes_and_a_zero_step_are_refused() -> None:
    spec = sv.ShapeDtypeStruct(sv.symbolic_shape("b, 3"), np.float32)
    for fn in (
        lambda x: snp.sum(x, axis=2),
        lambda x: snp.cumsum(x, axis=-3),
        lambda x: snp.repeat(x, 2, axis=5),
        lambda x: snp.transpose(x, (0, 2)),
        lambda x: snp.stack([x, x], axis=3),
    ):
        with pytest.raises(sv.TracingError, match=r"out of range for an array of rank"):
            sv.export(sv.jit(fn))(spec)
    with pytest.raises(sv.TracingError, match=r"step cannot be 0"):
        sv.export(sv.jit(lambda x: x[::0]))(spec)


def test_a_negative_step_with_bounds_says_what_works() -> None:
    spec = sv.ShapeDtypeStruct(sv.symbolic_shape("b, 3"), np.float32)
    with pytest.raises(sv.TracingError, match=r"x\[a:b\]\[::-1\]"):
        sv.export(sv.jit(lambda x: x[2:0:-1]))(spec)


def test_a_triangle_of_a_boolean_array_stays_boolean() -> None:
    """``np.tril``/``np.triu`` keep the dtype: a causal mask of booleans is booleans (it was
    an int32 array, compared with 0 again where it was used)."""

    def masks(x: Any) -> Any:
        ones = snp.ones((x.shape[1], x.shape[1]), dtype=bool)
        return snp.tril(ones), snp.triu(x > 0, 1), snp.tril(x, -1)

    exp = sv.export(sv.jit(masks))(sv.ShapeDtypeStruct(sv.symbolic_shape("b, c"), np.float32))
    assert "OP_CALL cast(" not in exp.text()
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    want = (np.tril(np.ones((3, 3), bool)), np.triu(x > 0, 1), np.tril(x, -1))
    for got, w in zip(exp.call(x), want, strict=True):
        assert got.dtype == w.dtype
        np.testing.assert_array_equal(got, w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.uint8])
def test_squares_roots_and_reciprocals_by_power_are_numpys_bits(dtype: Any) -> None:
    """``x ** 2``, ``x ** 0.5`` and ``x ** -1`` (and ``np.power``) give NumPy's bits, which
    are its ``x * x``, ``sqrt`` and ``1 / x``: they trace as those ops, not as ``pow``, so
    they fuse with their neighbours (``((a - p) ** 2).sum(1)`` ran the C library's ``powf``
    per element, 40x NumPy's time); compiled and interpreted alike."""
    floats = np.dtype(dtype).kind == "f"
    exps: list[float] = [2, 2.0, 0.5, -1, -1.0] if floats else [2]
    x = (RNG.standard_normal((6, 7)) * 4).astype(dtype)
    if floats:
        x[0, :4] = [-0.0, np.inf, -np.inf, np.nan]
    for e in exps:
        for body in (lambda a, e=e: a**e, lambda a, e=e: snp.power(a, e)):
            exp = sv.export(sv.jit(body))(sv.ShapeDtypeStruct(sv.symbolic_shape("n, 7"), dtype))
            assert "pow(" not in exp.text()
            with np.errstate(all="ignore"):
                want = x**e
            for run in (exp.call, exp.jit(hot_threshold=1)):
                with np.errstate(all="ignore"):  # 1 / 0, as NumPy warns
                    got = run(x)
                    got = run(x)  # the second call compiled
                assert got.dtype == want.dtype
                np.testing.assert_array_equal(got, want)


def test_an_integer_array_to_a_negative_power_is_refused_where_it_is_written() -> None:
    spec = sv.ShapeDtypeStruct(sv.symbolic_shape("n"), np.int32)
    with pytest.raises(sv.TracingError, match=r"negative power -2(.|\n)*x.astype\(np.float32\)"):
        sv.export(sv.jit(lambda x: x**-2))(spec)


def test_a_float16_product_is_numpys_computed_in_float32() -> None:
    """``a @ b`` of float16 arrays adds in float32 and rounds once, as NumPy's float16
    matmul does (0.2% of elements could differ by the order of the float32 sums), and
    compiles to a float32 product (NumPy's own took 6.5 ms on [512, 64] @ [64, 64])."""
    a = RNG.standard_normal((40, 64)).astype(np.float16)
    b = (RNG.standard_normal((64, 24)) / 8).astype(np.float16)
    v = RNG.standard_normal(64).astype(np.float16)
    f = sv.jit(lambda x, w, u: (x @ w, snp.matmul(u, w), x @ u), shapes=("n, 64", "64, 24", "64"),
               hot_threshold=1)  # fmt: skip
    for _ in range(3):
        got = f(a, b, v)
    for g, w in zip(got, (a @ b, v @ b, a @ v), strict=True):
        assert g.dtype == np.float16 and g.shape == w.shape
        np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=2e-3, atol=2e-3)
        assert np.mean(g == w) > 0.99
    (engine,) = f.engines
    (rec,) = [r for r in engine.records() if r.variant]
    assert rec.variant.function.whole, rec.variant.describe()  # one executor call


def test_numpys_reduction_functions_take_traced_arrays() -> None:
    """`np.sum(x)`, `np.mean(x)`, `np.std(x, ddof=1)`... call the array's method with
    NumPy's `out=None` (and `dtype=None`): NumPy's results; an `out=` array is refused with
    what to write instead."""

    def f(x: Any) -> Any:
        return (
            np.std(x, ddof=1), np.var(x, axis=0), np.sum(x, axis=1), np.mean(x),
            np.argmax(x, axis=1), np.max(x), np.min(x, axis=0), np.cumsum(x, axis=0),
            np.any(x > 0), np.all(x > -5, axis=1), np.prod(x, axis=0), np.argmin(x),
        )  # fmt: skip

    x = np.random.default_rng(11).standard_normal((4, 3)).astype(np.float32)
    got, want = sv.jit(f)(x), f(x)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == np.asarray(w).dtype
        np.testing.assert_allclose(g, w, rtol=1e-6)
    with pytest.raises(sv.TracingError, match="out="):
        sv.jit(lambda a: np.sum(a, axis=0, out=np.zeros(3, np.float32)))(x)
