"""Registers: two files, tensors (``t0, t1, ...``) and shapes (``s0, s1, ...``)."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

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
