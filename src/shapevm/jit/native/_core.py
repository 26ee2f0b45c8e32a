"""What every native kernel shares: numba options, a vectorizable ``exp``, the activations,
and argument checks with messages in the package's one layout.

numba's own ``math.exp``/``math.tanh`` on float32 are calls into libm that LLVM cannot
vectorize (there is no vector math library in a plain numba install): a GELU written with
``math.tanh`` costs ~28 ns per element, six times NumPy's. `exp32` is branch-free float32
arithmetic that the loop vectorizer turns into AVX code, and every activation here is written
through it.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from typing import Any, Final, TypeVar, cast

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from shapevm.bytecode.errors import format_message
from shapevm.jit import numba_cache

numba_cache.install()  # before the decorators below: their machine code lives beside them

F = TypeVar("F", bound=Callable[..., Any])

# reassoc lets LLVM vectorize float reductions (dot products, row sums) with several partial
# sums; contract allows fused multiply-add. Neither changes results by more than a few ulps
# of the float32 sum. No nnan/ninf: NaN and inf must go through the kernels as they do in
# NumPy.
FASTMATH: Final = frozenset({"reassoc", "contract", "nsz"})
# The exp reduction below (Cody-Waite) breaks if its two-part subtraction is reassociated.
_EXACT: Final = frozenset({"contract"})


def kernel(fn: F) -> F:
    """Compile ``fn`` with the kernels' options; machine code is cached on disk.

    ``error_model="numpy"``: float division by zero gives inf/NaN as in NumPy instead of
    raising, which also takes the check (a branch that stops vectorization) out of loops.
    """
    return cast(
        F, numba.njit(cache=True, nogil=True, error_model="numpy", fastmath=set(FASTMATH))(fn)
    )


def parallel_kernel(fn: F) -> F:
    """Like `kernel`, with ``prange`` loops spread over numba's thread pool."""
    compiled = numba.njit(
        cache=True, nogil=True, error_model="numpy", fastmath=set(FASTMATH), parallel=True
    )(fn)
    return cast(F, compiled)


def scalar_fn(fn: F) -> F:
    """A small scalar helper, inlined into its callers by numba itself.

    LLVM leaves a numba function that calls another one out of line (the calling convention
    makes it look too big), and a call in a loop stops vectorization; numba's own inlining
    happens before LLVM sees the loop. The helper then runs under its caller's fastmath flags.
    """
    compiled = numba.njit(
        cache=True, nogil=True, error_model="numpy", fastmath=set(FASTMATH), inline="always"
    )(fn)
    return cast(F, compiled)


def _exact_kernel(fn: F) -> F:
    return cast(
        F, numba.njit(cache=True, nogil=True, error_model="numpy", fastmath=set(_EXACT))(fn)
    )


def _pow2_typer(typingctx: Any, n: Any) -> Any:
    """2.0**n for a whole float32 ``n`` in [-126, 127], built from the exponent bits."""
    if n != types.float32:
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        i32 = ir.IntType(32)
        k = builder.fptosi(args[0], i32)
        k = builder.add(k, ir.Constant(i32, 127))
        k = builder.shl(k, ir.Constant(i32, 23))
        return builder.bitcast(k, ir.FloatType())

    return types.float32(types.float32), codegen


_pow2: Any = intrinsic(_pow2_typer)


_LOG2E: Final = np.float32(1.4426950408889634)
_LN2_HI: Final = np.float32(0.693359375)
_LN2_LO: Final = np.float32(-2.12194440e-4)
_EXP_HI: Final = np.float32(88.72283)
_EXP_LO: Final = np.float32(-87.33654)
_HALF: Final = np.float32(0.5)
_ONE: Final = np.float32(1.0)
_TWO: Final = np.float32(2.0)
_ZERO: Final = np.float32(0.0)
_INF: Final = np.float32(np.inf)
_P0: Final = np.float32(1.9875691500e-4)
_P1: Final = np.float32(1.3981999507e-3)
_P2: Final = np.float32(8.3334519073e-3)
_P3: Final = np.float32(4.1665795894e-2)
_P4: Final = np.float32(1.6666665459e-1)
_P5: Final = np.float32(5.0000001201e-1)


@_exact_kernel
def exp32(x: Any) -> Any:
    """float32 exp within 2 ulp (Cephes' polynomial); results below FLT_MIN flush to 0.

    Not inlined by numba (`scalar_fn`) because it must keep its own fastmath flags; it has
    no calls, and LLVM inlines it.
    """
    xc = x if x < _EXP_HI else _EXP_HI
    xc = xc if xc > _EXP_LO else _EXP_LO
    n = np.floor(xc * _LOG2E + _HALF)
    r = xc - n * _LN2_HI
    r = r - n * _LN2_LO
    p = ((((_P0 * r + _P1) * r + _P2) * r + _P3) * r + _P4) * r + _P5
    # 2**n as two factors: n reaches 128 just below the overflow threshold, and 2**128
    # does not fit a float32 although the product does.
    half = np.floor(n * _HALF)
    y = (p * (r * r) + r + _ONE) * _pow2(half) * _pow2(n - half)
    y = _INF if x > _EXP_HI else y
    y = _ZERO if x < _EXP_LO else y
    return x if x != x else y


