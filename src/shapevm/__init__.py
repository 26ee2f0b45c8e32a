"""shapevm: a virtual machine for tensor programs whose shapes change at run time."""

import os as _os

from shapevm import lax, nn, numpy, vm  # public submodules: `sv.lax` as `jax.lax`
from shapevm.bytecode.errors import BytecodeFormatError, VerifyError
from shapevm.frontend.errors import ConcreteValueError, TracingError
from shapevm.frontend.export import Exported, deserialize, export, load
from shapevm.frontend.jit import Jitted, jit  # after shapevm.jit (the package) is loaded
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
