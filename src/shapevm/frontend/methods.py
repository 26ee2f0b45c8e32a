"""NumPy-like methods, operators and indexing of `Tracer` (installed on import).

Indexing supports ints, slices (bounds may be symbolic), ``None``, ``...`` and a boolean
mask array (whose result has a data-dependent first dimension). Slice bounds are
normalized as NumPy does (negative from the end, clamped to the axis); with a symbolic
axis size the comparisons that clamping needs must be decidable under the scope's
constraints, else `InconclusiveDimensionOperation` (as in JAX: ``x[0:16]`` on an axis
``b`` needs the constraint ``b >= 16``, or the dimension ``b + 15``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from shapevm.bytecode.errors import format_message
from shapevm.frontend import numpy_api as snp
from shapevm.frontend.errors import ConcreteValueError
from shapevm.frontend.tracer import Tracer, bind_op, user_error, user_location
from shapevm.ops import DType, Dynamic
from shapevm.shapes import InconclusiveDimensionOperation


def _norm_slice(s: slice, d: Any) -> tuple[Any, Any, int]:
    step = 1 if s.step is None else int(s.step)
    if step == 0:
        raise user_error(
            "a slice step cannot be 0",
            expected="a nonzero step",
            found=f"{s}",
            fix="use ::1 (every element) or ::-1 (reversed)",
        )
    if step < 0:
        raise user_error(
            "slices with a step <= 0 and bounds are not supported on traced arrays",
            expected="a positive step, or a negative one over the whole axis (x[::-1])",
            found=f"step={step} with start={s.start!r}, stop={s.stop!r}",
            fix="slice first, then reverse the whole axis: x[a:b][::-1] (or snp.flip)",
        )
    start: Any = 0 if s.start is None else s.start
    stop: Any = d if s.stop is None else s.stop
    if isinstance(start, int) and start < 0:
        start = d + start
        if isinstance(start, int) and start < 0:
            start = 0
    if isinstance(stop, int) and stop < 0:
        stop = d + stop
        if isinstance(stop, int) and stop < 0:
            stop = 0
    if not isinstance(d, Dynamic):
        if not _same(stop, d) and _past_the_end(stop, d, "stop"):
            stop = d
        if not _same(start, d) and _past_the_end(start, d, "start"):
            start = d
    if not _same(stop, start) and not isinstance(stop, Dynamic) and stop < start:
        stop = start
    return start, stop, step


def _past_the_end(bound: Any, d: Any, which: str) -> bool:
    """Whether a slice bound lies past the end of an axis of size ``d`` (NumPy clamps it)."""
    try:
        return bool(bound > d)
    except InconclusiveDimensionOperation as exc:
        loc = user_location()
        need = f"{d} >= {bound}"
        raise InconclusiveDimensionOperation(
            format_message(
                f"Slicing an axis of size {d} with {which} {bound}: whether the slice stays "
                "within the axis is inconclusive",
                expected=f"'{need}' for every allowed shape, or a {which} that cannot pass the end",
                found=f"no constraint decides it ({d} may be smaller than {bound})",
                fix=f"add the constraint constraints=['{need}'], or slice to "
                f"shapevm.min_dim({bound}, {d})" + (f"; traced at {loc}" if loc else ""),
            )
        ) from exc


def _same(a: Any, b: Any) -> bool:
    """Structural equality of two dimensions (never decides anything)."""
    return bool(a is b or (not isinstance(a, Dynamic) and not isinstance(b, Dynamic) and a == b))


def _full_range(a: Any, b: Any, c: int, d: Any) -> bool:
    return _same(a, 0) and _same(b, d) and c == 1


def _norm_index(i: int, d: Any, axis: int) -> Any:
    j: Any = i + d if i < 0 else i
    ok = j >= 0 and j < d if not isinstance(d, Dynamic) else True
    if not ok:
        raise IndexError(f"index {i} is out of bounds for axis {axis} with size {d}")
    return j


def getitem(x: Tracer, idx: Any) -> Any:
    if not isinstance(idx, tuple):
        idx = (idx,)
    if len(idx) == 1 and _is_mask(idx[0]):
        return _mask(x, np.asarray(idx[0]) if isinstance(idx[0], list) else idx[0])
    n_axes = len([i for i in idx if i is not None and i is not Ellipsis])
    if n_axes > x.ndim:
        raise IndexError(
            f"too many indices for array: array is {x.ndim}-dimensional, but {n_axes} were indexed"
        )
    ellipsis = [k for k, i in enumerate(idx) if i is Ellipsis]  # `in` would compare arrays
    if ellipsis:
        at = ellipsis[0]
        idx = idx[:at] + (slice(None),) * (x.ndim - n_axes) + idx[at + 1 :]
    else:
        idx = idx + (slice(None),) * (x.ndim - n_axes)
    arrays = [k for k, item in enumerate(idx) if isinstance(item, (Tracer, np.ndarray, list))]
    if arrays:
        return _take(x, idx, arrays)
    x, idx = _reversed_axes(x, idx)
    starts: list[Any] = []
    stops: list[Any] = []
    steps: list[int] = []
    final: list[Any] = []
    axis = 0
    for item in idx:
        if item is None:
            final.append(1)
            continue
        d = x.shape[axis]
        if isinstance(item, slice):
            a, b, c = _norm_slice(item, d)
            starts.append(a)
            stops.append(b)
            steps.append(c)
            final.append(d if _full_range(a, b, c, d) else (b - a + c - 1) // c)
        else:
            j = _norm_index(int(item), d, axis)
            starts.append(j)
            stops.append(j + 1)
            steps.append(1)
        axis += 1
    out: Any = x
    if not all(map(_full_range, starts, stops, steps, x.shape)):
        attrs = {"start": tuple(starts), "stop": tuple(stops), "step": tuple(steps)}
        out = bind_op("slice", [x], attrs)
    if tuple(final) != tuple(out.shape):
        out = snp.reshape(out, tuple(final))
    return out


def _reversed_axes(x: Tracer, idx: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
    """``x[::-k]`` over a whole axis is ``flip(x)[::k]``: the flips first, then slices
    with positive steps (a negative step with bounds stays refused by `_norm_slice`)."""
    axes: list[int] = []
    out: list[Any] = []
    axis = 0
    for item in idx:
        if (
            isinstance(item, slice)
            and item.step is not None
            and int(item.step) < 0
            and item.start is None
            and item.stop is None
        ):
            axes.append(axis)
            item = slice(None, None, -int(item.step))
        out.append(item)
        axis += item is not None
    return (snp.flip(x, axes) if axes else x), tuple(out)


def _take(x: Tracer, idx: tuple[Any, ...], arrays: list[int]) -> Any:
    """``x[:, ..., i]``: one integer array ``i`` and whole axes elsewhere is `snp.take`
    along its axis (an embedding lookup ``table[ids]``)."""
    whole = all(
        isinstance(item, slice) and item == slice(None)
        for k, item in enumerate(idx)
        if k not in arrays
    )
    adjacent = arrays == list(range(arrays[0], arrays[-1] + 1))
    if len(arrays) > 1 and whole and adjacent and not any(_is_mask(idx[k]) for k in arrays):
        return _take_adjacent(x, [idx[k] for k in arrays], arrays[0])
    if len(arrays) != 1 or not whole:
        raise user_error(
            "this integer-array index is not supported",
            expected="integer arrays on adjacent axes with whole axes (:) around them, e.g. "
            "table[ids], x[:, ids] or lp[rows, labels]; ints, slices, None, ... or one "
            "boolean mask otherwise",
            found=f"{len(arrays)} array index(es) among {len(idx)} items",
            fix="index one axis per step (x[ids][:, 2:]), or use snp.take, snp.where, "
            "sort/argsort or top_k",
        )
    (axis,) = arrays
    index = idx[axis]
    if _is_mask(index):
        raise user_error(
            "a boolean mask is supported only as the only index",
            expected="x[mask] with mask of x's shape; or integer indices on one axis",
            found=f"a boolean index on axis {axis} among {len(idx)} items",
            fix="select the rows with x[mask] (a mask of x's whole shape), or turn the mask "
            "into indices first",
        )
    return snp.take(x, index, axis=axis)


def _take_adjacent(x: Tracer, indices: list[Any], first: int) -> Any:
    """``x[i, j]`` (``lp[arange(n), labels]``, a loss's picked log-probabilities): integer
    arrays on adjacent axes, broadcast together, as NumPy's advanced index: one `take`
    along those axes merged into one, at the flat index ``i * d_j + j``; the result has
    the indices' broadcast shape in their place. An index out of its own axis makes the
    flat one out of range too, so the call fails as NumPy's does (naming the flat index)."""
    dims = [x.shape[first + k] for k in range(len(indices))]
    flat: Any = 0
    bad: Any = False
    for index, d in zip(indices, dims, strict=True):
        i = snp.asarray(index)
        if not np.issubdtype(np.dtype(i.dtype), np.integer):
            raise user_error(
                "an array index that is not integer",
                expected="integer arrays (or Python ints) on the indexed axes",
                found=f"an index of dtype {np.dtype(i.dtype)}",
                fix="convert it with .astype(snp.int64), or index with one boolean mask",
            )
        i = snp.astype(i, np.int64)
        shifted = i + d  # (i < -d as i + d < 0: a size as a value is never negative)
        bad = snp.logical_or(bad, snp.logical_or(shifted < 0, i >= d))
        flat = flat * d + snp.where(i < 0, shifted, i)
    total = 1
    for d in dims:
        total = total * d
    flat = snp.where(bad, total, flat)
    merged = snp.reshape(x, (*x.shape[:first], total, *x.shape[first + len(dims) :]))
    return snp.take(merged, flat, axis=first)


def _is_mask(item: Any) -> bool:
    """A boolean index: a traced or NumPy array of bools, or a list of them."""
    if isinstance(item, Tracer):
        return item.dt is DType.BOOL
    if isinstance(item, list):
        return bool(item) and all(isinstance(v, (bool, np.bool_)) for v in item)
    return isinstance(item, np.ndarray) and item.dtype == np.bool_


def _mask(x: Tracer, mask: Any) -> Any:
    return bind_op("mask_select", [x, mask])


_CONCRETE_FIX = (
    "use shapevm.numpy.where for data-dependent choices, shapevm.lax.cond for "
    "data-dependent branches, or mark the argument static (static_argnums)"
)


def _concrete_error(x: Tracer, what: str, fix: str = _CONCRETE_FIX) -> ConcreteValueError:
    return ConcreteValueError(
        f"{what} of a traced array {x!r}: its value is only known when the program runs.\n"
        f"  fix: {fix}"
    )


def _bool(self: Tracer) -> bool:
    raise _concrete_error(self, "the truth value (if/while/and/or)")


def _int(self: Tracer) -> int:
    raise _concrete_error(self, "int()")


def _float(self: Tracer) -> float:
    raise _concrete_error(self, "float()")


def _array(self: Tracer, dtype: Any = None, copy: Any = None) -> Any:
    # NumPy converts what it cannot dispatch: most often a NumPy array indexed by a traced
    # one (an embedding table `table[ids]`, positions `table[arange(s)]`)
    raise _concrete_error(
        self,
        "conversion to a NumPy array (np.asarray)",
        "NumPy asked for its values: a NumPy array indexed by a traced array (table[ids]) "
        "or a NumPy function that does not dispatch. Make the NumPy array traced first "
        "(shapevm.numpy.asarray(table)[ids], shapevm.numpy.take(table, ids, axis=0)) or use "
        "the shapevm.numpy function",
    )


def _iter(self: Tracer) -> Iterator[Any]:
    n = len(self)
    return (getitem(self, i) for i in range(n))


_UFUNCS: dict[str, Callable[..., Any]] = {
    "add": snp.add,
    "subtract": snp.subtract,
    "multiply": snp.multiply,
    "true_divide": snp.divide,
    "divide": snp.divide,
    "floor_divide": snp.floor_divide,
    "remainder": snp.mod,
    "power": snp.power,
    "maximum": snp.maximum,
    "minimum": snp.minimum,
    "negative": snp.negative,
    "absolute": snp.absolute,
    "exp": snp.exp,
    "log": snp.log,
    "sqrt": snp.sqrt,
    "tanh": snp.tanh,
    "sin": snp.sin,
    "cos": snp.cos,
    "less": snp.less,
    "less_equal": snp.less_equal,
    "greater": snp.greater,
    "greater_equal": snp.greater_equal,
    "equal": snp.equal,
    "not_equal": snp.not_equal,
    "logical_and": snp.logical_and,
    "logical_or": snp.logical_or,
    "logical_not": snp.logical_not,
    "matmul": snp.matmul,
}


def _array_ufunc(self: Tracer, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    fn = _UFUNCS.get(ufunc.__name__)
    if method != "__call__" or fn is None or kwargs:
        raise user_error(
            f"NumPy's {ufunc.__name__}.{method} cannot run on a traced array",
            expected="a shapevm.numpy function",
            found=f"np.{ufunc.__name__} applied to {self!r}",
            fix=f"use shapevm.numpy.{ufunc.__name__} (import shapevm.numpy as snp)",
        )
    return fn(*inputs)


def _swap(fn: Any) -> Any:
    return lambda self, other: fn(other, self)


def _reshape(self: Tracer, *shape: Any, order: str = "C") -> Any:
    target = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    return snp.reshape(self, tuple(target), order)


def _transpose(self: Tracer, *axes: Any) -> Any:
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    return snp.transpose(self, axes or None)


def _matrix_transpose(self: Tracer) -> Any:
    """``x.mT`` (NumPy 2): the last two axes swapped."""
    if self.ndim < 2:
        raise ValueError(
            format_message(
                f"matrix transpose of an array of {self.ndim} dimensions",
                expected="at least 2 dimensions",
                found=f"shape {tuple(self.shape)}",
                fix="x[:, None] or x[None] makes a vector a matrix",
            )
        )
    return snp.swapaxes(self, -1, -2)


def _divmod(self: Any, other: Any) -> tuple[Any, Any]:
    return snp.floor_divide(self, other), snp.mod(self, other)


_METHODS: dict[str, Any] = {
    "__divmod__": _divmod,
    "__rdivmod__": _swap(_divmod),
    "__add__": snp.add,
    "__radd__": _swap(snp.add),
    "__sub__": snp.subtract,
    "__rsub__": _swap(snp.subtract),
    "__mul__": snp.multiply,
    "__rmul__": _swap(snp.multiply),
    "__truediv__": snp.divide,
    "__rtruediv__": _swap(snp.divide),
    "__floordiv__": snp.floor_divide,
    "__rfloordiv__": _swap(snp.floor_divide),
    "__mod__": snp.mod,
    "__rmod__": _swap(snp.mod),
    "__pow__": snp.power,
    "__rpow__": _swap(snp.power),
    "__matmul__": snp.matmul,
    "__rmatmul__": _swap(snp.matmul),
    "__neg__": snp.negative,
    "__pos__": lambda self: self,
    "__abs__": snp.absolute,
    "__lt__": snp.less,
    "__le__": snp.less_equal,
    "__gt__": snp.greater,
    "__ge__": snp.greater_equal,
    "__eq__": snp.equal,
    "__ne__": snp.not_equal,
    "__and__": snp.logical_and,
    "__rand__": _swap(snp.logical_and),
    "__or__": snp.logical_or,
    "__ror__": _swap(snp.logical_or),
    "__xor__": snp.logical_xor,
    "__rxor__": _swap(snp.logical_xor),
    "__invert__": snp.logical_not,
    "__getitem__": getitem,
    "__bool__": _bool,
    "__int__": _int,
    "__index__": _int,
    "__float__": _float,
    "__array__": _array,
    "__iter__": _iter,
    "__array_ufunc__": _array_ufunc,
    "__hash__": object.__hash__,
    "reshape": _reshape,
    "transpose": _transpose,
    "astype": snp.astype,
    "sum": snp.sum,
    "mean": snp.mean,
    "max": snp.max,
    "min": snp.min,
    "prod": snp.prod,
    "var": snp.var,
    "std": snp.std,
    "any": snp.any,
    "all": snp.all,
    "cumsum": snp.cumsum,
    "round": snp.round,
    "repeat": snp.repeat,
    "argmax": snp.argmax,
    "argmin": snp.argmin,
    "swapaxes": snp.swapaxes,
    "squeeze": snp.squeeze,
    "ravel": snp.ravel,
    "flatten": snp.ravel,
    "clip": snp.clip,
}
for _name, _fn in _METHODS.items():
    setattr(Tracer, _name, _fn)
Tracer.T = property(lambda self: snp.transpose(self))  # type: ignore[attr-defined]
Tracer.mT = property(_matrix_transpose)  # type: ignore[attr-defined]
