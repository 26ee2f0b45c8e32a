"""The tile interpreter: fused elementwise chains and trailing reductions without compiling.

A program is a short list of ops over registers, run on tiles of 256 elements of the
broadcast iteration space with one vectorized loop per op (numexpr's idea). Its opcodes are
the op table's names (`OPS`, the fusible ops of `shapevm.ops`); `Program` builds one, and
`run` applies it to NumPy arrays of any strides with NumPy's broadcasting (up to 16 inputs
of up to 8 dims). Values are float32 or bool; inputs may also be int32 or int64 (token ids,
masks), read only by what stays exact in float32 lanes: a cast to f32 or bool, or a
comparison with a constant below 2**24 in magnitude. Other dtypes and uses are refused
(`NativeKernelError`) so that a caller can fall back. The C form (``svtile.h``:
``sv_tile_prog``, ``sv_tile_plan``, ``sv_tile_run``) is what the region executor embeds.

>>> import numpy as np
>>> from shapevm.native import tile
>>> p = tile.Program()
>>> x, b = p.input(), p.input()
>>> h = p.op("add", x, b)
>>> gelu_ish = p.op("mul", h, p.op("sigmoid", p.op("mul", h, p.const(1.702))))
>>> prog = p.build(gelu_ish)
>>> tile.run(prog, np.float32([[0.0, 1.0], [2.0, -3.0]]), np.float32([0.5, 0.0])).round(3)
array([[ 0.35 ,  0.846],
       [ 2.465, -0.018]], dtype=float32)
>>> total = p.build(p.op("greater", x, b), reduce="max", axes=1)  # any(x > b) per row
>>> tile.run(total, np.float32([[0.0, 1.0], [-2.0, -3.0]]), np.float32([0.5, 0.0]))
array([ True, False])
>>> p.op("exp2", x)
Traceback (most recent call last):
...
shapevm.native.NativeKernelError: tile: unknown op 'exp2'
  expected: one of the op table's fusible ops: neg, abs, exp, log, sqrt, tanh, ...
  found:    exp2
  fix:      write it out with the ops above (did you mean 'exp'?)
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from shapevm import _native
from shapevm._native import TileProgram

Array = np.ndarray[Any, Any]
NativeKernelError = _native.NativeKernelError

_OPS, _REDS, _DTYPES = _native.tile_ops()
OPS: Final[tuple[str, ...]] = tuple(name for name, _ in _OPS)
"""Opcodes in order: the op table's names of the ops the interpreter implements."""
ARITY: Final[dict[str, int]] = dict(_OPS)
REDUCTIONS: Final[tuple[str, ...]] = tuple(_REDS)
"""Trailing reductions: ``none`` and the op table's reduction names."""
DTYPES: Final[tuple[str, ...]] = tuple(_DTYPES)
"""Dtypes of registers: ``f32`` and ``bool``; inputs also ``i32`` and ``i64``."""
MAX_INPUTS: Final = 16
MAX_REGISTERS: Final = 64


def unsupported_fusible_ops() -> tuple[str, ...]:
    """Ops the op table marks fusible that the interpreter does not implement (none: a
    test keeps it so)."""
    from shapevm.ops.core import OpFlag, all_ops

    return tuple(
        info.name
        for info in all_ops()
        if OpFlag.FUSIBLE in info.flags and info.name not in OPS and info.name not in REDUCTIONS
    )


def _error(what: str, expected: str, found: str, fix: str) -> NativeKernelError:
    return NativeKernelError(
        f"tile: {what}\n  expected: {expected}\n  found:    {found}\n  fix:      {fix}"
    )


@dataclass(frozen=True, slots=True)
class Value:
    """A value of a `Program` under construction: an input, a constant or an op's result."""

    program: Program
    index: int


@dataclass(frozen=True, slots=True)
class _Node:
    kind: str  # "input", "const" or an opcode name
    args: tuple[int, ...] = ()
    value: float = 0.0
    dtype: str = "f32"  # inputs and constants: their dtype; cast: the target


