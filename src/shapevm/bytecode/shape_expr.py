"""Shape arithmetic: the expressions of ``SHAPE_COMPUTE`` and ``BRANCH_IF``, and `decide`,
which settles a relation between symbolic dimensions under a scope's constraints.

An expression is an ``int``, a shape register, or `ShapeBin` of two expressions with one of
``+ - * // %``. It is evaluated on concrete values at run time and on symbolic dimensions by
the verifier (the register values then are ``DimExpr``), so one tree serves both.

>>> e = parse_shape_expr("2 * (s0 + 1)")
>>> format_shape_expr(e)
'2*(s0 + 1)'
>>> evaluate_shape_expr(e, {Reg.parse("s0"): 3})
8
"""

from __future__ import annotations

import enum
import operator
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from shapevm.bytecode.isa import Reg
from shapevm.ops import Dynamic, SymDim
from shapevm.shapes import InconclusiveDimensionOperation

BINARY_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "//": operator.floordiv,
    "%": operator.mod,
}
COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2}
MAX_DEPTH = 64  # bounds recursion for parsing, printing and decoding untrusted input


@dataclass(frozen=True, slots=True)
class ShapeBin:
    op: str
    lhs: ShapeExpr
    rhs: ShapeExpr


ShapeExpr: TypeAlias = "int | Reg | ShapeBin"


@dataclass(frozen=True, slots=True)
class ShapeCmp:
    """A shape predicate ``lhs op rhs`` for ``BRANCH_IF``."""

    op: str
    lhs: ShapeExpr
    rhs: ShapeExpr

    def __str__(self) -> str:
        return f"{format_shape_expr(self.lhs)} {self.op} {format_shape_expr(self.rhs)}"


def shape_expr_regs(expr: ShapeExpr | ShapeCmp) -> Iterator[Reg]:
    """The registers an expression reads, left to right."""
    if isinstance(expr, Reg):
        yield expr
    elif isinstance(expr, (ShapeBin, ShapeCmp)):
        yield from shape_expr_regs(expr.lhs)
        yield from shape_expr_regs(expr.rhs)


def shape_expr_depth(expr: ShapeExpr) -> int:
    if isinstance(expr, ShapeBin):
        return 1 + max(shape_expr_depth(expr.lhs), shape_expr_depth(expr.rhs))
    return 0


def format_shape_expr(expr: ShapeExpr, parent: int = 0, right: bool = False) -> str:
    """Text with the fewest parentheses: ``*``-like ops unspaced, ``+``/``-`` spaced."""
    if isinstance(expr, bool):
        raise TypeError("a shape expression holds ints and registers, not bools")
    if isinstance(expr, int):
        return str(expr) if expr >= 0 else f"({expr})"
    if isinstance(expr, Reg):
        return str(expr)
    prec = _PRECEDENCE[expr.op]
    sep = f" {expr.op} " if prec == 1 else expr.op
    text = format_shape_expr(expr.lhs, prec) + sep + format_shape_expr(expr.rhs, prec, True)
    return f"({text})" if prec < parent or (prec == parent and right) else text


T = TypeVar("T")


def evaluate_shape_expr(expr: ShapeExpr, values: Mapping[Reg, T]) -> T | int:
    """The value of ``expr`` given register values (ints, or symbolic dimensions)."""
    if isinstance(expr, int):
        return expr
    if isinstance(expr, Reg):
        return values[expr]
    lhs = evaluate_shape_expr(expr.lhs, values)
    rhs = evaluate_shape_expr(expr.rhs, values)
    result: T | int = BINARY_OPS[expr.op](lhs, rhs)
    return result


_TOKEN = re.compile(r"\s*(?:(\d+)|([ts]\d+)|(//|==|!=|<=|>=|[-+*%()<>]))")


