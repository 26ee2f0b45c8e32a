"""Constraints and scopes, following the guide's examples."""

from __future__ import annotations

import itertools
import math

import pytest

import shapevm as sv
from shapevm.shapes import ScopeMixError, SpecSyntaxError, UnsatisfiableConstraintsError


def test_guide_explicit_constraints():
    a, b = sv.symbolic_shape("a, b", constraints=("a >= b", "b >= 16"))
    assert a >= 16 and a >= b and b >= 16
    assert sv.bounds(b) == (16, math.inf)


def test_variable_constant_constraints_combine():
    a, b = sv.symbolic_shape("a, b", constraints=["a >= 16", "b >= 8"])
    assert a + 2 * b >= 32


def test_chained_linear_constraints_are_stronger_than_jax():
    # JAX: from a >= b + 8 it infers a - b >= 8 but not a >= 9
    a, b = sv.symbolic_shape("a, b", constraints=["a >= b + 8"])
    assert a - b >= 8
    assert a >= 9
    scope = sv.SymbolicScope(["a >= b + 2", "b >= c + 3"])
    a, c = sv.symbolic_shape("a, c", scope=scope)
    assert a >= c + 5


def test_mod_constraint_from_guide():
    (b,) = sv.symbolic_shape("b", constraints=["b >= mod(b, 3)"])
    assert b >= b % 3


def test_upper_bounds_and_equalities():
    a, b = sv.symbolic_shape("a, b", constraints=["a <= 10", "b == 2*a"])
    assert sv.bounds(a) == (1, 10)
    assert str(b) == "2*a"
    assert sv.bounds(b) == (2, 20)


