"""The compiler: a function's regions, lowered and memory-planned, as a `Variant`.

`Compiler.compile` takes the executable of a function, its region report and the
dimension values the variant is sized for, and returns a `Variant`. Each compilable region
becomes a `CompiledRegion`: its ops grouped by the registered lowerings (`lowering.py`),
the rest lowered one by one, a static memory plan (`memplan.py`) over the resulting steps.

A variant never bakes the dimension values into its code: `Variant.run(arrays, env)`
receives the call's values, takes the interpreter's plan for them (the interpreted parts
between regions, cached per assignment by the executable) and splices its compiled
regions in, so one variant serves every shape of its key's bucket.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from shapevm.bytecode.isa import Reg
from shapevm.bytecode.program import (
    BindInputs,
    Instr,
    LoadConst,
    ShapeCompute,
    ShapePropagate,
    TensorResize,
)
from shapevm.bytecode.shape_expr import evaluate_shape_expr
from shapevm.bytecode.verify import infer_types
from shapevm.jit.graph import Op, RegionGraph, build_graph
from shapevm.jit.lowering import (
    CompileContext,
    Group,
    Lowered,
    lower_op,
    lowerings,
    make_group,
)
from shapevm.jit.memplan import Frame, MemoryPlan
from shapevm.jit.regions import Region, RegionReport
from shapevm.runtime.bctrace import NamedStep
from shapevm.runtime.interpreter import Executable, Plan, ShapeView, Step, step_error

RegionStep = Callable[[list[Any], Frame], None]
_ERRORS = (ValueError, TypeError, IndexError, FloatingPointError, MemoryError)  # as Plan.run
_PLANS_PER_VARIANT = 256


class CompileCancelled(Exception):
    """The compile was abandoned (timeout or eviction) between two of its steps."""


class CompiledRegion:
    """One region as a list of steps over the register list, with its memory plan."""

    def __init__(
        self,
        region: Region,
        graph: RegionGraph,
        lowered: Sequence[Lowered],
        memory: MemoryPlan,
        steps: Sequence[RegionStep],
    ) -> None:
        self.region = region
        self.graph = graph
        self.lowered = tuple(lowered)
        self.memory = memory
        self.steps = tuple(steps)
        self.instrs: tuple[Instr, ...] = tuple(s.ops[-1].instr for s in lowered)
        self.covered = frozenset(
            id(i) for pc, _, i in graph.function.instructions() if region.start <= pc < region.stop
        )
        self.out_slots = tuple(graph.value(v).slot for v in sorted(graph.live_out))
        self.patterns = tuple(s.pattern for s in lowered if s.pattern)
        self.generic = all(s.shape_generic for s in lowered)

    def run(self, regs: list[Any], key: tuple[int, ...], env: Mapping[str, int]) -> None:
        frame = self.memory.frame(key, env)
        i = 0
        try:
            for i, step in enumerate(self.steps):  # noqa: B007  (i names the failing step)
                step(regs, frame)
        except _ERRORS as exc:
            raise step_error(self.instrs[i], exc) from exc

    def describe(self) -> str:
        r = self.region
        lines = [f"{r.name} {r.span} ({r.n_ops} ops, {len(self.steps)} steps)"]
        for s in self.lowered:
            pcs = ", ".join(f"#{op.pc}" for op in s.ops)
            what = f"{s.pattern}: " if s.pattern else ""
            lines.append(f"  {s.kind:<6} {what}{s.label} [{pcs}]")
        lines += [f"  {line}" for line in self.memory.describe()]
        return "\n".join(lines)


class _RegionCall(NamedStep):
    """A compiled region standing in the interpreter's plan for one dimension assignment."""

    def __init__(self, region: CompiledRegion, key: tuple[int, ...], env: Mapping[str, int]):
        self.region = region
        self.key = key
        self.env = env
        r = region.region
        self.name = f"{r.name} ({r.span})"
        self.pc = r.start
        self.out_slots = region.out_slots

    def __call__(self, regs: list[Any]) -> None:
        self.region.run(regs, self.key, self.env)


