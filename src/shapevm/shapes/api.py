"""Public functions of the symbolic shape engine (``jax.export`` vocabulary)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import numpy as np

from shapevm import _pytree
from shapevm.shapes import expr as E
from shapevm.shapes.parser import PLACEHOLDER_MANY, PLACEHOLDER_ONE, parse_dims
from shapevm.shapes.scope import SymbolicScope


def symbolic_shape(
    shape_spec: str | None,
    *,
    constraints: Sequence[str] = (),
    scope: SymbolicScope | None = None,
    like: Sequence[int | None] | None = None,
) -> tuple[E.DimSize, ...]:
    """Parse a shape specification into a tuple of ints and symbolic dimensions.

    ``_`` takes one dimension from ``like`` and ``...`` any number of them; ``None`` means
    ``"..."``. ``constraints`` creates a new scope; ``scope`` reuses one (not both).

    >>> import shapevm as sv
    >>> sv.symbolic_shape("b, 2*h, 3", constraints=["b <= 64"])
    (b, 2*h, 3)
    >>> sv.symbolic_shape("b, _, ...", like=(5, 6, 7, 8))
    (b, 6, 7, 8)
    """
    if scope is not None and constraints:
        raise ValueError(
            "symbolic_shape: pass either constraints= or scope=, not both: the constraints "
            f"{list(constraints)!r} would be ignored by the existing {scope.describe()}; "
            "create the scope with SymbolicScope(constraints) instead"
        )
    if scope is None:
        scope = SymbolicScope(constraints)
    spec = PLACEHOLDER_MANY if shape_spec is None else shape_spec
    if not isinstance(spec, str):
        raise TypeError(f"shape_spec must be a string or None, found {type(spec).__name__}")
    dims = parse_dims(spec, scope)
    if not any(isinstance(d, str) for d in dims):
        out: tuple[E.DimSize, ...] = tuple(dims)  # type: ignore[arg-type]
    else:
        out = _fill_placeholders(spec, dims, like)
    if like is not None:
        _check_like(spec, out, like)
    return out


def _check_like(spec: str, dims: Sequence[E.DimSize], like: Sequence[int | None]) -> None:
    """The rank and the constant dimensions of a specification against the actual shape."""
    if len(dims) != len(like):
        raise ValueError(
            f"shape specification {spec!r} has {len(dims)} dimensions but the actual shape "
            f"{tuple(like)} has {len(like)}; give one dimension per axis (or '...' for the rest)"
        )
    for i, (d, actual) in enumerate(zip(dims, like, strict=True)):
        if isinstance(d, int) and actual is not None and d != actual:
            raise ValueError(
                f"shape specification {spec!r} gives dimension {i} the size {d}, but the "
                f"actual shape {tuple(like)} has {actual} there; use '_' to take the actual "
                "size, or a dimension variable for a size that varies"
            )


def _fill_placeholders(
    spec: str, dims: list[E.DimSize | str], like: Sequence[int | None] | None
) -> tuple[E.DimSize, ...]:
    if like is None:
        raise ValueError(
            f"shape specification {spec!r} contains placeholders ('_' or '...') but no "
            "like= shape was given to fill them"
        )
    if dims.count(PLACEHOLDER_MANY) > 1:
        raise ValueError(f"shape specification {spec!r} may contain '...' at most once")
    fixed = len(dims) - dims.count(PLACEHOLDER_MANY)
    if fixed > len(like) or (PLACEHOLDER_MANY not in dims and fixed != len(like)):
        raise ValueError(
            f"shape specification {spec!r} has {fixed} dimensions but the actual shape "
            f"{tuple(like)} has {len(like)}"
        )
    out: list[E.DimSize] = []
    pos = 0
    for d in dims:
        if d == PLACEHOLDER_MANY:
            n = len(like) - fixed
            out.extend(_like_dim(spec, like, pos + i) for i in range(n))
            pos += n
            continue
        out.append(_like_dim(spec, like, pos) if d == PLACEHOLDER_ONE else d)  # type: ignore[arg-type]
        pos += 1
    return tuple(out)


def _like_dim(spec: str, like: Sequence[int | None], i: int) -> int:
    d = like[i]
    if d is None:
        raise ValueError(
            f"shape specification {spec!r} uses a placeholder for dimension {i}, but "
            f"like[{i}] is None; give a concrete size there or name the dimension"
        )
    return int(d)


class Dynamic:
    """The one `DYNAMIC` dimension: data-dependent, known only at run time.

    It appears in the result types of functions that select by value (``nonzero``, a
    boolean mask): ``Exported.out_avals`` shows it as ``dynamic``.
    """

    _instance: Dynamic | None = None
    __slots__ = ()

    def __new__(cls) -> Dynamic:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "dynamic"

    __str__ = __repr__

    def _as_number(self, *_: Any) -> Any:
        what, expected, found, fix = DYNAMIC_AS_NUMBER
        raise TypeError(f"{what}\n  expected: {expected}\n  found:    {found}\n  fix:      {fix}")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _as_number
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _as_number
    __int__ = __float__ = __index__ = _as_number


DYNAMIC: Final = Dynamic()

DYNAMIC_AS_NUMBER: Final = (
    "a data-dependent size (dynamic: the length of a boolean selection x[mask] or of "
    "nonzero's result) used as a number",
    "a size the program can read: an int, or a symbolic dimension",
    "dynamic, known only from the data as the program runs",
    "count it from the mask: x[mask].shape[0] is snp.count_nonzero(mask) (an array); or "
    "keep the shape and select with where: "
    "snp.sum(snp.where(mask, x, 0)) / snp.maximum(snp.count_nonzero(mask), 1)",
)
"""The error of a `Dynamic` size used in arithmetic, or as an operand of an op: what,
expected, found, fix."""


class ShapeDtypeStruct:
    """The shape and dtype of an array: of an argument, or of a result.

    Each dimension is an ``int``, a symbolic dimension, or (results only) `DYNAMIC`, a size
    known only from the data.

    >>> import numpy as np, shapevm as sv
    >>> b, = sv.symbolic_shape("b")
    >>> sv.ShapeDtypeStruct((b, 256), np.float32)
    ShapeDtypeStruct(shape=(b, 256), dtype=float32)
    """

    __slots__ = ("dtype", "shape")

    def __init__(self, shape: Sequence[E.DimSize | Dynamic], dtype: Any) -> None:
        self.shape: tuple[E.DimSize | Dynamic, ...] = tuple(
            d if isinstance(d, (E.DimExpr, Dynamic)) else _as_int_dim(d) for d in shape
        )
        self.dtype = np.dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def scope(self) -> SymbolicScope | None:
        return E.scope_of(*(d for d in self.shape if not isinstance(d, Dynamic)))

    def __repr__(self) -> str:
        shape = ", ".join(str(d) for d in self.shape)
        shape = f"({shape},)" if len(self.shape) == 1 else f"({shape})"
        return f"ShapeDtypeStruct(shape={shape}, dtype={self.dtype.name})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ShapeDtypeStruct):
            return NotImplemented
        return self.shape == other.shape and self.dtype == other.dtype

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype))


def _as_int_dim(d: Any) -> int:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
        raise TypeError(
            f"a shape dimension must be an int or a symbolic dimension, found {d!r} "
            f"({type(d).__name__})"
        )
    if d < 0:
        raise ValueError(f"a shape dimension must be >= 0, found {d}")
    return int(d)


def symbolic_args_specs(
    args: Any,
    shapes_specs: Any,
    constraints: Sequence[str] = (),
    scope: SymbolicScope | None = None,
) -> Any:
    """A pytree of :class:`ShapeDtypeStruct` matching ``args``, with symbolic shapes.

    ``shapes_specs`` is ``None`` (all shapes static), one specification string for every
    argument, or a pytree prefix of ``args`` whose leaves are strings or ``None``.
    Placeholders ``_``/``...`` take their sizes from the actual arguments. All
    specifications share one scope.

    >>> import numpy as np, shapevm as sv
    >>> x, y = np.ones((3, 1)), np.ones((3, 4))
    >>> sv.symbolic_args_specs((x, y), "a, ...")
    (ShapeDtypeStruct(shape=(a, 1), dtype=float64), ShapeDtypeStruct(shape=(a, 4), dtype=float64))
    """
    if scope is not None and constraints:
        raise ValueError("symbolic_args_specs: pass either constraints= or scope=, not both")
    if scope is None:
        scope = SymbolicScope(constraints)
    leaves, treedef = _pytree.flatten(args)
    specs = _pytree.broadcast_prefix(shapes_specs, args, "shapes_specs")
    out = []
    for i, (arg, spec) in enumerate(zip(leaves, specs, strict=False)):
        shape = getattr(arg, "shape", None)
        dtype = getattr(arg, "dtype", None)
        if shape is None or dtype is None:
            arr = np.asarray(arg)
            shape, dtype = arr.shape, arr.dtype
        if spec is not None and not isinstance(spec, str):
            raise TypeError(
                f"shapes_specs leaf for argument {i} must be a string or None, "
                f"found {type(spec).__name__}"
            )
        sym = symbolic_shape(spec, scope=scope, like=tuple(shape))
        out.append(ShapeDtypeStruct(sym, dtype))
    return _pytree.unflatten(treedef, out)


def max_dim(d1: E.DimSize, d2: E.DimSize) -> E.DimSize:
    """``max`` for dimensions: decided now when provable, else kept symbolic.

    >>> import shapevm as sv
    >>> a, b = sv.symbolic_shape("a, b")
    >>> sv.max_dim(a, 0), sv.max_dim(a, b)
    (a, max(a, b))
    """
    return E.max_min("max", E._as_dim(d1), E._as_dim(d2))


def min_dim(d1: E.DimSize, d2: E.DimSize) -> E.DimSize:
    """``min`` for dimensions: decided now when provable, else kept symbolic."""
    return E.max_min("min", E._as_dim(d1), E._as_dim(d2))


def is_symbolic_dim(d: Any) -> bool:
    """True for a symbolic dimension expression, False for anything else (ints included)."""
    return isinstance(d, E.DimExpr)


def bounds(e: E.DimSize) -> tuple[int | float, int | float]:
    """Sound ``(lo, hi)`` bounds of ``e`` under its scope's constraints.

    Ints, or ``-math.inf`` / ``math.inf`` where unbounded. Every value the expression takes
    for dimension variables that satisfy the constraints lies in the interval.

    >>> import shapevm as sv
    >>> a, b = sv.symbolic_shape("a, b", constraints=["a <= 10"])
    >>> sv.bounds(a % 3), sv.bounds(2 * a - 1), sv.bounds(b - a)
    ((0, 2), (1, 19), (-9, inf))
    """
    if isinstance(e, E.DimExpr):
        return e.scope.bounds(e)
    v = int(e)
    return v, v


__all__ = [
    "DYNAMIC",
    "Dynamic",
    "ShapeDtypeStruct",
    "bounds",
    "is_symbolic_dim",
    "max_dim",
    "min_dim",
    "symbolic_args_specs",
    "symbolic_shape",
]
