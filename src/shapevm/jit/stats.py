"""Process-wide JIT counters and the registry of live engines, read by `shapevm.vm`.

Every engine updates its own counters and these under one lock (`LOCK`), so a call costs
one uncontended lock acquisition for its bookkeeping.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shapevm.jit.engine import JitEngine

LOCK = threading.Lock()


@dataclass
class Counters:
    calls: int = 0
    compiled_calls: int = 0
    borrowed_calls: int = 0  # compiled calls in another key's (shape-generic) variant
    out_of_range: int = 0  # bucket mode: a value below the first boundary
    compiles: int = 0
    compile_ms: float = 0.0
    failures: int = 0
    timeouts: int = 0
    evictions: int = 0
    budget_refusals: int = 0
    scd_refusals: int = 0
    tier3_builds: int = 0  # generated libraries compiled (cache hits not counted)
    tier3_ms: float = 0.0
    tier3_skipped: int = 0  # keys whose chains stayed in tier 2: no compiler, or too small
    tier3_failures: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def reset(self) -> None:
        for name, value in asdict(Counters()).items():
            setattr(self, name, value)


COUNTERS = Counters()
ENGINES: weakref.WeakSet[JitEngine] = weakref.WeakSet()


def engines() -> list[JitEngine]:
    with LOCK:
        return list(ENGINES)
