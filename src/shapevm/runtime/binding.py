"""Entry binding: check the arguments of a call and solve the dimension variables.

Before any work, every argument's rank and dtype are checked against the signature, the
dimension variables are solved from the shapes (and taken from explicit integer
arguments), and every dimension and constraint is checked, with the messages of
`shapevm.solve_dim_vars` (which argument and axis, the specification, the values
obtained). A call whose shapes were seen before skips the solver: the result is cached by
the tuple of shapes.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from shapevm.bytecode.program import Dim, Function
from shapevm.ops import DYNAMIC, Dynamic, SymDim
from shapevm.shapes import DimExpr, ShapeError, SymbolicScope, solve_dim_vars, symbolic_shape

_CACHE_LIMIT = 4096


class InputDTypeError(TypeError):
    """An argument has a dtype other than the signature's."""


class InputCountError(TypeError):
    """A call passes the wrong number of arguments."""


_PARSED: weakref.WeakKeyDictionary[SymbolicScope, dict[str, SymDim]] = weakref.WeakKeyDictionary()


def sym_dim(d: Dim, scope: SymbolicScope) -> SymDim:
    """A dimension of a bytecode type as the engine sees it (``DimExpr`` for text), each
    text parsed once per scope (tens of microseconds each; plans and region graphs read
    the same few dimensions hundreds of times). The cache goes with its scope."""
    if isinstance(d, (int, Dynamic)):
        return d
    if d == "dynamic":
        return DYNAMIC
    cache = _PARSED.get(scope)
    if cache is None:
        cache = _PARSED[scope] = {}
    out = cache.get(d)
    if out is None:
        (out,) = symbolic_shape(d, scope=scope)
        cache[d] = out
    return out


class Binder:
    """Checks calls of one function and solves its dimension variables."""

    def __init__(self, fn: Function, arg_names: Sequence[str] | None = None) -> None:
        self.fn = fn
        self.scope = fn.make_scope()
        self.names = list(arg_names or [f"args[{i}]" for i in range(len(fn.params))])
        self.specs: list[tuple[int | DimExpr, ...]] = []
        for p in fn.params:
            dims = tuple(sym_dim(d, self.scope) for d in p.type.shape)
            assert not any(isinstance(d, (Dynamic, str)) for d in dims)
            self.specs.append(dims)  # type: ignore[arg-type]
        self.dtypes = [p.type.dtype.numpy.newbyteorder("=") for p in fn.params]
        self.types = [str(p.type) for p in fn.params]
        self.dim_args = tuple(fn.dim_args)
        names = {v for s in self.specs for d in s if isinstance(d, DimExpr) for v in d.free_vars()}
        self.variables = tuple(sorted(names | set(self.dim_args)))
        self._cache: dict[tuple[Any, ...], dict[str, int]] = {}

    def convert(self, args: Sequence[Any]) -> list[np.ndarray[Any, Any]]:
        """The arguments as arrays of the signature's dtypes, or a clear error."""
        if len(args) != len(self.dtypes):
            raise InputCountError(
                f"@{self.fn.name} takes {len(self.dtypes)} array arguments "
                f"({', '.join(self.types) or 'none'}), found {len(args)}"
            )
        out: list[np.ndarray[Any, Any]] = []
        for i, (a, want) in enumerate(zip(args, self.dtypes, strict=True)):
            if type(a) is not np.ndarray:
                a = _as_array(a, want)
            if a.dtype != want:
                raise InputDTypeError(
                    f"{self.names[i]} has dtype {a.dtype}, but the signature of @{self.fn.name} "
                    f"says {self.types[i]}\n  fix: pass {self.names[i]}.astype(np.{want.name})"
                )
            out.append(a)
        return out

    def bind(
        self, arrays: Sequence[np.ndarray[Any, Any]], dims: Mapping[str, int] | None = None
    ) -> dict[str, int]:
        """The value of every dimension variable for arguments ``arrays`` (already converted)."""
        key = tuple(a.shape for a in arrays)
        if dims:
            key += tuple(sorted(dims.items()))
        env = self._cache.get(key)
        if env is not None:
            return env
        known: dict[str, int] = {}
        for name in self.dim_args:
            if dims is None or name not in dims:
                raise ShapeError(
                    f"@{self.fn.name} needs the value of the dimension variable '{name}' as an "
                    "integer argument"
                )
            value = dims[name]
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ShapeError(
                    f"the dimension argument '{name}' must be an integer >= 1, found {value!r}"
                )
            known[name] = int(value)
        env = solve_dim_vars(
            self.specs,
            [a.shape for a in arrays],
            self.scope,
            arg_names=self.names,
            known=known,
        )
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = env
        return env


def _as_array(a: Any, want: np.dtype[Any]) -> np.ndarray[Any, Any]:
    if isinstance(a, (bool, int, float)) and not isinstance(a, np.generic):
        # a Python scalar is weakly typed: it takes the signature's dtype if it fits
        arr = np.asarray(a)
        converted = arr.astype(want)
        if converted == arr:
            return converted
        return arr
    return np.asarray(a)
