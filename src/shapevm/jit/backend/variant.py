"""A compiled variant: a function's native code (shared by every key) as one key runs it.

The native code of a function (`NativeFunction`: its regions lowered to executors) does
not depend on shapes, so every key of the function shares it; a `Variant` adds what is
the key's own: the interpreter's plans with the native regions spliced in (cached per
assignment of the dimension variables) and the memory figures at the key's reference
values.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from shapevm.bytecode.program import Instr
from shapevm.jit.backend.function import (
    F64_HINT,
    ExecFailure,
    NativeFunction,
    NativeRegion,
    f64_hint,
)
from shapevm.runtime.bctrace import NamedStep
from shapevm.runtime.interpreter import Executable, Plan, Step, splice_calls

_PLANS_PER_VARIANT = 256


class _RegionCall(NamedStep):
    """A native region standing in the interpreter's plan for one dimension assignment."""

    def __init__(self, region: NativeRegion, key: Any, env: Mapping[str, int]) -> None:
        self.region = region
        self.key = key
        self.env = env
        r = region.region
        self.name = f"{r.name} ({r.span})"
        self.pc = r.start
        self.out_slots = region.out_slots

    def __call__(self, regs: list[Any]) -> None:
        self.region.run(regs, self.key, self.env)


def regions_bytes(regions: Sequence[NativeRegion], env: Mapping[str, int]) -> tuple[int, int]:
    """(planned, naive) bytes of ``regions`` at ``env``, summed over the regions."""
    planned = naive = 0
    for r in regions:
        p, n = r.bytes(env)
        planned += p
        naive += n
    return planned, naive


class Variant:
    """The native code of ``function`` for one specialization key."""

    def __init__(
        self,
        executable: Executable,
        key: Any,
        function: NativeFunction,
        ref_env: Mapping[str, int],
        shares_code_with: Any = None,
    ) -> None:
        self.executable = executable
        self.key = key
        self.function = function
        self.shares_code_with = shares_code_with
        """The key whose compile lowered the native code this variant runs (None: its own)."""
        self.regions: tuple[NativeRegion, ...] = tuple(function.regions)
        self.ref_env = dict(ref_env)
        self.variables = executable.binder.variables
        self.generic = True
        """Right for any dimension values: the variant may serve any key of its function."""
        self.whole = function.whole
        """One native region is the function's whole body: a call is one executor call."""
        self._plans: dict[tuple[int, ...], Plan] = {}

    @functools.cached_property
    def memory_bytes(self) -> tuple[int, int]:
        """(planned, naive) bytes at the key's dimension values (`MemoryPlan.bytes`):
        worked out when asked, not as the variant is made in its key's call (about 0.1 ms
        for W3's block, a third of its call at 1x37)."""
        return regions_bytes(self.regions, self.ref_env)

    def memory_later(self) -> Callable[[], tuple[int, int]]:
        """`memory_bytes` without the variant, for a record that drops it (see
        `VariantRecord.drop_variant`)."""
        return functools.partial(regions_bytes, self.regions, self.ref_env)

    @property
    def has_chains(self) -> bool:
        """Whether a kernel of its regions is a fused chain, what tier 3 generates C for."""
        return any(k.chain is not None for r in self.regions for k in r.lowered.kernels)

    @property
    def patterns(self) -> tuple[str, ...]:
        return self.function.patterns

    def plan_for(self, env: Mapping[str, int]) -> Plan:
        values = tuple(env[v] for v in self.variables)
        plan = self._plans.get(values)
        if plan is None:
            if self.function.whole:  # one region call: no interpreted step around it
                first = self.executable.fn.blocks[0].instrs[0]
                call = _RegionCall(self.regions[0], values, env)
                plan = self.executable.straight_plan([call], [first])
            if plan is None:  # steps for what the regions leave out, none for what they cover
                calls = [(r.covered, _RegionCall(r, values, env)) for r in self.regions]
                plan = self.executable.plan_around(env, calls) or self._splice(
                    self.executable.plan_for(env), calls
                )
            if len(self._plans) >= _PLANS_PER_VARIANT:
                self._plans.clear()
            self._plans[values] = plan
        return plan

    def run(self, arrays: Sequence[Any], env: Mapping[str, int]) -> list[Any]:
        fn = self.function
        if fn.direct is not None:
            dims = tuple(env[v] for v in self.variables)
            try:
                return list(fn.direct(dims, *arrays))
            except ExecFailure as exc:  # an instruction failed (an index out of range)
                raise fn.failure(exc) from exc
        return self.plan_for(env).run(arrays)

    def _splice(self, base: Plan, calls: Sequence[tuple[frozenset[int], Step]]) -> Plan:
        def transform(
            label: str, steps: tuple[Step, ...], instrs: tuple[Instr, ...]
        ) -> tuple[list[Any], list[Instr]]:
            return splice_calls(instrs, calls, lambda i, _: steps[i])

        return base.with_steps(transform)

    def describe(self) -> str:
        parts = [r.describe() for r in self.regions]
        parts += [f"{p.region.span} interpreted: {p.reason}" for p in self.function.interpreted]
        if f64_hint(self.function.interpreted):
            parts.append(F64_HINT)
        return "\n".join(parts) or "(no native regions)"
