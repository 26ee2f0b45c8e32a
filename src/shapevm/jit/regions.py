"""Regions: the maximal shape-stable straight-line runs of a function.

A region is a run of instructions inside one block with no data-dependent op and no
``dynamic`` dimension in the type of anything it reads or defines; once the dimension
variables are bound, every shape inside it is known, so it can be compiled with a static
memory plan. Everything else stays interpreted between regions: data-dependent ops,
instructions touching a ``dynamic`` dimension, ``TENSOR_PHI`` merges and control flow.

Types come from the verifier's inference (declared types on ``OP_CALL``/``LOAD_CONST``/
``TENSOR_PHI`` and the parameters' types, computed ones elsewhere). The SCD of a region or
span is known dims / all dims of the tensors it defines, as in `shapevm.runtime.scd`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from shapevm.bytecode.infer import VType
from shapevm.bytecode.isa import Reg
from shapevm.bytecode.program import (
    BranchIf,
    Function,
    Instr,
    Jump,
    OpCall,
    Program,
    Return,
    TensorCreate,
    TensorPhi,
    TensorResize,
)
from shapevm.bytecode.verify import infer_types
from shapevm.ops import Dynamic, OpFlag, get_op
from shapevm.runtime.scd import SCDReport, analyze


@dataclass(frozen=True)
class Region:
    """A run of instructions ``start <= pc < stop`` of block ``block``.

    ``reason`` is empty for a compilable region and says why the span stays interpreted
    otherwise.
    """

    function: str
    block: str
    start: int
    stop: int
    n_ops: int
    known: int
    total: int
    reason: str = ""
    number: int = -1  # R0, R1... among compilable regions; -1 for interpreted spans

    @property
    def compilable(self) -> bool:
        return not self.reason

    @property
    def scd(self) -> float:
        return 1.0 if self.total == 0 else self.known / self.total

    @property
    def name(self) -> str:
        return f"R{self.number}" if self.number >= 0 else "--"

    @property
    def span(self) -> str:
        return (
            f"#{self.start}" if self.stop - self.start == 1 else f"#{self.start}-#{self.stop - 1}"
        )


@dataclass
class RegionReport:
    """The regions and interpreted spans of a function, in program order."""

    function: str
    scd: float
    regions: list[Region] = field(default_factory=list)
    types: Any = field(default=None, repr=False, compare=False)
    """The verifier's types of every register (`infer_types`), for the compiler."""

    @property
    def compilable(self) -> list[Region]:
        return [r for r in self.regions if r.compilable]

    def format(self, hot_threshold: int = 3, scd_threshold: float = 0.8) -> str:
        gate = (
            f"function SCD {self.scd:.2f} >= {scd_threshold:.2f}: compiled after "
            f"{hot_threshold} calls of a specialization key"
            if self.scd >= scd_threshold
            else f"function SCD {self.scd:.2f} < scd_threshold {scd_threshold:.2f}: "
            "nothing is compiled"
        )
        lines = [f"regions of @{self.function} ({gate})"]
        if not self.regions:
            lines.append("  (no tensor operations)")
        for r in self.regions:
            if r.compilable and self.scd < scd_threshold:
                verdict = f"not compiled: function SCD {self.scd:.2f} < {scd_threshold:.2f}"
            elif r.compilable:
                verdict = "compilable"
            else:
                verdict = f"interpreted: {r.reason}"
            lines.append(
                f"  {r.name:<4}{r.span:<10}{r.block:<6}{r.n_ops:>3} ops  SCD {r.scd:.2f}  {verdict}"
            )
        return "\n".join(lines)


def find_regions(fn: Function, program: Program) -> RegionReport:
    """Split ``fn`` into compilable regions and the interpreted spans between them."""
    types = infer_types(fn, program).types
    scd = analyze(fn)
    report = RegionReport(fn.name, scd.scd, types=types)
    pc = 0
    for block in fn.blocks:
        run: list[tuple[int, Instr]] = []
        for instr in block.instrs:
            why = instability(instr, types)
            if why is None:
                run.append((pc, instr))
            else:
                _close(report, block.label, run, scd, "")
                run = []
                if not isinstance(instr, (Jump, Return)):
                    _close(report, block.label, [(pc, instr)], scd, why)
            pc += 1
        _close(report, block.label, run, scd, "")
    number = 0
    for i, r in enumerate(report.regions):
        if r.compilable:
            report.regions[i] = replace(r, number=number)
            number += 1
    return report


def instability(instr: Instr, types: Mapping[Reg, VType]) -> str | None:
    """Why ``instr`` cannot be part of a region, or ``None`` when it can."""
    if isinstance(instr, TensorPhi):
        return "TENSOR_PHI merges the values of branches"
    if isinstance(instr, (Jump, Return)):
        return "control flow"
    if isinstance(instr, BranchIf):
        return "control flow (BRANCH_IF)"
    if isinstance(instr, OpCall):
        info = get_op(instr.op)
        if info is None:
            return f"unknown op {instr.op}"
        if OpFlag.DATA_DEPENDENT in info.flags:
            return f"{instr.op} is data-dependent (its output shape depends on values)"
    if isinstance(instr, (TensorCreate, TensorResize)) and any(
        isinstance(d, Dynamic) for d in instr.spec
    ):
        return f"{instr.opcode.name} has a dynamic dimension"
    for reg in (*instr.uses(), *instr.defs()):
        if not reg.is_tensor:
            continue
        vt = types.get(reg)
        if vt is None:
            return f"the type of {reg} is unknown"
        if any(isinstance(d, Dynamic) for d in vt.shape):
            return f"{reg}: {vt} has a dynamic dimension"
    return None


def _close(
    report: RegionReport, label: str, run: list[tuple[int, Instr]], scd: SCDReport, reason: str
) -> None:
    """Add ``run`` as a region (if it has an op) or as an interpreted span (with a reason)."""
    if not run or (not reason and not any(isinstance(i, OpCall) for _, i in run)):
        return
    start, stop = run[0][0], run[-1][0] + 1
    inside = [t for t in scd.tensors if t.instr is not None and start <= t.instr < stop]
    known, total = sum(t.known for t in inside), sum(t.total for t in inside)
    n_ops = sum(1 for _, i in run if isinstance(i, OpCall))
    report.regions.append(Region(report.function, label, start, stop, n_ops, known, total, reason))
