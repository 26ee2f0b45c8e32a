"""Symbolic scopes: the constraints under which dimension expressions are compared."""

from __future__ import annotations

import itertools
import math
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from shapevm.shapes import expr as E
from shapevm.shapes.bounds import Engine, all_atoms
from shapevm.shapes.errors import (
    InconclusiveDimensionOperation,
    ShapeError,
    UnsatisfiableConstraintsError,
)
from shapevm.shapes.parser import parse_constraint

_ids = itertools.count(1)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_MAX_REWRITES = 100
_NEGATION = {">=": "<", ">": "<=", "<=": ">", "<": ">="}


def _caller_location() -> str:
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return "<unknown>"
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


class SymbolicScope:
    """A set of constraints shared by the dimension expressions created in it.

    Every dimension variable is an integer >= 1; constraints (``e1 >= e2``, ``e1 <= e2``,
    ``e1 == e2``) restrict them further. Comparisons between expressions of the scope are
    decided for all values that satisfy the constraints. Expressions of different scopes
    must not be mixed.

    >>> import shapevm as sv
    >>> scope = sv.SymbolicScope(["a >= 16", "b >= 8"])
    >>> a, b = sv.symbolic_shape("a, b", scope=scope)
    >>> a + 2 * b >= 32
    True
    >>> sv.bounds(a - b)
    (-inf, inf)
    """

    def __init__(self, constraints: Sequence[str] = ()) -> None:
        if isinstance(constraints, str):
            raise TypeError(
                f"constraints must be a sequence of strings, found the string {constraints!r}; "
                f"write constraints=[{constraints!r}]"
            )
        self.constraints: tuple[str, ...] = tuple(constraints)
        self._id = next(_ids)
        self._created_at = _caller_location()
        self._vars: dict[str, E.DimExpr] = {}
        self._rules: list[tuple[E.Mono, E.Poly]] = []
        # mod(x, y) -> r from the rules: y*floordiv(x, y) is then x - r exactly
        self._remainders: dict[E.Atom, E.Poly] = {}
        self._ineq_exprs: list[E.DimSize] = []
        self._checks: list[tuple[E.DimSize, str, E.DimSize, str]] = []
        self._engine = Engine(self)
        self._parsing = False
        if self.constraints:
            self._parsing = True
            try:
                self._parse_constraints()
            finally:
                self._parsing = False
            self._engine.prepare()  # unsatisfiable constraints raise here, at once
            self._check_divisors()
            self._engine.check_constraints()  # and those that only a nonlinear method sees

    # -- construction ----------------------------------------------------------------------
    def var(self, name: str) -> E.DimSize:
        """The dimension variable ``name`` of this scope (after equality rewrites)."""
        v = self._vars.get(name)
        if v is None:
            v = E.DimExpr(((((E.Atom("var", (name,)), 1),), 1),), self)
            self._vars[name] = v
        if self._rules:
            return E.make(dict(v._terms), self)
        return v

    def _parse_constraints(self) -> None:
        parsed = [(parse_constraint(text, self), text) for text in self.constraints]
        self._checks = [(lhs, op, rhs, text) for (lhs, op, rhs), text in parsed]
        rules: list[tuple[E.Mono, E.Poly]] = []
        rest: list[tuple[tuple[E.DimSize, str, E.DimSize], str]] = []
        for (lhs, op, rhs), text in parsed:
            if op == "==" and rules:  # rewritten by the rules before it, as JAX does
                self._rules = list(rules)
                lhs, rhs = (E.make(E.as_poly(x), self) for x in (lhs, rhs))
                self._rules = []
                if _same(lhs, rhs):  # implied by them (``b == a`` after ``a == b``)
                    continue
            if op == "==" and not _is_monomial(lhs) and _is_monomial(rhs):
                lhs, rhs = rhs, lhs
            if op == "==" and isinstance(lhs, E.DimExpr) and _is_monomial(lhs):
                if _mentions(rhs, lhs):
                    rest.append(((lhs, op, rhs), text))
                    continue
                rules.append((lhs._terms[0][0], E.as_poly(rhs)))
            else:
                rest.append(((lhs, op, rhs), text))
        rules.sort(key=lambda r: E._mono_key(r[0]))
        self._rules = rules
        self._remainders = {
            mono[0][0]: rhs for mono, rhs in rules if len(mono) == 1 and mono[0][0].op == "mod"
        }
        ineqs: list[E.DimSize] = []
        for (lhs, op, rhs), text in rest:
            if rules:
                lhs, op, rhs = parse_constraint(text, self)  # again, now with the rewrite rules
            diff = E.sub(lhs, rhs)
            if op in (">=", "=="):
                ineqs.append(diff)
            if op in ("<=", "=="):
                ineqs.append(E.mul(diff, -1))
            if op == ">":
                ineqs.append(E.sub(diff, 1))
            if op == "<":
                ineqs.append(E.sub(E.mul(diff, -1), 1))
        for mono, rhs_poly in rules:
            if len(mono) == 1 and mono[0][0].op == "var":
                ineqs.append(E.sub(E.make(rhs_poly, self), 1))  # the variable is >= 1
        self._ineq_exprs = sorted(ineqs, key=E._key_of)
        self._engine = Engine(self)  # forget what was learnt without the constraints

    def _check_divisors(self) -> None:
        """Divisions inside the constraints, checked now that all constraints are known."""
        for lhs, _, rhs, _ in self._checks:
            for x in (lhs, rhs):
                for atom in all_atoms(x):
                    if atom.op in ("floordiv", "mod") and isinstance(atom.args[1], E.DimExpr):
                        self.check_divisor(atom.op, atom.args[0], atom.args[1])

    def check_divisor(self, op: str, x: E.DimSize, y: E.DimExpr) -> None:
        """Raise unless the divisor ``y`` of ``op(x, y)`` is non-zero for every allowed value."""
        if self._parsing:
            return  # checked by _check_divisors once every constraint is known
        lo, hi = self.bounds(y)
        if lo > 0 or hi < 0:
            return
        if lo == hi == 0:
            raise ZeroDivisionError(
                f"Division by 0 in {op}({x}, {y}): '{y}' is 0 for every value the "
                f"constraints allow ({self._constraint_text()})"
            )
        lo_s = "-inf" if lo == -math.inf else str(lo)
        hi_s = "inf" if hi == math.inf else str(hi)
        raise InconclusiveDimensionOperation(
            f"Possible division by 0 in division by {y} (in {op}({x}, {y})): as far as can be "
            f"proven, '{y}' lies in [{lo_s}, {hi_s}].\n"
            f"  constraints in force: every dimension variable >= 1; explicit: "
            f"{self._constraint_text()}\n"
            f"  fix: add a constraint that keeps the divisor positive, constraints=['{y} >= 1'], "
            f"or divide by shapevm.max_dim({y}, 1)"
        )

    def _constraint_text(self) -> str:
        return "; ".join(repr(c) for c in self.constraints) or "none"

    def _apply_rules(self, p: E.Poly) -> E.Poly:
        for _ in range(_MAX_REWRITES):
            hit = None
            for mono in p:
                for lhs, rhs in self._rules:
                    rest = E._mono_div(mono, lhs)
                    if rest is not None:
                        hit = (mono, rest, rhs)
                        break
                if hit:
                    break
            if hit is None:
                return p
            mono, rest, rhs = hit
            coeff = p[mono]
            p = E.poly_add(p, {mono: coeff}, -1)
            p = E.poly_add(p, E.poly_mul({rest: coeff}, rhs))
        raise ValueError(
            f"The equality constraints of {self.describe()} rewrite each other without end; "
            "make sure no constraint's right-hand side mentions another's left-hand side "
            "in a cycle."
        )

    # -- queries ---------------------------------------------------------------------------
    def bounds(self, e: E.DimSize) -> tuple[int | float, int | float]:
        lo, hi = self._engine.bounds(e)
        return lo, hi  # type: ignore[return-value]

    def check(self, env: Mapping[str, int]) -> None:
        """Raise :class:`ShapeError` unless ``env`` satisfies every constraint."""
        for lhs, op, rhs, text in self._checks:
            missing = (_free(lhs) | _free(rhs)) - set(env)
            if missing:
                raise ShapeError(
                    f"Cannot check the constraint '{text}': no value for dimension "
                    f"variable(s) {sorted(missing)}, which do not appear in the argument "
                    "shapes. Pass their values explicitly."
                )
            lv, rv = E.evaluate(lhs, env), E.evaluate(rhs, env)
            ok = {
                ">=": lv >= rv,
                "<=": lv <= rv,
                "==": lv == rv,
                ">": lv > rv,
                "<": lv < rv,
            }[op]
            if not ok:
                values = ", ".join(f"{k} = {env[k]}" for k in sorted(env))
                raise ShapeError(
                    f"Input shapes do not satisfy the constraint '{text}': it evaluates to "
                    f"{lv} {op} {rv}, which is false.\n"
                    f"  dimension variables: {values}\n"
                    "  fix: call with shapes that satisfy the constraint, or relax it"
                )

    # -- messages --------------------------------------------------------------------------
    def describe(self) -> str:
        cons = ", ".join(repr(c) for c in self.constraints) if self.constraints else "none"
        return f"scope #{self._id} created at {self._created_at} (constraints: {cons})"

    def inconclusive(
        self, lhs: Any, op: str, rhs: Any, diff: Any, lo: Any, hi: Any
    ) -> InconclusiveDimensionOperation:
        comparison = f"{lhs} {op} {rhs}"
        negation = f"{lhs} {_NEGATION[op]} {rhs}"
        cons = self._constraint_text()
        lo_s = "-inf" if lo == -math.inf else str(lo)
        hi_s = "inf" if hi == math.inf else str(hi)
        return InconclusiveDimensionOperation(
            f"Symbolic dimension comparison '{comparison}' is inconclusive.\n"
            "  It is true for some values of the dimension variables and false for others "
            f"(as far as can be proven, {diff} lies in [{lo_s}, {hi_s}]).\n"
            f"  constraints in force: every dimension variable >= 1; explicit: {cons}\n"
            "  fix: add the constraint that holds for every shape you will use, "
            f"constraints=['{comparison}'] or constraints=['{negation}'], or use "
            "shapevm.max_dim / shapevm.min_dim to keep the choice symbolic until the shapes "
            "are known"
        )

    def unsatisfiable(self, detail: str) -> UnsatisfiableConstraintsError:
        return UnsatisfiableConstraintsError(
            f"The constraints of {self.describe()} cannot all be satisfied: {detail}.\n"
            "  fix: remove or correct the contradicting constraint"
        )

    def __repr__(self) -> str:
        return f"SymbolicScope({list(self.constraints)!r})"


def _same(x: E.DimSize, y: E.DimSize) -> bool:
    return not E.poly_add(E.as_poly(x), E.as_poly(y), -1)


def _is_monomial(x: E.DimSize) -> bool:
    return isinstance(x, E.DimExpr) and len(x._terms) == 1 and x._terms[0][1] == 1


def _mentions(rhs: E.DimSize, lhs: E.DimExpr) -> bool:
    """Whether ``rhs`` contains the monomial ``lhs`` anywhere (no rewrite rule then)."""
    lhs_mono = lhs._terms[0][0]
    for mono in E.as_poly(rhs):
        if E._mono_div(mono, lhs_mono) is not None:
            return True
        for atom, _ in mono:
            if atom.op != "var" and any(_mentions(arg, lhs) for arg in atom.args):
                return True
    return False


def _free(x: E.DimSize) -> frozenset[str]:
    return frozenset() if isinstance(x, int) else x.free_vars()
