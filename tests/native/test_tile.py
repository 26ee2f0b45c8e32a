"""The tile interpreter against the op table's NumPy reference kernels, at every
instruction-set level: every fusible op of the table is implemented; each op on special
values; hypothesis-generated programs (random chains of fusible ops over random
broadcastable inputs with any strides, with and without a trailing reduction); threads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shapevm import native
from shapevm.native import tile
from shapevm.ops.core import OpFlag, all_ops, get_op
from tests.native.reference import erf64, rel_err, sigmoid64, ulp_err

Array = np.ndarray[Any, Any]
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# Ops whose float32 results are exactly NumPy's (correctly rounded, or the same libm
# algorithm); the rest are vectorized approximations held to an ulp bound below. Not pow:
# the tile's is computed in double (vmath.h's vpow), and NumPy 2.4's float32 power is a
# vectorized approximation up to 1 ulp away; both are held to float64 below.
EXACT_F32 = ("neg", "abs", "floor", "ceil", "sign", "sqrt", "add", "sub", "mul", "div",
             "maximum", "minimum", "floordiv", "mod")  # fmt: skip
SMOOTH_F32 = ("neg", "abs", "add", "sub", "mul", "maximum", "minimum", "exp", "tanh",
              "sigmoid", "erf", "sin", "cos")  # fmt: skip
BOOL_SAME = ("abs", "add", "mul", "maximum", "minimum")
LOGICAL = ("logical_and", "logical_or", "logical_xor")
COMPARE = ("less", "greater", "equal", "less_equal", "greater_equal", "not_equal")


def reference(name: str, *args: Any, dtype: str = "f32") -> Array:
    """The op table's reference kernel on NumPy operands."""
    attrs = {"dtype": dtype} if name == "cast" else {}
    with np.errstate(all="ignore"):
        return np.asarray(get_op(name).kernel(list(args), attrs)[0])  # type: ignore[union-attr]


def test_every_fusible_op_of_the_table_is_implemented() -> None:
    fusible = {info.name for info in all_ops() if OpFlag.FUSIBLE in info.flags}
    assert tile.unsupported_fusible_ops() == ()
    assert set(tile.OPS) | (set(tile.REDUCTIONS) - {"none"}) == fusible
    for name in tile.OPS:  # arities as the table has them
        info = get_op(name)
        assert info is not None and info.min_arity == info.max_arity == tile.ARITY[name]


SPECIAL = np.float32([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 7.0, -7.0, 1e-30, -1e30, 1e30,
                      np.inf, -np.inf, np.nan, 2.0, 0.3, -0.3, 88.0, -100.0])  # fmt: skip


def _grid() -> tuple[Array, Array]:
    a, b = np.meshgrid(SPECIAL, SPECIAL)
    rng = np.random.default_rng(0)
    ra, rb = rng.standard_normal((2, 3000)).astype(np.float32) * 4
    return np.concatenate([a.ravel(), ra]), np.concatenate([b.ravel(), rb])


def _unary(name: str, dtype: str = "f32") -> tile.TileProgram:
    p = tile.Program()
    return p.build(p.op(name, p.input(dtype)))


def _binary(name: str, dtype: str = "f32") -> tile.TileProgram:
    p = tile.Program()
    return p.build(p.op(name, p.input(dtype), p.input(dtype)))


