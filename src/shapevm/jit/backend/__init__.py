"""The native tier of the JIT: the only package that touches `shapevm.native`.

- `dims`: the dimension heap (cells, the program that fills them, constraint checks);
- `nodes`, `lower`, `registry`: a region's op graph lowered to executor kernels, by the
  lowerings of one ordered tuple (`registry.LOWERINGS`);
- `plan`: the symbolic memory plan and the executor's arrays;
- `function`: a function's regions lowered once (`lower_function`), the executors;
- `variant`, `compiler`: a key's `Variant` over the function's shared native code;
- `tier3` (with `codegen` and `toolchain`): generated C for hot chains. It is imported by
  the first tier-3 job, in the compile worker, not with the package: the C toolchain's
  modules (subprocess, tempfile, hashlib) would add ~15 ms to the wrap of every function.
"""

from shapevm.jit.backend.compiler import Compiler
from shapevm.jit.backend.function import NativeFunction, NativeRegion, lower_function
from shapevm.jit.backend.registry import LOWERINGS, lowering_names
from shapevm.jit.backend.variant import Variant
from shapevm.jit.errors import CompileCancelled, NoNativeCode

__all__ = [
    "LOWERINGS",
    "CompileCancelled",
    "Compiler",
    "NativeFunction",
    "NativeRegion",
    "NoNativeCode",
    "Variant",
    "lower_function",
    "lowering_names",
]
