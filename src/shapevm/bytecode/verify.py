"""The verifier: runs on every load and before every run of untrusted bytecode.

`verify` raises `VerifyError` listing every problem found; `check` returns them. Checks,
each reported with instruction index, opcode, expected vs found, a fix and a window:

- structure: labels, terminators, ``TENSOR_PHI`` placement, one definition per register;
- register kinds: tensor registers where tensors go, shape registers where shapes go;
- def-before-use on every path through the control-flow graph;
- ops: known, arity, attributes, shape rules decided under the scope's constraints;
- declared types against computed ones; ``TENSOR_PHI`` compatibility; results against
  the signature;
- shape-propagation chains acyclic;
- ``TENSOR_ALLOC``/``TENSOR_FREE`` pairing: no double free, no use after free, no leak;
- ``TENSOR_CREATE`` on a device this runtime has; ``TENSOR_ALLOC`` only of tensors whose
  every dimension is known before the data (no ``dynamic`` one);
- every dimension variable solvable from the inputs or passed explicitly (``dim_args``).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence

from shapevm.bytecode.errors import Diagnostic, Reporter, VerifyError, describe
from shapevm.bytecode.infer import BadDim, Inference, VType
from shapevm.bytecode.isa import Reg, RegKind
from shapevm.bytecode.program import (
    DEVICES,
    NAME,
    BindInputs,
    BranchIf,
    Function,
    Instr,
    OpCall,
    Program,
    ShapeCompute,
    ShapePropagate,
    TensorAlloc,
    TensorCreate,
    TensorPhi,
    TensorResize,
)
from shapevm.bytecode.shape_expr import shape_expr_regs
from shapevm.bytecode.verify_flow import (
    CFG,
    build_cfg,
    check_allocations,
    check_cycles,
    check_def_use,
)
from shapevm.ops import Dynamic
from shapevm.shapes import DimExpr, SymbolicScope


def verify(program: Program) -> None:
    """Raise `VerifyError` with every problem of ``program``; return ``None`` if valid."""
    diagnostics = check(program)
    if diagnostics:
        raise VerifyError(diagnostics)


def check(program: Program) -> list[Diagnostic]:
    """Every problem of ``program``, in function and instruction order."""
    out: list[Diagnostic] = []
    names = [fn.name for fn in program.functions]
    for fn in program.functions:
        rep = Reporter(fn, program)
        if names.count(fn.name) > 1:
            rep.signature("structure", f"function @{fn.name} is defined more than once")
        _check_function(fn, program, rep)
        out.extend(rep.diagnostics)
    return out


def _check_function(fn: Function, program: Program, rep: Reporter) -> None:
    if not fn.blocks:
        rep.signature("structure", f"@{fn.name} has no blocks", fix="add a block ending in RETURN")
        return
    cfg = build_cfg(fn)
    _check_structure(fn, cfg, rep)
    _check_kinds(fn, rep)
    created = _check_single_definition(fn, rep)
    try:
        scope = fn.make_scope()
    except Exception as exc:  # the engine's message names the bad constraint
        rep.signature("signature", f"bad constraint: {exc}", found=", ".join(fn.constraints))
        scope = SymbolicScope(())
    cycle_regs = check_cycles(fn, rep)
    check_def_use(fn, cfg, rep, skip=cycle_regs)
    inference = Inference(fn, program, scope, rep, cfg, created)
    inputs = _signature_types(fn, inference, rep)
    unreachable = [b for b in range(len(fn.blocks)) if b not in cfg.reachable]
    inference.run([*cfg.rpo, *unreachable])
    check_allocations(fn, cfg, rep, created)
    _check_creates(fn, rep)
    _check_dim_vars(fn, inference, inputs, rep)
    if not rep.diagnostics:
        _remember(fn, program, inference)


# The types of functions that verified clean, for `infer_types` (the JIT's region finder
# asks for them right after `export` verified the program: inferring them again took a
# fifth of W3's wrap). Functions and programs are immutable; an entry is used only for the
# very function it was made from, in a program of the very same functions. The table keeps
# the last few only: an entry keeps its program (and the program's constants, a model's
# weights) alive.
_INFERRED: OrderedDict[int, tuple[Function, Program, Inference]] = OrderedDict()
_INFERRED_LOCK = threading.Lock()
_INFERRED_MAX = 4


def _remember(fn: Function, program: Program, inference: Inference) -> None:
    with _INFERRED_LOCK:
        _INFERRED[id(fn)] = (fn, program, inference)
        _INFERRED.move_to_end(id(fn))
        while len(_INFERRED) > _INFERRED_MAX:
            _INFERRED.popitem(last=False)


def _same_functions(a: Program, b: Program) -> bool:
    """Whether two programs hold the very same functions (an inference reads a program only
    for the signatures of the functions it calls): `export` verifies a program and then
    wraps the same functions in another."""
    return a is b or (
        len(a.functions) == len(b.functions)
        and all(f is g for f, g in zip(a.functions, b.functions, strict=True))
    )


def infer_types(fn: Function, program: Program) -> Inference:
    """Type every register of ``fn`` as the verifier does, ignoring problems (for tools)."""
    with _INFERRED_LOCK:
        hit = _INFERRED.get(id(fn))
    if hit is not None and hit[0] is fn and _same_functions(hit[1], program):
        return hit[2]
    try:
        scope = fn.make_scope()
    except Exception:
        scope = SymbolicScope(())
    cfg = build_cfg(fn)
    created = {i.out: n for n, _, i in fn.instructions() if isinstance(i, TensorCreate)}
    inference = Inference(fn, program, scope, Reporter(fn, program), cfg, created)
    _signature_types(fn, inference, Reporter(fn, program))
    unreachable = [b for b in range(len(fn.blocks)) if b not in cfg.reachable]
    inference.run([*cfg.rpo, *unreachable])
    return inference


def _check_structure(fn: Function, cfg: CFG, rep: Reporter) -> None:
    seen: set[str] = set()
    for block_no, block in enumerate(fn.blocks):
        first = cfg.first_index[block_no]
        if block.label in seen or not NAME.fullmatch(block.label):
            what = "is defined twice" if block.label in seen else "is not a valid label"
            rep.signature("structure", f"label {block.label!r} {what}")
        seen.add(block.label)
        if not block.instrs:
            rep.signature("structure", f"block {block.label} is empty", fix="end it with JUMP")
            continue
        past_phis = False
        for offset, instr in enumerate(block.instrs):
            index = first + offset
            last = offset == len(block.instrs) - 1
            if instr.opcode.is_terminator and not last:
                rep.at(
                    index,
                    "structure",
                    f"{instr.opcode.name} must end its block",
                    expected=f"{instr.opcode.name} as the last instruction of {block.label}",
                    found=f"{len(block.instrs) - offset - 1} instructions after it",
                    fix="start a new block with a label after it",
                )
            if last and not instr.opcode.is_terminator:
                rep.at(
                    index,
                    "structure",
                    f"block {block.label} does not end with a terminator",
                    expected="JUMP, BRANCH_IF or RETURN",
                    found=instr.opcode.name,
                    fix="add JUMP to the next block (control never falls through)",
                )
            if isinstance(instr, TensorPhi) and past_phis:
                rep.at(
                    index,
                    "structure",
                    "TENSOR_PHI must come before the other instructions of its block",
                    expected=f"TENSOR_PHI right after {block.label}:",
                    found="an instruction before it",
                )
            past_phis = past_phis or not isinstance(instr, TensorPhi)
            for label in _labels(instr):
                if label not in cfg.labels:
                    rep.at(
                        index,
                        "structure",
                        f"unknown label {label}",
                        expected="one of " + ", ".join(cfg.labels),
                        found=label,
                    )


def _labels(instr: Instr) -> Iterator[str]:
    yield from instr.targets()
    if isinstance(instr, TensorPhi):
        yield from (label for label, _ in instr.incoming)


def _slots(instr: Instr) -> Iterator[tuple[str, Reg, RegKind]]:
    """Every register operand with its role and the kind that role needs."""
    tensor, shape = RegKind.TENSOR, RegKind.SHAPE
    if isinstance(instr, BindInputs):
        yield from (("result", r, shape) for r in instr.outs)
    elif isinstance(instr, ShapePropagate):
        yield ("result", instr.out, shape)
        yield ("operand 1", instr.src, tensor)
    elif isinstance(instr, ShapeCompute):
        yield ("result", instr.out, shape)
        yield from (("expression operand", r, shape) for r in shape_expr_regs(instr.expr))
    elif isinstance(instr, (TensorCreate, TensorResize)):
        yield ("result", instr.out, tensor)
        if isinstance(instr, TensorResize):
            yield ("operand 1", instr.src, tensor)
        yield from (("spec dimension", d, shape) for d in instr.spec if isinstance(d, Reg))
    elif isinstance(instr, BranchIf):
        if isinstance(instr.cond, Reg):
            yield ("condition", instr.cond, tensor)
        else:
            yield from (("predicate operand", r, shape) for r in shape_expr_regs(instr.cond))
    else:
        yield from (("result", r, tensor) for r in instr.defs())
        yield from ((f"operand {i + 1}", r, tensor) for i, r in enumerate(instr.uses()))


def _check_kinds(fn: Function, rep: Reporter) -> None:
    for param in fn.params:
        if not param.reg.is_tensor:
            rep.signature(
                "kinds",
                f"parameter {param.reg} must be a tensor register",
                expected="t0, t1, ...",
                found=str(param.reg),
            )
    for index, _, instr in fn.instructions():
        for role, reg, kind in _slots(instr):
            if reg.kind is not kind:
                rep.at(
                    index,
                    "kinds",
                    f"{role} of {instr.opcode.name} must be a {kind.noun}",
                    expected=f"a {kind.noun} ({kind.value}0, {kind.value}1, ...)",
                    found=f"{reg} ({reg.kind.noun})",
                    fix="use SHAPE_PROPAGATE to read a dimension into a shape register"
                    if kind is RegKind.SHAPE
                    else "",
                )


def _check_single_definition(fn: Function, rep: Reporter) -> dict[Reg, int]:
    """One definition per register (SSA). Returns ``TENSOR_CREATE``'d registers -> index.

    ``OP_CALL`` may write into a register declared by ``TENSOR_CREATE``; that is not a
    second definition.
    """
    created = {i.out: n for n, _, i in fn.instructions() if isinstance(i, TensorCreate)}
    defined: dict[Reg, int | None] = {p.reg: None for p in fn.params}
    for index, _, instr in fn.instructions():
        for reg in instr.defs():
            if isinstance(instr, OpCall) and reg in created and created[reg] != index:
                continue
            if reg in defined:
                first = defined[reg]
                where = "as a parameter" if first is None else f"at instruction {first}"
                rep.at(
                    index,
                    "structure",
                    f"{reg} is defined twice",
                    expected="one definition per register",
                    found=f"{reg} is already defined {where}",
                    fix="use a new register (merge values with TENSOR_PHI)",
                )
            else:
                defined[reg] = index
    return created


def _check_creates(fn: Function, rep: Reporter) -> None:
    """Devices of ``TENSOR_CREATE``; ``TENSOR_ALLOC`` needs every dimension before the data."""
    creates: dict[Reg, tuple[int, TensorCreate]] = {}
    for index, _, instr in fn.instructions():
        if isinstance(instr, TensorCreate):
            creates.setdefault(instr.out, (index, instr))
            if not _runtime_device(instr.device):
                rep.at(
                    index,
                    "device",
                    f"device {instr.device!r} is not a device of this runtime",
                    expected="one of " + ", ".join(DEVICES),
                    found=instr.device,
                    fix=f"create {instr.out} on {DEVICES[0]}: the interpreter and the JIT "
                    "run on the CPU",
                )
        elif isinstance(instr, TensorAlloc) and instr.reg in creates:
            at, create = creates[instr.reg]
            axes = [str(i) for i, d in enumerate(create.spec) if isinstance(d, Dynamic)]
            if axes:
                rep.at(
                    index,
                    "alloc",
                    f"{instr.reg} cannot be allocated: its size is only known from the data",
                    expected=f"every dimension of {instr.reg} known before TENSOR_ALLOC "
                    "(constants or shape registers)",
                    found=f"dimension {', '.join(axes)} of {instr.reg} is dynamic "
                    f"(TENSOR_CREATE at instruction {at})",
                    fix=f"remove TENSOR_ALLOC and TENSOR_FREE of {instr.reg}: the op that "
                    "computes it allocates its result; or give the size in a shape register",
                )


def _runtime_device(device: str) -> bool:
    name, _, number = device.partition(":")
    return name in DEVICES and number in ("", "0")


def _signature_types(fn: Function, inf: Inference, rep: Reporter) -> list[VType | None]:
    inputs: list[VType | None] = []
    for param in fn.params:
        try:
            typ = inf.vtype(param.type)
        except BadDim as exc:
            rep.signature("signature", f"bad dimension {exc}", found=str(param.type))
            inputs.append(None)
            continue
        inputs.append(typ)
        inf.types[param.reg] = typ
    for result in fn.results:
        try:
            inf.vtype(result)
        except BadDim as exc:
            rep.signature("signature", f"bad dimension {exc}", found=str(result))
    return inputs


def _check_dim_vars(
    fn: Function, inf: Inference, inputs: Sequence[VType | None], rep: Reporter
) -> None:
    in_vars: dict[str, str] = {}
    for param, typ in zip(fn.params, inputs, strict=True):
        for d in typ.shape if typ is not None else ():
            if isinstance(d, DimExpr):
                for v in sorted(d.free_vars()):
                    in_vars.setdefault(v, f"{param.reg}: {typ}")
    known = set(fn.dim_args)
    solvable = _solvable(inputs, known)
    for var, where in in_vars.items():
        if var not in solvable:
            rep.signature(
                "solve",
                f"dimension variable {var!r} cannot be solved from the inputs",
                expected=f"an input dimension linear in {var} (such as 2*{var} + 1) or a "
                f"polynomial increasing in {var}, its other variables solvable",
                found=f"{var} appears only in " + where,
                fix=f"pass it explicitly (dim_args {var}) or add an input with dimension {var}",
            )
    for var, index in sorted(inf.var_uses.items(), key=lambda kv: (kv[1] or -1, kv[0])):
        if var in in_vars or var in known:
            continue
        what = f"unknown dimension variable {var!r}"
        expected = "variables of the inputs or dim_args: " + (
            ", ".join(sorted(set(in_vars) | known)) or "none"
        )
        fix = f"add an input with dimension {var}, or pass it explicitly (dim_args {var})"
        if index is None:
            rep.signature("solve", what, expected=expected, found=var, fix=fix)
        else:
            rep.at(index, "solve", what, expected=expected, found=var, fix=fix)


def _solvable(inputs: Sequence[VType | None], known: set[str]) -> set[str]:
    """Variables the entry binding can solve, by the rule of ``solve_dim_vars``: repeatedly,
    from an input dimension with one unsolved variable in which it is linear (``2*b + 1``)
    or a polynomial increasing in it (``b^2 + b``), never from inside ``floordiv``, ``mod``,
    ``max`` or ``min``.
    """
    solved = set(known)
    dims = [d for t in inputs if t is not None for d in t.shape if isinstance(d, DimExpr)]
    changed = True
    while changed:
        changed = False
        for d in dims:
            unknown = d.free_vars() - solved
            if len(unknown) == 1 and _solvable_from(d, next(iter(unknown))):
                solved |= unknown
                changed = True
    return solved


_CALL = re.compile(r"\b(floordiv|mod|max|min)\(")


def _solvable_from(d: DimExpr, var: str) -> bool:
    text = str(d)
    name = re.compile(rf"(?<![A-Za-z0-9_.]){re.escape(var)}(?![A-Za-z0-9_.])")
    if any(name.search(call) for call in _calls(text)):
        return False
    if _affine_in(d, var):
        return True
    return all(sign > 0 for sign, term in _terms(text) if name.search(term))


def _calls(text: str) -> Iterator[str]:
    """The text of every ``floordiv(...)``-like call in a canonical dimension."""
    for m in _CALL.finditer(text):
        depth, i = 0, m.end() - 1
        while i < len(text):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            if depth == 0:
                break
            i += 1
        yield text[m.start() : i + 1]


def _terms(text: str) -> Iterator[tuple[int, str]]:
    """(sign, term) of a canonical sum such as ``2*b^2 - b + 3``, splitting outside calls."""
    depth, start, sign = 0, 0, 1
    if text.startswith("-"):
        sign, start = -1, 1
    for i, c in enumerate(text):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth == 0 and text[i : i + 3] in (" + ", " - "):
            yield sign, text[start:i]
            sign, start = (1 if text[i + 1] == "+" else -1), i + 3
    yield sign, text[start:]


def _affine_in(d: DimExpr, var: str) -> bool:
    env = {v: 3 for v in d.free_vars()}
    try:
        f = [d.evaluate({**env, var: x}) for x in (1, 2, 3, 7)]
    except Exception:
        return False
    step = f[1] - f[0]
    return step != 0 and f[2] - f[1] == step and f[3] - f[2] == 4 * step


__all__ = ["check", "describe", "infer_types", "verify"]