_E0: Final = np.float32(-1.26551223)
_E1: Final = np.float32(1.00002368)
_E2: Final = np.float32(0.37409196)
_E3: Final = np.float32(0.09678418)
_E4: Final = np.float32(-0.18628806)
_E5: Final = np.float32(0.27886807)
_E6: Final = np.float32(-1.13520398)
_E7: Final = np.float32(1.48851587)
_E8: Final = np.float32(-0.82215223)
_E9: Final = np.float32(0.17087277)


@scalar_fn
def erfc32(x: Any) -> Any:
    """float32 erfc (Numerical Recipes' erfcc), relative error below 1e-5 on the whole line.

    3e-7 for x <= 2, growing with x to 8e-6 where erfc underflows (x * x is rounded).
    """
    z = abs(x)
    t = _ONE / (_ONE + _HALF * z)
    p = _E8 + t * _E9
    p = _E7 + t * p
    p = _E6 + t * p
    p = _E5 + t * p
    p = _E4 + t * p
    p = _E3 + t * p
    p = _E2 + t * p
    p = _E1 + t * p
    p = _E0 + t * p
    ans = t * exp32(p - z * z)
    return ans if x >= _ZERO else _TWO - ans


_GELU_C: Final = np.float32(-2.0 * math.sqrt(2.0 / math.pi))
_GELU_A: Final = np.float32(0.044715)
_NEG_INV_SQRT2: Final = np.float32(-1.0 / math.sqrt(2.0))


@scalar_fn
def gelu_tanh32(v: Any) -> Any:
    """0.5 v (1 + tanh(u)) written as v * sigmoid(2u): one exp, no cancellation."""
    return v / (_ONE + exp32(_GELU_C * (v + _GELU_A * v * v * v)))


@scalar_fn
def gelu_erf32(v: Any) -> Any:
    """0.5 v (1 + erf(v / sqrt 2)) written as 0.5 v erfc(-v / sqrt 2), accurate for v << 0."""
    return _HALF * v * erfc32(_NEG_INV_SQRT2 * v)


@scalar_fn
def silu32(v: Any) -> Any:
    return v / (_ONE + exp32(-v))


@scalar_fn
def relu32(v: Any) -> Any:
    # A NaN stays NaN, as with np.maximum(v, 0).
    return _ZERO if v < _ZERO else v


ACT_NONE: Final = 0
ACT_RELU: Final = 1
ACT_GELU_TANH: Final = 2
ACT_GELU_ERF: Final = 3
ACT_SILU: Final = 4
ACTIVATIONS: Final = {
    "none": ACT_NONE,
    "relu": ACT_RELU,
    "gelu_tanh": ACT_GELU_TANH,
    "gelu_erf": ACT_GELU_ERF,
    "silu": ACT_SILU,
}
"""The epilogues a kernel can fuse, by the name its callers use."""


@scalar_fn
def apply_act(v: Any, act: int) -> Any:
    """One activation by its code; a branch per element is cheap next to a dot product."""
    if act == ACT_RELU:
        return relu32(v)
    if act == ACT_GELU_TANH:
        return gelu_tanh32(v)
    if act == ACT_GELU_ERF:
        return gelu_erf32(v)
    if act == ACT_SILU:
        return silu32(v)
    return v


@kernel
def bias_act_rows(x: Any, bias: Any, act: int, out: Any, j0: int, j1: int) -> None:
    """``out[i, j] = act(x[i, j] + bias[j])`` for every row and ``j0 <= j < j1``.

    One loop per activation, so that each is a straight loop LLVM vectorizes. The loops run
    over slices from index 0: with ``range(j0, j1)`` numba's negative-index wraparound stays
    in the loop and the vectorizer gives up. ``x`` may be ``out`` itself (then the
    vectorizer's overlap check fails and the scalar loop runs, so in-place callers use
    `act_rows_inplace`).
    """
    b = bias[j0:j1]
    for i in range(x.shape[0]):
        xr = x[i, j0:j1]
        o = out[i, j0:j1]
        if act == ACT_NONE:
            for j in range(o.size):
                o[j] = xr[j] + b[j]
        elif act == ACT_RELU:
            for j in range(o.size):
                o[j] = relu32(xr[j] + b[j])
        elif act == ACT_GELU_TANH:
            for j in range(o.size):
                o[j] = gelu_tanh32(xr[j] + b[j])
        elif act == ACT_GELU_ERF:
            for j in range(o.size):
                o[j] = gelu_erf32(xr[j] + b[j])
        else:
            for j in range(o.size):
                o[j] = silu32(xr[j] + b[j])


