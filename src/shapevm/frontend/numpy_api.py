"""``shapevm.numpy``: NumPy's API over traced arrays with symbolic shapes.

Every function accepts `Tracer` s, NumPy arrays, Python scalars and symbolic dimensions.
Inside a traced function it records bytecode; on plain NumPy inputs it computes eagerly
with the op table's reference kernels.
"""

from __future__ import annotations

import builtins
import itertools
import operator
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from shapevm.bytecode.errors import format_message
from shapevm.frontend.promote import float_of, result_dtype
from shapevm.frontend.tracer import Tracer, bind_op, current_trace, fmt_shape, user_error
from shapevm.ops import DType, Dynamic
from shapevm.shapes import DimExpr, InconclusiveDimensionOperation
from shapevm.shapes.api import DYNAMIC_AS_NUMBER

ArrayLike = Any

# dtype names users spell as in NumPy
bool_ = np.bool_
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
uint8, uint16, uint32, uint64 = np.uint8, np.uint16, np.uint32, np.uint64
float16, float32, float64 = np.float16, np.float32, np.float64
pi, e, inf, nan = np.pi, np.e, np.inf, np.nan
ndarray = np.ndarray


# ---------------------------------------------------------------------------------------
# conversions


def _is_dim(x: Any) -> bool:
    return isinstance(x, DimExpr)


def _dtype_of(x: Any) -> DType | None:
    """The dtype of an array operand, or ``None`` for weak scalars and dimensions."""
    if isinstance(x, Tracer):
        return x.dt
    if isinstance(x, (bool, int, float, DimExpr)):
        return None
    if isinstance(x, np.generic) and not isinstance(x, np.ndarray):
        return None  # NumPy scalars are weak, like Python's
    if isinstance(x, Dynamic):
        what, expected, found, fix = DYNAMIC_AS_NUMBER
        raise user_error(what, expected=expected, found=found, fix=fix)
    return DType.from_numpy(np.asarray(x).dtype)


def _weak_type(x: Any) -> type:
    if isinstance(x, (bool, np.bool_)):
        return bool
    if isinstance(x, (int, np.integer, DimExpr)):
        return int
    return float


def _dt_name(d: DType) -> str:
    return d.value


def _to_dtype(dtype: Any) -> DType:
    if isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, str) and dtype in {d.value for d in DType}:
        return DType(dtype)
    return DType.from_numpy(np.dtype(dtype))


def asarray(x: ArrayLike, dtype: Any = None) -> Any:
    """An array from ``x``: a symbolic dimension (or a shape tuple holding some) becomes an
    array computed when the program runs (i32 unless ``dtype`` says otherwise). Inside a
    traced function any other array becomes a traced constant, as `jax.numpy.asarray`
    does, so that symbolic sizes can slice it (``asarray(table)[:s]``, which NumPy's own
    indexing cannot do); outside one it is `numpy.asarray`."""
    if isinstance(x, Tracer):
        return x if dtype is None else astype(x, dtype, copy=False)
    if isinstance(x, DimExpr) or (
        isinstance(x, (tuple, list)) and builtins.any(isinstance(d, DimExpr) for d in x)
    ):
        dt = _to_dtype(dtype) if dtype is not None else DType.I32
        if isinstance(x, DimExpr):
            return bind_op("dim_value", [], {"dims": (x,), "dtype": dt.value, "scalar": True})
        return bind_op("dim_value", [], {"dims": tuple(x), "dtype": dt.value, "scalar": False})
    if isinstance(x, (tuple, list)) and builtins.any(isinstance(v, Tracer) for v in x):
        return stack([asarray(v, dtype) for v in x])
    arr = np.asarray(x, dtype=dtype)
    ctx = current_trace()
    return ctx.const(arr) if ctx is not None else arr


def array(x: ArrayLike, dtype: Any = None, copy: bool = True) -> Any:
    """``np.array``: `asarray`, and a new array (not one shared with ``x``, so that an
    assignment into it changes it alone) unless ``copy=False``."""
    out = asarray(x, dtype)
    if copy and isinstance(out, Tracer) and (out is x or out.shared == "a NumPy array"):
        return _own(out)
    return out


def _made(arr: np.ndarray[Any, Any]) -> Any:
    """A new array of known value (``zeros((4, 3))``): NumPy's outside a trace, inside one
    an array of the function's own that behaves as that NumPy array and takes assignments
    of traced values (`TraceContext.made`)."""
    ctx = current_trace()
    return ctx.made(arr) if ctx is not None and ctx.active else arr


def _own(a: Tracer) -> Tracer:
    """A traced array of its own holding ``a``'s value (no data moves) until an assignment
    into one of the two makes that one a new value."""
    return Tracer(a.ctx, a.reg, a.dt, a.shape, const=a._const)


def copy(a: Any) -> Any:
    """``np.copy(a)`` / ``a.copy()``: an array of its own."""
    return _own(a) if isinstance(a, Tracer) else array(a)


def _materialize(x: Any, dt: DType) -> Any:
    """Operand ``x`` ready for an op computing in ``dt``: arrays cast, dims as arrays."""
    if isinstance(x, DimExpr):
        return asarray(x, dt.numpy.newbyteorder("="))
    if isinstance(x, Tracer):
        return x if x.dt is dt else astype(x, dt)
    if isinstance(x, (bool, int, float)):
        return x
    if isinstance(x, np.generic) and not isinstance(x, np.ndarray):
        return x.item()
    arr = np.asarray(x)
    want = dt.numpy.newbyteorder("=")
    return arr if arr.dtype == want else arr.astype(want)


def _common(xs: Sequence[Any], *, to_float: bool = False) -> tuple[list[Any], DType]:
    typed = [d for d in (_dtype_of(x) for x in xs) if d is not None]
    weak = [_weak_type(x) for x in xs if _dtype_of(x) is None]
    dt = result_dtype(typed, weak)
    if to_float:
        dt = float_of(dt)
    return [_materialize(x, dt) for x in xs], dt


def _binary(name: str, x: Any, y: Any, *, to_float: bool = False) -> Any:
    (a, b), _ = _common([x, y], to_float=to_float)
    return bind_op(name, [a, b])


def _unary_float(name: str, x: Any) -> Any:
    (a,), _ = _common([x], to_float=True)
    return bind_op(name, [a])


