"""More of NumPy's API for `shapevm.numpy`: functions written with the op table's ops.

Each takes and gives what its NumPy namesake does (for the float32 and integer arrays a
traced program holds), with symbolic sizes where NumPy has sizes: ``diff`` of ``[b, s]``
is ``[b, s - 1]``, ``roll`` by any shift of an axis of symbolic length is a ``take`` of
``(arange(n) - shift) % n``. On plain NumPy arrays they compute at once, as the rest of
`shapevm.numpy`. Where NumPy's function returns a shape that depends on the data
(``unique``) it is not here.
"""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from shapevm.bytecode.errors import format_message
from shapevm.frontend import numpy_api as api
from shapevm.frontend.numpy_api import _as_tensor, _axis, _binary, _slice_axis, _unary_float
from shapevm.frontend.tracer import Tracer, bind_op
from shapevm.shapes import DimExpr, min_dim

newaxis = None


def expm1(x: Any) -> Any:
    return _unary_float("expm1", x)


def log1p(x: Any) -> Any:
    return _unary_float("log1p", x)


def log2(x: Any) -> Any:
    return _unary_float("log2", x)


def log10(x: Any) -> Any:
    return _unary_float("log10", x)


def arctan2(y: Any, x: Any) -> Any:
    return _binary("atan2", y, x, to_float=True)


def hypot(x: Any, y: Any) -> Any:
    return _binary("hypot", x, y, to_float=True)


def reciprocal(x: Any) -> Any:
    """``1 / x`` of a float array (NumPy's integer reciprocal truncates: not offered)."""
    a = _as_tensor(x)
    if _kind(a) != "f":
        raise TypeError(
            format_message(
                "reciprocal of an integer array",
                expected="a float array",
                found=str(np.dtype(a.dtype)),
                fix="divide: 1 / x.astype(np.float32)",
            )
        )
    return api.divide(1.0, a)


def argsort(x: Any, axis: int | None = -1) -> Any:
    """Indices that sort ``x`` along ``axis`` (None: the flattened array), stable: equal
    values keep their order, nan last (any ``kind`` of NumPy's gives this order)."""
    a = _as_tensor(x)
    if axis is None:
        a, axis = api.ravel(a), -1
    return bind_op("argsort", [a], {"axis": axis, "descending": False})


def _sorted_along(a: Any, axis: int | None) -> tuple[Any, Any, int]:
    """``a`` (flattened for no axis, integers as float32), it sorted along the axis, and
    the axis: what `median` and `quantile` pick from."""
    x = api.asarray(a)
    if axis is None:
        x, ax = api.ravel(x), 0
    else:
        ax = _axis(axis, api.ndim(x))
    if _kind(x) != "f":
        x = x.astype(np.float32)
    return x, api.sort(x, axis=ax), ax


