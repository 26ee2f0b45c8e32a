"""``shapevm dis FILE``: a disassembler in the manner of Python's ``dis``.

Columns: instruction number (and byte offset with ``--offsets``), opcode, raw operands,
then their meaning in parentheses (inferred types, shape values, the op's doc line). The
constants and each function's dimension table follow the code.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import numpy as np

from shapevm.bytecode import binary_format as F
from shapevm.bytecode.binary_reader import Decoded, decode, map_file
from shapevm.bytecode.errors import BytecodeFormatError, BytecodeSyntaxError
from shapevm.bytecode.infer import BadDim, Inference
from shapevm.bytecode.isa import Opcode, Reg
from shapevm.bytecode.parser import parse_program
from shapevm.bytecode.printer import format_signature, operand_text
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
    TensorAlloc,
    TensorCreate,
    TensorFree,
    TensorPhi,
    TensorResize,
)
from shapevm.bytecode.shape_expr import evaluate_shape_expr
from shapevm.bytecode.verify import infer_types
from shapevm.ops import Dynamic, get_op
from shapevm.shapes import DimExpr, bounds

OPNAME_WIDTH = 16
RAW_WIDTH = 34


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def read_any(path: str | os.PathLike[str]) -> tuple[Program, Decoded | None]:
    """A program from a binary file, or from a text file (then without byte offsets)."""
    data = map_file(path)
    if bytes(data[: len(F.MAGIC)]) != F.MAGIC and _looks_like_text(data):
        return parse_program(bytes(data).decode("utf-8")), None
    decoded = decode(data, check_data=True)
    return decoded.program, decoded


def _looks_like_text(data: Any) -> bool:
    head = bytes(data[:4096])
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return text.lstrip().startswith(("func ", "const ", "#"))


def disassemble(
    program: Program,
    file: TextIO | None = None,
    *,
    decoded: Decoded | None = None,
    show_offsets: bool = False,
) -> None:
    """Print the disassembly; ``show_offsets`` adds byte offsets from ``decoded``."""
    out = file or sys.stdout
    if decoded is not None:
        major, minor = decoded.version
        out.write(f"shapevm bytecode {major}.{minor}, {decoded.size} bytes, ")
    out.write(f"{plural(len(program.functions), 'function')}, ")
    out.write(f"{plural(len(program.constants), 'constant')}\n")
    offsets_on = show_offsets and decoded is not None
    for n, fn in enumerate(program.functions):
        offsets = decoded.offsets[n] if offsets_on and decoded is not None else None
        out.write("\n")
        _function(out, fn, program, offsets)
    if program.constants:
        out.write("\nConstants:\n")
        consts = decoded.const_offsets if offsets_on and decoded is not None else None
        for i, const in enumerate(program.constants):
            out.write(_constant_line(i, const, consts[i] if consts else None) + "\n")
    for fn in program.functions:
        out.write(f"\nDimensions of @{fn.name}:\n")
        for line in _dimension_lines(fn, program):
            out.write(line + "\n")
    used = sorted({i.opcode for fn in program.functions for _, _, i in fn.instructions()})
    if used:
        out.write("\nOpcodes:\n")
        out.write(opcode_legend(used))


def opcode_legend(opcodes: Sequence[Opcode] = tuple(Opcode)) -> str:
    """One line per opcode with its doc line from the instruction-set table."""
    return "".join(f"  {op.name:<{OPNAME_WIDTH}} {op.info.doc}\n" for op in opcodes)


def _function(out: TextIO, fn: Function, program: Program, offsets: Sequence[int] | None) -> None:
    out.write(f"Disassembly of @{fn.name}:\n{format_signature(fn)}\n")
    for c in fn.constraints:
        out.write(f"    where {c}\n")
    if fn.dim_args:
        out.write(f"    dim_args {', '.join(fn.dim_args)}\n")
    inf = infer_types(fn, program)
    width = len(str(max(fn.num_instructions - 1, 0)))
    index = 0
    for block in fn.blocks:
        out.write(f"  {block.label}:\n")
        for instr in block.instrs:
            offset = f"0x{offsets[index]:06x}  " if offsets is not None else ""
            raw = _raw(instr)
            meaning = _meaning(instr, inf, program)
            line = f"    {offset}{index:>{width}}  {instr.opcode.name:<{OPNAME_WIDTH}} "
            line += f"{raw:<{RAW_WIDTH}}" + (f" ({meaning})" if meaning else "")
            if instr.loc:
                line += f"  at {instr.loc}"
            out.write(line.rstrip() + "\n")
            index += 1


def _raw(instr: Instr) -> str:
    """Operands as written: results first, then ``<-`` and the inputs."""
    defs = ", ".join(str(r) for r in instr.defs())
    rest = operand_text(instr)
    return f"{defs} <- {rest}" if defs else rest


def _types(regs: Sequence[Reg], inf: Inference) -> str:
    return ", ".join(str(inf.types[r]) if r in inf.types else "?" for r in regs)


def _meaning(instr: Instr, inf: Inference, program: Program) -> str:
    try:
        return _meaning_of(instr, inf, program)
    except Exception:  # a broken program still disassembles; validate explains it
        return ""


def _meaning_of(instr: Instr, inf: Inference, program: Program) -> str:
    values = inf.values
    if isinstance(instr, BindInputs):
        return ", ".join(f"{r} = {n}" for r, n in zip(instr.outs, instr.names, strict=False))
    if isinstance(instr, ShapePropagate):
        return f"{values.get(instr.out, '?')} = {instr.src}.shape[{instr.axis}]"
    if isinstance(instr, ShapeCompute):
        return str(values.get(instr.out, "?"))
    if isinstance(instr, (TensorCreate, TensorResize)):
        where = f" on {instr.device}" if isinstance(instr, TensorCreate) else " view"
        return _types([instr.out], inf) + where
    if isinstance(instr, (TensorAlloc, TensorFree)):
        typ = inf.types.get(instr.reg)
        return f"{typ}, {_nbytes(typ.shape, typ.dtype.itemsize)} bytes" if typ else ""
    if isinstance(instr, LoadConst):
        if not 0 <= instr.const < len(program.constants):
            return "no such constant"
        const = program.constants[instr.const]
        return f"{json.dumps(const.name)} {const.type}"
    if isinstance(instr, OpCall):
        info = get_op(instr.op)
        doc = info.doc if info is not None else "unknown op"
        return f"{_types(instr.outs, inf)}: {doc}"
    if isinstance(instr, Jump):
        return f"to {instr.target}"
    if isinstance(instr, BranchIf):
        if isinstance(instr.cond, Reg):
            return f"{instr.cond} is true"
        lhs = evaluate_shape_expr(instr.cond.lhs, values)
        rhs = evaluate_shape_expr(instr.cond.rhs, values)
        return f"{lhs} {instr.cond.op} {rhs}"
    if isinstance(instr, TensorPhi):
        return _types([instr.out], inf)
    if isinstance(instr, Return):
        return _types(instr.values, inf)
    return ""


def _nbytes(shape: Sequence[Any], itemsize: int) -> str:
    total: Any = itemsize
    for d in shape:
        if isinstance(d, Dynamic):
            return "dynamic"
        total = total * d
    return str(total)


def _constant_line(index: int, const: Constant, offset: int | None) -> str:
    where = f"  at 0x{offset:06x}" if offset is not None else ""
    preview = np.array2string(
        np.asarray(const.array).reshape(-1)[:6], precision=4, separator=", ", threshold=6
    )
    more = " ..." if const.array.size > 6 else ""
    name = json.dumps(const.name)
    return f"  k{index}  {name}  {const.type}  {const.nbytes} bytes{where}  {preview}{more}"


def _dimension_lines(fn: Function, program: Program) -> list[str]:
    inf = infer_types(fn, program)
    sources: dict[str, str] = {name: "passed explicitly (dim_args)" for name in fn.dim_args}
    symbols: dict[str, Any] = {}
    for param in fn.params:
        typ = inf.types.get(param.reg)
        for axis, d in enumerate(typ.shape if typ else ()):
            if isinstance(d, DimExpr):
                for var in sorted(d.free_vars()):
                    text = f"from {param.reg}.shape[{axis}]"
                    sources.setdefault(var, text if str(d) == var else f"{text} = {d}")
    for var in sources:
        try:
            symbols[var] = inf.dim(var)
        except BadDim:
            continue
    if not sources:
        return ["  (no dimension variables)"]
    width = max(len(v) for v in sources)
    lines = []
    for var, source in sources.items():
        lo, hi = bounds(symbols[var]) if var in symbols else ("?", "?")
        lines.append(f"  {var:<{width}}  {source:<30}  bounds [{lo}, {hi}]")
    return lines


def run_dis(path: str, offsets: bool, file: TextIO | None = None) -> int:
    """The ``shapevm dis`` command; returns the exit status."""
    try:
        program, decoded = read_any(path)
    except OSError as exc:
        print(f"shapevm dis: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except (BytecodeFormatError, BytecodeSyntaxError) as exc:
        print(f"shapevm dis: {path}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    disassemble(program, file, decoded=decoded, show_offsets=offsets)
    return 0
