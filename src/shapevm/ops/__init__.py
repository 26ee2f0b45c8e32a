"""The op table: what each op means, for the tracer, verifier, interpreter and JIT alike.

>>> from shapevm.ops import get_op
>>> info = get_op("matmul")
>>> info.min_arity, info.doc
(2, 'matrix product with batch broadcasting (np.matmul)')
"""

from shapevm.ops import table as _table  # noqa: F401  (registers the rows)
from shapevm.ops import table_index as _table_index  # noqa: F401
from shapevm.ops import table_layout as _table_layout  # noqa: F401
from shapevm.ops import table_math as _table_math  # noqa: F401
from shapevm.ops import table_nn as _table_nn  # noqa: F401
from shapevm.ops import table_window as _table_window  # noqa: F401
from shapevm.ops.core import (
    REQUIRED,
    AttrKind,
    AttrSpec,
    AttrValue,
    Condition,
    OpFlag,
    OpInfo,
    RuleAttr,
    ShapeResult,
    ShapeRuleError,
    SymDim,
    SymShape,
    all_ops,
    format_attr,
    format_float,
    get_op,
    register,
    suggest_op,
)
from shapevm.ops.dtypes import DType
from shapevm.shapes import DYNAMIC, Dynamic

__all__ = [
    "DYNAMIC",
    "REQUIRED",
    "AttrKind",
    "AttrSpec",
    "AttrValue",
    "Condition",
    "DType",
    "Dynamic",
    "OpFlag",
    "OpInfo",
    "RuleAttr",
    "ShapeResult",
    "ShapeRuleError",
    "SymDim",
    "SymShape",
    "all_ops",
    "format_attr",
    "format_float",
    "get_op",
    "register",
    "suggest_op",
]
