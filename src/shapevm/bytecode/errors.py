"""Errors of the bytecode layer, all rendered by one helper from structured fields.

Every message says what is wrong, where, what was expected and what was found, and how to
fix it, in the same layout::

    instruction 7 (OP_CALL matmul) in @mlp: inner dimensions differ
      expected: t4.shape[0] == t2.shape[1]  (64)
      found:    t2: f32[b, 64], t4: f32[32, m]
      fix:      transpose or reshape one operand; traced at model.py:41
         6 | t4: f32[32, m] = LOAD_CONST k0
      -->7 | t5 = OP_CALL matmul(t2, t4)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from shapevm.bytecode.printer import function_lines
from shapevm.bytecode.program import Function, Instr, OpCall, Program


def format_message(
    headline: str,
    *,
    expected: str = "",
    found: str = "",
    fix: str = "",
    window: Sequence[str] = (),
) -> str:
    """The one layout of every error message in this package."""
    lines = [headline]
    for label, text in (("expected", expected), ("found", found), ("fix", fix)):
        if text:
            lines.append(f"  {label + ':':<10}{text}")
    lines.extend(window)
    return "\n".join(lines)


class BytecodeFormatError(ValueError):
    """The bytes are not a valid shapevm bytecode file; ``offset`` is where reading stopped.

    >>> print(BytecodeFormatError("bad magic", offset=0, expected="SHAPEVM", found="PK"))
    byte 0 (0x0): bad magic
      expected: SHAPEVM
      found:    PK
    """

    def __init__(
        self, what: str, *, offset: int, expected: str = "", found: str = "", fix: str = ""
    ) -> None:
        self.what = what
        self.offset = offset
        self.expected = expected
        self.found = found
        self.fix = fix
        headline = f"byte {offset} (0x{offset:x}): {what}"
        super().__init__(format_message(headline, expected=expected, found=found, fix=fix))


class BytecodeSyntaxError(ValueError):
    """Text that is not valid bytecode text; ``line`` and ``column`` count from 1."""

    def __init__(self, what: str, *, line: int, column: int, text: str, expected: str = "") -> None:
        self.what = what
        self.line = line
        self.column = column
        self.text = text
        caret = " " * (column - 1) + "^"
        window = [f"  {line:>5} | {text}", f"  {'':>5} | {caret}"]
        headline = f"line {line}, column {column}: {what}"
        super().__init__(format_message(headline, expected=expected, window=window))


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One verifier finding. ``index`` is ``None`` for problems of the signature."""

    function: str
    index: int | None
    where: str  # "OP_CALL matmul", or "signature"
    what: str
    expected: str = ""
    found: str = ""
    fix: str = ""
    window: tuple[str, ...] = field(default=())
    check: str = ""  # which check found it: "def-use", "kinds", "shape", "alloc", ...

    def render(self) -> str:
        place = f"instruction {self.index} ({self.where})" if self.index is not None else self.where
        return format_message(
            f"{place} in @{self.function}: {self.what}",
            expected=self.expected,
            found=self.found,
            fix=self.fix,
            window=self.window,
        )


class VerifyError(ValueError):
    """A well-formed program that is not valid; lists every problem the verifier found."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        assert diagnostics, "VerifyError needs at least one diagnostic"
        self.diagnostics = tuple(diagnostics)
        text = "\n\n".join(d.render() for d in self.diagnostics)
        if len(self.diagnostics) > 1:
            text += f"\n\n{len(self.diagnostics)} problems found"
        super().__init__(text)


# collecting diagnostics -------------------------------------------------------------------
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
