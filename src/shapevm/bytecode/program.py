"""The program: plain immutable data, equal by value, printable and serializable.

A `Program` holds functions and a constant pool. A `Function` has a symbolic signature
(parameter and result types, the scope's constraints in the user's spelling, dimension
variables passed explicitly) and a body of labelled `Block` s. Each block is a tuple of
instructions, one small class per opcode, the last one a terminator (``JUMP``,
``BRANCH_IF``, ``RETURN``). Symbolic dimensions are stored as canonical text (``2*b + 1``)
and rebuilt as ``DimExpr`` under one ``SymbolicScope`` per function when needed, so programs
compare and hash by value and never share engine objects.

Instructions are numbered from 0 across the blocks of a function, in order; errors and the
disassembler use these numbers. Every instruction may carry ``loc``, the ``file:line`` of the
Python that was traced to produce it.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias

import numpy as np

from shapevm.bytecode.isa import Opcode, Reg
from shapevm.bytecode.shape_expr import ShapeCmp, ShapeExpr, shape_expr_regs
from shapevm.ops import AttrValue, DType, Dynamic, format_attr, format_float
from shapevm.shapes import SymbolicScope

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,199}")
"""Function names, labels, op and attribute names, dimension variables."""
DEVICE = re.compile(r"[a-z][a-z0-9_]{0,31}(:\d{1,4})?")
"""Device names the formats can hold: ``cpu``, ``cuda:0``."""
DEVICES: tuple[str, ...] = ("cpu",)
"""The devices this runtime runs on (the interpreter and the JIT run on the CPU); the
verifier refuses a ``TENSOR_CREATE`` on any other."""

Dim: TypeAlias = "int | str | Dynamic"
"""A dimension in a type: a constant, canonical symbolic text, or ``DYNAMIC``."""
SpecDim: TypeAlias = "int | Reg | Dynamic"
"""A dimension in a ``TENSOR_CREATE``/``TENSOR_RESIZE`` spec: constant, shape register, dynamic."""
Scalar: TypeAlias = "bool | int | float"
Operand: TypeAlias = "Reg | bool | int | float"
"""An ``OP_CALL`` input: a tensor register, or a weakly typed scalar literal."""


def format_dim(dim: Dim | SpecDim) -> str:
    return str(dim)


def format_scalar(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format_float(value)
    return str(value)


@dataclass(frozen=True, slots=True)
class TensorType:
    """``f32[b, 64]``: a dtype and a symbolic shape."""

    dtype: DType
    shape: tuple[Dim, ...]

    def __post_init__(self) -> None:
        shape = tuple(self.shape)
        for d in shape:
            if isinstance(d, bool) or (isinstance(d, int) and d < 0):
                raise ValueError(f"bad dimension {d!r} in a tensor type")
            if not isinstance(d, (int, str, Dynamic)):
                shape = tuple(d if isinstance(d, (int, Dynamic)) else str(d) for d in shape)
                break  # a DimExpr: keep its canonical text, not the engine object
        object.__setattr__(self, "shape", shape)

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(format_dim(d) for d in self.shape)}]"


@dataclass(frozen=True, slots=True)
class Instr:
    """Base of all instructions. Subclasses say their `Opcode` and registers."""

    OPCODE: ClassVar[Opcode]
    loc: str | None = field(default=None, kw_only=True)

    @property
    def opcode(self) -> Opcode:
        return self.OPCODE

    def defs(self) -> tuple[Reg, ...]:
        """Registers this instruction defines."""
        return ()

    def uses(self) -> tuple[Reg, ...]:
        """Registers this instruction reads."""
        return ()

    def targets(self) -> tuple[str, ...]:
        """Labels control may go to next (terminators only)."""
        return ()

    def declared_types(self) -> tuple[TensorType | None, ...]:
        """The result types written in the program, one per defined tensor (or ``None``)."""
        return ()


@dataclass(frozen=True, slots=True)
class BindInputs(Instr):
    OPCODE = Opcode.BIND_INPUTS
    outs: tuple[Reg, ...]
    names: tuple[str, ...]

    def defs(self) -> tuple[Reg, ...]:
        return self.outs


@dataclass(frozen=True, slots=True)
class ShapePropagate(Instr):
    OPCODE = Opcode.SHAPE_PROPAGATE
    out: Reg
    src: Reg
    axis: int

    def defs(self) -> tuple[Reg, ...]:
        return (self.out,)

    def uses(self) -> tuple[Reg, ...]:
        return (self.src,)


@dataclass(frozen=True, slots=True)
class ShapeCompute(Instr):
    OPCODE = Opcode.SHAPE_COMPUTE
    out: Reg
    expr: ShapeExpr

    def defs(self) -> tuple[Reg, ...]:
        return (self.out,)

    def uses(self) -> tuple[Reg, ...]:
        return tuple(shape_expr_regs(self.expr))


def _spec_regs(spec: tuple[SpecDim, ...]) -> tuple[Reg, ...]:
    return tuple(d for d in spec if isinstance(d, Reg))


@dataclass(frozen=True, slots=True)
class TensorCreate(Instr):
    OPCODE = Opcode.TENSOR_CREATE
    out: Reg
    spec: tuple[SpecDim, ...]
    dtype: DType
    device: str = "cpu"

    def defs(self) -> tuple[Reg, ...]:
        return (self.out,)

    def uses(self) -> tuple[Reg, ...]:
        return _spec_regs(self.spec)


@dataclass(frozen=True, slots=True)
class TensorAlloc(Instr):
    OPCODE = Opcode.TENSOR_ALLOC
    reg: Reg

    def uses(self) -> tuple[Reg, ...]:
        return (self.reg,)


@dataclass(frozen=True, slots=True)
class TensorFree(Instr):
    OPCODE = Opcode.TENSOR_FREE
    reg: Reg

    def uses(self) -> tuple[Reg, ...]:
        return (self.reg,)


@dataclass(frozen=True, slots=True)
class LoadConst(Instr):
    OPCODE = Opcode.LOAD_CONST
    out: Reg
    const: int
    type: TensorType | None = None

    def defs(self) -> tuple[Reg, ...]:
        return (self.out,)

    def declared_types(self) -> tuple[TensorType | None, ...]:
        return (self.type,)


def _literal_key(value: Any) -> Any:
    """Equality for literals by type and bits: ``nan == nan``, ``True != 1``, ``-0.0 != 0.0``.

    NaNs are all one literal (the text form has no spelling for payloads).
    """
    if isinstance(value, float):
        return ("f", "nan" if math.isnan(value) else struct.pack("<d", value))
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, tuple):
        return ("l", tuple(_literal_key(v) for v in value))
    return (type(value).__name__, value)


@dataclass(frozen=True, slots=True, eq=False)
class OpCall(Instr):
    """``outs = OP_CALL op(ins, attrs)``; attributes are kept sorted by name.

    Literals compare by type and bits, so a program holding ``nan`` equals its round trip.
    """

    OPCODE = Opcode.OP_CALL
    outs: tuple[Reg, ...]
    op: str
    ins: tuple[Operand, ...]
    attrs: tuple[tuple[str, AttrValue], ...] = ()
    types: tuple[TensorType | None, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "attrs", tuple(sorted(self.attrs, key=lambda kv: kv[0])))
        if not self.types:
            object.__setattr__(self, "types", (None,) * len(self.outs))
        if len(self.types) != len(self.outs):
            raise ValueError(f"{len(self.outs)} outputs but {len(self.types)} types")

    def _key(self) -> tuple[Any, ...]:
        ins = tuple(x if isinstance(x, Reg) else _literal_key(x) for x in self.ins)
        attrs = tuple((k, _literal_key(v)) for k, v in self.attrs)
        return (self.outs, self.op, ins, attrs, self.types, self.loc)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OpCall):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def defs(self) -> tuple[Reg, ...]:
        return self.outs

    def uses(self) -> tuple[Reg, ...]:
        return tuple(x for x in self.ins if isinstance(x, Reg))

    def declared_types(self) -> tuple[TensorType | None, ...]:
        return self.types

    def attr_dict(self) -> dict[str, AttrValue]:
        return dict(self.attrs)

    def call_text(self) -> str:
        """``matmul(t0, t1)`` or ``sum(t0, axis=[1], keepdims=true)``."""
        args = [str(x) if isinstance(x, Reg) else format_scalar(x) for x in self.ins]
        args += [f"{k}={format_attr(v)}" for k, v in self.attrs]
        return f"{self.op}({', '.join(args)})"


@dataclass(frozen=True, slots=True)
class TensorResize(Instr):
    OPCODE = Opcode.TENSOR_RESIZE
    out: Reg
    src: Reg
    spec: tuple[SpecDim, ...]
    type: TensorType | None = None

    def defs(self) -> tuple[Reg, ...]:
        return (self.out,)

    def uses(self) -> tuple[Reg, ...]:
        return (self.src, *_spec_regs(self.spec))

    def declared_types(self) -> tuple[TensorType | None, ...]:
        return (self.type,)


@dataclass(frozen=True, slots=True)
class Jump(Instr):
    OPCODE = Opcode.JUMP
    target: str

    def targets(self) -> tuple[str, ...]:
        return (self.target,)


@dataclass(frozen=True, slots=True)
class BranchIf(Instr):
    """Branch on a shape predicate (`ShapeCmp`) or a scalar bool tensor register."""

    OPCODE = Opcode.BRANCH_IF
    cond: Reg | ShapeCmp
    if_true: str
    if_false: str

    def uses(self) -> tuple[Reg, ...]:
        if isinstance(self.cond, Reg):
            return (self.cond,)
        return tuple(shape_expr_regs(self.cond))

    def targets(self) -> tuple[str, ...]:
        return (self.if_true, self.if_false)


@dataclass(frozen=True, slots=True)
class TensorPhi(Instr):
    OPCODE = Opcode.TENSOR_PHI
    out: Reg
    incoming: tuple[tuple[str, Reg], ...]
    type: TensorType | None = None

    def defs(self) -> tuple[Reg, ...]:
        return (self.out,)

    def uses(self) -> tuple[Reg, ...]:
        return tuple(reg for _, reg in self.incoming)

    def declared_types(self) -> tuple[TensorType | None, ...]:
        return (self.type,)


@dataclass(frozen=True, slots=True)
class Return(Instr):
    OPCODE = Opcode.RETURN
    values: tuple[Reg, ...]

    def uses(self) -> tuple[Reg, ...]:
        return self.values


INSTRUCTION_CLASSES: dict[Opcode, type[Instr]] = {
    cls.OPCODE: cls
    for cls in (
        BindInputs,
        ShapePropagate,
        ShapeCompute,
        TensorCreate,
        TensorAlloc,
        TensorFree,
        LoadConst,
        OpCall,
        TensorResize,
        Jump,
        BranchIf,
        TensorPhi,
        Return,
    )
}


@dataclass(frozen=True, slots=True)
class Param:
    reg: Reg
    type: TensorType


@dataclass(frozen=True, slots=True)
class Block:
    label: str
    instrs: tuple[Instr, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "instrs", tuple(self.instrs))


@dataclass(frozen=True, slots=True)
class Function:
    """One function: signature, constraints, explicit dimension arguments, blocks."""

    name: str
    params: tuple[Param, ...]
    results: tuple[TensorType, ...]
    blocks: tuple[Block, ...]
    constraints: tuple[str, ...] = ()
    dim_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("params", "results", "blocks", "constraints", "dim_args"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    def instructions(self) -> Iterator[tuple[int, Block, Instr]]:
        """``(index, block, instruction)`` for every instruction, in order."""
        index = 0
        for block in self.blocks:
            for instr in block.instrs:
                yield index, block, instr
                index += 1

    @property
    def num_instructions(self) -> int:
        return sum(len(b.instrs) for b in self.blocks)

    def block(self, label: str) -> Block | None:
        for block in self.blocks:
            if block.label == label:
                return block
        return None

    def make_scope(self) -> SymbolicScope:
        """A fresh scope with this function's constraints."""
        return SymbolicScope(self.constraints)


