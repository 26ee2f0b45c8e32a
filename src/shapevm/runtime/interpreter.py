"""The interpreter: the reference semantics of bytecode, a small loop over instructions.

`Executable` prepares a function once: each instruction becomes a small closure over
register numbers. For every new assignment of the dimension variables it builds a `Plan`
(attributes with symbolic dimensions evaluated, a kernel variant chosen per op by the
scheduler), cached by the variables' values, so a steady stream of calls pays for neither.
Registers live in one Python list: tensor registers first, then shape registers.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from shapevm.bytecode.errors import format_message
from shapevm.bytecode.isa import Reg
from shapevm.bytecode.printer import format_instr
from shapevm.bytecode.program import (
    BindInputs,
    Block,
    BranchIf,
    Function,
    Instr,
    Jump,
    LoadConst,
    OpCall,
    Program,
    Return,
    ShapeCompute,
    ShapePropagate,
    SpecDim,
    TensorAlloc,
    TensorCreate,
    TensorFree,
    TensorPhi,
    TensorResize,
    TensorType,
)
from shapevm.bytecode.shape_expr import COMPARISONS, ShapeCmp, evaluate_shape_expr
from shapevm.bytecode.verify import verify
from shapevm.ops import AttrKind, DType, Dynamic, OpFlag, OpInfo, get_op
from shapevm.runtime import bctrace
from shapevm.runtime.binding import Binder, sym_dim
from shapevm.runtime.scheduler import choose_kernel, kernel_dtype, shape_independent

Regs = list[Any]
Step = Callable[[Regs], None]
KernelChooser = Callable[[OpInfo, OpCall, Mapping[str, Any], Mapping[str, int]], Any]
StepTransform = Callable[
    [str, tuple[Step, ...], tuple[Instr, ...]], tuple[Sequence[Step], Sequence[Instr]]
]


_generation = [0]  # bumped when the capability db changes: plans choose kernels again


def invalidate_plans() -> None:
    """Make every `Executable` rebuild its plans (after a capability-db change)."""
    _generation[0] += 1


class RuntimeOpError(RuntimeError):
    """An op failed while the program ran (a data-dependent check, a kernel error)."""


def reference_kernel(
    info: OpInfo, instr: OpCall, attrs: Mapping[str, Any], env: Mapping[str, int]
) -> Any:
    return info.kernel


@dataclass(slots=True)
class _Block:
    label: str
    phis: tuple[tuple[int, dict[str, int]], ...]
    steps: tuple[Step, ...]
    instrs: tuple[Instr, ...]  # for error messages, aligned with steps
    term: Instr


class Plan:
    """The function specialized to one assignment of its dimension variables.

    ``dynamic`` holds the registers whose type has a data-dependent dimension, so that a
    failing step says whether such a dimension is involved.
    """

    __slots__ = ("blocks", "dynamic", "entry", "n_regs", "params", "straight")

    def __init__(
        self,
        blocks: dict[str, _Block],
        entry: str,
        n_regs: int,
        params: Sequence[int],
        dynamic: frozenset[Reg] = frozenset(),
    ) -> None:
        self.blocks = blocks
        self.entry = entry
        self.n_regs = n_regs
        self.params = tuple(params)
        self.dynamic = dynamic
        only = blocks[entry]
        self.straight = len(blocks) == 1 and isinstance(only.term, Return) and not only.phis

    def with_steps(self, transform: StepTransform) -> Plan:
        """A copy whose blocks have their steps (and the instructions they stand for, used
        in error messages) rewritten by ``transform(label, steps, instrs)``; the JIT splices
        compiled regions in this way, and tracing wraps each step."""
        blocks = {}
        for label, b in self.blocks.items():
            steps, instrs = transform(label, b.steps, b.instrs)
            blocks[label] = _Block(label, b.phis, tuple(steps), tuple(instrs), b.term)
        return Plan(blocks, self.entry, self.n_regs, self.params, self.dynamic)

    def run(self, arrays: Sequence[Any]) -> list[Any]:
        regs = self._registers(arrays)
        block = self.blocks[self.entry]
        prev = ""
        while True:
            for out, incoming in block.phis:
                regs[out] = regs[incoming[prev]]
            i = 0
            try:
                for i, step in enumerate(block.steps):  # noqa: B007  (i names the failing step)
                    step(regs)
            except (ValueError, TypeError, IndexError, FloatingPointError, MemoryError) as exc:
                raise _runtime_error(block, i, exc, self.dynamic) from exc
            term = block.term
            if isinstance(term, Return):
                return [regs[r.index] for r in term.values]
            prev, block = block.label, self._successor(term, regs)

    def _registers(self, arrays: Sequence[Any]) -> Regs:
        regs: Regs = [None] * self.n_regs
        for i, a in zip(self.params, arrays, strict=True):
            regs[i] = a
        return regs

    def _successor(self, term: Instr, regs: Regs) -> _Block:
        """The block that a ``JUMP`` or ``BRANCH_IF`` leads to."""
        if isinstance(term, Jump):
            return self.blocks[term.target]
        assert isinstance(term, BranchIf)
        return self.blocks[term.if_true if _branch(term, regs) else term.if_false]

    def stops(self) -> list[Instr]:
        """The instructions `stepwise` stops before, block by block."""
        out: list[Instr] = []
        for b in self.blocks.values():
            out += b.instrs
            if _own_stop(b):
                out.append(b.term)
        return out

    def stepwise(
        self, arrays: Sequence[Any]
    ) -> Generator[tuple[Instr, Step | None, Regs], None, list[Any]]:
        """`run` one instruction at a time, for a debugger: yields ``(instr, step,
        registers)`` before each instruction that does work and each block's terminator
        (whose step is ``None``), runs it when resumed, and returns the results. A step
        standing for several instructions (a compiled region) comes once, with the first
        of them. `run` stays the fast loop; this one costs a resumption per instruction."""
        regs = self._registers(arrays)
        block = self.blocks[self.entry]
        prev = ""
        while True:
            for out, incoming in block.phis:
                regs[out] = regs[incoming[prev]]
            for i, (step, instr) in enumerate(zip(block.steps, block.instrs, strict=True)):
                yield instr, step, regs
                try:
                    step(regs)
                except (ValueError, TypeError, IndexError, FloatingPointError, MemoryError) as e:
                    raise _runtime_error(block, i, e, self.dynamic) from e
            term = block.term
            if _own_stop(block):
                yield term, None, regs
            if isinstance(term, Return):
                return [regs[r.index] for r in term.values]
            prev, block = block.label, self._successor(term, regs)


class TimedPlan(Plan):
    """A plan that reports the duration of each call (in seconds) and its arguments to
    ``report``: the bytecode trace's call records."""

    __slots__ = ("report",)

    def __init__(self, plan: Plan, report: Callable[[float, Sequence[Any]], None]) -> None:
        super().__init__(plan.blocks, plan.entry, plan.n_regs, plan.params, plan.dynamic)
        self.report = report

    def run(self, arrays: Sequence[Any]) -> list[Any]:
        t0 = time.perf_counter()
        out = super().run(arrays)
        self.report(time.perf_counter() - t0, arrays)
        return out


