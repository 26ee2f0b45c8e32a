"""Sound lower and upper bounds of dimension expressions under a scope's constraints.

Every bound returned here holds for *every* valuation of the dimension variables that
satisfies the scope's constraints (each variable >= 1). Several independent methods each
give a sound interval; the answer is their intersection:

1. interval arithmetic over the factors' ranges (with exact rules for even powers);
2. shifting each factor to its lower bound (``a = 1 + y``, ``y >= 0``) and expanding, which
   proves facts such as ``a*b >= a`` and ``a*a >= a`` that term-wise intervals miss;
3. the exact extremes of a polynomial in one factor, at its ends and its turning points;
4. substituting a factor that occurs linearly by one of its symbolic bounds, e.g.
   ``mod(a, b) <= a``, ``floordiv(a, 3) >= (a - 2)/3``, ``relu(z) >= z``;
5. the linear facts of the query and of the constraints, eliminated exactly
   (`shapevm.shapes.facts`, `shapevm.shapes.linear`), with max/min split into their cases.

``max``/``min`` are rewritten with ``relu(z) = max(z, 0)`` at a canonical sign of ``z``
(``max(x, y) = x + relu(y - x)``) for methods 1-4, so that equal combinations cancel, e.g.
``max(a, b) - a - max(b - a, 0)`` becomes ``0``; method 5 keeps them as factors. The range
of each factor is its own interval narrowed by method 5 when constraints bear on it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from shapevm.shapes.expr import (
    Atom,
    DimExpr,
    DimSize,
    Mono,
    _mono_div,
    _poly_str,
    mono_mul,
    poly_add,
    poly_mul,
)
from shapevm.shapes.facts import Facts, System, atom_facts

if TYPE_CHECKING:
    from shapevm.shapes.errors import UnsatisfiableConstraintsError
    from shapevm.shapes.scope import SymbolicScope

Num = int | Fraction | float
Goal = Callable[[Num, Num], bool]
Interval = tuple[Num, Num]
QPoly = dict[Mono, Any]
INF = math.inf
_SHIFT_LIMIT = 400  # expanded terms; beyond this the shift method is skipped
_SUBST_DEPTH = 1
_ONE_FACTOR_DEGREE = 12  # the highest power the one-factor method expands
_SOLVES = 200  # eliminations (method 5) one outermost query may run, nested ones included


def _mul(a: Num, b: Num) -> Num:
    if a == 0 or b == 0:
        return 0
    return a * b


def _imul(x: Interval, y: Interval) -> Interval:
    products = [_mul(a, b) for a in x for b in y]
    return min(products), max(products)


def _ipow(x: Interval, e: int) -> Interval:
    lo, hi = x
    if e == 1:
        return x
    if e % 2 or lo >= 0:
        return lo**e, hi**e
    if hi <= 0:
        return hi**e, lo**e
    return 0, max(lo**e, hi**e)


def _scale(c: Num, x: Interval) -> Interval:
    if c >= 0:
        return _mul(c, x[0]), _mul(c, x[1])
    return _mul(c, x[1]), _mul(c, x[0])


class Engine:
    """Bounds of expressions of one scope, with its caches."""

    def __init__(self, scope: SymbolicScope) -> None:
        self.scope = scope
        self.prepared = False
        self.ineqs: list[QPoly] = []  # the constraints G >= 0, max/min kept as factors
        self.mentions: list[tuple[QPoly, frozenset[Atom]]] = []  # with all their factors
        self.mentioned: frozenset[Atom] = frozenset()  # every factor of every constraint
        self.var_bounds: dict[Atom, Interval] = {}  # from constraints on one variable
        self.cache: dict[DimExpr, tuple[Num, Num]] = {}
        self.range_cache: dict[Atom, Interval] = {}
        self.local_cache: dict[Atom, Interval] = {}
        self.lin_cache: dict[DimExpr, QPoly] = {}
        self.kept_cache: dict[DimExpr, QPoly] = {}
        self.sym_cache: dict[Atom, tuple[list[QPoly], list[QPoly]]] = {}
        self.fact_cache: dict[Atom, Facts] = {}
        self.active: set[DimExpr] = set()
        self.refining: set[Atom] = set()
        self.multiple_of: dict[Atom, int] = {}
        self.verdicts: dict[tuple[DimExpr, str, int], bool] = {}
        self.fallbacks = 0
        # Results that depended on a re-entered query's weaker answer: reused until the
        # outermost query returns (each is computed once per query), then forgotten.
        self.scratch: dict[tuple[str, Any], Any] = {}
        self.depth = 0
        self.budget = _SOLVES  # eliminations left to the outermost query
        self.unsat: UnsatisfiableConstraintsError | None = None

    # -- public ----------------------------------------------------------------------------
    def bounds(self, e: DimSize, goal: Goal | None = None) -> tuple[Num, Num]:
        """Sound bounds of ``e``; with ``goal``, stop as soon as ``goal(lo, hi)`` holds."""
        if self.unsat is not None:
            raise self.unsat
        if isinstance(e, int):
            return e, e
        cached = self.cache.get(e) or self.scratch.get(("bounds", e))
        if cached is not None:
            return cached
        if not self.prepared:
            self.prepare()
        p = self.lin(e)
        if e in self.active:
            # Re-entered (a constraint mentions a factor of e whose range needs e): answer
            # with intervals alone, and keep nothing that depended on this weaker answer.
            self.fallbacks += 1
            return self.interval(p, self.atom_range)
        fallbacks = self.fallbacks
        self.active.add(e)
        self.enter()
        try:
            lo, hi = self.search(e, p, goal)
        finally:
            self.active.discard(e)
            self.leave()
        lo = lo if lo == -INF else math.ceil(lo)
        hi = hi if hi == INF else math.floor(hi)
        if lo > hi:
            raise self.contradiction(f"'{e}' would have to lie in [{lo}, {hi}]")
        if goal is None or not goal(lo, hi):  # complete, not stopped early
            self.keep(self.cache, "bounds", e, (lo, hi), fallbacks)
        return lo, hi

    def enter(self) -> None:
        """A query starts; the outermost one gets the budget of eliminations."""
        if not self.depth:
            self.budget = _SOLVES
        self.depth += 1

    def leave(self) -> None:
        self.depth -= 1
        if not self.depth:
            self.scratch.clear()

    def keep(self, cache: dict[Any, Any], kind: str, key: Any, value: Any, fallbacks: int) -> None:
        """Cache ``value``; only until the outermost query returns if it depended on a
        re-entered query (``self.fallbacks`` moved since ``fallbacks``)."""
        if fallbacks == self.fallbacks:
            cache[key] = value
        elif self.depth:
            self.scratch[(kind, key)] = value

    def contradiction(self, detail: str) -> UnsatisfiableConstraintsError:
        """The scope's constraints are unsatisfiable: so says every later query too."""
        if self.unsat is None:
            self.unsat = self.scope.unsatisfiable(detail)
        return self.unsat

    def search(self, e: DimExpr, p: QPoly, goal: Goal | None) -> Interval:
        lo, hi = self.poly_bounds(p, _SUBST_DEPTH, goal)
        if goal is not None and goal(lo, hi):
            return lo, hi
        ll, lh = self.of_linear_form(p)
        lo, hi = max(lo, ll), min(hi, lh)
        pl, ph = self.in_parts(p)
        lo, hi = max(lo, pl), min(hi, ph)
        if goal is not None and goal(lo, hi):
            return lo, hi
        kept = self.lin(e, keep=True)
        if kept is not p and kept != p:  # max/min as factors of their own, with their ranges
            kl, kh = self.poly_bounds(kept, _SUBST_DEPTH)
            lo, hi = max(lo, kl), min(hi, kh)
            if goal is not None and goal(lo, hi):
                return lo, hi
        if self.worth_solving(kept):
            ll, lh = self.linear(kept)
            lo, hi = max(lo, ll), min(hi, lh)
        return lo, hi

    def worth_solving(self, p: QPoly) -> bool:
        """Whether the linear facts can say more than the factors' ranges (method 5)."""
        monos = [m for m in p if m]
        if self.constrained(a for m in monos for a, _ in m):
            return len(monos) > 1 or (len(monos) == 1 and (len(monos[0]) > 1 or monos[0][0][1] > 1))
        return len(monos) > 1 and any(a.op != "var" for m in monos for a, _ in m)

    def constrained(self, atoms: Iterable[Atom]) -> bool:
        """Whether a constraint mentions one of ``atoms`` or a factor inside them."""
        if not self.mentioned:
            return False
        for atom in atoms:
            if atom in self.mentioned:
                return True
            if atom.op != "var" and any(
                a in self.mentioned for arg in atom.args for a in all_atoms(arg)
            ):
                return True
        return False

    def spend(self) -> bool:
        """Whether the outermost query may run one more elimination. Past its budget, the
        answers are weaker (never wrong) and kept only until that query returns."""
        if self.budget <= 0:
            self.fallbacks += 1
            return False
        self.budget -= 1
        return True

    def linear(self, p: QPoly) -> Interval:
        """Bounds of ``p`` from its linear facts and the constraints bearing on them."""
        if not self.spend():
            return -INF, INF
        system = System(self)
        system.include(p)
        system.add_constraints(self.mentions)
        answer = system.solve(p, {a for m in p for a, _ in m})
        if answer is None:
            raise self.contradiction(
                f"no value satisfies them where '{_poly_str(p.items())}' is defined"
            )
        return answer

    def facts_of(self, atom: Atom) -> Facts:
        facts = self.fact_cache.get(atom) or self.scratch.get(("facts", atom))
        if facts is None:
            fallbacks = self.fallbacks
            facts = atom_facts(self, atom)
            self.keep(self.fact_cache, "facts", atom, facts, fallbacks)
        return facts

    # -- decision form ---------------------------------------------------------------------
    def lin(self, x: DimSize, keep: bool = False) -> QPoly:
        """``x`` as a polynomial over variables, floordiv, mod and relu factors.

        With ``keep``, max and min stay factors (with their own ranges) instead.
        """
        if isinstance(x, int):
            return {(): x} if x else {}
        cache = self.kept_cache if keep else self.lin_cache
        cached = cache.get(x)
        if cached is not None:
            return cached
        if not any(a.op in ("max", "min") for m, _ in x._terms for a, _ in m):
            out: QPoly = dict(x._terms)  # every factor is its own (never mutated)
            self.lin_cache[x] = self.kept_cache[x] = out
            return out
        out = {}
        for mono, coeff in x._terms:
            term: QPoly = {(): coeff}
            for atom, exp in mono:
                factor = self.lin_atom(atom, keep)
                for _ in range(exp):
                    term = poly_mul(term, factor)
            out = poly_add(out, term)
        cache[x] = out
        return out

    def lin_atom(self, atom: Atom, keep: bool = False) -> QPoly:
        if atom.op in ("var", "floordiv", "mod", "relu") or keep:
            return {((atom, 1),): 1}
        x, y = atom.args
        if atom.op == "max":  # max(x, y) = x + relu(y - x)
            return poly_add(self.lin(x), self.relu(y - x))
        return poly_add(self.lin(x), self.relu(x - y), -1)

    def relu(self, z: DimSize) -> QPoly:
        if isinstance(z, int):
            return {(): max(z, 0)} if z > 0 else {}
        if z._terms[0][1] > 0:
            return {((Atom("relu", (z,)), 1),): 1}
        neg = -z  # relu(z) = z + relu(-z)
        return poly_add(self.lin(z), {((Atom("relu", (neg,)), 1),): 1})

    # -- factor ranges -----------------------------------------------------------------------
    def atom_range(self, atom: Atom) -> Interval:
        """The factor's own range, narrowed by the constraints that bear on it."""
        cached = self.range_cache.get(atom) or self.scratch.get(("range", atom))
        if cached is not None:
            return cached
        fallbacks = self.fallbacks
        self.enter()
        try:
            lo, hi = self.refined_range(atom)
        finally:
            self.leave()
        if lo > hi:
            raise self.contradiction(f"'{atom}' would have to lie in [{lo}, {hi}]")
        self.keep(self.range_cache, "range", atom, (lo, hi), fallbacks)
        return lo, hi

    def refined_range(self, atom: Atom) -> Interval:
        """The local range, narrowed by eliminating the linear facts (method 5)."""
        lo, hi = self.local_range(atom)
        if atom not in self.refining and self.constrained((atom,)) and self.spend():
            self.refining.add(atom)
            try:
                system = System(self)
                me: QPoly = {((atom, 1),): 1}
                system.include(me)
                system.add_constraints(self.mentions)
                if system.constraints:
                    answer = system.solve(me, {atom})
                    if answer is None:
                        raise self.contradiction(
                            "no values of the dimension variables (each >= 1) satisfy them together"
                        )
                    lo, hi = self.multiples(atom, max(lo, answer[0]), min(hi, answer[1]))
            finally:
                self.refining.discard(atom)
        elif atom in self.refining:
            self.fallbacks += 1  # re-entered: the range without constraints, not cached
        return lo, hi

    def local_range(self, atom: Atom) -> Interval:
        """The factor's range from its operands' bounds alone (variables: ``>= 1``)."""
        cached = self.local_cache.get(atom) or self.scratch.get(("local", atom))
        if cached is not None:
            return cached
        fallbacks = self.fallbacks
        lo: Num
        hi: Num
        if atom.op == "var":  # >= 1 (a multiple: >= step), and one-variable constraints
            lo, hi = self.var_bounds.get(atom, (self.multiple_of.get(atom, 1), INF))
        elif atom.op == "relu":
            zl, zh = self.bounds(atom.args[0])
            lo, hi = max(zl, 0), max(zh, 0)
        elif atom.op in ("max", "min"):
            (xl, xh), (yl, yh) = self.bounds(atom.args[0]), self.bounds(atom.args[1])
            pick = max if atom.op == "max" else min
            lo, hi = pick(xl, yl), pick(xh, yh)
        else:
            xr = self.bounds(atom.args[0])
            yr = self.bounds(atom.args[1])
            lo, hi = (_floordiv_range if atom.op == "floordiv" else _mod_range)(xr, yr)
        self.keep(self.local_cache, "local", atom, (lo, hi), fallbacks)
        return lo, hi

    def bounds_of_term(self, p: QPoly, below: bool) -> list[QPoly]:
        """``p``, and where ``p`` is one factor times a positive number, that number times
        each of the factor's symbolic lower (``below``) or upper bounds."""
        out = [p]
        if len(p) == 1:
            ((mono, coeff),) = p.items()
            if len(mono) == 1 and mono[0][1] == 1 and coeff > 0:
                lowers, uppers = self.sym_bounds(mono[0][0])
                out += [{m: c * coeff for m, c in b.items()} for b in (lowers if below else uppers)]
        return out

    def sym_bounds(self, atom: Atom) -> tuple[list[QPoly], list[QPoly]]:
        """Symbolic lower and upper bounds of a factor, as polynomials."""
        cached = self.sym_cache.get(atom) or self.scratch.get(("sym", atom))
        if cached is not None:
            return cached
        fallbacks = self.fallbacks
        lowers: list[QPoly] = []
        uppers: list[QPoly] = []
        if atom.op == "relu":
            lowers.append(self.lin(atom.args[0]))
        elif atom.op in ("max", "min"):
            x, y = (self.lin(a) for a in atom.args)
            mean = {m: Fraction(c, 2) for m, c in poly_add(x, y).items()}
            found = [x, y, mean]
            # mixes of the operands, or of a one-factor operand's own bounds on the same side
            # (max(c - 2, a % -c): with a % -c >= 1 - c, the mean is -1/2, so >= 0)
            below = atom.op == "max"
            for px in self.bounds_of_term(x, below):
                for py in self.bounds_of_term(y, below):
                    found += _cancelling(px, py)
            (lowers if below else uppers).extend(found)
        elif atom.op in ("floordiv", "mod"):
            x, y = atom.args
            xl = self.bounds(x)[0]
            yl, yh = self.bounds(y)
            px = self.lin(x)
            if atom.op == "floordiv" and isinstance(y, int) and y > 0:
                # (x - y + 1) / y <= floordiv(x, y) <= x / y
                inv = Fraction(1, y)
                uppers.append({m: c * inv for m, c in px.items()})
                lowers.append({m: c * inv for m, c in poly_add(px, {(): 1 - y}).items()})
            elif atom.op == "floordiv" and yl >= 1 and xl >= 0:
                uppers.append(px)
            if atom.op == "mod" and yl >= 1:
                if xl >= 0:
                    uppers.append(px)
                if not isinstance(y, int):
                    uppers.append(poly_add(self.lin(y), {(): -1}))
            elif atom.op == "mod" and yh <= -1 and not isinstance(y, int):
                lowers.append(poly_add(self.lin(y), {(): 1}))
        result = (lowers, uppers)
        self.keep(self.sym_cache, "sym", atom, result, fallbacks)
        return result

    # -- polynomial bounds -------------------------------------------------------------------
    def interval(self, p: QPoly, rng: Callable[[Atom], Interval]) -> Interval:
        lo: Num = 0
        hi: Num = 0
        for mono, coeff in p.items():
            if len(mono) == 1 and mono[0][1] == 1:
                iv = rng(mono[0][0])
            else:
                iv = (1, 1)
                for atom, exp in mono:
                    iv = _imul(iv, _ipow(rng(atom), exp))
            tl, th = _scale(coeff, iv)
            lo += tl
            hi += th
        return lo, hi

    def poly_bounds(self, p: QPoly, depth: int, goal: Goal | None = None) -> Interval:
        if any(type(c) is not int for c in p.values()):
            # Bound the polynomial scaled to integer coefficients: Fractions are slow.
            scale = math.lcm(*(Fraction(c).denominator for c in p.values()))
            lo, hi = self.poly_bounds({m: int(c * scale) for m, c in p.items()}, depth)
            return _div(lo, scale), _div(hi, scale)
        lo, hi = self.interval(p, self.atom_range)
        if goal is not None and goal(lo, hi):
            return lo, hi
        if any(len(m) > 1 or (m and m[0][1] > 1) for m in p):
            sl, sh = self.shifted(p)
            lo, hi = max(lo, sl), min(hi, sh)
            ol, oh = self.one_factor(p)
            lo, hi = max(lo, ol), min(hi, oh)
        if depth > 0 and (lo == -INF or hi == INF or len(p) > 1):
            lo, hi = self.substituted(p, lo, hi, depth)
        return lo, hi

    def shifted(self, p: QPoly) -> Interval:
        subs: dict[Atom, QPoly] = {}
        ranges: dict[Atom, Interval] = {}
        for mono in p:
            for atom, _ in mono:
                if atom in subs:
                    continue
                lo, hi = self.atom_range(atom)
                y: Mono = ((atom, 1),)
                if lo != -INF:
                    subs[atom], ranges[atom] = {(): lo, y: 1}, (0, hi - lo)
                elif hi != INF:
                    subs[atom], ranges[atom] = {(): hi, y: -1}, (0, INF)
                else:
                    subs[atom], ranges[atom] = {y: 1}, (-INF, INF)
        out: QPoly = {}
        for mono, coeff in p.items():
            term: QPoly = {(): coeff}
            for atom, exp in mono:
                for _ in range(exp):
                    term = poly_mul(term, subs[atom])
                    if len(term) > _SHIFT_LIMIT:
                        return -INF, INF
            out = poly_add(out, term)
        return self.interval(out, ranges.__getitem__)

    def one_factor(self, p: QPoly) -> Interval:
        """Exact bounds of a polynomial in one factor over the integers in the factor's range:
        ``(a // 2 - 1) ** 3`` is at least -1, which term-wise intervals and shifting miss."""
        atoms = {a for m in p for a, _ in m}
        if len(atoms) != 1 or any(type(c) is not int for c in p.values()):
            return -INF, INF
        (x,) = atoms
        degree = max(m[0][1] if m else 0 for m in p)
        if not 2 <= degree <= _ONE_FACTOR_DEGREE:
            return -INF, INF
        coeffs = [0] * (degree + 1)
        for mono, coeff in p.items():
            coeffs[mono[0][1] if mono else 0] = coeff
        lo, hi = self.atom_range(x)
        return _integer_extremes(coeffs, lo, hi)

    def of_linear_form(self, p: QPoly) -> Interval:
        """Exact bounds of a polynomial in one linear form of several factors, over the form's
        integer range: ``(a + b + 1) ** 2`` under ``a + b <= 3`` is at most 16, where its
        expanded terms bounded apart reach 25."""
        form = _linear_form(p)
        if form is None:
            return -INF, INF
        coeffs, form_poly = form
        fl, fh = self.poly_bounds(form_poly, _SUBST_DEPTH)
        if self.worth_solving(form_poly):
            sl, sh = self.linear(form_poly)
            fl, fh = max(fl, sl), min(fh, sh)
        scale = math.lcm(*(Fraction(c).denominator for c in coeffs))
        lo, hi = _integer_extremes([int(c * scale) for c in coeffs], fl, fh)
        return _div(lo, scale), _div(hi, scale)

    def in_parts(self, p: QPoly) -> Interval:
        """The bounds of ``p``'s terms of degree 2 and more plus those of its linear terms,
        each part bounded by its own best method: ``a ** 2 + a + c`` under ``a + c <= 3`` is
        at most 4 + 3, where the terms bounded apart reach 8."""
        linear = {m: c for m, c in p.items() if len(m) <= 1 and (not m or m[0][1] == 1)}
        rest = {m: c for m, c in p.items() if m not in linear}
        if not rest or len([m for m in linear if m]) < 2 or not self.worth_solving(linear):
            return -INF, INF
        ll, lh = self.linear(linear)
        rl, rh = self.poly_bounds(rest, _SUBST_DEPTH)
        return ll + rl, lh + rh

    def targets(self, p: QPoly) -> list[tuple[Mono, list[QPoly], list[QPoly]]]:
        """Monomials of ``p`` with symbolic bounds: factors, and ``y*floordiv(x, y)``."""
        out: list[tuple[Mono, list[QPoly], list[QPoly]]] = []
        atoms = {a for m in p for a, _ in m if a.op != "var"}
        for atom in sorted(atoms, key=lambda a: a.key):
            lowers, uppers = self.sym_bounds(atom)
            if lowers or uppers:
                out.append((((atom, 1),), lowers, uppers))
            y = atom.args[1] if atom.op == "floordiv" else None
            if isinstance(y, DimExpr) and len(y._terms) == 1 and y._terms[0][1] == 1:
                if self.bounds(y)[0] >= 1:  # x - y + 1 <= y*floordiv(x, y) <= x
                    x = self.lin(atom.args[0])
                    below = poly_add(x, poly_add(self.lin(y), {(): -1}), -1)
                    out.append((mono_mul(y._terms[0][0], ((atom, 1),)), [below], [x]))
        return out

    def substituted(self, p: QPoly, lo: Num, hi: Num, depth: int) -> Interval:
        for target, lowers, uppers in self.targets(p):
            split = _split(p, target)
            if split is None:
                continue  # not linear in the target
            q, r = split
            ql, qh = self.poly_bounds(q, depth - 1) if list(q) != [()] else (q[()],) * 2
            below, above = (
                (lowers, uppers) if ql >= 0 else (uppers, lowers) if qh <= 0 else ((), ())
            )
            for bound in below:
                cand = poly_add(r, poly_mul(q, bound))
                lo = max(lo, self.poly_bounds(cand, depth - 1)[0])
            for bound in above:
                cand = poly_add(r, poly_mul(q, bound))
                hi = min(hi, self.poly_bounds(cand, depth - 1)[1])
            if len(target) == 1 and target[0][0].op in ("max", "min"):
                # max/min(x, y) is always exactly x or y: p lies in the hull of both cases.
                cases = [
                    self.poly_bounds(poly_add(r, poly_mul(q, self.lin(arg))), depth - 1)
                    for arg in target[0][0].args
                ]
                lo = max(lo, min(c[0] for c in cases))
                hi = min(hi, max(c[1] for c in cases))
        return lo, hi

    # -- constraints -----------------------------------------------------------------------
    def prepare(self) -> None:
        """Collect the constraints ``G >= 0`` and check that some value satisfies them."""
        self.prepared = True
        for g in self.scope._ineq_exprs:
            if isinstance(g, int) and g < 0:
                raise self.contradiction(f"a constraint reduces to {g} >= 0")
        for mono, rhs in self.scope._rules:
            atom = mono[0][0]
            x, y = atom.args if atom.op == "mod" else (None, None)
            if len(mono) == 1 and not rhs and isinstance(y, int) and y > 0:
                if isinstance(x, DimExpr) and len(x._terms) == 1 and x._terms[0][1] == 1:
                    (var, exp), *more = x._terms[0][0]
                    if var.op == "var" and exp == 1 and not more:
                        old = self.multiple_of.get(var, 1)
                        self.multiple_of[var] = old * y // math.gcd(old, y)
        exprs = [g for g in self.scope._ineq_exprs if isinstance(g, DimExpr)]
        for g in exprs:
            p = self.lin(g, keep=True)
            if not self.bound_variable(p):
                self.ineqs.append(p)
                self.mentions.append((p, frozenset(all_atoms(g))))
        self.mentioned = frozenset().union(*(m for _, m in self.mentions))
        for var, (lo, hi) in self.var_bounds.items():
            if lo > hi:
                raise self.contradiction(f"'{var}' would have to lie in [{lo}, {hi}]")
        if self.ineqs:
            self.variable_ranges()

    def variable_ranges(self) -> None:
        """Every constrained variable's range, from one system of all the constraints, once
        for every later query; no solution at all means the constraints contradict."""
        variables = sorted((a for a in self.mentioned if a.op == "var"), key=lambda a: a.key)
        system = System(self)
        for g in self.ineqs:
            system.ineqs.append(g)
            system.include(g)
        self.enter()
        try:
            ranges = system.ranges(variables)
        finally:
            self.leave()
        if ranges is None:
            raise self.contradiction(
                "no values of the dimension variables (each >= 1) satisfy them together"
            )
        for var, (lo, hi) in ranges.items():
            local_lo, local_hi = self.local_range(var)
            lo, hi = self.multiples(var, max(lo, local_lo), min(hi, local_hi))
            if lo > hi:
                raise self.contradiction(f"'{var}' would have to lie in [{lo}, {hi}]")
            self.range_cache[var] = (lo, hi)

    def multiples(self, atom: Atom, lo: Num, hi: Num) -> Interval:
        """``[lo, hi]`` narrowed to the multiples a variable must be (``mod(v, c) == 0``)."""
        step = self.multiple_of.get(atom, 1)
        if step > 1:
            lo = lo if lo == -INF else -(-math.ceil(lo) // step) * step
            hi = hi if hi == INF else math.floor(hi) // step * step
        return lo, hi

    def check_constraints(self) -> None:
        """Bound each constraint ``G >= 0`` with a product in it: a contradiction that only a
        nonlinear method sees (a polynomial with no integer root) raises now, not at a query."""
        for g in self.scope._ineq_exprs:
            if isinstance(g, DimExpr) and any(len(m) > 1 or m[0][1] > 1 for m, _ in g._terms if m):
                self.bounds(g)

    def bound_variable(self, p: QPoly) -> bool:
        """A constraint ``c*v + k >= 0`` on one variable becomes part of its range."""
        monos = [m for m in p if m]
        if len(monos) != 1 or len(monos[0]) != 1 or monos[0][0][1] != 1:
            return False
        var = monos[0][0][0]
        if var.op != "var":
            return False
        c, k = p[monos[0]], p.get((), 0)
        step = self.multiple_of.get(var, 1)
        lo, hi = self.var_bounds.get(var, (max(1, step), INF))
        if c > 0:  # v >= ceil(-k / c), rounded up to a multiple
            least = -(k // c)
            lo = max(lo, -(-least // step) * step)
        else:  # v <= floor(k / -c), rounded down to a multiple
            hi = min(hi, k // -c // step * step)
        self.var_bounds[var] = (lo, hi)
        return True


def _div(x: Num, k: int) -> Num:
    return x if x in (INF, -INF) else Fraction(x) / k


def _split(p: QPoly, target: Mono) -> tuple[QPoly, QPoly] | None:
    """``(q, r)`` with ``p == q*target + r`` and ``target`` in no term of ``q`` or ``r``."""
    q: QPoly = {}
    r: QPoly = {}
    for mono, coeff in p.items():
        rest = _mono_div(mono, target)
        if rest is None:
            r[mono] = coeff
        elif _mono_div(rest, target) is not None:
            return None
        else:
            q[rest] = coeff
    return q, r


def _floordiv_range(x: Interval, y: Interval) -> Interval:
    xl, xh = x
    yl, yh = y
    if yl <= 0 <= yh:
        return -INF, INF
    if yh < 0:  # floor(x / y) = floor(-x / -y)
        return _floordiv_range((-xh, -xl), (-yh, -yl))
    lo = _floor_q(xl, yl) if xl < 0 else (0 if yh == INF else _floor_q(xl, yh))
    if xh >= 0:
        hi = _floor_q(xh, yl)
    else:
        hi = -1 if yh == INF else _floor_q(xh, yh)
    return lo, hi


def _floor_q(a: Num, b: Num) -> Num:
    if a in (INF, -INF):
        return a
    return math.floor(Fraction(a) / Fraction(b))


def _mod_range(x: Interval, y: Interval) -> Interval:
    xl, xh = x
    yl, yh = y
    if yl > 0:
        hi = yh - 1
        if xl >= 0:
            hi = min(hi, xh)
        return 0, hi
    if yh < 0:
        lo = yl + 1
        if xh <= 0:
            lo = max(lo, xl)
        return lo, 0
    big = max(-yl, yh)
    return -big + 1, big - 1


def all_atoms(x: DimSize) -> list[Atom]:
    """Every factor of ``x``, those inside other factors' operands included."""
    out: list[Atom] = []
    if isinstance(x, int):
        return out
    for mono, _ in x._terms:
        for atom, _ in mono:
            out.append(atom)
            if atom.op != "var":
                for arg in atom.args:
                    out += all_atoms(arg)
    return out


def _cancelling(x: QPoly, y: QPoly) -> list[QPoly]:
    """The mixes ``l * x + (1 - l) * y`` (``0 < l < 1``) in which a term of ``x`` and ``y`` of
    opposite signs cancels: ``max(x, y)`` is at least each, ``min(x, y)`` at most each. The
    mean alone bounds ``max(-c, 3 * c - 6)`` by ``c - 3``, so below by -2; the mix without
    ``c``, ``-3/2``, gives -1, its least value."""
    out = []
    for m, a in x.items():
        b = y.get(m)
        if m and b is not None and (a > 0) != (b > 0):
            lam = Fraction(b) / (b - a)
            mix = poly_add(
                {k: v * lam for k, v in x.items()}, {k: v * (1 - lam) for k, v in y.items()}
            )
            out.append({k: v for k, v in mix.items() if v})
    return out


# -- a polynomial in one integer variable -------------------------------------------------
# Coefficients are lists of ints, lowest power first.


def _at(coeffs: list[int], v: int) -> int:
    value = 0
    for c in reversed(coeffs):
        value = value * v + c
    return value


def _sign(v: int) -> int:
    return (v > 0) - (v < 0)


def _turning_points(coeffs: list[int], lo: int, hi: int) -> list[int]:
    """Integers ``lo = s0 < s1 < ... <= hi`` such that the polynomial is monotone on every real
    interval ``[s_i, s_i+1]`` wider than 1 (one of width 1 holds no other integer)."""
    deriv = [i * c for i, c in enumerate(coeffs)][1:]
    if len(deriv) <= 1 or lo >= hi:
        return sorted({lo, hi})
    points = _turning_points(deriv, lo, hi)  # the derivative is monotone between them
    out = [lo]
    for u, v in itertools.pairwise(points):
        du, dv = _sign(_at(deriv, u)), _sign(_at(deriv, v))
        if v - u > 1 and du and dv and du != dv:
            # One sign change of the monotone derivative: find n with d(n) of u's sign and
            # d(n + 1) not; the polynomial is monotone on [u, n] and on [n + 1, v].
            a, b = u, v
            while b - a > 1:
                mid = (a + b) // 2
                a, b = (mid, b) if _sign(_at(deriv, mid)) == du else (a, mid)
            out += [a, b]
        out.append(v)
    return sorted(set(out))


def _root_bound(coeffs: list[int]) -> int:
    """An integer above the absolute value of every real root (Cauchy's bound)."""
    lead = abs(coeffs[-1])
    return 2 + max(abs(c) for c in coeffs[:-1]) // lead


def _linear_form(p: QPoly) -> tuple[list[Fraction], QPoly] | None:
    """``(c, L)`` with ``p == sum(c[k] * L ** k)`` for a linear form ``L`` of two or more
    factors with coprime integer coefficients, or None. ``L`` is read off the terms of the
    highest degree ``d``: beside ``x ** d`` (coefficient ``h``), ``x ** (d - 1) * y`` has
    ``d * h * l_y / l_x``; then the powers of ``L`` are taken off ``p`` from the highest."""
    degree = {m: sum(e for _, e in m) for m in p}
    d = max(degree.values(), default=0)
    if not 2 <= d <= _ONE_FACTOR_DEGREE:
        return None
    atoms = sorted({a for m in p for a, _ in m}, key=lambda a: a.key)
    lead = next((((a, d),) for a in atoms if ((a, d),) in p), None)
    if lead is None or len(atoms) < 2:
        return None
    x = lead[0][0]
    ratios = {
        a: Fraction(p.get(mono_mul(((x, d - 1),), ((a, 1),)), 0)) / (d * p[lead]) for a in atoms
    }
    ratios[x] = Fraction(1)
    scale = math.lcm(*(r.denominator for r in ratios.values()))
    ints = {a: int(r * scale) for a, r in ratios.items() if r}
    if len(ints) < 2:
        return None
    common = math.gcd(*ints.values())
    form: QPoly = {((a, 1),): c // common for a, c in ints.items()}
    powers: list[QPoly] = [{(): 1}]
    for _ in range(d):
        powers.append(poly_mul(powers[-1], form))
    rest: QPoly = dict(p)
    coeffs = [Fraction(0)] * (d + 1)
    lx = form[((x, 1),)]
    for k in range(d, 0, -1):
        coeffs[k] = Fraction(rest.get(((x, k),), 0)) / lx**k
        rest = poly_add(rest, powers[k], -coeffs[k])
    if any(rest.keys() - {()}):
        return None
    coeffs[0] = Fraction(rest.get((), 0))
    return coeffs, form


def _integer_extremes(coeffs: list[int], lo: Num, hi: Num) -> Interval:
    """The least and greatest values of the polynomial at the integers of ``[lo, hi]``."""
    lo = lo if lo == -INF else math.ceil(lo)
    hi = hi if hi == INF else math.floor(hi)
    if lo > hi:
        return -INF, INF
    # Beyond the roots of every derivative, the polynomial is monotone towards its limits.
    reach = 1
    derivs = coeffs
    while len(derivs) > 1:
        reach = max(reach, _root_bound(derivs))
        derivs = [i * c for i, c in enumerate(derivs)][1:]
    first = lo if lo != -INF else min(-reach, hi)
    last = hi if hi != INF else max(reach, first)
    values: list[Num] = [_at(coeffs, v) for v in _turning_points(coeffs, int(first), int(last))]
    lead, degree = _sign(coeffs[-1]), len(coeffs) - 1
    if hi == INF:
        values.append(INF * lead)
    if lo == -INF:
        values.append(INF * lead * (-1) ** degree)
    return min(values), max(values)
