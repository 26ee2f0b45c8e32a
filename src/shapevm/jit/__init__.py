"""The JIT: hot specializations of a function compiled in the background, hot-patched in.

- `regions`: the shape-stable regions of a function (`find_regions`);
- `policy`: specialization keys (``exact``, ``bucket``, ``adaptive``);
- `compiler`, `lowering`, `memplan`, `fusion`: a `Variant` per key, built by pluggable
  lowerings (`register_lowering`) over a static memory plan; elementwise chains become
  numba kernels cached on disk;
- `engine`, `worker`: counters, the trigger (``hot_threshold`` calls and the function's
  SCD), the variant budget, the compile queue and hot-patching (`JitEngine`).

`native` holds hand-written numba kernels (packed dense layers, row kernels, convolution);
`native_available` says whether numba can be imported in this process.

Import names from this package with ``from shapevm.jit import ...``: the attribute
``shapevm.jit`` is the `shapevm.jit` function.
"""

import importlib.util

# Registers the native patterns (dense, layer_norm...), then elementwise_chain after them.
from shapevm.jit import native_lowering as _native_lowering  # noqa: F401
from shapevm.jit.compiler import CompiledRegion, Compiler, Variant
from shapevm.jit.engine import JitEngine, VariantRecord
from shapevm.jit.errors import JitCompileError
from shapevm.jit.lowering import (
    CompileContext,
    Group,
    Lowered,
    lower_op,
    register_lowering,
    registered_lowerings,
    unregister_lowering,
)
from shapevm.jit.options import JitOptions
from shapevm.jit.policy import AdaptivePolicy, BucketPolicy, CachePolicy, ExactPolicy
from shapevm.jit.regions import Region, RegionReport, find_regions
from shapevm.jit.worker import WORKER


def native_available() -> bool:
    """Whether numba is installed, so that `shapevm.jit.native` can be imported."""
    return importlib.util.find_spec("numba") is not None


__all__ = [
    "WORKER",
    "AdaptivePolicy",
    "BucketPolicy",
    "CachePolicy",
    "CompileContext",
    "CompiledRegion",
    "Compiler",
    "ExactPolicy",
    "Group",
    "JitCompileError",
    "JitEngine",
    "JitOptions",
    "Lowered",
    "Region",
    "RegionReport",
    "Variant",
    "VariantRecord",
    "find_regions",
    "lower_op",
    "native_available",
    "register_lowering",
    "registered_lowerings",
    "unregister_lowering",
]
