"""The dense-layer and batched-matmul rows of the kernel benchmark, at the shapes of W1 and
W3 (``BENCHMARKS.md``), with their one-node ONNX graphs.

Dense rows use the workloads' own weights in PyTorch's ``[out, in]`` layout, used as
``x @ W.T`` with the layer's bias and activation: shapevm packs the weight once
(`shapevm.native.pack_dense` with ``layout="out_in"``) and fuses the epilogue; ONNX Runtime
runs ``Gemm(transB=1)`` followed by ``Relu`` or ``com.microsoft.FastGelu`` (its fused GELU,
tanh form); NumPy runs ``x @ W.T + b`` and the activation as a user writes it. Matmul rows
are W3's attention products per head, ``(q @ k^T) / 8`` with ``k^T`` a transposed view
(ONNX: ``Transpose`` + ``MatMul`` + ``Mul``, which ONNX Runtime fuses) and ``att @ v``.

>>> [c.shape for c in dense_cases(quick=True)][:2]
['b=1', 'b=64']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from shapevm.models import WORKLOADS, make_weights
from shapevm.tools.bench.kernels import Array, KernelCase, OnnxGraph

W1_ROWS = (1, 3, 8, 17, 32, 64)
W1_LAYERS = (("fc1", "relu"), ("fc2", "gelu_tanh"), ("fc3", "none"))
W3_LAYERS = (("attn.qkv", "none"), ("attn.proj", "none"), ("mlp.fc1", "gelu_tanh"),
             ("mlp.fc2", "none"))  # fmt: skip
GELU_C = math.sqrt(2.0 / math.pi)


def onnx_graph(
    nodes: Sequence[Any],
    inputs: dict[str, Array],
    outputs: dict[str, tuple[int, ...]],
    initializers: dict[str, Array] | None = None,
) -> OnnxGraph:
    """A checked ONNX model (opset 17, plus Microsoft's contrib domain) of ``nodes``
    (``onnx.helper.make_node``): graph inputs ``inputs`` (fed as given), float32
    ``outputs`` of the given shapes, constant ``initializers``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        list(nodes),
        "kernel",
        [
            helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape))
            for n, a in inputs.items()
        ],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in outputs.items()],
        initializer=[numpy_helper.from_array(a, n) for n, a in (initializers or {}).items()],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    onnx.checker.check_model(model)
    return OnnxGraph(model, dict(inputs))


def _act_node(act: str, src: str, dst: str) -> Any:
    from onnx import helper

    if act == "relu":
        return helper.make_node("Relu", [src], [dst])
    return helper.make_node("FastGelu", [src], [dst], domain="com.microsoft")


def _dense_onnx(x: Array, w: Array, b: Array, act: str) -> OnnxGraph:
    from onnx import helper

    gemm_out = "y" if act == "none" else "h"
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], [gemm_out], transB=1)]
    if act != "none":
        nodes.append(_act_node(act, "h", "y"))
    return onnx_graph(nodes, {"x": x}, {"y": (x.shape[0], w.shape[0])}, {"w": w, "b": b})


def _numpy_act(act: str, h: Array) -> Array:
    y: Array = h
    if act == "relu":
        y = np.maximum(h, 0.0)
    elif act == "gelu_tanh":
        y = 0.5 * h * (1.0 + np.tanh(np.float32(GELU_C) * (h + 0.044715 * h * h * h)))
    return y


def dense_case(label: str, shape: str, x: Array, w: Array, b: Array, act: str) -> KernelCase:
    """``act(x @ w.T + b)`` for a PyTorch-layout weight ``w: f32[out, in]``."""
    from shapevm import native

    packed = native.pack_dense(w, b, layout="out_in")
    out = np.empty((x.shape[0], w.shape[0]), np.float32)
    w_t = w.T

    def run_shapevm() -> Array:
        return native.dense(x, packed, activation=act, out=out)

    def run_numpy() -> Array:
        return _numpy_act(act, x @ w_t + b)

    def graph() -> OnnxGraph:
        return _dense_onnx(x, w, b, act)

    name = f"{label} {w.shape[1]}→{w.shape[0]}" + ("" if act == "none" else f" +{act}")
    return KernelCase("dense", name, shape, run_shapevm, run_numpy, graph)


