"""Differential tests: the native tier against the interpreter, the reference semantics.

Hypothesis writes programs (elementwise chains with broadcasting, reductions, matmuls,
dense layers against a constant with their own input as residual, einsums, running sums,
reshapes, transposes, slices, flips, concatenations and pads, over two dimension variables, with
axes written positive or negative) and runs each on a stream of shapes in every cache
mode, with the variants compiled synchronously from the first call on, at every
instruction-set level the machine has.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shapevm as sv
import shapevm.numpy as snp
from shapevm import native
from tests.jit.programs import assert_same

UNARY = {"tanh": snp.tanh, "neg": snp.negative, "abs": snp.abs, "exp": snp.exp}
BINARY = {
    "add": snp.add,
    "sub": snp.subtract,
    "mul": snp.multiply,
    "div": snp.divide,
    "maximum": snp.maximum,
    "minimum": snp.minimum,
}
# kinds of tensors: "bn" f32[b, n], "n" f32[n], "b1" f32[b, 1], "b5" f32[b, 5], "nb" f32[n, b],
# "bw" f32[b, 2n], "Bn" f32[2b, n], "bp" f32[b, n + 3], "1n" f32[1, n]
PAIRS = {
    "bn": ("bn", "n", "b1", "1n"),
    "1n": ("1n", "n"),
    "b5": ("b5", "b1"),
    "nb": ("nb",),
    "n": ("n",),
    "b1": ("b1",),
    "bw": ("bw", "b1"),
    "Bn": ("Bn", "n", "1n"),
    "bp": ("bp", "b1"),
}
ROWS = ("bn", "b5", "bw", "bp")  # kinds whose axis 1 (also written -1) may be reduced
DENSE = np.random.default_rng(7).normal(size=(5, 5)).astype(np.float32)  # a constant layer

step = st.one_of(
    st.tuples(st.just("unary"), st.sampled_from(sorted(UNARY)), st.integers(0, 50)),
    st.tuples(
        st.just("binary"), st.sampled_from(sorted(BINARY)), st.integers(0, 50), st.integers(0, 50)
    ),
    st.tuples(
        st.just("scalar"),
        st.sampled_from(sorted(BINARY)),
        st.integers(0, 50),
        st.sampled_from([0.5, 2.0, -1.0]),
    ),
    st.tuples(
        st.just("reduce"),
        st.sampled_from(["sum", "max", "mean"]),
        st.integers(0, 50),
        st.integers(0, 3),
    ),
    st.tuples(st.just("matmul"), st.integers(0, 50)),
    st.tuples(st.just("dense"), st.integers(0, 50), st.integers(0, 2)),
    st.tuples(st.just("flip"), st.integers(0, 50), st.integers(0, 2)),
    st.tuples(st.just("reshape"), st.integers(0, 50)),
    st.tuples(st.just("transpose"), st.integers(0, 50)),
    st.tuples(st.just("concat"), st.integers(0, 50), st.integers(0, 50), st.integers(0, 3)),
    st.tuples(st.just("slice"), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("pad"), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("cumsum"), st.integers(0, 50), st.integers(0, 3)),
    st.tuples(st.just("einsum"), st.integers(0, 50), st.integers(0, 50), st.booleans()),
)
programs = st.lists(step, min_size=1, max_size=10)


def pick(pool: dict[str, list[Any]], kinds: tuple[str, ...], i: int) -> tuple[str, Any] | None:
    found = [(k, t) for k in kinds for t in pool.get(k, [])]
    return found[i % len(found)] if found else None


def make_function(recipe: list[tuple[Any, ...]]) -> Any:
    def program(x: Any, y: Any, w: Any) -> Any:
        pool: dict[str, list[Any]] = {"bn": [x], "n": [y]}
        made: list[Any] = []

        def add(kind: str, t: Any) -> None:
            pool.setdefault(kind, []).append(t)
            made.append(t)

        for s in recipe:
            if s[0] == "unary":
                kind, t = pick(pool, tuple(PAIRS), s[2])
                add(kind, UNARY[s[1]](t))
            elif s[0] == "binary":
                kind, a = pick(pool, tuple(PAIRS), s[2])
                _, b = pick(pool, PAIRS[kind], s[3])
                add(kind, BINARY[s[1]](a, b) if s[3] % 2 else BINARY[s[1]](b, a))
            elif s[0] == "scalar":
                kind, a = pick(pool, tuple(PAIRS), s[2])
                add(kind, BINARY[s[1]](a, s[3]))
            elif s[0] == "reduce":  # along axis 1, -1, 0 or -2 (a leading axis)
                fn = {"sum": snp.sum, "max": snp.max, "mean": snp.mean}[s[1]]
                axis = (1, -1, 0, -2)[s[3]]
                if axis in (1, -1):
                    kind, a = pick(pool, ROWS, s[2])
                    add("b1", fn(a, axis=axis, keepdims=True))
                else:
                    kind, a = pick(pool, ("bn", "Bn"), s[2])
                    add("1n", fn(a, axis=axis, keepdims=True))
            elif s[0] == "concat":  # axis 1, -1, 0 or -2
                _, a = pick(pool, ("bn",), s[1])
                _, b = pick(pool, ("bn",), s[2])
                axis = (1, -1, 0, -2)[s[3]]
                add("bw" if axis in (1, -1) else "Bn", snp.concatenate([a, b * 0.5], axis=axis))
            elif s[0] == "slice":  # the last column (a negative start) or the first
                _, a = pick(pool, ("bn",), s[1])
                add("b1", a[:, -1:] if s[2] else a[..., :1])
            elif s[0] == "pad":
                _, a = pick(pool, ("bn",), s[1])
                add("bp", snp.pad(a, ((0, 0), (1, 2)), constant_values=-1.0 if s[2] else 0.0))
            elif s[0] == "cumsum":  # along axis 1, -1, 0 or -2
                kind, a = pick(pool, ("bn", "Bn", "bw"), s[1])
                add(kind, snp.cumsum(a, axis=(1, -1, 0, -2)[s[2]]))
            elif s[0] == "einsum":  # a product with w, or rows dotted with a vector
                _, a = pick(pool, ("bn",), s[1])
                if s[3]:
                    add("b5", snp.einsum("ij,jk->ik", a, w))
                else:
                    _, v = pick(pool, ("n",), s[2])
                    add("b1", snp.einsum("bn,n->b", a, v)[:, None])
            elif s[0] == "matmul":
                _, a = pick(pool, ("bn",), s[1])
                add("b5", a @ w)
            elif s[0] == "flip":  # x[::-1] along axis 0, 1 or both: views walking back
                kind, a = pick(pool, ("bn", "Bn", "bw", "bp", "nb", "b5"), s[1])
                add(kind, a[::-1] if s[2] == 0 else a[:, ::-1] if s[2] == 1 else snp.flip(a))
            elif s[0] == "dense":  # a layer against a constant, its own input as residual
                _, a = pick(pool, ("b5",), s[1]) or ("b5", x @ w)
                h = a @ DENSE
                add("b5", (h, snp.maximum(h, 0) + a, h + a)[s[2]])
            elif s[0] == "reshape":
                _, a = pick(pool, ("bn",), s[1])
                b_, n_ = a.shape
                add("bn", (a * 1.5).reshape((b_ * n_,)).reshape((b_, n_)))
            else:
                kind, a = pick(pool, ("bn", "nb"), s[1])
                add("nb" if kind == "bn" else "bn", snp.transpose(a))
        return tuple(made[-2:])

    return program


SHAPES = [(2, 3), (2, 3), (4, 3), (5, 2), (1, 1), (7, 4), (2, 3), (4, 3)]
MODES = [
    {"cache_mode": "exact"},
    {"cache_mode": "bucket", "bucket_boundaries": [2, 4, 6]},
    {"cache_mode": "adaptive", "adaptive_exact_after": 2},
]


def run_stream(recipe: list[tuple[Any, ...]], seed: int, **options: Any) -> None:
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(0, 5))
    fun = make_function(recipe)
    has_exp = any(s[:2] == ("unary", "exp") for s in recipe)
    sums = any(s[0] in ("reduce", "matmul", "dense", "cumsum", "einsum") for s in recipe)
    j = sv.jit(fun, shapes=["b, n", "n", "n, 5"], hot_threshold=1, background=False, **options)
    exact = sv.jit(fun, shapes=["b, n", "n", "n, 5"], enabled=False)  # fed float64
    for b, n in SHAPES:
        x = rng.normal(size=(b, n)).astype(np.float32)
        y = rng.normal(size=(n,)).astype(np.float32)
        w = rng.normal(size=(n, 5)).astype(np.float32)
        with np.errstate(all="ignore"):
            got = j(x, y, w)
            (engine,) = j.engines
            ref = engine.executable(x, y, w)

        def truth(x: Any = x, y: Any = y, w: Any = w) -> Any:
            with np.errstate(all="ignore"):
                return exact(*(a.astype(np.float64) for a in (x, y, w)))

        assert_same(ref, got, rtol=2e-6, exp_chains=has_exp, truth=truth, sums=sums)
    stats = j.jit_stats()
    assert stats["failures"] == 0, [r["reason"] for r in j.jit_info()]
    assert stats["compiled_calls"] > 0  # (every shape of SHAPES is in a bucket too)


@pytest.mark.parametrize("mode", MODES, ids=[m["cache_mode"] for m in MODES])
@settings(max_examples=25)
@given(recipe=programs, seed=st.integers(0, 2**16))
def test_compiled_variants_agree_with_the_interpreter(mode, recipe, seed):
    run_stream(recipe, seed, tier3=False, **mode)


@pytest.mark.parametrize("isa", native.isa_levels())
@settings(max_examples=8)
@given(recipe=programs, seed=st.integers(0, 2**16))
def test_every_instruction_set_agrees_with_the_interpreter(isa, recipe, seed):
    before = native.info()["isa"]
    native.set_isa(isa)
    try:
        run_stream(recipe, seed, tier3=False, cache_mode="bucket", bucket_boundaries=[1, 4])
    finally:
        native.set_isa(before)


@pytest.mark.slow
@settings(max_examples=300)
@given(recipe=programs, seed=st.integers(0, 2**16), mode=st.sampled_from(MODES))
def test_compiled_variants_agree_with_the_interpreter_at_length(recipe, seed, mode):
    run_stream(recipe, seed, **mode)


def _layouts(x: Any) -> Any:
    b, n = x.shape
    head = x[:, 1:3]  # a slice with static bounds
    tail = x[1:, : n - 1]  # symbolic bounds
    moved = snp.transpose(x.reshape(b, n // 2, 2), (1, 0, 2)).reshape(n // 2, 2 * b)
    return head.T, tail * 2.0, moved.transpose() + 1.0


def test_layout_ops_are_views_and_agree_with_the_interpreter() -> None:
    rng = np.random.default_rng(7)
    j = sv.jit(
        _layouts,
        shapes=["b, 2*m"],
        constraints=["m >= 2"],
        hot_threshold=1,
        background=False,
    )
    for b, n in [(3, 4), (5, 8), (2, 6), (7, 10), (3, 4)]:
        x = rng.normal(size=(b, n)).astype(np.float32)
        got = j(x)
        (engine,) = j.engines
        assert_same(engine.executable(x), got)
    assert j.jit_stats()["failures"] == 0, j.jit_info()
    (engine,) = j.engines
    (rec,) = [r for r in engine.records() if r.variant][:1]
    kernels = [k.label for r in rec.variant.regions for k in r.lowered.kernels]
    # the slices and transposes are views: what runs are the copies into the results
    # (results are fresh arrays), the chains and the reshape of a transposed view
    assert "matmul" not in kernels and 1 <= len(kernels) <= 6, kernels


# -- integer inputs: masks and casts of ids, read exactly by the native tier ----------------
INT_EDGES = [0, 1, -1, 7, 2**24 - 1, 2**24, 2**24 + 1, -(2**24) - 1, 2**31 - 1, -(2**31)]
COMPARE = {
    "eq": snp.equal,
    "ne": snp.not_equal,
    "lt": snp.less,
    "le": snp.less_equal,
    "gt": snp.greater,
    "ge": snp.greater_equal,
}
int_step = st.one_of(
    st.tuples(
        st.just("compare"),
        st.sampled_from(sorted(COMPARE)),
        # constants float32 holds below 2^24 (fused) and others (left to the interpreter)
        st.sampled_from([0, 1, -3, 7, 2**24 - 1, -(2**24) + 1, 0.5, -2.5, 2**24, 1e9, 0.1]),
        st.booleans(),  # the ids on the left or on the right
    ),
    st.tuples(st.just("cast"), st.sampled_from(["f32", "bool"])),
    # integer arithmetic on the ids (exact, wrapping), a running sum or the rows' sums
    st.tuples(
        st.just("arith"),
        st.sampled_from(["floordiv", "mod", "add", "mul", "cumsum", "sum"]),
        st.sampled_from([1, -1, 3, -7, 2**20]),
    ),
)
INT_ARITH = {
    "floordiv": lambda t, c: t // c,
    "mod": lambda t, c: t % c,
    "add": lambda t, c: t + c,
    "mul": lambda t, c: t * c,
    "cumsum": lambda t, c: snp.cumsum(t, axis=1) + c,
    "sum": lambda t, c: t.sum(axis=1, keepdims=True) * c + t,
}


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(int_step, min_size=1, max_size=4),
    dtype=st.sampled_from([np.int32, np.int64]),
    seed=st.integers(0, 2**16),
)
def test_int_inputs_agree_with_the_interpreter(steps: Any, dtype: Any, seed: int) -> None:
    """Masks and casts of integer ids combined with a float tensor, the ids drawn around
    2^24 and 2^31 and computed on (floor division, remainder, sums, wrapping around): the
    native tier gives the interpreter's bits."""

    def f(ids: Any, x: Any) -> Any:
        acc = x
        for i, s in enumerate(steps):
            if s[0] == "arith":
                ids = INT_ARITH[s[1]](ids, s[2])
            elif s[0] == "compare":
                _, name, c, left = s
                m = COMPARE[name](ids, c) if left else COMPARE[name](c, ids)
                acc = snp.where(m, acc, acc * 0.5 + float(i))
            else:
                v = ids.astype(snp.float32 if s[1] == "f32" else snp.bool_)
                acc = acc + (v if s[1] == "f32" else v.astype(snp.float32)) * 1e-3
        return acc

    b, n = sv.symbolic_shape("b, n")
    exp = sv.export(sv.jit(f))(
        sv.ShapeDtypeStruct((b, n), dtype), sv.ShapeDtypeStruct((b, n), np.float32)
    )
    jitted = exp.jit(hot_threshold=1, background=False, tier3=False)
    rng = np.random.default_rng(seed)
    edges = np.array([v for v in INT_EDGES if np.iinfo(dtype).min <= v <= np.iinfo(dtype).max])
    for shape in [(2, 5), (1, 33), (3, 1), (2, 5)]:
        ids = rng.choice(edges, shape).astype(dtype)
        x = rng.standard_normal(shape).astype(np.float32)
        with np.errstate(all="ignore"):  # x // 0 and wrapping around, as NumPy warns
            want = exp.call(ids, x)
        np.testing.assert_array_equal(jitted(ids, x), want)
