"""Tier 2 of a fused chain: the kernel library's tile interpreter runs it, no compiler.

`tile_kernel(chain)` turns a `chains.Chain` into tile programs (one per result; the tile
interpreter writes one result per run) and returns the executor kernel that runs them, or
raises `Unsupported` when the chain uses what the tile interpreter does not take (another
dtype than float32 and bool, or int32/int64 inputs read otherwise than exactly; too many
inputs), so that its ops stay interpreted.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shapevm import _native
from shapevm.jit.backend import nodes as N
from shapevm.jit.backend.chains import Chain
from shapevm.jit.backend.lower import Unsupported
from shapevm.native import NativeKernelError, tile

_DTYPES = {
    np.dtype(np.float32): "f32",
    np.dtype(np.bool_): "bool",
    np.dtype(np.int32): "i32",  # inputs only, read exactly (see `chains.ints_stay_exact`)
    np.dtype(np.int64): "i64",
}


def _dtype(d: Any) -> str:
    name = _DTYPES.get(np.dtype(d))
    if name is None:
        raise Unsupported(
            f"the tile interpreter takes float32, bool and integer inputs, not {np.dtype(d)}"
        )
    return name


def programs(chain: Chain) -> list[Any]:
    """The tile programs of a chain, one per result."""
    # an executor instruction reads at most MAXIN tensors (the tile interpreter, 16)
    limit = min(tile.MAX_INPUTS, N.MAXIN)
    if len(chain.inputs) > limit:
        raise Unsupported(
            f"a chain of {len(chain.inputs)} inputs (an executor instruction reads {limit})"
        )
    out = []
    for node_index, _tensor in chain.outputs:
        p = tile.Program()
        ins = [p.input(_dtype(d)) for d in chain.input_dtypes]
        values: list[Any] = []
        for node in chain.nodes:
            args = []
            for kind, v in node.args:
                if kind == "in":
                    args.append(ins[v])
                elif kind == "node":
                    args.append(values[v])
                else:
                    args.append(p.const(float(v), "bool" if isinstance(v, bool) else "f32"))
            if node.op == "identity":
                values.append(args[0])
            else:
                values.append(p.op(node.op, *args, dtype=_dtype(node.dtype)))
        try:
            out.append(
                p.build(
                    values[node_index],
                    reduce=chain.reduce or "none",
                    axes=chain.reduce_axes,
                    keepdims=chain.keepdims,
                )
            )
        except NativeKernelError as exc:
            raise Unsupported(f"the tile interpreter refused the chain: {exc}") from exc
    return out


def tile_kernel(chain: Chain, progs: list[Any] | None = None) -> Any:
    """The executor kernel that runs ``chain`` on the tile interpreter (``progs``: its
    `programs`, when the lowering has them already)."""
    return _native.chain_kernel(programs(chain) if progs is None else progs)
