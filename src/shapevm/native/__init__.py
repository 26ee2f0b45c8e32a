"""shapevm's C kernel library: dense layers against weights packed once, batched matrix
products, vector math, and (in their own modules) convolution, row operations and the tile
interpreter of fused elementwise chains.

The library (`shapevm._native`) is C11, built by ``pip install -e .`` with the system's C
compiler. It holds code for every instruction-set level it knows (AVX-512, AVX2 with FMA,
portable C) and picks the best one the CPU has at import; ``SHAPEVM_ISA=avx2`` (or
``generic``) forces a lower level, `set_isa` changes it later. Its thread pool has
``SHAPEVM_NUM_THREADS`` threads (default: the CPUs this process may use), counting the
calling thread.

Every function checks dtypes, ranks, layouts and sizes before it touches memory and raises
`NativeKernelError` (a `ValueError`) naming the kernel, what it expected, what it found and
how to fix it.

>>> import numpy as np
>>> from shapevm import native
>>> w = np.arange(6, dtype=np.float32).reshape(2, 3)      # a linear layer's [out, in] weight
>>> layer = native.pack_dense(w, np.float32([0.5, -20.0]), layout="out_in")
>>> native.dense(np.ones((1, 3), np.float32), layer, activation="relu")   # relu(x @ w.T + b)
array([[3.5, 0. ]], dtype=float32)
>>> native.dense(np.ones((1, 4), np.float32), layer)
Traceback (most recent call last):
...
shapevm.native.NativeKernelError: dense: x does not match the packed weights
  expected: x: f32[..., 3] (unit stride along the last axis)
  found:    f32[1, 4]
  fix:      the weights were packed for this many inputs per row
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Final

import numpy as np

try:
    from shapevm import _native
except ImportError as exc:  # pragma: no cover - exercised only on a broken install
    raise ImportError(
        "shapevm's C kernel library (shapevm._native) is not built or cannot be loaded: "
        f"{exc}. Build it with `pip install -e .` from the source tree (it needs a C "
        "compiler such as gcc or clang and the Python headers, e.g. Debian's python3-dev)."
    ) from exc

from shapevm.native.conv import (
    BLOCK,
    Activation,
    PackedConv,
    avg_pool2d,
    conv2d,
    conv2d_blocked,
    from_blocked,
    global_avg_pool,
    global_avg_pool_blocked,
    max_pool2d,
    pack_conv2d,
    to_blocked,
)

Array = np.ndarray[Any, Any]

NativeKernelError = _native.NativeKernelError
PackedDense = _native.PackedDense
Executor = _native.Executor
ExecMismatch = _native.ExecMismatch
ExecFailure = _native.ExecFailure
_load_kernel = _native.load_kernel  # internal: tier 3 loads its own built code only
arena_pools = _native.arena_pools
rowop_kernel = _native.rowop_kernel
conv_kernel = _native.conv_kernel
conv_pair_kernel = _native.conv_pair_kernel
conv_mean_kernel = _native.conv_mean_kernel
reorder_kernel = _native.reorder_kernel
pool_kernel = _native.pool_kernel
global_pool_kernel = _native.global_pool_kernel
attention_kernel = _native.attention_kernel
take_kernel = _native.take_kernel
sizes_kernel = _native.sizes_kernel
cast_kernel = _native.cast_kernel
argsort_kernel = _native.argsort_kernel
scan_kernel = _native.scan_kernel
int_matmul_kernel = _native.int_matmul_kernel
int_reduce_kernel = _native.int_reduce_kernel
take_along_kernel = _native.take_along_kernel
reduce_kernel = _native.reduce_kernel
compare_kernel = _native.compare_kernel
int_arith_kernel = _native.int_arith_kernel
arg_kernel = _native.arg_kernel
set_profiling = _native.set_profiling

ACTIVATIONS: Final = (
    "none", "relu", "gelu_tanh", "gelu_erf", "silu", "sigmoid", "tanh", "hard_swish",
    "leaky_relu", "relu6",
)  # fmt: skip
"""Activations of fused epilogues; ``gelu_tanh`` is GELU's tanh form, ``gelu_erf`` the
exact one; ``hard_swish`` is ``x * clip(x + 3, 0, 6) / 6`` (MobileNetV3's, PyTorch's
``hardswish``); ``leaky_relu`` is ``x < 0 ? slope * x : x``, with a slope of 0.01 by its
name alone and any other as ``activation=("leaky_relu", 0.2)``; ``relu6`` is ``clip(x, 0,
6)`` (MobileNet's)."""

VMATH_FUNCTIONS: Final = (
    "exp", "log", "tanh", "erf", "sigmoid", "sqrt", "gelu_tanh", "gelu_erf", "silu",
)  # fmt: skip


def info() -> dict[str, Any]:
    """The library's state: ``isa`` in use, ``isa_levels`` this CPU supports,
    ``num_threads``, the tile size, the compiler it was built with, ``debug`` (a build with
    bounds checks), ``pool`` counters, ``code_mapped_bytes`` (the library's machine code
    mapped into the process at import, so that no kernel's first call faults its code in;
    0 where the system cannot: not Linux, or a kernel before 5.14), and ``isa_note`` when
    ``SHAPEVM_ISA`` was not followed.

    >>> sorted(info())[:4]
    ['abi_version', 'code_mapped_bytes', 'compiler', 'debug']
    """
    return dict(_native.info())


def isa_levels() -> tuple[str, ...]:
    """The instruction-set levels this CPU runs, lowest first (``generic`` is always one)."""
    return tuple(_native.info()["isa_levels"])


def set_isa(name: str) -> None:
    """Use instruction-set level ``name`` (``avx512``, ``avx2``, ``generic``) from now on.

    Packed weights do not depend on the level, so they stay valid.
    """
    _native.set_isa(name)


def set_num_threads(n: int) -> None:
    """Threads of the pool, the calling thread included; ``0`` restores the default
    (``SHAPEVM_NUM_THREADS``, else the CPUs this process may use)."""
    _native.set_num_threads(n)


def pack_dense(w: Array, bias: Array | None = None, *, layout: str = "in_out") -> PackedDense:
    """Lay out a constant weight once for `dense`: ``layout="in_out"`` for ``w: f32[K, N]``
    used as ``x @ w``, ``"out_in"`` for a linear layer's ``w: f32[N, K]`` used as
    ``x @ w.T`` (no slower: packing reads any strides). ``bias: f32[N]`` is kept with it.

    >>> p = pack_dense(np.ones((4, 3), np.float32))
    >>> p.k, p.n, p.has_bias
    (4, 3, False)
    """
    if layout not in ("in_out", "out_in"):
        raise NativeKernelError(
            "pack_dense: unknown layout\n"
            "  expected: 'in_out' (w: f32[K, N]) or 'out_in' (w: f32[N, K])\n"
            f"  found:    {layout!r}"
        )
    return _native.pack_dense(w, bias, transposed=layout == "out_in")


def dense(
    x: Array,
    packed: PackedDense,
    *,
    activation: Activation = "none",
    residual: Array | None = None,
    gate: Array | None = None,
    alpha: float = 1.0,
    out: Array | None = None,
    threads: int = 0,
) -> Array:
    """``act(alpha * (x @ w) + bias) + residual`` for ``x: f32[..., K]``, in one pass.

    ``out`` (f32[..., N], rows evenly spaced) receives the result when given; ``residual``
    has the output's shape and may be ``out`` itself. ``gate`` instead of ``residual``
    multiplies: ``act(alpha * (x @ w) + bias) * gate``, a gated linear unit's product
    (SwiGLU's ``silu(x @ w_gate) * (x @ w_up)`` is the ``w_up`` layer with the gate's
    result as ``gate``). ``threads``: at most this many threads (0: the pool's size;
    small products run on the calling thread anyway).
    """
    if gate is not None:
        if residual is not None:
            raise NativeKernelError(
                "dense: residual and gate both given\n"
                "  expected: at most one of them (the result is added to a residual, or "
                "multiplied by a gate)\n"
                "  hint:     add or multiply the other one after the call"
            )
        return _native.dense(x, packed, out, gate, activation, alpha, threads, True)
    return _native.dense(x, packed, out, residual, activation, alpha, threads)


def matmul(a: Array, b: Array, *, alpha: float = 1.0) -> Array:
    """``alpha * (a @ b)`` for ``a: f32[..., M, K]``, ``b: f32[..., K, N]`` with NumPy's
    broadcasting of the batch dimensions and any strides (a transposed view costs nothing).

    >>> a = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    >>> matmul(a, a.transpose(0, 2, 1)).tolist()
    [[[5.0, 14.0], [14.0, 50.0]]]
    """
    return _native.matmul(a, b, alpha)


def vmath(name: str, x: Array) -> Array:
    """One of `VMATH_FUNCTIONS` on every element of a C-contiguous float32 array, with the
    vectorized code the kernels use (within 2 ulp, or 1e-6 relative, of float64)."""
    return _native.vmath(name, x)


def _warn_isa_note() -> None:
    note = _native.info().get("isa_note")
    if note and os.environ.get("SHAPEVM_ISA"):
        warnings.warn(note, RuntimeWarning, stacklevel=3)


_warn_isa_note()

from shapevm.native import rowops, tile  # noqa: E402  (the checks above run first)
from shapevm.native.rowops import (  # noqa: E402
    attention,
    layer_norm,
    log_softmax,
    rms_norm,
    softmax,
)

__all__ = [
    "ACTIVATIONS",
    "BLOCK",
    "VMATH_FUNCTIONS",
    "Activation",
    "ExecFailure",
    "ExecMismatch",
    "Executor",
    "NativeKernelError",
    "PackedConv",
    "PackedDense",
    "arena_pools",
    "arg_kernel",
    "argsort_kernel",
    "attention",
    "attention_kernel",
    "avg_pool2d",
    "cast_kernel",
    "compare_kernel",
    "conv2d",
    "conv2d_blocked",
    "conv_kernel",
    "conv_mean_kernel",
    "conv_pair_kernel",
    "dense",
    "from_blocked",
    "global_avg_pool",
    "global_avg_pool_blocked",
    "global_pool_kernel",
    "info",
    "int_arith_kernel",
    "int_matmul_kernel",
    "int_reduce_kernel",
    "isa_levels",
    "layer_norm",
    "log_softmax",
    "matmul",
    "max_pool2d",
    "pack_conv2d",
    "pack_dense",
    "pool_kernel",
    "reduce_kernel",
    "reorder_kernel",
    "rms_norm",
    "rowop_kernel",
    "rowops",
    "scan_kernel",
    "set_isa",
    "set_num_threads",
    "set_profiling",
    "sizes_kernel",
    "softmax",
    "take_along_kernel",
    "take_kernel",
    "tile",
    "to_blocked",
    "vmath",
]
