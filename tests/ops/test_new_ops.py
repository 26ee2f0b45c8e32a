"""The ops the tracing frontend emits: rules agree with kernels, kernels with NumPy semantics."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shapevm.ops import DYNAMIC, DType, OpFlag, ShapeRuleError, get_op
from shapevm.ops.special import erf, sigmoid
from tests.ops.opcheck import concrete, dims, run_op

F32, F64, I32, I64, U8, BOOL = DType.F32, DType.F64, DType.I32, DType.I64, DType.U8, DType.BOOL
ENVS = [{"b": 1, "n": 1}, {"b": 3, "n": 5}, {"b": 6, "n": 2}]

# (op, operand shapes, attributes with DIMS as text, operand dtypes)
CASES: list[tuple[str, list[str], dict[str, Any], list[DType]]] = [
    ("sin", ["b, n"], {}, [F32]),
    ("cos", ["b, n"], {}, [F64]),
    ("erf", ["b, n"], {}, [F32]),
    ("sigmoid", ["b, n"], {}, [F32]),
    ("floor", ["b, n"], {}, [F32]),
    ("ceil", ["b, n"], {}, [I32]),
    ("sign", ["b, n"], {}, [I64]),
    ("logical_not", ["b, n"], {}, [BOOL]),
    ("floordiv", ["b, n", "n"], {}, [I32, I32]),
    ("mod", ["b, 1", "1, n"], {}, [F32, F32]),
    ("less_equal", ["b, n", "n"], {}, [F32, F32]),
    ("greater_equal", ["b, n", "b, 1"], {}, [I32, I32]),
    ("not_equal", ["b, n", "b, n"], {}, [U8, U8]),
    ("logical_and", ["b, n", "n"], {}, [BOOL, BOOL]),
    ("logical_or", ["b, 1", "n"], {}, [BOOL, BOOL]),
    ("logical_xor", ["b, n", "b, n"], {}, [BOOL, BOOL]),
    ("min", ["b, n, 2"], {"axis": (1,)}, [F32]),
    ("prod", ["b, n"], {"axis": (0,), "keepdims": True}, [I32]),
    ("prod", ["b, n"], {}, [BOOL]),
    ("mean", ["b, n, 3"], {"axis": (0, 2)}, [F64]),
    ("mean", ["b, n"], {"keepdims": True}, [I32]),
    ("argmax", ["b, n, 3"], {"axis": 1}, [F32]),
    ("argmax", ["b, n"], {"axis": -1, "keepdims": True}, [I32]),
    ("argmin", ["b, n"], {}, [F32]),
    ("argmin", ["b, n"], {"keepdims": True}, [BOOL]),
    ("broadcast_to", ["n, 1"], {"shape": "b, n, 4"}, [F32]),
    ("broadcast_to", [""], {"shape": "b"}, [I32]),
    ("slice", ["b, n"], {"start": "0, 1", "stop": "b, n", "step": (2, 1)}, [F32]),
    ("slice", ["b, 7"], {"start": "b - 1, 2", "stop": "b, 7", "step": (1, 3)}, [F32]),
    ("pad", ["b, n"], {"low": "1, 0", "high": "b, 2", "value": -1.5}, [F32]),
    ("sort", ["b, n"], {}, [F32]),
    ("sort", ["b, n"], {"axis": 0, "descending": True}, [I32]),
    ("top_k", ["b, n + 2"], {"k": "2"}, [F32]),
    ("top_k", ["b, n"], {"k": "n"}, [U8]),
    ("full", [], {"shape": "b, 2*n", "value": 3, "dtype": "i32"}, []),
    ("full", [], {"shape": "", "value": -math.inf, "dtype": "f32"}, []),
    ("iota", [], {"size": "b + n", "dtype": "i64"}, []),
    ("dim_value", [], {"dims": "b, n, 2*b"}, []),
    ("dim_value", [], {"dims": "n + 1", "dtype": "f32", "scalar": True}, []),
    ("mask_select", ["b, n, 3", "b, n"], {}, [F32, BOOL]),
    ("mask_select", ["b, n", ""], {}, [F32, BOOL]),
    ("einsum", ["b, n, 4", "b, 4, 3"], {"equation": "bij,bjk->bik"}, [F32, F32]),
    ("einsum", ["n, n"], {"equation": "ii->i"}, [F32]),
    ("einsum", ["b, n, 4", "4"], {"equation": "...j,j->..."}, [F64, F64]),
    ("einsum", ["1, n", "b, n"], {"equation": "ij,ij->ji"}, [I32, I32]),
    ("conv2d", ["b, 3, n + 4, 9", "4, 3, 3, 3"], {}, [F32, F32]),
    (
        "conv2d",
        ["b, 4, n + 2, 8", "6, 2, 3, 2", "6"],
        {"groups": 2, "padding": (1, 0, 2, 1), "stride": (2, 3), "dilation": (1, 2)},
        [F32, F32, F32],
    ),
    ("max_pool2d", ["b, 2, n + 1, 6"], {"kernel": (2, 3)}, [F32]),
    (
        "max_pool2d",
        ["2, n + 3, 5"],
        {"kernel": (3, 3), "stride": (1, 2), "padding": (1, 1, 0, 1)},
        [I32],
    ),
    (
        "avg_pool2d",
        ["b, 2, n + 2, 6"],
        {"kernel": (3, 2), "padding": (1, 0, 1, 1), "count_include_pad": False},
        [F32],
    ),
]


def _id(case: tuple[str, list[str], dict[str, Any], list[DType]]) -> str:
    return f"{case[0]}-{'-'.join(case[1]) or 'none'}-{len(case[2])}"


@pytest.mark.parametrize("env", ENVS, ids=lambda e: f"b{e['b']}n{e['n']}")
@pytest.mark.parametrize(("name", "specs", "attrs", "dtypes"), CASES, ids=map(_id, CASES))
def test_kernel_agrees_with_shape_and_dtype_rules(
    name: str, specs: list[str], attrs: dict[str, Any], dtypes: list[DType], env: dict[str, int]
) -> None:
    run_op(name, specs, attrs, env, dtypes)


def test_every_new_op_is_covered() -> None:
    new = {
        "sin", "cos", "erf", "floor", "ceil", "sign", "logical_not", "sigmoid", "floordiv",
        "mod", "less_equal", "greater_equal", "not_equal", "logical_and", "logical_or",
        "logical_xor", "min", "prod", "mean", "argmax", "argmin", "broadcast_to", "slice",
        "pad", "einsum", "sort", "top_k", "full", "iota", "dim_value", "mask_select", "conv2d",
        "max_pool2d", "avg_pool2d",
    }  # fmt: skip
    assert new <= {case[0] for case in CASES}
    assert all(get_op(name) is not None for name in new)


def test_flags() -> None:
    def flags(name: str) -> OpFlag:
        info = get_op(name)
        assert info is not None
        return info.flags

    assert OpFlag.ELEMENTWISE | OpFlag.FUSIBLE in flags("erf")
    assert OpFlag.COMPARISON | OpFlag.BINARY in flags("less_equal")
    assert OpFlag.COMMUTATIVE in flags("not_equal") and OpFlag.COMMUTATIVE in flags("logical_or")
    assert OpFlag.COMMUTATIVE not in flags("floordiv")
    assert OpFlag.LAYOUT in flags("slice") and OpFlag.LAYOUT in flags("broadcast_to")
    assert OpFlag.DATA_DEPENDENT in flags("mask_select")
    assert get_op("top_k").num_outputs == 2  # type: ignore[union-attr]
    assert get_op("full").min_arity == get_op("full").max_arity == 0  # type: ignore[union-attr]


# Values against NumPy semantics (or an independent oracle where the kernel is NumPy itself).


def test_erf_matches_math_erf() -> None:
    x = np.concatenate(
        [np.linspace(-8, 8, 4001), [0.0, -0.0, 0.46875, 4.0, 1e-300, 30.0, np.inf, -np.inf]]
    )
    want = np.frompyfunc(math.erf, 1, 1)(x).astype(np.float64)
    np.testing.assert_allclose(erf(x), want, rtol=1e-15, atol=1e-300)
    x32 = x.astype(np.float32)
    want32 = np.frompyfunc(math.erf, 1, 1)(x32.astype(np.float64)).astype(np.float32)
    got32 = erf(x32)
    assert got32.dtype == np.float32
    np.testing.assert_array_equal(got32, want32)  # correctly rounded on these points
    assert np.isnan(erf(np.array([np.nan]))).all()
    assert np.signbit(erf(np.array(-0.0)))
    assert erf(np.array([0.5], np.float16)).dtype == np.float16


@given(st.floats(-40, 40, allow_nan=False))
def test_erf_property(x: float) -> None:
    assert abs(float(erf(np.array(x))) - math.erf(x)) <= 4e-16 * max(1.0, abs(math.erf(x)))


def test_sigmoid_is_stable_and_exact_enough() -> None:
    x = np.array([-1000.0, -30.0, -1.0, 0.0, 1.0, 30.0, 1000.0], np.float32)
    with np.errstate(over="raise"):
        got = sigmoid(x)
    want = 1 / (1 + np.exp(-x.astype(np.float64).clip(-700, 700)))
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=1e-6)
    assert got.dtype == np.float32


def _kernel(name: str, args: list[Any], **attrs: Any) -> tuple[Any, ...]:
    info = get_op(name)
    assert info is not None
    return info.kernel(args, info.filled_attrs(attrs))


def test_rounding_keeps_ints_and_floors_floats() -> None:
    (out,) = _kernel("floor", [np.array([-1.5, 2.5], np.float32)])
    assert out.tolist() == [-2.0, 2.0] and out.dtype == np.float32
    (out,) = _kernel("ceil", [np.array([-3, 4], np.int16)])
    assert out.tolist() == [-3, 4] and out.dtype == np.int16
    (out,) = _kernel("sign", [np.array([-2.0, 0.0, np.nan, 3.0])])
    assert out[[0, 1, 3]].tolist() == [-1, 0, 1] and np.isnan(out[2])


def test_floordiv_and_mod_follow_python() -> None:
    a = np.array([7, -7, 7, -7, 5], np.int32)
    b = np.array([2, 2, -2, -2, 0], np.int32)
    (q,) = _kernel("floordiv", [a, b])
    (r,) = _kernel("mod", [a, b])
    assert q[:4].tolist() == [7 // 2, -7 // 2, 7 // -2, -7 // -2] and q[4] == 0
    assert r[:4].tolist() == [7 % 2, -7 % 2, 7 % -2, -7 % -2] and r[4] == 0
    assert q.dtype == r.dtype == np.int32
    (fq,) = _kernel("floordiv", [np.array([-7.5]), 2.0])
    assert fq.tolist() == [-4.0]


def test_reductions_keep_the_rule_dtype() -> None:
    x = np.array([[1, 2], [3, 4]], np.int8)
    assert _kernel("prod", [x])[0].dtype == np.int8
    assert _kernel("sum", [x], axis=(0,))[0].dtype == np.int8
    (m,) = _kernel("mean", [x], axis=(1,))
    assert m.dtype == np.float32 and m.tolist() == [1.5, 3.5]
    (m16,) = _kernel("mean", [np.ones(4, np.float16)])
    assert m16.dtype == np.float16
    (am,) = _kernel("argmax", [np.array([[1, 5, 5], [7, 0, 7]])], axis=1)
    assert am.tolist() == [1, 0] and am.dtype == np.int64
    (flat,) = _kernel("argmin", [np.array([[3, 1], [1, 0]])], keepdims=True)
    assert flat.tolist() == [[3]]


def test_top_k_orders_ties_by_index_like_jax() -> None:
    x = np.array([[1, 3, 3, 2, 3], [0, 0, 0, 0, 0]], np.uint8)
    values, index = _kernel("top_k", [x], k=(4,))
    assert values.tolist() == [[3, 3, 3, 2], [0, 0, 0, 0]]
    assert index.tolist() == [[1, 2, 4, 3], [0, 1, 2, 3]] and index.dtype == np.int64


@given(
    st.lists(st.integers(-3, 3), min_size=1, max_size=12),
    st.integers(0, 12),
    st.sampled_from([np.int32, np.float32, np.uint8]),
)
def test_top_k_matches_a_sort_by_value_then_index(xs: list[int], k: int, dt: Any) -> None:
    x = np.array(xs).astype(dt)
    k = min(k, len(xs))
    values, index = _kernel("top_k", [x], k=(k,))
    want = sorted(range(len(xs)), key=lambda i: (-float(x[i]), i))[:k]
    assert index.tolist() == want
    assert values.tolist() == x[want].tolist()


def test_sort_descending() -> None:
    x = np.array([[3, 1, 2], [0, 5, 4]], np.int32)
    assert _kernel("sort", [x], descending=True)[0].tolist() == [[3, 2, 1], [5, 4, 0]]
    assert _kernel("sort", [x], axis=0)[0].tolist() == [[0, 1, 2], [3, 5, 4]]


def test_creation_ops() -> None:
    (t,) = _kernel("full", [], shape=(2, 3), value=7, dtype="u8")
    assert t.dtype == np.uint8 and (t == 7).all() and t.shape == (2, 3)
    (i,) = _kernel("iota", [], size=(4,), dtype="f32")
    assert i.tolist() == [0.0, 1.0, 2.0, 3.0] and i.dtype == np.float32
    (d,) = _kernel("dim_value", [], dims=(5, 7))
    assert d.tolist() == [5, 7] and d.dtype == np.int32
    (s,) = _kernel("dim_value", [], dims=(9,), dtype="i64", scalar=True)
    assert s.shape == () and s == 9 and s.dtype == np.int64


def test_mask_select_and_pad_and_slice_values() -> None:
    x = np.arange(12).reshape(3, 4)
    (sel,) = _kernel("mask_select", [x, np.array([True, False, True])])
    assert sel.tolist() == [[0, 1, 2, 3], [8, 9, 10, 11]]
    (p,) = _kernel("pad", [np.ones((1, 2), np.int32)], low=(1, 0), high=(0, 1), value=-1)
    assert p.tolist() == [[-1, -1, -1], [1, 1, -1]]
    (s,) = _kernel("slice", [x], start=(1, 0), stop=(3, 4), step=(1, 3))
    assert s.tolist() == [[4, 7], [8, 11]]
    (bt,) = _kernel("broadcast_to", [np.array([1, 2])], shape=(2, 2))
    assert bt.tolist() == [[1, 2], [1, 2]]


# Shape rules against NumPy on random concrete shapes.


@given(st.data())
def test_slice_rule_matches_numpy(data: st.DataObject) -> None:
    shape = data.draw(st.lists(st.integers(0, 6), min_size=0, max_size=3))
    start, stop = [], []
    for d in shape:
        lo = data.draw(st.integers(0, d))
        start.append(lo)
        stop.append(data.draw(st.integers(lo, d)))
    step = data.draw(st.lists(st.integers(1, 4), min_size=len(shape), max_size=len(shape)))
    x = np.zeros(shape)
    want = x[tuple(slice(a, b, c) for a, b, c in zip(start, stop, step, strict=True))].shape
    attrs = {"start": tuple(start), "stop": tuple(stop), "step": tuple(step)}
    result = get_op("slice").shape_rule([tuple(shape)], attrs)  # type: ignore[union-attr]
    assert result.shapes == (want,) and result.conditions == ()


@given(st.data())
def test_broadcast_to_and_pad_rules_match_numpy(data: st.DataObject) -> None:
    target = tuple(data.draw(st.lists(st.integers(0, 4), max_size=4)))
    keep = data.draw(st.integers(0, len(target)))
    shape = tuple(data.draw(st.sampled_from([1, d])) for d in target[len(target) - keep :])
    want = np.broadcast_to(np.zeros(shape), target).shape
    rule = get_op("broadcast_to").shape_rule  # type: ignore[union-attr]
    assert rule([shape], {"shape": target}).shapes == (want,)
    low = tuple(data.draw(st.integers(0, 3)) for _ in shape)
    high = tuple(data.draw(st.integers(0, 3)) for _ in shape)
    attrs = {"low": low, "high": high, "value": 0.0}
    (padded,) = get_op("pad").kernel([np.zeros(shape)], attrs)  # type: ignore[union-attr]
    if shape:
        assert padded.shape == np.pad(np.zeros(shape), list(zip(low, high, strict=True))).shape
    pad_rule = get_op("pad").shape_rule  # type: ignore[union-attr]
    assert pad_rule([shape], attrs).shapes == (padded.shape,)


@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=4),
    st.lists(st.integers(1, 4), min_size=1, max_size=4),
)
def test_logical_rule_broadcasts_like_numpy(a: list[int], b: list[int]) -> None:
    rule = get_op("logical_xor").shape_rule  # type: ignore[union-attr]
    result = rule([tuple(a), tuple(b)], {})
    try:
        want = np.broadcast_shapes(tuple(a), tuple(b))
    except ValueError:
        assert any(c.lhs != c.rhs for c in result.conditions)  # the verifier rejects it
    else:
        assert result.shapes == (want,) and result.conditions == ()


def test_einsum_rule_with_symbolic_and_dynamic_sizes() -> None:
    rule = get_op("einsum").shape_rule  # type: ignore[union-attr]
    b, n = dims("b, n")
    result = rule([(b, 3, n), (1, n, 5)], {"equation": "bij, bjk -> bik"})
    assert result.shapes == ((b, 3, 5),) and result.conditions == ()
    result = rule([(DYNAMIC, 4), (b, 4)], {"equation": "ij,kj->ik"})
    assert result.shapes == ((DYNAMIC, b),)
    result = rule([(DYNAMIC, 4), (n, 4)], {"equation": "ij,ij->i"})
    assert result.shapes == ((n,),) and all(c.deferred for c in result.conditions)
    (cond,) = rule([(b, 4), (n, 4)], {"equation": "ij,ij->j"}).conditions
    assert (cond.lhs, cond.rhs, cond.expected) == (n, b, "{1}.shape[0] == {0}.shape[0]")


def test_shapes_are_concrete_where_they_should_be() -> None:
    env = {"b": 2, "n": 3}
    result = get_op("conv2d").shape_rule(  # type: ignore[union-attr]
        [dims("b, 3, n + 4, 9"), dims("4, 3, 3, 3")],
        {"stride": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "groups": 1},
    )
    assert concrete(result.shapes[0], env) == (2, 4, 5, 7)
    result = get_op("mask_select").shape_rule(  # type: ignore[union-attr]
        [dims("b, n, 3"), dims("b, n")], {}
    )
    assert result.shapes == ((DYNAMIC, 3),)


def test_dtype_rules_reject_what_the_ops_do_not_take() -> None:
    def rejects(name: str, dtypes: list[Any], attrs: dict[str, Any], match: str) -> None:
        with pytest.raises(ShapeRuleError, match=match):
            get_op(name).dtype_rule(dtypes, attrs)  # type: ignore[union-attr]

    rejects("logical_and", [F32, BOOL], {}, "logical ops take bool operands")
    rejects("logical_or", [I32, I32], {}, "logical ops take bool operands")
    rejects("logical_xor", [None, None], {}, "at least one operand must be a tensor")
    rejects("floordiv", [BOOL, BOOL], {}, "numeric dtype, not bool")
    rejects("erf", [I32], {}, "floating")
    rejects("conv2d", [I32, I32], {}, "floating")
    rejects("avg_pool2d", [I64], {}, "floating")
    rejects("mask_select", [F32, I32], {}, "bool mask")
    rejects("full", [], {"dtype": "i8", "value": 300}, "value 300 does not fit dtype i8")
    rejects("full", [], {"dtype": "u8", "value": 0.5}, "does not fit")
    rejects("iota", [], {"dtype": "bool"}, "not bool")
    logical = get_op("logical_and").dtype_rule  # type: ignore[union-attr]
    assert logical([BOOL, None], {}) == (BOOL,)
    assert get_op("mean").dtype_rule([BOOL], {}) == (F32,)  # type: ignore[union-attr]
    assert get_op("top_k").dtype_rule([U8], {}) == (U8, I64)  # type: ignore[union-attr]
    full = get_op("full").dtype_rule  # type: ignore[union-attr]
    assert full([], {"dtype": "f16", "value": math.inf}) == (DType.F16,)
