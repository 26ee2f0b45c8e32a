"""Every example of the shape-polymorphism guide, with shapevm's names.

Where JAX fails for a limitation of its reasoning and shapevm succeeds, the test says so.
"""

from __future__ import annotations

import numpy as np
import pytest

import shapevm as sv
import shapevm.numpy as snp
from shapevm import lax


def spec(text: str, dtype: object = np.int32, **kw: object) -> sv.ShapeDtypeStruct:
    return sv.ShapeDtypeStruct(sv.symbolic_shape(text, **kw), dtype)  # type: ignore[arg-type]


def shapes(avals: tuple[sv.ShapeDtypeStruct, ...]) -> list[str]:
    return [f"{a.dtype}[{','.join(str(d) for d in a.shape)}]" for a in avals]


def test_concatenate_doubles_the_symbolic_axis() -> None:
    def f(x):
        return snp.concatenate([x, x], axis=1)

    a, b = sv.symbolic_shape("a, b")
    x_shape = (a, b)
    assert x_shape == (a, b)
    exp = sv.export(sv.jit(f))(sv.ShapeDtypeStruct(x_shape, np.int32))
    assert shapes(exp.in_avals) == ["int32[a,b]"]
    assert shapes(exp.out_avals) == ["int32[a,2*b]"]
    res = exp.call(np.ones((3, 4), dtype=np.int32))
    assert res.shape == (3, 8)


def test_symbolic_args_specs_fill_placeholders_from_arguments() -> None:
    def f1(x, y):
        return x + y

    x = np.ones((3, 1), dtype=np.int32)
    y = np.ones((3, 4), dtype=np.int32)
    args_specs = sv.symbolic_args_specs((x, y), "a, ...")
    exp = sv.export(sv.jit(f1))(*args_specs)
    assert shapes(exp.in_avals) == ["int32[a,1]", "int32[a,4]"]
    np.testing.assert_array_equal(exp.call(x, y), x + y)


def test_flatten_with_dimension_arithmetic() -> None:
    f = lambda x: snp.reshape(x, (x.shape[0] * x.shape[1],))  # noqa: E731
    exp = sv.export(sv.jit(f))(spec("b, 4"))
    assert shapes(exp.out_avals) == ["int32[4*b]"]
    assert exp.call(np.arange(12, dtype=np.int32).reshape(3, 4)).tolist() == list(range(12))


def test_dimension_to_array() -> None:
    exp = sv.export(sv.jit(lambda x: snp.array(x.shape[0]) + x))(spec("b"))
    out = exp.call(np.arange(3, dtype=np.int32))
    assert out.dtype == np.int32 and out.tolist() == [3, 4, 5]


def test_array_cannot_be_a_dimension() -> None:
    with pytest.raises(TypeError, match="Shapes must be 1D sequences of concrete values"):
        sv.export(sv.jit(lambda x: x.reshape(snp.array(x.shape[0]) * 2)))(spec("b"))


def test_dimensions_mixed_with_floats_and_arrays_become_arrays() -> None:
    f = lambda x: (  # noqa: E731
        5.0 + x.shape[0],
        x.shape[0] - np.arange(5, dtype=np.int32),
        x + x.shape[0] + snp.sin(x.shape[0]),
    )
    exp = sv.export(sv.jit(f))(spec("b"))
    assert shapes(exp.out_avals) == ["float32[]", "int32[5]", "float32[b]"]
    r0, r1, r2 = exp.call(np.ones((3,), np.int32))
    assert float(r0) == 8.0 and r0.dtype == np.float32
    assert r1.tolist() == [3, 2, 1, 0, -1]
    np.testing.assert_allclose(r2, [4.14112] * 3, rtol=1e-5)


def test_mean_divides_by_a_dimension() -> None:
    exp = sv.export(sv.jit(lambda x: snp.sum(x, axis=0) / x.shape[0]))(spec("b, c"))
    out = exp.call(np.arange(12, dtype=np.int32).reshape((3, 4)))
    assert out.dtype == np.float32 and out.tolist() == [4.0, 5.0, 6.0, 7.0]