# ---------------------------------------------------------------------------------------
# elementwise


def add(x: Any, y: Any) -> Any:
    return _binary("add", x, y)


def subtract(x: Any, y: Any) -> Any:
    return _binary("sub", x, y)


def multiply(x: Any, y: Any) -> Any:
    return _binary("mul", x, y)


def divide(x: Any, y: Any) -> Any:
    """True division; integer operands are divided as f32 (as in JAX)."""
    return _binary("div", x, y, to_float=True)


true_divide = divide


def floor_divide(x: Any, y: Any) -> Any:
    return _binary("floordiv", x, y)


def mod(x: Any, y: Any) -> Any:
    return _binary("mod", x, y)


remainder = mod


def power(x: Any, y: Any) -> Any:
    """``x ** y``. A constant exponent of 2, of 0.5 or of -1 on floats is NumPy's own
    ``x * x``, ``sqrt(x)`` and ``1 / x`` (its results for them, bit for bit), which run as
    fused elementwise ops; any other exponent is ``pow``, the C library's per element."""
    (a, b), dt = _common([x, y])
    if isinstance(a, Tracer) and type(b) in (int, float) and dt is not DType.BOOL:
        if b == 2:
            return bind_op("mul", [a, a])
        if b == 0.5 and dt.is_float:
            return bind_op("sqrt", [a])
        if b == -1 and dt.is_float:
            return bind_op("div", [1.0, a])
        if b < 0 and not dt.is_float:  # NumPy's ValueError, at the line that asks
            raise user_error(
                f"an integer array to the negative power {b}",
                expected="a non-negative integer exponent, or a float array",
                found=f"{dt.numpy.name} ** {b}",
                fix=f"x.astype(np.float32) ** {b}, or 1.0 / x ** {-b}",
            )
    return bind_op("pow", [a, b])


def maximum(x: Any, y: Any) -> Any:
    return _binary("maximum", x, y)


def minimum(x: Any, y: Any) -> Any:
    return _binary("minimum", x, y)


def negative(x: Any) -> Any:
    (a,), _ = _common([x])
    return bind_op("neg", [a])


def absolute(x: Any) -> Any:
    (a,), _ = _common([x])
    return bind_op("abs", [a])


abs = absolute


def sign(x: Any) -> Any:
    (a,), _ = _common([x])
    return bind_op("sign", [a])


def square(x: Any) -> Any:
    return multiply(x, x)


def exp(x: Any) -> Any:
    return _unary_float("exp", x)


def log(x: Any) -> Any:
    return _unary_float("log", x)


def sqrt(x: Any) -> Any:
    return _unary_float("sqrt", x)


def tanh(x: Any) -> Any:
    return _unary_float("tanh", x)


def sin(x: Any) -> Any:
    return _unary_float("sin", x)


def cos(x: Any) -> Any:
    return _unary_float("cos", x)


def erf(x: Any) -> Any:
    """The error function (``scipy.special.erf``), elementwise."""
    return _unary_float("erf", x)


def tan(x: Any) -> Any:
    return _unary_float("tan", x)


def sinh(x: Any) -> Any:
    return _unary_float("sinh", x)


def cosh(x: Any) -> Any:
    return _unary_float("cosh", x)


def arcsin(x: Any) -> Any:
    return _unary_float("asin", x)


def arccos(x: Any) -> Any:
    return _unary_float("acos", x)


def arctan(x: Any) -> Any:
    return _unary_float("atan", x)


def arcsinh(x: Any) -> Any:
    return _unary_float("asinh", x)


def arccosh(x: Any) -> Any:
    return _unary_float("acosh", x)


def arctanh(x: Any) -> Any:
    return _unary_float("atanh", x)


def isnan(x: Any) -> Any:
    """``np.isnan``; of a float array traced as ``x != x`` (true for NaN alone), which a
    native chain fuses with what reads it."""
    t = _as_tensor(x)
    dt = _dtype_of(t)
    return not_equal(t, t) if dt is not None and dt.is_float else bind_op("isnan", [t])


def isinf(x: Any) -> Any:
    """``np.isinf``; of a float array traced as ``abs(x) == inf``, which a native chain
    fuses."""
    t = _as_tensor(x)
    dt = _dtype_of(t)
    return equal(abs(t), np.inf) if dt is not None and dt.is_float else bind_op("isinf", [t])


def isfinite(x: Any) -> Any:
    return logical_not(logical_or(isnan(x), isinf(x)))


def round(x: Any, decimals: int = 0) -> Any:
    """``np.round``: to the nearest integer, halves to even; with ``decimals``, as NumPy
    computes it in the array's type: ``round(x * 10**d) / 10**d`` (``x / 10**-d`` for a
    negative ``d``). Integers are unchanged by ``decimals >= 0``."""
    a = _as_tensor(x)
    if decimals == 0:
        return bind_op("round", [a])
    if np.dtype(_np_dtype(a)).kind != "f":
        if decimals > 0:
            return a
        raise user_error(
            "round of an integer array to tens",
            expected="decimals >= 0 for an integer array",
            found=f"decimals={decimals!r}",
            fix="round a float copy: snp.round(x.astype(snp.float32), d).astype(x.dtype)",
        )
    scale = 10.0 ** builtins.abs(int(decimals))
    if decimals > 0:
        return divide(bind_op("round", [multiply(a, scale)]), scale)
    return multiply(bind_op("round", [divide(a, scale)]), scale)


around = round


def floor(x: Any) -> Any:
    return _unary_float("floor", x)


def ceil(x: Any) -> Any:
    return _unary_float("ceil", x)


def clip(x: Any, a_min: Any = None, a_max: Any = None, *, min: Any = None, max: Any = None) -> Any:
    """``np.clip`` (and ``x.clip``): bounds as ``a_min``/``a_max`` or, as NumPy 2 also
    takes them, ``min``/``max``; None leaves that side open."""
    if min is not None or max is not None:
        if a_min is not None or a_max is not None:
            raise TypeError(
                format_message(
                    "clip: bounds given twice",
                    expected="a_min/a_max, or min/max (NumPy 2's names for them)",
                    found="both",
                    fix="pass each bound once",
                )
            )
        a_min, a_max = min, max
    out = x
    if a_min is not None:
        out = maximum(out, a_min)
    if a_max is not None:
        out = minimum(out, a_max)
    return out


