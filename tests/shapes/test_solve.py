"""Solving dimension variables from concrete shapes, with the guide's messages."""

from __future__ import annotations

import pytest

import shapevm as sv


def solve(spec: str, *shapes, constraints=(), **kw):
    scope = sv.SymbolicScope(constraints)
    specs = [sv.symbolic_shape(s, scope=scope) for s in spec.split(";")]
    return sv.solve_dim_vars(specs, shapes, scope, **kw)


def test_linear_and_dependency_order():
    assert solve("b, 2*d", (3, 8)) == {"b": 3, "d": 4}
    assert solve("a, a*b", (3, 12)) == {"a": 3, "b": 4}
    assert solve("a*b, a", (12, 3)) == {"a": 3, "b": 4}
    assert solve("b + 15", (20,)) == {"b": 5}
    assert solve("b; 2*b + 1", (4,), (9,)) == {"b": 4}


def test_monotone_polynomial():
    assert solve("a^2", (9,)) == {"a": 3}
    with pytest.raises(sv.ShapeError, match="No integer value of 'a'"):
        solve("a^2", (10,))


def test_division_remainder_message():
    with pytest.raises(sv.ShapeError) as info:
        solve("b, b, 2*d", (3, 3, 5))
    msg = str(info.value)
    assert "Division had remainder 1 when computing the value of 'd'" in msg
    assert "args[0].shape = (b, b, 2*d)" in msg
    assert "'b' = 3 from 'b' for dimension args[0].shape[0] (= 3)" in msg


def test_inconsistency_message():
    with pytest.raises(sv.ShapeError, match=r"args\[1\]\.shape\[0\] \(= 4\).*'b' \(= 3\)"):
        solve("b; b", (3,), (4,))


def test_rank_and_constant_dims():
    with pytest.raises(sv.ShapeError, match="Rank mismatch for args\\[0\\]: expected 2"):
        solve("b, 4", (3,))
    with pytest.raises(sv.ShapeError, match=r"args\[0\]\.shape\[1\] must be 4, found 5"):
        solve("b, 4", (3, 5))


def test_value_must_be_positive():
    with pytest.raises(sv.ShapeError, match="Expected value >= 1 for dimension variable 'b'"):
        solve("b + 2", (2,))
    with pytest.raises(sv.ShapeError, match="Expected value >= 1"):
        solve("b", (0,))


def test_cannot_solve_message():
    with pytest.raises(sv.ShapeError) as info:
        solve("a + b", (5,))
    msg = str(info.value)
    assert "Cannot solve for values of dimension variables {'a', 'b'}" in msg or (
        "Cannot solve for values of dimension variables {'b', 'a'}" in msg
    )
    assert "Unprocessed specifications: 'a + b' for dimension size args[0].shape[0] (= 5)" in msg


def test_explicit_values_and_constraints_checked():
    assert solve("a + b", (5,), known={"a": 2}) == {"a": 2, "b": 3}
    with pytest.raises(sv.ShapeError, match="'b >= 16'"):
        solve("b", (8,), constraints=["b >= 16"])


def test_argument_names():
    scope = sv.SymbolicScope()
    spec = sv.symbolic_shape("b, 3", scope=scope)
    with pytest.raises(sv.ShapeError, match=r"x\.shape\[1\] must be 3"):
        sv.solve_dim_vars([spec], [(2, 4)], scope, arg_names=["x"])
