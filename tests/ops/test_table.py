"""The op table: every row complete; shape rules agree with the NumPy kernels."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from shapevm.ops import (
    DYNAMIC,
    AttrKind,
    Condition,
    DType,
    OpFlag,
    ShapeRuleError,
    all_ops,
    get_op,
    register,
    suggest_op,
)
from shapevm.shapes import DimExpr, SymbolicScope, symbolic_shape

SCOPE = SymbolicScope(())
b, n = symbolic_shape("b, n", scope=SCOPE)


def dims(text: str) -> tuple[Any, ...]:
    return symbolic_shape(text, scope=SCOPE)


def test_every_row_is_complete() -> None:
    names = [info.name for info in all_ops()]
    assert len(names) == len(set(names))
    for info in all_ops():
        assert info.doc and len(info.doc.splitlines()) == 1, info.name
        assert callable(info.shape_rule) and callable(info.dtype_rule) and callable(info.kernel)
        assert info.min_arity >= 0 and info.num_outputs >= 1
        assert isinstance(info.flags, OpFlag)


def test_groups_are_flags() -> None:
    elementwise = {i.name for i in all_ops() if OpFlag.ELEMENTWISE in i.flags}
    assert {"add", "exp", "where", "maximum"} <= elementwise
    reductions = {i.name for i in all_ops() if OpFlag.REDUCTION in i.flags}
    assert reductions == {"sum", "max", "min", "prod", "mean", "argmax", "argmin"}
    assert OpFlag.DATA_DEPENDENT in get_op("nonzero").flags  # type: ignore[union-attr]
    assert OpFlag.COMMUTATIVE in get_op("add").flags  # type: ignore[union-attr]
    assert OpFlag.COMMUTATIVE not in get_op("sub").flags  # type: ignore[union-attr]


def test_registering_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register(get_op("add"))  # type: ignore[arg-type]


def test_suggestions() -> None:
    assert suggest_op("matmull") == "matmul"
    assert get_op("nope") is None


def test_matmul_rule_returns_the_inner_condition() -> None:
    result = get_op("matmul").shape_rule([(b, 64), (64, n)], {})  # type: ignore[union-attr]
    assert result.shapes == ((b, n),)
    (cond,) = result.conditions
    assert cond == Condition(
        64,
        "==",
        64,
        "inner dimensions differ",
        "{1}.shape[0] == {0}.shape[1]",
        "transpose or reshape one operand",
    )


def test_broadcast_symbolic_with_one() -> None:
    result = get_op("add").shape_rule([(b, 1), (1, n)], {})  # type: ignore[union-attr]
    assert result.shapes == ((b, n),) and result.conditions == ()


def test_broadcast_with_dynamic_defers() -> None:
    result = get_op("mul").shape_rule([(DYNAMIC, 4), (b, 4)], {})  # type: ignore[union-attr]
    assert result.shapes == ((DYNAMIC, 4),)
    assert all(c.deferred for c in result.conditions)


def test_reduction_keepdims_and_axes() -> None:
    info = get_op("sum")
    assert info is not None
    assert info.shape_rule([(b, n, 3)], {"axis": (1,), "keepdims": True}).shapes == ((b, 1, 3),)
    assert info.shape_rule([(b, n, 3)], {"axis": (-1, 0), "keepdims": False}).shapes == ((n,),)
    assert info.shape_rule([(b, n)], {"axis": None, "keepdims": False}).shapes == ((),)
    with pytest.raises(ShapeRuleError, match="repeated"):
        info.shape_rule([(b, n)], {"axis": (1, -1), "keepdims": False})


def test_reshape_checks_the_element_count() -> None:
    result = get_op("reshape").shape_rule(  # type: ignore[union-attr]
        [(b, 6)], {"shape": (b, 2, 3)}
    )
    assert result.shapes == ((b, 2, 3),)
    (cond,) = result.conditions
    assert cond.lhs == cond.rhs


def test_concatenate_sums_the_axis() -> None:
    result = get_op("concatenate").shape_rule(  # type: ignore[union-attr]
        [(b, 4), (n, 4), (3, 4)], {"axis": 0}
    )
    assert result.shapes == ((b + n + 3, 4),)


def test_nonzero_is_data_dependent() -> None:
    assert get_op("nonzero").shape_rule([(b, 3)], {}).shapes == (  # type: ignore[union-attr]
        (DYNAMIC, 2),
    )


def test_attribute_schema() -> None:
    info = get_op("sum")
    assert info is not None
    assert [(s.name, s.kind) for s in info.attrs] == [
        ("axis", AttrKind.INTS),
        ("keepdims", AttrKind.BOOL),
    ]
    assert info.attr_problems({"axis": (1,), "keepdims": True}) == []
    assert info.filled_attrs({}) == {"axis": None, "keepdims": False}


def test_dtype_rules() -> None:
    assert get_op("add").dtype_rule([DType.F32, None], {}) == (DType.F32,)  # type: ignore[union-attr]
    assert get_op("less").dtype_rule([DType.I32, DType.I32], {}) == (DType.BOOL,)  # type: ignore[union-attr]
    assert get_op("sum").dtype_rule([DType.BOOL], {}) == (DType.I64,)  # type: ignore[union-attr]
    assert get_op("cast").dtype_rule([DType.F32], {"dtype": "i8"}) == (DType.I8,)  # type: ignore[union-attr]
    with pytest.raises(ShapeRuleError, match="floating"):
        get_op("exp").dtype_rule([DType.I32], {})  # type: ignore[union-attr]


# Differential: run each kernel on concrete arrays and compare with the symbolic rules.
ENV = {"b": 3, "n": 5}
CASES: list[tuple[str, list[str], dict[str, Any]]] = [
    ("neg", ["b, n"], {}),
    ("abs", ["b, n"], {}),
    ("exp", ["b, n"], {}),
    ("log", ["b, n"], {}),
    ("sqrt", ["b, n"], {}),
    ("tanh", ["b, n"], {}),
    ("add", ["b, 1", "1, n"], {}),
    ("sub", ["b, n", "n"], {}),
    ("mul", ["b, n", "b, n"], {}),
    ("div", ["b, n", "1"], {}),
    ("maximum", ["b, n", "b, 1"], {}),
    ("minimum", ["n", "b, n"], {}),
    ("pow", ["b, n", "b, n"], {}),
    ("less", ["b, n", "n"], {}),
    ("greater", ["b, n", "b, n"], {}),
    ("equal", ["b, n", "b, n"], {}),
    ("cast", ["b, n"], {"dtype": "i32"}),
    ("matmul", ["b, 4, n", "n, 2"], {}),
    ("matmul", ["n", "n, 2"], {}),
    ("sum", ["b, n, 2"], {"axis": (1,), "keepdims": False}),
    ("max", ["b, n, 2"], {"axis": None, "keepdims": True}),
    ("transpose", ["b, n, 2"], {"perm": (2, 0, 1)}),
    ("transpose", ["b, n"], {"perm": None}),
    ("concatenate", ["b, 2", "n, 2"], {"axis": 0}),
    ("nonzero", ["b, n"], {}),
]


@pytest.mark.parametrize(("name", "specs", "attrs"), CASES)
def test_kernel_agrees_with_shape_and_dtype_rules(
    name: str, specs: list[str], attrs: dict[str, Any]
) -> None:
    info = get_op(name)
    assert info is not None
    shapes = [dims(s) for s in specs]
    result = info.shape_rule(shapes, attrs)
    rng = np.random.default_rng(0)
    args = [rng.uniform(0.5, 2.0, size=_concrete(s)).astype(np.float32) for s in shapes]
    if name == "where":
        args[0] = args[0] > 1
    dtypes = [DType.from_numpy(a.dtype) for a in args]
    (out_dtype,) = info.dtype_rule(dtypes, attrs)
    (out,) = info.kernel(args, info.filled_attrs(attrs))
    expected = result.shapes[0]
    assert len(out.shape) == len(expected)
    for got, want in zip(out.shape, expected, strict=True):
        if want is not DYNAMIC:
            assert got == _value(want)
    assert DType.from_numpy(out.dtype) == out_dtype
    for cond in result.conditions:
        assert _value(cond.lhs) == _value(cond.rhs)


def _value(d: Any) -> int:
    return d.evaluate(ENV) if isinstance(d, DimExpr) else int(d)


def _concrete(shape: tuple[Any, ...]) -> tuple[int, ...]:
    return tuple(_value(d) for d in shape)


def test_where_kernel() -> None:
    info = get_op("where")
    assert info is not None
    cond = np.array([True, False])
    (out,) = info.kernel([cond, np.ones(2, np.float32), 0.0], {})
    assert out.tolist() == [1.0, 0.0] and out.dtype == np.float32
    assert info.dtype_rule([DType.BOOL, DType.F32, None], {}) == (DType.F32,)


def _probe_operands(name: str, dtype: DType, arity: int) -> list[DType]:
    return [DType.BOOL, dtype, dtype] if name == "where" else [dtype] * arity


@pytest.mark.parametrize(
    "name",
    [
        i.name
        for i in all_ops()
        if (OpFlag.ELEMENTWISE in i.flags or OpFlag.REDUCTION in i.flags) and i.name != "cast"
    ],
)
def test_kernels_give_the_rule_dtype_for_every_dtype_the_rule_accepts(name: str) -> None:
    info = get_op(name)
    assert info is not None
    attrs = info.filled_attrs({})
    for dtype in DType:
        operands = _probe_operands(name, dtype, info.min_arity)
        try:
            (want,) = info.dtype_rule(operands, attrs)
        except ShapeRuleError:
            continue
        args = [np.ones(3, d.numpy.newbyteorder("=")) for d in operands]
        with np.errstate(all="ignore"):
            (out,) = info.kernel(args, attrs)
        assert DType.from_numpy(out.dtype) == want, f"{name}({dtype}) gives {out.dtype}"


def test_an_ops_ufunc_computes_what_its_kernel_does_for_float_operands() -> None:
    """The interpreter and the JIT call ``info.ufunc`` with ``out=`` in place of the kernel."""
    rng = np.random.default_rng(5)
    with_ufunc = [info for info in all_ops() if info.ufunc is not None]
    assert {"add", "mul", "exp", "tanh", "floor", "less"} <= {i.name for i in with_ufunc}
    for info in with_ufunc:
        args = [
            rng.uniform(0.5, 2.0, size=(3, 4)).astype(np.float32) for _ in range(info.min_arity)
        ]
        (ref,) = info.kernel(args, info.filled_attrs({}))
        out = np.empty_like(ref)
        info.ufunc(*args, out=out)
        np.testing.assert_array_equal(out, ref, err_msg=info.name)


@pytest.mark.parametrize(
    "name,shape,attrs",
    [
        ("reshape", (2, 3, 4), {"shape": (6, 4)}),
        ("reshape", (), {"shape": (1, 1)}),
        ("transpose", (2, 3, 4), {"perm": (1, 0, 2)}),
        ("transpose", (2, 3, 4), {"perm": None}),
        ("transpose", (), {"perm": None}),
        ("slice", (5, 6), {"start": (1, 0), "stop": (4, 6), "step": (2, 3)}),
        ("slice", (), {"start": (), "stop": (), "step": ()}),
    ],
)
def test_an_ops_view_computes_what_its_kernel_does(
    name: str, shape: tuple[int, ...], attrs: dict[str, Any]
) -> None:
    # OpInfo.view: the layout op as one method call, run by the interpreter and the JIT.
    info = get_op(name)
    assert info is not None and info.view is not None
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    (ref,) = info.kernel([x], attrs)
    got = info.view(attrs)(x)
    assert type(got) is np.ndarray and got.dtype == ref.dtype
    assert got.shape == ref.shape and np.array_equal(got, ref)


def test_only_layout_ops_have_a_view() -> None:
    with_view = {info.name for info in all_ops() if info.view is not None}
    assert with_view == {"reshape", "transpose", "slice"}
    assert all(OpFlag.LAYOUT in get_op(n).flags for n in with_view)  # type: ignore[union-attr]