class Program:
    """Builds a tile program: `input`, `const` and `op` make values, `build` checks the
    program in C and returns the `TileProgram` that `run` takes.

    Registers are assigned at `build`: inputs first, then constants, then results, a
    register reused once its value is dead; ops the result does not need are dropped.
    """

    def __init__(self) -> None:
        self._nodes: list[_Node] = []
        self._inputs: list[int] = []

    def input(self, dtype: str = "f32") -> Value:
        """The next input array (``f32``, ``bool``, ``i32`` or ``i64``), in the order `run`
        takes them."""
        self._check_dtype(dtype)
        self._inputs.append(len(self._nodes))
        return self._add(_Node("input", dtype=dtype))

    def const(self, value: float, dtype: str = "f32") -> Value:
        """A scalar constant, broadcast to every element."""
        self._check_dtype(dtype)
        return self._add(_Node("const", value=float(value), dtype=dtype))

    def op(self, name: str, *args: Value, dtype: str = "f32") -> Value:
        """``name(*args)`` for an op of `OPS`; ``dtype`` is the target of ``cast``."""
        if name not in ARITY:
            close = difflib.get_close_matches(name, OPS, 1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            listed = ", ".join(OPS[:6])
            raise _error(
                f"unknown op {name!r}",
                f"one of the op table's fusible ops: {listed}, ...",
                name,
                f"write it out with the ops above{hint}",
            )
        if len(args) != ARITY[name]:
            raise _error(
                f"{name} takes {ARITY[name]} operands",
                f"{ARITY[name]} values of this program",
                f"{len(args)} operands",
                "pass one value per operand",
            )
        for a in args:
            if not isinstance(a, Value) or a.program is not self:
                raise _error(
                    f"an operand of {name} is not a value of this program",
                    "values made by this Program's input, const or op",
                    type(a).__name__,
                    "build every operand with the same Program",
                )
        self._check_dtype(dtype)
        return self._add(_Node(name, tuple(a.index for a in args), dtype=dtype))

    def build(
        self, result: Value, *, reduce: str = "none", axes: int = 0, keepdims: bool = False
    ) -> TileProgram:
        """The checked program computing ``result``, then reducing it over its last
        ``axes`` axes with ``reduce`` (one of `REDUCTIONS`)."""
        if reduce not in REDUCTIONS:
            raise _error(
                "unknown reduction", ", ".join(REDUCTIONS), repr(reduce), "use a listed name"
            )
        if not isinstance(result, Value) or result.program is not self:
            raise _error(
                "the result is not a value of this program",
                "a value made by this Program",
                type(result).__name__,
                "pass a value of this Program",
            )
        order = self._needed(result.index)
        consts = [i for i in order if self._nodes[i].kind == "const"]
        reg = {node: r for r, node in enumerate(self._inputs + consts)}
        code, n_regs = self._allocate(order, reg, len(reg), result.index)
        return TileProgram(
            [DTYPES.index(self._nodes[i].dtype) for i in self._inputs],
            [self._nodes[i].value for i in consts],
            [DTYPES.index(self._nodes[i].dtype) for i in consts],
            code,
            reg[result.index],
            n_regs,
            REDUCTIONS.index(reduce),
            axes if reduce != "none" else 0,
            keepdims and reduce != "none",
        )

    def _add(self, node: _Node) -> Value:
        self._nodes.append(node)
        return Value(self, len(self._nodes) - 1)

    @staticmethod
    def _check_dtype(dtype: str) -> None:
        if dtype not in DTYPES:
            raise _error(
                "unsupported dtype",
                "f32 or bool (inputs: also i32 or i64)",
                repr(dtype),
                "run programs over other dtypes with NumPy",
            )

    def _needed(self, root: int) -> list[int]:
        """Nodes the root depends on, in creation order (a topological order)."""
        need = {root}
        for i in range(root, -1, -1):
            if i in need:
                need.update(self._nodes[i].args)
        return sorted(need)

    def _allocate(
        self, order: list[int], reg: dict[int, int], first: int, root: int
    ) -> tuple[list[tuple[int, int, int, int, int, int]], int]:
        """Instructions with registers reused after their value's last use, and the count
        of registers."""
        last = {a: i for i in order for a in self._nodes[i].args}
        free: list[int] = []
        top = first
        code = []
        for i in order:
            node = self._nodes[i]
            if node.kind in ("input", "const"):
                continue
            operands = [reg[a] for a in node.args]
            for a in set(node.args):
                if last[a] == i and a != root and a not in self._inputs and reg[a] >= first:
                    free.append(reg[a])
            if free:
                reg[i] = free.pop()
            else:
                reg[i], top = top, top + 1
            attr = DTYPES.index(node.dtype) if node.kind == "cast" else 0
            ops = [*operands, 0, 0, 0][:3]
            code.append((OPS.index(node.kind), reg[i], ops[0], ops[1], ops[2], attr))
        return code, max(top, 1)


def run(program: TileProgram, *inputs: Array, out: Array | None = None, threads: int = 0) -> Array:
    """Apply ``program`` to the arrays (NumPy broadcasting, any strides); the result is a
    new array of the broadcast shape (less the reduced axes) unless ``out`` is given."""
    return _native.tile_run(program, inputs, out, threads)


__all__ = [
    "ARITY",
    "DTYPES",
    "OPS",
    "REDUCTIONS",
    "Program",
    "TileProgram",
    "Value",
    "run",
    "unsupported_fusible_ops",
]
