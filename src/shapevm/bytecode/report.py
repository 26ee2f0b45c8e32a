"""Collects verifier findings for one function and cuts the program window for each."""

from __future__ import annotations

from shapevm.bytecode.errors import Diagnostic
from shapevm.bytecode.printer import function_lines
from shapevm.bytecode.program import Function, Instr, OpCall, Program

WINDOW_BEFORE = 2
WINDOW_AFTER = 1


def describe(instr: Instr) -> str:
    """``OP_CALL matmul`` or ``TENSOR_FREE``: how errors name an instruction."""
    if isinstance(instr, OpCall):
        return f"OP_CALL {instr.op}"
    return instr.opcode.name


class Reporter:
    """Diagnostics for one function, each with a window of its text around the fault."""

    def __init__(self, fn: Function, program: Program | None) -> None:
        self.fn = fn
        self.program = program
        self.instrs = [instr for _, _, instr in fn.instructions()]
        self.width = len(str(max(len(self.instrs) - 1, 0)))
        self.diagnostics: list[Diagnostic] = []
        self._lines: list[tuple[int | None, str]] | None = None

    @property
    def lines(self) -> list[tuple[int | None, str]]:
        """The function's text, printed only once something is reported."""
        if self._lines is None:
            self._lines = function_lines(self.fn, self.program)
        return self._lines

    def line_of(self, index: int) -> int:
        for n, (idx, _) in enumerate(self.lines):
            if idx == index:
                return n
        raise KeyError(index)

    def at(
        self,
        index: int,
        check: str,
        what: str,
        *,
        expected: str = "",
        found: str = "",
        fix: str = "",
    ) -> None:
        """Report a problem of instruction ``index``; its source location joins the fix."""
        instr = self.instrs[index]
        if instr.loc:
            fix = f"{fix}; traced at {instr.loc}" if fix else f"traced at {instr.loc}"
        self.diagnostics.append(
            Diagnostic(
                self.fn.name,
                index,
                describe(instr),
                what,
                expected,
                found,
                fix,
                self._window(self.line_of(index)),
                check,
            )
        )

    def signature(
        self, check: str, what: str, *, expected: str = "", found: str = "", fix: str = ""
    ) -> None:
        """Report a problem of the signature (parameters, results, constraints)."""
        window = (self._render(0, True),)
        self.diagnostics.append(
            Diagnostic(self.fn.name, None, "signature", what, expected, found, fix, window, check)
        )

    def _window(self, line: int) -> tuple[str, ...]:
        lo = max(1, line - WINDOW_BEFORE)
        hi = min(len(self.lines), line + WINDOW_AFTER + 1)
        return tuple(self._render(n, n == line) for n in range(lo, hi))

    def _render(self, n: int, marked: bool) -> str:
        idx, text = self.lines[n]
        number = "" if idx is None else str(idx)
        return f"{'-->' if marked else '':>5}{number:>{self.width}} | {text.strip()}"
