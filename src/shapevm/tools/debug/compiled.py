"""The plan the JIT runs for one call, for a session launched with ``"jit": true``.

The one place where the debugger reaches into the JIT: it compiles the program's variant
for the launch's shapes through the public engine (`shapevm.jit.JitEngine`, compiled at
once, ``background=False``), then takes the plan of that variant: the interpreter's plan
with each compiled region spliced in as one step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shapevm.jit import JitEngine, JitOptions
from shapevm.runtime.interpreter import Executable, Plan


def compiled_plan(
    executable: Executable, arrays: Sequence[Any], env: Mapping[str, int]
) -> tuple[Plan, str]:
    """The compiled plan and a note saying what was compiled, or the interpreter's plan and
    a note saying why the JIT did not compile."""
    options = JitOptions.from_kwargs({"hot_threshold": 1, "background": False})
    engine = JitEngine(executable, options, name=executable.fn.name)
    try:
        engine.run(arrays, env)  # the first call makes the key hot and compiles it
    except Exception as exc:  # the program fails: step it where it does, interpreted
        why = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        return executable.plan_for(env), f"interpreted: the JIT's first call failed: {why}"
    for rec in engine.records():
        if rec.status == "ready" and rec.variant is not None:
            regions = ", ".join(f"{r.region.name} {r.region.span}" for r in rec.variant.regions)
            return rec.variant.plan_for(env), f"compiled: {regions or 'no region'}"
        if rec.status == "failed":
            return executable.plan_for(env), f"interpreted: the JIT failed: {rec.reason}"
    why = engine.skip_reason or "no variant"
    return executable.plan_for(env), f"interpreted: the JIT compiled nothing ({why})"
