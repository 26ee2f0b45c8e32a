"""Sound lower and upper bounds of dimension expressions under a scope's constraints.

Every bound returned here holds for *every* valuation of the dimension variables that
satisfies the scope's constraints (each variable >= 1). Several independent methods each
give a sound interval; the answer is their intersection:

1. interval arithmetic over the factors' ranges (with exact rules for even powers);
2. shifting each factor to its lower bound (``a = 1 + y``, ``y >= 0``) and expanding, which
   proves facts such as ``a*b >= a`` and ``a*a >= a`` that term-wise intervals miss;
3. substituting a factor that occurs linearly by one of its symbolic bounds, e.g.
   ``mod(a, b) <= a``, ``floordiv(a, 3) >= (a - 2)/3``, ``relu(z) >= z``;
4. subtracting non-negative multiples of the constraints ``G >= 0`` (chained a few deep).

``max``/``min`` are first rewritten with ``relu(z) = max(z, 0)`` at a canonical sign of
``z`` (``max(x, y) = x + relu(y - x)``), so that equal combinations cancel, e.g.
``max(a, b) - a - max(b - a, 0)`` becomes ``0``. Variable ranges are tightened once per
scope by propagating the linear constraints to a fixed point.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from shapevm.shapes.expr import (
    Atom,
    DimExpr,
    DimSize,
    Mono,
    _mono_div,
    mono_mul,
    poly_add,
    poly_mul,
)

if TYPE_CHECKING:
    from shapevm.shapes.scope import SymbolicScope

Num = int | Fraction | float
Goal = Callable[[Num, Num], bool]
Interval = tuple[Num, Num]
QPoly = dict[Mono, Any]
INF = math.inf
_SHIFT_LIMIT = 400  # expanded terms; beyond this the shift method is skipped
_SUBST_DEPTH = 1
_CONSTRAINT_DEPTH = 3
_PROPAGATION_LIMIT = 2**62


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
        self.propagating = False
        self.prop: dict[Atom, list[Num]] = {}
        self.ineqs: list[QPoly] = []
        self.cache: dict[DimExpr, tuple[Num, Num]] = {}
        self.range_cache: dict[Atom, Interval] = {}
        self.lin_cache: dict[DimExpr, QPoly] = {}
        self.kept_cache: dict[DimExpr, QPoly] = {}
        self.sym_cache: dict[Atom, tuple[list[QPoly], list[QPoly]]] = {}
        self.active: set[DimExpr] = set()
        self.multiple_of: dict[Atom, int] = {}
        self.verdicts: dict[tuple[DimExpr, str], bool] = {}
        self.fallbacks = 0

    # -- public ----------------------------------------------------------------------------
    def bounds(self, e: DimSize, goal: Goal | None = None) -> tuple[Num, Num]:
        """Sound bounds of ``e``; with ``goal``, stop as soon as ``goal(lo, hi)`` holds."""
        if isinstance(e, int):
            return e, e
        cached = self.cache.get(e)
        if cached is not None:
            return cached
        if not self.prepared:
            self.prepare()
        p = self.lin(e)
        if e in self.active:
            # Re-entered (a constraint mentions a factor of e whose range needs e): answer
            # with intervals alone, and cache nothing that depended on this weaker answer.
            self.fallbacks += 1
            return self.interval(p, self.atom_range)
        fallbacks = self.fallbacks
        self.active.add(e)
        try:
            lo, hi = self.search(e, p, goal)
        finally:
            self.active.discard(e)
        lo = lo if lo == -INF else math.ceil(lo)
        hi = hi if hi == INF else math.floor(hi)
        if lo > hi:
            raise self.scope.unsatisfiable(f"'{e}' would have to lie in [{lo}, {hi}]")
        complete = goal is None or not goal(lo, hi)
        if not self.propagating and fallbacks == self.fallbacks and complete:
            self.cache[e] = (lo, hi)
        return lo, hi

    def search(self, e: DimExpr, p: QPoly, goal: Goal | None) -> Interval:
        lo, hi = self.poly_bounds(p, _SUBST_DEPTH)
        if goal is not None and goal(lo, hi):
            return lo, hi
        kept = self.lin(e, keep=True)
        if kept is not p and kept != p:  # max/min as factors of their own, with their ranges
            kl, kh = self.poly_bounds(kept, _SUBST_DEPTH)
            lo, hi = max(lo, kl), min(hi, kh)
            if goal is not None and goal(lo, hi):
                return lo, hi
        if not self.propagating and self.ineqs and (lo == -INF or hi == INF or len(p) > 1):
            lo, hi = self.with_constraints(p, lo, hi, _CONSTRAINT_DEPTH, (), goal)
        return lo, hi

    # -- decision form ---------------------------------------------------------------------
    def lin(self, x: DimSize, keep: bool = False) -> QPoly:
        """``x`` as a polynomial over variables, floordiv, mod and relu factors.

        With ``keep``, max and min stay factors (with their own ranges) instead.
        """
        if isinstance(x, int):
            return {(): x} if x else {}
        if keep and not any(a.op in ("max", "min") for m, _ in x._terms for a, _ in m):
            keep = False  # the same polynomial either way
        cache = self.kept_cache if keep else self.lin_cache
        cached = cache.get(x)
        if cached is not None:
            return cached
        out: QPoly = {}
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
        cached = self.range_cache.get(atom)
        if cached is not None:
            return cached
        fallbacks = self.fallbacks
        lo: Num
        hi: Num
        if atom.op == "var":
            lo, hi = 1, INF
            step = self.multiple_of.get(atom)
            if step is not None:  # mod(v, step) == 0
                known = self.prop.get(atom, [lo, hi])
                lo = -(-max(lo, known[0]) // step) * step
                hi = hi if known[1] == INF else known[1] // step * step
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
        extra = self.prop.get(atom)
        if extra is not None:
            lo, hi = max(lo, extra[0]), min(hi, extra[1])
        if not self.propagating and fallbacks == self.fallbacks:
            self.range_cache[atom] = (lo, hi)
        return lo, hi

    def sym_bounds(self, atom: Atom) -> tuple[list[QPoly], list[QPoly]]:
        """Symbolic lower and upper bounds of a factor, as polynomials."""
        cached = self.sym_cache.get(atom)
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
            (lowers if atom.op == "max" else uppers).extend([x, y, mean])
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
        if not self.propagating and fallbacks == self.fallbacks:
            self.sym_cache[atom] = result
        return result

    # -- polynomial bounds -------------------------------------------------------------------
    def interval(self, p: QPoly, rng: Callable[[Atom], Interval]) -> Interval:
        lo: Num = 0
        hi: Num = 0
        for mono, coeff in p.items():
            iv: Interval = (1, 1)
            for atom, exp in mono:
                iv = _imul(iv, _ipow(rng(atom), exp))
            tl, th = _scale(coeff, iv)
            lo += tl
            hi += th
        return lo, hi

    def poly_bounds(self, p: QPoly, depth: int) -> Interval:
        lo, hi = self.interval(p, self.atom_range)
        if any(len(m) > 1 or (m and m[0][1] > 1) for m in p):
            sl, sh = self.shifted(p)
            lo, hi = max(lo, sl), min(hi, sh)
            ql, qh = self.quadratic(p)
            lo, hi = max(lo, ql), min(hi, qh)
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

    def quadratic(self, p: QPoly) -> Interval:
        """Exact bounds of ``c2*x^2 + c1*x + c0`` over the integers in the range of ``x``."""
        atoms = {a for m in p for a, _ in m}
        if len(atoms) != 1 or any(len(m) == 1 and m[0][1] > 2 for m in p):
            return -INF, INF
        (x,) = atoms
        lo, hi = self.atom_range(x)
        c0 = p.get((), 0)
        c1 = p.get(((x, 1),), 0)
        c2 = p.get(((x, 2),), 0)

        def q(v: Num) -> Num:
            if v in (INF, -INF):
                return INF if c2 > 0 else -INF
            value: Num = c2 * v * v + c1 * v + c0
            return value

        vertex = Fraction(-c1) / (2 * Fraction(c2))
        near = [v for v in (math.floor(vertex), math.ceil(vertex)) if lo <= v <= hi]
        ends = [q(lo), q(hi)]
        inner = [q(v) for v in near]
        if c2 > 0:
            return min(ends + inner), max(ends)
        return min(ends), max(ends + inner)

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

    def with_constraints(
        self,
        p: QPoly,
        lo: Num,
        hi: Num,
        depth: int,
        used: tuple[int, ...],
        goal: Goal | None = None,
    ) -> Interval:
        """Tighten bounds of ``p`` with ``p = p' + k*G`` for constraints ``G >= 0``."""
        for i, g in enumerate(self.ineqs):
            if i in used:
                continue
            for mono, gc in g.items():
                pc = p.get(mono)
                if not mono or pc is None:
                    continue
                k = Fraction(pc) / Fraction(gc) if not isinstance(pc, float) else pc / gc
                if isinstance(k, Fraction) and k.denominator == 1:
                    k = k.numerator
                rest: QPoly = poly_add(p, {m: -_mul(k, c) for m, c in g.items()})
                rl, rh = self.poly_bounds(rest, _SUBST_DEPTH)
                if depth > 1 and rest and (rl == -INF or rh == INF):
                    rl, rh = self.with_constraints(rest, rl, rh, depth - 1, (*used, i))
                if k > 0:  # p = rest + k*G >= rest
                    lo = max(lo, rl)
                else:  # p = rest - |k|*G <= rest
                    hi = min(hi, rh)
                if goal is not None and goal(lo, hi):
                    return lo, hi
        return lo, hi

    # -- constraints -----------------------------------------------------------------------
    def prepare(self) -> None:
        """Collect the constraints ``G >= 0`` and propagate them into factor ranges."""
        self.prepared = True
        self.propagating = True
        try:
            ineqs = [self.lin(g) for g in self.scope._ineq_exprs]
            for g in ineqs:
                if not g or (len(g) == 1 and () in g):
                    const = g.get((), 0)
                    if const < 0:
                        raise self.scope.unsatisfiable(f"a constraint reduces to {const} >= 0")
            self.ineqs = [g for g in ineqs if any(g)]
            for mono, rhs in self.scope._rules:
                atom = mono[0][0]
                x, y = atom.args if atom.op == "mod" else (None, None)
                if len(mono) == 1 and not rhs and isinstance(y, int) and y > 0:
                    if isinstance(x, DimExpr) and len(x._terms) == 1 and x._terms[0][1] == 1:
                        (var, exp), *more = x._terms[0][0]
                        if var.op == "var" and exp == 1 and not more:
                            old = self.multiple_of.get(var, 1)
                            self.multiple_of[var] = old * y // math.gcd(old, y)
            self.propagate()
            self.check_pairs()
        finally:
            self.propagating = False
            self.range_cache.clear()
            self.sym_cache.clear()
            self.cache.clear()

    def propagate(self) -> None:
        for _ in range(32):
            changed = False
            for g in self.ineqs:
                for mono, c in g.items():
                    if len(mono) != 1 or mono[0][1] != 1:
                        continue
                    atom = mono[0][0]
                    rest = {m: v for m, v in g.items() if m != mono}
                    rest_hi: Num = self.interval(rest, self.atom_range)[1]
                    if rest_hi == INF or not -_PROPAGATION_LIMIT < rest_hi < _PROPAGATION_LIMIT:
                        continue  # no bound, or bounds creeping without end in a cycle
                    cur: list[Num] = self.prop.setdefault(atom, list(self.atom_range(atom)))
                    if c > 0:
                        new_lo = (
                            -(rest_hi // c)
                            if isinstance(rest_hi, int)
                            else math.ceil(Fraction(-rest_hi) / c)
                        )
                        if new_lo > cur[0]:
                            cur[0], changed = new_lo, True
                    else:
                        new_hi = (
                            rest_hi // -c
                            if isinstance(rest_hi, int) and isinstance(c, int)
                            else math.floor(Fraction(rest_hi) / -c)
                        )
                        if new_hi < cur[1]:
                            cur[1], changed = new_hi, True
                    if cur[0] > cur[1]:
                        raise self.scope.unsatisfiable(f"'{atom}' would have to lie in {cur}")
            if not changed:
                return

    def check_pairs(self) -> None:
        for i, g1 in enumerate(self.ineqs):
            for g2 in self.ineqs[i + 1 :]:
                for mono, c1 in g1.items():
                    c2 = g2.get(mono)
                    if not mono or c2 is None or (c1 > 0) == (c2 > 0):
                        continue
                    k = Fraction(c1) / Fraction(-c2)
                    total = poly_add(g1, {m: _mul(k, c) for m, c in g2.items()})
                    if list(total) in ([], [()]) and total.get((), 0) < 0:
                        raise self.scope.unsatisfiable("two constraints contradict each other")


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