def _own_stop(block: _Block) -> bool:
    """Whether the block's terminator is a stop of its own (a shape predicate's branch is
    the block's last step already)."""
    return not block.instrs or block.instrs[-1].opcode is not block.term.opcode


def _runtime_error(
    block: _Block, i: int, exc: Exception, dynamic: frozenset[Reg]
) -> RuntimeOpError:
    return step_error(block.instrs[i] if i < len(block.instrs) else block.term, exc, dynamic)


def step_error(
    instr: Instr, exc: Exception, dynamic: frozenset[Reg] | None = None
) -> RuntimeOpError:
    """The error for ``instr`` failing with ``exc`` while the program ran.

    ``dynamic``: the registers with a data-dependent dimension (``None``: judge from the
    instruction's own types). Only a step that involves one is said to depend on them.
    """
    where = f" (traced at {instr.loc})" if instr.loc else ""
    headline = f"{format_instr(instr).strip()} failed{where}: {exc}"
    if isinstance(exc, MemoryError):
        return RuntimeOpError(
            format_message(
                headline,
                found="not enough memory for this step",
                fix="call with smaller shapes, or free memory in this process",
            )
        )
    if _involves_dynamic(instr, dynamic):
        note = (
            "this check depends on data-dependent (dynamic) dimensions and could not be "
            "proved before running"
        )
    else:
        note = "the shapes were verified before running; the op failed on these operands"
    return RuntimeOpError(f"{headline}\n  {note}")


