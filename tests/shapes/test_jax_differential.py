"""Differential test against ``jax.export``: we are at least as strong as JAX where JAX is right.

The same random expression is built in both engines by the same sequence of operators (JAX's
dimensions come from ``jax.export.symbolic_shape``), under the same constraint strings. Every
JAX answer is first checked by brute force over the valuations of ``a, b, c`` in ``1..N`` that
satisfy the constraints, because JAX is known to be unsound (``((a - 5) // 2) ** 2 >= 1``
answers True although it is false at ``a = 5``). Where JAX is right:

* (i) a comparison ``e >= k`` that JAX decides, shapevm decides the same way;
* (ii) shapevm's bounds are never looser than JAX's.

A brute-force range is only a sample, so before a case counts against shapevm, JAX's answer is
checked again over the wider range ``1..N_WIDE``.

Any case where shapevm is weaker than a correct JAX fails. The gaps found and closed so far
keep their minimal examples (``CLOSED_GAPS``). Where shapevm refuses a division whose divisor
it cannot prove non-zero (as JAX does lazily, inside its decisions), the case is counted and
skipped. Environment: ``SHAPEVM_JAX_DIFF_EXAMPLES`` (examples per property).
"""

from __future__ import annotations

import itertools
import operator
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import shapevm as sv

jax = pytest.importorskip(
    "jax",
    reason="jax is not installed: the differential test against jax.export needs it "
    "(pip install 'shapevm[bench]')",
)
from jax import export as jax_export  # noqa: E402
from jax._src import core as jax_core  # noqa: E402
from jax._src.export import shape_poly as jax_shape_poly  # noqa: E402

VARS = ("a", "b", "c")
N = 6  # brute force over 1..N for each variable
N_WIDE = 14  # re-check JAX's answer over 1..N_WIDE before holding a difference against us
EXAMPLES = int(os.environ.get("SHAPEVM_JAX_DIFF_EXAMPLES", "300"))

# -------------------------------------------------------------------------------------
# Expressions as trees, built in either engine by the same operators.
#   ("var", name) | ("int", k) | (op, x, y) for op in OPS | ("**", x, k)

Tree = tuple[Any, ...]
_BINOPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "//": operator.floordiv,
    "%": operator.mod,
}


def _leaf() -> st.SearchStrategy[Tree]:
    var = st.sampled_from(VARS).map(lambda v: ("var", v))
    const = st.integers(-4, 6).map(lambda k: ("int", k))
    return st.one_of(var, var, const)


def _extend(children: st.SearchStrategy[Tree]) -> st.SearchStrategy[Tree]:
    ops = [*sorted(_BINOPS), "max", "min"]
    return st.one_of(
        st.tuples(st.sampled_from(ops), children, children),
        st.tuples(st.just("**"), children, st.sampled_from([2, 2, 3])),
    )


trees = st.recursive(_leaf(), _extend, max_leaves=6)


def show(t: Tree) -> str:
    kind = t[0]
    if kind == "var":
        return str(t[1])
    if kind == "int":
        return str(t[1])
    if kind == "**":
        return f"({show(t[1])}) ** {t[2]}"
    if kind in ("max", "min"):
        return f"{kind}({show(t[1])}, {show(t[2])})"
    return f"({show(t[1])} {kind} {show(t[2])})"


def build(
    t: Tree, dims: dict[str, Any], max_fn: Callable[..., Any], min_fn: Callable[..., Any]
) -> Any:
    kind = t[0]
    if kind == "var":
        return dims[t[1]]
    if kind == "int":
        return t[1]
    if kind == "**":
        return build(t[1], dims, max_fn, min_fn) ** t[2]
    x = build(t[1], dims, max_fn, min_fn)
    y = build(t[2], dims, max_fn, min_fn)
    if kind == "max":
        return max_fn(x, y)
    if kind == "min":
        return min_fn(x, y)
    return _BINOPS[kind](x, y)


def evaluate(t: Tree, env: dict[str, int]) -> int:
    """Plain Python integer semantics; raises ZeroDivisionError where undefined."""
    kind = t[0]
    if kind == "var":
        return env[t[1]]
    if kind == "int":
        return int(t[1])
    if kind == "**":
        return int(evaluate(t[1], env) ** t[2])
    x, y = evaluate(t[1], env), evaluate(t[2], env)
    if kind == "max":
        return max(x, y)
    if kind == "min":
        return min(x, y)
    return int(_BINOPS[kind](x, y))


# -------------------------------------------------------------------------------------
# Constraints: (text in the grammar both engines accept, predicate on a valuation)

Constraint = tuple[str, Callable[[dict[str, int]], bool]]


