"""Shape Convergence Degree (SCD): how much of each tensor's shape is known at entry.

A dimension is *known* when it is a constant or an expression of the entry dimension
variables (so binding the arguments fixes it), and *unknown* when it is data-dependent
(``dynamic``). The SCD of a tensor is known dims / all dims (1.0 for scalars); the SCD of a
function counts the dims of all its tensors. For each unknown dimension the analysis names
where it comes from: the data-dependent op that made it, or the merge of branches whose
shapes differ.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TextIO

from shapevm.bytecode.isa import Reg
from shapevm.bytecode.printer import format_instr
from shapevm.bytecode.program import Function, LoadConst, OpCall, TensorPhi, TensorType
from shapevm.ops import Dynamic, OpFlag, get_op


@dataclass(frozen=True)
class TensorSCD:
    reg: str
    type: str
    known: int
    total: int
    sources: tuple[str, ...] = ()
    instr: int | None = None

    @property
    def scd(self) -> float:
        return 1.0 if self.total == 0 else self.known / self.total


@dataclass
class SCDReport:
    function: str
    variables: tuple[str, ...]
    tensors: list[TensorSCD] = field(default_factory=list)

    @property
    def known(self) -> int:
        return sum(t.known for t in self.tensors)

    @property
    def total(self) -> int:
        return sum(t.total for t in self.tensors)

    @property
    def scd(self) -> float:
        return 1.0 if self.total == 0 else self.known / self.total

    def format(self) -> str:
        lines = [
            f"SCD analysis of @{self.function} (entry dimension variables: "
            f"{', '.join(self.variables) or 'none'})",
            f"  {'reg':<6}{'type':<28}{'SCD':>6}  unknown dimensions come from",
        ]
        for t in self.tensors:
            src = "; ".join(t.sources)
            lines.append(f"  {t.reg:<6}{t.type:<28}{t.scd:>6.2f}  {src}".rstrip())
        lines.append(
            f"function SCD: {self.scd:.2f} ({self.known} of {self.total} dimensions known at entry)"
        )
        return "\n".join(lines)


def _dims(t: TensorType) -> tuple[int, int]:
    total = len(t.shape)
    known = sum(1 for d in t.shape if not isinstance(d, Dynamic) and d != "dynamic")
    return known, total


def analyze(fn: Function) -> SCDReport:
    """The SCD of every tensor defined in ``fn``."""
    variables = sorted(
        {name for p in fn.params for d in p.type.shape if isinstance(d, str) for name in _names(d)}
        | set(fn.dim_args)
    )
    report = SCDReport(fn.name, tuple(variables))
    origin: dict[Reg, tuple[str, ...]] = {}
    for p in fn.params:
        known, total = _dims(p.type)
        report.tensors.append(TensorSCD(str(p.reg), str(p.type), known, total))
    for index, _, instr in fn.instructions():
        types: tuple[TensorType | None, ...] = instr.declared_types()
        for reg, t in zip(instr.defs(), types, strict=False):
            if t is None or not reg.is_tensor:
                continue
            known, total = _dims(t)
            sources: tuple[str, ...] = ()
            if known < total:
                sources = _source(index, instr, origin)
                origin[reg] = sources
            report.tensors.append(TensorSCD(str(reg), str(t), known, total, sources, index))
    return report


def _source(index: int, instr: object, origin: dict[Reg, tuple[str, ...]]) -> tuple[str, ...]:
    where = f" at {instr.loc}" if getattr(instr, "loc", None) else ""  # type: ignore[attr-defined]
    if isinstance(instr, OpCall):
        info = get_op(instr.op)
        if info is not None and OpFlag.DATA_DEPENDENT in info.flags:
            return (f"#{index} {instr.op}{where} (data-dependent)",)
    if isinstance(instr, TensorPhi):
        inherited = tuple(s for _, r in instr.incoming for s in origin.get(r, ()))
        own = f"#{index} TENSOR_PHI{where} (branches give different shapes)"
        return tuple(dict.fromkeys((*inherited, own)))
    if isinstance(instr, LoadConst):
        return ()
    used = tuple(s for r in instr.uses() for s in origin.get(r, ()))  # type: ignore[attr-defined]
    if used:
        return tuple(dict.fromkeys(used))
    return (f"#{index} {format_instr(instr).strip()}",)  # type: ignore[arg-type]


def _names(text: str) -> list[str]:
    import re

    return [n for n in re.findall(r"[A-Za-z_][A-Za-z0-9_.]*", text) if n not in _FUNCS]


_FUNCS = {"floordiv", "mod", "max", "min", "dynamic"}


def print_report(report: SCDReport, file: TextIO | None = None) -> None:
    print(report.format(), file=file or sys.stdout)