def _involves_dynamic(instr: Instr, dynamic: frozenset[Reg] | None) -> bool:
    if dynamic and any(r in dynamic for r in (*instr.uses(), *instr.defs())):
        return True
    if isinstance(instr, (TensorCreate, TensorResize)):
        return any(isinstance(d, Dynamic) for d in instr.spec)
    if isinstance(instr, OpCall):
        info = get_op(instr.op)
        if info is not None and OpFlag.DATA_DEPENDENT in info.flags:
            return True
        return any(t is not None and _has_dynamic(t) for t in instr.types)
    return False


def _branch(term: BranchIf, regs: Regs) -> bool:
    cond = term.cond
    if isinstance(cond, Reg):
        return bool(regs[cond.index])
    raise AssertionError("shape predicates are resolved when the plan is built")


def splice_calls(
    instrs: Sequence[Instr],
    calls: Sequence[tuple[frozenset[int], Step]],
    own: Callable[[int, Instr], Step | None],
) -> tuple[list[Step], list[Instr]]:
    """The steps of ``instrs`` with each ``(covered, call)`` standing for the instructions
    whose ids ``covered`` holds, placed once at the first of them; every other instruction
    gets ``own(index, instr)`` (left out when None). Returns the steps and the
    instruction each stands for."""
    steps: list[Step] = []
    kept: list[Instr] = []
    placed: set[int] = set()
    for i, instr in enumerate(instrs):
        for n, (covered, call) in enumerate(calls):
            if id(instr) in covered:
                if n not in placed:
                    placed.add(n)
                    steps.append(call)
                    kept.append(instr)
                break
        else:
            step = own(i, instr)
            if step is not None:
                steps.append(step)
                kept.append(instr)
    return steps, kept


