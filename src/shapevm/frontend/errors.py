"""Errors raised while tracing a function into bytecode.

Each message says what was expected, what was found and how to fix it, and points at the
line of user code that was being traced.
"""

from __future__ import annotations


class TracingError(TypeError):
    """An op cannot be applied to its operands (shapes, dtypes, attributes).

    A ``TypeError``, as in NumPy and JAX, for operands of the wrong kind or shape.
    """

    def __init__(
        self, what: str, *, expected: str = "", found: str = "", fix: str = "", loc: str = ""
    ) -> None:
        lines = [what]
        if expected:
            lines.append(f"  expected: {expected}")
        if found:
            lines.append(f"  found:    {found}")
        if fix:
            lines.append(f"  fix:      {fix}")
        if loc:
            lines.append(f"  traced at {loc}")
        super().__init__("\n".join(lines))
        self.what, self.expected, self.found, self.fix, self.loc = what, expected, found, fix, loc
        self.constraint: str | None = None
        """A constraint without which the op is undefined for some shapes (``seq <= 512``
        for a table of 512 rows cut to ``seq`` and added to ``seq`` rows), when the error
        is that the constraint is missing."""


class ConcreteValueError(TypeError):
    """A traced array was used where a concrete Python value is needed (``if``, ``int``)."""


class EscapedTracerError(RuntimeError):
    """A traced array was used after the trace that made it ended."""