@kernel
def act_rows_inplace(y: Any, bias: Any, act: int, j0: int, j1: int) -> None:
    """``y[i, j] = act(y[i, j] + bias[j])`` for every row and ``j0 <= j < j1``."""
    b = bias[j0:j1]
    for i in range(y.shape[0]):
        o = y[i, j0:j1]
        if act == ACT_NONE:
            for j in range(o.size):
                o[j] = o[j] + b[j]
        elif act == ACT_RELU:
            for j in range(o.size):
                o[j] = relu32(o[j] + b[j])
        elif act == ACT_GELU_TANH:
            for j in range(o.size):
                o[j] = gelu_tanh32(o[j] + b[j])
        elif act == ACT_GELU_ERF:
            for j in range(o.size):
                o[j] = gelu_erf32(o[j] + b[j])
        else:
            for j in range(o.size):
                o[j] = silu32(o[j] + b[j])


@kernel
def act_vec_inplace(o: Any, b: Any, act: int) -> None:
    """``o[j] = act(o[j] + b)`` for a 1-D ``o`` and one bias value (a channel's)."""
    if act == ACT_NONE:
        for j in range(o.size):
            o[j] = o[j] + b
    elif act == ACT_RELU:
        for j in range(o.size):
            o[j] = relu32(o[j] + b)
    elif act == ACT_GELU_TANH:
        for j in range(o.size):
            o[j] = gelu_tanh32(o[j] + b)
    elif act == ACT_GELU_ERF:
        for j in range(o.size):
            o[j] = gelu_erf32(o[j] + b)
    else:
        for j in range(o.size):
            o[j] = silu32(o[j] + b)


class NativeKernelError(ValueError):
    """Arguments a native kernel cannot take; the message says expected vs found and a fix."""

    def __init__(self, headline: str, *, expected: str = "", found: str = "", fix: str = ""):
        self.headline = headline
        super().__init__(format_message(headline, expected=expected, found=found, fix=fix))


def act_code(kernel_name: str, epilogue: str) -> int:
    """The code of an activation name, or an error that lists the names and a close one."""
    code = ACTIVATIONS.get(epilogue)
    if code is None:
        close = difflib.get_close_matches(str(epilogue), ACTIVATIONS, n=1)
        raise NativeKernelError(
            f"{kernel_name}: unknown epilogue {epilogue!r}",
            expected=" | ".join(repr(n) for n in ACTIVATIONS),
            found=repr(epilogue),
            fix=f"did you mean {close[0]!r}?" if close else "use one of the expected names",
        )
    return code


def spec(a: np.ndarray[Any, Any]) -> str:
    """``f32[3, 256]`` — how messages show an array."""
    names = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64", "bool": "bool"}
    name = names.get(a.dtype.name, a.dtype.name)
    return f"{name}[{', '.join(str(d) for d in a.shape)}]"


def check_f32(kernel_name: str, arg: str, a: Any, *, writable: bool = False) -> None:
    """``a`` must be a float32 ndarray (and writable when it receives results)."""
    if not isinstance(a, np.ndarray):
        raise NativeKernelError(
            f"{kernel_name}: {arg} must be a float32 array",
            expected=f"{arg}: f32[...] (numpy.ndarray)",
            found=f"{arg}: {type(a).__name__} (not an array)",
            fix=f"pass np.asarray({arg}, np.float32)",
        )
    if a.dtype != np.float32:
        raise NativeKernelError(
            f"{kernel_name}: {arg} must be a float32 array",
            expected=f"{arg}: f32[...]",
            found=f"{arg}: {spec(a)}",
            fix=f"pass {arg}.astype(np.float32)",
        )
    if writable and not a.flags.writeable:
        raise NativeKernelError(
            f"{kernel_name}: {arg} is read-only",
            expected=f"{arg} writable",
            found=f"{arg}: {spec(a)} with flags.writeable == False",
            fix="pass a preallocated array the kernel may write into",
        )


def check_shape(
    kernel_name: str, arg: str, a: np.ndarray[Any, Any], shape: tuple[int, ...]
) -> None:
    """``a.shape`` must equal ``shape``."""
    if a.shape != shape:
        want = f"f32[{', '.join(str(d) for d in shape)}]"
        raise NativeKernelError(
            f"{kernel_name}: {arg} has the wrong shape",
            expected=f"{arg}: {want}",
            found=f"{arg}: {spec(a)}",
            fix=f"allocate {arg} as np.empty({shape}, np.float32)",
        )


def check_c_contiguous(kernel_name: str, arg: str, a: np.ndarray[Any, Any]) -> None:
    """Results are written through flat row-major indexing."""
    if not a.flags.c_contiguous:
        raise NativeKernelError(
            f"{kernel_name}: {arg} must be C-contiguous",
            expected=f"{arg}.flags.c_contiguous",
            found=f"{arg}: {spec(a)} with strides {a.strides}",
            fix=f"allocate {arg} with np.empty(shape, np.float32)",
        )