@dataclass(frozen=True, slots=True, eq=False)
class Constant:
    """A named constant; ``array`` may be a read-only view into a loaded file."""

    name: str
    array: np.ndarray[Any, Any]

    def __post_init__(self) -> None:
        DType.from_numpy(self.array.dtype)  # raises for dtypes the format cannot store

    @property
    def dtype(self) -> DType:
        return DType.from_numpy(self.array.dtype)

    @property
    def type(self) -> TensorType:
        return TensorType(self.dtype, tuple(int(d) for d in self.array.shape))

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Constant):
            return NotImplemented
        return (
            self.name == other.name
            and self.type == other.type
            and _le_bytes(self.array) == _le_bytes(other.array)
        )

    def __hash__(self) -> int:
        return hash((self.name, self.type))

    def __repr__(self) -> str:
        return f"Constant({self.name!r}, {self.type})"


def _le_bytes(array: np.ndarray[Any, Any]) -> bytes:
    le = array.astype(array.dtype.newbyteorder("<"), copy=False)
    return np.ascontiguousarray(le).tobytes()


@dataclass(frozen=True, slots=True)
class Program:
    """Functions, the constant pool and string metadata (key, value) pairs, e.g. the
    argument trees of an exported function; look functions up by name with `function`."""

    functions: tuple[Function, ...]
    constants: tuple[Constant, ...] = ()
    metadata: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "functions", tuple(self.functions))
        object.__setattr__(self, "constants", tuple(self.constants))
        object.__setattr__(self, "metadata", tuple((str(k), str(v)) for k, v in self.metadata))

    def meta(self, key: str) -> str | None:
        """The metadata value of ``key``, if present."""
        for k, v in self.metadata:
            if k == key:
                return v
        return None

    def function(self, name: str) -> Function:
        """The function called ``name`` (without ``@``)."""
        for fn in self.functions:
            if fn.name == name:
                return fn
        import difflib  # only to explain a missing name

        close = difflib.get_close_matches(name, [f.name for f in self.functions], 1)
        hint = f"; did you mean @{close[0]}?" if close else ""
        raise KeyError(f"no function @{name} in the program{hint}")

    def constant_index(self, name: str) -> int:
        """The ``k`` number of the constant called ``name``."""
        for i, const in enumerate(self.constants):
            if const.name == name:
                return i
        raise KeyError(f"no constant named {name!r} in the program")