def _rows_input(rows: int, k: int, seed: int) -> Array:
    return np.random.default_rng(seed).standard_normal((rows, k)).astype(np.float32)


def dense_cases(quick: bool = False) -> list[KernelCase]:
    """W1's three layers at b = 1..64 rows, W3's four at rows = b * s of its shapes."""
    cases = []
    p1, p3 = make_weights("W1"), make_weights("W3")
    w1_rows = (W1_ROWS[0], W1_ROWS[-1]) if quick else W1_ROWS
    for layer, act in W1_LAYERS[: 1 if quick else None]:
        w, b = p1[f"{layer}.weight"], p1[f"{layer}.bias"]
        for rows in w1_rows:
            x = _rows_input(rows, w.shape[1], rows)
            cases.append(dense_case(f"W1 {layer}", f"b={rows}", x, w, b, act))
    w3_shapes = WORKLOADS["W3"].shapes[: 1 if quick else None]
    for layer, act in W3_LAYERS[: 1 if quick else None]:
        w, b = p3[f"{layer}.weight"], p3[f"{layer}.bias"]
        for bsz, s, _ in w3_shapes:
            x = _rows_input(bsz * s, w.shape[1], bsz * s)
            cases.append(dense_case(f"W3 {layer}", f"{bsz}×{s} ({bsz * s} rows)", x, w, b, act))
    return cases


def _heads(b: int, s: int, seed: int) -> Array:
    return np.random.default_rng(seed).standard_normal((b, 4, s, 64)).astype(np.float32)


def _scores_case(b: int, s: int) -> KernelCase:
    from shapevm import native

    q, k = _heads(b, s, 1), _heads(b, s, 2)
    k_t = k.transpose(0, 1, 3, 2)

    def graph() -> OnnxGraph:
        from onnx import helper

        nodes = [
            helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
            helper.make_node("MatMul", ["q", "kt"], ["s"]),
            helper.make_node("Mul", ["s", "scale"], ["y"]),
        ]
        scale = {"scale": np.array([0.125], np.float32)}
        return onnx_graph(nodes, {"q": q, "k": k}, {"y": (b, 4, s, s)}, scale)

    return KernelCase(
        "matmul",
        "W3 q @ kᵀ / 8",
        f"{b}×4×{s}×64",
        lambda: native.matmul(q, k_t, alpha=0.125),
        lambda: (q @ k_t) * np.float32(0.125),
        graph,
    )


def _weighted_case(b: int, s: int) -> KernelCase:
    from shapevm import native

    rng = np.random.default_rng(3)
    att = rng.random((b, 4, s, s), dtype=np.float32)
    att /= att.sum(axis=-1, keepdims=True)
    v = _heads(b, s, 4)

    def graph() -> OnnxGraph:
        from onnx import helper

        nodes = [helper.make_node("MatMul", ["att", "v"], ["y"])]
        return onnx_graph(nodes, {"att": att, "v": v}, {"y": v.shape})

    return KernelCase(
        "matmul",
        "W3 att @ v",
        f"{b}×4×{s}×{s}",
        lambda: native.matmul(att, v),
        lambda: att @ v,
        graph,
    )


def matmul_cases(quick: bool = False) -> list[KernelCase]:
    """W3's two attention products per head at each of its (b, s)."""
    shapes = WORKLOADS["W3"].shapes[: 1 if quick else None]
    return [make(b, s) for b, s, _ in shapes for make in (_scores_case, _weighted_case)]


BUILTIN: dict[str, Callable[[bool], list[KernelCase]]] = {
    "dense": dense_cases,
    "matmul": matmul_cases,
}
"""The groups this module measures itself."""
