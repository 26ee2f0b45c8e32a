"""Comparisons of dimensions, and what a tracing frontend does where they have no answer.

``x >= y`` (and ``>``, ``<=``, ``<``) is True or False only when it holds, or fails, for every
valuation the scope allows; it is decided on the bounds of ``x`` (of ``x - y`` when ``y`` is
symbolic), and raises `InconclusiveDimensionOperation` otherwise. A tracing frontend turns
such a comparison, or a dimension meeting a float or an array, into something of its own
through `TraceHooks`, installed per thread with `trace_hooks`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NamedTuple

from shapevm.shapes import expr as E


class TraceHooks(NamedTuple):
    """What a tracing frontend does where the engine alone has no answer.

    ``nonint_operand(dim, other, method)`` handles an operand that is neither int nor
    dimension (a float, an array); ``inconclusive_comparison(lhs, op, rhs, error)`` handles a
    comparison that cannot be decided (e.g. by returning a deferred predicate). Installed for
    one thread with `trace_hooks`; without them, Python's TypeError and the error are raised.
    """

    nonint_operand: Callable[[E.DimExpr, Any, str], Any]
    inconclusive_comparison: Callable[[E.DimExpr, str, Any, Exception], Any]


# Per thread (and per asyncio task): two traces in two threads never see each other's hooks.
_HOOKS: ContextVar[TraceHooks | None] = ContextVar("shapevm_trace_hooks", default=None)


@contextmanager
def trace_hooks(hooks: TraceHooks) -> Iterator[None]:
    """Install ``hooks`` in the current thread for the duration of the block."""
    token = _HOOKS.set(hooks)
    try:
        yield
    finally:
        _HOOKS.reset(token)


def nonint_operand(e: E.DimExpr, other: Any, method: str) -> Any:
    hooks = _HOOKS.get()
    if hooks is not None:
        return hooks.nonint_operand(e, other, method)
    return NotImplemented


# When the bounds (lo, hi) of ``x - other`` already decide each comparison.
_GOALS: dict[str, Callable[[Any, Any], bool]] = {
    ">=": lambda lo, hi: lo >= 0 or hi < 0,
    ">": lambda lo, hi: lo > 0 or hi <= 0,
    "<=": lambda lo, hi: hi <= 0 or lo > 0,
    "<": lambda lo, hi: hi < 0 or lo >= 0,
}


_METHODS = {">=": "__ge__", ">": "__gt__", "<=": "__le__", "<": "__lt__"}


def compare(x: E.DimExpr, other: Any, op: str) -> bool:
    """Decide ``x op other`` for every valuation allowed by the scope, or raise."""
    if not isinstance(other, (int, E.DimExpr)):
        try:
            other = operator.index(other)
        except TypeError:
            return nonint_operand(x, other, _METHODS[op])  # type: ignore[no-any-return]
    engine = x._scope._engine
    if engine.unsat is not None:
        raise engine.unsat
    # x op k is decided on the bounds of x itself (shared by every k); else on x - other.
    subject: E.DimSize = x if isinstance(other, int) else E.sub(x, other)  # sub: scopes must match
    offset = other if isinstance(other, int) else 0
    lo: Any
    hi: Any
    if isinstance(subject, int):
        lo = hi = subject
    else:
        key = (subject, op, offset)
        verdict = engine.verdicts.get(key)
        if verdict is not None:
            return verdict
        goal = _GOALS[op]
        lo, hi = engine.bounds(
            subject, goal if not offset else lambda lo, hi: goal(lo - offset, hi - offset)
        )
        lo, hi = lo - offset, hi - offset
    if op == ">=":
        verdict = True if lo >= 0 else False if hi < 0 else None
    elif op == ">":
        verdict = True if lo > 0 else False if hi <= 0 else None
    elif op == "<=":
        verdict = True if hi <= 0 else False if lo > 0 else None
    else:
        verdict = True if hi < 0 else False if lo >= 0 else None
    if verdict is None:
        error = x._scope.inconclusive(x, op, other, subject, lo + offset, hi + offset)
        hooks = _HOOKS.get()
        if hooks is not None:
            return hooks.inconclusive_comparison(x, op, other, error)  # type: ignore[no-any-return]
        raise error
    if not isinstance(subject, int):
        engine.verdicts[(subject, op, offset)] = verdict
    return verdict
