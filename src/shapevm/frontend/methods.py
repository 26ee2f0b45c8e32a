"""NumPy-like methods, operators and indexing of `Tracer` (installed on import).

Indexing supports ints, slices (bounds may be symbolic), ``None``, ``...`` and a boolean
mask array (whose result has a data-dependent first dimension). Slice bounds are
normalized as NumPy does (negative from the end, clamped to the axis); with a symbolic
axis size the comparisons that clamping needs must be decidable under the scope's
constraints, else `InconclusiveDimensionOperation` (as in JAX: ``x[0:16]`` on an axis
``b`` needs the constraint ``b >= 16``, or the dimension ``b + 15``).
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from shapevm.bytecode.errors import format_message
from shapevm.frontend import numpy_api as snp
from shapevm.frontend.errors import ConcreteValueError
from shapevm.frontend.tracer import Tracer, bind_op, fmt_shape, user_error, user_location
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


def setitem(x: Tracer, idx: Any, value: Any) -> None:
    """``x[idx] = value`` as NumPy does it, for an array the function made itself: the new
    value of ``x`` is ``where(selected, value, x)`` (``value`` cast to ``x``'s dtype, placed
    where ``idx`` selects), and every Python name bound to ``x`` sees it, as in NumPy. Taken:
    a boolean mask with a scalar value, and integers, slices and ``...`` with a value that
    broadcasts to the selection. An array NumPy would let something else see the assignment
    through (an argument of the function, a view such as a slice, reshape or transpose, an
    array a view was taken from) is refused: the trace could not update the other one."""
    shared = x.shared or ("viewed" if any(v() is not None for v in x.views) else "")
    if shared:
        what = "an array a view of which is in use" if shared == "viewed" else shared
        raise user_error(
            f"assignment into {what} in a traced function",
            expected="an array the function made itself, with no view of it still in use (a "
            "slice, reshape or transpose shares its memory in NumPy, so NumPy would change both)",
            found=f"x[...] = ... where x is {_SHARED_WHAT[shared]}",
            fix="assign into a copy: y = x.copy(); y[...] = v (before taking views of y that you "
            "keep), or compute the new array: snp.where(mask, v, x)",
        )
    if x.region != x.ctx.region:
        raise user_error(
            "assignment inside a fori_loop body or a cond branch into an array made outside it",
            expected="an array made in the body or branch, or carried into it",
            found="x[...] = ... where x comes from the enclosing code",
            fix="carry the array: pass it in init_val (fori_loop) or operands (cond), assign "
            "into a copy there (c = c.copy(); c[...] = v) and return it",
        )
    v = value if isinstance(value, Tracer) else np.asarray(value)
    if v.dtype != x.dtype:  # NumPy casts what is assigned into the array's dtype
        v = snp.astype(v, x.dtype) if isinstance(v, Tracer) else v.astype(x.dtype)
    if not isinstance(idx, tuple):
        idx = (idx,)
    if len(idx) == 1 and _is_mask(idx[0]):
        new = _assign_masked(x, idx[0], v)
    else:
        new = _assign_basic(x, idx, v)
    x.reg = new.reg
    x._const = new._const  # still known when the array and the values were


_SHARED_WHAT = {
    "an argument": "an argument (NumPy would change the caller's array)",
    "a view": "a view of another array (NumPy would change that array too)",
    "viewed": "an array a view was taken from, and the view is still held (NumPy would "
    "change the view too)",
    "a NumPy array": "a NumPy array made traced (NumPy would change that array)",
}


def _assign_masked(x: Tracer, mask: Any, v: Any) -> Any:
    if np.ndim(v) != 0:
        raise user_error(
            "assignment of an array through a boolean mask of a traced array",
            expected="a scalar value: x[mask] = 0",
            found=f"a value of shape {fmt_shape(np.shape(v))}; how many elements the mask "
            "selects is known only when the program runs",
            fix="snp.where(mask, values, x), with values of x's shape",
        )
    m = mask if isinstance(mask, Tracer) else np.asarray(mask)
    if len(m.shape) > x.ndim:
        raise IndexError(
            format_message(
                "too many indices for array: a boolean mask of higher rank than the array",
                expected=f"a mask of rank {x.ndim} or less (x's leading axes)",
                found=f"a mask of rank {len(m.shape)} for an array of rank {x.ndim}",
                fix="index with a mask of x's shape",
            )
        )
    m = snp.reshape(m, (*m.shape, *(1 for _ in range(x.ndim - len(m.shape)))))
    return snp.where(m, v, x)


def _assign_indexed(x: Tracer, idx: tuple[Any, ...], v: Any) -> Any | None:
    """``x[i0, i1] = v`` with integer arrays on the leading axes and whole slices after
    them (``margins[snp.arange(n), labels] = 0``): a scatter of the broadcast ``v`` at the
    index tuples, NumPy's assignment (the last of repeated indices wins, a negative one
    counts from the end). None: another form of index."""
    k = 0
    while k < len(idx) and isinstance(idx[k], (Tracer, np.ndarray, list)):
        k += 1
    if k == 0 or k > x.ndim or any(i is not Ellipsis and i != slice(None) for i in idx[k:]):
        return None
    arrays = [snp.asarray(i) for i in idx[:k]]
    if any(np.dtype(a.dtype).kind not in "iu" for a in arrays):
        return None
    from shapevm.frontend.numpy_more import broadcast_arrays

    arrays = broadcast_arrays(*arrays) if k > 1 else arrays
    index = snp.stack([snp.astype(a, np.int64) for a in arrays], axis=-1)
    updates = snp.broadcast_to(snp.asarray(v, x.dtype), (*arrays[0].shape, *x.shape[k:]))
    return bind_op("scatter_nd", [x, index, updates], {"reduction": "none"})


def _assign_basic(x: Tracer, idx: tuple[Any, ...], v: Any) -> Any:
    if any(isinstance(i, (Tracer, np.ndarray, list)) for i in idx):
        scattered = _assign_indexed(x, idx, v)
        if scattered is not None:
            return scattered
    if any(isinstance(i, (Tracer, np.ndarray, list)) or i is None for i in idx):
        raise user_error(
            "assignment through an integer-array index or None of a traced array",
            expected="integers, slices and ...: x[2] = v, x[:, 1:3] = v, x[..., 0] = v; or "
            "integer arrays on the leading axes: x[rows, cols] = v",
            found=f"index {idx!r}",
            fix="build the new array: snp.where(mask, v, x), with a mask made by comparing "
            "snp.arange along the axis with the indices",
        )
    n_axes = len([i for i in idx if i is not Ellipsis])
    if n_axes > x.ndim:
        raise IndexError(
            f"too many indices for array: array is {x.ndim}-dimensional, but {n_axes} were indexed"
        )
    at = next((k for k, i in enumerate(idx) if i is Ellipsis), len(idx))
    idx = idx[:at] + (slice(None),) * (x.ndim - n_axes) + idx[at + 1 :]
    mask: Any = None
    region: list[Any] = []  # the selection's shape: sliced axes only
    parts: list[tuple[int, Any, Any, int]] = []  # axis, start, stop, step of a sliced axis
    for axis, (item, d) in enumerate(zip(idx, x.shape, strict=True)):
        if isinstance(item, slice):
            a, b, c = _norm_slice(item, d)
            region.append(d if _full_range(a, b, c, d) else (b - a + c - 1) // c)
            parts.append((axis, a, b, c))
            if _full_range(a, b, c, d):
                continue
        along = tuple(d if k == axis else 1 for k in range(x.ndim))
        # positions along the axis: a constant where its size is known
        pos = (
            np.arange(d).reshape(along) if isinstance(d, int) else snp.reshape(snp.arange(d), along)
        )
        if isinstance(item, slice):
            inside = snp.logical_and(pos >= a, pos < b)
            if c != 1:
                inside = snp.logical_and(inside, (pos - a) % c == 0)
        else:
            inside = pos == _norm_index(int(item), d, axis)
        mask = inside if mask is None else snp.logical_and(mask, inside)

    # the value broadcast to the selection, then set in x's axes
    def unbroadcastable() -> ValueError:
        return ValueError(
            format_message(
                "assignment of a value that does not broadcast to the selection",
                expected=f"a value broadcastable to the selection's shape {fmt_shape(region)}",
                found=f"a value of shape {fmt_shape(np.shape(v))}",
                fix="reshape the value, or select what it fits",
            )
        )

    if np.ndim(v) > len(region):
        raise unbroadcastable()
    vs = [1] * (len(region) - np.ndim(v)) + list(np.shape(v))
    full = [1] * x.ndim
    for (axis, a, b, c), want, have in zip(parts, region, vs, strict=True):
        if _same(have, 1):
            continue
        if not _same(have, want):
            raise unbroadcastable()
        if not _full_range(a, b, c, x.shape[axis]) and c != 1:
            raise user_error(
                "assignment of an array into a strided slice of a traced array",
                expected="a scalar value, or a slice with step 1",
                found=f"a value of shape {fmt_shape(np.shape(v))} into a slice with step {c}",
                fix="assign a scalar, or build the array with snp.where",
            )
        full[axis] = have
    v = snp.reshape(v, tuple(full)) if np.ndim(v) else v
    for axis, a, b, c in parts:
        d = x.shape[axis]
        if _same(full[axis], 1) or _full_range(a, b, c, d):
            continue
        pad = [(0, 0)] * x.ndim
        pad[axis] = (a, d - b)
        v = snp.pad(v, pad)  # zeros outside the selection, where the mask keeps x
    if mask is None:  # every element: the value broadcast (in x's dtype already)
        return snp.broadcast_to(snp.asarray(v), x.shape)
    return snp.where(mask, v, x)


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
    if self._const is not None:  # an array made from known values: NumPy's answer
        return bool(self._const)
    raise _concrete_error(self, "the truth value (if/while/and/or)")


def _int(self: Tracer) -> int:
    if self._const is not None:
        return int(self._const)
    raise _concrete_error(self, "int()")


def _index(self: Tracer) -> int:
    if self._const is not None:
        return operator.index(self._const)
    raise _concrete_error(self, "use as an index (operator.index)")


def _item(self: Tracer, *args: Any) -> Any:
    if self._const is not None:
        return self._const.item(*args)
    raise _concrete_error(self, "item()")


def _tolist(self: Tracer) -> Any:
    if self._const is not None:
        return self._const.tolist()
    raise _concrete_error(self, "tolist()")


def _no_out(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A reduction method that also takes NumPy's ``out=None``: ``np.sum(x)``, ``np.mean(x)``
    and the like call the array's method with it."""

    takes_dtype = "dtype" in inspect.signature(fn).parameters

    def method(self: Tracer, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        if not takes_dtype and "dtype" in kwargs:  # np.std(x) passes dtype=None
            dtype = kwargs.pop("dtype")
            self = self if dtype is None else snp.astype(self, dtype)
        if out is not None:
            raise user_error(
                f"{fn.__name__}(..., out=...) in a traced function",
                expected="out=None: a traced function computes new arrays",
                found="an out= array",
                fix=f"y = x.{fn.__name__}(...) and use y",
            )
        return fn(self, *args, **kwargs)

    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


def _float(self: Tracer) -> float:
    if self._const is not None:
        return float(self._const)
    raise _concrete_error(self, "float()")


def _array(self: Tracer, dtype: Any = None, copy: Any = None) -> Any:
    if self._const is not None:  # a copy: NumPy may write into what it gets
        return np.array(self._const, dtype=dtype)
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
    "__setitem__": setitem,
    "copy": snp.copy,
    "__bool__": _bool,
    "__int__": _int,
    "__index__": _index,
    "item": _item,
    "tolist": _tolist,
    "__float__": _float,
    "__array__": _array,
    "__iter__": _iter,
    "__array_ufunc__": _array_ufunc,
    "__hash__": object.__hash__,
    "reshape": _reshape,
    "transpose": _transpose,
    "astype": snp.astype,
    "sum": _no_out(snp.sum),
    "mean": _no_out(snp.mean),
    "max": _no_out(snp.max),
    "min": _no_out(snp.min),
    "prod": _no_out(snp.prod),
    "var": _no_out(snp.var),
    "std": _no_out(snp.std),
    "any": _no_out(snp.any),
    "all": _no_out(snp.all),
    "cumsum": _no_out(snp.cumsum),
    "round": snp.round,
    "repeat": snp.repeat,
    "argmax": _no_out(snp.argmax),
    "argmin": _no_out(snp.argmin),
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
