"""Errors of the JIT: a compile that failed while ``fallback=False`` asked not to hide it."""

from __future__ import annotations


class CompileCancelled(Exception):
    """The compile was abandoned (timeout or eviction) between two of its steps."""


class NoNativeCode(Exception):
    """No region of the function could be lowered (the message lists why)."""


class JitCompileError(RuntimeError):
    """Compiled code for a call could not be built and ``fallback=False`` forbids interpreting.

    ``function``, ``key`` and ``reason`` hold the structured fields the message is made of.
    """

    def __init__(self, function: str, key: object, reason: str) -> None:
        self.function = function
        self.key = key
        self.reason = reason
        super().__init__(
            f"JIT compile of @{function} for {format_key(key)} failed: {reason}\n"
            "  fallback=False, so the call is not run in the interpreter\n"
            "  fix: pass fallback=True to shapevm.jit to keep interpreting the shapes whose "
            "compile failed, or raise compile_timeout_s if the compile timed out"
        )


def format_key(key: object) -> str:
    """``b=3, n=8``-free text of a specialization key, for messages and tables."""
    if isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], str):
        kind, parts = key
        if kind == "exact":
            return f"exact {tuple(parts)}"
        ranges = ", ".join(f"[{lo}, {'inf' if hi is None else hi})" for lo, hi in parts)
        return f"{kind} ({ranges})"
    return repr(key)
