"""The instruction set: the `Opcode` enum with one table documenting every opcode, and the
two register files (tensors ``t0, t1, ...`` and shapes ``s0, s1, ...``).

The disassembler reuses the doc lines. The numeric value of an opcode is part of the binary
format: never renumber, only append.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class Opcode(enum.IntEnum):
    BIND_INPUTS = 1
    SHAPE_PROPAGATE = 2
    SHAPE_COMPUTE = 3
    TENSOR_CREATE = 4
    TENSOR_ALLOC = 5
    TENSOR_FREE = 6
    LOAD_CONST = 7
    OP_CALL = 8
    TENSOR_RESIZE = 9
    JUMP = 10
    BRANCH_IF = 11
    TENSOR_PHI = 12
    RETURN = 13

    @property
    def info(self) -> OpcodeInfo:
        return OPCODES[self]

    @property
    def is_terminator(self) -> bool:
        return self in (Opcode.JUMP, Opcode.BRANCH_IF, Opcode.RETURN)


@dataclass(frozen=True, slots=True)
class OpcodeInfo:
    """How an opcode is written and what it does, in one line each."""

    syntax: str
    doc: str


OPCODES: dict[Opcode, OpcodeInfo] = {
    Opcode.BIND_INPUTS: OpcodeInfo(
        "s0, s1 = BIND_INPUTS b, h",
        "solve dimension variables from the argument shapes into shape registers; check "
        "the constraints",
    ),
    Opcode.SHAPE_PROPAGATE: OpcodeInfo(
        "s0 = SHAPE_PROPAGATE t0, 1", "read one dimension of a tensor into a shape register"
    ),
    Opcode.SHAPE_COMPUTE: OpcodeInfo(
        "s1 = SHAPE_COMPUTE 2*s0 + 1",
        "compute a derived dimension from shape registers (+ - * // %)",
    ),
    Opcode.TENSOR_CREATE: OpcodeInfo(
        "t2 = TENSOR_CREATE [s0, 64, dynamic], f32, cpu",
        "declare a tensor: dims are constants, shape registers or dynamic; no storage yet",
    ),
    Opcode.TENSOR_ALLOC: OpcodeInfo(
        "TENSOR_ALLOC t2", "give storage to a tensor declared by TENSOR_CREATE"
    ),
    Opcode.TENSOR_FREE: OpcodeInfo("TENSOR_FREE t2", "take back the storage of a tensor"),
    Opcode.LOAD_CONST: OpcodeInfo(
        "t3: f32[256, 64] = LOAD_CONST k0", "a constant (weights) from the constant pool"
    ),
    Opcode.OP_CALL: OpcodeInfo(
        "t4: f32[b, 64] = OP_CALL matmul(t0, t3)",
        "run one op of the op table; outputs are new tensors or TENSOR_CREATE'd ones",
    ),
    Opcode.TENSOR_RESIZE: OpcodeInfo(
        "t5 = TENSOR_RESIZE t4, [s0, 2, 32]",
        "view a tensor with new dimensions (constants or shape registers), same elements",
    ),
    Opcode.JUMP: OpcodeInfo("JUMP L2", "continue at a label"),
    Opcode.BRANCH_IF: OpcodeInfo(
        "BRANCH_IF s0 > 16, L1, L2",
        "go to the first label if the shape predicate or scalar bool tensor is true, else to "
        "the second",
    ),
    Opcode.TENSOR_PHI: OpcodeInfo(
        "t6: f32[b, dynamic] = TENSOR_PHI (L1, t4), (L2, t5)",
        "the value of the tensor from whichever predecessor block ran",
    ),
    Opcode.RETURN: OpcodeInfo("RETURN t6", "return the results of the function"),
}

MAX_REGISTER = 2**31 - 1
_REG = re.compile(r"([ts])(0|[1-9]\d{0,9})")


class RegKind(enum.Enum):
    TENSOR = "t"
    SHAPE = "s"

    @property
    def noun(self) -> str:
        return "tensor register" if self is RegKind.TENSOR else "shape register"


@dataclass(frozen=True, slots=True, eq=False)
class Reg:
    """A register: its file (kind) and number. Printed ``t3`` or ``s0``.

    >>> Reg.parse("t3"), str(Reg.shape(0))
    (Reg(kind=<RegKind.TENSOR: 't'>, index=3), 's0')
    """

    kind: RegKind
    index: int

    def __post_init__(self) -> None:
        if not 0 <= self.index <= MAX_REGISTER:
            raise ValueError(f"register number {self.index} is out of range")

    @classmethod
    def tensor(cls, index: int) -> Reg:
        return cls(RegKind.TENSOR, index)

    @classmethod
    def shape(cls, index: int) -> Reg:
        return cls(RegKind.SHAPE, index)

    @classmethod
    def parse(cls, text: str) -> Reg:
        m = _REG.fullmatch(text.strip())
        if m is None or int(m.group(2)) > MAX_REGISTER:
            raise ValueError(f"expected a register like t0 or s0, found {text.strip()!r}")
        return cls(RegKind(m.group(1)), int(m.group(2)))

    # hand-written: registers are hashed in every verifier pass, and the generated
    # versions (a tuple holding an Enum) cost several times more
    def __eq__(self, other: object) -> bool:
        if type(other) is not Reg:
            return NotImplemented
        return self.index == other.index and self.kind is other.kind

    def __hash__(self) -> int:
        return self.index * 2 + (self.kind is RegKind.SHAPE)

    def __lt__(self, other: Reg) -> bool:
        return (self.kind.value, self.index) < (other.kind.value, other.index)

    @property
    def is_tensor(self) -> bool:
        return self.kind is RegKind.TENSOR

    def __str__(self) -> str:
        return f"{self.kind.value}{self.index}"