class Variant:
    """Compiled code of one function for one specialization key."""

    def __init__(
        self,
        executable: Executable,
        key: Any,
        regions: Sequence[CompiledRegion],
        ref_env: Mapping[str, int],
        shares_code_with: Any = None,
    ) -> None:
        self.executable = executable
        self.key = key
        self.shares_code_with = shares_code_with
        """The key of the variant whose compiled code this one reuses (None: its own)."""
        self.regions = tuple(regions)
        self.ref_env = dict(ref_env)
        self.planned_bytes = sum(r.memory.planned_bytes for r in regions)
        self.naive_bytes = sum(r.memory.naive_bytes for r in regions)
        self.variables = executable.binder.variables
        self._plans: dict[tuple[int, ...], Plan] = {}
        self.generic = all(r.generic for r in regions)
        """Every compiled step is right for any dimension values: the variant may serve
        any key of its function."""
        self.whole = self._covers_body()
        """One compiled region covers the function's body: a call runs no interpreted step."""

    def _covers_body(self) -> bool:
        """One region holds every instruction of the function's only block."""
        fn = self.executable.fn
        if len(fn.blocks) != 1 or len(self.regions) != 1:
            return False
        body = fn.blocks[0].instrs[:-1]
        covered = self.regions[0].covered
        return bool(body) and all(id(i) in covered for i in body)

    def plan_for(self, env: Mapping[str, int]) -> Plan:
        values = tuple(env[v] for v in self.variables)
        plan = self._plans.get(values)
        if plan is None:
            direct = None
            if self.whole:
                region = self.regions[0]
                first = self.executable.fn.blocks[0].instrs[0]
                direct = self.executable.straight_plan([_RegionCall(region, values, env)], [first])
            plan = direct or self._splice(self.executable.plan_for(env), values, env)
            if len(self._plans) >= _PLANS_PER_VARIANT:
                self._plans.clear()
            self._plans[values] = plan
        return plan

    def run(self, arrays: Sequence[Any], env: Mapping[str, int]) -> list[Any]:
        return self.plan_for(env).run(arrays)

    def _splice(self, base: Plan, values: tuple[int, ...], env: Mapping[str, int]) -> Plan:
        calls = [(r, _RegionCall(r, values, env)) for r in self.regions]

        def transform(
            label: str, steps: tuple[Step, ...], instrs: tuple[Instr, ...]
        ) -> tuple[list[Any], list[Instr]]:
            new_steps: list[Any] = []
            new_instrs: list[Instr] = []
            placed: set[int] = set()
            for step, instr in zip(steps, instrs, strict=True):
                for n, (region, call) in enumerate(calls):
                    if id(instr) in region.covered:
                        if n not in placed:
                            placed.add(n)
                            new_steps.append(call)
                            new_instrs.append(instr)
                        break
                else:
                    new_steps.append(step)
                    new_instrs.append(instr)
            return new_steps, new_instrs

        return base.with_steps(transform)

    def describe(self) -> str:
        return "\n".join(r.describe() for r in self.regions) or "(no compiled regions)"


