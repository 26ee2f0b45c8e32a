"""Lowering: turning the ops of a region into steps, with pluggable pattern lowerings.

`register_lowering(name, matcher, builder)` adds a pattern. The compiler walks a region's
ops in order and asks each registered matcher (in registration order) whether a group of
ops starts at the current op; a builder then makes one `Lowered` step for the group (a
fused native kernel, a packed GEMM with its epilogue...). Ops no pattern claims get the
default lowering:

- elementwise ops with a NumPy ufunc, ``matmul``, ``sum``/``max`` and ``concatenate``
  write into a planned buffer through ``out=`` (checked at compile time on a small probe:
  the result must have the program's dtype and equal the reference kernel's);
- every other op calls its reference kernel (or the scheduler's choice) and allocates.

A matcher is ``matcher(graph, pos) -> positions | None``; a builder is
``builder(graph, group, ctx) -> Lowered``. The compiler checks that a group can run as one
step at its last op (no op outside the group in between reads a value the group makes).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shapevm.bytecode.program import OpCall
from shapevm.jit.graph import Op, RegionGraph
from shapevm.ops import OpFlag, OpInfo

Run = Callable[..., Any]


@dataclass(frozen=True)
class Group:
    """Ops claimed by one pattern, with the values it reads and the values it must write."""

    positions: tuple[int, ...]
    ins: tuple[int, ...]  # value ids read from outside the group, in first-use order
    outs: tuple[int, ...]  # value ids used after the group or live-out
    internal: tuple[int, ...]  # values that never leave the group (no storage at all)


@dataclass
class Lowered:
    """One step of a compiled region.

    ``kind`` ``"out"``: ``run(args, outs, frame)`` writes the group's results into ``outs``
    (planned buffers or fresh arrays of the right shape and dtype). ``kind`` ``"alloc"``:
    ``run(args, frame) -> results`` allocates (its results may be views of its arguments).
    ``inplace`` lists ``(out_index, in_index)`` pairs where the output may share the
    input's buffer when the input dies at this step (same dtype and shape).

    ``shape_generic``: the step is right for every value of the dimension variables, not
    only for the reference values it was built at (it bakes none of them in, and chooses
    no kernel that applies only to some shapes). A variant made of such steps may serve
    any key of its function (`shapevm.jit.JitEngine` lets a key borrow it until its own
    variant is ready). Pattern builders that know this set it.
    """

    kind: str
    run: Run
    inplace: tuple[tuple[int, int], ...] = ()
    pattern: str = ""
    group: Group | None = None
    label: str = ""
    ops: tuple[Op, ...] = field(default_factory=tuple)
    # a NumPy ufunc called on the operands (``None`` marks tensors in ``template``), so the
    # compiler can make one closure that calls it directly: ``run`` does the same, slower
    ufunc: np.ufunc | None = None
    template: tuple[Any, ...] = ()
    shape_generic: bool = False
    # a layout op of one tensor (`OpInfo.view`): ``view(x, frame)`` is its one result, so
    # the compiler can make one closure for it (``run`` does the same, slower)
    view: Callable[[Any, Any], Any] | None = None


@dataclass
class CompileContext:
    """What builders may use: the reference dimension values, a cancellation check, the
    scheduler's kernel choice, and whether native code is built in a separate process."""

    env: Mapping[str, int]
    check: Callable[[], None] = lambda: None
    choose: Callable[..., Any] | None = None
    kernel_process: bool = True
    deadline: float | None = None  # time.monotonic() after which the compile is abandoned

    def time_left(self, default: float = 300.0) -> float:
        """Seconds left before the deadline (at least a little), for blocking waits."""
        if self.deadline is None:
            return default
        return max(0.5, self.deadline - time.monotonic())


Matcher = Callable[[RegionGraph, int], "Sequence[int] | None"]
Builder = Callable[[RegionGraph, Group, CompileContext], Lowered]


@dataclass(frozen=True)
class Lowering:
    name: str
    matcher: Matcher
    builder: Builder


_REGISTRY: dict[str, Lowering] = {}
_LOCK = threading.Lock()


def register_lowering(name: str, matcher: Matcher, builder: Builder) -> None:
    """Add (or replace) the pattern ``name``; patterns are tried in registration order."""
    with _LOCK:
        _REGISTRY.pop(name, None)
        _REGISTRY[name] = Lowering(name, matcher, builder)


def unregister_lowering(name: str) -> None:
    """Remove the pattern ``name`` (no error when it is absent)."""
    with _LOCK:
        _REGISTRY.pop(name, None)


