"""Fourier–Motzkin elimination over integer linear constraints, with integer tightening.

A system is a list of rows ``sum(c_i * x_i) + k >= 0`` (or ``== 0``) with integer
coefficients over integer-valued unknowns ``x_i``. `project` eliminates every unknown but
one and returns the bounds the system implies for it, or ``None`` when the system has no
solution. Every derived row is divided by the gcd of its coefficients with its constant
rounded down (``2*x >= 3`` becomes ``x >= 2``): sound because the unknowns are integers,
and stronger than the rational relaxation.

The answer is sound, never complete: when elimination grows past `ROW_LIMIT` rows it stops
and answers "no information" (``-inf, inf``), which is also what it answers for an unknown
that is unbounded.

>>> x, y, t = 0, 1, 2
>>> rows = [Row({x: 1, y: 1}, -6), Row({y: 1, x: -1}, 0), Row({x: 1}, -1)]
>>> project(rows, [Row({t: 1, y: -1}, 0)], t)   # y under x + y >= 6, y >= x, x >= 1
(3, inf)
>>> project([Row({x: 1}, -5), Row({x: -1}, 4)], [], x) is None   # x >= 5 and x <= 4
True
"""

from __future__ import annotations

import math
from typing import NamedTuple

INF = math.inf
ROW_LIMIT = 400


class Row(NamedTuple):
    """``sum(coeffs[i] * x_i) + const >= 0`` (or ``== 0`` as an equality)."""

    coeffs: dict[int, int]
    const: int


class _Infeasible(Exception):
    pass


def project(
    rows: list[Row], eqs: list[Row], keep: int, limit: int = ROW_LIMIT
) -> tuple[float | int, float | int] | None:
    """Bounds of unknown ``keep`` under ``rows >= 0`` and ``eqs == 0``; ``None``: no solution."""
    return Reduced(rows, eqs, keep).bounds([], [], limit)