class Executable:
    """A function of a verified program, ready to run on concrete arrays.

    The program is verified here (a `VerifyError` says what is wrong) unless
    ``verified=True`` says its caller has just verified or checked it.
    """

    def __init__(
        self,
        program: Program,
        name: str | None = None,
        *,
        arg_names: Sequence[str] | None = None,
        choose: KernelChooser | None = None,
        max_plans: int = 256,
        verified: bool = False,
    ) -> None:
        if not verified:
            verify(program)
        self.program = program
        self.fn: Function = program.function(name) if name else program.functions[0]
        self.binder = Binder(self.fn, arg_names)
        self.scope = self.binder.scope
        self.choose = choose or self.scheduled_kernel
        self.device = "cpu"
        self.constants = [np.asarray(c.array) for c in program.constants]
        n_t = n_s = 0
        for _, _, instr in self.fn.instructions():
            for r in (*instr.defs(), *instr.uses()):
                if r.is_tensor:
                    n_t = max(n_t, r.index + 1)
                else:
                    n_s = max(n_s, r.index + 1)
        for p in self.fn.params:
            n_t = max(n_t, p.reg.index + 1)
        self.n_tensor = n_t
        self.n_regs = n_t + n_s
        self._plans: OrderedDict[tuple[int, ...], Plan] = OrderedDict()
        self._max_plans = max_plans
        self.plan_builds = 0
        self.plan_build_seconds = 0.0
        self._dims_cache: dict[str, Any] = {}
        self._types: dict[Reg, TensorType] | None = None
        self._dynamic_regs: frozenset[Reg] | None = None
        self._reuse: dict[int, int] | None = None
        self._fixed_kernels: dict[int, Any] = {}  # ops whose kernel does not depend on shapes
        self._generation = _generation[0]

    # -- calls ----------------------------------------------------------------------------
    def __call__(self, *args: Any, dims: Mapping[str, int] | None = None) -> list[Any]:
        arrays = self.binder.convert(args)
        env = self.binder.bind(arrays, dims)
        plan = self.plan_for(env)
        if bctrace.ACTIVE is not None:
            plan = bctrace.ACTIVE.traced(plan, self.fn, self.slot)
        return plan.run(arrays)

    def _refresh_generation(self) -> None:
        """Forget plans and kernel choices made before the capability table last changed."""
        if self._generation != _generation[0]:
            self._plans.clear()
            self._fixed_kernels.clear()
            self._generation = _generation[0]

    def plan_for(self, env: Mapping[str, int]) -> Plan:
        if self._generation != _generation[0]:  # (inline: this runs on every call)
            self._refresh_generation()
        key = tuple(env[v] for v in self.binder.variables)
        plan = self._plans.get(key)
        if plan is None:
            t0 = time.perf_counter()
            plan = self._build(env)
            self.plan_build_seconds += time.perf_counter() - t0
            self.plan_builds += 1
            if len(self._plans) >= self._max_plans:
                self._plans.popitem(last=False)
            self._plans[key] = plan
        return plan

    # -- kernel choice ----------------------------------------------------------------------
    def _reg_types(self) -> dict[Reg, TensorType]:
        types: dict[Reg, TensorType] = {p.reg: p.type for p in self.fn.params}
        for _, _, instr in self.fn.instructions():
            declared = instr.declared_types()
            for reg, t in zip(instr.defs(), declared, strict=False):
                if t is not None:
                    types[reg] = t
            if isinstance(instr, LoadConst) and instr.type is None:
                const = self.program.constants[instr.const]
                types[instr.out] = const.type
        return types

    def scheduled_kernel(
        self, info: OpInfo, instr: OpCall, attrs: Mapping[str, Any], env: Mapping[str, int]
    ) -> Any:
        """The variant the scheduler picks for this op at these shapes (see
        `shapevm.runtime.scheduler`); chosen per call when a shape is data-dependent."""
        if self._types is None:
            self._types = self._reg_types()
        fixed = self._fixed_kernels.get(id(instr))
        if fixed is not None:
            return fixed
        shapes: list[tuple[int, ...] | None] = []
        dtypes: list[DType | None] = []
        for x in instr.ins:
            t = self._types.get(x) if isinstance(x, Reg) else None
            dtypes.append(t.dtype if t is not None else None)
            if not isinstance(x, Reg):
                shapes.append(())
            elif t is None or any(isinstance(d, Dynamic) or d == "dynamic" for d in t.shape):
                shapes.append(None)
            else:
                shapes.append(tuple(self._dim(d, env) or 0 for d in t.shape))
        results = [t.dtype for t in instr.types if t is not None]
        dtype = kernel_dtype(dtypes, results)
        device = self.device
        only = shape_independent(info.name, dtype, device)
        if only is not None:
            self._fixed_kernels[id(instr)] = only.fn
            return only.fn
        if all(sh is not None for sh in shapes):
            return choose_kernel(info.name, dtype, shapes, attrs, device).fn  # type: ignore[arg-type]
        choose_kernel(info.name, dtype, [sh or () for sh in shapes], attrs, device)  # dtype check
        cache: dict[tuple[tuple[int, ...], ...], Any] = {}

        def per_call(args: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
            key = tuple(np.shape(a) for a in args)
            fn = cache.get(key)
            if fn is None:
                fn = choose_kernel(info.name, dtype, key, attrs, device).fn
                cache[key] = fn
            return fn(args, attrs)

        return per_call

    # -- building plans ---------------------------------------------------------------------
    def slot(self, r: Reg) -> int:
        """The index of register ``r`` in a plan's register list."""
        return r.index if r.is_tensor else self.n_tensor + r.index

    _reg = slot

    def _dim(self, d: Any, env: Mapping[str, int]) -> int | None:
        if isinstance(d, int):
            return d
        sym = self._dims_cache.get(d)
        if sym is None:
            sym = sym_dim(d, self.scope)
            self._dims_cache[d] = sym
        if isinstance(sym, Dynamic):
            return None  # "to the end" of a data-dependent axis (slice stops)
        return sym if isinstance(sym, int) else sym.evaluate(env)

    def _build(self, env: Mapping[str, int]) -> Plan:
        blocks: dict[str, _Block] = {}
        for block in self.fn.blocks:
            phis: list[tuple[int, dict[str, int]]] = []
            steps: list[Step] = []
            instrs: list[Instr] = []
            for instr in block.instrs[:-1]:
                if isinstance(instr, TensorPhi):
                    incoming = {label: self._reg(r) for label, r in instr.incoming}
                    phis.append((self._reg(instr.out), incoming))
                    continue
                step = self._step(instr, env)
                if step is not None:
                    steps.append(step)
                    instrs.append(instr)
            term = block.instrs[-1]
            if isinstance(term, BranchIf) and isinstance(term.cond, ShapeCmp):
                term = self._static_branch(term, steps, instrs)
            blocks[block.label] = _Block(
                block.label, tuple(phis), tuple(steps), tuple(instrs), term
            )
        params = [self._reg(p.reg) for p in self.fn.params]
        return Plan(blocks, self.fn.blocks[0].label, self.n_regs + 1, params, self._dynamic())

    def straight_plan(self, steps: Sequence[Step], instrs: Sequence[Instr]) -> Plan | None:
        """A plan of the function's only block that runs ``steps`` (standing for
        ``instrs``, for error messages) and returns; ``None`` when the function has more
        than one block or its block does not end in ``RETURN``. Used when compiled code
        covers the whole body, so that no interpreter plan has to be built for a shape."""
        block = self._straight_block()
        if block is None:
            return None
        term = block.instrs[-1]
        params = [self._reg(p.reg) for p in self.fn.params]
        blocks = {block.label: _Block(block.label, (), tuple(steps), tuple(instrs), term)}
        return Plan(blocks, block.label, self.n_regs + 1, params, self._dynamic())

    def _straight_block(self) -> Block | None:
        """The function's only block when it runs straight through to ``RETURN`` (no
        branches, no phis), else None."""
        if len(self.fn.blocks) != 1:
            return None
        block = self.fn.blocks[0]
        if not isinstance(block.instrs[-1], Return) or any(
            isinstance(i, TensorPhi) for i in block.instrs
        ):
            return None
        return block

    def plan_around(
        self, env: Mapping[str, int], calls: Sequence[tuple[frozenset[int], Step]]
    ) -> Plan | None:
        """A plan of the function's only block in which each ``(covered, step)`` of
        ``calls`` stands for the instructions whose ids ``covered`` holds (placed at the
        first of them) and every other instruction has its own step: what compiled regions
        cover gets no interpreter step built, so a new shape plans only the rest. ``None``
        where `straight_plan` gives none."""
        block = self._straight_block()
        if block is None:
            return None
        self._refresh_generation()
        t0 = time.perf_counter()
        steps, instrs = splice_calls(
            block.instrs[:-1], calls, lambda _, instr: self._step(instr, env)
        )
        plan = self.straight_plan(steps, instrs)
        self.plan_build_seconds += time.perf_counter() - t0
        self.plan_builds += 1
        return plan

    def _dynamic(self) -> frozenset[Reg]:
        """Registers whose type has a data-dependent dimension."""
        if self._dynamic_regs is None:
            if self._types is None:
                self._types = self._reg_types()
            self._dynamic_regs = frozenset(r for r, t in self._types.items() if _has_dynamic(t))
        return self._dynamic_regs

    def _static_branch(self, term: BranchIf, steps: list[Step], instrs: list[Instr]) -> Instr:
        """A shape predicate: evaluated on the shape registers at run time."""
        cond = term.cond
        assert isinstance(cond, ShapeCmp)
        cmp = COMPARISONS[cond.op]
        n_t = self.n_tensor
        flag = self.n_regs  # one scratch slot past the registers holds the verdict

        def step(regs: Regs) -> None:
            values = ShapeView(regs, n_t)
            lhs = evaluate_shape_expr(cond.lhs, values)
            rhs = evaluate_shape_expr(cond.rhs, values)
            regs[flag] = bool(cmp(lhs, rhs))

        steps.append(step)
        instrs.append(term)
        return BranchIf(Reg.tensor(flag), term.if_true, term.if_false, loc=term.loc)

    def _step(self, instr: Instr, env: Mapping[str, int]) -> Step | None:
        if isinstance(instr, OpCall):
            return self._op_step(instr, env)
        if isinstance(instr, LoadConst):
            out, value = self._reg(instr.out), self.constants[instr.const]
            return _setter(out, value)
        if isinstance(instr, BindInputs):
            outs = [self._reg(r) for r in instr.outs]
            values = [env[n] for n in instr.names]

            def bind(regs: Regs) -> None:
                for o, v in zip(outs, values, strict=True):
                    regs[o] = v

            return bind
        if isinstance(instr, ShapePropagate):
            o, src, axis = self._reg(instr.out), self._reg(instr.src), instr.axis

            def propagate(regs: Regs) -> None:
                regs[o] = regs[src].shape[axis]

            return propagate
        if isinstance(instr, ShapeCompute):
            o, expr, n_t = self._reg(instr.out), instr.expr, self.n_tensor

            def compute(regs: Regs) -> None:
                regs[o] = evaluate_shape_expr(expr, ShapeView(regs, n_t))

            return compute
        if isinstance(instr, TensorCreate):
            return None
        if isinstance(instr, TensorAlloc):
            return self._alloc_step(instr)
        if isinstance(instr, TensorFree):
            return _setter(self._reg(instr.reg), None)
        if isinstance(instr, TensorResize):
            o, src = self._reg(instr.out), self._reg(instr.src)
            spec = self._spec(instr.spec)

            def resize(regs: Regs) -> None:
                regs[o] = regs[src].reshape([d if isinstance(d, int) else regs[d[0]] for d in spec])

            return resize
        raise AssertionError(f"unexpected instruction {instr!r}")

    def _spec(self, spec: Sequence[SpecDim]) -> list[int | tuple[int]]:
        out: list[int | tuple[int]] = []
        for d in spec:
            if isinstance(d, Reg):
                out.append((self._reg(d),))
            elif isinstance(d, Dynamic):
                out.append(-1)
            else:
                out.append(d)
        return out

    def _alloc_step(self, instr: TensorAlloc) -> Step | None:
        for _, _, other in self.fn.instructions():
            if isinstance(other, TensorCreate) and other.out == instr.reg:
                return _alloc(self._reg(instr.reg), self._spec(other.spec), other)
        return None

    def _op_step(self, instr: OpCall, env: Mapping[str, int]) -> Step:
        step = self._inplace_step(instr, env)
        if step is not None:
            return step
        info = get_op(instr.op)
        assert info is not None, instr.op
        attrs: dict[str, Any] = {}
        for key, value in info.filled_attrs(instr.attr_dict()).items():
            spec = info.attr_spec(key)
            if spec is not None and spec.kind is AttrKind.DIMS and isinstance(value, tuple):
                attrs[key] = tuple(self._dim(d, env) for d in value)
            else:
                attrs[key] = value
        kernel = self.choose(info, instr, attrs, env)
        outs = tuple(self._reg(r) for r in instr.outs)
        template: list[Any] = []
        slots: list[tuple[int, int]] = []
        for pos, x in enumerate(instr.ins):
            if isinstance(x, Reg):
                slots.append((pos, self._reg(x)))
                template.append(None)
            else:
                template.append(x)
        if info.view is not None and kernel is info.kernel and len(outs) == len(slots) == 1:
            return _view_step(info.view(attrs), outs[0], slots[0][1])
        return _make_op_step(kernel, attrs, outs, template, slots)

    # -- in-place elementwise ops -----------------------------------------------------------
    def _inplace_step(self, instr: OpCall, env: Mapping[str, int]) -> Step | None:
        """An elementwise op that writes into an operand dying there (as NumPy users do
        with ``out=``), which saves an allocation and the page faults of a fresh buffer."""
        if self._reuse is None:
            self._reuse = inplace_candidates(self.fn)
        pos = self._reuse.get(id(instr))
        if pos is None:
            return None
        info = get_op(instr.op)
        assert info is not None
        kernel = self.choose(info, instr, info.filled_attrs(instr.attr_dict()), env)
        if kernel is not info.kernel:  # the scheduler picked another variant: use it
            return None
        ufunc = info.ufunc
        assert ufunc is not None  # inplace_candidates took only ops that have one
        args = [self._reg(x) if isinstance(x, Reg) else x for x in instr.ins]
        target = args[pos]
        assert isinstance(target, int)
        out = self._reg(instr.outs[0])
        regs_at = [i for i, x in enumerate(instr.ins) if isinstance(x, Reg)]
        if len(args) == 1:

            def unary(regs: Regs) -> None:
                regs[out] = ufunc(regs[target], out=regs[target])

            return unary
        a, b = args
        ra, rb = (0 in regs_at), (1 in regs_at)

        def binary(regs: Regs) -> None:
            x = regs[a] if ra else a  # type: ignore[index]
            y = regs[b] if rb else b  # type: ignore[index]
            regs[out] = ufunc(x, y, out=regs[target])

        return binary


class ShapeView(Mapping[Reg, int]):
    """Shape registers of a register list, as `evaluate_shape_expr` reads them."""

    __slots__ = ("n_t", "regs")

    def __init__(self, regs: Regs, n_t: int) -> None:
        self.regs, self.n_t = regs, n_t

    def __getitem__(self, r: Reg) -> int:
        value: int = self.regs[self.n_t + r.index if not r.is_tensor else r.index]
        return value

    def __iter__(self) -> Any:
        return iter(())

    def __len__(self) -> int:
        return 0


def _alloc(o: int, spec: list[int | tuple[int]], create: TensorCreate) -> Step:
    dtype = create.dtype.numpy.newbyteorder("=")

    def alloc(regs: Regs) -> None:
        regs[o] = np.empty([d if isinstance(d, int) else regs[d[0]] for d in spec], dtype)

    return alloc


def _setter(out: int, value: Any) -> Step:
    def step(regs: Regs) -> None:
        regs[out] = value

    return step


def _view_step(view: Any, out: int, src: int) -> Step:
    """A layout op (`OpInfo.view`) as one method call on its tensor."""

    def layout(regs: Regs) -> None:
        regs[out] = view(regs[src])

    return layout


def _make_op_step(
    kernel: Any,
    attrs: dict[str, Any],
    outs: tuple[int, ...],
    template: list[Any],
    slots: list[tuple[int, int]],
) -> Step:
    """The closure of one OP_CALL; the common shapes get their own short closures."""
    if len(outs) == 1 and len(template) == len(slots):
        (o,) = outs
        regs_in = tuple(r for _, r in slots)
        if len(regs_in) == 1:
            (a,) = regs_in

            def unary(regs: Regs) -> None:
                regs[o] = kernel((regs[a],), attrs)[0]

            return unary
        if len(regs_in) == 2:
            a, b = regs_in

            def binary(regs: Regs) -> None:
                regs[o] = kernel((regs[a], regs[b]), attrs)[0]

            return binary

    def general(regs: Regs) -> None:
        args = list(template)
        for pos, r in slots:
            args[pos] = regs[r]
        results = kernel(args, attrs)
        for o, value in zip(outs, results, strict=True):
            regs[o] = value

    return general


def inplace_candidates(fn: Function) -> dict[int, int]:
    """``id(instr) -> operand position`` for elementwise float ops that may write into an
    operand: it is a fresh array made by an op of this function (not a parameter, constant,
    PHI or view-making op), used by no view-making op (so nothing aliases it), of the
    result's exact static type, and this instruction is its last use anywhere."""
    last_use: dict[Reg, tuple[int, int]] = {}
    blocks_of: dict[Reg, set[str]] = {}  # blocks that define or use the value
    owned: set[Reg] = set()
    pinned: set[Reg] = set()  # values that may be aliased or must survive
    types: dict[Reg, TensorType] = {}
    order = 0
    for block in fn.blocks:
        for instr in block.instrs:
            order += 1
            for r in instr.uses():
                last_use[r] = (order, id(instr))
            for r in (*instr.uses(), *instr.defs()):
                blocks_of.setdefault(r, set()).add(block.label)
            if isinstance(instr, OpCall):
                info = get_op(instr.op)
                flags = info.flags if info is not None else OpFlag.NONE
                if OpFlag.LAYOUT in flags or OpFlag.DATA_DEPENDENT in flags:
                    pinned.update(r for r in instr.ins if isinstance(r, Reg))
                else:
                    owned.update(instr.outs)
                for r, t in zip(instr.outs, instr.types, strict=False):
                    if t is not None:
                        types[r] = t
            elif not isinstance(instr, OpCall):
                pinned.update(instr.uses())  # PHI, RETURN, RESIZE, branches keep values
    out: dict[int, int] = {}
    for block in fn.blocks:
        for instr in block.instrs:
            if not isinstance(instr, OpCall) or len(instr.outs) != 1:
                continue
            info = get_op(instr.op)
            if info is None or info.ufunc is None:
                continue
            t_out = instr.types[0]
            if t_out is None or not t_out.dtype.is_float or _has_dynamic(t_out):
                continue
            for pos, x in enumerate(instr.ins):
                if (
                    isinstance(x, Reg)
                    and x in owned
                    and x not in pinned
                    and blocks_of.get(x) == {block.label}  # loops re-run only whole blocks
                    and last_use.get(x, (0, 0))[1] == id(instr)
                    and types.get(x) == t_out
                    and sum(1 for y in instr.ins if y == x) == 1
                ):
                    out[id(instr)] = pos
                    break
    return out


def _has_dynamic(t: TensorType) -> bool:
    return any(isinstance(d, Dynamic) or d == "dynamic" for d in t.shape)
