"""shapevm: a virtual machine for tensor programs whose shapes change at run time."""

import os as _os
from typing import TYPE_CHECKING

from shapevm import lax, nn, numpy  # public submodules: `sv.lax` as `jax.lax`
from shapevm._lazy import lazy_names
from shapevm.bytecode.errors import BytecodeFormatError, VerifyError
from shapevm.frontend.errors import ConcreteValueError, TracingError
from shapevm.frontend.export import Exported, deserialize, export, load
from shapevm.jit.errors import JitCompileError
from shapevm.runtime.binding import InputCountError, InputDTypeError
from shapevm.runtime.interpreter import RuntimeOpError
from shapevm.shapes import (
    DimExpr,
    DimSize,
    InconclusiveDimensionOperation,
    ShapeDtypeStruct,
    ShapeError,
    SymbolicScope,
    bounds,
    is_symbolic_dim,
    max_dim,
    min_dim,
    solve_dim_vars,
    symbolic_args_specs,
    symbolic_shape,
)

# isort: split
# Last: importing the package `shapevm.jit` (above, for its errors) set the attribute
# ``shapevm.jit`` to the package; the public ``shapevm.jit`` is the function.
from shapevm.frontend.jit import Jitted, jit

# isort: split
try:
    import shapevm.jit.backend  # noqa: F401  (the native tier: see above)
except ImportError:  # a broken build of the C library: the first compile reports it
    pass

if TYPE_CHECKING:
    from shapevm import vm

# The JIT core (the interpreter, its scheduler, the engine) and the native tier (the C
# library and the lowerings) load with the package: every jitted function needs both when
# it is wrapped (it is lowered ahead), and deferring them only moved the time from the
# import into the first `jit`, where a model's build pays it (the native tier: about 10 ms
# of W1's 24 ms build, with the import 12 ms longer). What a program may never use loads at
# first use (see `shapevm._lazy`): `shapevm.vm`, the text parser, the binary forms, the
# tools.
__getattr__, __dir__ = lazy_names(__name__, {"vm": "shapevm.vm"})

__version__ = "0.1.0"

__all__ = [
    "BytecodeFormatError",
    "ConcreteValueError",
    "DimExpr",
    "DimSize",
    "Exported",
    "InconclusiveDimensionOperation",
    "InputCountError",
    "InputDTypeError",
    "JitCompileError",
    "Jitted",
    "RuntimeOpError",
    "ShapeDtypeStruct",
    "ShapeError",
    "SymbolicScope",
    "TracingError",
    "VerifyError",
    "__version__",
    "bounds",
    "deserialize",
    "export",
    "is_symbolic_dim",
    "jit",
    "lax",
    "load",
    "max_dim",
    "min_dim",
    "nn",
    "numpy",
    "solve_dim_vars",
    "symbolic_args_specs",
    "symbolic_shape",
    "vm",
]

if _os.environ.get("SHAPEVM_MONITOR"):  # the monitor page, asked for by the environment
    from shapevm.tools.monitor import start_from_env as _start_monitor

    _start_monitor()
