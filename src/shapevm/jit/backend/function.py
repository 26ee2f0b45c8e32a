"""A function's regions lowered once to executors (tier 2), and how a call runs them.

`lower_function` splits each compilable region of the function around the ops the
executor has no kernel for (they stay interpreted between the pieces), lowers each piece
(`lower.lower_region`), plans its memory (`plan.plan_memory`) and builds its
`shapevm.native.Executor`. Nothing here depends on a shape: a new shape is only new values
in the dimension heap.

When one native region covers the whole body of a function, `NativeFunction.direct` is
its executor, with the function's constraints compiled in as checks: a call then binds,
checks and runs in one C call, and the interpreter's binder is used only to explain a
mismatch.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final

from shapevm import native
from shapevm.bytecode.errors import format_message
from shapevm.bytecode.isa import Reg
from shapevm.bytecode.printer import format_instr
from shapevm.bytecode.program import (
    BindInputs,
    Instr,
    LoadConst,
    OpCall,
    ShapeCompute,
    ShapePropagate,
)
from shapevm.bytecode.shape_expr import evaluate_shape_expr
from shapevm.jit.backend.dims import DimHeap
from shapevm.jit.backend.lower import _FROM_DIMS, Lowering, Unsupported, lower_region
from shapevm.jit.backend.nodes import OP_FILL, Lowered
from shapevm.jit.backend.plan import MemoryPlan, build_spec, plan_memory
from shapevm.jit.graph import RegionGraph, build_graph, fusible_op
from shapevm.jit.regions import Region, RegionReport
from shapevm.runtime.interpreter import Executable, RuntimeOpError, ShapeView, step_error
from shapevm.shapes import DimExpr

ExecMismatch = native.ExecMismatch
ExecFailure = native.ExecFailure


@dataclass
class Piece:
    """Why a span of a region is not native (for reports)."""

    region: Region
    reason: str


class NativeRegion:
    """One executor, standing for the instructions ``start <= pc < stop`` of a block."""

    def __init__(
        self,
        region: Region,
        graph: RegionGraph,
        lowered: Lowered,
        memory: MemoryPlan,
        executor: Any,
        variables: Sequence[str],
        shape_replay: Sequence[tuple[Instr, int]],
        lower_ms: float,
    ) -> None:
        self.region = region
        self.graph = graph
        self.lowered = lowered
        self.memory = memory
        self.executor = executor
        self.variables = tuple(variables)
        self.in_slots = tuple(graph.value(v).slot for v in lowered.input_values)
        self.out_slots = tuple(graph.value(v).slot for v in lowered.output_values)
        self.const_outs = tuple((graph.value(v).slot, a) for v, a in lowered.const_outputs)
        self.covered = frozenset(  # BIND_INPUTS stays the plan's own step
            id(i)
            for pc, _, i in graph.function.instructions()
            if region.start <= pc < region.stop and not isinstance(i, BindInputs)
        )
        self.patterns = lowered.patterns
        self.generic = True  # nothing of a region depends on the shape it first ran at
        self.shape_replay = tuple(shape_replay)
        self.lower_ms = lower_ms

    def run(self, regs: list[Any], key: Any, env: Mapping[str, int]) -> None:
        dims = tuple(env[v] for v in self.variables)
        try:
            outs = self.executor(dims, *[regs[s] for s in self.in_slots])
        except ExecMismatch as exc:  # the binder checked the call: this is a lowering bug
            raise RuntimeOpError(
                f"native region {self.region.name} ({self.region.span}) refused its operands: {exc}"
            ) from exc
        except ExecFailure as exc:  # an instruction failed (an index out of range)
            raise self.failure(exc) from exc
        for s, o in zip(self.out_slots, outs, strict=True):
            regs[s] = o
        for s, array in self.const_outs:
            regs[s] = array
        for instr, slot in self.shape_replay:
            regs[slot] = _shape_value(instr, self.graph, env, regs)

    def failure(self, exc: Exception) -> RuntimeOpError:
        """The error of a call this region's executor failed (`native.ExecFailure`). One the
        call's data caused (``exc.data``: an index out of range) names the program's
        instruction the kernel runs, as the interpreter's error does; any other is a fault
        of the native tier (operands a kernel cannot run), said as such."""
        index = getattr(exc, "instruction", None)
        kernels = self.lowered.kernels
        instr = None
        if isinstance(index, int) and 0 <= index < len(kernels) and kernels[index].pcs:
            pc = kernels[index].pcs[0]
            instr = next((i for at, _, i in self.graph.function.instructions() if at == pc), None)
        reason = getattr(exc, "reason", str(exc))
        if instr is not None and getattr(exc, "data", False):
            return step_error(instr, RuntimeError(reason))
        where = f"native region {self.region.name} ({self.region.span})"
        return RuntimeOpError(
            format_message(
                f"{where} could not run its instruction {index}: {reason}",
                expected="operands the lowered kernel runs (the lowering guarantees them)",
                found=reason if instr is None else f"{reason}, in {format_instr(instr).strip()}",
                fix="this is a fault of shapevm's native tier, not of the call's data: run "
                "the function with shapevm.jit(..., enabled=False) meanwhile, and report it",
            )
        )

    def bytes(self, env: Mapping[str, int]) -> tuple[int, int]:
        return self.memory.bytes(self.lowered, self.graph, env)

    def describe(self) -> str:
        r = self.region
        lines = [f"{r.name} {r.span} native ({len(self.lowered.kernels)} instructions)"]
        lines += [f"  {line}" for line in self.lowered.describe()]
        lines.append(
            f"  buffers: {len(self.memory.buffers)}, tensors in the arena: "
            f"{len(self.memory.temps)}, in place: {len(self.memory.inplace)}"
        )
        return "\n".join(lines)


def _shape_value(instr: Instr, graph: RegionGraph, env: Mapping[str, int], regs: list[Any]) -> int:
    if isinstance(instr, ShapePropagate):
        vid = next(v.id for v in graph.values if v.reg == instr.src)
        d = graph.value(vid).shape[instr.axis]
        return d if isinstance(d, int) else int(d.evaluate(env))
    if isinstance(instr, ShapeCompute):
        n_t = sum(1 for r in regs if not isinstance(r, int))  # unused by ShapeView's lookups
        return int(evaluate_shape_expr(instr.expr, ShapeView(regs, n_t)))
    raise AssertionError(instr)


@dataclass
class NativeFunction:
    """The native regions of one function, and what stayed interpreted and why."""

    regions: list[NativeRegion]
    interpreted: list[Piece]
    direct: Any = None  # the executor of a function that is one native region
    direct_needs_dims: bool = True
    lower_ms: float = 0.0
    # generated kernels patched into the executors, shared by the keys whose variants run
    # this code: (id(executor), instruction, symbol) -> [executor, slot, keys using it]
    patched: dict[tuple[int, int, str], list[Any]] = field(default_factory=dict)
    patch_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def whole(self) -> bool:
        return self.direct is not None

    @functools.cached_property
    def patterns(self) -> tuple[str, ...]:
        """The lowering patterns its regions use (every key's variant of it asks)."""
        return tuple(sorted({p for r in self.regions for p in r.patterns}))

    def failure(self, exc: Exception) -> RuntimeOpError:
        """The error of a call of `direct` that its executor failed (see
        `NativeRegion.failure`)."""
        if not self.regions:
            return RuntimeOpError(str(exc))
        return self.regions[0].failure(exc)


def lower_function(
    executable: Executable,
    report: RegionReport,
    *,
    lowerings: Sequence[Lowering] | None = None,
    mem_optimize: bool = True,
    check: Any = None,
) -> NativeFunction:
    """Lower every compilable region of the function (see the module docstring).

    A region is lowered from its start; an op no lowering takes ends the piece before it
    and stays interpreted (its reason kept in `NativeFunction.interpreted`), and lowering
    resumes after it. ``check()`` is called between pieces (it raises to abandon).
    """
    from shapevm.jit.backend.registry import LOWERINGS, lowerings_named

    t0 = time.perf_counter()
    if lowerings is None:
        lowerings = lowerings_named(None)
    built_in = {id(fn) for _, fn in LOWERINGS}
    # Only the built-in lowerings are known to need a native kernel of the op's dtype; a
    # lowering of one's own (`lowerings_named`) may take any op, so it is asked for every op.
    cut_early = all(id(fn) in built_in for fn in lowerings)
    types = report.types
    variables = executable.binder.variables
    out = NativeFunction([], [])

    def lower(piece: Region) -> NativeRegion | tuple[str, int | None]:
        return _lower_piece(executable, piece, types, variables, lowerings, mem_optimize, check)

    for region in report.compilable:
        start = region.start
        # An op no native kernel can run for its dtype is cut out before lowering: trying
        # the piece first would fail at it and lower the part before it a second time
        # (a decoder's `iota` and integer `sub`s made eight lowerings of four pieces).
        for pc, why in _surely_interpreted(executable, region, types) if cut_early else ():
            before = _piece(executable, region, start, pc)
            if before is not None:
                out.regions.extend(_lower_around(executable, before, lower, check, out))
            out.interpreted.append(Piece(replace(region, start=pc, stop=pc + 1, n_ops=1), why))
            start = pc + 1
        rest = _piece(executable, region, start, region.stop)
        if rest is not None:
            out.regions.extend(_lower_around(executable, rest, lower, check, out))
    out.lower_ms = (time.perf_counter() - t0) * 1e3
    if len(out.regions) == 1 and not out.interpreted and _covers_body(executable, out.regions[0]):
        out.direct, out.direct_needs_dims = _direct_executor(executable, out.regions[0])
    else:
        _drop_cheap_regions(out)
    return out


_MOVES: Final = frozenset(("copy", "copy (result)", "cast", "sizes"))
MOVES_ONLY: Final = (
    "only moves data (copies, casts, sizes): beside interpreted steps, a native call for it "
    "costs more than NumPy's"
)
SCALARS_ONLY: Final = (
    "computes scalars only (a loop's condition or counter): beside interpreted steps, a "
    "native call for it costs more than NumPy's"
)


def _drop_cheap_regions(out: NativeFunction) -> None:
    """Leave interpreted the regions of a function that is not one native call whose
    instructions only copy, convert or read sizes (a float32 input cast to float64 before
    interpreted float64 layers), or read and compute scalars only (``i < t`` at the head of
    a ``fori_loop``, run once an iteration; not a mean of a tensor into a scalar): NumPy
    does that as fast, and a region's call
    costs microseconds more than an interpreted step (an MLP with float64 weights ran 23 us
    against 17 interpreted). Their pieces are listed with the reason."""
    kept = []
    for r in out.regions:
        kernels, tensors = r.lowered.kernels, r.lowered.tensors
        if all(k.label in _MOVES or k.op == OP_FILL for k in kernels):
            out.interpreted.append(Piece(r.region, MOVES_ONLY))
        elif all(not tensors[t].shape for k in kernels for t in (*k.ins, *k.outs)):
            out.interpreted.append(Piece(r.region, SCALARS_ONLY))
        else:
            kept.append(r)
    out.regions = kept


def _surely_interpreted(
    executable: Executable, region: Region, types: Any
) -> list[tuple[int, str]]:
    """The ops of ``region`` that no lowering can take, with the reason: no native kernel of
    theirs exists for their dtype (``iota``, integer arithmetic, float64), as registered.
    (Not as the capability table lists them now: a patch that removes one op's kernel
    leaves patterns such as a softmax row op free to take that op, so such ops keep the
    try-and-cut path of `_lower_around`.) So are the ops of a mask made from the
    dimensions alone that only ``where`` reads (a decoder's causal mask: ``iota``,
    reshapes, a comparison): the attention lowering takes a causal one whole
    (`rowpatterns._causal_where`)."""
    from shapevm.ops import DType, get_op
    from shapevm.runtime.scheduler import kernel_dtype, native_names, native_registered

    out = []
    instrs = [
        (pc, i)
        for pc, _, i in executable.fn.instructions()
        if region.start <= pc < region.stop and isinstance(i, OpCall)
    ]
    makes = any(i.op in ("iota", "full") for _, i in instrs)  # else no mask from dims
    masks = _mask_ops(executable, instrs) if makes else set()
    for pc, instr in instrs:
        info = get_op(instr.op)
        if info is None or pc in masks:
            continue
        operands: list[DType | None] = [
            types[x].dtype if isinstance(x, Reg) and x in types else None for x in instr.ins
        ]
        results = [types[r].dtype for r in instr.outs if r in types]
        try:
            dtype = kernel_dtype(operands, results)
        except ValueError:
            continue
        if not any(native_registered(instr.op, name, dtype) for name in native_names(info)):
            out.append((pc, f"{instr.op} has no native kernel for {dtype}"))
    return out


F64_HINT: Final = (
    "the native tier computes in float32: NumPy makes float64 where float32 meets a float64 "
    "array (weights from np.random are float64); .astype(np.float32) on them runs it native"
)


def f64_hint(pieces: Sequence[Piece]) -> str:
    """`F64_HINT` as a last sentence (with its separator) when an op of ``pieces`` stayed
    interpreted for want of a float64 kernel; else ''."""
    return f"; {F64_HINT}" if any(p.reason.endswith(" for f64") for p in pieces) else ""


def _mask_ops(executable: Executable, instrs: list[tuple[int, OpCall]]) -> set[int]:
    """The pcs of the op calls ``instrs`` (a region's) that compute a value from the
    dimensions and constants alone (``iota``, ``full``, reshapes, broadcasts, elementwise
    ops) and whose results only such ops and ``where`` read: a mask, that a pattern may take
    whole."""
    from shapevm.ops import get_op

    consts = {i.out for _, _, i in executable.fn.instructions() if isinstance(i, LoadConst)}
    from_dims: dict[Reg, int] = {}  # register -> pc of the op computing it from dims
    for pc, instr in instrs:
        info = get_op(instr.op)
        if info is None:
            continue
        if (instr.op in _FROM_DIMS or fusible_op(info)) and all(
            x in consts or x in from_dims for x in instr.ins if isinstance(x, Reg)
        ):
            from_dims.update((r, pc) for r in instr.outs)
    readers: dict[Reg, list[tuple[int, OpCall]]] = {}
    for pc, instr in instrs:
        for x in instr.ins:
            if isinstance(x, Reg):
                readers.setdefault(x, []).append((pc, instr))
    inside = {pc for pc, _ in instrs}
    escaping = {  # read by an instruction outside the region's op calls
        r for pc, _, i in executable.fn.instructions() if pc not in inside for r in _regs_read(i)
    }
    masks: set[int] = set()
    for pc, instr in reversed(instrs):  # readers come after: decided before their operands
        if not instr.outs or any(r not in from_dims or r in escaping for r in instr.outs):
            continue
        if all(
            rpc in masks or reader.op == "where"
            for r in instr.outs
            for rpc, reader in readers.get(r, [])
        ) and any(readers.get(r) for r in instr.outs):
            masks.add(pc)
    return masks


def _regs_read(instr: Instr) -> list[Reg]:
    """The registers an instruction reads (its fields but ``out`` and ``outs``)."""
    found: list[Reg] = []
    for f in fields(instr):
        if f.name in ("out", "outs"):
            continue
        value = getattr(instr, f.name)
        for x in value if isinstance(value, tuple) else (value,):
            if isinstance(x, Reg):
                found.append(x)
    return found


def _lower_around(
    executable: Executable,
    piece: Region,
    lower: Callable[[Region], NativeRegion | tuple[str, int | None]],
    check: Any,
    out: NativeFunction,
) -> list[NativeRegion]:
    """Lower ``piece``; where an op fails, what comes before it and after it, the op itself
    added to ``out.interpreted`` (the loop of `lower_function` for one piece)."""
    interpreted = out.interpreted
    regions: list[NativeRegion] = []
    start = piece.start
    while start < piece.stop:
        if check is not None:
            check()
        part = _piece(executable, piece, start, piece.stop)
        if part is None:
            break
        lowered = lower(part)
        if isinstance(lowered, NativeRegion):
            regions.append(lowered)
            break
        why, pc = lowered
        if pc is None:
            interpreted.append(Piece(part, why))
            break
        interpreted.append(Piece(replace(part, start=pc, stop=pc + 1, n_ops=1), why))
        before = _piece(executable, piece, part.start, pc)
        if before is not None:  # (it may fail earlier: an op made from the dimensions
            # waits for a pattern to take it, and fails at the end when none did)
            regions.extend(_lower_around(executable, before, lower, check, out))
        start = pc + 1
    return regions


def _piece(executable: Executable, region: Region, start: int, stop: int) -> Region | None:
    """``region`` cut to ``[start, stop)``, or None when no op call is left in it."""
    n_ops = sum(
        1
        for pc, _, instr in executable.fn.instructions()
        if start <= pc < stop and isinstance(instr, OpCall)
    )
    return replace(region, start=start, stop=stop, n_ops=n_ops) if n_ops else None


def _lower_piece(
    executable: Executable,
    piece: Region,
    types: Any,
    variables: Sequence[str],
    lowerings: Sequence[Lowering],
    mem_optimize: bool,
    check: Any = None,
) -> NativeRegion | tuple[str, int | None]:
    t0 = time.perf_counter()
    fn = executable.fn
    graph = build_graph(fn, piece, types, executable.slot, executable.scope, executable.constants)
    try:
        lowered = lower_region(graph, executable.constants, lowerings, check or (lambda: None))
    except Unsupported as exc:
        return str(exc), exc.pc
    memory = plan_memory(lowered, mem_optimize)
    heap = DimHeap(variables)
    spec = build_spec(lowered, memory, heap, threads=0)
    executor = native.Executor(spec)
    replay = _shape_replay(executable, graph, piece)
    ms = (time.perf_counter() - t0) * 1e3
    return NativeRegion(piece, graph, lowered, memory, executor, variables, replay, ms)


def _shape_replay(
    executable: Executable, graph: RegionGraph, piece: Region
) -> list[tuple[Instr, int]]:
    """Shape instructions of the piece whose registers are read after it."""
    fn = executable.fn
    later = {
        reg
        for pc, _, instr in fn.instructions()
        if not piece.start <= pc < piece.stop
        for reg in instr.uses()
    }
    out: list[tuple[Instr, int]] = []
    for pc, _, instr in fn.instructions():
        if piece.start <= pc < piece.stop and isinstance(
            instr, (ShapePropagate, ShapeCompute, BindInputs)
        ):
            if isinstance(instr, BindInputs):
                continue  # the plan's own binding step stays in front of the region
            (reg,) = instr.defs()
            if reg in later:
                out.append((instr, executable.slot(reg)))
    return out


def _covers_body(executable: Executable, region: NativeRegion) -> bool:
    fn = executable.fn
    if len(fn.blocks) != 1:
        return False
    body = [i for i in fn.blocks[0].instrs[:-1] if not isinstance(i, BindInputs)]
    return (
        bool(body)
        and all(id(i) in region.covered for i in body)
        and not region.shape_replay
        and not region.const_outs
    )


def _direct_executor(executable: Executable, region: NativeRegion) -> tuple[Any, bool]:
    """An executor of the whole function taking the call's arrays in parameter order, with
    the scope's constraints as checks; and whether it still needs the variables' values."""
    fn = executable.fn
    lowered = region.lowered
    params = [executable.slot(p.reg) for p in fn.params]
    by_slot = {region.graph.value(v).slot: i for i, v in enumerate(lowered.input_values)}
    if sorted(by_slot) != sorted(params) or len(params) != len(set(params)):
        return None, True
    ret = fn.blocks[0].instrs[-1]
    ret_slots = [executable.slot(r) for r in ret.uses()]
    out_at = {s: i for i, s in enumerate(region.out_slots)}
    # a result may also be an argument as it came (`return x, x @ w`): the executor returns
    # the argument itself
    if set(ret_slots) - set(by_slot) != set(out_at) or len(ret_slots) != len(set(ret_slots)):
        return None, True
    # arguments in parameter order, results in the order the function returns them (the
    # region's come in the order they are computed)
    order = [by_slot[s] for s in params]
    tensors = lowered.tensors
    for pos, i in enumerate(order):
        tensors[lowered.inputs[i]].arg = pos
    outputs, output_values, perms, shapes = [], [], [], []
    for pos, s in enumerate(ret_slots):
        if s in out_at:
            i = out_at[s]
            tensors[lowered.outputs[i]].out_index = pos
            outputs.append(lowered.outputs[i])
            output_values.append(lowered.output_values[i])
            perms.append(lowered.output_perms[i] if lowered.output_perms else None)
            shapes.append(lowered.output_shapes[i] if lowered.output_shapes else None)
        else:
            outputs.append(lowered.inputs[by_slot[s]])
            output_values.append(lowered.input_values[by_slot[s]])
            perms.append(None)
            shapes.append(None)
    relowered = replace(
        lowered,
        inputs=[lowered.inputs[i] for i in order],
        input_values=[lowered.input_values[i] for i in order],
        outputs=outputs,
        output_values=output_values,
        output_perms=perms if any(p is not None for p in perms) else [],
        output_shapes=shapes if any(r is not None for r in shapes) else [],
    )
    heap = DimHeap(region.variables)
    bound = {
        d._terms[0][0][0][0].args[0]
        for t in relowered.inputs
        for d in tensors[t].shape
        if isinstance(d, DimExpr) and _is_var(d)
    }
    needs_dims = bool(set(region.variables) - bound) or bool(executable.binder.dim_args)
    for v in region.variables:
        heap.check_nonnegative(executable.scope.var(v) - 1)
    for lhs, op, rhs, _text in getattr(executable.scope, "_checks", ()):
        diff = lhs - rhs
        if op == ">=":
            heap.check_nonnegative(diff)
        elif op == "<=":
            heap.check_nonnegative(-diff)
        elif op == ">":
            heap.check_nonnegative(diff - 1)
        elif op == "<":
            heap.check_nonnegative(-diff - 1)
        else:
            heap.check_zero(diff)
    spec = build_spec(relowered, region.memory, heap, threads=0)
    # restore the region's own numbering
    for i, t in enumerate(lowered.inputs):
        tensors[t].arg = i
    for i, t in enumerate(lowered.outputs):
        tensors[t].out_index = i
    return native.Executor(spec), needs_dims


def _is_var(d: DimExpr) -> bool:
    terms = d._terms
    return (
        len(terms) == 1
        and terms[0][1] == 1
        and len(terms[0][0]) == 1
        and (terms[0][0][0][1] == 1 and terms[0][0][0][0].op == "var")
    )