class ShapeExprSyntaxError(ValueError):
    """Text that is not a shape expression; ``column`` is where reading stopped."""

    def __init__(self, message: str, text: str, column: int) -> None:
        super().__init__(f"{message} at column {column + 1} of {text!r}")
        self.column = column


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, int]] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if m is None:
                raise ShapeExprSyntaxError("unexpected character", text, pos)
            self.tokens.append((m.group(m.lastindex or 0), m.start(m.lastindex or 0)))
            pos = m.end()
        self.i = 0

    def peek(self) -> str:
        return self.tokens[self.i][0] if self.i < len(self.tokens) else ""

    def fail(self, message: str) -> ShapeExprSyntaxError:
        col = self.tokens[self.i][1] if self.i < len(self.tokens) else len(self.text)
        return ShapeExprSyntaxError(message, self.text, col)

    def take(self) -> str:
        tok = self.peek()
        self.i += 1
        return tok

    def expr(self, depth: int = 0) -> ShapeExpr:
        node = self.term(depth)
        while self.peek() in ("+", "-"):
            op = self.take()
            node = ShapeBin(op, node, self.term(depth))
        return node

    def term(self, depth: int) -> ShapeExpr:
        node = self.atom(depth)
        while self.peek() in ("*", "//", "%"):
            op = self.take()
            node = ShapeBin(op, node, self.atom(depth))
        return node

    def atom(self, depth: int) -> ShapeExpr:
        if depth > MAX_DEPTH:
            raise self.fail(f"expression nested deeper than {MAX_DEPTH}")
        tok = self.peek()
        if tok == "(":
            self.take()
            node = self.expr(depth + 1)
            if self.take() != ")":
                self.i -= 1
                raise self.fail("expected ')'")
            return node
        if tok == "-":
            self.take()
            inner = self.atom(depth + 1)
            return -inner if isinstance(inner, int) else ShapeBin("-", 0, inner)
        if tok.isdigit():
            self.take()
            return int(tok)
        if tok[:1] in ("t", "s"):
            self.take()
            return Reg.parse(tok)
        raise self.fail("expected a number, a shape register or '('")

    def end(self) -> None:
        if self.i != len(self.tokens):
            raise self.fail("unexpected text")


def parse_shape_expr(text: str) -> ShapeExpr:
    """Parse ``2*s0 + 1``; raises `ShapeExprSyntaxError` with the column."""
    parser = _Parser(text)
    node = parser.expr()
    parser.end()
    return node


def parse_shape_cmp(text: str) -> ShapeCmp:
    """Parse a predicate such as ``s0 > 16``."""
    parser = _Parser(text)
    lhs = parser.expr()
    op = parser.take()
    if op not in COMPARISONS:
        parser.i -= 1
        raise parser.fail("expected a comparison (== != < <= > >=)")
    rhs = parser.expr()
    parser.end()
    return ShapeCmp(op, lhs, rhs)


# deciding relations between symbolic dimensions -------------------------------------------


class Verdict(enum.Enum):
    HOLDS = "holds"
    FAILS = "fails"  # provably false for some valuation allowed by the constraints
    UNKNOWN = "unknown"  # the engine cannot decide it under the constraints
    DEFERRED = "deferred"  # involves a dynamic dimension: checked at run time


def _try(test: Callable[[], bool]) -> bool | None:
    try:
        return bool(test())
    except InconclusiveDimensionOperation:
        return None


def decide(lhs: SymDim, rel: str, rhs: SymDim) -> Verdict:
    """Decide ``lhs rel rhs`` for every valuation the scope's constraints allow."""
    if isinstance(lhs, Dynamic) or isinstance(rhs, Dynamic):
        return Verdict.DEFERRED
    a: Any = lhs
    b: Any = rhs
    if rel == "==":
        if a == b:
            return Verdict.HOLDS
        diff = a - b  # the difference's own canonical form may see what a == b did not
        if isinstance(diff, int):
            return Verdict.HOLDS if diff == 0 else Verdict.FAILS
        if _try(lambda: diff >= 1) or _try(lambda: diff <= -1):
            return Verdict.FAILS
        return Verdict.UNKNOWN
    tests: dict[str, Callable[[], bool]] = {
        ">=": lambda: a >= b,
        "<=": lambda: a <= b,
        ">": lambda: a > b,
        "<": lambda: a < b,
    }
    result = _try(tests[rel])
    if result is None:
        return Verdict.UNKNOWN
    return Verdict.HOLDS if result else Verdict.FAILS
