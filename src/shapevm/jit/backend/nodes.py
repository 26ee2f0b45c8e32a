"""The lowered form of a region, between the bytecode and the executor's arrays.

A `Lowered` region is a list of `Tensor` s (inputs, constants, buffers, outputs, views)
and a list of `Kernel` s over them, in program order. Every dimension is an ``int`` or a
`DimExpr` of the function's dimension variables: nothing here depends on a shape, so one
`Lowered` serves every call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

Dim = "int | DimExpr"
Shape = tuple[Any, ...]

# executor enums (exec.h)
S_INPUT, S_CONST, S_BUFFER, S_OUTPUT, S_VIEW = 1, 2, 3, 4, 5
V_TRANSPOSE, V_SLICE, V_RESHAPE, V_BROADCAST, V_SELECT = 1, 2, 3, 4, 5
OP_DENSE, OP_MATMUL, OP_COPY, OP_FILL, OP_EXTERNAL, OP_IOTA = 1, 2, 3, 4, 5, 6
MAXDIM, MAXIN, MAXOUT, NIATTR, NFATTR = 8, 8, 4, 12, 4

DTYPE_CODES = {
    np.dtype(np.float32): 0,
    np.dtype(np.float64): 1,
    np.dtype(np.int32): 2,
    np.dtype(np.int64): 3,
    np.dtype(np.bool_): 4,
    np.dtype(np.uint8): 5,
    np.dtype(np.int8): 6,
    np.dtype(np.int16): 7,
    np.dtype(np.float16): 8,
}


@dataclass
class Tensor:
    """One slot: ``kind`` is ``input``, ``const``, ``temp`` (a buffer of the arena once
    planned), ``output`` or ``view`` (of ``base``)."""

    id: int
    kind: str
    dtype: np.dtype[Any]
    shape: Shape
    contiguous: bool = True
    value: int | None = None  # the region graph's value id, if it stands for one
    array: np.ndarray[Any, Any] | None = None  # constants
    base: int | None = None  # views
    viewop: int = 0
    params: tuple[Any, ...] = ()  # transpose: perm; slice: starts (dims)
    params2: tuple[int, ...] = ()  # slice: steps
    arg: int = -1  # inputs: position among the region's arguments
    buffer: int = -1  # temps, once planned
    out_index: int = -1  # outputs

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def nbytes_expr(self) -> Any:
        n: Any = self.dtype.itemsize
        for d in self.shape:
            n = n * d
        return n


@dataclass
class Kernel:
    """One executor instruction: ``op`` (OP_*), operand and result tensor ids, attributes,
    the static object it runs with, the bytecode positions it stands for and a label."""

    op: int
    ins: list[int]
    outs: list[int]
    iattr: list[int] = field(default_factory=list)
    fattr: list[float] = field(default_factory=list)
    obj: Any = None
    pcs: tuple[int, ...] = ()
    label: str = ""
    inplace: tuple[tuple[int, int], ...] = ()  # (out index, in index) that may share memory
    chain: Any = None  # OP_EXTERNAL chains: the `chains.Chain` (tier 3 generates from it)


@dataclass
class Lowered:
    """A region ready for the executor (before its memory plan)."""

    tensors: list[Tensor]
    kernels: list[Kernel]
    inputs: list[int]  # tensor ids of the arguments, in call order
    outputs: list[int]  # tensor ids of the results, in return order: `output` tensors,
    # or arguments and views of them (returned as the argument or NumPy's view of it)
    input_values: list[int]  # the graph's value ids of the arguments
    output_values: list[int]
    patterns: tuple[str, ...] = ()
    const_outputs: list[tuple[int, Any]] = field(default_factory=list)  # (value, array)
    output_perms: list[tuple[int, ...] | None] = field(default_factory=list)
    """Per output (or empty: none), the axes of its tensor the result's axes are: a result
    that is a transposed view of a tensor the region computes is returned as NumPy's view
    of it (the executor's ``output_perms``), not copied."""
    output_shapes: list[tuple[Any, ...] | None] = field(default_factory=list)
    """Per output (or empty: none), the shape its tensor is returned in: a result that is a
    reshape of a tensor the region computes is NumPy's reshaped view of it (the executor's
    ``output_shapes``), not copied."""

    def describe(self) -> list[str]:
        names = {t.id: f"%{t.id}" for t in self.tensors}
        lines = []
        for k in self.kernels:
            ins = ", ".join(names[i] for i in k.ins)
            outs = ", ".join(names[o] for o in k.outs)
            pcs = ", ".join(f"#{p}" for p in k.pcs)
            lines.append(f"{outs} = {k.label}({ins})  [{pcs}]")
        return lines
