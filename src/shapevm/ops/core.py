"""The vocabulary of the op table: rows (`OpInfo`), attribute schemas, shape-rule results.

An op's shape rule works on *symbolic* shapes: each dimension is an ``int``, a ``DimExpr`` of
the function's dimension variables, or `DYNAMIC` (known only when the program runs, e.g. the
row count of ``nonzero``). A rule returns the output shapes and the `Condition` s it needs
(``matmul`` needs its inner dimensions equal). It does not decide them: the verifier decides
each condition with the symbolic engine under the scope's constraints, and the interpreter
checks the deferred ones (those that involve `DYNAMIC`) on concrete values. Problems a rule
can see without deciding anything (a rank, an axis out of range) raise `ShapeRuleError`.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import numpy as np

from shapevm.ops.dtypes import DType
from shapevm.shapes import DimExpr, Dynamic

SymDim: TypeAlias = "int | DimExpr | Dynamic"
"""One dimension as shape rules see it."""
SymShape: TypeAlias = "tuple[SymDim, ...]"

AttrValue: TypeAlias = "int | float | bool | str | tuple[int | str, ...]"
"""An attribute as stored in bytecode; a ``DIMS`` attribute holds canonical dimension text."""
RuleAttr: TypeAlias = "int | float | bool | str | tuple[int, ...] | tuple[SymDim, ...] | None"
"""An attribute as a rule or kernel receives it: defaults filled in, ``DIMS`` parsed."""

Kernel: TypeAlias = Callable[[Sequence[Any], Mapping[str, Any]], tuple[np.ndarray[Any, Any], ...]]


def _close_matches(name: str, names: list[str]) -> list[str]:
    """The closest name, to explain an unknown one (difflib is imported only then)."""
    import difflib

    return difflib.get_close_matches(name, names, 1)


class AttrKind(enum.Enum):
    """The type of an attribute value."""

    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    STR = "str"
    INTS = "ints"
    DIMS = "dims"  # ints and symbolic dimensions, e.g. a reshape target ``[b, 64]``
    DTYPE = "dtype"  # a dtype name such as ``"f32"``

    def accepts(self, value: AttrValue) -> bool:
        """Whether ``value`` has this kind (an ``int`` is accepted where a float is)."""
        if self is AttrKind.BOOL:
            return isinstance(value, bool)
        if self is AttrKind.INT:
            return isinstance(value, int) and not isinstance(value, bool)
        if self is AttrKind.FLOAT:
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        if self is AttrKind.STR:
            return isinstance(value, str)
        if self is AttrKind.DTYPE:
            return isinstance(value, str) and value in {d.value for d in DType}
        if not isinstance(value, tuple):
            return False
        if self is AttrKind.INTS:
            return all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        return all(isinstance(v, (int, str)) and not isinstance(v, bool) for v in value)


class _Required:
    __slots__ = ()

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Final = _Required()


@dataclass(frozen=True, slots=True)
class AttrSpec:
    """One attribute of an op: name, kind, default (`REQUIRED` or a value or ``None``), doc."""

    name: str
    kind: AttrKind
    default: AttrValue | _Required | None = None
    doc: str = ""

    @property
    def required(self) -> bool:
        return isinstance(self.default, _Required)


@dataclass(frozen=True, slots=True)
class Condition:
    """A relation between two dimensions that an op needs: ``lhs <rel> rhs``.

    ``expected`` says it in terms of the operands, with ``{0}``, ``{1}``... standing for the
    operand names (``"{1}.shape[0] == {0}.shape[1]"``); ``what`` is the headline when it
    fails and ``fix`` the hint. ``rhs`` is the value the op expects and is shown with it.
    """

    lhs: SymDim
    rel: str
    rhs: SymDim
    what: str
    expected: str
    fix: str = ""

    def __post_init__(self) -> None:
        assert self.rel in ("==", ">=", "<=", ">", "<"), self.rel

    @property
    def deferred(self) -> bool:
        """Involves a `DYNAMIC` dimension: only the run time can check it."""
        return isinstance(self.lhs, Dynamic) or isinstance(self.rhs, Dynamic)


@dataclass(frozen=True, slots=True)
class ShapeResult:
    """What a shape rule returns: one shape per output and the conditions it needs."""

    shapes: tuple[SymShape, ...]
    conditions: tuple[Condition, ...] = ()


class ShapeRuleError(Exception):
    """A rule or dtype rule rejects its operands outright (rank, axis, dtype, attribute).

    The texts may use ``{0}``, ``{1}``... for operand names, like `Condition.expected`.
    """

    def __init__(self, what: str, *, expected: str = "", found: str = "", fix: str = "") -> None:
        super().__init__(what)
        self.what = what
        self.expected = expected
        self.found = found
        self.fix = fix


ShapeRule: TypeAlias = Callable[[Sequence[SymShape], Mapping[str, RuleAttr]], ShapeResult]
DTypeRule: TypeAlias = Callable[
    [Sequence["DType | None"], Mapping[str, RuleAttr]], tuple[DType, ...]
]


class OpFlag(enum.Flag):
    """Groups of ops, so passes ask ``OpFlag.ELEMENTWISE in info.flags``, not for names."""

    NONE = 0
    ELEMENTWISE = enum.auto()
    BINARY = enum.auto()
    COMMUTATIVE = enum.auto()
    REDUCTION = enum.auto()
    FUSIBLE = enum.auto()  # may join a fused native kernel
    LAYOUT = enum.auto()  # moves or views data without arithmetic (reshape, transpose)
    DATA_DEPENDENT = enum.auto()  # an output dimension is `DYNAMIC`
    COMPARISON = enum.auto()  # result dtype is bool


@dataclass(frozen=True, slots=True)
class OpInfo:
    """One row of the op table. ``max_arity`` of ``None`` means any number of inputs.

    ``kernel(args, attrs)`` is the reference semantics: ``args`` are NumPy arrays or Python
    scalars, ``attrs`` has every attribute (`filled_attrs`) with ``DIMS`` evaluated to ints.
    ``ufunc`` is the NumPy ufunc that computes the same as ``kernel`` for float operands,
    where there is one: the interpreter and the JIT call it with ``out=`` to write into a
    buffer they own (``None`` for every other op). ``view``, for layout ops of one tensor
    (reshape, transpose, slice), prepares the op for fixed attributes: ``view(attrs)`` is a
    function ``f`` with ``f(x)`` equal to ``kernel([x], attrs)[0]`` for an array ``x``, made
    of one method call on it (the interpreter and compiled regions run it per call).
    """

    name: str
    min_arity: int
    max_arity: int | None
    num_outputs: int
    attrs: tuple[AttrSpec, ...]
    shape_rule: ShapeRule
    dtype_rule: DTypeRule
    kernel: Kernel
    flags: OpFlag
    doc: str
    ufunc: Any = None
    view: Any = None

    def arity_text(self) -> str:
        """``"2"``, ``"1 to 3"`` or ``"at least 1"``."""
        if self.max_arity == self.min_arity:
            return str(self.min_arity)
        if self.max_arity is None:
            return f"at least {self.min_arity}"
        return f"{self.min_arity} to {self.max_arity}"

    def accepts_arity(self, n: int) -> bool:
        return n >= self.min_arity and (self.max_arity is None or n <= self.max_arity)

    def attr_spec(self, name: str) -> AttrSpec | None:
        for spec in self.attrs:
            if spec.name == name:
                return spec
        return None

    def attr_problems(self, given: Mapping[str, AttrValue]) -> list[tuple[str, str, str]]:
        """Every problem with ``given`` as (what, expected, found); empty when it is fine."""
        problems: list[tuple[str, str, str]] = []
        schema = ", ".join(f"{s.name}: {s.kind.value}" for s in self.attrs) or "no attributes"
        for name, value in given.items():
            spec = self.attr_spec(name)
            if spec is None:
                close = _close_matches(name, [s.name for s in self.attrs])
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                problems.append((f"unknown attribute {name!r}{hint}", schema, name))
            elif not spec.kind.accepts(value):
                problems.append(
                    (
                        f"attribute {name!r} has the wrong type",
                        f"{name}: {spec.kind.value}",
                        f"{name}={format_attr(value)}",
                    )
                )
        for spec in self.attrs:
            if spec.required and spec.name not in given:
                problems.append((f"missing attribute {spec.name!r}", schema, "not given"))
        return problems

    def filled_attrs(self, given: Mapping[str, AttrValue]) -> dict[str, AttrValue | None]:
        """``given`` plus the defaults of the attributes it leaves out."""
        out: dict[str, AttrValue | None] = {}
        for spec in self.attrs:
            if spec.name in given:
                out[spec.name] = given[spec.name]
            elif not isinstance(spec.default, _Required):
                out[spec.name] = spec.default
        return out


def format_attr(value: AttrValue | None) -> str:
    """The text form of an attribute value: ``1``, ``0.5``, ``true``, ``"s"``, ``[b, 2]``."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format_float(value)
    if isinstance(value, str):
        return json.dumps(value)  # escapes quotes and control characters
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def format_float(value: float) -> str:
    """A float that reads back exactly and never looks like an int: ``1.0``, ``inf``."""
    text = repr(float(value))
    return text if any(c in text for c in ".en") else text + ".0"


_REGISTRY: dict[str, OpInfo] = {}


def register(info: OpInfo) -> OpInfo:
    """Add a row to the op table; a name can be registered once."""
    if info.name in _REGISTRY:
        raise ValueError(f"op {info.name!r} is already registered")
    _REGISTRY[info.name] = info
    return info


def get_op(name: str) -> OpInfo | None:
    """The row for ``name``, or ``None`` for an unknown op."""
    return _REGISTRY.get(name)


def all_ops() -> tuple[OpInfo, ...]:
    """Every registered op, in registration order."""
    return tuple(_REGISTRY.values())


def suggest_op(name: str) -> str | None:
    """The registered op name closest to ``name``, for "did you mean" hints."""
    close = _close_matches(name, list(_REGISTRY))
    return close[0] if close else None
