"""Property tests: every decided answer and every bound holds on every valuation.

Expressions and constraints are generated at random; each is checked against brute-force
evaluation over all valuations of the variables in 1..N that satisfy the constraints. A
scope called unsatisfiable must have no such valuation, and an expression whose divisions
the engine accepted must be defined at every one of them.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

import shapevm as sv
from shapevm.shapes.expr import DimSize

VARS = ("a", "b", "c")
N = 7  # brute force over 1..N for each variable

# A generated expression: (text, builder, evaluator)
#   builder(dims) -> DimSize built with the engine's operators
#   evaluator(env) -> int with plain Python integer semantics

Gen = tuple[str, Callable[[dict[str, Any]], DimSize], Callable[[dict[str, int]], int]]


def _leaf() -> st.SearchStrategy[Gen]:
    const = st.integers(-6, 6).map(lambda k: (str(k), lambda d, k=k: k, lambda env, k=k: k))
    var = st.sampled_from(VARS).map(lambda v: (v, lambda d, v=v: d[v], lambda env, v=v: env[v]))
    return st.one_of(var, var, const)


def _combine(children: st.SearchStrategy[Gen]) -> st.SearchStrategy[Gen]:
    binops = {
        "+": operator.add,
        "-": operator.sub,
        "*": operator.mul,
        "//": operator.floordiv,
        "%": operator.mod,
    }

    def binop(op: str, x: Gen, y: Gen) -> Gen:
        fn = binops[op]
        return (
            f"({x[0]} {op} {y[0]})",
            lambda d: fn(x[1](d), y[1](d)),
            lambda env: fn(x[2](env), y[2](env)),
        )

    def maxmin(which: str, x: Gen, y: Gen) -> Gen:
        dim_fn = sv.max_dim if which == "max" else sv.min_dim
        py_fn = max if which == "max" else min
        return (
            f"{which}({x[0]}, {y[0]})",
            lambda d: dim_fn(x[1](d), y[1](d)),
            lambda env: py_fn(x[2](env), y[2](env)),
        )

    def square(x: Gen) -> Gen:
        return (f"({x[0]})^2", lambda d: x[1](d) ** 2, lambda env: x[2](env) ** 2)

    return st.one_of(
        st.builds(binop, st.sampled_from(sorted(binops)), children, children),
        st.builds(maxmin, st.sampled_from(["max", "min"]), children, children),
        st.builds(square, children),
    )


exprs = st.recursive(_leaf(), _combine, max_leaves=6)
constraint_ops = st.sampled_from([">=", "<=", "=="])


def _constraint() -> st.SearchStrategy[tuple[str, Callable[[dict[str, int]], bool]]]:
    simple = st.recursive(_leaf(), _combine, max_leaves=3)

    def make(op: str, x: Gen, y: Gen) -> tuple[str, Callable[[dict[str, int]], bool]]:
        cmp = {">=": operator.ge, "<=": operator.le, "==": operator.eq}[op]
        return f"{x[0]} {op} {y[0]}", lambda env: cmp(x[2](env), y[2](env))

    return st.builds(make, constraint_ops, simple, simple)


def _valuations(checks: list[Callable[[dict[str, int]], bool]]) -> list[dict[str, int]]:
    out = []
    for values in itertools.product(range(1, N + 1), repeat=len(VARS)):
        env = dict(zip(VARS, values, strict=False))
        try:
            if all(c(env) for c in checks):
                out.append(env)
        except ZeroDivisionError:
            pass
    return out


def _value(ev: Callable[[dict[str, int]], int], env: dict[str, int]) -> int | None:
    try:
        return ev(env)
    except ZeroDivisionError:
        return None


class _Unsat(Exception):
    pass


def _refused_division(exc: Exception) -> bool:
    return isinstance(exc, ZeroDivisionError) or "Possible division by 0" in str(exc)


def _build(gen: Gen, scope: sv.SymbolicScope) -> DimSize | None:
    """The expression, or None where the engine refuses a division (maybe by zero)."""
    dims = dict(zip(VARS, sv.symbolic_shape(", ".join(VARS), scope=scope), strict=False))
    try:
        return gen[1](dims)
    except (ZeroDivisionError, sv.InconclusiveDimensionOperation) as exc:
        if _refused_division(exc):
            return None
        raise
    except sv.shapes.UnsatisfiableConstraintsError:
        raise _Unsat() from None


def _scope(constraints: list[Any]) -> sv.SymbolicScope | None:
    """The scope of the constraints; None where it is refused, which must be right."""
    try:
        return sv.SymbolicScope([c[0] for c in constraints])
    except sv.shapes.UnsatisfiableConstraintsError:
        satisfied = _valuations([c[1] for c in constraints])
        assert not satisfied, f"{[c[0] for c in constraints]} called unsatisfiable: {satisfied[0]}"
    except (ZeroDivisionError, sv.InconclusiveDimensionOperation) as exc:
        assert _refused_division(exc), exc
    return None


@given(exprs, st.lists(_constraint(), max_size=2))
def test_bounds_are_sound(gen: Gen, constraints: list[Any]) -> None:
    scope = _scope(constraints)
    if scope is None:
        return
    envs = _valuations([c[1] for c in constraints])
    try:
        e = _build(gen, scope)
        assume(e is not None)
        lo, hi = sv.bounds(e)
    except (sv.shapes.UnsatisfiableConstraintsError, _Unsat):
        assert not envs, f"constraints {[c[0] for c in constraints]} called unsatisfiable"
        return
    for env in envs:
        v = _value(gen[2], env)
        # Every division the engine accepted has a divisor that is never 0 (it refuses the
        # others, as possibly by 0): the value is defined wherever the constraints hold.
        assert v is not None, f"{gen[0]} = {e} divides by zero at {env}"
        assert lo <= v <= hi, f"{gen[0]} = {e}: value {v} at {env} outside [{lo}, {hi}]"


@given(exprs, st.lists(_constraint(), max_size=2), st.sampled_from([">=", ">", "<=", "<"]))
def test_decided_comparisons_hold(gen: Gen, constraints: list[Any], op: str) -> None:
    scope = _scope(constraints)
    if scope is None:
        return
    envs = _valuations([c[1] for c in constraints])
    cmp = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}[op]
    try:
        e = _build(gen, scope)
        assume(e is not None and sv.is_symbolic_dim(e))
        verdict = cmp(e, 0)
    except sv.InconclusiveDimensionOperation:
        return
    except (sv.shapes.UnsatisfiableConstraintsError, _Unsat):
        assert not envs
        return
    for env in envs:
        v = _value(gen[2], env)
        if v is not None:
            assert cmp(v, 0) == verdict, f"{e} {op} 0 decided {verdict}, but {v} at {env}"


@given(exprs)
def test_canonical_form_preserves_value(gen: Gen) -> None:
    scope = sv.SymbolicScope()
    e = _build(gen, scope)
    assume(e is not None)
    for env in _valuations([]):
        expected = _value(gen[2], env)
        if expected is None:
            continue
        got = e if isinstance(e, int) else e.evaluate(env)
        assert got == expected, f"{gen[0]} -> {e}: {got} != {expected} at {env}"


@given(exprs)
def test_print_parse_round_trip(gen: Gen) -> None:
    scope = sv.SymbolicScope()
    e = _build(gen, scope)
    assume(e is not None)
    (back,) = sv.symbolic_shape(str(e), scope=scope)
    assert back == e
    assert hash(back) == hash(e)


def test_brute_force_range_is_meaningful() -> None:
    # The property tests above are only as good as the valuations they see.
    assert len(_valuations([])) == N ** len(VARS)
    assert math.isfinite(N)
