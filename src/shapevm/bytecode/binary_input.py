"""Bounds-checked little-endian reads for the binary reader.

Every read checks the bytes left in the current section; every count is checked against
those bytes before anything is allocated for it; every failure raises `BytecodeFormatError`
with the byte offset and what was expected there.
"""

from __future__ import annotations

import re
import struct
from typing import Any

from shapevm.bytecode import binary_format as F
from shapevm.bytecode.errors import BytecodeFormatError
from shapevm.bytecode.isa import MAX_REGISTER, Reg, RegKind
from shapevm.bytecode.program import NAME, Dim, SpecDim, TensorType
from shapevm.bytecode.shape_expr import MAX_DEPTH, ShapeBin, ShapeExpr
from shapevm.ops import DYNAMIC, DType

# symbolic dimension text: what the engine prints, nothing else (checked before parsing)
DIM_TEXT = re.compile(r"[A-Za-z0-9_ +\-*/%^(),.]+")
CONSTRAINT_TEXT = re.compile(r"[A-Za-z0-9_ +\-*/%^(),.<>=]+")


class Input:
    """Bounds-checked little-endian reads from a buffer, starting at ``pos``."""

    def __init__(self, buf: memoryview, start: int, end: int, strings: list[str]) -> None:
        self.buf = buf
        self.pos = start
        self.end = end
        self.strings = strings
        self.checked: set[tuple[str, str, int]] = set()  # strings known to match a pattern

    def fail(self, what: str, expected: str = "", found: str = "", at: int | None = None) -> Any:
        raise BytecodeFormatError(
            what, offset=self.pos if at is None else at, expected=expected, found=found
        )

    def take(self, fmt: struct.Struct, what: str) -> tuple[Any, ...]:
        if self.pos + fmt.size > self.end:
            self.fail(
                f"truncated {what}",
                f"{fmt.size} bytes",
                f"{max(self.end - self.pos, 0)} bytes left in the section",
            )
        values = fmt.unpack_from(self.buf, self.pos)
        self.pos += fmt.size
        return values

    # the scalar reads below inline the bounds check: they run ~100 times per instruction

    def u8(self, what: str) -> int:
        pos = self.pos
        if pos >= self.end:
            self.take(_U8, what)  # raises with the message
        self.pos = pos + 1
        value: int = self.buf[pos]
        return value

    def _scalar(self, fmt: struct.Struct, what: str) -> Any:
        pos = self.pos
        if pos + fmt.size > self.end:
            self.take(fmt, what)  # raises with the message
        self.pos = pos + fmt.size
        return fmt.unpack_from(self.buf, pos)[0]

    def u32(self, what: str) -> int:
        value: int = self._scalar(_U32, what)
        return value

    def u64(self, what: str) -> int:
        value: int = self._scalar(_U64, what)
        return value

    def i64(self, what: str) -> int:
        value: int = self._scalar(_I64, what)
        return value

    def f64(self, what: str) -> float:
        value: float = self._scalar(_F64, what)
        return value

    def count(self, what: str, min_size: int, limit: int | None = None) -> int:
        """A count of items of at least ``min_size`` bytes each: it must fit what is left."""
        at = self.pos
        n = self.u32(f"count of {what}")
        room = (self.end - self.pos) // max(min_size, 1)
        if n > room or (limit is not None and n > limit):
            most = min(room, limit) if limit is not None else room
            self.fail(f"count of {what} is too large", f"at most {most}", str(n), at)
        return n

    def string(self, what: str, optional: bool = False) -> str | None:
        at = self.pos
        index = self.u32(what)
        if optional and index == F.NO_STRING:
            return None
        if index >= len(self.strings):
            self.fail(
                f"{what}: no such string",
                f"a string index below {len(self.strings)}",
                str(index),
                at,
            )
        return self.strings[index]

    def text(self, what: str, pattern: re.Pattern[str], limit: int = F.MAX_DIM_TEXT) -> str:
        at = self.pos
        value = self.string(what)
        assert value is not None
        key = (value, pattern.pattern, limit)
        if key not in self.checked:
            if len(value) > limit or not pattern.fullmatch(value):
                self.fail(f"bad {what}", f"text matching {pattern.pattern}", repr(value[:80]), at)
            self.checked.add(key)
        return value

    def name(self, what: str) -> str:
        return self.text(what, NAME, 200)

    def dtype(self, what: str) -> DType:
        at = self.pos
        code = self.u8(what)
        dtype = DType.from_code(code)
        if dtype is None:
            known = ", ".join(f"{d.code} ({d})" for d in DType)
            self.fail(f"unknown dtype code in {what}", f"one of {known}", str(code), at)
        assert dtype is not None
        return dtype

    def reg(self, what: str) -> Reg:
        at = self.pos
        kind, index = self.take(_REG, what)
        if kind not in (F.REG_TENSOR, F.REG_SHAPE) or index > MAX_REGISTER:
            self.fail(f"bad register in {what}", "kind 0 or 1, index < 2**31", f"{kind}", at)
        return Reg(RegKind.TENSOR if kind == F.REG_TENSOR else RegKind.SHAPE, index)

    def regs(self, what: str) -> tuple[Reg, ...]:
        return tuple(self.reg(what) for _ in range(self.count(what, 5)))

    def dim(self, what: str, allow: tuple[int, ...], signed: bool = False) -> Dim | SpecDim:
        """A dimension with one of the tags ``allow``; ``signed`` lets an int be negative."""
        at = self.pos
        tag = self.u8(what)
        if tag not in allow:
            self.fail(f"bad dimension tag in {what}", f"one of {list(allow)}", str(tag), at)
        if tag == F.DIM_INT:
            value = self.i64(what)
            if value < 0 and not signed:
                self.fail(f"negative dimension in {what}", "a size >= 0", str(value), at)
            return value
        if tag == F.DIM_SYM:
            return self.text(f"symbolic dimension in {what}", DIM_TEXT)
        if tag == F.DIM_REG:
            return self.reg(what)
        return DYNAMIC

    def type(self, what: str) -> TensorType:
        dtype = self.dtype(what)
        n = self.count(f"dimensions of {what}", 1, F.MAX_RANK)
        dims = tuple(self.dim(what, (F.DIM_INT, F.DIM_SYM, F.DIM_DYNAMIC)) for _ in range(n))
        return TensorType(dtype, dims)  # type: ignore[arg-type]  # tags exclude registers

    def opt_type(self, what: str) -> TensorType | None:
        at = self.pos
        flag = self.u8(what)
        if flag not in (0, 1):
            self.fail(f"bad type flag in {what}", "0 or 1", str(flag), at)
        return self.type(what) if flag else None

    def spec(self, what: str) -> tuple[SpecDim, ...]:
        n = self.count(f"dimensions of {what}", 1, F.MAX_RANK)
        allow = (F.DIM_INT, F.DIM_DYNAMIC, F.DIM_REG)
        return tuple(self.dim(what, allow) for _ in range(n))  # type: ignore[misc]

    def expr(self, what: str, depth: int = 0) -> ShapeExpr:
        at = self.pos
        if depth > MAX_DEPTH:
            self.fail(f"{what} is nested too deeply", f"depth <= {MAX_DEPTH}", str(depth), at)
        tag = self.u8(what)
        if tag == F.EXPR_INT:
            return self.i64(what)
        if tag == F.EXPR_REG:
            return self.reg(what)
        if tag != F.EXPR_BIN:
            self.fail(f"bad expression tag in {what}", "0, 1 or 2", str(tag), at)
        op = self.u8(what)
        if op >= len(F.BIN_OPS):
            self.fail(f"bad operator in {what}", f"0 to {len(F.BIN_OPS) - 1}", str(op), at + 1)
        return ShapeBin(F.BIN_OPS[op], self.expr(what, depth + 1), self.expr(what, depth + 1))


_U8, _U32, _U64 = struct.Struct("<B"), struct.Struct("<I"), struct.Struct("<Q")
_I64, _F64 = struct.Struct("<q"), struct.Struct("<d")
_REG = struct.Struct("<BI")