def registered_lowerings() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def lowerings(names: Sequence[str] | None) -> list[Lowering]:
    """The registered patterns called ``names`` (all of them for ``None``), in order."""
    with _LOCK:
        found = list(_REGISTRY.values())
    if names is None:
        return found
    unknown = set(names) - {lo.name for lo in found}
    if unknown:
        raise ValueError(f"unknown lowering(s) {sorted(unknown)}; registered: {sorted(_REGISTRY)}")
    return [lo for lo in found if lo.name in names]


def make_group(graph: RegionGraph, positions: Sequence[int]) -> Group | None:
    """The group of ``positions``, or ``None`` when it cannot run as one step at its last op:
    an op in between reads a value the group makes, or writes (or frees) a register the
    group reads."""
    pos = tuple(sorted(set(positions)))
    if not pos or any(graph.ops[p].kind != "call" for p in pos):
        return None
    inside = set(pos)
    made = {v for p in pos for v in graph.ops[p].outs}
    ins: list[int] = []
    for p in pos:
        for v in graph.ops[p].ins:
            if v not in made and v not in ins:
                ins.append(v)
    for q in range(pos[0], pos[-1]):
        op = graph.ops[q]
        if q in inside:
            continue
        if any(v in made for v in op.ins):
            return None
        written = {graph.value(w).reg for w in op.outs if w not in ins}
        if op.kind == "free":
            written.update(op.instr.uses())
        for v in ins:
            value = graph.value(v)
            if q > value.producer and value.reg in written:
                return None  # the register no longer holds v when the group runs
    outs: list[int] = []
    internal: list[int] = []
    for p in pos:
        for v in graph.ops[p].outs:
            used_after = any(u not in inside for u in graph.users.get(v, ()))
            (outs if used_after or v in graph.live_out else internal).append(v)
    return Group(pos, tuple(ins), tuple(outs), tuple(internal))


# -- the default lowering of one op ---------------------------------------------------------

_REDUCTIONS: dict[str, Callable[..., Any]] = {"sum": np.sum, "max": np.max}


def lower_op(graph: RegionGraph, op: Op, ctx: CompileContext) -> Lowered:
    """The default step for one op of the region."""
    if op.kind == "call":
        assert op.info is not None and isinstance(op.instr, OpCall)
        out = _out_path(graph, op)
        if out is not None:
            return out
        return _reference(graph, op, ctx)
    if op.kind == "alloc":
        return Lowered("out", _nothing, label="TENSOR_ALLOC", ops=(op,), shape_generic=True)
    return Lowered(op.kind, _nothing, label=op.instr.opcode.name, ops=(op,), shape_generic=True)


def _nothing(*args: Any) -> None:
    return None


def _operands(op: Op) -> tuple[list[Any], list[int]]:
    """The operand list with literals filled in, and the positions of tensor operands."""
    assert isinstance(op.instr, OpCall)
    template: list[Any] = []
    slots: list[int] = []
    for i, x in enumerate(op.instr.ins):
        if isinstance(x, (bool, int, float)):
            template.append(x)
        else:
            template.append(None)
            slots.append(i)
    return template, slots


def _out_path(graph: RegionGraph, op: Op) -> Lowered | None:
    info = op.info
    assert info is not None
    if len(op.outs) != 1 or op.dims_attrs:
        return None
    template, slots = _operands(op)
    run: Run | None = None
    inplace: tuple[tuple[int, int], ...] = ()
    name = info.name
    if info.ufunc is not None and OpFlag.ELEMENTWISE in info.flags:
        run = _ufunc_run(info.ufunc, template, slots)
        out = graph.value(op.outs[0])
        inplace = tuple(
            (0, j)
            for j, v in enumerate(op.ins)
            if graph.value(v).shape == out.shape and graph.value(v).dtype == out.dtype
        )
    elif name == "matmul" and len(slots) == 2:
        run = _matmul_run
    elif name in _REDUCTIONS and len(slots) == 1:
        run = _reduce_run(_REDUCTIONS[name], op.attrs.get("axis"), bool(op.attrs.get("keepdims")))
    elif name == "concatenate" and len(slots) == len(template):
        axis = op.attrs.get("axis", 0)

        def run(args: list[Any], outs: list[Any], frame: Any) -> None:
            np.concatenate(args, axis=axis, out=outs[0])

    if run is None or not _probe(graph, op, run):
        return None
    return Lowered(
        "out",
        run,
        inplace,
        label=name,
        ops=(op,),
        ufunc=info.ufunc,
        template=tuple(template),
        shape_generic=True,
    )


