"""The row-operation, attention and elementwise rows of the kernel benchmark
(``shapevm bench --kernels``, measured by `shapevm.tools.bench.kernels.measure_case`).

Shapes are W3's (``BENCHMARKS.md``): layer norm over ``x[b, s, 256]`` (``LayerNormalization``
in ONNX Runtime), softmax over the scores ``[b, 4, s, s]`` (``Softmax``), attention with 4
heads of 64 read as views of ``[b, s, 256]`` projections (``com.microsoft``'s
``MultiHeadAttention``, which takes the same ``[b, s, 256]`` tensors). GELU's tanh form
written out and a 6-op chain run through the tile interpreter on 4k to 1M elements, against
``com.microsoft.FastGelu`` and the chain's six ONNX nodes; NumPy runs what a user writes.

>>> [(c.group, c.shape) for c in kernel_cases(quick=True)][:3]
[('layer_norm', 'b=1, s=16'), ('softmax', 'b=1, s=16'), ('attention', 'b=1, s=16')]
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from shapevm import native
from shapevm.models.workloads import EPS, HEAD_DIM, HEADS, WIDTH
from shapevm.native import tile
from shapevm.tools.bench.kernel_cases import onnx_graph
from shapevm.tools.bench.kernels import Array, KernelCase, OnnxGraph

W3_SHAPES: tuple[tuple[int, int], ...] = ((1, 16), (1, 37), (2, 64), (4, 128), (1, 200))
SIZES: tuple[int, ...] = (4096, 16384, 65536, 262144, 1048576)
GELU_C = math.sqrt(2.0 / math.pi)
F = np.float32


def _node(op: str, ins: list[str], out: str, **attrs: Any) -> Any:
    from onnx import helper

    return helper.make_node(op, ins, [out], **attrs)


def layer_norm_case(b: int, s: int) -> KernelCase:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((b, s, WIDTH)).astype(F)
    g = (1 + 0.1 * rng.standard_normal(WIDTH)).astype(F)
    beta = (0.1 * rng.standard_normal(WIDTH)).astype(F)
    out = np.empty_like(x)

    def numpy_ln() -> Array:
        xc = x - x.mean(-1, keepdims=True)
        return np.asarray(xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + F(EPS)) * g + beta)

    def graph() -> OnnxGraph:
        node = _node("LayerNormalization", ["x", "g", "b"], "y", axis=-1, epsilon=EPS)
        return onnx_graph([node], {"x": x}, {"y": x.shape}, {"g": g, "b": beta})

    return KernelCase(
        "layer_norm", "layer norm (affine)", f"b={b}, s={s}",
        lambda: native.layer_norm(x, g, beta, eps=EPS, out=out), numpy_ln, graph,
    )  # fmt: skip


def softmax_case(b: int, s: int) -> KernelCase:
    x = np.random.default_rng(1).standard_normal((b, HEADS, s, s)).astype(F)
    out = np.empty_like(x)

    def numpy_softmax() -> Array:
        e = np.exp(x - x.max(-1, keepdims=True))
        return np.asarray(e / e.sum(-1, keepdims=True))

    def graph() -> OnnxGraph:
        return onnx_graph([_node("Softmax", ["x"], "y", axis=-1)], {"x": x}, {"y": x.shape})

    return KernelCase(
        "softmax", "softmax of W3's scores", f"b={b}, s={s}",
        lambda: native.softmax(x, out=out), numpy_softmax, graph,
    )  # fmt: skip


def attention_case(b: int, s: int) -> KernelCase:
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((b, s, WIDTH)).astype(F) for _ in range(3))
    out = np.empty((b, s, WIDTH), F)
    scale = 1.0 / math.sqrt(HEAD_DIM)

    def heads(t: Array) -> Array:
        return np.asarray(t.reshape(b, s, HEADS, HEAD_DIM).transpose(0, 2, 1, 3))

    def numpy_attention() -> Array:
        sc = (heads(q) @ heads(k).transpose(0, 1, 3, 2)) * F(scale)
        e = np.exp(sc - sc.max(-1, keepdims=True))
        o = (e / e.sum(-1, keepdims=True)) @ heads(v)
        return np.asarray(o.transpose(0, 2, 1, 3).reshape(b, s, WIDTH))

    def graph() -> OnnxGraph:
        node = _node("MultiHeadAttention", ["q", "k", "v"], "y", domain="com.microsoft",
                     num_heads=HEADS)  # fmt: skip
        return onnx_graph([node], {"q": q, "k": k, "v": v}, {"y": out.shape})

    def run_native() -> Array:
        native.attention(heads(q), heads(k), heads(v), scale=scale, out=heads(out))
        return out

    return KernelCase(
        "attention", "attention, 4 heads of 64", f"b={b}, s={s}", run_native, numpy_attention,
        graph,
    )  # fmt: skip


def gelu_program() -> tile.TileProgram:
    """GELU's tanh form written out, as a user writes it: 0.5 x (1 + tanh(c (x + 0.044715
    x^3))), eight ops."""
    p = tile.Program()
    x = p.input()
    cube = p.op("mul", p.op("mul", x, x), x)
    inner = p.op("mul", p.op("add", x, p.op("mul", cube, p.const(0.044715))), p.const(GELU_C))
    half = p.op("mul", x, p.const(0.5))
    return p.build(p.op("mul", half, p.op("add", p.op("tanh", inner), p.const(1.0))))


def chain_program() -> tile.TileProgram:
    """A 6-op chain: (x * 0.5 + 1) * x - sigmoid(x) * 0.25."""
    p = tile.Program()
    x = p.input()
    left = p.op("mul", p.op("add", p.op("mul", x, p.const(0.5)), p.const(1.0)), x)
    right = p.op("mul", p.op("sigmoid", x), p.const(0.25))
    return p.build(p.op("sub", left, right))


def gelu_case(n: int) -> KernelCase:
    x = np.random.default_rng(3).standard_normal(n).astype(F)
    out, prog = np.empty_like(x), gelu_program()

    def numpy_gelu() -> Array:
        return np.asarray(F(0.5) * x * (1 + np.tanh(F(GELU_C) * (x + F(0.044715) * x * x * x))))

    def graph() -> OnnxGraph:
        node = _node("FastGelu", ["x"], "y", domain="com.microsoft")
        return onnx_graph([node], {"x": x}, {"y": x.shape})

    return KernelCase(
        "gelu", "GELU (tanh form) written out, tile interpreter", f"n={n // 1024}k",
        lambda: tile.run(prog, x, out=out), numpy_gelu, graph,
    )  # fmt: skip


def chain_case(n: int) -> KernelCase:
    x = np.random.default_rng(4).standard_normal(n).astype(F)
    out, prog = np.empty_like(x), chain_program()

    def numpy_chain() -> Array:
        return np.asarray((x * F(0.5) + F(1.0)) * x - F(0.25) / (F(1.0) + np.exp(-x)))

    def graph() -> OnnxGraph:
        steps = (("Mul", ["x", "half"]), ("Add", ["t1", "one"]), ("Mul", ["t2", "x"]),
                 ("Sigmoid", ["x"]), ("Mul", ["t4", "quarter"]), ("Sub", ["t3", "t5"]))  # fmt: skip
        nodes = [_node(op, ins, f"t{i + 1}" if i < 5 else "y") for i, (op, ins) in enumerate(steps)]
        consts = {k: np.array([v], F) for k, v in (("half", 0.5), ("one", 1), ("quarter", 0.25))}
        return onnx_graph(nodes, {"x": x}, {"y": x.shape}, consts)

    return KernelCase(
        "chain", "6-op chain, tile interpreter", f"n={n // 1024}k",
        lambda: tile.run(prog, x, out=out), numpy_chain, graph,
    )  # fmt: skip


def kernel_cases(quick: bool = False) -> list[KernelCase]:
    """Every row: the row ops and attention at W3's shapes, the chains at 4k..1M elements
    (``quick``: the first shape and size only)."""
    shapes = W3_SHAPES[:1] if quick else W3_SHAPES
    sizes = SIZES[:1] if quick else SIZES
    cases = [make(b, s) for b, s in shapes for make in (layer_norm_case, softmax_case,
                                                         attention_case)]  # fmt: skip
    return cases + [make(n) for make in (gelu_case, chain_case) for n in sizes]


__all__ = ["chain_program", "gelu_program", "kernel_cases"]