def test_equality_constraint_rewrites_factor():
    a, b, c = sv.symbolic_shape("a, b, c", constraints=["floordiv(a, b) == c"])
    assert a // b == c
    assert (a // b) * 2 + 1 == 2 * c + 1


def test_non_monomial_equality_becomes_two_inequalities():
    a, b = sv.symbolic_shape("a, b", constraints=["a + b == 10"])
    assert a <= 9 and b <= 9


def test_variables_only_in_constraints_are_allowed():
    (a,) = sv.symbolic_shape("a", constraints=["a <= c", "c <= 12"])
    assert a <= 12


def test_order_of_constraints_does_not_matter():
    cons = ["a >= b + 2", "b >= c + 3", "c >= 4", "d <= a"]
    queries = ["a >= 9", "a >= c + 5", "b >= 7", "d <= a + 1", "a - d >= 0"]
    answers = set()
    for perm in itertools.permutations(cons):
        scope = sv.SymbolicScope(list(perm))
        dims = dict(zip("abcd", sv.symbolic_shape("a, b, c, d", scope=scope), strict=False))
        got = []
        for q in queries:
            try:
                got.append(eval(q, {}, dims))
            except sv.InconclusiveDimensionOperation:
                got.append(None)
        answers.add(tuple(got))
    assert answers == {(True, True, True, True, True)}


@pytest.mark.parametrize(
    "constraints",
    [["a >= a + 1"], ["a <= 0"], ["a >= 10", "a <= 5"], ["a >= b + 1", "b >= a + 1"], ["4 == 5"]],
)
def test_unsatisfiable_constraints_raise_value_error(constraints):
    with pytest.raises(UnsatisfiableConstraintsError, match="cannot all be satisfied") as info:
        (a,) = sv.symbolic_shape("a", constraints=constraints)
        sv.bounds(a)  # at the latest on the first query
    assert isinstance(info.value, ValueError)


def test_constraint_syntax_errors():
    with pytest.raises(SpecSyntaxError, match="expected one of '>=', '<=', '=='"):
        sv.SymbolicScope(["a + 1"])
    with pytest.raises(TypeError, match="sequence of strings"):
        sv.SymbolicScope("a >= 1")  # type: ignore[arg-type]


def test_mixing_scopes_names_both():
    (a1,) = sv.symbolic_shape("a")
    (a2,) = sv.symbolic_shape("a", constraints=["a >= 8"])
    with pytest.raises(ScopeMixError) as info:
        _ = a1 + a2
    msg = str(info.value)
    assert msg.count("created at test_constraints.py") == 2 and "'a >= 8'" in msg
    assert isinstance(info.value, ValueError)


def test_reusing_scopes():
    (a,) = sv.symbolic_shape("a", constraints=["a >= 8"])
    (b,) = sv.symbolic_shape("b", scope=a.scope)
    assert a + b >= 9
    scope = sv.SymbolicScope()
    (c,) = sv.symbolic_shape("c", scope=scope)
    (d,) = sv.symbolic_shape("d", scope=scope)
    assert str(c + d) == "c + d"


def test_scope_and_constraints_together_is_an_error():
    with pytest.raises(ValueError, match="not both"):
        sv.symbolic_shape("a", constraints=["a >= 2"], scope=sv.SymbolicScope())


def test_check_reports_violated_constraint():
    scope = sv.SymbolicScope(["a >= 16", "a <= b"])
    scope.check({"a": 16, "b": 20})
    with pytest.raises(sv.ShapeError, match=r"'a >= 16'.*8 >= 16"):
        scope.check({"a": 8, "b": 20})
    with pytest.raises(sv.ShapeError, match="no value for dimension variable"):
        scope.check({"a": 16})


def test_linear_constraints_are_combined():
    chain = ["a1 >= a2", "a2 >= a3", "a3 >= a4", "a4 >= a5"]
    a1, a5 = sv.symbolic_shape("a1, a5", constraints=chain)
    assert a1 - a5 >= 0
    a, b = sv.symbolic_shape("a, b", constraints=["a + b >= 6", "b >= a"])
    assert b >= 3 and sv.bounds(b) == (3, math.inf)
    assert sv.bounds(a) == (1, math.inf)


def test_max_and_min_in_constraints_are_split_into_cases():
    (a,) = sv.symbolic_shape("a", constraints=["a >= 4", "max(a, 2) >= 6"])
    assert a >= 6 and sv.bounds(a) == (6, math.inf)
    a, b = sv.symbolic_shape("a, b", constraints=["a + b >= 3"])
    assert sv.max_dim(a, b) >= 2
    a, b = sv.symbolic_shape("a, b", constraints=["a + b <= 6"])
    assert sv.bounds(sv.min_dim(a, b) ** 2) == (1, 9)


def test_equality_uses_divisibility_constraints():
    (b,) = sv.symbolic_shape("b", constraints=["mod(b, 4) == 0"])
    assert b == 4 * (b // 4)
    assert hash(b) == hash(4 * (b // 4))
    assert 8 * (b // 4) == 2 * b and b // 4 * 4 + 1 == b + 1


@pytest.mark.parametrize("constraints", [["a <= 0"], ["a - 3 <= -5"], ["a + b <= 1"]])
def test_unsatisfiable_constraints_raise_when_the_scope_is_made(constraints):
    for _ in range(2):  # every time, not only the first
        with pytest.raises(UnsatisfiableConstraintsError, match="cannot all be satisfied"):
            sv.SymbolicScope(constraints)


def test_nonlinear_contradictions_are_found_through_the_products_planes():
    # a*b >= a + b - 1 for a, b >= 1: with a*b <= 1, a + b <= 2
    with pytest.raises(UnsatisfiableConstraintsError):
        sv.SymbolicScope(["a*b <= 1", "a + b >= 3"])


def test_a_contradiction_of_one_nonlinear_constraint_is_found_when_the_scope_is_made():
    # a^2 - 3*a + 3 > 0 for every a, which only the exact quadratic method sees
    for _ in range(2):
        with pytest.raises(UnsatisfiableConstraintsError, match=r"would have to lie in \[0, -1\]"):
            sv.symbolic_shape("a", constraints=["a*a <= 3*a - 3"])


def test_a_contradiction_found_by_a_query_is_raised_by_every_later_query():
    # Two constraints that contradict only together and only through the quadratic: the
    # scope is made, and its first query that looks at the quadratic finds the contradiction.
    constraints = ["a*a <= 3*b - 3", "b <= a"]
    (a, _) = sv.symbolic_shape("a, b", constraints=constraints)
    for _ in range(3):
        with pytest.raises(UnsatisfiableConstraintsError, match="cannot all be satisfied"):
            sv.bounds(a * a - 3 * a + 3)
    for query in (lambda: sv.bounds(a), lambda: a >= 1, lambda: a * 2 >= a):
        with pytest.raises(UnsatisfiableConstraintsError):
            query()


def test_a_variable_range_from_several_constraints_keeps_its_multiples():
    a, _ = sv.symbolic_shape("a, b", constraints=["a + b <= 4", "mod(a, 2) == 0"])
    assert sv.bounds(a) == (2, 2)
    assert a <= 2 and a >= 2
    a, _ = sv.symbolic_shape("a, b", constraints=["a + b <= 9", "mod(a, 3) == 0", "b >= 2"])
    assert sv.bounds(a) == (3, 6)


def test_dimensions_of_different_scopes_differ():
    (a1,) = sv.symbolic_shape("a")
    (a2,) = sv.symbolic_shape("a", constraints=("a >= 8",))
    assert a1 != a2 and not (a1 == a2)
    assert len({a1, a2}) == 2
    (a3,) = sv.symbolic_shape("a", scope=a1.scope)
    assert a1 == a3 and hash(a1) == hash(a3)


def test_an_equality_implied_by_earlier_ones_is_accepted_as_jax_does() -> None:
    """Each equality is rewritten by the ones before it: ``b == a`` after ``a == b`` says
    nothing new (JAX gives ``(b, b)``); it used to make two rules that rewrote each other
    without end, refused when the scope was made."""
    a, b = sv.symbolic_shape("a, b", constraints=("a == b", "b == a"))
    assert (str(a), str(b)) == ("b", "b")
    a, b, c = sv.symbolic_shape("a, b, c", constraints=("a == b", "b == c", "c == a"))
    assert a == b == c
    with pytest.raises(sv.shapes.UnsatisfiableConstraintsError):
        sv.symbolic_shape("a, b", constraints=("a == b + 1", "b == a"))


def test_divisibility_constraints_apply_to_every_quotient_of_a_product():
    # a ViT's patches: [b, 3, h, w] -> [b, h//16, w//16, 3*16*16]; both quotients must go
    b, h, w = sv.symbolic_shape("b, h, w", constraints=["mod(h, 16) == 0", "mod(w, 16) == 0"])
    patches = (h // 16) * (w // 16)  # then multiplied: both quotients in one monomial
    assert b * patches * 768 == 3 * b * h * w
    assert patches * 256 == h * w and hash(patches * 256) == hash(h * w)
    assert patches * 16 == h * (w // 16)
    # and the other way: a reshape's -1 divides the elements by the known dimensions
    assert (3 * b * h * w) // (b * patches) == 768 and (3 * b * h * w) % (b * patches) == 0
    assert (h * w) // (h // 16) == 16 * w
    # a remainder other than 0 leaves its constant, in every factor
    (x, y) = sv.symbolic_shape("x, y", constraints=["mod(x, 4) == 1", "mod(y, 4) == 3"])
    assert (x // 4) * (y // 4) * 16 == (x - 1) * (y - 3)
