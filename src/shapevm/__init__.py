"""shapevm: a virtual machine for tensor programs whose shapes change at run time."""

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
    "DimExpr",
    "DimSize",
    "InconclusiveDimensionOperation",
    "ShapeDtypeStruct",
    "ShapeError",
    "SymbolicScope",
    "__version__",
    "bounds",
    "is_symbolic_dim",
    "max_dim",
    "min_dim",
    "solve_dim_vars",
    "symbolic_args_specs",
    "symbolic_shape",
]

# Bytecode (shapevm.bytecode): the errors of loading and of verifying programs.
from shapevm.bytecode.errors import BytecodeFormatError, VerifyError

__all__ += ["BytecodeFormatError", "VerifyError"]