class Compiler:
    """Builds variants; ``lowerings`` names the registered patterns to try (all: ``None``)."""

    def __init__(
        self,
        lowerings: Sequence[str] | None = None,
        mem_optimize: bool = True,
        kernel_process: bool = True,
    ) -> None:
        self.lowerings = None if lowerings is None else tuple(lowerings)
        self.mem_optimize = mem_optimize
        self.kernel_process = kernel_process

    def compile(
        self,
        executable: Executable,
        report: RegionReport,
        key: Any,
        ref_env: Mapping[str, int],
        check: Callable[[], None] = lambda: None,
        deadline: float | None = None,
        template: Variant | None = None,
    ) -> Variant:
        """The variant of ``key``. With a ``template`` (a shape-generic variant of the same
        function) its compiled code is shared: only the memory plan is made again, for
        ``ref_env``; the lowering, patterns and kernels would come out the same."""
        if template is not None and template.generic and template.executable is executable:
            shared = [
                CompiledRegion(
                    r.region,
                    r.graph,
                    r.lowered,
                    MemoryPlan(r.graph, r.lowered, ref_env, self.mem_optimize),
                    r.steps,
                )
                for r in template.regions
            ]
            origin = template.shares_code_with
            if origin is None:
                origin = template.key
            return Variant(executable, key, shared, ref_env, shares_code_with=origin)
        fn = executable.fn
        types = report.types
        if types is None:
            types = infer_types(fn, executable.program).types
        ctx = CompileContext(ref_env, check, executable.choose, self.kernel_process, deadline)
        compiled = []
        for region in report.compilable:
            check()
            graph = build_graph(
                fn, region, types, executable.slot, executable.scope, executable.constants
            )
            compiled.append(self.compile_region(executable, graph, ctx))
        return Variant(executable, key, compiled, ref_env)

    def compile_region(
        self, executable: Executable, graph: RegionGraph, ctx: CompileContext
    ) -> CompiledRegion:
        lowered = self.lower(graph, ctx)
        memory = MemoryPlan(graph, lowered, ctx.env, self.mem_optimize)
        steps = [_make_step(s, graph, executable) for s in lowered]
        return CompiledRegion(graph.region, graph, lowered, memory, steps)

    def lower(self, graph: RegionGraph, ctx: CompileContext) -> list[Lowered]:
        """The region's steps, in order: pattern groups first, single ops for the rest."""
        patterns = lowerings(self.lowerings)
        claimed: dict[int, Lowered] = {}
        taken: set[int] = set()
        for pos in range(len(graph.ops)):
            if pos in taken or graph.ops[pos].kind != "call":
                continue
            for pattern in patterns:
                positions = pattern.matcher(graph, pos)
                if not positions or taken.intersection(positions):
                    continue
                group = make_group(graph, positions)
                if group is None or pos not in group.positions:
                    continue
                ctx.check()
                step = pattern.builder(graph, group, ctx)
                step.pattern = step.pattern or pattern.name
                step.group = group
                step.ops = tuple(graph.ops[p] for p in group.positions)
                claimed[group.positions[-1]] = step
                taken.update(group.positions)
                break
        out: list[Lowered] = []
        for pos, op in enumerate(graph.ops):
            if pos in claimed:
                out.append(claimed[pos])
            elif pos not in taken:
                step = lower_op(graph, op, ctx)
                step.group = make_single(op)
                step.ops = (op,)
                out.append(step)
        return out


def make_single(op: Op) -> Group:
    return Group((op.pos,), op.ins, op.outs, ())


# -- steps ------------------------------------------------------------------------------------


def _make_step(step: Lowered, graph: RegionGraph, ex: Executable) -> RegionStep:
    group = step.group
    assert group is not None
    op = step.ops[0]
    instr = op.instr
    ins = tuple(graph.value(v).slot for v in group.ins)
    if step.kind == "out":
        return _out_step(step, graph, ins)
    if step.kind == "alloc":
        return _alloc_step(step, graph, ins)
    if step.kind == "const":
        assert isinstance(instr, LoadConst)
        return _const_step(graph.value(op.outs[0]).slot, ex.constants[instr.const])
    if step.kind == "free":
        (reg,) = instr.uses()
        return _const_step(ex.slot(reg), None)
    if step.kind == "resize":
        assert isinstance(instr, TensorResize)
        return _resize_step(ex.slot(instr.out), ex.slot(instr.src), instr, ex)
    assert step.kind == "shape"
    return _shape_step(instr, ex)


def _out_step(step: Lowered, graph: RegionGraph, ins: tuple[int, ...]) -> RegionStep:
    assert step.group is not None
    outs = step.group.outs
    run = step.run
    if len(outs) == 1 and step.ufunc is not None:
        direct = _ufunc_step(step.ufunc, step.template, ins, graph.value(outs[0]), outs[0])
        if direct is not None:
            return direct
    if len(outs) == 1:
        (v,) = outs
        o_slot = graph.value(v).slot
        dtype = graph.value(v).dtype

        def one(regs: list[Any], frame: Frame) -> None:
            out = frame.bufs[v]
            if out is None:
                out = np.empty(frame.shapes[v], dtype)
            run([regs[s] for s in ins], [out], frame)
            regs[o_slot] = out

        return one
    slots = [(v, graph.value(v).slot, graph.value(v).dtype) for v in outs]

    def many(regs: list[Any], frame: Frame) -> None:
        bufs = []
        for v, _, dtype in slots:
            out = frame.bufs[v]
            bufs.append(np.empty(frame.shapes[v], dtype) if out is None else out)
        run([regs[s] for s in ins], bufs, frame)
        for (_, slot, _), out in zip(slots, bufs, strict=True):
            regs[slot] = out

    return many