def test_incompatible_broadcast_is_a_type_error() -> None:
    (v,) = sv.symbolic_shape("v")
    with pytest.raises(
        TypeError, match=r"add got incompatible shapes for broadcasting: \(v,\), \(4,\)\."
    ):
        sv.export(sv.jit(lambda x, y: x + y))(
            sv.ShapeDtypeStruct((v,), np.int32), sv.ShapeDtypeStruct((4,), np.int32)
        )


def test_matmul_contracting_dimensions_must_match() -> None:
    (v,) = sv.symbolic_shape("v")
    with pytest.raises(TypeError, match="matmul: inner dimensions differ"):
        sv.export(sv.jit(lambda x: snp.matmul(x, x)))(sv.ShapeDtypeStruct((v, 4), np.int32))
    exp = sv.export(sv.jit(lambda x: snp.matmul(x, x)))(sv.ShapeDtypeStruct((v, v), np.int32))
    m = np.arange(9, dtype=np.int32).reshape(3, 3)
    np.testing.assert_array_equal(exp.call(m), m @ m)


def test_inconclusive_comparison_in_user_code() -> None:
    with pytest.raises(sv.InconclusiveDimensionOperation, match="inconclusive"):
        sv.export(sv.jit(lambda x: 0 if x.shape[0] + 1 >= x.shape[1] else 1))(spec("a, b"))


def test_max_dim_defers_the_comparison() -> None:
    f = lambda x: snp.zeros((sv.max_dim(x.shape[0], 4),), np.float32)  # noqa: E731
    exp = sv.export(sv.jit(f))(spec("b"))
    assert shapes(exp.out_avals) == ["float32[max(4, b)]"]
    assert exp.call(np.ones(2, np.int32)).shape == (4,)
    assert exp.call(np.ones(9, np.int32)).shape == (9,)


def test_slice_needs_the_axis_to_be_large_enough() -> None:
    with pytest.raises(sv.InconclusiveDimensionOperation):
        sv.export(sv.jit(lambda x: x[0:16]))(spec("b"))
    exp = sv.export(sv.jit(lambda x: x[0:16]))(spec("b + 15"))
    assert shapes(exp.out_avals) == ["int32[16]"]
    assert exp.call(np.arange(20, dtype=np.int32)).tolist() == list(range(16))


def test_explicit_constraints() -> None:
    a, b = sv.symbolic_shape("a, b", constraints=("a >= b", "b >= 16"))
    exp = sv.export(sv.jit(lambda x: x[: x.shape[1], :16]))(sv.ShapeDtypeStruct((a, b), np.int32))
    assert shapes(exp.out_avals) == ["int32[b,16]"]
    x = np.arange(20 * 17, dtype=np.int32).reshape(20, 17)
    np.testing.assert_array_equal(exp.call(x), x[:17, :16])


def test_slice_in_dim_with_mod_is_proved_without_a_constraint() -> None:
    # JAX cannot prove b >= mod(b, 3) and needs the constraint; shapevm proves it.
    f = lambda x: lax.slice_in_dim(x, 0, x.shape[0] % 3)  # noqa: E731
    exp = sv.export(sv.jit(f))(spec("b"))
    assert exp.call(np.arange(5, dtype=np.int32)).tolist() == [0, 1]
    (b,) = sv.symbolic_shape("b", constraints=["b >= mod(b, 3)"])
    exp2 = sv.export(sv.jit(f))(sv.ShapeDtypeStruct((b,), np.int32))
    assert exp2.call(np.arange(7, dtype=np.int32)).tolist() == [0]


def test_scopes_must_not_mix() -> None:
    (a1,) = sv.symbolic_shape("a,")
    (a2,) = sv.symbolic_shape("a,", constraints=("a >= 8",))
    with pytest.raises(ValueError, match="Invalid mixing of symbolic scopes"):
        a1 + a2
    with pytest.raises(ValueError, match="Invalid mixing of symbolic scopes"):
        sv.export(sv.jit(lambda x, y: x))(
            sv.ShapeDtypeStruct((a1,), np.int32), sv.ShapeDtypeStruct((a2,), np.int32)
        )


