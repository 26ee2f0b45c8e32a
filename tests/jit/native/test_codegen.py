"""Generated fused kernels: random DAGs over random broadcast shapes against NumPy float64."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("numba", exc_type=ImportError)

from shapevm.jit.native import NativeKernelError, codegen
from shapevm.jit.native.codegen import compile_fused, make_plan
from shapevm.jit.native.expr import (
    Expr,
    binary,
    canonical_text,
    const,
    evaluate,
    input,
    intermediate_scale,
    unary,
    where,
)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kernels")


# ------------------------------------------------------------------- random programs


def _safe(draw: Any, pool: list[Expr]) -> Expr:
    """One more node over ``pool``, kept inside the domain where float32 and float64 agree:
    log and sqrt of positive values, division by values >= 0.5, exp of values <= 3."""
    a = draw(st.sampled_from(pool))
    b = draw(st.sampled_from(pool))
    kind = draw(st.sampled_from(["unary", "binary", "binary", "where", "const"]))
    if kind == "const":
        return binary(draw(st.sampled_from(["add", "mul", "sub"])), a, const(draw(_consts)))
    if kind == "where":
        cmp = draw(st.sampled_from(["lt", "le", "gt", "ge", "eq", "ne"]))
        return where(binary(cmp, a, b), a, b)
    if kind == "unary":
        name = draw(st.sampled_from(["neg", "abs", "exp", "log", "sqrt", "tanh", "erf", "sin"]))
        if name == "log":
            return unary("log", unary("abs", a) + 0.5)
        if name == "sqrt":
            return unary("sqrt", unary("abs", a))
        if name == "exp":
            return unary("exp", binary("minimum", a, const(3.0)))
        return unary(draw(st.sampled_from([name, "cos", "sigmoid"])), a)
    name = draw(st.sampled_from(["add", "sub", "mul", "div", "maximum", "minimum", "pow"]))
    if name == "div":
        return a / (unary("abs", b) + 0.5)
    if name == "pow":
        return binary("pow", unary("abs", a) + 0.5, const(draw(st.sampled_from([-1.0, 0.5, 2.0]))))
    return binary(name, a, b)


_consts = st.sampled_from([0.0, 1.0, -0.5, 2.5, 1e-3])


@st.composite
def programs(draw: Any) -> tuple[Expr, list[np.ndarray], str | None]:
    n_in = draw(st.integers(1, 3))
    rank = draw(st.integers(0, 3))
    full = draw(st.lists(st.sampled_from([1, 2, 3, 5, 17]), min_size=rank, max_size=rank))
    arrays = []
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    for _ in range(n_in):
        r = draw(st.integers(0, rank))
        shape = [d if draw(st.booleans()) else 1 for d in full[rank - r :]]
        dtype = draw(st.sampled_from([np.float32, np.float32, np.float32, np.float64]))
        arrays.append(rng.uniform(-2, 2, shape).astype(dtype))
    pool = [input(i) for i in range(n_in)]
    for _ in range(draw(st.integers(1, 5))):
        pool.append(_safe(draw, pool))
    root = pool[-1]
    out_rank = len(np.broadcast_shapes(*(a.shape for a in arrays)))
    reduce = draw(st.sampled_from([None, None, "sum", "mean", "max", "min"])) if out_rank else None
    return root, arrays, reduce


def _check(root: Expr, arrays: list[np.ndarray], reduce: str | None, **kw: Any) -> None:
    k = compile_fused(root, [a.dtype for a in arrays], [a.ndim for a in arrays], reduce, **kw)
    got = k(*arrays)
    want = evaluate(root, arrays, reduce)
    assert got.shape == want.shape and got.dtype == k.out_dtype
    assert not np.isnan(want).any()
    n = np.broadcast_shapes(*(a.shape for a in arrays))[-1] if reduce == "sum" else 1
    scale = max(1.0, intermediate_scale(root, arrays)) * n
    err = float(np.max(np.abs(got - want), initial=0.0))
    assert err <= 1e-5 * scale, (canonical_text(root), reduce, err, scale)


@settings(max_examples=12, deadline=None)
@given(programs())
def test_random_dags_match_numpy(program: tuple[Expr, list[np.ndarray], str | None]) -> None:
    _check(*program, disk=False)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(programs())
def test_random_dags_match_numpy_many(program: tuple[Expr, list[np.ndarray], str | None]) -> None:
    _check(*program, disk=False)


# -------------------------------------------------------------------- chosen cases


def test_one_kernel_serves_every_shape_of_its_ranks(cache_dir: Path) -> None:
    e = unary("exp", input(0)) * input(1) + binary("maximum", input(0), const(0.0))
    k = compile_fused(e, ["float32", "float32"], [2, 1], cache_dir=cache_dir)
    rng = np.random.default_rng(0)
    for shape in [(1, 1), (3, 7), (64, 1024), (5, 1), (0, 4)]:
        a = rng.standard_normal(shape).astype(np.float32)
        b = rng.standard_normal(shape[-1:]).astype(np.float32)
        out = k(a, b)
        assert np.allclose(out, evaluate(e, [a, b]), rtol=1e-5, atol=1e-6)
    assert compile_fused(e, ["float32", "float32"], [2, 1], cache_dir=cache_dir) is k


def test_broadcast_inside_builds_a_second_variant(cache_dir: Path) -> None:
    e = input(0) * input(1)
    k = compile_fused(e, ["float32", "float32"], [2, 2], cache_dir=cache_dir)
    assert [b.pattern for b in k.builds] == [(True, True)]
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    s = np.float32([[1], [2], [3]])
    assert np.array_equal(k(a, s), a * s)
    assert [b.pattern for b in k.builds] == [(True, True), (True, False)]
    k.prepare((3, 1), (3, 4))
    assert len(k.builds) == 3 and "broadcast inside" in k.source((False, True))


def test_reductions_and_nan(cache_dir: Path) -> None:
    x = np.float32([[1, 5, 2], [np.nan, 0, 1], [-3, -4, -1]])
    for reduce, want in [
        ("max", [5, np.nan, -1]),
        ("min", [1, np.nan, -4]),
        ("sum", [8, np.nan, -8]),
    ]:
        k = compile_fused(input(0), ["float32"], [2], reduce, cache_dir=cache_dir)
        assert np.array_equal(k(x), np.float32(want), equal_nan=True)
    mean = compile_fused(input(0), ["float32"], [1], "mean", cache_dir=cache_dir)
    assert mean(np.float32([1, 2, 3, 4])).shape == () and mean(np.float32([1, 2, 3, 4])) == 2.5
    with pytest.raises(NativeKernelError, match="has no identity"):
        compile_fused(input(0), ["float32"], [2], "max", cache_dir=cache_dir)(
            np.ones((2, 0), np.float32)
        )


def test_float64_and_mixed_inputs_compute_in_float64(cache_dir: Path) -> None:
    e = unary("sigmoid", input(0)) - unary("exp", input(1))
    k = compile_fused(e, ["float64", "float32"], [1, 1], cache_dir=cache_dir)
    a = np.linspace(-5, 5, 11)
    b = np.linspace(-1, 1, 11).astype(np.float32)
    assert k.out_dtype == np.float64
    assert np.allclose(k(a, b), evaluate(e, [a, b]), rtol=1e-12)


def test_plans_merge_dimensions_walked_as_one_run() -> None:
    plan = make_plan([(4, 5, 6), (4, 5, 6)], 3, None)
    assert plan.shape.tolist() == [1, 1, 120] and plan.pattern == (True, True)
    plan = make_plan([(4, 5, 6), (6,)], 3, None)
    assert plan.shape.tolist() == [1, 20, 6]
    assert [s.tolist() for s in plan.strides] == [[0, 6, 1], [0, 0, 1]]
    plan = make_plan([(4, 5, 6)], 3, "sum")  # the reduced axis stays separate
    assert plan.shape.tolist() == [1, 20, 6] and plan.out_shape == (4, 5)
    plan = make_plan([(3, 1), (3, 4)], 2, None)
    assert plan.pattern == (False, True) and plan.strides[0].tolist() == [1, 0]


def test_canonical_text_shares_equal_subexpressions() -> None:
    a = unary("exp", input(0))
    b = unary("exp", input(0))  # built separately, the same node
    assert canonical_text(a * b).count("exp") == 1
    assert canonical_text(input(0) + 1.0) != canonical_text(1.0 + input(0))


def test_out_argument_and_errors(cache_dir: Path) -> None:
    k = compile_fused(input(0) + input(1), ["float32", "float32"], [1, 1], cache_dir=cache_dir)
    out = np.empty(3, np.float32)
    assert k(np.ones(3, np.float32), np.ones(3, np.float32), out=out) is out
    with pytest.raises(NativeKernelError) as e:
        k(np.ones(3, np.float32), np.ones(4, np.float32))
    assert "do not broadcast" in str(e.value) and "input 1: [4]" in str(e.value)
    with pytest.raises(NativeKernelError) as e:
        k(np.ones(3, np.float32), np.ones(3))
    assert "expected: input 1: f32 of rank 1" in str(
        e.value
    ) and "found:    input 1: f64[3]" in str(e.value)
    with pytest.raises(NativeKernelError, match="wrong number of inputs"):
        k(np.ones(3, np.float32))
    with pytest.raises(NativeKernelError, match="expected: out: f32\\[3\\]"):
        k(np.ones(3, np.float32), np.ones(3, np.float32), out=np.empty(4, np.float32))
    with pytest.raises(NativeKernelError, match="unsupported input dtype"):
        compile_fused(input(0), ["int32"], [1])
    with pytest.raises(NativeKernelError, match="one rank per dtype"):
        compile_fused(input(1), ["float32"], [1])
    with pytest.raises(NativeKernelError, match="did you mean 'tanh'"):
        unary("tan", input(0))
    with pytest.raises(NativeKernelError, match="unknown reduction 'avg'"):
        compile_fused(input(0), ["float32"], [1], "avg")


def test_memory_cache_can_be_cleared(cache_dir: Path) -> None:
    e = unary("cos", input(0))
    # The memory cache is per process, whatever the disk folder: an earlier test's kernel
    # for the same expression would be returned without writing this test's folder.
    codegen.clear_memory_cache()
    k = compile_fused(e, ["float32"], [1], cache_dir=cache_dir)
    assert k.origin == "compiled"
    codegen.clear_memory_cache()
    again = compile_fused(e, ["float32"], [1], cache_dir=cache_dir)
    assert again is not k and again.origin == "disk"
