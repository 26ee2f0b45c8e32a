"""The compile-time view of one region: its values, its ops, and which values leave it.

Each definition inside the region is a `Value` (registers written into a ``TENSOR_CREATE``'d
tensor get one value per write), so lifetimes are per value even where a register is
reused. Values read before the region are ``input`` values, ``LOAD_CONST`` results are
``const`` values; neither is ever given planned storage. A value is *live-out* when its
register is read after the region (later instructions, other blocks, ``RETURN``); those
escape to the caller and are never placed in the per-thread arena.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shapevm.bytecode.infer import VType
from shapevm.bytecode.isa import Reg
from shapevm.bytecode.program import (
    BindInputs,
    Function,
    Instr,
    LoadConst,
    OpCall,
    ShapeCompute,
    ShapePropagate,
    TensorAlloc,
    TensorCreate,
    TensorFree,
    TensorResize,
)
from shapevm.jit.regions import Region
from shapevm.ops import AttrKind, DType, OpFlag, OpInfo, get_op
from shapevm.runtime.binding import sym_dim
from shapevm.shapes import DimExpr, SymbolicScope

SymShape = tuple["int | DimExpr", ...]


@dataclass(slots=True)
class Value:
    """One tensor value of a region."""

    id: int
    reg: Reg
    slot: int  # index in the interpreter's register list
    dtype: np.dtype[Any]
    shape: SymShape
    kind: str  # "input" | "const" | "temp"
    producer: int = -1  # position of the op that defines it

    def nbytes(self, env: Mapping[str, int]) -> int:
        """Bytes at ``env`` (0 where a reference value outside the constraints makes a
        dimension negative)."""
        n = self.dtype.itemsize
        for d in self.shape:
            n *= max(0, d if isinstance(d, int) else d.evaluate(env))
        return n

    def concrete_shape(self, env: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(d if isinstance(d, int) else d.evaluate(env) for d in self.shape)


@dataclass(slots=True)
class Op:
    """One instruction of a region. ``ins``/``outs`` are value ids of tensors only."""

    pos: int
    pc: int
    instr: Instr
    kind: str  # "call" | "const" | "alloc" | "free" | "resize" | "shape"
    ins: tuple[int, ...] = ()
    outs: tuple[int, ...] = ()
    info: OpInfo | None = None
    attrs: dict[str, Any] = field(default_factory=dict)  # DIMS attributes stay symbolic
    dims_attrs: tuple[str, ...] = ()  # names of attributes to evaluate per call

    @property
    def fusible(self) -> bool:
        """An op call of one result that the op table marks elementwise and fusible: what
        a chain, a written-out row op or an activation may be made of."""
        return self.kind == "call" and fusible_op(self.info) and len(self.outs) == 1


def fusible_op(info: OpInfo | None) -> bool:
    """An op the op table marks elementwise and fusible."""
    return info is not None and OpFlag.ELEMENTWISE in info.flags and OpFlag.FUSIBLE in info.flags


@dataclass
class RegionGraph:
    function: Function
    region: Region
    values: list[Value]
    ops: list[Op]
    live_out: set[int]
    users: dict[int, list[int]]  # value id -> positions of the ops reading it
    constants: list[np.ndarray[Any, Any]]

    def value(self, vid: int) -> Value:
        return self.values[vid]

    def call(self, pos: int) -> OpCall | None:
        instr = self.ops[pos].instr
        return instr if isinstance(instr, OpCall) else None


def build_graph(
    fn: Function,
    region: Region,
    types: Mapping[Reg, VType],
    slot_of: Any,
    scope: SymbolicScope,
    constants: list[np.ndarray[Any, Any]],
) -> RegionGraph:
    """The values and ops of ``region``; ``slot_of(reg)`` gives a register's list index."""
    instrs = [(pc, i) for pc, _, i in fn.instructions() if region.start <= pc < region.stop]
    values: list[Value] = []
    current: dict[Reg, int] = {}
    ops: list[Op] = []
    users: dict[int, list[int]] = {}

    def new_value(reg: Reg, kind: str, producer: int) -> int:
        vt = types[reg]
        dims = tuple(_static(d, scope) for d in vt.shape)
        v = Value(len(values), reg, slot_of(reg), _np(vt.dtype), dims, kind, producer)
        values.append(v)
        current[reg] = v.id
        return v.id

    def read(reg: Reg, pos: int) -> int:
        vid = current.get(reg)
        if vid is None:
            vid = new_value(reg, "input", -1)
        users.setdefault(vid, []).append(pos)
        return vid

    freed: set[Reg] = set()
    for pc, instr in instrs:
        pos = len(ops)
        if isinstance(instr, TensorCreate):
            continue
        if isinstance(instr, OpCall):
            info = get_op(instr.op)
            assert info is not None
            ins = tuple(read(x, pos) for x in instr.ins if isinstance(x, Reg))
            outs = tuple(new_value(r, "temp", pos) for r in instr.outs)
            attrs, dims = _attrs(info, instr, scope)
            ops.append(Op(pos, pc, instr, "call", ins, outs, info, attrs, dims))
            freed.difference_update(instr.outs)
        elif isinstance(instr, LoadConst):
            ops.append(Op(pos, pc, instr, "const", (), (new_value(instr.out, "const", pos),)))
        elif isinstance(instr, TensorAlloc):
            ops.append(Op(pos, pc, instr, "alloc", (), (new_value(instr.reg, "temp", pos),)))
            freed.discard(instr.reg)
        elif isinstance(instr, TensorFree):
            ops.append(Op(pos, pc, instr, "free"))
            freed.add(instr.reg)
        elif isinstance(instr, TensorResize):
            src = read(instr.src, pos)
            ops.append(Op(pos, pc, instr, "resize", (src,), (new_value(instr.out, "temp", pos),)))
        elif isinstance(instr, ShapePropagate):
            ops.append(Op(pos, pc, instr, "shape", (read(instr.src, pos),)))
        elif isinstance(instr, (BindInputs, ShapeCompute)):
            ops.append(Op(pos, pc, instr, "shape"))
        else:
            raise AssertionError(f"{instr.opcode.name} cannot be part of a region")
    outside = {
        reg
        for pc, _, instr in fn.instructions()
        if not region.start <= pc < region.stop and not isinstance(instr, (TensorAlloc, TensorFree))
        for reg in instr.uses()
    }
    live_out = {
        vid
        for reg, vid in current.items()
        if values[vid].kind != "input" and reg not in freed and reg in outside
    }
    return RegionGraph(fn, region, values, ops, live_out, users, constants)