def _constraint() -> st.SearchStrategy[Constraint]:
    var = st.sampled_from(VARS)

    def lower(v: str, k: int) -> Constraint:
        return f"{v} >= {k}", lambda env: env[v] >= k

    def upper(v: str, k: int) -> Constraint:
        return f"{v} <= {k}", lambda env: env[v] <= k

    def relative(v: str, op: str, w: str, k: int) -> Constraint:
        cmp = {">=": operator.ge, "<=": operator.le}[op]
        return f"{v} {op} {w} + {k}", lambda env: cmp(env[v], env[w] + k)

    def total(v: str, w: str, op: str, k: int) -> Constraint:
        cmp = {">=": operator.ge, "<=": operator.le}[op]
        return f"{v} + {w} {op} {k}", lambda env: cmp(env[v] + env[w], k)

    def divisible(v: str, k: int) -> Constraint:
        return f"mod({v}, {k}) == 0", lambda env: env[v] % k == 0

    return st.one_of(
        st.builds(lower, var, st.integers(1, 5)),
        st.builds(upper, var, st.integers(2, 6)),
        st.builds(relative, var, st.sampled_from([">=", "<="]), var, st.integers(-2, 2)),
        st.builds(total, var, var, st.sampled_from([">=", "<="]), st.integers(3, 10)),
        st.builds(divisible, var, st.integers(2, 3)),
    )


constraint_lists = st.lists(_constraint(), max_size=2)


def _valuations(constraints: list[Constraint], n: int) -> Iterator[dict[str, int]]:
    for values in itertools.product(range(1, n + 1), repeat=len(VARS)):
        env = dict(zip(VARS, values, strict=True))
        if all(check(env) for _, check in constraints):
            yield env


def _values(t: Tree, constraints: list[Constraint], n: int) -> list[int]:
    out = []
    for env in _valuations(constraints, n):
        try:
            out.append(evaluate(t, env))
        except ZeroDivisionError:
            continue
    return out


# -------------------------------------------------------------------------------------
# The two engines


class _Skip(Exception):
    """The example is outside what both engines can build; it says nothing."""


def _build_jax(t: Tree, texts: list[str]) -> Any:
    try:
        scope = jax_export.SymbolicScope(texts)
        dims = dict(zip(VARS, jax_export.symbolic_shape(", ".join(VARS), scope=scope), strict=True))
        return build(t, dims, jax_core.max_dim, jax_core.min_dim)
    except (ValueError, NotImplementedError, ZeroDivisionError, TypeError, ArithmeticError):
        raise _Skip() from None
    except jax_core.InconclusiveDimensionOperation:
        raise _Skip() from None


def _build_ours(t: Tree, texts: list[str]) -> Any:
    scope = sv.SymbolicScope(texts)
    dims = dict(zip(VARS, sv.symbolic_shape(", ".join(VARS), scope=scope), strict=True))
    try:
        return build(t, dims, sv.max_dim, sv.min_dim)
    except ZeroDivisionError:
        raise _Skip() from None
    except sv.InconclusiveDimensionOperation as exc:
        assert "Possible division by 0" in str(exc), exc
        FINDINGS.refused_divisions += 1
        raise _Skip() from None


# JAX sometimes fails inside its decision procedure instead of answering, e.g. with
# "OverflowError: cannot convert float infinity to integer" for
# ((b ** 2) % (5 % b)) ** 2 >= 4 under ["c <= 6", "c <= a + -2"], or with a failing
# internal assert for (a // 3) * (a // -4) + 3 >= 4; that is no answer.
_JAX_FAILURES = (
    ValueError,
    OverflowError,
    ArithmeticError,
    AssertionError,
    jax_core.InconclusiveDimensionOperation,  # "Possible division by 0" inside bounds
)


def _jax_bounds(e: Any) -> tuple[float, float] | None:
    if isinstance(e, int):
        return e, e
    try:
        lo, hi = jax_shape_poly._bounds_decision(e, jax_shape_poly.BoundsPrecision.BEST)
    except _JAX_FAILURES:
        return None
    return lo, hi


def _jax_geq(e: Any, k: int) -> bool | None:
    try:
        return bool(e >= k)
    except _JAX_FAILURES:
        return None


def _our_geq(e: Any, k: int) -> bool | None:
    try:
        return bool(e >= k)
    except sv.InconclusiveDimensionOperation:
        return None


# -------------------------------------------------------------------------------------
# Gaps found and closed: each minimal example compares shapevm's bounds with JAX's.


def _both(spec: str, constraints: list[str], fn: Callable[..., Any]) -> tuple[Any, Any]:
    """``fn(*dims, max_fn, min_fn)`` built in shapevm and in JAX."""
    ours = fn(*sv.symbolic_shape(spec, constraints=constraints), sv.max_dim, sv.min_dim)
    theirs = fn(
        *jax_export.symbolic_shape(spec, constraints=constraints),
        jax_core.max_dim,
        jax_core.min_dim,
    )
    return ours, theirs


