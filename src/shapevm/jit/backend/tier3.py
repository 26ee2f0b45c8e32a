"""Tier 3: generated C for the hot chains of a key, compiled in the background, patched in.

`generate(variant, key, ref_env, specialize)` writes C for every fused chain of the
variant's native regions (`codegen.chain_source`), builds it with the system compiler
(`toolchain.build`, cached on disk) and installs each kernel in front of its chain's tier-2
kernel (`Executor.patch`): calls that start afterwards run it, calls already running finish
as they began. With ``specialize`` (``exact`` keys, and the frequent keys of ``adaptive``)
a chain's innermost extent is baked in where the program fixes it (a model's width); one
that a dimension variable sizes (a sequence length, an image's width) is left to the
loop: baked in, it made every new shape compile its own copy of the same kernel (a BERT
encoder's mask chain: 0.4-0.5 s of a core for each sequence length, on a machine whose
two cores the calls were using). `Patches.remove` takes a key's kernels out again
(eviction, a capability patch).

`chain_elements` is what the engine's size gate (``tier3_min_elements``) reads: a key whose
chains are all smaller keeps tier 2.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shapevm import native
from shapevm.jit.backend import codegen, toolchain
from shapevm.jit.backend.variant import Variant


def chain_elements(variant: Variant, env: Mapping[str, int]) -> int:
    """The elements of the variant's largest chain at the dimension values ``env`` (0 for
    none)."""
    largest = 0
    for region in variant.regions:
        for kernel in region.lowered.kernels:
            if kernel.chain is None:
                continue
            n = 1
            for d in kernel.chain.shape:
                n *= d if isinstance(d, int) else int(d.evaluate(env))
            largest = max(largest, n)
    return largest


@dataclass
class Patches:
    """The kernels one key installed, as (function, slot table key) each: keys that share a
    function's code and build the same kernel share its slot (`install`)."""

    installed: list[tuple[Any, tuple[int, int, str]]] = field(default_factory=list)
    compile_ms: float = 0.0
    build_ms: list[float] = field(default_factory=list)  # each library compiled (not cached)
    skipped: list[str] = field(default_factory=list)
    sources: list[tuple[str, str]] = field(default_factory=list)  # (kernel label, C source)

    @property
    def built(self) -> int:
        """Libraries compiled (not found in the cache)."""
        return len(self.build_ms)

    def remove(self) -> None:
        for function, slot_key in self.installed:
            with function.patch_lock:
                entry = function.patched[slot_key]
                entry[2] -= 1
                if entry[2] == 0:  # the last key using it: out of the instruction
                    entry[0].unpatch(slot_key[1], entry[1])
                    del function.patched[slot_key]
        self.installed.clear()


def install(function: Any, executor: Any, index: int, symbol: str, capsule: Any) -> bool:
    """Patch the kernel ``symbol`` in front of instruction ``index`` of ``executor`` (one of
    ``function``'s), or count one more key using it if it is there already: keys whose
    specialisations generate the same code (the usual case: a chain's innermost extent is a
    model's width) would otherwise fill the instruction's slots with copies. False when
    every slot is taken."""
    slot_key = (id(executor), index, symbol)
    with function.patch_lock:
        entry = function.patched.get(slot_key)
        if entry is None:
            slot = executor.patch(index, capsule)
            if slot < 0:
                return False
            entry = function.patched[slot_key] = [executor, slot, 0]
        entry[2] += 1
    return True


def available() -> str | None:
    """Why tier 3 cannot run here (None: it can)."""
    if toolchain.compiler() is None:
        return toolchain.why_no_compiler()
    return None


def generate(
    variant: Variant,
    ref_env: Mapping[str, int],
    specialize: bool,
    check: Callable[[], None] = lambda: None,
) -> Patches:
    """Build and patch in the key's kernels (see the module docstring). When a step raises
    (`check` on a cancelled compile, or anything else), the kernels already patched in are
    taken out again before the exception goes on: no one else holds them to remove."""
    out = Patches()
    try:
        _build_all(out, variant, ref_env, specialize, check)
    except BaseException:
        out.remove()
        raise
    return out


def _reduced_as_it_lies(lowered: Any, chain: Any) -> bool:
    """Whether ``chain`` only reduces one float32 tensor that lies contiguous in memory
    (``x.min(axis=(1, 2))``, ``x.sum(-1)``): the tile interpreter reduces it in runs of its
    vector kernel, which generated code does not beat (the min over [8, 96, 96]: 11 us in
    tier 2, 21 generated)."""
    if not chain.reduce or len(chain.nodes) != 1 or chain.nodes[0].op != "identity":
        return False
    t = lowered.tensors[chain.inputs[0]]
    return bool(t.contiguous and t.dtype == np.float32)


def _build_all(
    out: Patches,
    variant: Variant,
    ref_env: Mapping[str, int],
    specialize: bool,
    check: Callable[[], None],
) -> None:
    isa = native.info()["isa"]
    for region in variant.regions:
        executors = [region.executor]
        if variant.function.direct is not None:
            executors.append(variant.function.direct)
        for index, kernel in enumerate(region.lowered.kernels):
            chain = kernel.chain
            if chain is None:
                continue
            check()
            d = chain.shape[-1] if chain.shape else 1  # a chain of scalars (a total's scale)
            short = codegen.SHORT_ROW
            if isinstance(d, int) and d < short and len(chain.shape) > 1:
                out.skipped.append(
                    f"{kernel.label} [{', '.join(f'#{p}' for p in kernel.pcs)}]: rows of {d}: "
                    f"tier 2 runs rows shorter than {short} faster (its tiles span rows)"
                )
                continue
            if _reduced_as_it_lies(region.lowered, chain):
                out.skipped.append(
                    f"{kernel.label} [{', '.join(f'#{p}' for p in kernel.pcs)}]: a reduction "
                    "of a tensor as it lies in memory: tier 2 reduces it in runs of the vector "
                    "kernel, faster than generated code"
                )
                continue
            inner = d if specialize and isinstance(d, int) else None
            try:
                symbol, source = codegen.chain_source(chain, isa, inner)
                built = toolchain.build(symbol, source, isa)
            except (codegen.CannotGenerate, toolchain.BuildError) as exc:
                out.skipped.append(
                    f"{kernel.label} [{', '.join(f'#{p}' for p in kernel.pcs)}]: {exc}"
                )
                continue
            out.sources.append(
                (f"{kernel.label} [{', '.join(f'#{p}' for p in kernel.pcs)}]", source)
            )
            out.compile_ms += built.compile_ms
            if not built.cached:
                out.build_ms.append(built.compile_ms)
            capsule = toolchain.load(built)
            for executor in executors:
                if install(variant.function, executor, index, symbol, capsule):
                    out.installed.append((variant.function, (id(executor), index, symbol)))
                else:
                    out.skipped.append(f"{kernel.label}: every slot of the instruction is taken")
