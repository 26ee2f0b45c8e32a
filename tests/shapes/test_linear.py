"""The linear decision procedure: Fourier–Motzkin elimination, checked against brute force."""

from __future__ import annotations

import itertools
import math

from hypothesis import given
from hypothesis import strategies as st

import shapevm as sv
from shapevm.shapes.linear import Row, project

BOX = range(0, 6)  # every unknown of the generated systems lies in 0..5
N_VARS = 3

coeff = st.integers(-3, 3)
rows = st.builds(
    lambda cs, k: Row({i: c for i, c in enumerate(cs) if c}, k),
    st.lists(coeff, min_size=N_VARS, max_size=N_VARS),
    st.integers(-8, 8),
)


def _box() -> list[Row]:
    out = []
    for i in range(N_VARS):
        out += [Row({i: 1}, -BOX[0]), Row({i: -1}, BOX[-1])]
    return out


def _holds(row: Row, point: tuple[int, ...], eq: bool = False) -> bool:
    value = sum(c * point[i] for i, c in row.coeffs.items()) + row.const
    return value == 0 if eq else value >= 0


@given(st.lists(rows, max_size=5), st.lists(rows, max_size=2), st.integers(0, N_VARS - 1))
def test_projection_is_sound(ineqs: list[Row], eqs: list[Row], keep: int) -> None:
    answer = project([*ineqs, *_box()], eqs, keep)
    points = [
        p
        for p in itertools.product(BOX, repeat=N_VARS)
        if all(_holds(r, p) for r in ineqs) and all(_holds(e, p, eq=True) for e in eqs)
    ]
    if answer is None:
        assert not points, f"called infeasible, but {points[0]} satisfies every row"
        return
    lo, hi = answer
    for p in points:
        assert lo <= p[keep] <= hi, f"{p} outside [{lo}, {hi}]"


differences = st.lists(
    st.tuples(st.sampled_from("abc"), st.sampled_from("abc"), st.integers(-3, 3)), max_size=4
)


@given(differences, st.sampled_from(["a", "b", "c", "a - b", "b - c", "a - c"]))
def test_difference_constraints_are_decided_exactly(
    diffs: list[tuple[str, str, int]], q: str
) -> None:
    # x >= y + k with every variable in 1..6: the integer extremes are the rational ones,
    # so the bounds must be exactly what brute force finds.
    texts = [f"{x} >= {y} + {k}" for x, y, k in diffs if x != y] + [f"{v} <= 6" for v in "abc"]
    envs = [
        dict(zip("abc", vals, strict=True))
        for vals in itertools.product(range(1, 7), repeat=3)
        if all(vals["abc".index(x)] >= vals["abc".index(y)] + k for x, y, k in diffs if x != y)
    ]
    try:
        scope = sv.SymbolicScope(texts)
    except sv.shapes.UnsatisfiableConstraintsError:
        assert not envs, f"{texts} called unsatisfiable, but {envs[0]} satisfies them"
        return
    assert envs, f"{texts} accepted, but no valuation satisfies them"
    (e,) = sv.symbolic_shape(q, scope=scope)
    values = [eval(q, {}, env) for env in envs]
    assert sv.bounds(e) == (min(values), max(values)), texts


def test_integer_tightening_is_stronger_than_the_rationals() -> None:
    # 2*x >= 3 over the integers is x >= 2; the rational minimum is 1.5
    assert project([Row({0: 2}, -3)], [], 0) == (2, math.inf)
    # 2*x == 3 has no integer solution
    assert project([], [Row({0: 2}, -3)], 0) is None


def test_growth_past_the_row_limit_answers_no_information() -> None:
    # x0 >= x_i >= 1, and every x_i within 2 of every other: eliminating one x_i combines
    # many rows with many others.
    others = range(1, 7)
    ineqs = [Row({i: 1}, -1) for i in others] + [Row({0: 1, i: -1}, 0) for i in others]
    ineqs += [Row({i: 1, j: -1}, 2) for i in others for j in others if i != j]
    assert project(ineqs, [], 0) == (1, math.inf)
    assert project(ineqs, [], 0, limit=5) == (-math.inf, math.inf)
