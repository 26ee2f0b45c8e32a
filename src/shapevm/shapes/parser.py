"""Parser for shape specifications and constraints.

Grammar (everything ``jax.export.symbolic_shape`` accepts, plus ``//``, ``%``, ``**`` and
parentheses)::

    spec       := ["("] [dim ("," dim)* [","]] [")"]
    dim        := expr | "_" | "..."
    constraint := expr (">=" | "<=" | "==" | ">" | "<") expr
    expr       := term (("+" | "-") term)*
    term       := unary (("*" | "//" | "%") unary)*
    unary      := "-" unary | power
    power      := primary [("^" | "**") unary]
    primary    := INT | NAME | FUNC "(" expr "," expr ")" | "(" expr ")"
    FUNC       := floordiv | mod | max | min
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from shapevm.shapes import expr as E

if TYPE_CHECKING:
    from shapevm.shapes.scope import SymbolicScope

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(\.\.\.|\*\*|//|>=|<=|==|[-+*%^(),<>]))")
_FUNCS = {"floordiv": E.floordiv, "mod": E.mod}
PLACEHOLDER_ONE = "_"
PLACEHOLDER_MANY = "..."
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*|_[A-Za-z0-9_]+")


class SpecSyntaxError(ValueError):
    """A shape specification or constraint is not well formed."""


def tokenize(text: str, what: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    end = len(text.rstrip())
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None:
            raise SpecSyntaxError(
                f"Invalid {what} {text!r}: unexpected character {text[pos:].lstrip()[:1]!r} "
                f"at position {pos}.\n"
                "  expected: integers, variable names, + - * // % ^ **, parentheses, "
                "floordiv/mod/max/min(e1, e2)"
            )
        tokens.append(m.group(m.lastindex or 0))
        pos = m.end()
    return tokens


class _Parser:
    __slots__ = ("pos", "scope", "text", "tokens", "what")

    def __init__(self, text: str, tokens: list[str], scope: SymbolicScope, what: str) -> None:
        self.text = text
        self.tokens = tokens
        self.pos = 0
        self.scope = scope
        self.what = what

    def error(self, expected: str) -> SpecSyntaxError:
        found = self.tokens[self.pos] if self.pos < len(self.tokens) else "end of input"
        return SpecSyntaxError(
            f"Invalid {self.what} {self.text!r}: expected {expected}, found {found!r} "
            f"(token {self.pos + 1})."
        )

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, tok: str) -> None:
        if self.peek() != tok:
            raise self.error(repr(tok))
        self.pos += 1

    def expr(self) -> E.DimSize:
        result = self.term()
        while (tok := self.peek()) in ("+", "-"):
            self.pos += 1
            rhs = self.term()
            result = E.add(result, rhs) if tok == "+" else E.sub(result, rhs)
        return result

    def term(self) -> E.DimSize:
        result = self.unary()
        while (tok := self.peek()) in ("*", "//", "%"):
            self.pos += 1
            rhs = self.unary()
            if tok == "*":
                result = E.mul(result, rhs)
            elif tok == "//":
                result = E.floordiv(result, rhs)
            else:
                result = E.mod(result, rhs)
        return result

    def unary(self) -> E.DimSize:
        if self.peek() == "-":
            self.pos += 1
            return E.mul(self.unary(), -1)
        return self.power()

    def power(self) -> E.DimSize:
        base = self.primary()
        if self.peek() in ("^", "**"):
            self.pos += 1
            exp = self.unary()
            if not isinstance(exp, int) or exp < 0:
                raise SpecSyntaxError(
                    f"Invalid {self.what} {self.text!r}: the exponent must be a non-negative "
                    f"integer constant, found {exp}."
                )
            return E.power(base, exp)
        return base

    def primary(self) -> E.DimSize:
        tok = self.peek()
        if tok is None:
            raise self.error("a dimension expression")
        if tok.isdigit():
            self.pos += 1
            return int(tok)
        if tok == "(":
            self.pos += 1
            inner = self.expr()
            self.take(")")
            return inner
        if tok[0].isalpha() or (tok[0] == "_" and tok != PLACEHOLDER_ONE):
            self.pos += 1
            if self.peek() == "(" and tok in ("floordiv", "mod", "max", "min"):
                self.pos += 1
                a = self.expr()
                self.take(",")
                b = self.expr()
                self.take(")")
                if tok in _FUNCS:
                    return _FUNCS[tok](a, b)
                return E.max_min(tok, a, b)
            return self.scope.var(tok)
        raise self.error("a dimension expression")

    def at_end(self) -> bool:
        return self.pos >= len(self.tokens)


def parse_dims(spec: str, scope: SymbolicScope) -> list[E.DimSize | str]:
    """Parse a shape spec into dimensions; placeholders come back as ``"_"``/``"..."``."""
    tokens = tokenize(spec, "shape specification")
    if tokens and tokens[0] == "(" and _closing(tokens) == len(tokens) - 1:
        tokens = tokens[1:-1]
    p = _Parser(spec, tokens, scope, "shape specification")
    dims: list[E.DimSize | str] = []
    while not p.at_end():
        tok = p.peek()
        nxt = p.tokens[p.pos + 1] if p.pos + 1 < len(p.tokens) else ","
        if tok in (PLACEHOLDER_ONE, PLACEHOLDER_MANY) and nxt == ",":
            p.pos += 1
            dims.append(tok)
        elif nxt == "," and tok is not None and _NAME.fullmatch(tok):
            p.pos += 1  # a lone variable, the common case: no expression to parse
            dims.append(scope.var(tok))
        elif nxt == "," and tok is not None and tok.isdigit():
            p.pos += 1
            dims.append(int(tok))
        else:
            dims.append(p.expr())
        if not p.at_end():
            p.take(",")
    return dims


def _closing(tokens: list[str]) -> int:
    depth = 0
    for i, tok in enumerate(tokens):
        if tok == "(":
            depth += 1
        elif tok == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def parse_constraint(text: str, scope: SymbolicScope) -> tuple[E.DimSize, str, E.DimSize]:
    """Parse ``e1 OP e2`` with OP one of ``>= <= == > <``."""
    tokens = tokenize(text, "constraint")
    p = _Parser(text, tokens, scope, "constraint")
    lhs = p.expr()
    op = p.peek()
    if op not in (">=", "<=", "==", ">", "<"):
        raise SpecSyntaxError(
            f"Invalid constraint {text!r}: expected one of '>=', '<=', '==' between two "
            f"dimension expressions, found {op if op is not None else 'end of input'!r}."
        )
    p.pos += 1
    rhs = p.expr()
    if not p.at_end():
        raise p.error("end of constraint")
    return lhs, op, rhs
