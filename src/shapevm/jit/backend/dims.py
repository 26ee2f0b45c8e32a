"""The dimension heap of a lowered region: every dimension a cell, every expression a
short program over cells, every constraint a check.

Cells ``0 .. nvars-1`` hold the function's dimension variables (bound at each call from
the inputs' shapes, or passed in); the others hold constants or the results of the
dimension program, one step per operation of a `DimExpr` (``+``, ``*``, ``floordiv``,
``mod``, ``max``, ``min``), each subexpression computed once.

>>> import shapevm as sv
>>> b, s = sv.symbolic_shape("b, s")
>>> heap = DimHeap(["b", "s"])
>>> cell = heap.cell(2 * b * s + 1)
>>> heap.evaluate({"b": 3, "s": 5})[cell]
31
>>> heap.cell(7) == heap.cell(7)
True
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from shapevm.shapes import DimExpr
from shapevm.shapes.expr import Atom

UNSET = np.iinfo(np.int64).min

# the executor's step codes (exec.h, enum svx_dimop)
ADD, SUB, MUL, FLOORDIV, MOD, MAX, MIN, ADDC, MULC = range(1, 10)
_ATOM_OPS = {"floordiv": FLOORDIV, "mod": MOD, "max": MAX, "min": MIN}
_STEP: dict[int, Callable[[int, int], int]] = {
    ADD: operator.add,
    ADDC: operator.add,
    SUB: operator.sub,
    MUL: operator.mul,
    MULC: operator.mul,
    FLOORDIV: operator.floordiv,
    MOD: operator.mod,
    MAX: max,
    MIN: min,
}


class DimHeap:
    """Cells, the program that fills them, and the checks on them."""

    def __init__(self, variables: Sequence[str]) -> None:
        self.variables = tuple(variables)
        self.values: list[int] = [int(UNSET)] * len(self.variables)
        self.steps: list[tuple[int, int, int, int]] = []
        self.checks: list[tuple[int, int]] = []  # (cell, 0: >= 0 | 1: == 0)
        self._memo: dict[Any, int] = {("var", v): i for i, v in enumerate(self.variables)}

    def cell(self, d: int | DimExpr) -> int:
        """The cell holding ``d`` (a constant or an expression of the variables)."""
        if isinstance(d, (int, np.integer)):
            return self._const(int(d))
        key = ("expr", d)
        found = self._memo.get(key)
        if found is None:
            found = self._terms(d._terms)
            self._memo[key] = found
        return found

    def check_nonnegative(self, d: int | DimExpr) -> None:
        """At each call, ``d >= 0`` must hold (a constraint)."""
        self.checks.append((self.cell(d), 0))

    def check_zero(self, d: int | DimExpr) -> None:
        self.checks.append((self.cell(d), 1))

    def evaluate(self, env: Mapping[str, int]) -> list[int]:
        """The heap for ``env``, computed as the executor does (for tests and plans)."""
        h = list(self.values)
        for i, v in enumerate(self.variables):
            h[i] = int(env[v])
        for op, a, b, out in self.steps:
            h[out] = _STEP[op](h[a], b if op in (ADDC, MULC) else h[b])
        return h

    def arrays(self) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """(initial heap, program, checks) as the executor takes them."""
        return (
            np.array(self.values, np.int64),
            np.array(self.steps, np.int64).reshape(-1, 4),
            np.array(self.checks, np.int64).reshape(-1, 2),
        )

    # -- building ---------------------------------------------------------------------------
    def _new(self, value: int = int(UNSET)) -> int:
        self.values.append(value)
        return len(self.values) - 1

    def _const(self, c: int) -> int:
        key = ("const", c)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self._new(c)
        return found

    def _step(self, op: int, a: int, b: int) -> int:
        key = ("step", op, a, b)
        found = self._memo.get(key)
        if found is None:
            found = self._new()
            self.steps.append((op, a, b, found))
            self._memo[key] = found
        return found

    def _atom(self, atom: Atom) -> int:
        if atom.op == "var":
            name = atom.args[0]
            cell = self._memo.get(("var", name))
            if cell is None:
                raise KeyError(f"dimension variable {name!r} is not one of {self.variables}")
            return cell
        x, y = (self.cell(a) for a in atom.args)
        return self._step(_ATOM_OPS[atom.op], x, y)

    def _terms(self, terms: Any) -> int:
        total: int | None = None
        const = 0
        for mono, coeff in terms:
            if not mono:
                const += coeff
                continue
            cell: int | None = None
            for atom, power in mono:
                a = self._atom(atom)
                for _ in range(power):
                    cell = a if cell is None else self._step(MUL, cell, a)
            assert cell is not None
            if coeff != 1:
                cell = self._step(MULC, cell, coeff)
            total = cell if total is None else self._step(ADD, total, cell)
        if total is None:
            return self._const(const)
        return self._step(ADDC, total, const) if const else total
