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

if TYPE_CHECKING:
    from shapevm import vm

# The JIT core (the interpreter, its scheduler, the engine) loads with the package: every
# exported or jitted function needs it, and deferring it only moved about 20 ms from the
# import into the first `export`/`jit`, where a model's build and first call pay it.
# What a program may never use loads at first use (see `shapevm._lazy`): `shapevm.vm`,
# the text parser, the binary forms, the native tier, the tools.
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
