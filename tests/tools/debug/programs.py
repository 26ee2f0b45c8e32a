"""Programs the debugger tests step through, saved as .svbc files."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import shapevm as sv
import shapevm.lax as lax
import shapevm.numpy as snp

W = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)


def mlp(x):
    h = snp.maximum(x @ W, 0.0)
    return snp.tanh(h) * 2.0


def fails(x):
    return x[x > 0] + x  # the lengths differ at run time: the add fails


def looping(x, n=3):
    return lax.fori_loop(0, n, lambda i, acc: snp.tanh(acc) * 1.5, x)


def save_programs(folder: Path, loop_count: int = 3) -> dict[str, Path]:
    """``mlp.svbc`` (b <= 64), ``fails.svbc`` and ``loop.svbc`` in ``folder``."""
    (b,) = sv.symbolic_shape("b", constraints=["b <= 64"])
    out = {}
    specs = {
        "mlp": (mlp, sv.ShapeDtypeStruct((b, 8), np.float32)),
        "fails": (fails, sv.ShapeDtypeStruct((b,), np.float32)),
        "loop": (
            lambda x: looping(x, loop_count),
            sv.ShapeDtypeStruct((b, 4), np.float32),
        ),
    }
    for name, (fun, spec) in specs.items():
        fun.__name__ = name
        path = folder / f"{name}.svbc"
        sv.export(sv.jit(fun))(spec).save(path)
        out[name] = path
    return out