def _compare(name: str, x: Any, y: Any) -> Any:
    (a, b), _ = _common([x, y])
    return bind_op(name, [a, b])


def less(x: Any, y: Any) -> Any:
    return _compare("less", x, y)


def less_equal(x: Any, y: Any) -> Any:
    return _compare("less_equal", x, y)


def greater(x: Any, y: Any) -> Any:
    return _compare("greater", x, y)


def greater_equal(x: Any, y: Any) -> Any:
    return _compare("greater_equal", x, y)


def equal(x: Any, y: Any) -> Any:
    return _compare("equal", x, y)


def not_equal(x: Any, y: Any) -> Any:
    return _compare("not_equal", x, y)


def _logical(name: str, *xs: Any) -> Any:
    args = [_materialize(x, DType.BOOL) if _dtype_of(x) is not DType.BOOL else x for x in xs]
    args = [bool(a) if isinstance(a, (int, float)) else a for a in args]
    return bind_op(name, args)


def logical_and(x: Any, y: Any) -> Any:
    return _logical("logical_and", x, y)


def logical_or(x: Any, y: Any) -> Any:
    return _logical("logical_or", x, y)


def logical_xor(x: Any, y: Any) -> Any:
    return _logical("logical_xor", x, y)


def logical_not(x: Any) -> Any:
    return _logical("logical_not", x)


def where(condition: Any, x: Any = None, y: Any = None) -> Any:
    """``x`` where ``condition`` holds, else ``y``; with one argument, `nonzero`."""
    if x is None and y is None:
        return nonzero(condition)
    if x is None or y is None:
        raise TypeError("where() takes either 1 or 3 arguments")
    (a, b), dt = _common([x, y])
    if _dtype_of(a) is None and _dtype_of(b) is None:  # where(mask, 1.0, -1.0)
        a = asarray(a, dt.numpy)
    cond = condition
    if _dtype_of(cond) not in (DType.BOOL, None):
        cond = not_equal(cond, 0)
    return bind_op("where", [cond, a, b])


def astype(x: Any, dtype: Any, copy: bool = True) -> Any:
    """``x.astype(dtype)``; as in NumPy a new array (one an assignment may go into) unless
    ``copy=False`` and the dtype is already ``x``'s."""
    dt = _to_dtype(dtype)
    if isinstance(x, Tracer) and x.dt is dt:
        return _own(x) if copy else x
    if isinstance(x, DimExpr):
        return asarray(x, dtype)
    return bind_op("cast", [x], {"dtype": dt.value})


# ---------------------------------------------------------------------------------------
# linear algebra


def matmul(x: Any, y: Any) -> Any:
    """``x @ y``, with NumPy's rule for a 1-D operand: a vector is a matrix of one row (on
    the left) or one column (on the right) for the product, and that axis goes from the
    result; two vectors give their inner product. float16 operands are multiplied and
    added in float32 and the result rounded to float16 once, as NumPy's float16 product
    does (its values but for the order of the float32 sums): a float32 product, native."""
    (a, b), dt = _common([x, y])
    if dt is DType.F16:
        return astype(matmul(astype(a, np.float32), astype(b, np.float32)), np.float16)
    if ndim(a) == 1 and ndim(b) == 1:  # in the operands' type, as NumPy's (bool: any)
        if np.dtype(_np_dtype(a)) == np.bool_:
            return any(logical_and(a, b))
        return _reduce("sum", multiply(a, b), None, False)
    if ndim(a) == 1 and ndim(b) >= 2:
        return squeeze(bind_op("matmul", [expand_dims(a, 0), b]), axis=-2)
    if ndim(b) == 1 and ndim(a) >= 2:
        return squeeze(bind_op("matmul", [a, expand_dims(b, 1)]), axis=-1)
    return bind_op("matmul", [a, b])


def dot(x: Any, y: Any) -> Any:
    """``np.dot`` for operands of rank <= 2 (a matrix product), else `matmul` semantics
    for a last-axis contraction with a 1-D or 2-D right operand."""
    if ndim(x) == 0 or ndim(y) == 0:
        return multiply(x, y)
    if ndim(y) <= 2:
        return matmul(x, y)
    raise user_error(
        "dot of operands of rank > 2 is not supported",
        expected="a right operand of rank <= 2",
        found=f"shapes {fmt_shape(shape(x))} and {fmt_shape(shape(y))}",
        fix="use matmul (batched) or einsum with an explicit equation",
    )


def einsum(subscripts: str, *operands: Any) -> Any:
    """``np.einsum`` with an explicit or implicit output (``'ij,jk'`` means ``'ij,jk->ik'``).
    A float contraction of one or two operands is traced as the products and transposes it
    stands for (see `shapevm.frontend.einsum`); others as the ``einsum`` op."""
    from shapevm.frontend.einsum import contract

    eq = subscripts.replace(" ", "")
    if "->" not in eq:
        letters = [c for c in eq if c.isalpha()]
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
        eq = f"{eq}->{'...' if '...' in eq else ''}{out}"
    args, dt = _common(list(operands))
    if dt.is_float:
        done = contract(eq, args, sys.modules[__name__])
        if done is not None:
            return done
    return bind_op("einsum", args, {"equation": eq})


# ---------------------------------------------------------------------------------------
# shapes


def shape(x: Any) -> tuple[Any, ...]:
    if isinstance(x, Tracer):
        return x.shape
    return tuple(np.shape(x))


def ndim(x: Any) -> int:
    return len(shape(x))


def _prod(dims: Sequence[Any]) -> Any:
    out: Any = 1
    for d in dims:
        out = out * d
    return out


def _is_zero(r: Any) -> bool:
    if isinstance(r, int):
        return r == 0
    from shapevm.shapes import bounds

    return bounds(r) == (0, 0)