class Reduced:
    """A system with its equalities substituted away, ready to take more rows (the cases
    of a max/min) and give the bounds of ``keep`` for each."""

    def __init__(self, rows: list[Row], eqs: list[Row], keep: int) -> None:
        self.keep = keep
        self.pivots: list[tuple[int, Row, int]] = []  # (unknown, equality, its coefficient)
        self.infeasible = False
        try:
            tight = [r for r in map(_tighten, rows) if r is not None]
            self.ineqs = self._substitute(list(eqs), tight)
        except _Infeasible:
            self.infeasible = True
            self.ineqs = []

    def bounds(
        self, rows: list[Row], eqs: list[Row], limit: int = ROW_LIMIT
    ) -> tuple[float | int, float | int] | None:
        """Bounds of ``keep`` with ``rows`` and ``eqs`` added; ``None``: no solution."""
        if self.infeasible:
            return None
        saved = len(self.pivots)
        try:
            more = [r for r in (_tighten(self._reduce(r)) for r in rows) if r is not None]
            ineqs = self.ineqs + more
            if eqs:
                ineqs = self._substitute([self._reduce(e) for e in eqs], ineqs)
            final = _eliminate(ineqs, self.keep, limit)
        except _Infeasible:
            return None
        finally:
            del self.pivots[saved:]
        if final is None:
            return -INF, INF
        lo: float | int = -INF
        hi: float | int = INF
        for coeffs, const in final:
            c = coeffs.get(self.keep, 0)
            if c > 0:  # c*t + k >= 0: t >= ceil(-k / c)
                lo = max(lo, -(const // c))
            elif c < 0:  # t <= floor(k / -c)
                hi = min(hi, const // -c)
        if lo > hi:
            return None
        return lo, hi

    def _reduce(self, row: Row) -> Row:
        for v, pivot, c in self.pivots:
            row = _drop(row, v, pivot, c)
        return row

    def _substitute(self, eqs: list[Row], ineqs: list[Row]) -> list[Row]:
        """Use each equality to eliminate one unknown from everything else (Gaussian steps)."""
        keep = self.keep
        while eqs:
            eq = eqs.pop()
            coeffs = {v: c for v, c in eq.coeffs.items() if c}
            if not coeffs:
                if eq.const:
                    raise _Infeasible
                continue
            g = math.gcd(*coeffs.values())
            if eq.const % g:
                raise _Infeasible  # g divides the left side for integers, not the right
            free = [v for v in coeffs if v != keep]
            if not free:  # c*t + k == 0 pins t: keep both directions
                ineqs = [*ineqs, Row(coeffs, eq.const), Row({keep: -coeffs[keep]}, -eq.const)]
                continue
            v = min(free, key=lambda u: abs(coeffs[u]))
            c = abs(coeffs[v])
            sign = 1 if coeffs[v] > 0 else -1
            pivot = Row({u: sign * x for u, x in coeffs.items()}, sign * eq.const)
            self.pivots.append((v, pivot, c))
            eqs = [_drop(e, v, pivot, c) for e in eqs]
            out = []
            for r in ineqs:
                if v in r.coeffs:
                    tight = _tighten(_drop(r, v, pivot, c))
                    if tight is not None:
                        out.append(tight)
                else:
                    out.append(r)
            ineqs = out
        return ineqs


def _tighten(row: Row) -> Row | None:
    """The row divided by the gcd of its coefficients; ``None`` if it always holds."""
    coeffs = row.coeffs
    if 0 in coeffs.values():
        coeffs = {v: c for v, c in coeffs.items() if c}
    if not coeffs:
        if row.const < 0:
            raise _Infeasible
        return None
    g = math.gcd(*coeffs.values())
    if g == 1:
        return row if coeffs is row.coeffs else Row(coeffs, row.const)
    return Row({v: c // g for v, c in coeffs.items()}, row.const // g)


def _combine(a: Row, ka: int, b: Row, kb: int) -> Row:
    """``ka*a + kb*b`` (``ka``, ``kb`` > 0 for inequalities)."""
    coeffs = {v: ka * c for v, c in a.coeffs.items()} if ka != 1 else dict(a.coeffs)
    get = coeffs.get
    for v, c in b.coeffs.items():
        coeffs[v] = get(v, 0) + kb * c
    return Row(coeffs, ka * a.const + kb * b.const)


def _drop(row: Row, v: int, pivot: Row, c: int) -> Row:
    """``row`` with unknown ``v`` eliminated by the equality ``pivot`` (coefficient ``c`` > 0)."""
    a = row.coeffs.get(v, 0)
    if not a:
        return row
    out = _combine(row, c, pivot, -a)
    out.coeffs.pop(v, None)
    return out


def _eliminate(rows: list[Row], keep: int, limit: int) -> list[Row] | None:
    rows = _dedupe(rows)
    while True:
        pos: dict[int, int] = {}
        neg: dict[int, int] = {}
        for coeffs, _ in rows:
            for v, c in coeffs.items():
                if c > 0:
                    pos[v] = pos.get(v, 0) + 1
                else:
                    neg[v] = neg.get(v, 0) + 1
        candidates = (pos.keys() | neg.keys()) - {keep}
        if not candidates:
            return rows
        # the unknown whose elimination adds the fewest rows (one-sided ones remove rows)
        v = min(
            candidates,
            key=lambda u: (pos.get(u, 0) * neg.get(u, 0) - pos.get(u, 0) - neg.get(u, 0), u),
        )
        upper: list[Row] = []
        lower: list[Row] = []
        rest: list[Row] = []
        for r in rows:
            c = r.coeffs.get(v, 0)
            (rest if not c else lower if c > 0 else upper).append(r)
        for p in lower:
            cp = p.coeffs[v]
            for n in upper:
                cn = -n.coeffs[v]
                g = math.gcd(cp, cn)
                row = _combine(p, cn // g, n, cp // g)
                del row.coeffs[v]
                tight = _tighten(row)
                if tight is not None:
                    rest.append(tight)
        rows = _dedupe(rest)
        if len(rows) > limit:
            return None


def _dedupe(rows: list[Row]) -> list[Row]:
    """One row per coefficient vector: the tightest (smallest constant)."""
    best: dict[frozenset[tuple[int, int]], Row] = {}
    for row in rows:
        key = frozenset(row.coeffs.items())
        old = best.get(key)
        if old is None or row.const < old.const:
            best[key] = row
    return list(best.values())
