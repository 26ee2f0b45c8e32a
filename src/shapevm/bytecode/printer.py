"""The text form: one instruction per line, typed registers, symbolic shapes.

::

    func @mlp(t0: f32[b, 256], t1: f32[256, 64]) -> f32[b, 64]
        where b >= 1
      L0:
        s0 = SHAPE_PROPAGATE t0, 0            (b)
        t2: f32[b, 64] = OP_CALL matmul(t0, t1)
        t3: f32[b, 64] = OP_CALL maximum(t2, 0.0)
        RETURN t3

A parenthesized column after the instruction gives its meaning (the value of a shape
register, the type of a created tensor); it is derived, and the parser skips it. Output is
deterministic, so it serves golden-file tests; `shapevm.bytecode.parse_program` reads it back
to an equal program.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any, TextIO

from shapevm.bytecode.isa import Reg
from shapevm.bytecode.program import (
    BindInputs,
    BranchIf,
    Constant,
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
from shapevm.bytecode.shape_expr import evaluate_shape_expr, format_shape_expr
from shapevm.ops import DYNAMIC, Dynamic
from shapevm.shapes import SymbolicScope, symbolic_shape

MEANING_COLUMN = 42  # where the "(meaning)" column starts, counted from the line start
INDENT = "    "


def format_program(program: Program) -> str:
    """The whole program as text (ends with a newline)."""
    parts = [f"meta {json.dumps(k)} = {json.dumps(v)}" for k, v in program.metadata]
    parts += [format_constant(i, c) for i, c in enumerate(program.constants)]
    chunks = ["\n".join(parts)] if parts else []
    for fn in program.functions:
        chunks.append("\n".join(text for _, text in function_lines(fn, program)))
    return "\n\n".join(chunks) + "\n"


def print_program(program: Program, file: TextIO | None = None) -> None:
    """Write `format_program` to ``file`` (standard output by default)."""
    (file or sys.stdout).write(format_program(program))


def format_constant(index: int, const: Constant) -> str:
    """``const k0 "w": f32[2, 2] = b64"..."``: raw little-endian bytes, base64."""
    data = base64.b64encode(_le_bytes(const)).decode("ascii")
    return f'const k{index} {json.dumps(const.name)}: {const.type} = b64"{data}"'


def _le_bytes(const: Constant) -> bytes:
    arr = const.array
    return bytes(arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes(order="C"))


def format_signature(fn: Function) -> str:
    params = ", ".join(f"{p.reg}: {p.type}" for p in fn.params)
    results = ", ".join(str(t) for t in fn.results) if fn.results else "()"
    return f"func @{fn.name}({params}) -> {results}"


def function_lines(fn: Function, program: Program | None = None) -> list[tuple[int | None, str]]:
    """The lines of one function with the instruction index of each (``None`` for others).

    Instruction lines are indented by four spaces, labels by two; the verifier and the
    disassembler cut windows out of these lines.
    """
    lines: list[tuple[int | None, str]] = [(None, format_signature(fn))]
    lines += [(None, f"{INDENT}where {c}") for c in fn.constraints]
    if fn.dim_args:
        lines.append((None, f"{INDENT}dim_args {', '.join(fn.dim_args)}"))
    meanings = Meanings(fn, program)
    index = 0
    for block in fn.blocks:
        lines.append((None, f"  {block.label}:"))
        for instr in block.instrs:
            lines.append((index, INDENT + format_instr(instr, meanings.next(instr))))
            index += 1
    return lines


def format_instr(instr: Instr, meaning: str | None = None) -> str:
    """One instruction without indentation, with its meaning column and location."""
    text = _lhs(instr) + instr.opcode.name + _operands(instr)
    if meaning:
        text = text.ljust(MEANING_COLUMN - len(INDENT) - 2) + f"  ({meaning})"
    if instr.loc is not None:
        text += f"  loc({json.dumps(instr.loc)})"
    return text


def _lhs(instr: Instr) -> str:
    defs = instr.defs()
    if isinstance(instr, (TensorAlloc, TensorFree)) or not defs:
        return ""
    types = instr.declared_types() or (None,) * len(defs)
    items = [f"{r}: {t}" if t is not None else str(r) for r, t in zip(defs, types, strict=False)]
    return ", ".join(items) + " = "


def format_spec(spec: tuple[SpecDim, ...]) -> str:
    return "[" + ", ".join(str(d) for d in spec) + "]"


def _operands(instr: Instr) -> str:
    text = operand_text(instr)
    return " " + text if text else ""


def operand_text(instr: Instr) -> str:
    """The operands of ``instr`` as the text form writes them (results excluded)."""
    text: str
    if isinstance(instr, BindInputs):
        text = ", ".join(instr.names)
    elif isinstance(instr, ShapePropagate):
        text = f"{instr.src}, {instr.axis}"
    elif isinstance(instr, ShapeCompute):
        text = format_shape_expr(instr.expr)
    elif isinstance(instr, TensorCreate):
        text = f"{format_spec(instr.spec)}, {instr.dtype}, {instr.device}"
    elif isinstance(instr, (TensorAlloc, TensorFree)):
        text = str(instr.reg)
    elif isinstance(instr, LoadConst):
        text = f"k{instr.const}"
    elif isinstance(instr, OpCall):
        text = instr.call_text()
    elif isinstance(instr, TensorResize):
        text = f"{instr.src}, {format_spec(instr.spec)}"
    elif isinstance(instr, Jump):
        text = instr.target
    elif isinstance(instr, BranchIf):
        text = f"{instr.cond}, {instr.if_true}, {instr.if_false}"
    elif isinstance(instr, TensorPhi):
        text = ", ".join(f"({label}, {reg})" for label, reg in instr.incoming)
    else:
        assert isinstance(instr, Return), instr
        text = ", ".join(str(r) for r in instr.values)
    return text


class Meanings:
    """Derives the meaning column: symbolic values of shape registers, created types.

    A best-effort forward pass over declared types only (no shape rules); whatever it cannot
    tell it leaves out. The verifier does the real inference.
    """

    def __init__(self, fn: Function, program: Program | None) -> None:
        self.program = program
        try:
            self.scope = SymbolicScope(fn.constraints)
        except Exception:  # bad constraints still print; the verifier reports them
            self.scope = SymbolicScope(())
        self.types: dict[Reg, TensorType] = {p.reg: p.type for p in fn.params}
        self.values: dict[Reg, Any] = {}

    def next(self, instr: Instr) -> str | None:
        try:
            return self._meaning(instr)
        except Exception:  # a malformed program still prints; the verifier reports it
            return None

    def _dim(self, text: int | str | Dynamic) -> Any:
        if isinstance(text, str):
            return symbolic_shape(text, scope=self.scope)[0]
        return text

    def _meaning(self, instr: Instr) -> str | None:
        for reg, typ in zip(instr.defs(), instr.declared_types(), strict=False):
            if typ is not None:
                self.types[reg] = typ
        if isinstance(instr, BindInputs):
            for reg, name in zip(instr.outs, instr.names, strict=False):
                self.values[reg] = self._dim(name)
            return None
        if isinstance(instr, ShapePropagate):
            value = self._dim(self.types[instr.src].shape[instr.axis])
            return self._store(instr.out, value)
        if isinstance(instr, ShapeCompute):
            regs = {r: v for r, v in self.values.items() if not isinstance(v, Dynamic)}
            return self._store(instr.out, evaluate_shape_expr(instr.expr, regs))
        if isinstance(instr, (TensorCreate, TensorResize)):
            dtype = instr.dtype if isinstance(instr, TensorCreate) else self.types[instr.src].dtype
            typ = TensorType(dtype, tuple(self._spec_dim(d) for d in instr.spec))
            self.types[instr.out] = typ
            return str(typ) if isinstance(instr, TensorCreate) or instr.type is None else None
        if isinstance(instr, LoadConst) and self.program is not None:
            const = self.program.constants[instr.const]
            self.types.setdefault(instr.out, const.type)
            return json.dumps(const.name) if instr.type is not None else f"{const.type}"
        if isinstance(instr, BranchIf) and not isinstance(instr.cond, Reg):
            lhs = evaluate_shape_expr(instr.cond.lhs, self.values)
            rhs = evaluate_shape_expr(instr.cond.rhs, self.values)
            return f"{lhs} {instr.cond.op} {rhs}"
        return None

    def _spec_dim(self, dim: SpecDim) -> int | str | Dynamic:
        if isinstance(dim, Reg):
            value = self.values.get(dim, DYNAMIC)
            return value if isinstance(value, (int, Dynamic)) else str(value)
        return dim

    def _store(self, reg: Reg, value: Any) -> str:
        self.values[reg] = value
        return str(value)