X = np.arange(40, dtype=np.int32).reshape((4, 10))
TOP3 = [[9, 8, 7], [19, 18, 17], [29, 28, 27], [39, 38, 37]]


def my_top_k(k, x):
    return lax.top_k(x, k)[0]


def test_top_k_with_static_k() -> None:
    exp = sv.export(sv.jit(my_top_k, static_argnums=0))(3, X)
    assert shapes(exp.in_avals) == ["int32[4,10]"]
    assert shapes(exp.out_avals) == ["int32[4,3]"]
    assert exp.call(X).tolist() == TOP3


def test_top_k_with_a_dimension_passed_as_an_integer() -> None:
    # JAX raises KeyError here; shapevm takes k as an explicit integer argument.
    (k,) = sv.symbolic_shape("k", constraints=["k <= 10"])
    exp = sv.export(sv.jit(my_top_k, static_argnums=0))(k, X)
    assert shapes(exp.out_avals) == ["int32[4,k]"]
    assert exp.dim_args == ("k",)
    assert exp.call(3, X).tolist() == TOP3
    assert exp.call(1, X).tolist() == [[9], [19], [29], [39]]
    with pytest.raises(ValueError, match="k <= 10"):
        exp.call(11, X)


def test_top_k_with_the_zero_size_array_trick() -> None:
    (k,) = sv.symbolic_shape("k", constraints=["k <= 10"])

    def my_top_k_with_dimensions(dimensions, x):
        return my_top_k(dimensions.shape[1], x)

    exp = sv.export(sv.jit(my_top_k_with_dimensions))(sv.ShapeDtypeStruct((0, k), np.int32), X)
    assert shapes(exp.in_avals) == ["int32[0,k]", "int32[4,10]"]
    assert shapes(exp.out_avals) == ["int32[4,k]"]
    assert exp.call(np.zeros((0, 3), dtype=np.int32), X).tolist() == TOP3


def test_nonlinear_dimension_is_solved() -> None:
    # JAX: "Cannot solve for values of dimension variables {a}"; shapevm solves a^2.
    (a,) = sv.symbolic_shape("a")
    exp = sv.export(sv.jit(lambda x: snp.asarray(x.shape[0]) + 0 * x.sum()))(
        sv.ShapeDtypeStruct((a * a,), np.int32)
    )
    assert int(exp.call(np.ones(9, np.int32))) == 9
    with pytest.raises(ValueError, match="No integer value of 'a' gives 'a\\^2' = 8"):
        exp.call(np.ones(8, np.int32))


def test_shape_assertion_messages() -> None:
    exp = sv.export(sv.jit(lambda x: x))(spec("b, b, 2*d"))
    with pytest.raises(
        ValueError, match="Division had remainder 1 when computing the value of 'd'"
    ):
        exp.call(np.ones((3, 3, 5), dtype=np.int32))
    with pytest.raises(ValueError, match="inconsistency"):
        exp.call(np.ones((3, 4, 6), dtype=np.int32))


def test_reshape_minus_one_needs_exact_division() -> None:
    with pytest.raises(
        sv.InconclusiveDimensionOperation,
        match=r"Cannot divide evenly the sizes of shapes \(b,\) and \(2, -1\)",
    ):
        sv.export(sv.jit(lambda x: x.reshape((2, -1))))(spec("b"))
    exp = sv.export(sv.jit(lambda x: x.reshape((2, -1))))(spec("4*b"))
    assert shapes(exp.out_avals) == ["int32[2,2*b]"]
    exp = sv.export(sv.jit(lambda x: x.reshape((2, -1))))(spec("b, 5, 6"))
    assert shapes(exp.out_avals) == ["int32[2,15*b]"]
    assert exp.call(np.ones((2, 5, 6), np.int32)).shape == (2, 30)


def test_division_is_simplified() -> None:
    a, b = sv.symbolic_shape("a, b")
    assert (a * b + a) // (b + 1) == a
    assert (6 * a + 4) % 3 == 1
