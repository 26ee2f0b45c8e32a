"""The compiler of the native tier: a function's code lowered once, shared by every key.

`Compiler.compile` returns the `Variant` of a key. The first key of a function pays for
`lower_function` (milliseconds: graph matching, packing constant weights, building the
executors); every later key gets a `Variant` over the same `NativeFunction` at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from shapevm.jit.backend.function import NativeFunction, f64_hint, lower_function
from shapevm.jit.backend.lower import Lowering
from shapevm.jit.backend.registry import lowerings_named
from shapevm.jit.backend.variant import Variant
from shapevm.jit.errors import CompileCancelled, NoNativeCode
from shapevm.jit.regions import RegionReport
from shapevm.runtime import scheduler
from shapevm.runtime.interpreter import Executable

__all__ = ["CompileCancelled", "Compiler", "NoNativeCode"]


class Compiler:
    """Builds variants; ``lowerings`` names the lowerings to try (``None``: all of
    `LOWERINGS`; ``(name, function)`` pairs add lowerings of one's own, see
    `registry.lowerings_named`). Unknown names fail every compile with the known ones."""

    def __init__(
        self,
        lowerings: Sequence[str | tuple[str, Lowering]] | None = None,
        mem_optimize: bool = True,
    ) -> None:
        self.lowerings = None if lowerings is None else tuple(lowerings)
        self.mem_optimize = mem_optimize
        self._functions: dict[int, tuple[Executable, NativeFunction]] = {}
        self._failed: dict[int, tuple[Executable, Exception]] = {}
        """Lowerings that failed: they do not depend on the shape, so every later key of
        the function gets the same error at once instead of lowering it again."""
        self._lock = threading.Lock()

    def native_function(
        self,
        executable: Executable,
        report: RegionReport,
        check: Callable[[], None] = lambda: None,
    ) -> NativeFunction:
        """The function's native code, lowered at the first request."""
        with self._lock:
            found = self._functions.get(id(executable))
        if found is not None and found[0] is executable:
            return found[1]
        with self._lock:
            failed = self._failed.get(id(executable))
        if failed is not None and failed[0] is executable:
            raise failed[1].with_traceback(None)
        generation = scheduler.generation()
        try:
            nf = lower_function(
                executable,
                report,
                lowerings=lowerings_named(self.lowerings),
                mem_optimize=self.mem_optimize,
                check=check,
            )
            if not nf.regions:
                reasons = "; ".join(f"{p.region.span}: {p.reason}" for p in nf.interpreted)
                raise NoNativeCode(
                    f"no region could be lowered ({reasons or 'no compilable region'})"
                    + f64_hint(nf.interpreted)
                )
        except CompileCancelled:
            raise  # a timeout or an abandoned compile: another try may finish
        except Exception as exc:
            with self._lock:
                self._failed[id(executable)] = (executable, exc)
            raise
        if scheduler.generation() != generation:
            # The capability table changed while this lowered: its code may use a kernel
            # the new table removed (the engine has cancelled the record it was for).
            raise CompileCancelled("the capability table changed during the lowering")
        with self._lock:
            self._functions[id(executable)] = (executable, nf)
        return nf

    def forget(self, executable: Executable) -> None:
        """Drop the native code of ``executable`` (the next compile lowers it again)."""
        with self._lock:
            self._functions.pop(id(executable), None)
            self._failed.pop(id(executable), None)

    def compile(
        self,
        executable: Executable,
        report: RegionReport,
        key: Any,
        ref_env: Mapping[str, int],
        check: Callable[[], None] = lambda: None,
        deadline: float | None = None,
        template: Variant | None = None,
    ) -> Variant:
        """The variant of ``key``; with a ``template`` of the same function its code is
        shared (``shares_code_with``)."""
        if template is not None and template.executable is executable:
            origin = template.shares_code_with
            if origin is None:
                origin = template.key
            return Variant(executable, key, template.function, ref_env, shares_code_with=origin)
        nf = self.native_function(executable, report, check)
        return Variant(executable, key, nf, ref_env)