def _attrs(
    info: OpInfo, instr: OpCall, scope: SymbolicScope
) -> tuple[dict[str, Any], tuple[str, ...]]:
    attrs: dict[str, Any] = {}
    dims: list[str] = []
    for key, value in info.filled_attrs(instr.attr_dict()).items():
        spec = info.attr_spec(key)
        if spec is not None and spec.kind is AttrKind.DIMS and isinstance(value, tuple):
            parsed = tuple(_static(d, scope) for d in value)
            attrs[key] = parsed
            if any(not isinstance(d, int) for d in parsed):
                dims.append(key)
        else:
            attrs[key] = value
    return attrs, tuple(dims)


def _static(d: Any, scope: SymbolicScope) -> int | DimExpr:
    if isinstance(d, DimExpr) and d.scope is not scope:
        # an attribute kept from the trace, in the tracing scope: a dimension of another
        # scope is never provably equal to the region's own (`b` against `b`)
        d = str(d)
    out = sym_dim(d, scope) if isinstance(d, str) else d
    assert isinstance(out, (int, DimExpr)), f"dynamic dimension {d!r} inside a region"
    return out


def _np(dtype: DType) -> np.dtype[Any]:
    out: np.dtype[Any] = dtype.numpy.newbyteorder("=")
    return out
