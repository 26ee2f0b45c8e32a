"""Bytecode: instruction set, programs, text and binary forms, verifier.

>>> from shapevm.bytecode import parse_program, verify, serialize, deserialize
>>> p = parse_program('''
... func @relu(t0: f32[b, 64]) -> f32[b, 64]
...     where b <= 1024
...   L0:
...     t1: f32[b, 64] = OP_CALL maximum(t0, 0.0)
...     RETURN t1
... ''')
>>> verify(p)
>>> deserialize(serialize(p)) == p
True
"""

from typing import TYPE_CHECKING

from shapevm._lazy import lazy_names
from shapevm.bytecode.errors import (
    BytecodeFormatError,
    BytecodeSyntaxError,
    Diagnostic,
    VerifyError,
)
from shapevm.bytecode.isa import OPCODES, Opcode, OpcodeInfo, Reg, RegKind
from shapevm.bytecode.printer import format_program, print_program
from shapevm.bytecode.program import (
    BindInputs,
    Block,
    BranchIf,
    Constant,
    Dim,
    Function,
    Instr,
    Jump,
    LoadConst,
    OpCall,
    Operand,
    Param,
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
from shapevm.bytecode.serialize import deserialize, load, save, serialize
from shapevm.bytecode.shape_expr import (
    ShapeBin,
    ShapeCmp,
    ShapeExpr,
    parse_shape_cmp,
    parse_shape_expr,
)
from shapevm.bytecode.verify import check, verify

if TYPE_CHECKING:
    from shapevm.bytecode.parser import parse_program, parse_type

# The text parser loads on first use (see `shapevm._lazy`).
__getattr__, __dir__ = lazy_names(
    __name__, dict.fromkeys(("parse_program", "parse_type"), "shapevm.bytecode.parser")
)

__all__ = [
    "OPCODES",
    "BindInputs",
    "Block",
    "BranchIf",
    "BytecodeFormatError",
    "BytecodeSyntaxError",
    "Constant",
    "Diagnostic",
    "Dim",
    "Function",
    "Instr",
    "Jump",
    "LoadConst",
    "OpCall",
    "Opcode",
    "OpcodeInfo",
    "Operand",
    "Param",
    "Program",
    "Reg",
    "RegKind",
    "Return",
    "ShapeBin",
    "ShapeCmp",
    "ShapeCompute",
    "ShapeExpr",
    "ShapePropagate",
    "SpecDim",
    "TensorAlloc",
    "TensorCreate",
    "TensorFree",
    "TensorPhi",
    "TensorResize",
    "TensorType",
    "VerifyError",
    "check",
    "deserialize",
    "format_program",
    "load",
    "parse_program",
    "parse_shape_cmp",
    "parse_shape_expr",
    "parse_type",
    "print_program",
    "save",
    "serialize",
    "verify",
]
