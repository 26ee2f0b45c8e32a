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

from shapevm.jit.engine import JitEngine, VariantRecord
from shapevm.jit.errors import JitCompileError
from shapevm.jit.options import JitOptions
from shapevm.jit.policy import AdaptivePolicy, BucketPolicy, CachePolicy, ExactPolicy
from shapevm.jit.regions import Region, RegionReport, find_regions
from shapevm.jit.worker import WORKER

if TYPE_CHECKING:
    from shapevm.jit.backend import LOWERINGS, Compiler, NativeFunction, Variant, lowering_names

_BACKEND = ("LOWERINGS", "Compiler", "NativeFunction", "Variant", "lowering_names")


def __getattr__(name: str) -> Any:
    """The native tier's names, imported on first use: ``import shapevm`` leaves the C
    library and the lowerings unloaded until a function is compiled."""
    if name in _BACKEND:
        from shapevm.jit.worker import native_tier

        return getattr(native_tier(), name)
    raise AttributeError(f"module 'shapevm.jit' has no attribute {name!r}")


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
