"""The engine's documented behaviour: arithmetic, canonical printing, equality, comparisons."""

from __future__ import annotations

import math
import operator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shapevm as sv


@pytest.fixture
def ab() -> tuple[sv.DimExpr, sv.DimExpr]:
    a, b = sv.symbolic_shape("a, b")
    return a, b  # type: ignore[return-value]


def test_constant_results_are_plain_ints(ab):
    a, _b = ab
    assert (a - a) == 0 and type(a - a) is int
    assert type((2 * a + 1) // 2 - a) is int
    assert sv.symbolic_shape("3, 2 + 2") == (3, 4)


@pytest.mark.parametrize(
    ("spec", "printed"),
    [
        ("a + b + 2*a", "3*a + b"),
        ("b*a + a*b", "2*a*b"),
        ("a^2 + 3*a*b - 7", "a^2 + 3*a*b - 7"),
        ("a ** 2", "a^2"),
        ("-a + 4", "-a + 4"),
        ("(a + 4) // 2", "floordiv(a, 2) + 2"),
        ("floordiv(2*a + 5, 2)", "a + 2"),
        ("mod(6*a + 4, 3)", "1"),
        ("a % 3", "mod(a, 3)"),
        ("max(b, a)", "max(a, b)"),
        ("min(a, a + 1)", "a"),
        ("max(a, 0)", "a"),
        ("(a*b + a) // (b + 1)", "a"),
        ("a * b // b", "a"),
    ],
)
def test_canonical_printing(spec, printed):
    (e,) = sv.symbolic_shape(spec)
    assert str(e) == printed


def test_print_parse_round_trip(ab):
    a, b = ab
    for e in [a * b - 3, sv.max_dim(a, b) + a % 3, (a - b) // 4, -a, a**3 - b]:
        assert sv.symbolic_shape(str(e), scope=a.scope)[0] == e


def test_arithmetic_protocol(ab):
    a, b = ab
    assert divmod(a, 3) == (a // 3, a % 3)
    assert 3 + a == a + 3 and 3 - a == -(a - 3) and 2 * a == a * 2
    assert (a + 2).evaluate({"a": 5}) == 7
    assert (a * b % 5).evaluate({"a": 3, "b": 4}) == 2
    assert operator.pos(a) is a
    with pytest.raises(ValueError, match="negative power"):
        _ = a ** (-1)
    with pytest.raises(ZeroDivisionError):
        _ = a // 0
    with pytest.raises(TypeError):
        _ = a + "x"  # type: ignore[operator]


def test_equality_is_total_and_hashable(ab):
    a, b = ab
    assert sv.max_dim(a, b) == sv.max_dim(b, a)
    assert (a // b) * b + a % b == a
    assert (a // 3) * 3 + a % 3 == a
    assert a != b and a != 1 and (a == "a") is False
    assert b in [a, b] and len({a + 1, 1 + a, b}) == 2
    assert hash(sv.max_dim(a, b)) == hash(sv.max_dim(b, a))


@pytest.mark.parametrize(
    "claim",
    [
        "a*b >= a",
        "a*a >= a",
        "a % b <= a",
        "a // b <= a",
        "b >= b % 3",
        "a + 1 > a",
        "2*a + b >= 3",
        "a**2 >= 1",
        "max(a, b) >= b",
        "min(a, b) <= a",
        "a // 4 >= 0",
    ],
)
def test_stronger_than_jax(claim):
    a, b = sv.symbolic_shape("a, b")
    assert eval(claim, {"a": a, "b": b, "max": sv.max_dim, "min": sv.min_dim}) is True


def test_max_identity_bounds(ab):
    a, b = ab
    assert sv.bounds(sv.max_dim(a, b) - a - sv.max_dim(b - a, 0)) == (0, 0)


def test_max_and_min_of_opposite_slopes_are_bounded_at_their_crossing(ab):
    """max(x, y) is at least every mix of x and y; the mix in which a term of opposite signs
    cancels gives the least value where the two cross (the mean alone gave -2 and 4 below,
    and 0 was out of reach for the last, where a % -a's own bound 1 - a is the mix's other
    side). Each is the exact bound over a >= 1, found by the JAX differential test."""
    a, b = ab
    assert sv.bounds(sv.max_dim(-a, 3 * (a - 2))) == (-1, math.inf)  # a = 1: max(-1, -3)
    assert sv.bounds(sv.min_dim(a, 10 - 2 * a)) == (-math.inf, 3)  # a = 3: min(3, 4)
    assert sv.bounds(sv.max_dim(a - 2, b % (-a))) == (0, math.inf)  # a = 1: b % -1 == 0
    assert sv.max_dim(-a, 3 * (a - 2)) >= -1


def test_a_polynomial_in_one_factor_is_bounded_at_its_turning_points(ab):
    """The least and greatest values of a polynomial in one factor over the factor's integers
    are at the ends of its range and beside the roots of its derivative (the cube below was
    (-inf, inf): its expanded terms bounded apart; the JAX differential test found it)."""
    a, _ = ab
    assert sv.bounds(((a - 2) // 2) ** 3) == (-1, math.inf)  # a = 1: (-1 // 2) ** 3
    assert sv.bounds((a - 3) ** 3 - 4 * (a - 3)) == (-3, math.inf)  # a = 4
    assert sv.bounds((a - 7) ** 4 - 10 * (a - 7) ** 2) == (-24, math.inf)  # a = 5, 9
    assert sv.bounds(-((a - 4) ** 3)) == (-math.inf, 27)  # a = 1
    assert ((a - 2) // 2) ** 3 >= -1


def test_a_polynomial_in_one_linear_form_is_bounded_over_the_form_s_range():
    """``(a + b + 1) ** 2`` is a square of ``a + b + 1``, whose range the constraints give;
    its expanded terms bounded apart reached 25 (found by the JAX differential test)."""
    a, b = sv.symbolic_shape("a, b", constraints=["a + b <= 3"])
    assert sv.bounds((a + b + 1) ** 2) == (9, 16)
    assert sv.bounds((a - b) ** 2) == (0, 1)
    assert sv.bounds((2 * a + 3 * b) ** 3 - 5 * (2 * a + 3 * b)) == (100, 472)
    c, d = sv.symbolic_shape("c, d")
    assert sv.bounds((c - d - 1) ** 2 - 3) == (-3, math.inf)
    assert sv.bounds((c + d) ** 2 - 10 * (c + d)) == (-25, math.inf)


def test_the_linear_terms_are_bounded_apart_from_the_others():
    """``a ** 2 + (a + c)`` under ``a + c <= 3``: the linear facts bound ``a + c`` by 3, the
    square is at most 4 (found by the JAX differential test: 8, each term bounded apart)."""
    a, c = sv.symbolic_shape("a, c", constraints=["a + c <= 3"])
    assert sv.bounds(a**2 + a + c) == (3, 7)


@settings(max_examples=150, deadline=None)
@given(
    coeffs=st.lists(st.integers(-40, 40), min_size=3, max_size=6).filter(lambda c: c[-1] != 0),
    shift=st.integers(-12, 12),
    top=st.one_of(st.none(), st.integers(1, 30)),
)
def test_one_factor_bounds_match_brute_force(coeffs, shift, top):
    """Over a bounded range the bounds are the exact extremes; over an unbounded one they hold
    at every value tried and reach the least (or greatest) of them where the polynomial turns
    towards infinity on that side."""
    constraints = [] if top is None else [f"a <= {top}"]
    (a,) = sv.symbolic_shape("a", constraints=constraints)
    t = a + shift
    e = sum(c * t**i for i, c in enumerate(coeffs))
    values = [sum(c * (v + shift) ** i for i, c in enumerate(coeffs)) for v in range(1, 200)]
    values = values[:top] if top is not None else values
    lo, hi = sv.bounds(e)
    assert lo <= min(values) and hi >= max(values)
    if top is not None:
        assert (lo, hi) == (min(values), max(values))
    elif coeffs[-1] > 0:
        assert lo == min(values) and hi == math.inf
    else:
        assert hi == max(values) and lo == -math.inf


def test_soundness_where_jax_is_wrong(ab):
    a, _ = ab
    e = ((a - 5) // 2) ** 2
    assert e >= 0
    with pytest.raises(sv.InconclusiveDimensionOperation):
        _ = e >= 1  # false at a = 5


def test_bounds(ab):
    a, b = ab
    assert sv.bounds(a) == (1, math.inf)
    assert sv.bounds(-a) == (-math.inf, -1)
    assert sv.bounds(a % 5) == (0, 4)
    assert sv.bounds(a - b) == (-math.inf, math.inf)
    assert sv.bounds(7) == (7, 7)
    assert sv.bounds(a // 2) == (0, math.inf)


def test_inconclusive_message_quotes_comparison_and_constraints():
    a, b = sv.symbolic_shape("a, b", constraints=["a >= 2"])
    with pytest.raises(sv.InconclusiveDimensionOperation) as info:
        _ = a >= b
    msg = str(info.value)
    assert "Symbolic dimension comparison 'a >= b' is inconclusive" in msg
    assert "'a >= 2'" in msg
    assert "every dimension variable >= 1" in msg
    assert "max_dim" in msg and "constraint" in msg


def test_int_of_symbolic_dimension_points_to_asarray(ab):
    a, _ = ab
    for conv in (int, operator.index, float):
        with pytest.raises(sv.InconclusiveDimensionOperation, match="asarray"):
            conv(a)


def test_truth_value(ab):
    a, b = ab
    assert bool(a) is True
    with pytest.raises(sv.InconclusiveDimensionOperation, match="truth value"):
        bool(a - b)


def test_is_symbolic_dim(ab):
    a, _ = ab
    assert sv.is_symbolic_dim(a) and not sv.is_symbolic_dim(3)


def test_max_min_dim_on_ints_and_dims(ab):
    a, b = ab
    assert sv.max_dim(3, 5) == 5 and sv.min_dim(3, 5) == 3
    assert sv.max_dim(a, 1) == a and sv.min_dim(a, 1) == 1
    assert str(sv.min_dim(a, b)) == "min(a, b)"
    assert sv.max_dim(a, b).evaluate({"a": 2, "b": 9}) == 9


def test_inconclusive_message_offers_both_constraints():
    (b,) = sv.symbolic_shape("b")
    with pytest.raises(sv.InconclusiveDimensionOperation) as info:
        _ = b < 16
    assert "constraints=['b < 16'] or constraints=['b >= 16']" in str(info.value)


def test_max_is_at_least_min(ab):
    a, b = ab
    assert sv.max_dim(a, b) >= sv.min_dim(a, b)
    assert sv.bounds(sv.max_dim(a, b) - sv.max_dim(a, 2)) == (-1, math.inf)
    assert sv.bounds(b % a - sv.max_dim(a, b)) == (-math.inf, -1)


@pytest.mark.parametrize(
    ("make", "divisor"),
    [
        (lambda a, b: a // (a - 3), "a - 3"),
        (lambda a, b: a // (b - 1), "b - 1"),
        (lambda a, b: a % (b - 1), "b - 1"),
        (lambda a, b: (b - 1) // (b - 1), "b - 1"),
    ],
)
def test_a_divisor_that_may_be_zero_is_refused_at_the_operation(ab, make, divisor):
    a, b = ab
    with pytest.raises(sv.InconclusiveDimensionOperation) as info:
        make(a, b)
    message = str(info.value)
    assert message.startswith(f"Possible division by 0 in division by {divisor} (in ")
    assert f"constraints=['{divisor} >= 1']" in message
    assert f"shapevm.max_dim({divisor}, 1)" in message


def test_a_divisor_proven_non_zero_is_accepted():
    a, b = sv.symbolic_shape("a, b", constraints=["b >= 2", "a >= 4"])
    assert sv.bounds(a // (b - 1)) == (0, math.inf)
    assert sv.bounds(a % (a - 3)) == (0, math.inf)
    (c,) = sv.symbolic_shape("c", constraints=["c >= 3", "c <= 3"])
    with pytest.raises(ZeroDivisionError, match="is 0 for every value"):
        _ = c // (c - 3)


def test_a_divisor_in_a_constraint_is_checked_under_all_constraints():
    a, b = sv.symbolic_shape("a, b", constraints=["floordiv(a, b - 1) >= 2", "b >= 2"])
    assert a // (b - 1) >= 2
    with pytest.raises(sv.InconclusiveDimensionOperation, match="division by b - 1"):
        sv.SymbolicScope(["floordiv(a, b - 1) >= 2"])
