"""Bytecode traces: one record per interpreted instruction or compiled region that ran.

Off by default, and then free: callers check the module attribute `ACTIVE` once per call
and run the plain plan when it is ``None``. When on, each plan that runs is replaced by a
copy (cached) whose steps time themselves and record ``function, pc, opcode, shapes,
duration_us, mode``: ``opcode`` is ``OP_CALL matmul`` or a region name such as
``R0 (#1-#6)``, ``shapes`` the shapes of what the step defined (``3x64;3``), ``mode``
``interpreted`` or ``compiled``. Records are kept in memory (up to `MAX_RECORDS`; the
rest are counted as dropped) and written as CSV by `Recorder.to_csv`.
"""

from __future__ import annotations

import abc
import csv
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from shapevm.bytecode.isa import Reg
from shapevm.bytecode.program import Function, Instr, OpCall

if TYPE_CHECKING:
    from shapevm.runtime.interpreter import Plan

MAX_RECORDS = 1_000_000
COLUMNS = ("function", "pc", "opcode", "shapes", "duration_us", "mode")

Record = tuple[str, int, str, str, float, str]


class NamedStep(abc.ABC):
    """A step that stands for several instructions (a compiled region), named in traces;
    subclasses run the region in `__call__`."""

    name: str = "region"
    pc: int = -1
    out_slots: tuple[int, ...] = ()

    @abc.abstractmethod
    def __call__(self, regs: list[Any]) -> None: ...


class Recorder:
    """Collects trace records from every thread."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = directory
        self.records: list[Record] = []
        self.dropped = 0
        self._lock = threading.Lock()
        self._plans: dict[int, tuple[Plan, Plan]] = {}

    def record(self, rec: Record) -> None:
        with self._lock:
            if len(self.records) < MAX_RECORDS:
                self.records.append(rec)
            else:
                self.dropped += 1

    def traced(self, plan: Plan, fn: Function, slot: Callable[[Reg], int]) -> Plan:
        """``plan`` with every step recording itself (built once per plan)."""
        hit = self._plans.get(id(plan))
        if hit is not None and hit[0] is plan:
            return hit[1]
        pcs = {id(instr): pc for pc, _, instr in fn.instructions()}

        def transform(
            label: str, steps: tuple[Any, ...], instrs: tuple[Instr, ...]
        ) -> tuple[list[Any], tuple[Instr, ...]]:
            wrapped = [
                self._wrap(step, instr, fn.name, pcs.get(id(instr), -1), slot)
                for step, instr in zip(steps, instrs, strict=True)
            ]
            return wrapped, instrs

        out = plan.with_steps(transform)
        with self._lock:
            if len(self._plans) > 4096:
                self._plans.clear()
            self._plans[id(plan)] = (plan, out)
        return out

    def _wrap(
        self, step: Any, instr: Instr, function: str, pc: int, slot: Callable[[Reg], int]
    ) -> Callable[[list[Any]], None]:
        if isinstance(step, NamedStep):
            name, pc, mode, outs = step.name, step.pc, "compiled", step.out_slots
        else:
            name = instr.opcode.name + (f" {instr.op}" if isinstance(instr, OpCall) else "")
            mode = "interpreted"
            outs = tuple(slot(r) for r in instr.defs() if r.is_tensor)
        record = self.record
        clock = time.perf_counter

        def traced(regs: list[Any]) -> None:
            t0 = clock()
            step(regs)
            us = (clock() - t0) * 1e6
            record((function, pc, name, _shapes(regs, outs), round(us, 3), mode))

        return traced

    def to_csv(self, path: str | os.PathLike[str]) -> int:
        """Write the records (with a header row) to ``path``; returns how many."""
        with self._lock:
            rows = list(self.records)
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(COLUMNS)
            writer.writerows(rows)
        return len(rows)


def _shapes(regs: Sequence[Any], slots: Sequence[int]) -> str:
    return ";".join(
        "x".join(str(d) for d in regs[s].shape) for s in slots if hasattr(regs[s], "shape")
    )


ACTIVE: Recorder | None = None


def enable(on: bool = True, directory: str | os.PathLike[str] | None = None) -> Recorder | None:
    """Start (or stop) recording. Stopping writes the records to ``directory`` when the
    recorder was started with one (``bc_trace_<pid>.csv``). Returns the active recorder."""
    global ACTIVE
    if on:
        if ACTIVE is None or ACTIVE.directory != directory:
            ACTIVE = Recorder(directory)
        return ACTIVE
    old, ACTIVE = ACTIVE, None
    _LAST[0] = old or _LAST[0]
    if old is not None and old.directory is not None:
        os.makedirs(old.directory, exist_ok=True)
        old.to_csv(os.path.join(old.directory, f"bc_trace_{os.getpid()}.csv"))
    return None


def last() -> Recorder | None:
    """The recorder that is active, or the last one stopped."""
    return ACTIVE if ACTIVE is not None else _LAST[0]


_LAST: list[Recorder | None] = [None]
