"""Expression templates matched against the ops of a region, for pattern lowerings.

A template is a small tree: `T` is an op (``T("add", (a, b))``), `V` a value bound by name
(the same name must bind the same value everywhere), `L` a literal operand (a Python
number in the bytecode, compared exactly or captured by name). Matching starts at a value
and walks *backwards* through the ops that produced it; ``add``, ``mul``, ``maximum`` and
``minimum`` match with their operands in either order.

``match_template(graph, root, template)`` gives a `Match` (the bound values and literals
and the positions of the matched ops) or ``None``. `Match.closed` says whether the values
made inside the match are used only inside it (and do not leave the region), which is what
a lowering must check before it replaces the ops by one kernel.

>>> t = T("maximum", (T("add", (V("x"), V("b"))), L(0.0)))
>>> t
maximum(add(x, b), 0.0)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from shapevm.bytecode.isa import Reg
from shapevm.bytecode.program import OpCall
from shapevm.jit.graph import Op, RegionGraph

COMMUTATIVE = frozenset({"add", "mul", "maximum", "minimum"})

OpCheck = Callable[[RegionGraph, Op], bool]


@dataclass(frozen=True)
class V:
    """Any value, bound to ``name`` (a second use of the name must be the same value)."""

    name: str

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True)
class L:
    """A literal operand: equal to ``value`` (``None``: any number), captured as ``name``."""

    value: float | None = None
    name: str = ""
    rtol: float = 0.0

    def __repr__(self) -> str:
        return self.name or repr(self.value)


@dataclass(frozen=True)
class T:
    """An op ``op`` applied to ``args``; ``check(graph, op)`` tests its attributes, and
    ``name`` binds its result (then later `V` of that name must be the same value)."""

    op: str
    args: tuple[Any, ...]
    check: OpCheck | None = None
    name: str = ""

    def __repr__(self) -> str:
        return f"{self.op}({', '.join(repr(a) for a in self.args)})"


Template = T | V | L


@dataclass
class Match:
    """What a template matched: bound values, captured literals, positions of its ops."""

    values: dict[str, int] = field(default_factory=dict)
    literals: dict[str, float] = field(default_factory=dict)
    positions: set[int] = field(default_factory=set)
    root: int = -1

    def copy(self) -> Match:
        return Match(dict(self.values), dict(self.literals), set(self.positions), self.root)

    def closed(self, graph: RegionGraph, extra: Sequence[int] = ()) -> bool:
        """Every value made by the matched ops except the root is read only by them (or by
        the ops at ``extra``) and does not leave the region."""
        inside = self.positions | set(extra)
        for p in self.positions:
            for v in graph.ops[p].outs:
                if v == self.root:
                    continue
                if v in graph.live_out:
                    return False
                if any(u not in inside for u in graph.users.get(v, ())):
                    return False
        return True


def operands(op: Op) -> list[tuple[str, Any]]:
    """The operands of a call in order: ``("v", value id)`` or ``("l", number)``."""
    instr = op.instr
    assert isinstance(instr, OpCall)
    tensors = iter(op.ins)
    out: list[tuple[str, Any]] = []
    for x in instr.ins:
        if isinstance(x, Reg):
            out.append(("v", next(tensors)))
        else:
            out.append(("l", x))
    return out


def producer(graph: RegionGraph, vid: int) -> Op | None:
    """The call that made ``vid`` inside the region, or ``None``."""
    value = graph.value(vid)
    if value.kind != "temp" or value.producer < 0:
        return None
    op = graph.ops[value.producer]
    return op if op.kind == "call" and op.info is not None else None


def match_template(graph: RegionGraph, root: int, template: Template) -> Match | None:
    """Match ``template`` with the value ``root`` as its result."""
    m = Match(root=root)
    return m if _match(graph, ("v", root), template, m) else None


def _match(graph: RegionGraph, operand: tuple[str, Any], t: Template, m: Match) -> bool:
    kind, x = operand
    if isinstance(t, L):
        if kind != "l" or isinstance(x, bool) or not isinstance(x, (int, float)):
            return False
        if t.value is not None:
            if t.rtol:
                if abs(x - t.value) > t.rtol * abs(t.value):
                    return False
            elif x != t.value:
                return False
        if t.name:
            if t.name in m.literals and m.literals[t.name] != x:
                return False
            m.literals[t.name] = float(x)
        return True
    if kind != "v":
        return False
    if isinstance(t, V):
        bound = m.values.get(t.name)
        if bound is None:
            m.values[t.name] = x
            return True
        return bool(bound == x)
    if t.name and t.name in m.values:
        return bool(m.values[t.name] == x)
    op = producer(graph, x)
    if op is None or op.info is None or op.info.name != t.op or len(op.outs) != 1:
        return False
    if t.check is not None and not t.check(graph, op):
        return False
    ops = operands(op)
    if len(ops) != len(t.args):
        return False
    orders = [ops]
    if t.op in COMMUTATIVE and len(ops) == 2:
        orders.append([ops[1], ops[0]])
    for order in orders:
        trial = m.copy()
        if all(_match(graph, o, a, trial) for o, a in zip(order, t.args, strict=True)):
            trial.positions.add(op.pos)
            if t.name:
                trial.values[t.name] = x
            m.values, m.literals, m.positions = trial.values, trial.literals, trial.positions
            return True
    return False


def users(graph: RegionGraph, vid: int) -> list[int]:
    """Positions of the ops reading ``vid``, each once, in order."""
    return sorted(set(graph.users.get(vid, ())))


def only_user(graph: RegionGraph, vid: int) -> Op | None:
    """The one op reading ``vid`` (``None`` if there are several, or it leaves the region)."""
    found = users(graph, vid)
    if len(found) != 1 or vid in graph.live_out:
        return None
    op = graph.ops[found[0]]
    return op if op.kind == "call" and op.info is not None else None


def last_axis(keepdims: bool = True) -> OpCheck:
    """An attribute check: a reduction over the last axis only, with this ``keepdims``."""

    def check(graph: RegionGraph, op: Op) -> bool:
        rank = len(graph.value(op.ins[0]).shape) if op.ins else 0
        axis = op.attrs.get("axis")
        if axis is None or rank == 0:
            return False
        axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
        return (
            len(axes) == 1
            and axes[0] in (rank - 1, -1)
            and bool(op.attrs.get("keepdims")) == keepdims
        )

    return check


def attr_is(name: str, value: Any) -> OpCheck:
    """An attribute check: ``op.attrs[name] == value`` (tuples and lists alike)."""

    def check(graph: RegionGraph, op: Op) -> bool:
        got = op.attrs.get(name)
        if isinstance(got, list):
            got = tuple(got)
        return bool(got == value)

    return check


__all__ = [
    "COMMUTATIVE",
    "L",
    "Match",
    "T",
    "V",
    "attr_is",
    "last_axis",
    "match_template",
    "only_user",
    "operands",
    "producer",
    "users",
]
