"""A debug session's run: the plan driven one instruction at a time in a thread of its own,
stopping at the entry, at breakpoints, after a step, on a pause or on an error.

The thread reports through ``emit(event, body)`` (DAP events) and waits, while stopped,
until the adapter resumes it (`resume`) or ends it (`terminate`). Registers are read only
while it is stopped.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from typing import Any

from shapevm.bytecode.program import Instr, LoadConst, Return
from shapevm.runtime.bctrace import NamedStep
from shapevm.tools.debug.target import Target

Emit = Callable[[str, dict[str, Any]], None]
CONTINUE, STEP, STEP_OUT = "continue", "step", "out"


class Terminated(Exception):
    """The session was ended while the program ran."""


class Session:
    """Runs a `Target` under the adapter's control."""

    def __init__(self, target: Target, emit: Emit) -> None:
        self.target = target
        self.emit = emit
        self.breakpoints: set[int] = set()  # instruction indices, from lines and instructions
        self._cv = threading.Condition()
        self._mode: str | None = None  # set by resume; None while stopped
        self._pause = False
        self._ended = False
        self._thread: threading.Thread | None = None
        self.stopped = False
        self.pc = 0
        self.instr: Instr | None = None
        self.step: Any = None
        self.regs: list[Any] = []
        self.origin: dict[int, str] = {}  # register slot -> how its value was made
        self.error: BaseException | None = None
        self.results: list[Any] | None = None

    # -- control (from the adapter's thread) --------------------------------------------------
    def start(self) -> None:
        self._mode = STEP if self.target.args.stop_on_entry else CONTINUE
        self._thread = threading.Thread(target=self._run, name="shapevm-debuggee", daemon=True)
        self._thread.start()

    def resume(self, mode: str) -> None:
        with self._cv:
            self._mode = mode
            self.stopped = False
            self._cv.notify_all()

    def pause(self) -> None:
        with self._cv:
            self._pause = True

    def terminate(self) -> None:
        with self._cv:
            self._ended = True
            self._cv.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self.stopped

    # -- the run (in its own thread) ----------------------------------------------------------
    def _run(self) -> None:
        gen = self.target.plan.stepwise(self.target.arrays)
        params = self.target.plan.params
        first = True
        try:
            while True:
                before = list(self.regs)
                try:
                    instr, step, self.regs = next(gen)
                except StopIteration as done:
                    self._note(before)
                    self.results = done.value
                    break
                if first:
                    self.origin = {p: "input" for p in params}
                self._note(before)
                self.instr, self.step = instr, step
                self.pc = self.target.pc_of.get(id(instr), self.pc)
                reason = self._reason(first)
                first = False
                if reason:
                    self._stop(reason)
        except Terminated:
            gen.close()
            return
        except Exception as exc:  # the program failed: stop where it did, then end
            self.error = exc
            try:
                self._stop("exception")
            except Terminated:
                return
            self._finish(1)
            return
        self._finish(0)

    def _reason(self, first: bool) -> str | None:
        with self._cv:
            if self._ended:
                raise Terminated
            if first and self.target.args.stop_on_entry:
                return "entry"
            if self._pause:
                self._pause = False
                return "pause"
            if self.pc in self.breakpoints:
                return "breakpoint"
            if self._mode == STEP:
                return "step"
            if self._mode == STEP_OUT and isinstance(self.instr, Return):
                return "step"
            return None

    def _stop(self, reason: str) -> None:
        with self._cv:
            self._mode = None
            self.stopped = True
        body: dict[str, Any] = {"reason": reason, "threadId": 1, "allThreadsStopped": True}
        if reason == "breakpoint":
            body["hitBreakpointIds"] = [self.pc]
        if reason == "exception" and self.error is not None:
            body["description"] = f"{type(self.error).__name__}"
            body["text"] = str(self.error)
        self.emit("stopped", body)
        with self._cv:
            while self._mode is None and not self._ended:
                self._cv.wait()
            if self._ended:
                raise Terminated

    def _note(self, before: list[Any]) -> None:
        """Say how each register that the last step changed got its value."""
        if not before:
            return
        step, pc = self.step, self.pc
        if isinstance(step, NamedStep):
            outs = set(step.out_slots)
            how_out = f"compiled: {step.name}"
            how_in = f"compiled: inside {step.name} (not kept: compiled memory)"
        elif isinstance(self.instr, LoadConst):
            outs, how_out = set(), ""
            how_in = f"constant: #{pc} LOAD_CONST k{self.instr.const}"
        else:
            outs, how_out = set(), ""
            how_in = f"interpreted: #{pc} {_opcode(self.instr)}"
        for slot, value in enumerate(self.regs):
            if slot < len(before) and value is not before[slot] and value is not None:
                self.origin[slot] = how_out if slot in outs else how_in

    def _finish(self, code: int) -> None:
        if code == 0 and self.results is not None:
            self.emit("output", {"category": "stdout", "output": _results(self.results)})
        elif self.error is not None:
            text = "".join(traceback.format_exception_only(type(self.error), self.error))
            self.emit("output", {"category": "stderr", "output": text})
        self.emit("exited", {"exitCode": code})
        self.emit("terminated", {})
        with self._cv:
            self._ended = True


def _opcode(instr: Instr | None) -> str:
    if instr is None:
        return ""
    op = getattr(instr, "op", None)
    return instr.opcode.name + (f" {op}" if isinstance(op, str) else "")


def _results(results: list[Any]) -> str:
    from shapevm.tools.debug.values import describe

    lines = [f"result {i}: {describe(r)}" for i, r in enumerate(results)]
    return "\n".join(lines) + "\n"


__all__ = ["CONTINUE", "STEP", "STEP_OUT", "Session", "Terminated"]