def _resolve_reshape(old: Sequence[Any], new: Sequence[Any]) -> tuple[Any, ...]:
    if builtins.any(isinstance(d, Dynamic) for d in old) and -1 in new:
        raise user_error(
            "reshape with -1 of an array with a data-dependent dimension",
            expected="a target shape without -1",
            found=f"shape {fmt_shape(old)} -> {fmt_shape(new)}",
            fix="spell every dimension of the target shape",
        )
    dims = [d.item() if isinstance(d, np.integer) else d for d in new]
    holes = [i for i, d in enumerate(dims) if isinstance(d, int) and d == -1]
    if len(holes) > 1:
        raise ValueError(f"can only specify one unknown dimension, found {fmt_shape(new)}")
    if not holes:
        return tuple(dims)
    total = _prod(old)
    known = _prod([d for i, d in enumerate(dims) if i != holes[0]])
    rem = total % known if not isinstance(known, int) or known != 0 else 0
    if not _is_zero(rem):
        raise InconclusiveDimensionOperation(
            f"Cannot divide evenly the sizes of shapes {fmt_shape(old)} and {fmt_shape(new)}.\n"
            f"The remainder {rem} should be 0.\n"
            "Fix: choose symbolic shapes that make the division exact ('4*b' instead of 'b', "
            "or the constraint 'mod(b, 4) == 0'), or spell every dimension of the target shape."
        )
    dims[holes[0]] = total // known
    return tuple(dims)


def reshape(x: Any, newshape: Any, order: str = "C") -> Any:
    if order != "C":
        raise ValueError(f"reshape supports order='C' only, found order={order!r}")
    if isinstance(newshape, (int, DimExpr, np.integer)):
        newshape = (newshape,)
    if isinstance(newshape, Tracer):
        raise TypeError(
            "Shapes must be 1D sequences of concrete values of integer type, got a traced "
            f"array {newshape!r}. Array values are only known when the program runs; use "
            "dimensions (x.shape[i] and expressions of them) to build shapes."
        )
    for d in newshape:
        if isinstance(d, Tracer):
            raise TypeError(
                "Shapes must be 1D sequences of concrete values of integer type, got "
                f"{list(newshape)!r}: an array cannot be a dimension. Use x.shape[i] instead."
            )
    target = _resolve_reshape(shape(x), tuple(newshape))
    if not isinstance(x, Tracer) and not builtins.any(isinstance(d, DimExpr) for d in target):
        return np.reshape(np.asarray(x), target)
    if isinstance(x, Tracer) and tuple(target) == x.shape:
        return x
    return bind_op("reshape", [x], {"shape": target})


def ravel(x: Any) -> Any:
    return reshape(x, (-1,))


def transpose(x: Any, axes: Sequence[int] | None = None) -> Any:
    if axes is None:
        perm = tuple(reversed(range(ndim(x))))
    else:
        perm = tuple(_axis(a, ndim(x)) for a in axes)
    if perm == tuple(range(ndim(x))):
        return x
    return bind_op("transpose", [x], {"perm": perm})


def swapaxes(x: Any, axis1: int, axis2: int) -> Any:
    n = ndim(x)
    perm = list(range(n))
    a, b = _axis(axis1, n), _axis(axis2, n)
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


def moveaxis(x: Any, source: int, destination: int) -> Any:
    n = ndim(x)
    src = _axis(source, n)
    perm = [i for i in range(n) if i != src]
    perm.insert(_axis(destination, n), src)
    return transpose(x, perm)


def expand_dims(x: Any, axis: int | Sequence[int]) -> Any:
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    n = ndim(x) + len(axes)
    norm = sorted(_axis(a, n) for a in axes)
    dims = list(shape(x))
    for a in norm:
        dims.insert(a, 1)
    return reshape(x, tuple(dims))


def squeeze(x: Any, axis: int | Sequence[int] | None = None) -> Any:
    dims = shape(x)
    if axis is None:
        axes = {i for i, d in enumerate(dims) if isinstance(d, int) and d == 1}
    else:
        axes = {a % len(dims) for a in ((axis,) if isinstance(axis, int) else axis)}
        for a in axes:
            if not (isinstance(dims[a], int) and dims[a] == 1):
                raise ValueError(
                    f"cannot select an axis to squeeze out which has size not equal to one: "
                    f"axis {a} of shape {fmt_shape(dims)}"
                )
    return reshape(x, tuple(d for i, d in enumerate(dims) if i not in axes))


def broadcast_to(x: Any, shape_: Sequence[Any]) -> Any:
    target = tuple(shape_)
    if not isinstance(x, Tracer) and not builtins.any(isinstance(d, DimExpr) for d in target):
        return np.broadcast_to(np.asarray(x), target)
    if isinstance(x, Tracer) and x.shape == target:
        return x
    return bind_op("broadcast_to", [_as_tensor(x)], {"shape": target})


def _as_tensor(x: Any) -> Any:
    """``x`` as an array operand; Python scalars default to f32 / i32 / bool (as in JAX)."""
    if isinstance(x, (Tracer, np.ndarray)):
        return x
    if isinstance(x, DimExpr):
        return asarray(x)
    if isinstance(x, bool):
        return np.asarray(x)
    if isinstance(x, int):
        return np.asarray(x, np.int32)
    if isinstance(x, float):
        return np.asarray(x, np.float32)
    return np.asarray(x)


def concatenate(arrays: Sequence[Any], axis: int | None = 0) -> Any:
    """``np.concatenate``; ``axis=None`` joins the arrays flattened."""
    if axis is None:
        arrays, axis = [ravel(_as_tensor(a)) for a in arrays], 0
    args, _ = _common([_as_tensor(a) for a in arrays])
    if len(args) == 1:
        return args[0]
    return bind_op("concatenate", args, {"axis": axis})


def stack(arrays: Sequence[Any], axis: int = 0) -> Any:
    arrays = [_as_tensor(a) for a in arrays]
    n = ndim(arrays[0]) + 1
    ax = _axis(axis, n)
    return concatenate([expand_dims(a, ax) for a in arrays], axis=ax)


def split(x: Any, indices_or_sections: Any, axis: int = 0) -> list[Any]:
    dims = shape(x)
    axis = axis % len(dims)
    size = dims[axis]
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        rem = size % n
        if not _is_zero(rem):
            raise InconclusiveDimensionOperation(
                f"array split does not result in an equal division: axis {axis} of size "
                f"{size} into {n} sections leaves the remainder {rem}, which should be 0"
            )
        step = size // n
        bounds_ = [step * i for i in range(n + 1)]
    else:
        bounds_ = [0, *indices_or_sections, size]
    return [_slice_axis(x, axis, lo, hi) for lo, hi in itertools.pairwise(bounds_)]