def _ufunc_step(
    ufunc: np.ufunc, template: tuple[Any, ...], ins: tuple[int, ...], value: Any, v: int
) -> RegionStep | None:
    """One closure calling the ufunc for the usual operand patterns (a Python frame less)."""
    o_slot, dtype = value.slot, value.dtype
    tensors = [i for i, x in enumerate(template) if x is None]
    if len(template) == 2 and tensors == [0, 1]:
        a, b = ins

        def tt(regs: list[Any], frame: Frame) -> None:
            out = frame.bufs[v]
            if out is None:
                out = np.empty(frame.shapes[v], dtype)
            ufunc(regs[a], regs[b], out=out)
            regs[o_slot] = out

        return tt
    if len(template) == 2 and len(tensors) == 1:
        (a,) = ins
        lit = template[1 - tensors[0]]
        first = tensors[0] == 0

        def tl(regs: list[Any], frame: Frame) -> None:
            out = frame.bufs[v]
            if out is None:
                out = np.empty(frame.shapes[v], dtype)
            if first:
                ufunc(regs[a], lit, out=out)
            else:
                ufunc(lit, regs[a], out=out)
            regs[o_slot] = out

        return tl
    if len(template) == 1 and tensors == [0]:
        (a,) = ins

        def t(regs: list[Any], frame: Frame) -> None:
            out = frame.bufs[v]
            if out is None:
                out = np.empty(frame.shapes[v], dtype)
            ufunc(regs[a], out=out)
            regs[o_slot] = out

        return t
    return None


def _alloc_step(step: Lowered, graph: RegionGraph, ins: tuple[int, ...]) -> RegionStep:
    assert step.group is not None
    out_slots = tuple(graph.value(v).slot for v in step.group.outs)
    run = step.run
    view = step.view
    if view is not None and len(ins) == 1 and len(out_slots) == 1:
        (a,) = ins
        (o,) = out_slots

        def layout(regs: list[Any], frame: Frame) -> None:
            regs[o] = view(regs[a], frame)

        return layout

    def alloc(regs: list[Any], frame: Frame) -> None:
        results = run([regs[s] for s in ins], frame)
        for slot, value in zip(out_slots, results, strict=True):
            regs[slot] = value

    return alloc


def _const_step(slot: int, value: Any) -> RegionStep:
    def const(regs: list[Any], frame: Frame) -> None:
        regs[slot] = value

    return const


def _resize_step(out: int, src: int, instr: TensorResize, ex: Executable) -> RegionStep:
    spec = [
        d if isinstance(d, int) else (ex.slot(d),) for d in instr.spec if isinstance(d, (int, Reg))
    ]

    def resize(regs: list[Any], frame: Frame) -> None:
        regs[out] = regs[src].reshape([d if isinstance(d, int) else regs[d[0]] for d in spec])

    return resize


def _shape_step(instr: Instr, ex: Executable) -> RegionStep:
    if isinstance(instr, BindInputs):
        pairs = [(ex.slot(r), name) for r, name in zip(instr.outs, instr.names, strict=True)]

        def bind(regs: list[Any], frame: Frame) -> None:
            for slot, name in pairs:
                regs[slot] = frame.env[name]

        return bind
    if isinstance(instr, ShapePropagate):
        o, src, axis = ex.slot(instr.out), ex.slot(instr.src), instr.axis

        def propagate(regs: list[Any], frame: Frame) -> None:
            regs[o] = regs[src].shape[axis]

        return propagate
    assert isinstance(instr, ShapeCompute)
    o, expr, n_t = ex.slot(instr.out), instr.expr, ex.n_tensor

    def compute(regs: list[Any], frame: Frame) -> None:
        regs[o] = evaluate_shape_expr(expr, ShapeView(regs, n_t))

    return compute
