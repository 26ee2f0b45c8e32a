"""Reads the binary format; the one place that knows every format version.

The reader trusts nothing: every read is bounds-checked, every count is checked against
the bytes left before anything is allocated for it, recursion is bounded, and any problem
raises `BytecodeFormatError` with the byte offset and what was expected there.

Format versions: 1.0 (the first; ``tests/data/sample_v1.svbc``).
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from shapevm.bytecode import binary_format as F
from shapevm.bytecode.binary_input import CONSTRAINT_TEXT, Input
from shapevm.bytecode.errors import BytecodeFormatError
from shapevm.bytecode.isa import Opcode, Reg
from shapevm.bytecode.program import (
    DEVICE,
    BindInputs,
    Block,
    BranchIf,
    Constant,
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
    TensorAlloc,
    TensorCreate,
    TensorFree,
    TensorPhi,
    TensorResize,
)
from shapevm.bytecode.shape_expr import ShapeCmp
from shapevm.ops import AttrValue


@dataclass(frozen=True, slots=True)
class Decoded:
    """A decoded program and the byte offset of every instruction, per function."""

    program: Program
    offsets: tuple[tuple[int, ...], ...]  # per function, per instruction
    const_offsets: tuple[int, ...]  # where each constant's data starts in the file
    version: tuple[int, int]
    size: int


InstrReader = Callable[[Input], Instr]


def _bind(r: Input) -> Instr:
    outs = r.regs("BIND_INPUTS results")
    return BindInputs(outs, tuple(r.name("dimension variable") for _ in outs))


def _create(r: Input) -> Instr:
    out = r.reg("TENSOR_CREATE result")
    spec = r.spec("TENSOR_CREATE spec")
    dtype = r.dtype("TENSOR_CREATE dtype")
    return TensorCreate(out, spec, dtype, r.text("device", DEVICE, 40))


def _load(r: Input) -> Instr:
    out = r.reg("LOAD_CONST result")
    return LoadConst(out, r.u32("constant number"), r.opt_type("LOAD_CONST type"))


def _op_call(r: Input) -> Instr:
    op = r.name("op name")
    outs = r.regs("OP_CALL results")
    types = tuple(r.opt_type("OP_CALL result type") for _ in outs)
    ins: list[Operand] = []
    for _ in range(r.count("OP_CALL operands", 2)):
        at = r.pos
        tag = r.u8("operand tag")
        if tag == F.ARG_REG:
            ins.append(r.reg("OP_CALL operand"))
        elif tag == F.ARG_BOOL:
            ins.append(_bool(r, "operand"))
        elif tag == F.ARG_INT:
            ins.append(r.i64("operand"))
        elif tag == F.ARG_FLOAT:
            ins.append(r.f64("operand"))
        else:
            r.fail("bad operand tag", "0 to 3", str(tag), at)
    attrs: list[tuple[str, AttrValue]] = []
    for _ in range(r.count("OP_CALL attributes", 5)):
        name = r.name("attribute name")
        if any(name == k for k, _ in attrs):
            r.fail(f"attribute {name!r} appears twice", "distinct attribute names", name)
        attrs.append((name, _attr(r)))
    return OpCall(outs, op, tuple(ins), tuple(attrs), types)


def _bool(r: Input, what: str) -> bool:
    at = r.pos
    value = r.u8(what)
    if value > 1:
        r.fail(f"bad bool in {what}", "0 or 1", str(value), at)
    return bool(value)


def _attr(r: Input) -> AttrValue:
    at = r.pos
    tag = r.u8("attribute tag")
    if tag == F.ATTR_INT:
        return r.i64("attribute")
    if tag == F.ATTR_FLOAT:
        return r.f64("attribute")
    if tag == F.ATTR_BOOL:
        return _bool(r, "attribute")
    if tag == F.ATTR_STR:
        value = r.string("attribute")
        assert value is not None
        return value
    if tag != F.ATTR_LIST:
        r.fail("bad attribute tag", "0 to 4", str(tag), at)
    n = r.count("attribute list items", 2)
    # An attribute list holds axes (``axis=[-1]``) as well as sizes: ints may be negative.
    items = [r.dim("attribute list", (F.DIM_INT, F.DIM_SYM), signed=True) for _ in range(n)]
    return tuple(i for i in items if isinstance(i, (int, str)))


def _resize(r: Input) -> Instr:
    out = r.reg("TENSOR_RESIZE result")
    src = r.reg("TENSOR_RESIZE operand")
    return TensorResize(out, src, r.spec("TENSOR_RESIZE spec"), r.opt_type("TENSOR_RESIZE"))


def _branch(r: Input) -> Instr:
    at = r.pos
    tag = r.u8("BRANCH_IF condition")
    cond: Reg | ShapeCmp
    if tag == F.COND_REG:
        cond = r.reg("BRANCH_IF condition")
    elif tag == F.COND_CMP:
        op = r.u8("comparison")
        if op >= len(F.CMP_OPS):
            r.fail("bad comparison", f"0 to {len(F.CMP_OPS) - 1}", str(op), at + 1)
        cond = ShapeCmp(F.CMP_OPS[op], r.expr("predicate"), r.expr("predicate"))
    else:
        r.fail("bad condition tag", "0 or 1", str(tag), at)
    return BranchIf(cond, r.name("label"), r.name("label"))


def _phi(r: Input) -> Instr:
    out = r.reg("TENSOR_PHI result")
    n = r.count("TENSOR_PHI incoming values", 9)
    incoming = tuple((r.name("label"), r.reg("TENSOR_PHI operand")) for _ in range(n))
    return TensorPhi(out, incoming, r.opt_type("TENSOR_PHI type"))


_INSTR: dict[Opcode, InstrReader] = {
    Opcode.BIND_INPUTS: _bind,
    Opcode.SHAPE_PROPAGATE: lambda r: ShapePropagate(
        r.reg("result"), r.reg("operand"), r.i64("axis")
    ),
    Opcode.SHAPE_COMPUTE: lambda r: ShapeCompute(r.reg("result"), r.expr("SHAPE_COMPUTE")),
    Opcode.TENSOR_CREATE: _create,
    Opcode.TENSOR_ALLOC: lambda r: TensorAlloc(r.reg("TENSOR_ALLOC operand")),
    Opcode.TENSOR_FREE: lambda r: TensorFree(r.reg("TENSOR_FREE operand")),
    Opcode.LOAD_CONST: _load,
    Opcode.OP_CALL: _op_call,
    Opcode.TENSOR_RESIZE: _resize,
    Opcode.JUMP: lambda r: Jump(r.name("label")),
    Opcode.BRANCH_IF: _branch,
    Opcode.TENSOR_PHI: _phi,
    Opcode.RETURN: lambda r: Return(r.regs("RETURN values")),
}


def _instr(r: Input) -> Instr:
    at = r.pos
    code = r.u8("opcode")
    if code not in Opcode._value2member_map_:
        known = f"{min(Opcode).value} to {max(Opcode).value}"
        r.fail("unknown opcode", known, str(code), at)
    loc = r.string("source location", optional=True)
    instr = _INSTR[Opcode(code)](r)
    return instr if loc is None else _with_loc(instr, loc)


def _with_loc(instr: Instr, loc: str) -> Instr:
    return dataclasses.replace(instr, loc=loc)


def _function(r: Input, offsets: list[int]) -> Function:
    name = r.name("function name")
    n = r.count("constraints", 4)
    constraints = tuple(r.text("constraint", CONSTRAINT_TEXT) for _ in range(n))
    dim_args = tuple(r.name("dimension argument") for _ in range(r.count("dim_args", 4)))
    params = []
    for _ in range(r.count("parameters", 10)):
        reg = r.reg("parameter")
        params.append(Param(reg, r.type("parameter type")))
    results = tuple(r.type("result type") for _ in range(r.count("results", 5)))
    blocks = []
    for _ in range(r.count("blocks", 8)):
        label = r.name("label")
        instrs = []
        for _ in range(r.count("instructions", 5)):
            offsets.append(r.pos)
            instrs.append(_instr(r))
        blocks.append(Block(label, tuple(instrs)))
    return Function(name, tuple(params), results, tuple(blocks), constraints, dim_args)


# the file: header, sections, version dispatch ---------------------------------------------


def _header(buf: memoryview) -> tuple[int, int, int]:
    """Check magic, version and sizes; returns (major, minor, section count)."""
    if len(buf) < F.HEADER_SIZE:
        raise BytecodeFormatError(
            "file too short for the header",
            offset=len(buf),
            expected=f"at least {F.HEADER_SIZE} bytes",
            found=f"{len(buf)} bytes",
        )
    magic, major, minor, header_size, file_size, count, _crc = F.HEADER.unpack_from(buf, 0)
    if magic != F.MAGIC:
        raise BytecodeFormatError(
            "not a shapevm bytecode file",
            offset=0,
            expected=f"magic {F.MAGIC!r}",
            found=repr(bytes(magic)),
        )
    if major > F.MAJOR:
        raise BytecodeFormatError(
            f"file format version {major}.{minor} is newer than this shapevm reads "
            f"({F.MAJOR}.{F.MINOR})",
            offset=8,
            expected=f"major version {F.MAJOR} or older",
            found=f"{major}.{minor}",
            fix="upgrade shapevm to read this file",
        )
    if major not in _VERSIONS:
        raise BytecodeFormatError(
            f"unknown file format version {major}.{minor}",
            offset=8,
            expected="one of " + ", ".join(f"{v}.x" for v in _VERSIONS),
            found=f"{major}.{minor}",
        )
    if header_size != F.HEADER_SIZE or file_size != len(buf):
        raise BytecodeFormatError(
            "file size does not match the header (truncated or padded?)",
            offset=16,
            expected=f"header size {F.HEADER_SIZE} and a file of {file_size} bytes as recorded",
            found=f"header size {header_size} and a file of {len(buf)} bytes",
        )
    table_end = F.HEADER_SIZE + count * F.SECTION.size
    if count > 64 or table_end > len(buf):
        raise BytecodeFormatError(
            "section table does not fit the file",
            offset=24,
            expected="at most 64 sections inside the file",
            found=f"{count} sections",
        )
    return major, minor, count


def _sections(buf: memoryview, count: int, check_data: bool) -> dict[bytes, tuple[int, int]]:
    found: dict[bytes, tuple[int, int]] = {}
    for i in range(count):
        at = F.HEADER_SIZE + i * F.SECTION.size
        kind, _flags, start, length, crc = F.SECTION.unpack_from(buf, at)
        kind = bytes(kind)
        if start < F.HEADER_SIZE or start + length > len(buf):
            raise BytecodeFormatError(
                f"section {kind!r} lies outside the file",
                offset=at,
                expected=f"bytes within {F.HEADER_SIZE}..{len(buf)}",
                found=f"offset {start}, length {length}",
            )
        if kind in found:
            raise BytecodeFormatError(f"section {kind!r} appears twice", offset=at)
        if kind == F.DATA and start % F.ALIGN:
            raise BytecodeFormatError(
                "constant data is not aligned",
                offset=at,
                expected=f"offset divisible by {F.ALIGN}",
                found=str(start),
            )
        if kind != F.DATA or check_data:
            actual = zlib.crc32(buf[start : start + length])
            if actual != crc:
                raise BytecodeFormatError(
                    f"checksum mismatch in section {kind.decode('latin-1')} (the file is corrupt)",
                    offset=start,
                    expected=f"CRC-32 0x{crc:08x}",
                    found=f"0x{actual:08x}",
                )
        found[kind] = (start, length)
    _check_metadata(buf, found)
    for kind in F.REQUIRED_SECTIONS:
        if kind not in found:
            raise BytecodeFormatError(
                f"missing section {kind.decode()}",
                offset=F.HEADER_SIZE,
                expected="sections " + ", ".join(k.decode() for k in F.REQUIRED_SECTIONS),
                found=", ".join(k.decode("latin-1") for k in found) or "none",
            )
    return found


def _check_metadata(buf: memoryview, found: dict[bytes, tuple[int, int]]) -> None:
    """The header checksum covers every byte before the constant data (gaps included);
    the constant data, which must end the file, has its own."""
    data_start, data_len = found.get(F.DATA, (len(buf), 0))
    if data_start + data_len != len(buf):
        raise BytecodeFormatError(
            "constant data must end the file",
            offset=data_start,
            expected=f"DATA ending at byte {len(buf)}",
            found=f"DATA ending at byte {data_start + data_len}",
        )
    blank = bytearray(buf[: F.HEADER_SIZE])
    blank[28:32] = bytes(4)
    actual = zlib.crc32(buf[F.HEADER_SIZE : data_start], zlib.crc32(blank))
    (stored,) = struct.unpack_from("<I", buf, 28)
    if actual != stored:
        raise BytecodeFormatError(
            "header checksum mismatch (the file is corrupt)",
            offset=28,
            expected=f"CRC-32 0x{actual:08x} over bytes 0..{data_start}",
            found=f"0x{stored:08x}",
        )


def _strings(buf: memoryview, start: int, length: int) -> list[str]:
    r = Input(buf, start, start + length, [])
    out: list[str] = []
    for _ in range(r.count("strings", 4)):
        at = r.pos
        n = r.u32("string length")
        if n > min(F.MAX_STRING, r.end - r.pos):
            r.fail("string is too long", f"at most {min(F.MAX_STRING, r.end - r.pos)}", str(n), at)
        try:
            out.append(str(buf[r.pos : r.pos + n], "utf-8"))
        except UnicodeDecodeError as exc:
            r.fail(f"string is not UTF-8: {exc.reason}", at=r.pos + exc.start)
        r.pos += n
    return out


def _constants(
    buf: memoryview, where: tuple[int, int], data: tuple[int, int], strings: list[str]
) -> tuple[list[Constant], list[int]]:
    r = Input(buf, where[0], where[0] + where[1], strings)
    data_start, data_len = data
    out: list[Constant] = []
    offsets: list[int] = []
    for _ in range(r.count("constants", 25)):
        at = r.pos
        name = r.string("constant name")
        assert name is not None
        dtype = r.dtype("constant dtype")
        ndim = r.count("constant dimensions", 8, F.MAX_RANK)
        shape = tuple(r.u64("constant dimension") for _ in range(ndim))
        offset = r.u64("constant offset")
        nbytes = r.u64("constant size")
        size = dtype.itemsize
        for d in shape:
            size *= d
        if size != nbytes or offset % F.ALIGN or offset + nbytes > data_len:
            r.fail(
                f"constant {name!r} does not fit the data section",
                f"{size} bytes at a {F.ALIGN}-aligned offset within {data_len} bytes",
                f"{nbytes} bytes at offset {offset}",
                at,
            )
        count = nbytes // dtype.itemsize
        flat = np.frombuffer(buf, dtype=dtype.numpy, count=count, offset=data_start + offset)
        flat.flags.writeable = False  # a view of the caller's buffer or of the file
        out.append(Constant(name, flat.reshape(shape)))
        offsets.append(data_start + offset)
    return out, offsets


def _read_v1(buf: memoryview, count: int, check_data: bool) -> Decoded:
    sections = _sections(buf, count, check_data)
    strings = _strings(buf, *sections[F.STRS])
    constants, const_offsets = _constants(buf, sections[F.CNST], sections[F.DATA], strings)
    start, length = sections[F.FUNC]
    r = Input(buf, start, start + length, strings)
    functions = []
    offsets: list[tuple[int, ...]] = []
    for _ in range(r.count("functions", 30)):
        fn_offsets: list[int] = []
        functions.append(_function(r, fn_offsets))
        offsets.append(tuple(fn_offsets))
    if r.pos != r.end:
        r.fail("unexpected bytes after the last function", "end of section", f"{r.end - r.pos}")
    metadata: list[tuple[str, str]] = []
    if F.META in sections:
        m = Input(buf, sections[F.META][0], sum(sections[F.META]), strings)
        for _ in range(m.count("metadata entries", 8)):
            key = m.string("metadata key")
            value = m.string("metadata value")
            assert key is not None and value is not None
            metadata.append((key, value))
        if m.pos != m.end:
            m.fail("unexpected bytes after the metadata", "end of section", f"{m.end - m.pos}")
    program = Program(tuple(functions), tuple(constants), tuple(metadata))
    return Decoded(program, tuple(offsets), tuple(const_offsets), (1, 0), len(buf))


_VERSIONS: dict[int, Callable[[memoryview, int, bool], Decoded]] = {1: _read_v1}


def decode(
    data: bytes | bytearray | memoryview | mmap.mmap, *, check_data: bool = False
) -> Decoded:
    """Decode without verifying; constants are read-only views of ``data``."""
    buf = memoryview(data).cast("B") if not isinstance(data, memoryview) else data.cast("B")
    major, minor, count = _header(buf)
    decoded = _VERSIONS[major](buf, count, check_data)
    return dataclasses.replace(decoded, version=(major, minor))


def map_file(path: str | os.PathLike[str]) -> mmap.mmap | bytes:
    """The file's bytes, memory-mapped read-only (an empty file gives ``b""``)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
