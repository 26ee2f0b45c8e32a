"""The NumPy functions written with the op table's ops (`shapevm.frontend.numpy_more`),
traced with symbolic shapes, serialized and run, agree with NumPy's on several shapes; the
JIT agrees with the interpreter on them."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import shapevm as sv
import shapevm.numpy as snp
from tests.frontend.test_numpy_api import check, concrete_shapes


def _specials(ns: Any, x: Any) -> Any:
    y = ns.where(x > 2.0, np.float32(np.inf), x)
    return ns.where(x < -2.0, np.float32(np.nan), y)


BODIES: dict[str, tuple[Callable[[Any, Any], Any], str]] = {
    "logs": (
        lambda ns, x: ns.log1p(ns.abs(x)) + ns.expm1(x * 0.1) + ns.log2(ns.abs(x) + 1)
        + ns.log10(ns.abs(x) + 1) + ns.arctan2(x, x * 0.5 + 1) + ns.hypot(x, 2.0)
        + ns.reciprocal(ns.abs(x) + 1),
        "b, c",
    ),
    "argsort": (lambda ns, x: (ns.argsort(x, axis=0), ns.argsort(x), ns.argsort(x, None)), "b, c"),
    "sort_flat": (lambda ns, x: ns.sort(x, axis=None), "b, c"),
    "median": (
        lambda ns, x: (ns.median(x), ns.median(x, axis=1), ns.median(x, axis=0, keepdims=True),
                       ns.median(x, keepdims=True)),
        "b, c",
    ),
    "median_nan": (lambda ns, x: ns.median(_specials(ns, x), axis=1), "b, c"),
    "quantile": (
        lambda ns, x: (ns.quantile(x, 0.3, axis=1), ns.quantile(x, [0.0, 0.5, 1.0], axis=0),
                       ns.percentile(x, 90), ns.percentile(x, 25, axis=1, keepdims=True),
                       ns.quantile(_specials(ns, x), 0.7, axis=1)),
        "b, c",
    ),
    "polyval_search": (
        lambda ns, x: (ns.polyval([1.0, -2.0, 0.5, 3.0], x), ns.polyval(np.float32([2, 1]), x),
                       ns.searchsorted(np.float32([-1, 0, 1]), _specials(ns, x)),
                       ns.searchsorted(np.float32([-1, 0, np.nan]), _specials(ns, x), "right"),
                       ns.searchsorted(np.linspace(-3, 3, 40, dtype=np.float32), x),
                       ns.searchsorted(ns.sort(_specials(ns, x[0])), _specials(ns, x[-1]), "right"),
                       ns.digitize(x, [-1.0, 0.5, 2.0]), ns.digitize(x, [2.0, 0.5, -1.0], True),
                       ns.interp(_specials(ns, x), [-2.0, 0.0, 1.0, 2.0], [0.0, 1.0, 0.0, 5.0]),
                       ns.interp(x, [-1.0, 1.0], [2.0, 3.0], left=-9.0, right=9.0),
                       ns.interp(x, np.linspace(-3, 3, 20), np.linspace(-3, 3, 20) ** 2)),
        "b, c",
    ),
    "flat_arg": (
        lambda ns, x: (ns.argmax(_specials(ns, x)), x.argmin(), ns.argmax(x, keepdims=True),
                       ns.argmin(x[0], keepdims=True)),
        "b, c",
    ),
    "clip_keywords": (
        lambda ns, x: (ns.clip(x, min=-0.5), x.clip(max=0.25), x.clip(min=-1, max=1),
                       ns.clip(x, None, 0.5)),
        "b, c",
    ),
    "quantile_methods": (
        lambda ns, x: tuple(ns.quantile(x, q, axis=1, method=m) for q in (0.25, 0.5, 0.8)
                            for m in ("lower", "higher", "midpoint", "nearest")),
        "b, 7",
    ),
    "diff": (
        lambda ns, x: (ns.diff(x), ns.diff(x, 2, axis=0), ns.diff(x > 0, axis=1)),
        "b + 2, c + 1",
    ),
    "roll": (
        lambda ns, x: (ns.roll(x, 2, axis=1), ns.roll(x, -1), ns.roll(x, (1, 5), (0, 1)),
                       ns.roll(x, 3, axis=2)),
        "b, c, 4",
    ),
    "tile_stack": (
        lambda ns, x: (ns.tile(x, (2, 1, 3)), ns.tile(x[0, 0], 2), ns.hstack([x[0], x[1]]),
                       ns.vstack([x[0], x[1]]), ns.outer(x[0, :, 0], x[:, 0, 1]),
                       ns.atleast_2d(x[0, 0, 0]), x[:, ns.newaxis].shape[1] + 0 * x),
        "b + 1, c, 2",
    ),
    "eye_trace": (
        lambda ns, x: (x * ns.eye(x.shape[0]), ns.trace(x), ns.diagonal(x, 1), ns.diagonal(x, -1),
                       ns.eye(x.shape[0], 3, k=1), ns.identity(x.shape[1])),
        "n, n",
    ),
    "isclose": (
        lambda ns, x: (ns.isclose(x, x + 1e-6), ns.isclose(_specials(ns, x), _specials(ns, x)),
                       ns.isclose(_specials(ns, x), _specials(ns, x), equal_nan=True),
                       ns.allclose(x, x * 1.1), ns.nan_to_num(_specials(ns, x)),
                       ns.nan_to_num(_specials(ns, x), nan=-1.0, posinf=9.0)),
        "b, c",
    ),
    "average": (
        lambda ns, x: (ns.average(x), ns.average(x, axis=1, weights=ns.abs(x[0]) + 1),
                       ns.average(x, axis=0, weights=ns.abs(x) + 1)),
        "b, c",
    ),
    "select_mesh": (
        lambda ns, x: (ns.select([x > 1, x < -1], [x, -x], 0.0),
                       sum(ns.meshgrid(x[0], x[:, 0])),
                       sum(ns.meshgrid(x[0], x[:, 0], indexing="ij"))),
        "b, c",
    ),
    "nan_reductions": (
        lambda ns, x: (ns.nansum(_specials(ns, x)), ns.nanmean(_specials(ns, x), axis=1),
                       ns.nanmax(_specials(ns, x), axis=0), ns.nanmin(_specials(ns, x), axis=1,
                       keepdims=True)),
        "b, c",
    ),
    "numpy2_methods": (
        lambda ns, x: (x.mT, divmod(x, 2.0)[0], divmod(x, 2.0)[1], x.max(axis=1, initial=0.5),
                       x.min(initial=-0.5), x.mean(dtype=np.float32), x.prod(0, dtype=np.float32)),
        "b, c, 3",
    ),
    "take_along_broadcast": (  # indices and arr broadcast off the axis, as NumPy's
        lambda ns, x: (ns.take_along_axis(x, ns.argsort(x[..., 0], axis=1)[:, :2, None], axis=1),
                       ns.take_along_axis(x[:1], ns.argmax(x, axis=1, keepdims=True), axis=1),
                       ns.take_along_axis(x, ns.argmin(x, axis=-1, keepdims=True), axis=-1)),
        "b, c + 1, 4",
    ),
    "tensordot": (
        lambda ns, x: (ns.tensordot(x, x, axes=([1], [1])), ns.tensordot(x, x, axes=2),
                       ns.inner(x, x), ns.tensordot(x[0], x[0], axes=0)),
        "b, c",
    ),
    "logaddexp": (
        lambda ns, x: (ns.logaddexp(x, x[::-1] * 2.0), ns.logaddexp2(x, -x),
                       ns.logaddexp(_specials(ns, x), _specials(ns, -x)),
                       ns.logaddexp(x * 0.0 - np.inf, x * 0.0 - np.inf)),
        "b, c",
    ),
    "rounding": (
        lambda ns, x: (ns.trunc(x), ns.fix(-x), ns.rint(x * 2.0), ns.exp2(x), ns.exp2(x > 0),
                       ns.trunc(x > 0)),
        "b, c",
    ),
    "fmax_fmin_ptp": (
        lambda ns, x: (ns.fmax(_specials(ns, x), x[0]), ns.fmin(x[:, :1], _specials(ns, x)),
                       ns.ptp(x), ns.ptp(x, axis=0), ns.ptp(x, axis=1, keepdims=True)),
        "b, c",
    ),
    "angles": (
        lambda ns, x: (ns.deg2rad(x * 90.0), ns.rad2deg(x), ns.radians(x), ns.degrees(x),
                       ns.heaviside(ns.trunc(x), 0.5), ns.heaviside(_specials(ns, x), x)),
        "b, c",
    ),
    "constructors": (
        lambda ns, x: (ns.column_stack([x[:, 0], x, x[:, 1] * 2.0]),
                       ns.linspace(0.0, 1.0, x.shape[1]) * x, ns.linspace(-2, 3, 7) + x[:, :1],
                       ns.linspace(1.0, 2.0, x.shape[0], endpoint=False)[:, None] * x,
                       ns.tri(x.shape[0]) @ x, ns.tri(x.shape[0], x.shape[1], k=-1) * x,
                       ns.tri(3, 4, 1) + x[0, 0], ns.empty_like(x) * 0.0 + x,
                       ns.empty((x.shape[0], 2)) * 0.0),
        "b + 1, c + 1",
    ),
    "norms": (
        lambda ns, x: (ns.linalg.norm(x), ns.linalg.norm(x, axis=1), ns.linalg.norm(x[0]),
                       ns.linalg.norm(x, ord=1, axis=0, keepdims=True),
                       ns.linalg.norm(x, ord=np.inf, axis=-1), ns.linalg.norm(x, -np.inf, 1),
                       ns.linalg.norm(x, 0, 1), ns.linalg.norm(x, 3, 1), ns.linalg.norm(x, 0.5, 0),
                       ns.linalg.norm(x, "fro"), ns.linalg.norm(x, 1), ns.linalg.norm(x, -1),
                       ns.linalg.norm(x, np.inf), ns.linalg.norm(x, -np.inf, keepdims=True),
                       ns.linalg.norm(x[None], axis=(1, 2)), ns.linalg.norm(x[None], 1, (2, 1)),
                       ns.linalg.vector_norm(x), ns.linalg.vector_norm(x, axis=(0, 1), ord=1),
                       ns.linalg.vector_norm(x, axis=0, keepdims=True, ord=np.inf),
                       ns.linalg.matrix_norm(x[None]), ns.linalg.matrix_norm(x, ord=np.inf)),
        "b + 1, c + 1",
    ),
    "numpy_idioms": (  # the keyword arguments and ufunc methods a NumPy program uses
        lambda ns, x: (ns.round(x, 2), ns.round(x * 30.0, -1), x.round(1),
                       ns.sum(x, axis=1, where=x > 0), ns.sum(x, initial=1.5),
                       ns.mean(x, axis=0, where=x > x.min(axis=0)),
                       ns.prod(x, 1, where=x > 0, initial=2.0),
                       ns.max(x, axis=1, where=x < 1, initial=-5.0),
                       ns.min(x, where=x > 0, initial=9.0),
                       ns.add.outer(x[0], x[:, 0]), ns.multiply.outer(x[0], x[1, :2]),
                       ns.maximum.reduce(x), ns.add.reduce(x, axis=None),
                       ns.add.accumulate(x, axis=1), ns.logical_or.reduce(x > 2, axis=1),
                       x[0] @ x[0], x @ x[0], x[0] @ x.T,
                       ns.take(x, ns.arange(-6, 9), axis=1, mode="clip"),
                       ns.take(x, ns.arange(-6, 9), axis=1, mode="wrap"),
                       ns.concatenate([x, x[0]], axis=None)),
        "b + 1, c + 3",
    ),
    "shape_helpers": (
        lambda ns, x: (*ns.unravel_index(ns.argmax(x, axis=1), (3, x.shape[1] // 3 + 1)),
                       *ns.array_split(x, 3, axis=1), *ns.array_split(x, [1, 2], axis=0),
                       ns.diag(x[:, :2].T @ x[:, :2]), ns.diag(x[0]), ns.diag(x[0], 2),
                       ns.diag(x[0], -1), ns.cross(x[:, :3], x[:, 1:4]),
                       ns.cross(x[:3], x[1:4], axis=0),
                       *ns.broadcast_arrays(x[:, :1], x[:1], 2.0), ns.atleast_3d(x),
                       ns.atleast_3d(x[0]), ns.atleast_3d(x[0, 0])),
        "b + 4, c + 4",
    ),
    "pad_modes": (
        lambda ns, x: (*(ns.pad(x, ((1, 2), (3, 1)), mode=m)
                         for m in ("edge", "reflect", "symmetric", "wrap")),
                       ns.pad(x, 2, mode="edge"), ns.pad(x, ((0, 0), (0, 3)), mode="reflect")),
        "b + 3, c + 4",
    ),
}  # fmt: skip


def _mirror(name: str) -> tuple[Callable[..., Any], Callable[..., Any], str]:
    body, spec = BODIES[name]

    def ref(x: Any) -> Any:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's all-nan slices
            return body(np, x)

    return (lambda x: body(snp, x), ref, spec)


@pytest.mark.parametrize("name", sorted(BODIES))
def test_more_of_numpy_agrees_with_numpy(name: str) -> None:
    fn, ref, spec = _mirror(name)
    check(fn, ref, spec, concrete_shapes(spec, 4))


@pytest.mark.parametrize(
    "name",
    ["logs", "roll", "median", "quantile", "polyval_search", "tile_stack", "isclose",
     "take_along_broadcast", "logaddexp", "rounding", "fmax_fmin_ptp", "angles",
     "constructors", "norms", "numpy_idioms", "pad_modes", "shape_helpers"],
)  # fmt: skip
def test_the_jit_agrees_with_the_interpreter(name: str) -> None:
    fn, _, spec = _mirror(name)
    exp = sv.export(sv.jit(fn))(sv.ShapeDtypeStruct(sv.symbolic_shape(spec), np.float32))
    jitted = exp.jit(hot_threshold=1, background=False, tier3=False)
    rng = np.random.default_rng(3)
    for shape in concrete_shapes(spec, 4):
        x = (rng.standard_normal(shape) * 3).astype(np.float32)
        for g, w in zip(*(r if isinstance(r, tuple) else (r,) for r in (jitted(x), exp.call(x))),
                        strict=True):  # fmt: skip
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    assert jitted.jit_stats()["failures"] == 0


def test_argsort_is_stable_and_puts_nan_last_in_both_orders() -> None:
    from shapevm.ops import get_op

    x = np.float32([3, np.nan, 1, 3, 1, np.nan, 2])
    kernel = get_op("argsort").kernel  # type: ignore[union-attr]
    (up,) = kernel([x], {"axis": -1, "descending": False})
    (down,) = kernel([x], {"axis": -1, "descending": True})
    assert up.tolist() == [2, 4, 6, 0, 3, 1, 5]
    assert down.tolist() == [1, 5, 0, 3, 6, 2, 4]
    assert up.dtype == np.int64 and snp.argsort(x).tolist() == np.argsort(x, kind="stable").tolist()


def test_what_numpy_would_do_otherwise_is_refused_with_the_fix() -> None:
    with pytest.raises(TypeError, match=r"(?s)clip: bounds given twice.*fix"):
        snp.clip(np.ones(2, np.float32), 0.0, None, min=1.0)
    with pytest.raises(sv.TracingError, match=r"(?s)np.maximum.accumulate is not traced.*fix"):
        sv.jit(lambda v: snp.maximum.accumulate(v), shapes="n")(np.ones(3, np.float32))
    with pytest.raises(TypeError, match=r"(?s)reciprocal of an integer array.*1 / x.astype"):
        snp.reciprocal(np.arange(3))
    with pytest.raises(ValueError, match="diagonal of an array that is not 2-D"):
        snp.diagonal(np.ones((2, 2, 2), np.float32))
    with pytest.raises(ValueError, match="roll: 2 shifts for 3 axes"):
        snp.roll(np.ones((2, 2, 2), np.float32), (1, 2), (0, 1, 2))
    with pytest.raises(ValueError, match="average: weights of another shape"):
        snp.average(np.ones((2, 3), np.float32), weights=np.ones(3, np.float32))
    with pytest.raises(ValueError, match="matrix transpose of an array of 1 dimensions"):
        sv.jit(lambda v: v.mT)(np.ones(3, np.float32))
    x = np.ones((2, 3), np.float32)
    for call, headline in (
        (lambda: snp.diff(x, -1), "diff of a negative order"),
        (lambda: snp.meshgrid(x[0], indexing="yx"), "meshgrid: unknown indexing"),
        (lambda: snp.select([x > 0], [x, x]), "select: as many conditions as choices"),
        (lambda: snp.tensordot(x, x, ([0, 1], [0])), "tensordot: as many axes of a as of b"),
        (lambda: snp.linalg.norm(x, 2), "matrix norm of order 2"),
        (lambda: snp.linalg.norm(x, "nuc"), "matrix norm of order 'nuc'"),
        (lambda: snp.linalg.norm(x, "max", axis=1), "vector norm of an unknown order"),
        (lambda: snp.linalg.norm(x, axis=(1, 1)), "norm over these axes"),
        (lambda: snp.linalg.norm(x[None], 1), "norm of order 1 of an array of 3 dimensions"),
        (lambda: snp.linalg.matrix_norm(x[0]), "matrix_norm of an array of fewer than 2"),
        (lambda: snp.pad(x, 1, mode="median"), "pad: mode='median' is not supported"),
        (lambda: snp.cross(x[:, :2], x[:, :2]), "cross of vectors that are not both 3-D"),
        (lambda: snp.take(x, np.array([0]), mode="nearest"), "take: mode='nearest' is not one"),
        (lambda: snp.quantile(x, 0.5, method="weibull"), "quantile method 'weibull'"),
        (lambda: snp.searchsorted(x, x[0]), "searchsorted in an array that is not 1-D"),
        (lambda: snp.interp(x[0], x, x), "interp: xp and fp must be 1-D"),
        (lambda: snp.polyval(x, x), "polyval of coefficients that are not a 1-D"),
        (lambda: snp.percentile(x, 150), "quantiles must be in the range"),
        (
            lambda: sv.jit(lambda v: snp.linspace(0, 9, v.shape[0], dtype=np.int32), shapes="n")(
                x[0]
            ),
            "linspace of a symbolic length in an integer dtype",
        ),
    ):
        with pytest.raises(ValueError, match=headline) as err:
            call()
        assert all(f"{label}:" in str(err.value) for label in ("expected", "found", "fix"))
    with pytest.raises(sv.TracingError, match="axis 2 is out of range"):
        snp.roll(x, 1, axis=2)
    with pytest.raises(sv.TracingError, match="max with where= and no initial") as err:
        snp.max(x, where=x > 0)
    assert "initial=-snp.inf" in str(err.value)
    with pytest.raises(sv.TracingError, match="round of an integer array to tens"):
        snp.round(np.arange(3), -1)
    # a NumPy name that is not traced says so and how to do without it
    with pytest.raises(AttributeError, match=r"shapevm.numpy has no 'cumprod'.*outside the"):
        snp.cumprod  # noqa: B018
    with pytest.raises(AttributeError, match=r"linalg has no 'inv': .* the norms"):
        snp.linalg.inv  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute 'not_numpy'"):
        snp.not_numpy  # noqa: B018
    idx = np.zeros((2, 2), np.int64)
    for call, headline in (
        (lambda: snp.take_along_axis(x, idx[0], 1), "same number of dimensions"),
        (lambda: snp.take_along_axis(x[:, :2], np.zeros((3, 1), np.int64), 1), "do not broadcast"),
    ):
        with pytest.raises(sv.TracingError, match=headline) as err:
            call()
        assert all(f"{label}:" in str(err.value) for label in ("expected", "found", "fix"))


def test_round_with_decimals_is_numpys_bit_for_bit() -> None:
    """``round(x, d)`` computes as NumPy's does in float32 (scale, round half to even,
    unscale): the same bits, interpreted and compiled, for positive and negative ``d``."""
    x = (np.random.default_rng(4).standard_normal(20000) * 1000).astype(np.float32)
    for d in (1, 2, 3, -1, -2):
        want = np.round(x, d)
        for enabled in (False, True):
            fn = sv.jit(lambda v, d=d: snp.round(v, d), shapes="n", enabled=enabled)
            got = fn(x)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.float32, np.bool_])
def test_a_product_of_vectors_keeps_numpys_type(dtype: Any) -> None:
    """``a @ b`` of two vectors is their inner product in the operands' type (int8 wraps,
    bool is any of the pairs), as NumPy's matmul, not a sum in the platform integer."""
    a = (np.arange(40) % 7 - 2).astype(dtype)
    b = (np.arange(40) % 5).astype(dtype)
    want = a @ b
    for enabled in (False, True):
        got = sv.jit(lambda x, y: x @ y, shapes=("n", "n"), enabled=enabled)(a, b)
        assert got.dtype == want.dtype and got == want


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.uint8, np.bool_])
def test_narrow_integers_sum_in_the_platform_integer_as_numpy(dtype: Any) -> None:
    """sum, prod and cumsum of int8/16/32 give int64 (uint8 uint64, bool int64), as
    NumPy's: 300 int8 ones sum to 300, not to 44, interpreted and compiled."""

    def body(ns: Any, x: Any) -> Any:
        return (x.sum(), ns.sum(x, axis=1), x.prod(axis=0), ns.cumsum(x, axis=1),
                ns.sum(x, dtype=np.int16))  # fmt: skip

    x = np.ones((3, 300), dtype)
    x[1, :7] = 2 if dtype != np.bool_ else False
    fn = sv.jit(lambda v: body(snp, v), shapes="b, s")
    plain = sv.jit(lambda v: body(snp, v), shapes="b, s", enabled=False)
    want = body(np, x)
    for got in (plain(x), *(fn(x) for _ in range(3))):
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype, (g.dtype, w.dtype)
            np.testing.assert_array_equal(g, w)


def test_where_between_two_scalars_makes_an_array_of_their_common_type() -> None:
    """``where(x > 0, 1.0, -1.0)``: both branches Python numbers (it was refused, as an op
    of scalars alone); float32 or int32, as a weak type resolves."""
    x = np.array([[1.5, -2.0, 0.0]], np.float32)
    f = sv.jit(lambda v: snp.where(v > 0, 1.0, -1.0), shapes="b, 3")
    g = sv.jit(lambda v: snp.where(v > 0, 1, 0), shapes="b, 3")
    np.testing.assert_array_equal(f(x), np.where(x > 0, 1.0, -1.0).astype(np.float32))
    assert f(x).dtype == np.float32 and g(x).dtype == np.int32
    np.testing.assert_array_equal(g(x), [[1, 0, 0]])