def median(a: Any, axis: int | None = None, keepdims: bool = False) -> Any:
    """The middle of the sorted values along ``axis`` (the mean of the two middle ones for
    an even count); nan where the values have a nan, as NumPy."""
    x, s, ax = _sorted_along(a, axis)
    n = x.shape[ax]
    lo = _slice_axis(s, ax, (n - 1) // 2, (n - 1) // 2 + 1)
    hi = _slice_axis(s, ax, n // 2, n // 2 + 1)
    mid = (lo + hi) * 0.5
    out = api.where(api.any(api.isnan(x), axis=ax, keepdims=True), np.float32(np.nan), mid)
    if not keepdims:
        return api.squeeze(out, axis=ax)
    return out if axis is not None else api.reshape(out, (1,) * api.ndim(a))


_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def quantile(
    a: Any, q: Any, axis: int | None = None, method: str = "linear", keepdims: bool = False
) -> Any:
    """``np.quantile`` of constant ``q`` (a number, or a sequence: its axis first), by one of
    NumPy's methods ``linear`` (the default: between the two sorted values around ``q (n -
    1)``, as NumPy's ``_lerp``), ``lower``, ``higher``, ``midpoint`` and ``nearest``; nan
    where the values have a nan. The position is worked out when the program runs if the
    axis' length is symbolic."""
    if method not in _QUANTILE_METHODS:
        raise _bad(
            f"quantile method {method!r}",
            expected=", ".join(_QUANTILE_METHODS),
            found=repr(method),
            fix="use one of these methods, or compute the quantile outside the traced function",
        )
    qs = np.asarray(q, np.float64)
    if qs.ndim > 1 or not np.all((qs >= 0) & (qs <= 1)):
        raise _bad(
            "quantiles must be in the range [0, 1]" if qs.ndim <= 1 else "quantiles of rank 2",
            expected="a number or a sequence of numbers in [0, 1] (percentile: in [0, 100])",
            found=repr(q),
            fix="pass constant quantiles in range",
        )
    x, s, ax = _sorted_along(a, axis)
    nan = api.any(api.isnan(x), axis=ax, keepdims=True)
    outs = [_one_quantile(s, ax, float(v), method, nan) for v in qs.reshape(-1)]
    if not keepdims:
        outs = [api.squeeze(o, axis=ax) for o in outs]
    elif axis is None:
        outs = [api.reshape(o, (1,) * api.ndim(a)) for o in outs]
    return outs[0] if qs.ndim == 0 else api.stack(outs)


def _one_quantile(s: Any, ax: int, q: float, method: str, nan: Any) -> Any:
    n = s.shape[ax]
    if isinstance(n, int):  # a known length: the positions are numbers
        at = q * (n - 1)
        lo = int(np.floor(at))
        pick = {"lower": lo, "higher": int(np.ceil(at)), "nearest": int(np.round(at))}
        if method in pick:
            k = pick[method]
            return api.where(nan, np.float32(np.nan), _slice_axis(s, ax, k, k + 1))
        below = _slice_axis(s, ax, lo, lo + 1)
        above = _slice_axis(s, ax, min(lo + 1, n - 1), min(lo + 1, n - 1) + 1)
        t: Any = at - lo
        if method == "midpoint":  # halfway, but at a whole position (NumPy's gamma rule)
            t = 0.5 if t else 0.0
    else:  # symbolic: the position is an array computed when the program runs
        at = api.asarray(n - 1, np.float64) * q
        floor = api.floor(at)
        last = api.asarray(n - 1, np.int64)
        if method in ("lower", "higher", "nearest"):
            pos = {"lower": floor, "higher": api.ceil(at), "nearest": api.round(at)}[method]
            k = api.reshape(pos.astype(np.int64), (1,))
            return api.where(nan, np.float32(np.nan), api.take(s, k, axis=ax))
        lo_i = floor.astype(np.int64)
        below = api.take(s, api.reshape(lo_i, (1,)), axis=ax)
        above = api.take(s, api.reshape(api.minimum(lo_i + 1, last), (1,)), axis=ax)
        t = (at - floor).astype(s.dtype)
        if method == "midpoint":
            t = api.where(t == 0, np.float32(0.0), np.float32(0.5))
    diff = above - below  # NumPy's _lerp: from the nearer end
    if isinstance(t, float):
        mid = below + diff * t if t < 0.5 else above - diff * (1 - t)
    else:
        mid = api.where(t >= 0.5, above - diff * (1 - t), below + diff * t)
    return api.where(nan, np.float32(np.nan), mid)


def percentile(
    a: Any, q: Any, axis: int | None = None, method: str = "linear", keepdims: bool = False
) -> Any:
    """``np.percentile``: `quantile` of ``q / 100``."""
    return quantile(a, np.asarray(q, np.float64) / 100, axis, method, keepdims)


def polyval(p: Any, x: Any) -> Any:
    """``np.polyval``: the polynomial of coefficients ``p`` (highest power first; a
    sequence, or an array of known length) at ``x``, by Horner's rule from zero as NumPy's."""
    coeffs: Any = p if isinstance(p, Tracer) else np.asarray(p)
    n = coeffs.shape[0] if coeffs.ndim == 1 else None
    if not isinstance(n, int):
        raise _bad(
            "polyval of coefficients that are not a 1-D array of known length",
            expected="a list or 1-D array of coefficients",
            found=f"coefficients of shape {tuple(coeffs.shape)}",
            fix="pass the coefficients as a list or a NumPy array",
        )
    y = api.zeros_like(x)
    for k in range(n):
        y = y * x + coeffs[k]
    return y


def searchsorted(a: Any, v: Any, side: str = "left") -> Any:
    """``np.searchsorted`` of ``v`` in the sorted 1-D ``a``: how many of ``a`` come before
    each value (``left``: those less than it; ``right``: not greater), NaN sorting last as
    in NumPy. Every value is compared with every entry of ``a``: meant for bins and tables
    of tens or hundreds of entries."""
    if side not in ("left", "right"):
        raise _bad("searchsorted: unknown side", expected="'left' or 'right'", found=repr(side),
                   fix="pass side='left' or side='right'")  # fmt: skip
    if not isinstance(a, Tracer):  # a constant table
        known = np.asarray(a)
        if known.ndim == 1 and known.size <= 16:
            return _search_known(known, api.asarray(v), side)
    table, x = api.asarray(a), api.asarray(v)
    if api.ndim(table) != 1:
        raise _bad("searchsorted in an array that is not 1-D", expected="a 1-D sorted array",
                   found=f"shape {tuple(table.shape)}", fix="search a 1-D array")  # fmt: skip
    t = api.reshape(table, (*(1,) * api.ndim(x), table.shape[0]))
    xv = api.expand_dims(x, -1)
    nan = api.isnan(xv) if _kind(x) == "f" else None
    if side == "left":
        before = api.less(t, xv)
        if nan is not None:  # a NaN comes after every number
            before = api.logical_or(before, api.logical_and(nan, api.logical_not(api.isnan(t))))
    else:
        before = api.less_equal(t, xv)
        if nan is not None:
            before = api.logical_or(before, nan)
    # counted in float32 (exact below 2^24 entries), fused with the comparisons
    return api.sum(before.astype(np.float32), axis=-1).astype(np.int64)


def _search_known(table: np.ndarray[Any, Any], x: Any, side: str) -> Any:
    """`searchsorted` in a short constant table: one comparison with each entry, added up
    elementwise (one fused kernel, where comparing against the table as an axis reduced
    rows of its length)."""
    count: Any = api.zeros_like(x, dtype=np.float32)
    for t in table.tolist():
        if t == t:  # a NaN entry comes after every value but NaN
            count = count + (api.less(t, x) if side == "left" else api.less_equal(t, x)).astype(
                np.float32
            )
    if np.dtype(x.dtype).kind == "f":  # NaN: after every number (and every NaN: right)
        after = int(np.sum(table == table)) if side == "left" else table.size
        count = api.where(api.isnan(x), np.float32(after), count)
    return count.astype(np.int64)


def digitize(x: Any, bins: Any, right: bool = False) -> Any:
    """``np.digitize``: the index of the bin of each value, for increasing bins (and for
    decreasing ones given as a constant)."""
    b = bins if isinstance(bins, Tracer) else np.asarray(bins)
    if (
        isinstance(b, np.ndarray)
        and b.ndim == 1
        and b.size > 1
        and np.all(b[1:] <= b[:-1])
        and (b[0] > b[-1])
    ):  # decreasing: NumPy counts from the end
        return b.size - searchsorted(b[::-1].copy(), x, side="left" if right else "right")
    return searchsorted(b, x, side="left" if right else "right")


def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None) -> Any:
    """``np.interp``: the piecewise linear function through the points ``(xp, fp)``
    (``xp`` increasing) at ``x``; ``left``/``right`` (default: the end values) outside,
    NaN at NaN, as NumPy's formula ``slope * (x - xp[j]) + fp[j]``."""
    px, py = api.asarray(xp), api.asarray(fp)
    if (
        api.ndim(px) != 1
        or api.ndim(py) != 1
        or not isinstance(px.shape[0], int)
        or (px.shape[0] != py.shape[0])
    ):
        raise _bad(
            "interp: xp and fp must be 1-D of one known length",
            expected="1-D xp and fp of equal length",
            found=f"xp {tuple(px.shape)}, fp {tuple(py.shape)}",
            fix="pass the points as lists or 1-D NumPy arrays",
        )
    m = px.shape[0]
    xv = api.asarray(x)
    if _kind(xv) != "f":
        xv = xv.astype(np.float32)
    lo = py[0] if left is None else left
    hi = py[m - 1] if right is None else right
    consts = not isinstance(xp, Tracer) and not isinstance(fp, Tracer)
    if m == 1:
        body = api.zeros_like(xv) + py[0]
    elif consts and m <= 17:  # each segment's line, chosen by comparisons: one fused kernel
        kx, ky = np.asarray(xp, np.float64), np.asarray(fp, np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            slopes = (ky[1:] - ky[:-1]) / (kx[1:] - kx[:-1])
        body = (xv - np.float32(kx[0])) * np.float32(slopes[0]) + np.float32(ky[0])
        for k in range(1, m - 1):
            line = (xv - np.float32(kx[k])) * np.float32(slopes[k]) + np.float32(ky[k])
            body = api.where(api.greater_equal(xv, np.float32(kx[k])), line, body)
        body = api.where(api.equal(xv, px[m - 1]), py[m - 1], body)
    else:
        j = api.clip(searchsorted(px, xv, side="right") - 1, 0, m - 2)
        x0, x1 = api.take(px, j), api.take(px, j + 1)
        y0, y1 = api.take(py, j), api.take(py, j + 1)
        slope = (y1 - y0) / (x1 - x0)
        body = slope * (xv - x0) + y0
        body = api.where(api.equal(xv, px[m - 1]), py[m - 1], body)
    out = api.where(api.less(xv, px[0]), lo, api.where(api.greater(xv, px[m - 1]), hi, body))
    return api.where(api.isnan(xv), xv, out)


def nansum(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """The sum with nan counted as 0."""
    x = _as_tensor(a)
    return api.sum(_nan_as(x, 0.0), axis=axis, keepdims=keepdims)


def nanmean(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """The mean of the values that are not nan (nan where all are)."""
    x = _as_tensor(a)
    count = api.sum(api.logical_not(api.isnan(x)).astype(np.float32), axis=axis, keepdims=keepdims)
    mean = api.divide(nansum(x, axis, keepdims), api.maximum(count, 1.0))  # 0 / 0 would warn
    return api.where(api.equal(count, 0.0), np.float32(np.nan), mean)


def nanmax(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """The maximum of the values that are not nan (nan where all are)."""
    return _nan_extreme(a, axis, keepdims, api.max, -np.inf)


def nanmin(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """The minimum of the values that are not nan (nan where all are)."""
    return _nan_extreme(a, axis, keepdims, api.min, np.inf)


def _nan_as(x: Any, value: float) -> Any:
    if _kind(x) != "f":
        return x
    return api.where(api.isnan(x), np.dtype(x.dtype).type(value), x)


def _nan_extreme(a: Any, axis: Any, keepdims: bool, reduce: Any, fill: float) -> Any:
    x = _as_tensor(a)
    out = reduce(_nan_as(x, fill), axis=axis, keepdims=keepdims)
    if _kind(x) != "f":
        return out
    empty = api.all(api.isnan(x), axis=axis, keepdims=keepdims)
    return api.where(empty, np.dtype(x.dtype).type(np.nan), out)


def diff(a: Any, n: int = 1, axis: int = -1) -> Any:
    """Differences of neighbours along ``axis``, ``n`` times (``!=`` for bools, as NumPy)."""
    x = _as_tensor(a)
    if n < 0:
        raise _bad("diff of a negative order", "n >= 0", f"n={n}", "pass n=0 or more")
    ax = _axis(axis, api.ndim(x))
    for _ in range(n):
        length = x.shape[ax]
        hi, lo = _slice_axis(x, ax, 1, length), _slice_axis(x, ax, 0, length - 1)
        x = api.not_equal(hi, lo) if _kind(x) == "b" else api.subtract(hi, lo)
    return x


def roll(a: Any, shift: Any, axis: Any = None) -> Any:
    """Elements shifted by ``shift`` along ``axis`` (None: the flattened array), wrapping
    around; an axis of symbolic length takes ``(arange(n) - shift) % n``."""
    x = _as_tensor(a)
    if axis is None:
        return api.reshape(roll(api.ravel(x), shift, 0), api.shape(x))
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    if len(shifts) == 1 and len(axes) > 1:
        shifts = tuple(shifts) * len(axes)
    if len(shifts) != len(axes):
        raise _bad(
            f"roll: {len(shifts)} shifts for {len(axes)} axes",
            "one shift, or one per axis",
            f"shift={shift!r}, axis={axis!r}",
            "give as many shifts as axes",
        )
    for k, ax in zip(shifts, axes, strict=True):
        ax = _axis(ax, api.ndim(x))
        length = x.shape[ax]
        if isinstance(length, int):
            if length == 0:
                continue
            k = int(k) % length
            if k:
                tail, head = (
                    _slice_axis(x, ax, length - k, length),
                    _slice_axis(x, ax, 0, length - k),
                )
                x = api.concatenate([tail, head], axis=ax)
            continue
        index = api.mod(api.arange(length) - int(k), length)
        x = api.take(x, index, axis=ax)
    return x


def tile(a: Any, reps: Any) -> Any:
    """``a`` repeated ``reps`` times along each axis (reps may be symbolic)."""
    x = _as_tensor(a)
    reps = tuple(reps) if isinstance(reps, (tuple, list)) else (reps,)
    nd = builtins.max(api.ndim(x), len(reps))
    shape = (1,) * (nd - api.ndim(x)) + tuple(api.shape(x))
    reps = (1,) * (nd - len(reps)) + reps
    x = api.reshape(x, shape)
    spread = []
    target = []
    for d, r in zip(shape, reps, strict=True):
        spread += [1, d]
        target += [r, d]
    x = api.broadcast_to(api.reshape(x, tuple(spread)), tuple(target))
    return api.reshape(x, tuple(r * d for r, d in zip(reps, shape, strict=True)))


def atleast_1d(a: Any) -> Any:
    x = _as_tensor(a)
    return api.reshape(x, (1,)) if api.ndim(x) == 0 else x


def atleast_2d(a: Any) -> Any:
    x = atleast_1d(a)
    return api.expand_dims(x, 0) if api.ndim(x) == 1 else x


def hstack(tup: Sequence[Any]) -> Any:
    arrays = [atleast_1d(a) for a in tup]
    return api.concatenate(arrays, axis=0 if api.ndim(arrays[0]) == 1 else 1)


def vstack(tup: Sequence[Any]) -> Any:
    return api.concatenate([atleast_2d(a) for a in tup], axis=0)


def outer(a: Any, b: Any) -> Any:
    return api.multiply(
        api.expand_dims(api.ravel(_as_tensor(a)), 1), api.expand_dims(api.ravel(_as_tensor(b)), 0)
    )


def eye(n: Any, m: Any = None, k: int = 0, dtype: Any = np.float32) -> Any:
    """Ones on the ``k``-th diagonal of an ``n`` x ``m`` array (sizes may be symbolic)."""
    return _grid(n, m, k, dtype, np.eye, api.equal)


def _grid(n: Any, m: Any, k: int, dtype: Any, concrete: Any, keep: Any) -> Any:
    """An ``n`` x ``m`` array of ones where ``keep(row + k, column)``: NumPy's
    ``concrete(n, m, k)`` when both sizes are ints."""
    m = n if m is None else m
    if not isinstance(n, DimExpr) and not isinstance(m, DimExpr):
        return api._made(concrete(n, m, k, dtype=dtype))
    rows = api.expand_dims(api.arange(n), 1)
    cols = api.expand_dims(api.arange(m), 0)
    return keep(rows + k, cols).astype(dtype)


def identity(n: Any, dtype: Any = np.float32) -> Any:
    return eye(n, dtype=dtype)


def diagonal(a: Any, offset: int = 0) -> Any:
    """The ``offset`` diagonal of a 2-D array (sizes may be symbolic)."""
    x = _as_tensor(a)
    if api.ndim(x) != 2:
        raise _bad(
            "diagonal of an array that is not 2-D",
            "a 2-D array (the axis1=0, axis2=1 case)",
            f"{api.ndim(x)} dimensions",
            "reshape to 2-D, or take the diagonal with einsum ('ii->i')",
        )
    rows, cols = x.shape
    count = min_dim(rows + builtins.min(offset, 0), cols - builtins.max(offset, 0))
    if isinstance(count, int) and count <= 0:
        return api.reshape(x, (-1,))[:0]
    i = api.arange(count)
    flat = (i + builtins.max(-offset, 0)) * cols + (i + builtins.max(offset, 0))
    return api.take(api.ravel(x), flat)


def trace(a: Any, offset: int = 0) -> Any:
    return api.sum(diagonal(a, offset))


def isclose(
    a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> Any:
    """NumPy's test: ``|a - b| <= atol + rtol * |b|`` for finite ``b``, or ``a == b``."""
    x, y = _as_tensor(a), _as_tensor(b)
    finite = api.logical_and(api.isfinite(x), api.isfinite(y))
    # the difference of finite values only: inf - inf would warn (NumPy silences it)
    xs, ys = api.where(finite, x, 0.0), api.where(finite, y, 0.0)
    close = api.logical_and(api.less_equal(api.abs(xs - ys), atol + rtol * api.abs(ys)), finite)
    out = api.logical_or(close, api.equal(x, y))
    if equal_nan:
        out = api.logical_or(out, api.logical_and(api.isnan(x), api.isnan(y)))
    return out


def allclose(
    a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> Any:
    return api.all(isclose(a, b, rtol, atol, equal_nan))


def nan_to_num(
    x: Any, copy: bool = True, nan: float = 0.0, posinf: Any = None, neginf: Any = None
) -> Any:
    """nan, inf and -inf of a float array replaced (by default: 0 and the dtype's largest
    and smallest finite values); other dtypes unchanged."""
    a = _as_tensor(x)
    dtype = np.dtype(a.dtype)
    if dtype.kind != "f":
        return a
    info = np.finfo(dtype)
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf
    a = api.where(api.isnan(a), dtype.type(nan), a)
    a = api.where(api.equal(a, dtype.type(np.inf)), dtype.type(hi), a)
    return api.where(api.equal(a, dtype.type(-np.inf)), dtype.type(lo), a)


def average(a: Any, axis: Any = None, weights: Any = None) -> Any:
    """The mean along ``axis``, weighted by ``weights`` (``a``'s shape, or 1-D along one
    ``axis``): ``sum(a * w) / sum(w)``."""
    x = _as_tensor(a)
    if weights is None:
        return api.mean(x, axis=axis)
    w = _as_tensor(weights)
    if api.ndim(w) != api.ndim(x):
        if axis is None or isinstance(axis, (tuple, list)) or api.ndim(w) != 1:
            raise _bad(
                "average: weights of another shape than the array",
                "weights of the array's shape, or 1-D weights with one axis",
                f"weights of {api.ndim(w)} dimensions, axis={axis!r}",
                "pass axis=<the weights' axis>, or broadcast the weights",
            )
        shape = [1] * api.ndim(x)
        shape[_axis(axis, api.ndim(x))] = w.shape[0]
        w = api.reshape(w, tuple(shape))
    return api.divide(
        api.sum(x * w, axis=axis), api.sum(api.broadcast_to(w, api.shape(x)), axis=axis)
    )


def meshgrid(*xi: Any, indexing: str = "xy") -> list[Any]:
    """Coordinate arrays of 1-D ``xi`` (``"xy"``: the first two swapped, as NumPy)."""
    if indexing not in ("xy", "ij"):
        raise _bad(
            "meshgrid: unknown indexing",
            "'xy' or 'ij'",
            repr(indexing),
            "use 'xy' (NumPy's default) or 'ij'",
        )
    arrays = [api.ravel(_as_tensor(x)) for x in xi]
    sizes = [a.shape[0] for a in arrays]
    if indexing == "xy" and len(arrays) > 1:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, a in enumerate(arrays):
        at = i
        if indexing == "xy" and len(arrays) > 1 and i < 2:
            at = 1 - i
        shape = [1] * len(arrays)
        shape[at] = a.shape[0]
        out.append(api.broadcast_to(api.reshape(a, tuple(shape)), tuple(sizes)))
    return out


def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Any:
    """The first choice whose condition holds, element by element, else ``default``."""
    if len(condlist) != len(choicelist):
        raise _count(
            "select: as many conditions as choices", len(choicelist), len(condlist),
            "conditions", "give one condition per choice",
        )  # fmt: skip
    out = default
    for cond, choice in zip(reversed(condlist), reversed(choicelist), strict=True):
        out = api.where(cond, choice, out)
    return out


def tensordot(a: Any, b: Any, axes: Any = 2) -> Any:
    """Sum over ``axes`` of ``a`` and ``b`` (an int: the last of ``a``, the first of ``b``;
    or two sequences of axes), as an einsum."""
    x, y = _as_tensor(a), _as_tensor(b)
    nx, ny = api.ndim(x), api.ndim(y)
    if isinstance(axes, int):
        ax = list(range(nx - axes, nx))
        bx = list(range(axes))
    else:
        ax, bx = (
            ([axes[0]] if isinstance(axes[0], int) else list(axes[0])),
            ([axes[1]] if isinstance(axes[1], int) else list(axes[1])),
        )
    ax = [_axis(i, nx) for i in ax]
    bx = [_axis(i, ny) for i in bx]
    if len(ax) != len(bx):
        raise _count(
            "tensordot: as many axes of a as of b", len(ax), len(bx), "axes of b",
            "pair each summed axis of a with one of b",
        )  # fmt: skip
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    sa = [next(letters) for _ in range(nx)]
    sb = [next(letters) for _ in range(ny)]
    for i, j in zip(ax, bx, strict=True):
        sb[j] = sa[i]
    out = [c for i, c in enumerate(sa) if i not in ax] + [
        c for j, c in enumerate(sb) if j not in bx
    ]
    return api.einsum(f"{''.join(sa)},{''.join(sb)}->{''.join(out)}", x, y)


def inner(a: Any, b: Any) -> Any:
    """Sum over the last axes of ``a`` and ``b``."""
    x, y = _as_tensor(a), _as_tensor(b)
    if api.ndim(x) == 0 or api.ndim(y) == 0:
        return api.multiply(x, y)
    return tensordot(x, y, ([-1], [-1]))


def logaddexp(x1: Any, x2: Any) -> Any:
    """``log(exp(x1) + exp(x2))`` without overflow: the larger plus ``log1p(exp(-|d|))``
    (an infinity or nan: the larger, as NumPy's; no ``inf - inf`` is computed)."""
    return _log_add(x1, x2, api.exp, 1.0)


def logaddexp2(x1: Any, x2: Any) -> Any:
    """``log2(2**x1 + 2**x2)``, as `logaddexp` in base 2."""
    return _log_add(x1, x2, exp2, 1.0 / np.log(2.0))


def _log_add(x1: Any, x2: Any, exp: Any, scale: float) -> Any:
    (a, b), _ = api._common([x1, x2], to_float=True)
    big = api.maximum(a, b)
    finite = api.logical_and(api.isfinite(a), api.isfinite(b))
    d = api.abs(api.where(finite, a, 0.0) - api.where(finite, b, 0.0))
    return api.where(finite, big + log1p(exp(api.negative(d))) * scale, big)


def exp2(x: Any) -> Any:
    """``2 ** x`` of a float array (integers as float32)."""
    (a,), _ = api._common([x], to_float=True)
    return api.power(np.dtype(a.dtype).type(2.0), a)


def trunc(x: Any) -> Any:
    """The integer part, towards zero (integers and bools unchanged)."""
    a = _as_tensor(x)
    if _kind(a) != "f":
        return a
    return api.where(api.less(a, 0.0), api.ceil(a), api.floor(a))


fix = trunc


def rint(x: Any) -> Any:
    """The nearest integer, halves to even (as `round`)."""
    return api.round(x)


def fmax(x1: Any, x2: Any) -> Any:
    """`maximum` that ignores nan: the other argument where one is nan."""
    (a, b), _ = api._common([x1, x2])
    if _kind(a) != "f":
        return api.maximum(a, b)
    return api.where(api.isnan(b), a, api.where(api.isnan(a), b, api.maximum(a, b)))


def fmin(x1: Any, x2: Any) -> Any:
    """`minimum` that ignores nan: the other argument where one is nan."""
    (a, b), _ = api._common([x1, x2])
    if _kind(a) != "f":
        return api.minimum(a, b)
    return api.where(api.isnan(b), a, api.where(api.isnan(a), b, api.minimum(a, b)))


def ptp(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """Peak to peak: the maximum minus the minimum along ``axis``."""
    x = _as_tensor(a)
    return api.subtract(
        api.max(x, axis=axis, keepdims=keepdims), api.min(x, axis=axis, keepdims=keepdims)
    )


def deg2rad(x: Any) -> Any:
    return api.multiply(_as_float(x), np.pi / 180.0)


def rad2deg(x: Any) -> Any:
    return api.multiply(_as_float(x), 180.0 / np.pi)


radians = deg2rad
degrees = rad2deg


def heaviside(x1: Any, x2: Any) -> Any:
    """0 where ``x1 < 0``, ``x2`` where ``x1 == 0``, 1 where ``x1 > 0``; nan where ``x1`` is."""
    (a, b), _ = api._common([x1, x2], to_float=True)
    step = api.where(api.less(a, 0.0), 0.0, api.where(api.greater(a, 0.0), 1.0, b))
    return api.where(api.isnan(a), a, step)


def column_stack(tup: Sequence[Any]) -> Any:
    """1-D arrays as the columns of a 2-D array, 2-D arrays as they are, side by side."""
    arrays = [_as_tensor(a) for a in tup]
    arrays = [api.expand_dims(a, 1) if api.ndim(a) < 2 else a for a in arrays]
    return api.concatenate(arrays, axis=1)


def linspace(
    start: Any, stop: Any, num: Any = 50, endpoint: bool = True, dtype: Any = np.float32
) -> Any:
    """``num`` values evenly spaced from ``start`` to ``stop`` (float32 by default, as the
    package's other constructors). A symbolic ``num`` computes them in ``dtype`` (NumPy in
    float64, then rounds: a value may differ in its last bit), the last one ``stop``."""
    if not isinstance(num, DimExpr):
        return np.linspace(start, stop, num, endpoint=endpoint, dtype=dtype)
    if np.dtype(dtype).kind != "f":
        raise _bad(
            "linspace of a symbolic length in an integer dtype",
            "a float dtype",
            str(np.dtype(dtype)),
            "make it in float32 and cast: linspace(...).astype(dtype)",
        )
    div = num - 1 if endpoint else num
    index = api.arange(num)
    span = np.dtype(dtype).type(float(stop) - float(start))
    step = span / api.maximum(api.asarray(div).astype(dtype), 1.0)
    out = index.astype(dtype) * step + np.dtype(dtype).type(start)
    if endpoint:
        out = api.where(api.equal(index, div), np.dtype(dtype).type(stop), out)
    return out


def empty(shape_: Any, dtype: Any = np.float32) -> Any:
    """`zeros`: what NumPy leaves unset is 0 here."""
    return api.zeros(shape_, dtype)


def empty_like(x: Any, dtype: Any = None) -> Any:
    """`zeros_like`: what NumPy leaves unset is 0 here."""
    return api.zeros_like(x, dtype)


def tri(n: Any, m: Any = None, k: int = 0, dtype: Any = np.float32) -> Any:
    """Ones at and below the ``k``-th diagonal of an ``n`` x ``m`` array (sizes may be
    symbolic)."""
    return _grid(n, m, k, dtype, np.tri, api.greater_equal)


def unravel_index(indices: Any, shape: Sequence[Any]) -> tuple[Any, ...]:
    """The coordinates in an array of ``shape`` (C order; sizes may be symbolic) of flat
    ``indices``: one array per axis."""
    idx = _as_tensor(indices)
    out = []
    stride: Any = 1
    for d in reversed(tuple(shape)):
        out.append(api.mod(api.floor_divide(idx, stride), d) if stride != 1 else api.mod(idx, d))
        stride = stride * d
    return tuple(reversed(out))


def array_split(a: Any, sections: Any, axis: int = 0) -> list[Any]:
    """``sections`` pieces along ``axis`` (an int: the first ``size % sections`` one longer;
    a list: the split points, as `split`)."""
    x = _as_tensor(a)
    if not isinstance(sections, int):
        return api.split(x, sections, axis=axis)
    if sections <= 0:
        raise _bad("array_split into no sections", "sections >= 1", str(sections), "pass 1 or more")
    ax = _axis(axis, api.ndim(x))
    size = x.shape[ax]
    each, extra = size // sections, size % sections
    low = min_dim if isinstance(extra, DimExpr) else builtins.min
    bounds = [each * i + low(i, extra) for i in range(sections + 1)]
    return [_slice_axis(x, ax, lo, hi) for lo, hi in itertools.pairwise(bounds)]


def diag(v: Any, k: int = 0) -> Any:
    """A 2-D array's ``k``-th diagonal (`diagonal`), or a 2-D array with a 1-D ``v`` on its
    ``k``-th diagonal (sizes may be symbolic)."""
    x = _as_tensor(v)
    if api.ndim(x) == 2:
        return diagonal(x, k)
    if api.ndim(x) != 1:
        raise _bad("diag of an array that is not 1-D or 2-D", "1 or 2 dimensions",
                   f"{api.ndim(x)} dimensions", "reshape to 1-D or 2-D")  # fmt: skip
    n = x.shape[0]
    square = api.expand_dims(x, 1) * eye(n, dtype=x.dtype)
    if k == 0:
        return square
    width = builtins.abs(k)
    pads = ((0, width), (width, 0)) if k > 0 else ((width, 0), (0, width))
    return api.pad(square, pads)


def cross(a: Any, b: Any, axis: int = -1) -> Any:
    """The cross product of 3-vectors along ``axis``, the vectors broadcast against each
    other (NumPy 2 deprecates 2-vectors: not taken)."""
    x, y = _as_tensor(a), _as_tensor(b)
    ax_x, ax_y = _axis(axis, api.ndim(x)), _axis(axis, api.ndim(y))
    n, m = x.shape[ax_x], y.shape[ax_y]
    if (n, m) != (3, 3):
        raise _bad(
            "cross of vectors that are not both 3-D",
            "3 components along the axis of each",
            f"{n} and {m}",
            "pass vectors of 3 components (a 2-vector as [x, y, 0])",
        )

    def comp(t: Any, ax: int, i: int) -> Any:
        return api.squeeze(_slice_axis(t, ax, i, i + 1), axis=ax)

    x0, x1, x2 = (comp(x, ax_x, i) for i in range(3))
    y0, y1, y2 = (comp(y, ax_y, i) for i in range(3))
    parts = [x1 * y2 - x2 * y1, x2 * y0 - x0 * y2, x0 * y1 - x1 * y0]
    return api.stack(parts, axis=axis if axis < 0 else builtins.min(ax_x, api.ndim(parts[0])))


def broadcast_arrays(*args: Any) -> list[Any]:
    """The arrays broadcast to their common shape."""
    from shapevm.ops.shape_rules import broadcast_shapes

    arrays = [_as_tensor(a) for a in args]
    (target,) = broadcast_shapes([tuple(api.shape(a)) for a in arrays]).shapes
    return [api.broadcast_to(a, tuple(target)) for a in arrays]


def atleast_3d(a: Any) -> Any:
    """``(N,)`` as ``(1, N, 1)``, ``(M, N)`` as ``(M, N, 1)``, as NumPy's."""
    x = atleast_2d(a)
    return api.expand_dims(x, 2) if api.ndim(x) == 2 else x


def _as_float(x: Any) -> Any:
    (a,), _ = api._common([x], to_float=True)
    return a


# -- helpers ------------------------------------------------------------------------------


def _kind(x: Any) -> str:
    """NumPy's dtype kind of an array or tracer: ``"f"``, ``"i"``, ``"b"``..."""
    return str(np.dtype(x.dtype).kind)


def _bad(what: str, expected: str, found: str, fix: str) -> ValueError:
    """The ValueError NumPy raises for the same call, in the package's layout."""
    return ValueError(format_message(what, expected=expected, found=found, fix=fix))


def _count(what: str, expected: int, found: int, unit: str, fix: str) -> ValueError:
    """`_bad` for two lists that must be as long as each other."""
    return _bad(what, f"{expected} {unit}", str(found), fix)


__all__ = [
    "allclose",
    "arctan2",
    "argsort",
    "array_split",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "average",
    "broadcast_arrays",
    "column_stack",
    "cross",
    "deg2rad",
    "degrees",
    "diag",
    "diagonal",
    "diff",
    "digitize",
    "empty",
    "empty_like",
    "exp2",
    "expm1",
    "eye",
    "fix",
    "fmax",
    "fmin",
    "heaviside",
    "hstack",
    "hypot",
    "identity",
    "inner",
    "interp",
    "isclose",
    "linspace",
    "log1p",
    "log2",
    "log10",
    "logaddexp",
    "logaddexp2",
    "median",
    "meshgrid",
    "nan_to_num",
    "nanmax",
    "nanmean",
    "nanmin",
    "nansum",
    "newaxis",
    "outer",
    "percentile",
    "polyval",
    "ptp",
    "quantile",
    "rad2deg",
    "radians",
    "reciprocal",
    "rint",
    "roll",
    "searchsorted",
    "select",
    "tensordot",
    "tile",
    "trace",
    "tri",
    "trunc",
    "unravel_index",
    "vstack",
]