def _slice_axis(x: Any, axis: int, start: Any, stop: Any, step: int = 1) -> Any:
    dims = shape(x)
    starts = tuple(start if i == axis else 0 for i in range(len(dims)))
    stops = tuple(stop if i == axis else d for i, d in enumerate(dims))
    steps = tuple(step if i == axis else 1 for i in range(len(dims)))
    if not isinstance(x, Tracer) and not builtins.any(
        isinstance(v, DimExpr) for v in (*starts, *stops)
    ):
        return np.asarray(x)[
            tuple(slice(a, b, c) for a, b, c in zip(starts, stops, steps, strict=True))
        ]
    return bind_op("slice", [x], {"start": starts, "stop": stops, "step": steps})


_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


def pad(x: Any, pad_width: Any, mode: str = "constant", constant_values: float = 0) -> Any:
    """``np.pad`` in the modes ``constant``, ``edge``, ``reflect``, ``symmetric`` and
    ``wrap`` (the last four with int widths, each no wider than the axis allows one
    reflection: ``reflect`` takes a width below the axis' length)."""
    if mode not in _PAD_MODES:
        raise ValueError(
            format_message(
                f"pad: mode={mode!r} is not supported",
                expected="one of " + ", ".join(_PAD_MODES),
                found=repr(mode),
                fix="pad with one of those (reflect and symmetric mirror the borders)",
            )
        )
    n = ndim(x)
    if isinstance(pad_width, (int, DimExpr)):
        widths = [(pad_width, pad_width)] * n
    else:
        pw = list(pad_width)
        if len(pw) == 2 and builtins.all(isinstance(v, (int, DimExpr)) for v in pw):
            widths = [(pw[0], pw[1])] * n
        else:
            widths = [(lo, hi) for lo, hi in pw]
    low = tuple(lo for lo, _ in widths)
    high = tuple(hi for _, hi in widths)
    if mode != "constant":
        return _pad_from_edges(_as_tensor(x), widths, mode)
    return bind_op("pad", [x], {"low": low, "high": high, "value": float(constant_values)})


def _pad_from_edges(x: Any, widths: Sequence[tuple[Any, Any]], mode: str) -> Any:
    """`pad` of a mode that copies the array's own elements: each axis in turn, its
    borders cut from the array (and flipped, or repeated) and joined to it."""
    for axis, (lo, hi) in enumerate(widths):
        if not isinstance(lo, int) or not isinstance(hi, int) or lo < 0 or hi < 0:
            raise user_error(
                f"pad mode={mode!r} with a width that is not a non-negative int",
                expected="int widths >= 0 (mode='constant' takes symbolic ones)",
                found=f"widths ({lo}, {hi}) on axis {axis}",
                fix="pass ints, or use mode='constant'",
            )
        if lo == 0 and hi == 0:
            continue
        n = shape(x)[axis]
        parts = []
        if lo:
            parts.append(_pad_side(x, axis, n, lo, mode, before=True))
        parts.append(x)
        if hi:
            parts.append(_pad_side(x, axis, n, hi, mode, before=False))
        x = concatenate(parts, axis=axis)
    return x


def _pad_side(x: Any, axis: int, n: Any, width: int, mode: str, before: bool) -> Any:
    if mode == "edge":
        edge = _slice_axis(x, axis, 0, 1) if before else _slice_axis(x, axis, n - 1, n)
        target = list(shape(x))
        target[axis] = width
        return broadcast_to(edge, tuple(target))
    if mode == "wrap":
        return _slice_axis(x, axis, n - width, n) if before else _slice_axis(x, axis, 0, width)
    skip = 1 if mode == "reflect" else 0  # reflect leaves the edge out, symmetric repeats it
    if before:
        return flip(_slice_axis(x, axis, skip, width + skip), axis=axis)
    return flip(_slice_axis(x, axis, n - width - skip, n - skip), axis=axis)


# ---------------------------------------------------------------------------------------
# reductions


def _axis(axis: Any, n: int) -> int:
    """``axis`` of an array of rank ``n``, counted from the end when negative; out of range
    is an error, as NumPy's ``AxisError`` (it used to wrap around silently)."""
    a = operator.index(axis)
    if n and not -n <= a < n:
        raise user_error(
            f"axis {a} is out of range for an array of rank {n}",
            expected=f"-{n} <= axis < {n}",
            found=f"axis={a}",
            fix="count axes from 0, or from -1 for the last one",
        )
    return a % n if n else a


def _axes(x: Any, axis: Any) -> tuple[int, ...] | None:
    if axis is None:
        return None
    n = ndim(x)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return tuple(_axis(a, n) for a in axes)


def _reduce(name: str, x: Any, axis: Any, keepdims: bool) -> Any:
    return bind_op(name, [_as_tensor(x)], {"axis": _axes(x, axis), "keepdims": keepdims})


def mean(
    x: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None, where: Any = None
) -> Any:
    """``np.mean``; with ``where``, of the elements it holds True for (nan for a slice of
    none, as NumPy's, which warns)."""
    if dtype is not None:
        x = astype(x, dtype)
    if where is None:
        return _reduce("mean", x, axis, keepdims)
    a = _as_tensor(x)
    kept = broadcast_to(_as_tensor(where), shape(a))
    total = _reduce("sum", _masked(a, kept, 0), axis, keepdims)
    count = _reduce("sum", astype(kept, np.float32), axis, keepdims)
    return divide(total, count)


def max(
    x: Any, axis: Any = None, keepdims: bool = False, initial: Any = None, where: Any = None
) -> Any:
    """``np.max``; ``initial`` joins every reduced slice (a floor for the maximum), and
    ``where`` (which needs ``initial``, as NumPy's) keeps the elements it holds True for."""
    x = _masked_extreme("max", x, initial, where)
    out = _reduce("max", x, axis, keepdims)
    return out if initial is None else maximum(out, initial)


def min(
    x: Any, axis: Any = None, keepdims: bool = False, initial: Any = None, where: Any = None
) -> Any:
    """``np.min``; ``initial`` joins every reduced slice (a ceiling for the minimum), and
    ``where`` (which needs ``initial``, as NumPy's) keeps the elements it holds True for."""
    x = _masked_extreme("min", x, initial, where)
    out = _reduce("min", x, axis, keepdims)
    return out if initial is None else minimum(out, initial)


