"""Bytecode traces: one record per interpreted instruction or compiled region that ran.

Off by default, and then free: callers check the module attribute `ACTIVE` once per call
and run the plain plan when it is ``None``. When on, each plan that runs is replaced by a
copy (cached) whose steps time themselves and record ``function, pc, opcode, shapes,
duration_us, mode``: ``opcode`` is ``OP_CALL matmul`` or a region name such as
``R0 (#1-#6)``, ``shapes`` the shapes of what the step defined (``3x64;3``), ``mode``
``interpreted`` or ``compiled``. Records are kept in memory (up to `MAX_RECORDS`; the
rest are counted as dropped) and written as CSV by `Recorder.to_csv`.

Every call also leaves a `CallRecord` (function, end time, duration, mode, argument shapes)
in `Recorder.calls`, the most recent `MAX_CALLS`; ``mode`` is ``interpreted``,
``compiled`` (one compiled region runs the whole body) or ``mixed``. A recorder made with
``steps=False`` records only these, and leaves the steps as they are: the monitor page
(`shapevm.tools.monitor`) runs one while a page is open, for its latency chart.
"""

from __future__ import annotations

import abc
import csv
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from shapevm.bytecode.isa import Reg
from shapevm.bytecode.program import Function, Instr, OpCall

if TYPE_CHECKING:
    from shapevm.runtime.interpreter import Plan

MAX_RECORDS = 1_000_000
MAX_CALLS = 20_000
COLUMNS = ("function", "pc", "opcode", "shapes", "duration_us", "mode")

Record = tuple[str, int, str, str, float, str]


class CallRecord(NamedTuple):
    """One call of a function: when it ended (``time.monotonic()``), how long it took."""

    function: str
    end: float
    duration_ms: float
    mode: str  # interpreted, compiled or mixed
    shapes: str  # the array arguments' shapes, ``3x256;256x64``


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

    def __init__(
        self, directory: str | os.PathLike[str] | None = None, *, steps: bool = True
    ) -> None:
        self.directory = directory
        self.steps = steps
        self.records: list[Record] = []
        self.dropped = 0
        self.calls: deque[CallRecord] = deque(maxlen=MAX_CALLS)
        self.n_calls = 0
        """Calls recorded so far (`calls` keeps the last `MAX_CALLS` of them)."""
        self._lock = threading.Lock()
        self._plans: dict[int, tuple[Plan, Plan]] = {}

    def record(self, rec: Record) -> None:
        with self._lock:
            if len(self.records) < MAX_RECORDS:
                self.records.append(rec)
            else:
                self.dropped += 1

    def record_call(self, rec: CallRecord) -> None:
        with self._lock:
            self.calls.append(rec)
            self.n_calls += 1

    def calls_since(self, seen: int) -> tuple[list[CallRecord], int]:
        """The calls recorded after the first ``seen`` ones (as many as are kept), and the
        count to pass next time."""
        with self._lock:
            n = self.n_calls
            new = min(n - seen, len(self.calls)) if n > seen else 0
            return list(self.calls)[len(self.calls) - new :], n

    def traced(self, plan: Plan, fn: Function, slot: Callable[[Reg], int]) -> Plan:
        """``plan`` recording its calls and (with ``steps``) every step (built once per
        plan)."""
        from shapevm.runtime.interpreter import TimedPlan

        hit = self._plans.get(id(plan))
        if hit is not None and hit[0] is plan:
            return hit[1]
        pcs = {id(instr): pc for pc, _, instr in fn.instructions()}
        kinds = {isinstance(s, NamedStep) for b in plan.blocks.values() for s in b.steps}
        mode = "mixed" if len(kinds) > 1 else "compiled" if True in kinds else "interpreted"

        def transform(
            label: str, steps: tuple[Any, ...], instrs: tuple[Instr, ...]
        ) -> tuple[list[Any], tuple[Instr, ...]]:
            wrapped = [
                self._wrap(step, instr, fn.name, pcs.get(id(instr), -1), slot)
                for step, instr in zip(steps, instrs, strict=True)
            ]
            return wrapped, instrs

        name, record_call, clock = fn.name, self.record_call, time.monotonic

        def report(seconds: float, arrays: Sequence[Any]) -> None:
            shapes = _shapes(arrays, range(len(arrays)))
            record_call(CallRecord(name, clock(), round(seconds * 1e3, 4), mode, shapes))

        out = TimedPlan(plan.with_steps(transform) if self.steps else plan, report)
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


def enable(
    on: bool = True, directory: str | os.PathLike[str] | None = None, *, steps: bool = True
) -> Recorder | None:
    """Start (or stop) recording. Stopping writes the records to ``directory`` when the
    recorder was started with one (``bc_trace_<pid>.csv``). Returns the active recorder.
    ``steps=False`` records calls only (`CallRecord`): it keeps an active recorder, which
    records calls too; a recorder of steps replaces one of calls only."""
    global ACTIVE
    if on:
        if ACTIVE is not None and not steps:
            return ACTIVE
        if ACTIVE is None or ACTIVE.directory != directory or not ACTIVE.steps:
            ACTIVE = Recorder(directory, steps=steps)
        return ACTIVE
    old, ACTIVE = ACTIVE, None
    if old is not None and old.steps:
        _LAST[0] = old
    if old is not None and old.directory is not None:
        os.makedirs(old.directory, exist_ok=True)
        old.to_csv(os.path.join(old.directory, f"bc_trace_{os.getpid()}.csv"))
    return None


def last() -> Recorder | None:
    """The recorder that is active, or the last one stopped."""
    return ACTIVE if ACTIVE is not None else _LAST[0]


_LAST: list[Recorder | None] = [None]
