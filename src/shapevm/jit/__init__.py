"""The JIT: a function's shape-stable regions run natively, whatever the shape.

- `regions`: the shape-stable regions of a function (`find_regions`);
- `policy`: specialization keys (``exact``, ``bucket``, ``adaptive``);
- `backend`: the native tier, the only package that touches `shapevm.native`: each region
  lowered once per program to an executor (one C call per region; a new shape is only new
  dimension values), the lowerings in one ordered tuple (`backend.LOWERINGS`);
- `engine`, `worker`: counters, the trigger (``hot_threshold`` calls and the function's
  SCD), the variant budget, the compile queue and hot-patching (`JitEngine`).

Import names from this package with ``from shapevm.jit import ...``: the attribute
``shapevm.jit`` is the `shapevm.jit` function.
"""

from typing import TYPE_CHECKING, Any

from shapevm._lazy import lazy_names
from shapevm.jit.errors import JitCompileError

if TYPE_CHECKING:
    from shapevm.jit.backend import LOWERINGS, Compiler, NativeFunction, Variant, lowering_names
    from shapevm.jit.engine import JitEngine, VariantRecord
    from shapevm.jit.options import JitOptions
    from shapevm.jit.policy import AdaptivePolicy, BucketPolicy, CachePolicy, ExactPolicy
    from shapevm.jit.regions import Region, RegionReport, find_regions
    from shapevm.jit.worker import WORKER

_BACKEND = ("LOWERINGS", "Compiler", "NativeFunction", "Variant", "lowering_names")
_POLICY = ("AdaptivePolicy", "BucketPolicy", "CachePolicy", "ExactPolicy")
_lazy_getattr, __dir__ = lazy_names(
    __name__,
    {
        **dict.fromkeys(("JitEngine", "VariantRecord"), "shapevm.jit.engine"),
        "JitOptions": "shapevm.jit.options",
        **dict.fromkeys(_POLICY, "shapevm.jit.policy"),
        **dict.fromkeys(("Region", "RegionReport", "find_regions"), "shapevm.jit.regions"),
        "WORKER": "shapevm.jit.worker",
        **dict.fromkeys(_BACKEND, "shapevm.jit.backend"),
    },
)


def __getattr__(name: str) -> Any:
    """Names imported on first use: ``import shapevm`` leaves the engine, the C library and
    the lowerings unloaded until a function is wrapped or compiled (`shapevm._lazy`)."""
    if name in _BACKEND:
        from shapevm.jit.worker import native_tier

        return getattr(native_tier(), name)
    return _lazy_getattr(name)


__all__ = [
    "LOWERINGS",
    "WORKER",
    "AdaptivePolicy",
    "BucketPolicy",
    "CachePolicy",
    "Compiler",
    "ExactPolicy",
    "JitCompileError",
    "JitEngine",
    "JitOptions",
    "NativeFunction",
    "Region",
    "RegionReport",
    "Variant",
    "VariantRecord",
    "find_regions",
    "lowering_names",
]