amax, amin = max, min


def _sum_or_prod(name: str, doc: str) -> Any:
    def reduce(
        x: Any,
        axis: Any = None,
        keepdims: bool = False,
        dtype: Any = None,
        initial: Any = None,
        where: Any = None,
    ) -> Any:
        x = astype(x, dtype) if dtype is not None else _platform_int(x)
        if where is not None:
            x = _masked(x, where, 0 if name == "sum" else 1)
        out = _reduce(name, x, axis, keepdims)
        if initial is None:
            return out
        return add(out, initial) if name == "sum" else multiply(out, initial)

    reduce.__name__ = reduce.__qualname__ = name
    reduce.__doc__ = doc
    return reduce


sum = _sum_or_prod(
    "sum",
    """``np.sum``; ``initial`` is added to every slice, ``where`` keeps the elements it
    holds True for (the others count as 0).""",
)
prod = _sum_or_prod(
    "prod",
    """``np.prod``; ``initial`` multiplies every slice, ``where`` keeps the elements it
    holds True for (the others count as 1).""",
)


def _platform_int(x: Any) -> Any:
    """``x`` as NumPy's sum, prod and cumsum take an integer narrower than the platform's:
    int8/16/32 as int64, uint8/16/32 as uint64 (300 int8 ones sum to 300, not 44)."""
    dt = np.dtype(_np_dtype(x))
    if dt.kind in "iu" and dt.itemsize < 8:
        return astype(x, np.int64 if dt.kind == "i" else np.uint64)
    return x


def _masked(x: Any, where_: Any, fill: Any) -> Any:
    """``x`` where ``where_`` holds, ``fill`` elsewhere, in ``x``'s dtype."""
    a = _as_tensor(x)
    return where(where_, a, np.dtype(_np_dtype(a)).type(fill))


def _masked_extreme(name: str, x: Any, initial: Any, where_: Any) -> Any:
    if where_ is None:
        return x
    if initial is None:
        raise user_error(
            f"{name} with where= and no initial",
            expected="initial= as well (the value of a slice where nothing is kept)",
            found="where= alone",
            fix=f"pass initial=, e.g. snp.{name}(x, where=mask, initial="
            + ("-snp.inf)" if name == "max" else "snp.inf)"),
        )
    return _masked(x, where_, initial)


def var(x: Any, axis: Any = None, keepdims: bool = False, ddof: int = 0) -> Any:
    """``np.var``: the mean squared deviation; with ``ddof`` the sum of squares is divided
    by ``n - ddof`` (``ddof=1``: the unbiased estimate, PyTorch's default for ``var``)."""
    mu = mean(x, axis=axis, keepdims=True)
    d = subtract(x, mu)
    if not ddof:
        return mean(multiply(d, d), axis=axis, keepdims=keepdims)
    axes = _axes(x, axis)
    n = _prod([e for a, e in enumerate(shape(x)) if axes is None or a in axes])
    return divide(sum(multiply(d, d), axis=axis, keepdims=keepdims), n - ddof)


def std(x: Any, axis: Any = None, keepdims: bool = False, ddof: int = 0) -> Any:
    """``np.std``: the square root of `var` (the same ``ddof``)."""
    return sqrt(var(x, axis=axis, keepdims=keepdims, ddof=ddof))


