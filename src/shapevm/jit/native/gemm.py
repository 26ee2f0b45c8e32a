"""Small-batch matrix products against constant weights, packed once: the public functions,
on the kernel the JIT's compiled regions run.

``y = act(x @ w + bias)`` for x: f32[M, K] (or [B, S, K]) and constant w: f32[K, N]. NumPy
hands each call to OpenBLAS, which repacks ``w`` every time; with few rows that repacking is
most of the work (W1 at b = 3: 0.69 ms in NumPy, 0.10 ms in ONNX Runtime, which packs once).

`pack_weights` lays the weights out once, in panels of 16 columns (`ukernel.pack_b16`),
inside an `entries.Dense`; `packed_matmul` checks its arguments and runs it: the
register-blocked micro-kernel of `ukernel` at every row count (tiles of six rows, and of
one to five for the rest), bias and activation applied to each finished tile, on numba's
thread pool when `entries.ThreadChoice` measured it faster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from shapevm.jit.native._core import (
    NativeKernelError,
    act_code,
    check_c_contiguous,
    check_f32,
    check_shape,
    spec,
)

F32 = np.ndarray[Any, np.dtype[np.float32]]

PARALLEL_MIN_MACS: Final = 1 << 19
"""Below this many multiply-adds (~15 us on one core) a launch of the pool, even of spinning
workers (2-7 us, see `_threads`), saves too little; above, `entries.ThreadChoice` measures
which way is faster."""


@dataclass(frozen=True, eq=False)
class Packed:
    """Weights of ``x @ w + bias``, laid out once for `packed_matmul`: ``dense`` is the
    `entries.Dense` holding them (``dense.panels``: f32[ceil(N / 16), K, 16], zeros past N;
    ``dense.bias``: f32[16 ceil(N / 16)], zeros past N or when the layer has none)."""

    dense: Any
    k: int
    n: int
    has_bias: bool

    @property
    def nbytes(self) -> int:
        return int(self.dense.nbytes)


def pack_weights(w: Any, bias: Any = None) -> Packed:
    """Pack constant weights ``w: f32[K, N]`` (the ``x @ w`` orientation) and ``bias: f32[N]``.

    >>> import numpy as np
    >>> p = pack_weights(np.ones((3, 5), np.float32), np.arange(5, dtype=np.float32))
    >>> p.k, p.n, p.dense.panels.shape, p.dense.bias[:6].tolist()
    (3, 5, (1, 3, 16), [0.0, 1.0, 2.0, 3.0, 4.0, 0.0])
    """
    from shapevm.jit.native.entries import Dense

    check_f32("pack_weights", "w", w)
    if w.ndim != 2:
        raise NativeKernelError(
            "pack_weights: w must be a matrix",
            expected="w: f32[K, N] (x @ w orientation)",
            found=f"w: {spec(w)}",
            fix="pass a linear layer's weight [out, in] as weight.T",
        )
    k, n = w.shape
    if bias is not None:
        check_f32("pack_weights", "bias", bias)
        check_shape("pack_weights", "bias", bias, (n,))
    dense = Dense(np.ascontiguousarray(w), bias)
    return Packed(dense=dense, k=k, n=n, has_bias=bias is not None)


def _rows(name: str, x: Any, out: Any, packed: Packed) -> None:
    check_f32(name, "x", x)
    check_f32(name, "out", out, writable=True)
    if x.ndim not in (2, 3) or x.shape[-1] != packed.k:
        raise NativeKernelError(
            f"{name}: x does not match the packed weights",
            expected=f"x: f32[M, {packed.k}] or f32[B, S, {packed.k}]",
            found=f"x: {spec(x)}",
            fix=f"the weights were packed for K = {packed.k} inputs per row",
        )
    check_shape(name, "out", out, (*x.shape[:-1], packed.n))
    check_c_contiguous(name, "out", out)


def packed_matmul(
    x: np.ndarray[Any, Any], packed: Packed, out: np.ndarray[Any, Any], epilogue: str = "none"
) -> np.ndarray[Any, Any]:
    """``out[...] = act(x @ w + bias)`` without allocating; returns ``out``.

    ``x``: f32[M, K] or f32[B, S, K]; ``out``: C-contiguous f32[M, N] or f32[B, S, N];
    ``epilogue``: ``"none"``, ``"relu"``, ``"gelu_tanh"``, ``"gelu_erf"`` or ``"silu"``.

    >>> import numpy as np
    >>> p = pack_weights(np.eye(3, dtype=np.float32), np.float32([0.5, -2.0, 0.0]))
    >>> packed_matmul(np.float32([[1, 1, -1]]), p, np.empty((1, 3), np.float32), "relu")
    array([[1.5, 0. , 0. ]], dtype=float32)
    """
    act = act_code("packed_matmul", epilogue)
    _rows("packed_matmul", x, out, packed)
    packed.dense(x, out, act)
    return out


__all__ = ["PARALLEL_MIN_MACS", "Packed", "pack_weights", "packed_matmul"]