@pytest.mark.parametrize("name", [n for n in tile.OPS if tile.ARITY[n] == 2 and n not in LOGICAL])
def test_binary_ops_equal_numpys(isa: str, name: str) -> None:
    a, b = _grid()
    y, want = tile.run(_binary(name), a, b), reference(name, a, b)
    if name == "atan2":  # NaN, zeros and infinities as NumPy's; elsewhere within 2.5 ulp
        np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
        exact = np.arctan2(a.astype(np.float64), b.astype(np.float64))
        ok = ~np.isnan(want)
        assert ulp_err(y[ok], exact[ok]).max() <= 2.5
        special = ok & ((a == 0) | (b == 0) | np.isinf(a) | np.isinf(b))
        np.testing.assert_array_equal(y[special].view(np.int32), want[special].view(np.int32))
        return
    if name != "pow":
        np.testing.assert_array_equal(y, want)
        return
    # pow: NaN and infinity wherever NumPy has them; elsewhere within 1 ulp of the float64
    # power and of NumPy's float32 result.
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(y[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    with np.errstate(all="ignore"):
        exact = np.power(a[finite].astype(np.float64), b[finite].astype(np.float64))
    assert ulp_err(y[finite], exact).max() <= 1.0
    assert ulp_err(y[finite], want[finite].astype(np.float64)).max() <= 1.0


def test_pow_is_within_half_an_ulp_over_the_whole_range(isa: str) -> None:
    """pow of bases from 2^-40 to 2^40 of either sign, to real and integer exponents, and of
    bases next to 1 to exponents in the thousands: within half an ulp of the float64 power
    (correctly rounded) where that is a normal float, the float64 power rounded where it is
    subnormal or past the range, and NaN exactly where NumPy has it (the C library's powf
    at ``generic``: within an ulp)."""
    rng = np.random.default_rng(7)
    n = 1 << 14
    signed = (rng.choice([-1, 1], n) * np.exp2(rng.uniform(-40, 40, n))).astype(np.float32)
    cases = (
        (np.abs(signed), (rng.standard_normal(n) * 3).astype(np.float32)),
        (signed, rng.integers(-12, 13, n).astype(np.float32)),
        ((1 + rng.standard_normal(n) * 1e-3).astype(np.float32),
         (rng.standard_normal(n) * 3000).astype(np.float32)),
    )  # fmt: skip
    prog = _binary("pow")
    for a, b in cases:
        y = tile.run(prog, a, b)
        with np.errstate(all="ignore"):
            exact, numpy = np.power(a.astype(np.float64), b.astype(np.float64)), np.power(a, b)
            rounded = exact.astype(np.float32)
        np.testing.assert_array_equal(np.isnan(y), np.isnan(numpy))
        normal = np.isfinite(rounded) & (np.abs(exact) >= np.finfo(np.float32).tiny)
        if isa == "generic":  # the C library's powf there
            assert ulp_err(y[normal], exact[normal]).max() <= 1.0
            continue
        assert ulp_err(y[normal], exact[normal]).max() <= 0.5 + 1e-9
        np.testing.assert_array_equal(y[~normal], rounded[~normal])


def test_pow_by_a_constant_two_is_numpys(isa: str) -> None:
    p = tile.Program()
    prog = p.build(p.op("pow", p.input(), p.const(2.0)))
    assert prog.kernels == ("square",)
    a, _ = _grid()
    np.testing.assert_array_equal(tile.run(prog, a), reference("pow", a, np.float32(2.0)))


_EXACT_UNARY = ("neg", "abs", "floor", "ceil", "round", "sign", "sqrt")
_MATH: dict[str, Callable[[Array], Array]] = {
    "exp": np.exp, "log": np.log, "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
    "erf": erf64, "sigmoid": sigmoid64, "softplus": lambda x: np.logaddexp(x, 0.0),
    "expm1": np.expm1, "log1p": np.log1p, "log2": np.log2, "log10": np.log10,
    "atan": np.arctan, "asin": np.arcsin, "acos": np.arccos,
}  # fmt: skip


@pytest.mark.parametrize("name", [n for n in tile.OPS if tile.ARITY[n] == 1 and n != "cast"])
def test_unary_ops_match_numpy_and_float64(isa: str, name: str) -> None:
    a, _ = _grid()
    if name == "logical_not":
        b = a > 0
        np.testing.assert_array_equal(tile.run(_unary(name, "bool"), b), reference(name, b))
        return
    y = tile.run(_unary(name), a)
    if name in _EXACT_UNARY:
        np.testing.assert_array_equal(y, reference(name, a))
        return
    ok = ~np.isnan(reference(name, a))
    np.testing.assert_array_equal(np.isnan(y), ~ok)
    with np.errstate(all="ignore"):
        ref = _MATH[name](a[ok].astype(np.float64))
        rel = np.abs(y[ok] - ref) / np.abs(ref)
        bad = (ulp_err(y[ok], ref) > 2.0) & ~(rel <= 1e-6) & (y[ok] != ref)
    assert not bad.any(), (name, a[ok][bad][:4], y[ok][bad][:4], ref[bad][:4])


def test_round_is_rint_to_the_bit(isa: str) -> None:
    """Halves to even at every magnitude (past 2^22, where adding 1.5 * 2^23 no longer
    rounds, and past 2^23, where every float is an integer), a zero keeping its sign,
    0.49999997 down (adding 0.5 first would round it up), NaN and infinities kept."""
    x = np.array(
        [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.49999997, -0.3, -0.0, 0.0,
         4194304.5, 4194305.5, -4194303.5, 8388607.5, 8388609.0, 1e20, -1e20, 3.4e38,
         np.nan, np.inf, -np.inf, 1e-45, -1e-45, 0.7, -0.7],
        np.float32,
    )  # fmt: skip
    y = tile.run(_unary("round"), x)
    np.testing.assert_array_equal(y.view(np.int32), np.rint(x).view(np.int32))


@pytest.mark.parametrize("name", ["floor", "ceil"])
def test_floor_and_ceil_keep_the_sign_of_zero(isa: str, name: str) -> None:
    """floor(-0.0) is -0.0 and ceil(0.0) is 0.0 (a conversion to integer and back made
    them +0.0 and -0.0: x / floor(z) was inf where NumPy's is -inf); ceil(-0.3) is -0.0."""
    x = np.array([-0.0, 0.0, -0.3, 0.3, -1e-30, 1e-30, -2.5, 2.5, 1e20, np.nan, -np.inf],
                 np.float32)  # fmt: skip
    y = tile.run(_unary(name), x)
    np.testing.assert_array_equal(y.view(np.int32), getattr(np, name)(x).view(np.int32))


def test_bool_operands(isa: str) -> None:
    a, b = _grid()
    x, y = a > 0, b > 0
    for name in (*BOOL_SAME[1:], *LOGICAL, *COMPARE):
        np.testing.assert_array_equal(tile.run(_binary(name, "bool"), x, y), reference(name, x, y))
    np.testing.assert_array_equal(tile.run(_unary("abs", "bool"), x), x)
    p = tile.Program()
    c, u, v = p.input("bool"), p.input(), p.input()
    np.testing.assert_array_equal(
        tile.run(p.build(p.op("where", c, u, v)), x, a, b), np.where(x, a, b)
    )
    for src, dst in (("f32", "bool"), ("bool", "f32"), ("f32", "f32"), ("bool", "bool")):
        q = tile.Program()
        prog = q.build(q.op("cast", q.input(src), dtype=dst))
        arg = a if src == "f32" else x
        np.testing.assert_array_equal(tile.run(prog, arg), reference("cast", arg, dtype=dst))


INT_EDGES = [0, 1, -1, 7, -7, 2**24 - 1, 2**24, 2**24 + 1, -(2**24) - 1, 2**31 - 1, -(2**31),
             2**40 + 3, -(2**53) - 1, 2**63 - 1, -(2**63)]  # fmt: skip


@pytest.mark.parametrize("dt", ["i32", "i64"])
def test_integer_inputs_cast_and_compare_as_numpy(isa: str, dt: str) -> None:
    """Integer inputs (token ids, masks) are read as float32 lanes: exact for a cast (to
    f32 NumPy's rounding, to bool v != 0) and for comparisons with a constant below 2**24,
    whatever the integer's size; with strides and broadcasting like any operand."""
    np_dt = np.int32 if dt == "i32" else np.int64
    info = np.iinfo(np_dt)
    edges = [v for v in INT_EDGES if info.min <= v <= info.max]
    x = np.array(edges * 3, np_dt).reshape(3, -1)[:, ::-1]  # a strided view
    for target in ("f32", "bool"):
        p = tile.Program()
        got = tile.run(p.build(p.op("cast", p.input(dt), dtype=target)), x)
        np.testing.assert_array_equal(got, reference("cast", x, dtype=target))
    for name in COMPARE:
        for c in (0, 5, -3, 2**24 - 1, -(2**24) + 1, 0.5, -2.5):
            for first in (True, False):
                p = tile.Program()
                i, k = p.input(dt), p.const(c)
                prog = p.build(p.op(name, i, k) if first else p.op(name, k, i))
                c64 = np.float64(c)
                want = reference(name, x, c64) if first else reference(name, c64, x)
                np.testing.assert_array_equal(tile.run(prog, x), want, err_msg=f"{name} {c}")
    p = tile.Program()  # a padding mask, as models build it: (1 - (ids != 0)) * -1e4
    m = p.op("cast", p.op("not_equal", p.input(dt), p.const(0)), dtype="f32")
    prog = p.build(p.op("mul", p.op("sub", p.const(1.0), m), p.const(-1e4)))
    ids = np.array([[3, 0, 9], [0, 0, 1]], np_dt)
    np.testing.assert_array_equal(
        tile.run(prog, ids), (1 - (ids != 0).astype(np.float32)) * np.float32(-1e4)
    )


@pytest.mark.parametrize(
    "build",
    [
        lambda p, i: p.op("add", i, p.const(1.0)),  # arithmetic on an integer
        lambda p, i: p.op("equal", i, p.input("i64")),  # two integers compared
        lambda p, i: p.op("less", i, p.const(2.0**24)),  # past float32's integers
        lambda p, i: p.op("less", i, p.const(float("nan"))),
        lambda p, i: p.op("cast", i, dtype="i64"),  # an integer result
        lambda p, i: p.op("cast", p.input("f32"), dtype="i32"),
        lambda p, i: i,  # the result is the integer input itself
        lambda p, i: p.op("equal", i, p.const(3.0, "i64")),  # an integer constant register
    ],
)
def test_integers_are_refused_where_float32_lanes_would_not_be_exact(build: Any) -> None:
    p = tile.Program()
    with pytest.raises(native.NativeKernelError) as info:
        p.build(build(p, p.input("i64")))
    assert "dtype" in str(info.value) or "integer" in str(info.value)


# --- random programs over random broadcastable inputs -------------------------------------


def _values(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> Array:
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    x = np.asarray(rng.standard_normal(shape) * 3, np.float32)
    whole = rng.random(shape) < 0.3  # integers: floor, mod and comparisons meet ties
    x[whole] = np.round(x[whole])
    special = rng.random(shape) < 0.05
    x[special] = rng.choice(SPECIAL, int(special.sum()))
    return x


@st.composite
def layouts(draw: st.DrawFn, nin: int) -> tuple[tuple[int, ...], list[tuple[tuple[int, ...], str]]]:
    """The broadcast shape, and per input its shape and how its memory is laid out."""
    rank = draw(st.integers(0, 4))
    big = draw(st.sampled_from([1, 1, 300]))
    shape = tuple(draw(st.integers(1, 5)) for _ in range(rank))
    if rank and big > 1:
        i = draw(st.integers(0, rank - 1))
        shape = (*shape[:i], big, *shape[i + 1 :])
    ins = []
    for _ in range(nin):
        drop = draw(st.integers(0, rank))
        own = tuple(1 if draw(st.integers(0, 3)) == 0 else d for d in shape[drop:])
        ins.append((own, draw(st.sampled_from(["c", "transposed", "strided", "reversed"]))))
    return shape, ins


def _lay_out(x: Array, how: str) -> Array:
    """The same values in another memory layout."""
    if x.ndim == 0 or how == "c":
        return x
    if how == "transposed":
        return np.ascontiguousarray(x.T).T
    if how == "reversed":
        return np.ascontiguousarray(x[..., ::-1])[..., ::-1]
    wide = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), x.dtype)
    wide[..., ::2] = x
    return wide[..., ::2]


@st.composite
def programs(draw: st.DrawFn, ops: tuple[str, ...], with_bool: bool) -> list[tuple[Any, ...]]:
    """Steps (name, operand indices, cast target) over inputs 0..n-1 and earlier steps."""
    dtypes = [
        draw(st.sampled_from(["f32", "f32", "bool"] if with_bool else ["f32"]))
        for _ in range(draw(st.integers(1, 4)))
    ]
    steps: list[tuple[Any, ...]] = [("input", (), d) for d in dtypes]
    for _ in range(draw(st.integers(1, 7))):
        f32 = [i for i, s in enumerate(steps) if s[2] == "f32"]
        bools = [i for i, s in enumerate(steps) if s[2] == "bool"]
        kinds = ["f32"] * 4 if f32 else []
        if with_bool:
            kinds += (
                ["cast"] + (["cmp"] if f32 else []) + (["logic", "where", "bool"] if bools else [])
            )
        kind = draw(st.sampled_from(kinds))
        pick = lambda pool: draw(st.sampled_from(pool))  # noqa: E731
        if kind == "f32":
            name = draw(st.sampled_from(ops))
            steps.append((name, tuple(pick(f32) for _ in range(tile.ARITY[name])), "f32"))
        elif kind == "cmp":
            steps.append((draw(st.sampled_from(COMPARE)), (pick(f32), pick(f32)), "bool"))
        elif kind == "logic":
            name = draw(st.sampled_from((*LOGICAL, "logical_not")))
            steps.append((name, tuple(pick(bools) for _ in range(tile.ARITY[name])), "bool"))
        elif kind == "bool":
            steps.append((draw(st.sampled_from(BOOL_SAME)), (pick(bools), pick(bools)), "bool"))
        elif kind == "where":
            pool = draw(st.sampled_from([p for p in (f32, bools) if p]))
            steps.append(("where", (pick(bools), pick(pool), pick(pool)), steps[pool[0]][2]))
        else:
            target = draw(st.sampled_from(["f32", "bool"]))
            steps.append(("cast", (draw(st.integers(0, len(steps) - 1)),), target))
        if steps[-1][0] == "abs" and len(steps[-1][1]) == 2:
            steps[-1] = ("add", *steps[-1][1:])
    return steps


def _run_both(
    steps: list[tuple[Any, ...]], arrays: list[Array], reduce: str, axes: int, keep: bool
) -> tuple[Array, Array, str]:
    p = tile.Program()
    vals: list[Any] = []
    refs: list[Array] = []
    for name, args, dtype in steps:
        if name == "input":
            vals.append(p.input(dtype))
            refs.append(arrays[len(refs)])
            continue
        vals.append(p.op(name, *(vals[a] for a in args), dtype=dtype))
        refs.append(reference(name, *(refs[a] for a in args), dtype=dtype))
    prog = p.build(vals[-1], reduce=reduce, axes=axes, keepdims=keep)
    out = tile.run(prog, *arrays)
    return out, refs[-1], prog.out_dtype


# An error bound for each kernel's result, in units of float32's epsilon times the result:
# a few for the vector exp, tanh, sigmoid, erf, sin and cos, half for a rounded operation.
_KERNEL_ULPS = 8.0


def _carried_error(steps: list[tuple[Any, ...]], arrays: list[Array]) -> Array:
    """A first-order bound on how far the program's float32 result may be from the op
    table's, carried from each step's operands: sin(exp(exp(x))) at x = 2.5 reads
    exp(exp(x)) = 1.3e5, where two correct float32 exps may differ by 15 units in the last
    place, 0.03 in the argument of sin. Infinite intermediate values carry nothing (both
    sides overflow alike)."""
    u = _KERNEL_ULPS * 2.0**-23
    refs: list[Array] = []
    errs: list[Array] = []
    with np.errstate(all="ignore"):
        for name, args, dtype in steps:
            if name == "input":
                refs.append(np.asarray(arrays[len(refs)], np.float64))
                errs.append(np.zeros(()))
                continue
            vals = [refs[a] for a in args]
            es = [errs[a] for a in args]
            r = np.asarray(reference(name, *(v.astype(np.float32) for v in vals), dtype=dtype))
            r = r.astype(np.float64)
            if name in ("neg", "abs"):
                e = es[0]
            elif name in ("maximum", "minimum"):
                e = np.maximum(es[0], es[1])
            elif name in ("add", "sub"):
                e = es[0] + es[1] + u * np.abs(r)
            elif name == "mul":
                a, b = np.abs(vals[0]), np.abs(vals[1])
                e = b * es[0] + a * es[1] + es[0] * es[1] + u * np.abs(r)
            elif name == "exp":
                e = np.abs(r) * (np.expm1(es[0]) + u)
            else:  # tanh, sigmoid, erf, sin, cos: slopes at most 2/sqrt(pi), values in [-1, 1]
                e = np.minimum(1.13 * es[0], 2.0) + u
            refs.append(r)
            errs.append(np.where(np.isfinite(e), e, 0.0))
    return errs[-1]


@SETTINGS
@given(data=st.data(), exact=st.booleans())
def test_random_programs_match_the_op_table(isa: str, data: st.DataObject, exact: bool) -> None:
    steps = data.draw(programs(EXACT_F32 if exact else SMOOTH_F32, with_bool=exact))
    inputs = [s for s in steps if s[0] == "input"]
    _, ins = data.draw(layouts(len(inputs)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    arrays = [
        _lay_out(_values(rng, own, s[2]), how) for s, (own, how) in zip(inputs, ins, strict=True)
    ]
    out, ref, _ = _run_both(steps, arrays, "none", 0, False)
    ref = np.broadcast_to(ref, np.broadcast_shapes(*(a.shape for a in arrays)))
    assert out.shape == ref.shape and out.dtype == ref.dtype
    if exact or out.dtype == np.bool_:
        np.testing.assert_array_equal(out, ref)
    else:
        np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
        ok = np.isfinite(ref)
        np.testing.assert_array_equal(out[~ok & ~np.isnan(ref)], ref[~ok & ~np.isnan(ref)])
        carried = np.broadcast_to(_carried_error(steps, arrays), ref.shape)[ok]
        err = np.abs(out[ok].astype(np.float64) - ref[ok]) - carried
        assert (err / (np.abs(ref[ok]) + 1.0)).max(initial=0.0) < 1e-3


@SETTINGS
@given(
    data=st.data(),
    reduce=st.sampled_from(["sum", "max", "min", "prod", "mean"]),
    keep=st.booleans(),
)
def test_random_programs_with_a_trailing_reduction(
    isa: str, data: st.DataObject, reduce: str, keep: bool
) -> None:
    steps = data.draw(
        programs(("neg", "abs", "add", "sub", "mul", "maximum", "minimum"), with_bool=False)
    )
    inputs = [s for s in steps if s[0] == "input"]
    shape, ins = data.draw(layouts(len(inputs)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    arrays = [
        _lay_out(np.asarray(np.clip(_values(rng, own, "f32"), -4, 4) * 0.5, np.float32), how)
        for (own, how) in ins
    ]
    # a product of hundreds of values up to 2 overflows float32 where float64 does not:
    # products take values within [-0.5, 0.5] (underflow stays within the tolerance)
    arrays = [np.asarray(np.nan_to_num(a) * 0.25) if reduce == "prod" else a for a in arrays]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    axes = data.draw(st.integers(0, len(shape)))
    out, value, _ = _run_both(steps, arrays, reduce, axes, keep)
    value = np.broadcast_to(value, shape).astype(np.float64)
    axis = tuple(range(len(shape) - axes, len(shape)))
    with np.errstate(all="ignore"):
        ref = getattr(np, reduce)(value, axis=axis, keepdims=keep)
        scale = (
            np.abs(value).sum(axis=axis, keepdims=keep)
            if reduce in ("sum", "mean")
            else np.abs(ref)
        )
        if reduce == "mean":
            scale = scale / max(int(np.prod([shape[a] for a in axis])), 1)
    assert out.shape == np.shape(ref) and out.dtype == np.float32
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    # a product past float32's range is inf in float32, as in NumPy; float64's is finite
    ok = np.isfinite(ref) & (np.abs(ref) <= np.finfo(np.float32).max)
    assert (np.abs(out[ok] - ref[ok]) <= 1e-5 * scale[ok] + 1e-30).all()


def test_products_of_long_rows_match_float64(isa: str) -> None:
    """The random programs' products mostly underflow or overflow past a few dozen values;
    rows of values near 1 keep long products in range, so each one is really compared."""
    rng = np.random.default_rng(11)
    p = tile.Program()
    x = p.input()
    prog = p.build(p.op("abs", p.op("neg", x)), reduce="prod", axes=1)
    for n in (1, 7, 64, 300, 1025):
        rows = rng.uniform(0.8, 1.25, (3, n))
        data = rows.astype(np.float32)
        want = np.prod(data.astype(np.float64), axis=1)
        got = tile.run(prog, data)
        assert np.all(np.abs(want) > 1e-20), want  # in range: the comparison means something
        np.testing.assert_allclose(got, want, rtol=2e-5 * max(1.0, n / 64))


def test_reductions_of_bool_and_of_nothing(isa: str) -> None:
    p = tile.Program()
    x = p.input("bool")
    m = np.array([[True, False], [False, False]])
    assert tile.run(p.build(x, reduce="max", axes=1), m).tolist() == [True, False]
    assert tile.run(p.build(x, reduce="min", axes=2), m).tolist() is False
    assert tile.run(p.build(x, reduce="mean", axes=1), m).tolist() == [0.5, 0.0]
    q = tile.Program()
    f = q.input()
    empty = np.zeros((3, 0), np.float32)
    assert tile.run(q.build(f, reduce="sum", axes=1), empty).tolist() == [0.0] * 3
    assert tile.run(q.build(f, reduce="prod", axes=1), empty).tolist() == [1.0] * 3
    assert np.isnan(tile.run(q.build(f, reduce="mean", axes=1), empty)).all()
    assert tile.run(q.build(f, reduce="max", axes=1), np.zeros((0, 4), np.float32)).shape == (0,)
    assert tile.run(q.build(q.op("neg", f)), np.zeros((2, 0, 3), np.float32)).shape == (2, 0, 3)


@pytest.mark.parametrize(
    ("shape", "axes"),
    [((600_000,), 0), ((300_000,), 1), ((3, 70_000), 1), ((40_000, 8), 1), ((200, 400), 2)],
)
def test_large_jobs_on_the_pool(isa: str, shape: tuple[int, ...], axes: int) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    p = tile.Program()
    v = p.input()
    h = p.op("mul", p.op("tanh", v), p.const(0.5))
    if axes == 0:
        y = tile.run(p.build(h), x, threads=2)
        assert rel_err(y, np.tanh(x.astype(np.float64)) * 0.5) < 1e-6
        return
    for reduce in ("sum", "max"):
        y = tile.run(p.build(h, reduce=reduce, axes=axes), x, threads=2)
        ref = getattr(np, reduce)(
            np.tanh(x.astype(np.float64)) * 0.5, axis=tuple(range(len(shape) - axes, len(shape)))
        )
        assert rel_err(y, ref) < 1e-5 * max(1.0, float(np.sqrt(x.size)))


def test_output_in_place_and_strided(isa: str) -> None:
    p = tile.Program()
    a, b = p.input(), p.input()
    prog = p.build(p.op("add", p.op("mul", a, b), a))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    expected = x * 2 + x
    tile.run(prog, x, np.array(2.0, np.float32), out=x)
    np.testing.assert_array_equal(x, expected)
    out = np.zeros((4, 6), np.float32)
    tile.run(prog, x, np.ones(4, np.float32), out=out[::-1, 1:4].T)
    np.testing.assert_array_equal(out[::-1, 1:4].T, x * 1 + x)


# --- every refusal, before any memory is touched ------------------------------------------


def _prog(code: list[tuple[int, ...]], **kw: Any) -> tile.TileProgram:
    fields: dict[str, Any] = {
        "in_dtypes": [0],
        "consts": [],
        "const_dtypes": [],
        "out_reg": 1,
        "n_regs": 2,
    }
    fields.update(kw)
    return tile.TileProgram(
        fields.pop("in_dtypes"), fields.pop("consts"), fields.pop("const_dtypes"), code, **fields
    )


NEG, ADD, CAST = tile.OPS.index("neg"), tile.OPS.index("add"), tile.OPS.index("cast")


def _simple() -> tile.TileProgram:
    return _prog([(NEG, 1, 0, 0, 0, 0)])


@pytest.mark.parametrize(
    ("call", "headline", "found"),
    [
        (
            lambda: _prog([], in_dtypes=[0] * 17, out_reg=0, n_regs=20),
            "the program is too large",
            "17 entries",
        ),
        (
            lambda: _prog([(NEG, 1, 0, 0, 0, 0)], n_regs=65),
            "the program is too large",
            "65 registers",
        ),
        (
            lambda: _prog([], in_dtypes=[4], out_reg=0),
            "a program field is out of range",
            "entry 0 is 4",
        ),
        (
            lambda: _prog([(NEG, 300, 0, 0, 0, 0)]),
            "a program field is out of range",
            "entry 1 is 300",
        ),
        (lambda: _prog([(NEG, 1, 0)]), "an instruction has the wrong length", "another length"),
        (
            lambda: _prog([(200, 1, 0, 0, 0, 0)]),
            "instruction 0 has an unknown opcode",
            "opcode 200",
        ),
        (
            lambda: _prog([(ADD, 1, 0, 1, 0, 0)]),
            "instruction 0 (add) reads an unwritten register as operand 1",
            "r1 of 2",
        ),
        (lambda: _prog([(NEG, 1, 0, 1, 0, 0)]), "instruction 0 (neg) has an extra operand 1", "r1"),
        (
            lambda: _prog([(NEG, 0, 0, 0, 0, 0)], out_reg=0),
            "instruction 0 (neg) writes outside the temporaries",
            "r0",
        ),
        (lambda: _prog([(NEG, 1, 0, 0, 0, 1)]), "instruction 0 (neg) has an attribute", "attr=1"),
        (
            lambda: _prog([(NEG, 1, 0, 0, 0, 0)], in_dtypes=[1]),
            "instruction 0 (neg) does not take these dtypes",
            "neg(bool)",
        ),
        (
            lambda: _prog([(CAST, 1, 0, 0, 0, 5)]),
            "instruction 0 (cast) does not take these dtypes",
            "cast(f32) to an unknown dtype",
        ),
        (
            lambda: _prog([(CAST, 1, 0, 0, 0, 2)], in_dtypes=[1]),
            "instruction 0 (cast) does not take these dtypes",
            "cast(bool) to i32",
        ),
        (lambda: _prog([], out_reg=1), "the result register is never written", "out_reg r1"),
        (lambda: _prog([(NEG, 1, 0, 0, 0, 0)], reduce=9), "bad trailing reduction", "reduce=9"),
        (
            lambda: _prog([], in_dtypes=[1], out_reg=0, n_regs=1, reduce=1),
            "the reduction's result is not f32 or bool",
            "sum of bool",
        ),
        (
            lambda: _prog([], consts=[1.0], out_reg=0),
            "consts do not match const_dtypes",
            "another count",
        ),
        (
            lambda: tile.Program().op("add", tile.Program().input(), tile.Program().input()),
            "an operand of add is not a value of this program",
            "Value",
        ),
        (lambda: tile.Program().op("neg"), "neg takes 1 operands", "0 operands"),
        (lambda: tile.Program().input("f64"), "unsupported dtype", "'f64'"),
        (
            lambda: tile.Program().build(tile.Program().input(), reduce="any"),
            "unknown reduction",
            "'any'",
        ),
        (
            lambda: tile.run(object(), np.ones(2, np.float32)),
            "program must be a TileProgram",
            "object",
        ),  # type: ignore[arg-type]
        (lambda: tile.run(_simple()), "wrong number of inputs", "0 inputs"),
        (lambda: tile.run(_simple(), [1.0]), "input 0 must be a NumPy array", "list"),
        (lambda: tile.run(_simple(), np.ones(2)), "input 0 has the wrong dtype", "f64[2]"),
        (
            lambda: tile.run(_simple(), np.ones((1,) * 9, np.float32)),
            "input 0 has too many dims",
            "f32[1, 1",
        ),
        (
            lambda: tile.run(_binary("add"), np.ones(2, np.float32), np.ones(3, np.float32)),
            "the inputs do not broadcast",
            "[2], [3]",
        ),
        (
            lambda: tile.run(_simple(), np.ones(2, np.float32), out=np.ones(3, np.float32)),
            "the output has the wrong shape",
            "[3]",
        ),
        (
            lambda: tile.run(_simple(), np.ones(2, np.float32), out=np.ones(2, bool)),
            "out has the wrong dtype",
            "bool[2]",
        ),
        (lambda: _readonly_out(), "out is read-only", "f32[2]"),
        (lambda: _partial_overlap(), "the output overlaps an input", "input 0"),
        (
            lambda: tile.run(
                _prog([], out_reg=0, n_regs=1, reduce=1, reduce_axes=2), np.ones(3, np.float32)
            ),
            "the inputs have fewer dims than the reduction",
            "rank 1",
        ),
        (
            lambda: tile.run(
                _prog([], out_reg=0, n_regs=1, reduce=2, reduce_axes=1), np.ones((2, 0), np.float32)
            ),
            "max and min of no elements have no value",
            "length 0",
        ),
    ],
)
def test_tile_refuses_bad_programs_and_operands(call: Any, headline: str, found: str) -> None:
    with pytest.raises(native.NativeKernelError) as info:
        call()
    text = str(info.value)
    assert text.splitlines()[0] == f"tile: {headline}"
    assert found in text.split("found:")[1].split("\n")[0], text


def _readonly_out() -> Array:
    out = np.ones(2, np.float32)
    out.flags.writeable = False
    return tile.run(_simple(), np.ones(2, np.float32), out=out)


def _partial_overlap() -> Array:
    buf = np.ones(5, np.float32)
    return tile.run(_simple(), buf[:4], out=buf[1:])


def _trig_grid() -> Array:
    k = np.arange(-5215, 5216, dtype=np.float64)  # multiples of pi/2 up to 8192
    near = (k * np.pi / 2).astype(np.float32)
    parts = [
        np.linspace(-8192.0, 8192.0, 400_001),
        np.linspace(-7.0, 7.0, 100_001),
        np.geomspace(1e-38, 1.0, 2_001),
        -np.geomspace(1e-38, 1.0, 2_001),
        near, np.nextafter(near, np.float32(np.inf)), np.nextafter(near, np.float32(-np.inf)),
        [8191.999, 8192.0, 8192.001, 9000.5, -1e4, 1e6, -3e7, 1e30, 3.4e38],
    ]  # fmt: skip
    return np.concatenate([np.asarray(p, np.float64) for p in parts]).astype(np.float32)


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sin_and_cos_are_vectorized_within_two_ulp(isa: str, name: str) -> None:
    """sin and cos on whole vectors (range reduction by multiples of pi/4 in three parts,
    then a polynomial): against float64 within 2 ulp or 1e-6 relative, or 1e-10 absolute
    next to a zero of the function (the reduction's error; a thousandth of what one ulp of
    an argument past 1 changes), on a fine grid up to 8192 and the float32 values around
    multiples of pi/2; arguments past 8192, infinities and NaN as the C library gives them;
    -0.0 kept by sin."""
    x = _trig_grid()
    y = tile.run(_unary(name), x)
    ref = getattr(np, name)(x.astype(np.float64))
    with np.errstate(all="ignore"):
        err = np.abs(y.astype(np.float64) - ref)
        bad = (ulp_err(y, ref) > 2.0) & ~(err <= 1e-6 * np.abs(ref)) & ~(err <= 1e-10)
    assert not bad.any(), (name, x[bad][:4], y[bad][:4], ref[bad][:4])
    special = np.float32([np.inf, -np.inf, np.nan, -0.0, 0.0])
    with np.errstate(invalid="ignore"):
        want = getattr(np, name)(special)
    got = tile.run(_unary(name), special)
    np.testing.assert_array_equal(np.signbit(got[3:]), np.signbit(want[3:]))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("reduce", ["none", "sum", "max"])
def test_repeated_rows_and_long_runs_as_numpy(isa: str, reduce: str) -> None:
    """Each operand walks the iteration space in its own longest runs (a contiguous input
    beside a broadcast one is one run), and an input that repeats one row (a bias over
    rows of 3, a scalar, a mask's row; of float32, bool, int64) is laid out once a task and
    read at the tile's place in it: rows of 1 to past a tile's 256 elements, tiles and
    reduced segments starting mid-row, transposed, reversed and non-contiguous outputs."""
    rng = np.random.default_rng(5)
    p = tile.Program()
    x, b, m, c = p.input(), p.input(), p.input("bool"), p.input("i64")
    y = p.op("add", p.op("mul", x, b), p.op("where", m, p.op("cast", c, dtype="f32"), x))
    prog = p.build(y, reduce=reduce, axes=1 if reduce != "none" else 0)
    for rows, n in [(1, 1), (5, 3), (700, 3), (90, 7), (40, 255), (9, 256), (7, 257), (3, 300)]:
        xs = rng.standard_normal((rows, n)).astype(np.float32)
        bs = rng.standard_normal(n).astype(np.float32)
        ms = rng.random(n) < 0.5
        cs = rng.integers(-50, 50, (1, n))
        for xv in (xs, np.ascontiguousarray(xs.T).T, xs[::-1]):
            want = xv * bs + np.where(ms, cs.astype(np.float32), xv)
            if reduce != "none":
                want = getattr(want, reduce)(axis=1)
            got = tile.run(prog, xv, bs, ms, cs)
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)
        if reduce == "none":  # into a strided output
            out = np.zeros((n, rows), np.float32).T
            tile.run(prog, xs, bs, ms, cs, out=out)
            want = xs * bs + np.where(ms, cs.astype(np.float32), xs)
            np.testing.assert_allclose(out, want, rtol=2e-5, atol=1e-5)
    # a scalar broadcast and a column ([rows, 1]) beside them
    q = tile.Program()
    a, s, col = q.input(), q.input(), q.input()
    prog = q.build(q.op("sub", q.op("mul", a, s), col))
    a_ = rng.standard_normal((33, 5)).astype(np.float32)
    s_ = np.array(1.5, np.float32)
    col_ = rng.standard_normal((33, 1)).astype(np.float32)
    np.testing.assert_allclose(tile.run(prog, a_, s_, col_), a_ * 1.5 - col_, rtol=1e-6)


@pytest.mark.parametrize("width", [1, 2, 3, 4, 7, 15])
def test_short_rows_broadcast_over_a_middle_axis(isa: str, width: int) -> None:
    """Operands whose last axis is a short row of a wider array, broadcast against each
    other over the middle axis (boxes' corners: a[:, None, :2] against b[None, :, :2]),
    copied row after row: NumPy's values wherever a tile starts or ends, with a sum over
    the rows too, and on the pool."""
    for n, m in ((1, 1), (3, 5), (37, 41), (120, 333)):
        a = RNG_SHORT.standard_normal((n, 16)).astype(np.float32)
        b = RNG_SHORT.standard_normal((m, 16)).astype(np.float32)
        x, y = a[:, None, 1 : 1 + width], b[None, :, :width]
        p = tile.Program()
        prog = p.build(p.op("sub", p.op("maximum", p.input(), p.input()), p.input()))
        np.testing.assert_array_equal(tile.run(prog, x, y, y), np.maximum(x, y) - y)
        q = tile.Program()
        total = q.build(q.op("mul", q.input(), q.input()), reduce="sum", axes=1)
        np.testing.assert_allclose(tile.run(total, x, y), (x * y).sum(-1), rtol=1e-5, atol=1e-6)


RNG_SHORT = np.random.default_rng(23)


def test_inverse_trigonometric_functions_within_two_and_a_half_ulp(isa: str) -> None:
    """asin, acos and atan over their whole domain (both sides of each polynomial's
    switch point, next to 1, tiny and subnormal values), and atan2 of points in every
    quadrant at every scale: within 2.5 ulp of float64 (NumPy's own float32 arcsin is 2.8
    away at worst); NaN exactly where NumPy has it."""
    rng = np.random.default_rng(5)
    unit = np.concatenate([
        rng.uniform(-1, 1, 20000), 1 - np.exp2(-rng.uniform(1, 24, 2000)),
        0.5 + rng.uniform(-1e-3, 1e-3, 2000), np.exp2(-rng.uniform(0, 140, 2000)),
        [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.0000001, -1.0000001, 2.0, np.inf, np.nan],
    ]).astype(np.float32)  # fmt: skip
    unit = np.concatenate([unit, -unit])
    wide = (rng.choice([-1, 1], 20000) * np.exp2(rng.uniform(-140, 127, 20000))).astype(np.float32)
    for name, x, exact in (("asin", unit, np.arcsin), ("acos", unit, np.arccos),
                           ("atan", np.concatenate([unit, wide]), np.arctan)):  # fmt: skip
        y = tile.run(_unary(name), x)
        with np.errstate(all="ignore"):
            want = reference(name, x)
            ref = exact(x.astype(np.float64))
        np.testing.assert_array_equal(np.isnan(y), np.isnan(want), err_msg=name)
        ok = ~np.isnan(want)
        assert ulp_err(y[ok], ref[ok]).max() <= 2.5, name
    ya, xa = wide, rng.permutation(wide)
    y = tile.run(_binary("atan2"), ya, xa)
    ref = np.arctan2(ya.astype(np.float64), xa.astype(np.float64))
    assert ulp_err(y, ref).max() <= 2.5


@pytest.mark.parametrize("width", [15, 16, 17, 32, 63, 64, 65])
def test_rows_sliced_from_wider_rows(isa: str, width: int) -> None:
    """Operands whose rows are slices of wider rows (a GLU's halves, ``x[..., :n]``), rows
    up to 64 copied whole row after row into a tile, tiles starting and ending mid-row, a
    row broadcast down the others: NumPy's values."""
    rng = np.random.default_rng(width)
    x = rng.standard_normal((7, 33, 2 * width + 3)).astype(np.float32)
    a, b = x[..., :width], x[..., width + 3 :]
    row = x[0, :1, 1 : width + 1]
    p = tile.Program()
    u, v, w = p.input(), p.input(), p.input()
    prog = p.build(p.op("add", p.op("mul", u, p.op("sigmoid", v)), w))
    want = a * (1 / (1 + np.exp(-b.astype(np.float64)))) + row
    np.testing.assert_allclose(tile.run(prog, a, b, row), want, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(tile.run(prog, a[1:, 3:], b[1:, 3:], row), want[1:, 3:],
                               rtol=2e-6, atol=1e-6)  # fmt: skip
