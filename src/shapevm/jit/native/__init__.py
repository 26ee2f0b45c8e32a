"""Native kernels compiled with numba: dense layers against packed weights, fused row ops,
convolution, and generated elementwise chains.

Importing this package imports numba (an optional dependency: ``pip install
'shapevm[native]'``); without it the import fails with `ImportError` and
`shapevm.jit.native_available` says False. Every kernel writes into a caller-provided
``out`` and compiles once per argument types, cached on disk across processes.
"""

from __future__ import annotations

# Before numba: sets OpenMP's wait policy, which only counts before OpenMP is loaded.
try:
    from shapevm.jit.native import _threads  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without numba
    raise ImportError(
        "shapevm.jit.native needs numba; install it with: pip install 'shapevm[native]'"
    ) from exc

try:
    import numba as _numba  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without numba
    raise ImportError(
        "shapevm.jit.native needs numba; install it with: pip install 'shapevm[native]'"
    ) from exc

from shapevm.jit.native._core import ACTIVATIONS, NativeKernelError
from shapevm.jit.native._threads import stats as thread_stats
from shapevm.jit.native.codegen import FusedKernel, clear_memory_cache, compile_fused
from shapevm.jit.native.conv import (
    PackedConv,
    conv2d_3x3,
    conv_out_hw,
    global_avg_pool,
    pack_conv3x3,
)
from shapevm.jit.native.expr import Expr, binary, canonical_text, const, evaluate, unary, where
from shapevm.jit.native.expr import input as input_expr
from shapevm.jit.native.gemm import Packed, pack_weights, packed_matmul
from shapevm.jit.native.rowops import attention, bias_act, layer_norm, softmax_rows

__all__ = [
    "ACTIVATIONS",
    "Expr",
    "FusedKernel",
    "NativeKernelError",
    "Packed",
    "PackedConv",
    "attention",
    "bias_act",
    "binary",
    "canonical_text",
    "clear_memory_cache",
    "compile_fused",
    "const",
    "conv2d_3x3",
    "conv_out_hw",
    "evaluate",
    "global_avg_pool",
    "input_expr",
    "layer_norm",
    "pack_conv3x3",
    "pack_weights",
    "packed_matmul",
    "softmax_rows",
    "thread_stats",
    "unary",
    "where",
]
