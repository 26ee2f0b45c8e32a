"""Symbolic dimensions: expressions, parser, scopes and constraints, bounds, solver."""

from shapevm.shapes.api import (
    DYNAMIC,
    Dynamic,
    ShapeDtypeStruct,
    bounds,
    is_symbolic_dim,
    max_dim,
    min_dim,
    symbolic_args_specs,
    symbolic_shape,
)
from shapevm.shapes.errors import (
    InconclusiveDimensionOperation,
    ScopeMixError,
    ShapeError,
    UnsatisfiableConstraintsError,
)
from shapevm.shapes.expr import DimExpr, DimSize
from shapevm.shapes.parser import SpecSyntaxError
from shapevm.shapes.scope import SymbolicScope
from shapevm.shapes.solve import solve_dim_vars

__all__ = [
    "DYNAMIC",
    "DimExpr",
    "DimSize",
    "Dynamic",
    "InconclusiveDimensionOperation",
    "ScopeMixError",
    "ShapeDtypeStruct",
    "ShapeError",
    "SpecSyntaxError",
    "SymbolicScope",
    "UnsatisfiableConstraintsError",
    "bounds",
    "is_symbolic_dim",
    "max_dim",
    "min_dim",
    "solve_dim_vars",
    "symbolic_args_specs",
    "symbolic_shape",
]
