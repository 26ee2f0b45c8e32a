"""Errors of the ONNX importer, rendered by the project's one message helper.

>>> p = Problem("node 'mm' (Foo, domain ai.onnx, opset 13)", "unsupported operator Foo",
...             expected="an operator of docs/onnx.md", found="Foo")
>>> print(UnsupportedModelError("model.onnx", [p]))
model.onnx: 1 node cannot be imported
  node 'mm' (Foo, domain ai.onnx, opset 13): unsupported operator Foo
    expected: an operator of docs/onnx.md
    found:    Foo
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shapevm.bytecode.errors import format_message


@dataclass(frozen=True)
class Problem:
    """One reason a model cannot be imported, at one place of it.

    ``needs`` names graph inputs whose values, fixed at import (``load(constants=...)``),
    would remove the problem.
    """

    where: str
    what: str
    expected: str = ""
    found: str = ""
    fix: str = ""
    needs: tuple[str, ...] = ()

    def render(self) -> str:
        body = format_message(
            f"{self.where}: {self.what}", expected=self.expected, found=self.found, fix=self.fix
        )
        return "\n".join("  " + line for line in body.splitlines())


class UnsupportedModelError(ValueError):
    """The model uses something shapevm does not import: an operator, an attribute value,
    a domain, an opset, a dtype, or a size only known from input values. Every problem of
    the model is listed at once (``problems``), before anything runs."""

    def __init__(self, model: str, problems: Sequence[Problem]) -> None:
        self.model = model
        self.problems = tuple(problems)
        head = f"{model}: {_count(self.problems)} cannot be imported"
        super().__init__("\n".join([head, *(p.render() for p in self.problems)]))

    @property
    def needs(self) -> tuple[str, ...]:
        """Graph inputs whose values would make the model importable, if that is all it
        lacks (else ``()``)."""
        if not self.problems or any(not p.needs for p in self.problems):
            return ()
        return tuple(dict.fromkeys(n for p in self.problems for n in p.needs))


def _count(problems: Sequence[Problem]) -> str:
    """``"2 nodes"``, or ``"1 node and 1 other part"`` when some problems are not at a node
    (the opset, a graph input's type): each node counted once, however many problems it has.

    >>> _count([Problem("node 'a' (Foo, opset 17)", "x"), Problem("the model", "y")])
    '1 node and 1 other part'
    """
    nodes = {p.where[: p.where.find(")") + 1] for p in problems if p.where.startswith("node ")}
    others = sum(not p.where.startswith("node ") for p in problems)
    parts = [_plural(len(nodes), "node")] if nodes or not others else []
    if others:
        parts.append(_plural(others, "other part" if nodes else "part"))
    return " and ".join(parts)


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


class ModelFileError(ValueError):
    """The bytes are not a model shapevm can read: truncated or corrupt protobuf, external
    data outside the model's directory, sizes that do not fit the data."""

    def __init__(self, what: str, *, expected: str = "", found: str = "", fix: str = "") -> None:
        self.what, self.expected, self.found, self.fix = what, expected, found, fix
        super().__init__(format_message(what, expected=expected, found=found, fix=fix))
