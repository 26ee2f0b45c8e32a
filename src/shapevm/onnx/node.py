"""What a converter sees of one ONNX node (`Node`), and the row describing a converter (`Op`).

A converter is a function ``fn(node, *inputs) -> value or tuple of values``: it reads the
node's attributes with `Node.attr`, gets the input values (``None`` for an omitted
optional input) and builds the result with `shapevm.numpy`, `shapevm.nn` and the op table,
so that what it emits is verified bytecode like any traced function's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shapevm.onnx.errors import Problem

if TYPE_CHECKING:
    import onnx

    from shapevm.onnx.graph import Runner

Check = Callable[["Node"], "list[Problem]"]


@dataclass(frozen=True)
class Op:
    """One ONNX operator the importer converts.

    ``arith``: the converter computes with its float inputs, so float16 inputs are computed
    in float32 and the float results rounded back to float16 (ops that only move data keep
    float16). ``known``: input positions that must be known at import (shapes, axes, pads:
    a shapevm program has static ranks and symbolic sizes). ``check`` finds unsupported
    attribute values before anything is traced. ``note`` says what is not covered.
    """

    fn: Callable[..., Any]
    arith: bool = True
    known: tuple[int, ...] = ()
    check: Check | None = None
    note: str = ""


@dataclass
class Node:
    proto: onnx.NodeProto
    opset: int
    runner: Runner | None = None
    _attrs: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def op_type(self) -> str:
        return str(self.proto.op_type)

    @property
    def where(self) -> str:
        name = self.proto.name or (self.proto.output[0] if self.proto.output else "")
        return f"node {name!r} ({self.op_type}, opset {self.opset})"

    @property
    def attrs(self) -> dict[str, Any]:
        if self._attrs is None:
            from shapevm.onnx.model_io import onnx_module

            helper = onnx_module().helper
            self._attrs = {a.name: helper.get_attribute_value(a) for a in self.proto.attribute}
        return self._attrs

    def attr(self, name: str, default: Any = None) -> Any:
        """The attribute's value (strings decoded), or ``default`` when absent."""
        value = self.attrs.get(name, default)
        if isinstance(value, bytes):
            return value.decode("utf-8", errors="replace")
        if isinstance(value, list) and value and isinstance(value[0], bytes):
            return [v.decode("utf-8", errors="replace") for v in value]
        return value

    def has(self, name: str) -> bool:
        return name in self.attrs

    def problem(self, what: str, *, expected: str = "", found: str = "", fix: str = "") -> Problem:
        return Problem(self.where, what, expected=expected, found=found, fix=fix)

    def unsupported(self, what: str, *, expected: str = "", found: str = "") -> ConvertError:
        """The error for an attribute value or input this converter does not handle."""
        return ConvertError(self.problem(what, expected=expected, found=found))


class ConvertError(Exception):
    """A node cannot be converted; ``problem`` says where and why."""

    def __init__(self, problem: Problem, constraint: str | None = None) -> None:
        super().__init__(problem.render())
        self.problem = problem
        self.constraint = constraint  # one the model needs (`TracingError.constraint`)


def attr_is(name: str, allowed: tuple[Any, ...], default: Any) -> Check:
    """A check that attribute ``name`` (``default`` when absent) is one of ``allowed``."""

    def check(node: Node) -> list[Problem]:
        value = node.attr(name, default)
        if value in allowed:
            return []
        return [
            node.problem(
                f"attribute {name}={value!r} is not supported",
                expected=" or ".join(repr(a) for a in allowed),
                found=repr(value),
            )
        ]

    return check


def checks(*fns: Check) -> Check:
    def check(node: Node) -> list[Problem]:
        return [p for fn in fns for p in fn(node)]

    return check