def _ufunc_run(ufunc: np.ufunc, template: list[Any], slots: list[int]) -> Run:
    if len(template) == 2 and slots == [0, 1]:

        def binary(args: list[Any], outs: list[Any], frame: Any) -> None:
            ufunc(args[0], args[1], out=outs[0])

        return binary
    if len(template) == 1 and slots == [0]:

        def unary(args: list[Any], outs: list[Any], frame: Any) -> None:
            ufunc(args[0], out=outs[0])

        return unary

    def general(args: list[Any], outs: list[Any], frame: Any) -> None:
        operands = list(template)
        for i, a in zip(slots, args, strict=True):
            operands[i] = a
        ufunc(*operands, out=outs[0])

    return general


def _matmul_run(args: list[Any], outs: list[Any], frame: Any) -> None:
    np.matmul(args[0], args[1], out=outs[0])


def _reduce_run(fn: Callable[..., Any], axis: Any, keepdims: bool) -> Run:
    axis = tuple(axis) if axis is not None else None

    def run(args: list[Any], outs: list[Any], frame: Any) -> None:
        fn(args[0], axis=axis, keepdims=keepdims, out=outs[0])

    return run


def _probe(graph: RegionGraph, op: Op, run: Run) -> bool:
    """Whether ``run`` reproduces the reference kernel (dtype and value) on a one-element
    input of each operand's rank (valid for every op given this path)."""
    info = op.info
    assert info is not None
    rng = np.random.default_rng(0)
    args = []
    for v in op.ins:
        val = graph.value(v)
        a = rng.uniform(0.5, 2.0, size=(1,) * len(val.shape))
        args.append(a.astype(val.dtype))
    template, slots = _operands(op)
    operands = list(template)
    for i, a in zip(slots, args, strict=True):
        operands[i] = a
    want = graph.value(op.outs[0]).dtype
    try:
        (ref,) = info.kernel(operands, op.attrs)
        ref = np.asarray(ref)
        if ref.dtype != want:
            return False
        out = np.empty(ref.shape, want)
        run(args, [out], None)
    except Exception:  # an op whose out= form does not apply to these operands
        return False
    return bool(np.array_equal(ref, out, equal_nan=True))


def _reference(graph: RegionGraph, op: Op, ctx: CompileContext) -> Lowered:
    """Call the op's kernel as the interpreter does; results are fresh arrays (or views)."""
    info = op.info
    assert info is not None and isinstance(op.instr, OpCall)
    kernel = info.kernel
    if ctx.choose is not None and not op.dims_attrs:
        kernel = ctx.choose(info, op.instr, op.attrs, ctx.env)
    template, slots = _operands(op)
    pos = op.pos
    static = op.attrs

    if not op.dims_attrs:

        def run(args: list[Any], frame: Any) -> Any:
            operands = list(template)
            for i, a in zip(slots, args, strict=True):
                operands[i] = a
            return kernel(operands, static)

    else:

        def run(args: list[Any], frame: Any) -> Any:
            operands = list(template)
            for i, a in zip(slots, args, strict=True):
                operands[i] = a
            return kernel(operands, frame.attrs[pos])

    # The op's own kernel runs every shape; a variant the scheduler chose for the reference
    # shapes may not apply to others.
    generic = kernel is info.kernel or bool(op.dims_attrs)
    view = _view(op) if kernel is info.kernel else None
    return Lowered("alloc", run, label=info.name, ops=(op,), shape_generic=generic, view=view)


def _view(op: Op) -> Callable[[Any, Any], Any] | None:
    """A layout op of one tensor (`OpInfo.view`: reshape, transpose, slice) as one method
    call on it, prepared once for static attributes and once per key for the others;
    ``None`` for other ops."""
    info = op.info
    if info is None or info.view is None or len(op.outs) != 1:
        return None
    template, slots = _operands(op)
    if len(template) != 1 or slots != [0]:
        return None
    if not op.dims_attrs:
        f = info.view(op.attrs)
        return lambda x, frame: f(x)
    prepare = info.view
    pos = op.pos
    # A frame's attributes are evaluated once per key; so is their prepared view.
    made: dict[int, tuple[Mapping[str, Any], Callable[[Any], Any]]] = {}

    def per_key(x: Any, frame: Any) -> Any:
        attrs = frame.attrs[pos]
        found = made.get(id(attrs))
        if found is None or found[0] is not attrs:
            if len(made) > 64:
                made.clear()
            found = made[id(attrs)] = (attrs, prepare(attrs))
        return found[1](x)

    return per_key


def reference_attrs(op: Op, env: Mapping[str, int]) -> dict[str, Any]:
    """The attributes of ``op`` with symbolic ``DIMS`` evaluated at ``env``."""
    out = dict(op.attrs)
    for name in op.dims_attrs:
        out[name] = tuple(d if isinstance(d, int) else d.evaluate(env) for d in op.attrs[name])
    return out


def flags_of(graph: RegionGraph, pos: int) -> OpInfo | None:
    return graph.ops[pos].info
