"""The linear facts behind a query, solved by Fourier–Motzkin elimination (`linear`).

Every monomial of the query (``a``, ``a*b``, ``floordiv(a, 4)``, ``max(a, b)``) is an integer
unknown. The system holds, for each factor, what it is by definition, as linear facts:

* a variable: ``>= 1`` (a multiple of ``k`` where ``mod(a, k) == 0``: ``a >= k`` and
  ``a == k*floordiv(a, k)``);
* ``floordiv(x, k)``, ``mod(x, k)``: ``x == k*floordiv(x, k) + mod(x, k)`` with
  ``0 <= mod(x, k) <= k - 1``, both as unknowns of their own; by a symbolic ``y >= 1``
  the same with ``y*floordiv(x, y)`` expanded into monomials, ``mod(x, y) <= y - 1``;
* ``max(x, y)``: ``>= x`` and ``>= y``, and split into its two cases (``== x`` where
  ``x >= y``, ``== y`` where ``y >= x``); ``min`` alike;
* a product of factors: its range from its factors' own ranges (``a*b >= 1``), and for
  two factors the planes their ranges imply (``a*b >= a + b - 1``: McCormick's envelope);

and the scope's constraints ``G >= 0`` that share an unknown with them. The bounds of the
query over every case are the widest of the cases' bounds; a case with no solution drops
out, and when every case has none the constraints cannot be satisfied.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from shapevm.shapes.expr import Atom, DimExpr, Mono, poly_add, poly_mul
from shapevm.shapes.linear import Reduced, Row

if TYPE_CHECKING:
    from shapevm.shapes.bounds import Engine

QPoly = dict[Mono, Any]
Case = tuple[list[QPoly], list[QPoly]]  # (inequalities >= 0, equalities == 0)
INF = math.inf
MAX_SPLITS = 3  # max/min factors split into their cases (2**MAX_SPLITS systems at most)


class Facts:
    """What one factor is by definition: inequalities, equalities and (max/min) two cases."""

    __slots__ = ("cases", "eqs", "ineqs")

    def __init__(self) -> None:
        self.ineqs: list[QPoly] = []
        self.eqs: list[QPoly] = []
        self.cases: tuple[Case, Case] | None = None


def atom_facts(engine: Engine, atom: Atom) -> Facts:
    """The defining facts of ``atom`` (cached per scope by the engine).

    They are structural: they need no bounds of the operands, except the signs of a
    symbolic divisor and its dividend (known already: the division checked its divisor).
    """
    f = Facts()
    me: QPoly = {((atom, 1),): 1}
    if atom.op == "var":
        f.ineqs += _range_rows(me, *engine.local_range(atom))  # >= 1, one-variable bounds
        step = engine.multiple_of.get(atom)
        if step is not None:  # v == step * floordiv(v, step)
            fd = Atom("floordiv", (DimExpr(((((atom, 1),), 1),), engine.scope), step))
            f.eqs.append(poly_add(me, {((fd, 1),): step}, -1))
    elif atom.op in ("floordiv", "mod"):
        _division_facts(engine, atom, me, f)
    elif atom.op in ("max", "min"):
        x, y = (engine.lin(a, keep=True) for a in atom.args)
        pick_x = poly_add(me, x, -1)  # me - x
        pick_y = poly_add(me, y, -1)
        sign = 1 if atom.op == "max" else -1
        f.ineqs += [_scaled(pick_x, sign), _scaled(pick_y, sign)]
        x_wins = _scaled(poly_add(x, y, -1), sign)  # x >= y for max, x <= y for min
        f.cases = (([x_wins], [pick_x]), ([_scaled(x_wins, -1)], [pick_y]))
    return f


def _scaled(p: QPoly, k: Any) -> QPoly:
    return p if k == 1 else {m: k * c for m, c in p.items()}


def _range_rows(me: QPoly, lo: Any, hi: Any) -> list[QPoly]:
    rows = []
    if lo != -INF:
        rows.append(poly_add(me, {(): -lo}))
    if hi != INF:
        rows.append(poly_add({(): hi}, me, -1))
    return rows


def _division_facts(engine: Engine, atom: Atom, me: QPoly, f: Facts) -> None:
    x, y = atom.args
    px = engine.lin(x, keep=True)
    if atom.op == "floordiv":
        fd, md = atom, Atom("mod", (x, y))
    else:
        fd, md = Atom("floordiv", (x, y)), atom
    quotient: QPoly = {((fd, 1),): 1}
    remainder: QPoly = {((md, 1),): 1}
    if isinstance(y, int):  # x == y*q + r, 0 <= r <= y - 1 (canonical: y > 0)
        f.eqs.append(poly_add(poly_add(px, quotient, -y), remainder, -1))
        if atom.op == "mod":
            f.ineqs += _range_rows(me, 0, y - 1)
        return
    f.ineqs += _range_rows(me, *engine.local_range(atom))
    yl, yh = engine.bounds(y)
    xl = engine.bounds(x)[0]
    py = engine.lin(y, keep=True)
    if yl >= 1 or yh <= -1:
        f.eqs.append(poly_add(poly_add(px, poly_mul(py, quotient), -1), remainder, -1))
    if atom.op == "mod" and yl >= 1:
        f.ineqs.append(poly_add(poly_add(py, {(): -1}), me, -1))  # r <= y - 1
        if xl >= 0:
            f.ineqs.append(poly_add(px, me, -1))  # r <= x
    elif atom.op == "mod" and yh <= -1:
        f.ineqs.append(poly_add(me, poly_add(py, {(): 1}), -1))  # r >= y + 1
    elif atom.op == "floordiv" and yl >= 1 and xl >= 0:
        f.ineqs.append(poly_add(px, me, -1))  # q <= x


class System:
    """The facts of one query, gathered from its factors and the scope's constraints."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.ineqs: list[QPoly] = []
        self.eqs: list[QPoly] = []
        self.cases: list[tuple[Atom, tuple[Case, Case]]] = []
        self.atoms: set[Atom] = set()
        self.monos: set[Mono] = set()
        self._eq_keys: set[frozenset[tuple[Mono, Any]]] = set()
        self.constraints = 0

    def include(self, p: QPoly) -> None:
        """Add the factors of ``p`` and, transitively, the facts that define them."""
        todo = [p]
        while todo:
            q = todo.pop()
            for mono in q:
                if not mono or mono in self.monos:
                    continue
                self.monos.add(mono)
                if len(mono) > 1 or mono[0][1] > 1:
                    todo += self._product_range(mono)
                for atom, _ in mono:
                    if atom not in self.atoms:
                        self.atoms.add(atom)
                        todo += self._add_facts(atom)

    def _add_facts(self, atom: Atom) -> list[QPoly]:
        f = self.engine.facts_of(atom)
        self.ineqs += f.ineqs
        for eq in f.eqs:
            key = frozenset(eq.items())  # floordiv(x, y) and mod(x, y) share theirs
            if key not in self._eq_keys:
                self._eq_keys.add(key)
                self.eqs.append(eq)
        if f.cases is not None:
            self.cases.append((atom, f.cases))
            return [*f.ineqs, *f.eqs, *(p for case in f.cases for part in case for p in part)]
        return [*f.ineqs, *f.eqs]

    def _product_range(self, mono: Mono) -> list[QPoly]:
        lo, hi = self.engine.interval({mono: 1}, self.engine.local_range)
        rows = _range_rows({mono: 1}, lo, hi) + self._product_planes(mono)
        self.ineqs += rows
        return rows

    def _product_planes(self, mono: Mono) -> list[QPoly]:
        """Linear bounds of a product of two factors from their ranges (McCormick):
        ``(x - xl)*(y - yl) >= 0`` gives ``x*y >= yl*x + xl*y - xl*yl``, and so on."""
        if len(mono) == 1 and mono[0][1] == 2:
            x = y = mono[0][0]
        elif len(mono) == 2 and mono[0][1] == mono[1][1] == 1:
            x, y = mono[0][0], mono[1][0]
        else:
            return []
        (xl, xh), (yl, yh) = self.engine.local_range(x), self.engine.local_range(y)
        me: QPoly = {mono: 1}
        px: QPoly = {((x, 1),): 1}
        py: QPoly = {((y, 1),): 1}
        rows = []
        for sx, bx, sy, by in ((1, xl, 1, yl), (-1, xh, -1, yh), (1, xl, -1, yh), (-1, xh, 1, yl)):
            if bx in (INF, -INF) or by in (INF, -INF):
                continue
            # sx*(x - bx) >= 0 and sy*(y - by) >= 0, so their product is >= 0:
            # sx*sy*(x*y - by*x - bx*y + bx*by) >= 0
            plane = poly_add(poly_add(me, _scaled(px, -by)), _scaled(py, -bx))
            rows.append(_scaled(poly_add(plane, {(): bx * by}), sx * sy))
        return rows

    def add_constraints(self, constraints: list[tuple[QPoly, frozenset[Atom]]]) -> None:
        """Add every constraint that shares a factor (or a factor's operand's factor) with
        those gathered so far, transitively; each comes with every factor it mentions."""
        pending = list(constraints)
        changed = True
        while changed and pending:
            changed = False
            for item in list(pending):
                g, mentioned = item
                if not mentioned.isdisjoint(self.atoms):
                    pending.remove(item)
                    self.ineqs.append(g)
                    self.constraints += 1
                    self.include(g)
                    changed = True

    def solve(self, target: QPoly | None, first: set[Atom]) -> tuple[Any, Any] | None:
        """Bounds of ``target`` (``None``: only whether there is a solution) over every case
        of the max/min factors (those in ``first`` split first); ``None``: no solution."""
        ids: dict[Mono, int] = {}
        t_id = -1
        eqs = [self._row(p, ids) for p in self.eqs]
        if target is not None:
            # The target is an integer unknown like the others (rows get integer-tightened),
            # so its coefficients must be integers: they are, for canonical expressions.
            assert _scale(target) == 1, "the target of the linear facts has integer coefficients"
            t_eq = self._row(target, ids)
            t_eq.coeffs[t_id] = -1
            eqs.append(t_eq)
        ineqs = [self._row(p, ids) for p in self.ineqs]
        return self._cases(Reduced(ineqs, eqs, t_id), self._split(first, ids))

    def ranges(self, atoms: list[Atom]) -> dict[Atom, tuple[Any, Any]] | None:
        """The bounds of each of ``atoms`` (factors of the system) from one set of rows;
        ``None``: no solution."""
        ids: dict[Mono, int] = {}
        eqs = [self._row(p, ids) for p in self.eqs]
        ineqs = [self._row(p, ids) for p in self.ineqs]
        split = self._split(set(atoms), ids)
        out = {}
        for atom in atoms:
            keep = ids.get(((atom, 1),))
            if keep is None:
                continue  # in no row: nothing narrows it
            answer = self._cases(Reduced(ineqs, eqs, keep), split)
            if answer is None:
                return None
            out[atom] = answer
        return out

    def _split(
        self, first: set[Atom], ids: dict[Mono, int]
    ) -> list[list[tuple[list[Row], list[Row]]]]:
        """The rows of each case of the max/min factors split into their cases (those in
        ``first`` first); past MAX_SPLITS, a factor keeps only its ``>= x, >= y`` facts."""
        split = sorted(self.cases, key=lambda c: (c[0] not in first, c[0].key))[:MAX_SPLITS]
        return [
            [
                ([self._row(p, ids) for p in more], [self._row(p, ids) for p in same])
                for more, same in cases
            ]
            for _, cases in split
        ]

    @staticmethod
    def _cases(
        reduced: Reduced, split: list[list[tuple[list[Row], list[Row]]]]
    ) -> tuple[Any, Any] | None:
        """The widest bounds over the cases that have a solution; ``None`` if none has."""
        lo: Any = INF
        hi: Any = -INF
        for choice in itertools.product((0, 1), repeat=len(split)):
            case_ineqs: list[Row] = []
            case_eqs: list[Row] = []
            for cases, pick in zip(split, choice, strict=True):
                case_ineqs += cases[pick][0]
                case_eqs += cases[pick][1]
            answer = reduced.bounds(case_ineqs, case_eqs)
            if answer is None:
                continue
            lo, hi = min(lo, answer[0]), max(hi, answer[1])
            if lo == -INF and hi == INF:
                break
        if lo > hi:
            return None
        return lo, hi

    @staticmethod
    def _row(p: QPoly, ids: dict[Mono, int]) -> Row:
        scale = _scale(p)
        coeffs: dict[int, int] = {}
        const = 0
        for mono, c in p.items():
            value = int(c * scale)
            if not mono:
                const = value
                continue
            i = ids.get(mono)
            if i is None:
                i = ids[mono] = len(ids)
            coeffs[i] = value
        return Row(coeffs, const)


def _scale(p: QPoly) -> int:
    """The least multiplier that makes the coefficients of ``p`` integers."""
    if all(type(c) is int for c in p.values()):
        return 1
    return math.lcm(*(Fraction(c).denominator for c in p.values()))