def any(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """``np.any``: whether some element along ``axis`` is nonzero (True). Counted as a
    float32 sum of the nonzero mask, which the JIT fuses with the test: a positive count
    stays positive however it rounds (an int64 count was a comparison, two casts and an
    integer sum: 20 us of a [400, 8] median's 66)."""
    return greater(sum(astype(_nonzero(x), np.float32), axis=axis, keepdims=keepdims), 0.0)


def all(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """``np.all``: whether every element along ``axis`` is nonzero (True)."""
    return logical_not(any(equal(x, 0), axis=axis, keepdims=keepdims))


def cumsum(x: Any, axis: int | None = None) -> Any:
    """``np.cumsum`` along ``axis`` (``None``: of ``x`` flattened); a narrow integer or a
    bool array sums in the platform's integer, as NumPy's."""
    if axis is None:
        x, axis = ravel(x), 0
    x = _platform_int(x)
    if np.dtype(_np_dtype(x)) == np.bool_:
        x = astype(x, np.int64)
    return bind_op("cumsum", [_as_tensor(x)], {"axis": _axis(axis, ndim(x))})


def take_along_axis(arr: Any, indices: Any, axis: int) -> Any:
    """``np.take_along_axis``: ``arr``'s entries at ``indices`` along ``axis``. Off the
    axis the two broadcast against each other, as NumPy's do: boxes ``[b, n, 4]`` taken
    at ``order[..., None]`` (``[b, k, 1]``) are ``[b, k, 4]``."""
    from shapevm.frontend.methods import _same

    a, i = _as_tensor(arr), _as_tensor(indices)
    if ndim(a) != ndim(i) or ndim(a) == 0:
        raise user_error(
            "take_along_axis: indices and arr must have the same number of dimensions",
            expected=f"indices of rank {ndim(a)}",
            found=f"arr {fmt_shape(shape(a))}, indices {fmt_shape(shape(i))}",
            fix="add axes of size 1 to the indices (indices[..., None]) where they broadcast",
        )
    ax = _axis(axis, ndim(a))
    a_shape, i_shape = list(shape(a)), list(shape(i))
    for d, (n, m) in enumerate(zip(a_shape, i_shape, strict=True)):
        if d == ax or _same(n, m):
            continue
        if _same(m, 1):
            i_shape[d] = n
        elif _same(n, 1):
            a_shape[d] = m
        elif not (isinstance(n, int) and isinstance(m, int)):
            i_shape[d] = n  # symbolic: broadcast_to checks that m equals n, as `+` would
        else:
            raise user_error(
                "take_along_axis: indices and arr do not broadcast off the gathered axis",
                expected=f"equal sizes, or 1, on axis {d}",
                found=f"arr {fmt_shape(shape(a))}, indices {fmt_shape(shape(i))}",
                fix="make the sizes equal, or 1 where one should be repeated",
            )
    if a_shape != list(shape(a)):
        a = broadcast_to(a, a_shape)
    if i_shape != list(shape(i)):
        i = broadcast_to(i, i_shape)
    return bind_op("take_along_axis", [a, i], {"axis": ax})


def _arg(name: str, x: Any, axis: Any, keepdims: bool) -> Any:
    t = _as_tensor(x)
    if axis is None:  # the flat index: along the one axis of the flattened array, native
        out = bind_op(name, [ravel(t)], {"axis": 0, "keepdims": False})
        return reshape(out, (1,) * ndim(t)) if keepdims else out
    return bind_op(name, [t], {"axis": _axis(axis, ndim(t)), "keepdims": keepdims})


def argmax(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    return _arg("argmax", x, axis, keepdims)


def argmin(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    return _arg("argmin", x, axis, keepdims)


def take(a: Any, indices: Any, axis: int | None = None, mode: str = "raise") -> Any:
    """``np.take``: the entries of ``a`` at integer ``indices`` along ``axis`` (``None``:
    of ``a`` flattened), e.g. rows of an embedding table. An index outside the axis raises
    when the program runs, as NumPy's does; a negative one counts from the end. ``mode``
    ``"clip"`` clips the indices to the axis (a negative one to 0), ``"wrap"`` wraps them
    around it, as NumPy's."""
    if mode not in ("raise", "clip", "wrap"):
        raise ValueError(
            format_message(
                f"take: mode={mode!r} is not one of NumPy's",
                expected="'raise', 'clip' or 'wrap'",
                found=repr(mode),
                fix="pass one of those",
            )
        )
    idx = _as_tensor(indices)
    dt = _dtype_of(idx)
    if dt is None or not dt.is_int:
        raise user_error(
            "take needs integer indices",
            expected="an integer array (or Python ints)",
            found=f"indices of dtype {dt.value if dt else 'unknown'}",
            fix="convert them with .astype(snp.int32)",
        )
    if axis is None:
        a, axis = ravel(a), 0
    a = _as_tensor(a)
    if mode != "raise":
        n = shape(a)[_axis(axis, ndim(a))]
        idx = mod(idx, n) if mode == "wrap" else minimum(maximum(idx, 0), n - 1)
    return bind_op("take", [a, idx], {"axis": axis})


def sort(x: Any, axis: int | None = -1) -> Any:
    """Sorted along ``axis`` (None: the flattened array), nan last."""
    a = _as_tensor(x)
    if axis is None:
        a, axis = ravel(a), -1
    return bind_op("sort", [a], {"axis": axis, "descending": False})


def argwhere(x: Any) -> Any:
    return bind_op("nonzero", [_as_tensor(x)])


def nonzero(x: Any) -> tuple[Any, ...]:
    """Indices of the non-zero elements, one array per axis; their length is a
    data-dependent (``dynamic``) dimension bound when the program runs."""
    idx = argwhere(x)
    return tuple(_take_column(idx, i) for i in range(ndim(x)))


def _take_column(idx: Any, i: int) -> Any:
    if not isinstance(idx, Tracer):
        return np.asarray(idx)[:, i]
    col = _slice_axis(idx, 1, i, i + 1)
    return (
        bind_op("reshape", [col], {"shape": (idx.shape[0],)})
        if not isinstance(idx.shape[0], Dynamic)
        else _squeeze_dynamic(col)
    )


def _squeeze_dynamic(col: Tracer) -> Any:
    # a [dynamic, 1] column becomes [dynamic] by summing the unit axis away
    return bind_op("sum", [col], {"axis": (1,), "keepdims": False})


def count_nonzero(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """``np.count_nonzero``: an int64 count (a sum of the bool mask is one)."""
    return sum(_nonzero(x), axis=axis, keepdims=keepdims)


def _nonzero(x: Any) -> Any:
    """The bool mask of ``x``'s nonzero elements (a bool array is its own)."""
    if np.dtype(_np_dtype(x)) == np.bool_:
        return _as_tensor(x)
    return not_equal(x, 0)


# ---------------------------------------------------------------------------------------
# creation


def full(shape_: Any, fill_value: Any, dtype: Any = None) -> Any:
    dims = (shape_,) if isinstance(shape_, (int, DimExpr)) else tuple(shape_)
    if dtype is None:
        dtype = (
            np.bool_
            if isinstance(fill_value, bool)
            else np.int64
            if isinstance(fill_value, int)
            else np.float32
        )
    dt = _to_dtype(dtype)
    if not builtins.any(isinstance(d, DimExpr) for d in dims):
        return _made(np.full(dims, fill_value, dtype=dt.numpy.newbyteorder("=")))
    return bind_op("full", [], {"shape": dims, "value": float(fill_value), "dtype": dt.value})


def zeros(shape_: Any, dtype: Any = np.float32) -> Any:
    return full(shape_, 0, dtype)


def ones(shape_: Any, dtype: Any = np.float32) -> Any:
    return full(shape_, 1, dtype)


def full_like(x: Any, fill_value: Any, dtype: Any = None) -> Any:
    return full(shape(x), fill_value, dtype if dtype is not None else _np_dtype(x))


def zeros_like(x: Any, dtype: Any = None) -> Any:
    return full_like(x, 0, dtype)


def ones_like(x: Any, dtype: Any = None) -> Any:
    return full_like(x, 1, dtype)


def _np_dtype(x: Any) -> Any:
    return x.dtype if isinstance(x, Tracer) else np.asarray(x).dtype


def flip(x: Any, axis: Any = None) -> Any:
    """``np.flip``: ``x`` with the order of ``axis`` (every axis for ``None``) reversed."""
    axes = _axes(x, axis)
    return bind_op(
        "flip", [_as_tensor(x)], {"axes": tuple(range(ndim(x))) if axes is None else axes}
    )


def repeat(x: Any, repeats: int, axis: int | None = None) -> Any:
    """``np.repeat`` with one int count: each element of ``axis`` (of ``x`` flattened for
    ``None``) ``repeats`` times in a row."""
    if not isinstance(repeats, (int, np.integer)) or repeats < 0:
        raise user_error(
            "repeat takes one non-negative int count",
            expected="repeats: an int >= 0 (the same count for every element)",
            found=f"repeats={repeats!r}",
            fix="for counts per element, build the indices and use snp.take",
        )
    if axis is None:
        x, axis = ravel(x), 0
    ax = _axis(axis, ndim(x))
    dims = list(shape(x))
    wide = broadcast_to(expand_dims(x, ax + 1), (*dims[: ax + 1], int(repeats), *dims[ax + 1 :]))
    return reshape(wide, (*dims[:ax], dims[ax] * int(repeats), *dims[ax + 1 :]))


def _triangle(m: Any, k: int, lower: bool) -> Any:
    rows, cols = shape(m)[-2:]
    i = expand_dims(arange(rows), 1)
    j = expand_dims(arange(cols), 0)
    d = add(i, k) if k else i
    keep = less_equal(j, d) if lower else greater_equal(j, d)
    return where(keep, m, False if _dtype_of(m) == DType.BOOL else 0)  # m's dtype, as NumPy


def tril(m: Any, k: int = 0) -> Any:
    """``np.tril``: ``m`` with the entries above diagonal ``k`` of its last two axes zeroed
    (a causal mask: ``snp.tril(snp.ones((s, s)))``)."""
    return _triangle(m, k, lower=True)


def triu(m: Any, k: int = 0) -> Any:
    """``np.triu``: ``m`` with the entries below diagonal ``k`` of its last two axes zeroed."""
    return _triangle(m, k, lower=False)


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None) -> Any:
    """``np.arange``; ``start``, ``stop`` may be symbolic dimensions (then the length is)."""
    if stop is None:
        start, stop = 0, start
    if not builtins.any(isinstance(v, DimExpr) for v in (start, stop, step)):
        return np.arange(start, stop, step, dtype=dtype)
    if not isinstance(step, int) or step == 0:
        raise ValueError(f"arange with symbolic bounds needs a non-zero int step, found {step!r}")
    length = (stop - start + step - 1) // step if step > 0 else (start - stop - step - 1) // -step
    dt = _to_dtype(dtype) if dtype is not None else DType.I64
    out = bind_op("iota", [], {"size": (length,), "dtype": dt.value})
    if step != 1:
        out = multiply(out, step)
    if not (isinstance(start, int) and start == 0):
        out = add(out, start if isinstance(start, int) else asarray(start, out.dtype))
    return out


def _outer_of(fn: Any) -> Any:
    def outer(a: Any, b: Any) -> Any:
        """``fn`` of every element of ``a`` with every element of ``b``: the result has
        ``a``'s shape followed by ``b``'s."""
        x, y = _as_tensor(a), _as_tensor(b)
        return fn(reshape(x, (*shape(x), *(1,) * ndim(y))), y)

    return outer


def _reduce_with(red: Any) -> Any:
    def reduce(x: Any, axis: Any = 0, keepdims: bool = False) -> Any:
        """The reduction along ``axis`` (NumPy's default: 0; None: every axis)."""
        return red(x, axis=axis, keepdims=keepdims)

    return reduce


def _accumulate(x: Any, axis: int = 0) -> Any:
    """The running sums along ``axis`` (NumPy's default: 0)."""
    return cumsum(x, axis=axis)


# NumPy's ufunc methods on the binary functions (np.add.outer(a, b), np.maximum.reduce(x)):
# attributes of the functions, as a program written for NumPy calls them.
for _fn in (add, subtract, multiply, divide, floor_divide, power, mod, maximum, minimum,
            equal, not_equal, less, less_equal, greater, greater_equal, logical_and,
            logical_or, logical_xor):  # fmt: skip
    setattr(_fn, "outer", _outer_of(_fn))  # noqa: B010
for _fn, _red in ((add, sum), (multiply, prod), (maximum, max), (minimum, min),
                  (logical_and, all), (logical_or, any)):  # fmt: skip
    setattr(_fn, "reduce", _reduce_with(_red))  # noqa: B010
setattr(add, "accumulate", _accumulate)  # noqa: B010


def _no_accumulate(name: str) -> Any:
    def accumulate(x: Any, axis: int = 0) -> Any:
        raise user_error(
            f"np.{name}.accumulate is not traced",
            expected="np.add.accumulate (a running sum), which is cumsum",
            found=f"np.{name}.accumulate",
            fix="compute it with NumPy outside the traced function and pass it in, or write "
            "it with a lax.fori_loop over the axis",
        )

    return accumulate


for _fn in (subtract, multiply, divide, maximum, minimum, logical_and, logical_or):
    setattr(_fn, "accumulate", _no_accumulate(_fn.__name__))  # noqa: B010
del _fn, _red


__all__ = [
    "abs",
    "absolute",
    "add",
    "all",
    "amax",
    "amin",
    "any",
    "arange",
    "arccos",
    "arccosh",
    "arcsin",
    "arcsinh",
    "arctan",
    "arctanh",
    "argmax",
    "argmin",
    "argwhere",
    "around",
    "array",
    "asarray",
    "astype",
    "bool_",
    "broadcast_to",
    "ceil",
    "clip",
    "concatenate",
    "copy",
    "cos",
    "cosh",
    "count_nonzero",
    "cumsum",
    "divide",
    "dot",
    "e",
    "einsum",
    "equal",
    "erf",
    "exp",
    "expand_dims",
    "flip",
    "float16",
    "float32",
    "float64",
    "floor",
    "floor_divide",
    "full",
    "full_like",
    "greater",
    "greater_equal",
    "inf",
    "int8",
    "int16",
    "int32",
    "int64",
    "isfinite",
    "isinf",
    "isnan",
    "less",
    "less_equal",
    "log",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mod",
    "moveaxis",
    "multiply",
    "nan",
    "ndarray",
    "ndim",
    "negative",
    "nonzero",
    "not_equal",
    "ones",
    "ones_like",
    "pad",
    "pi",
    "power",
    "prod",
    "ravel",
    "remainder",
    "repeat",
    "reshape",
    "round",
    "shape",
    "sign",
    "sin",
    "sinh",
    "sort",
    "split",
    "sqrt",
    "square",
    "squeeze",
    "stack",
    "std",
    "subtract",
    "sum",
    "swapaxes",
    "take",
    "take_along_axis",
    "tan",
    "tanh",
    "transpose",
    "tril",
    "triu",
    "true_divide",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "var",
    "where",
    "zeros",
    "zeros_like",
]