def _same_bounds(spec: str, constraints: list[str], fn: Callable[..., Any]) -> None:
    """Our bounds are at least as tight as JAX's (all examples here have correct JAX bounds)."""
    ours, theirs = _both(spec, constraints, fn)
    (lo, hi), (jlo, jhi) = sv.bounds(ours), _jax_bounds(theirs)
    assert lo >= jlo and hi <= jhi, f"{ours} under {constraints}: {(lo, hi)} vs JAX {(jlo, jhi)}"


def _gap_max_min() -> None:
    _same_bounds("a, b", [], lambda a, b, mx, mn: mn(a, b))
    _same_bounds("b, c", ["b <= 3", "c <= 3"], lambda b, c, mx, mn: mx(b, c))
    _same_bounds("b", [], lambda b, mx, mn: mx(-4, 3 - b))
    _same_bounds("a, b", [], lambda a, b, mx, mn: mx(a, b) - mn(a, b))


def _gap_negative_divisor() -> None:
    _same_bounds("a", [], lambda a, mx, mn: a // -2)
    _same_bounds("b", [], lambda b, mx, mn: (b // -3) ** 2)


def _gap_divisor_times_quotient() -> None:
    _same_bounds("b", [], lambda b, mx, mn: b * (1 // b))
    _same_bounds("a, b", [], lambda a, b, mx, mn: a * (b // a) - b)


def _gap_linear_combination() -> None:
    _same_bounds("a, b", ["a + b >= 6", "b >= a"], lambda a, b, mx, mn: b)
    _same_bounds("a, b", ["a + b >= 6", "a >= b + 1"], lambda a, b, mx, mn: a)
    chain = ["a1 >= a2", "a2 >= a3", "a3 >= a4", "a4 >= a5"]
    _same_bounds("a1, a5", chain, lambda a1, a5, mx, mn: a1 - a5)


def _gap_divisibility() -> None:
    _same_bounds("a", ["mod(a, 2) == 0"], lambda a, mx, mn: a // 2)
    _same_bounds("a", ["a <= 7", "mod(a, 3) == 0"], lambda a, mx, mn: a)
    _same_bounds("b", ["mod(b, 4) == 0"], lambda b, mx, mn: b - 4 * (b // 4))
    # a variable's range from several constraints is rounded to its multiples: [2, 2]
    _same_bounds("a, b", ["a + b <= 4", "mod(a, 2) == 0"], lambda a, b, mx, mn: a)


def _gap_max_min_constraints() -> None:
    _same_bounds("a, b", ["a + b >= 3"], lambda a, b, mx, mn: mx(a, b))
    _same_bounds("a, b", ["b + a <= 6"], lambda a, b, mx, mn: mn(a, b) ** 2)
    _same_bounds("a", ["a >= 4", "max(a, 2) >= 6"], lambda a, mx, mn: a)


def _gap_chained_substitution() -> None:
    _same_bounds("a, b", [], lambda a, b, mx, mn: b % a - mx(a, b))


def _gap_max_difference() -> None:
    _same_bounds("a, b", [], lambda a, b, mx, mn: mx(a, b) - mx(a, 2))


def _gap_one_factor_polynomial() -> None:
    _same_bounds("a", [], lambda a, mx, mn: ((a - 2) // 2) ** 3)


def _gap_linear_form_polynomial() -> None:
    _same_bounds("a, b", ["a + b <= 3"], lambda a, b, mx, mn: (a - (-1 - b)) ** 2)


def _gap_linear_part() -> None:
    _same_bounds("a, c", ["a + c <= 3"], lambda a, c, mx, mn: a**2 + (a + c))


CLOSED_GAPS = {
    "max-min-ranges": _gap_max_min,
    "negative-divisor": _gap_negative_divisor,
    "divisor-times-quotient": _gap_divisor_times_quotient,
    "divisibility": _gap_divisibility,
    "linear-combination": _gap_linear_combination,
    "max-min-constraints": _gap_max_min_constraints,
    "chained-substitution": _gap_chained_substitution,
    "max-difference": _gap_max_difference,
    "one-factor-polynomial": _gap_one_factor_polynomial,
    "linear-form-polynomial": _gap_linear_form_polynomial,
    "linear-part": _gap_linear_part,
}


@pytest.mark.parametrize("key", sorted(CLOSED_GAPS))
def test_closed_gap_examples(key: str) -> None:
    CLOSED_GAPS[key]()


# -------------------------------------------------------------------------------------
# Findings are collected and printed at the end of the module.


class Findings:
    def __init__(self) -> None:
        self.comparisons = 0
        self.jax_decided = 0
        self.bounds = 0
        self.jax_unsound: list[str] = []
        self.refused_divisions = 0

    def lines(self) -> list[str]:
        out = [
            f"jax differential: {self.comparisons} comparisons ({self.jax_decided} decided "
            f"by JAX), {self.bounds} bounds; {len(self.jax_unsound)} unsound JAX answers; "
            f"{self.refused_divisions} divisions refused as possibly by 0"
        ]
        out += [f"  unsound JAX: {s}" for s in self.jax_unsound[:5]]
        return out


FINDINGS = Findings()


@pytest.fixture(scope="module", autouse=True)
def _summary(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    capture = request.config.pluginmanager.getplugin("capturemanager")
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    if capture is None or reporter is None:
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line("")
        for line in FINDINGS.lines():
            reporter.write_line(line)


def _setup(t: Tree, constraints: list[Constraint]) -> tuple[Any, Any, list[int]]:
    texts = [c[0] for c in constraints]
    values = _values(t, constraints, N)
    assume(values)  # no valuation where the expression is defined: nothing to compare
    try:
        jax_e = _build_jax(t, texts)
        our_e = _build_ours(t, texts)
    except _Skip:
        assume(False)
    return jax_e, our_e, values


def _describe(t: Tree, constraints: list[Constraint]) -> str:
    return f"{show(t)} under {[c[0] for c in constraints]}"


def _weaker(t: Tree, constraints: list[Constraint], detail: str) -> None:
    pytest.fail(f"shapevm is weaker than a correct JAX: {_describe(t, constraints)}: {detail}")


def _jax_right_widely(t: Tree, constraints: list[Constraint], ok: Callable[[int], bool]) -> bool:
    """Whether JAX's answer also holds over the wider range; if not, record it as unsound."""
    if all(ok(v) for v in _values(t, constraints, N_WIDE)):
        return True
    FINDINGS.jax_unsound.append(_describe(t, constraints) + " (beyond the small range)")
    return False


@settings(max_examples=EXAMPLES)
@given(trees, constraint_lists, st.integers(-3, 4))
def test_decides_what_jax_decides_correctly(t: Tree, constraints: list[Constraint], k: int) -> None:
    jax_e, our_e, values = _setup(t, constraints)
    FINDINGS.comparisons += 1
    jax_verdict = _jax_geq(jax_e, k)
    if jax_verdict is None:
        return
    FINDINGS.jax_decided += 1

    def jax_right(v: int) -> bool:
        return (v >= k) == jax_verdict

    if not all(jax_right(v) for v in values):
        FINDINGS.jax_unsound.append(f"{_describe(t, constraints)}: >= {k} is {jax_verdict}")
        return
    our_verdict = _our_geq(our_e, k)
    assert our_verdict in (None, jax_verdict), (
        f"{show(t)} >= {k} = {our_e}: shapevm says {our_verdict}, brute force {not our_verdict}"
    )
    if our_verdict is None and _jax_right_widely(t, constraints, jax_right):
        _weaker(t, constraints, f"JAX decides '{jax_e} >= {k}' as {jax_verdict}")


@settings(max_examples=EXAMPLES)
@given(trees, constraint_lists)
def test_bounds_never_looser_than_correct_jax(t: Tree, constraints: list[Constraint]) -> None:
    jax_e, our_e, values = _setup(t, constraints)
    FINDINGS.bounds += 1
    our_lo, our_hi = sv.bounds(our_e)
    assert all(our_lo <= v <= our_hi for v in values), (
        f"{show(t)} = {our_e}: shapevm bounds [{our_lo}, {our_hi}] miss a value in "
        f"[{min(values)}, {max(values)}]"
    )
    jax_bounds = _jax_bounds(jax_e)
    if jax_bounds is None:
        return
    jax_lo, jax_hi = jax_bounds

    def jax_right(v: int) -> bool:
        return jax_lo <= v <= jax_hi

    if not all(jax_right(v) for v in values):
        FINDINGS.jax_unsound.append(f"bounds({jax_e}) = [{jax_lo}, {jax_hi}] for {show(t)}")
        return
    if our_lo >= jax_lo and our_hi <= jax_hi:
        return
    if _jax_right_widely(t, constraints, jax_right):
        detail = f"JAX [{jax_lo}, {jax_hi}], shapevm [{our_lo}, {our_hi}] for {our_e}"
        _weaker(t, constraints, detail)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, mx, mn: ((a - 5) // 2) ** 2,  # JAX: >= 1, but 0 at a = 5
        lambda a, mx, mn: mn(a - 2, 5) ** 2,  # JAX: >= 1, but 0 at a = 2 (found here)
    ],
    ids=["floordiv-squared", "min-squared"],
)
def test_known_unsound_jax_answers_are_not_repeated(fn: Callable[..., Any]) -> None:
    # Why every JAX answer is checked by brute force before it is compared with ours.
    ours, theirs = _both("a", [], fn)
    assert theirs >= 1
    with pytest.raises(sv.InconclusiveDimensionOperation):
        _ = ours >= 1
