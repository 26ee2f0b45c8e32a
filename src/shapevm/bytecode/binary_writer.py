"""Writes programs in the binary format described in `shapevm.bytecode.binary_format`."""

from __future__ import annotations

import os
import struct
import zlib
from typing import Any

import numpy as np

from shapevm.bytecode import binary_format as F
from shapevm.bytecode.isa import Reg, RegKind
from shapevm.bytecode.program import (
    BindInputs,
    BranchIf,
    Dim,
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
from shapevm.bytecode.shape_expr import ShapeBin, ShapeCmp, ShapeExpr
from shapevm.ops import AttrValue, Dynamic


class _Out:
    """A growing buffer with a string table."""

    def __init__(self, strings: dict[str, int]) -> None:
        self.buf = bytearray()
        self.strings = strings

    def u8(self, v: int) -> None:
        self.buf += struct.pack("<B", v)

    def u32(self, v: int) -> None:
        self.buf += struct.pack("<I", v)

    def u64(self, v: int) -> None:
        self.buf += struct.pack("<Q", v)

    def i64(self, v: int) -> None:
        if not F.I64_MIN <= v <= F.I64_MAX:
            raise ValueError(f"integer {v} does not fit the format's 64 bits")
        self.buf += struct.pack("<q", v)

    def f64(self, v: float) -> None:
        self.buf += struct.pack("<d", v)

    def str(self, s: str | None) -> None:
        if s is None:
            self.u32(F.NO_STRING)
            return
        if s not in self.strings:
            self.strings[s] = len(self.strings)
        self.u32(self.strings[s])

    def reg(self, r: Reg) -> None:
        self.u8(F.REG_TENSOR if r.kind is RegKind.TENSOR else F.REG_SHAPE)
        self.u32(r.index)

    def regs(self, regs: tuple[Reg, ...]) -> None:
        self.u32(len(regs))
        for r in regs:
            self.reg(r)

    def dim(self, d: Dim | SpecDim) -> None:
        if isinstance(d, Dynamic):
            self.u8(F.DIM_DYNAMIC)
        elif isinstance(d, Reg):
            self.u8(F.DIM_REG)
            self.reg(d)
        elif isinstance(d, str):
            self.u8(F.DIM_SYM)
            self.str(d)
        else:
            self.u8(F.DIM_INT)
            self.i64(d)

    def type(self, t: TensorType) -> None:
        self.u8(t.dtype.code)
        self.u32(len(t.shape))
        for d in t.shape:
            self.dim(d)

    def opt_type(self, t: TensorType | None) -> None:
        self.u8(0 if t is None else 1)
        if t is not None:
            self.type(t)

    def spec(self, spec: tuple[SpecDim, ...]) -> None:
        self.u32(len(spec))
        for d in spec:
            self.dim(d)

    def expr(self, e: ShapeExpr) -> None:
        if isinstance(e, Reg):
            self.u8(F.EXPR_REG)
            self.reg(e)
        elif isinstance(e, ShapeBin):
            self.u8(F.EXPR_BIN)
            self.u8(F.BIN_OPS.index(e.op))
            self.expr(e.lhs)
            self.expr(e.rhs)
        else:
            self.u8(F.EXPR_INT)
            self.i64(e)

    def attr(self, v: AttrValue) -> None:
        if isinstance(v, bool):
            self.u8(F.ATTR_BOOL)
            self.u8(int(v))
        elif isinstance(v, int):
            self.u8(F.ATTR_INT)
            self.i64(v)
        elif isinstance(v, float):
            self.u8(F.ATTR_FLOAT)
            self.f64(v)
        elif isinstance(v, str):
            self.u8(F.ATTR_STR)
            self.str(v)
        else:
            self.u8(F.ATTR_LIST)
            self.u32(len(v))
            for item in v:
                self.dim(item)


def _instr(out: _Out, instr: Instr) -> None:
    out.u8(int(instr.opcode))
    out.str(instr.loc)
    if isinstance(instr, BindInputs):
        out.regs(instr.outs)
        for name in instr.names:
            out.str(name)
    elif isinstance(instr, ShapePropagate):
        out.reg(instr.out)
        out.reg(instr.src)
        out.i64(instr.axis)
    elif isinstance(instr, ShapeCompute):
        out.reg(instr.out)
        out.expr(instr.expr)
    elif isinstance(instr, TensorCreate):
        out.reg(instr.out)
        out.spec(instr.spec)
        out.u8(instr.dtype.code)
        out.str(instr.device)
    elif isinstance(instr, (TensorAlloc, TensorFree)):
        out.reg(instr.reg)
    elif isinstance(instr, LoadConst):
        out.reg(instr.out)
        out.u32(instr.const)
        out.opt_type(instr.type)
    elif isinstance(instr, OpCall):
        _op_call(out, instr)
    elif isinstance(instr, TensorResize):
        out.reg(instr.out)
        out.reg(instr.src)
        out.spec(instr.spec)
        out.opt_type(instr.type)
    elif isinstance(instr, Jump):
        out.str(instr.target)
    elif isinstance(instr, BranchIf):
        _branch(out, instr)
    elif isinstance(instr, TensorPhi):
        out.reg(instr.out)
        out.u32(len(instr.incoming))
        for label, reg in instr.incoming:
            out.str(label)
            out.reg(reg)
        out.opt_type(instr.type)
    else:
        assert isinstance(instr, Return), instr
        out.regs(instr.values)


def _op_call(out: _Out, instr: OpCall) -> None:
    out.str(instr.op)
    out.regs(instr.outs)
    for t in instr.types:
        out.opt_type(t)
    out.u32(len(instr.ins))
    for x in instr.ins:
        if isinstance(x, Reg):
            out.u8(F.ARG_REG)
            out.reg(x)
        elif isinstance(x, bool):
            out.u8(F.ARG_BOOL)
            out.u8(int(x))
        elif isinstance(x, int):
            out.u8(F.ARG_INT)
            out.i64(x)
        else:
            out.u8(F.ARG_FLOAT)
            out.f64(x)
    out.u32(len(instr.attrs))
    for name, value in instr.attrs:
        out.str(name)
        out.attr(value)


def _branch(out: _Out, instr: BranchIf) -> None:
    if isinstance(instr.cond, ShapeCmp):
        out.u8(F.COND_CMP)
        out.u8(F.CMP_OPS.index(instr.cond.op))
        out.expr(instr.cond.lhs)
        out.expr(instr.cond.rhs)
    else:
        out.u8(F.COND_REG)
        out.reg(instr.cond)
    out.str(instr.if_true)
    out.str(instr.if_false)


def _function(out: _Out, fn: Function) -> None:
    out.str(fn.name)
    out.u32(len(fn.constraints))
    for c in fn.constraints:
        out.str(c)
    out.u32(len(fn.dim_args))
    for name in fn.dim_args:
        out.str(name)
    out.u32(len(fn.params))
    for p in fn.params:
        out.reg(p.reg)
        out.type(p.type)
    out.u32(len(fn.results))
    for t in fn.results:
        out.type(t)
    out.u32(len(fn.blocks))
    for block in fn.blocks:
        out.str(block.label)
        out.u32(len(block.instrs))
        for instr in block.instrs:
            _instr(out, instr)


def _contiguous_le(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    le = array.astype(array.dtype.newbyteorder("<"), copy=False)
    out: np.ndarray[Any, Any] = np.ascontiguousarray(le).reshape(array.shape)  # 0-d stays 0-d
    return out


Plan = list[tuple[int, np.ndarray[Any, Any]]]  # constant data: offset in DATA, array


def _sections(program: Program) -> tuple[list[tuple[bytes, bytearray]], Plan, int]:
    """The metadata sections, where each constant goes in ``DATA``, and its size."""
    strings: dict[str, int] = {}
    code = _Out(strings)
    code.u32(len(program.functions))
    for fn in program.functions:
        _function(code, fn)
    consts = _Out(strings)
    consts.u32(len(program.constants))
    plan: Plan = []
    offset = 0
    for const in program.constants:
        arr = _contiguous_le(const.array)
        offset = F.align(offset)
        consts.str(const.name)
        consts.u8(const.dtype.code)
        consts.u32(arr.ndim)
        for d in arr.shape:
            consts.u64(d)
        consts.u64(offset)
        consts.u64(arr.nbytes)
        plan.append((offset, arr))
        offset += arr.nbytes
    meta = _Out(strings)
    meta.u32(len(program.metadata))
    for key, value in program.metadata:
        meta.str(key)
        meta.str(value)
    table = _Out(strings)
    table.u32(len(strings))
    for s in strings:  # insertion order is index order
        encoded = s.encode("utf-8")
        table.u32(len(encoded))
        table.buf += encoded
    sections = [(F.STRS, table.buf), (F.CNST, consts.buf), (F.FUNC, code.buf)]
    if program.metadata:
        sections.append((F.META, meta.buf))
    return sections, plan, offset


def serialize(program: Program) -> bytes:
    """The program in the binary format (see `shapevm.bytecode.binary_format`).

    Raises ``ValueError`` for what the format cannot hold (an integer beyond 64 bits).
    """
    meta, plan, data_size = _sections(program)
    count = len(meta) + 1
    offset = F.HEADER_SIZE + F.SECTION.size * count
    places: list[tuple[bytes, int, int]] = []
    for kind, body in meta:
        offset = F.align(offset, 8)
        places.append((kind, offset, len(body)))
        offset += len(body)
    data_start = F.align(offset)
    places.append((F.DATA, data_start, data_size))
    out = bytearray(data_start + data_size)
    for (_, start, size), (_, body) in zip(places, meta, strict=False):
        out[start : start + size] = body
    for at, arr in plan:
        if arr.nbytes == 0:
            continue
        start = data_start + at
        dest = np.frombuffer(out, dtype=np.uint8, count=arr.nbytes, offset=start)
        dest[:] = arr.reshape(-1).view(np.uint8)
    view = memoryview(out)
    table = b"".join(
        F.SECTION.pack(kind, 0, start, size, zlib.crc32(view[start : start + size]))
        for kind, start, size in places
    )
    out[F.HEADER_SIZE : F.HEADER_SIZE + len(table)] = table
    fields = (F.MAGIC, F.MAJOR, F.MINOR, F.HEADER_SIZE, len(out), count)
    out[: F.HEADER_SIZE] = F.HEADER.pack(*fields, 0)
    crc = zlib.crc32(view[:data_start])  # everything before the constant data, gaps too
    out[: F.HEADER_SIZE] = F.HEADER.pack(*fields, crc)
    del view
    return bytes(out)


def save(program: Program, path: str | os.PathLike[str]) -> None:
    """Write the program to ``path`` in the binary format."""
    with open(path, "wb") as f:
        f.write(serialize(program))
