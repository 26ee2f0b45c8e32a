"""ONNX models for the importer's tests, written the way exporters write them.

`transformer_block` is a pre-norm transformer block as ``torch.onnx.export`` emits it with
dynamic axes ``{0: "batch", 1: "sequence"}`` at opset 17: the head split is
``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``, the attention scale is
``Sqrt(Cast(Gather(Shape(q), -1)))``, the causal mask is built from ``Range`` over the
sequence length, layer norm and GELU are written out (ReduceMean, Pow, Erf). `numpy_block`
computes the same block with NumPy, as the reference.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WIDTH, HEADS = 32, 4
HEAD = WIDTH // HEADS


class Graph:
    """Nodes and initializers, with fresh names for intermediates."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def const(self, value: Any, dtype: Any = None) -> str:
        name = self._fresh("const")
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def ints(self, *values: int) -> str:
        return self.const(np.array(values, np.int64))

    def op(self, op_type: str, *inputs: str, outputs: int = 1, **attrs: Any) -> Any:
        outs = [self._fresh(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, **attrs))
        return outs[0] if outputs == 1 else outs

    def _fresh(self, stem: str) -> str:
        self._n += 1
        return f"{stem}_{self._n}"

    def model(self, inputs: list[Any], outputs: list[Any], opset: int = 17) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, "test_model", inputs, outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8
        return model


def _dim(g: Graph, x: str, axis: int) -> str:
    """``Unsqueeze(Gather(Shape(x), axis), 0)``: one dimension as a 1-element int64 tensor."""
    picked = g.op("Gather", g.op("Shape", x), g.const(np.array(axis, np.int64)), axis=0)
    return g.op("Unsqueeze", picked, g.ints(0))


def _layer_norm(g: Graph, x: str, w: Any, b: Any) -> str:
    mean = g.op("ReduceMean", x, axes=[-1])
    centered = g.op("Sub", x, mean)
    var = g.op("ReduceMean", g.op("Pow", centered, g.const(np.float32(2.0))), axes=[-1])
    std = g.op("Sqrt", g.op("Add", var, g.const(np.float32(1e-5))))
    return g.op("Add", g.op("Mul", g.op("Div", centered, std), g.const(w)), g.const(b))


def _gelu(g: Graph, x: str) -> str:
    inner = g.op("Erf", g.op("Div", x, g.const(np.float32(math.sqrt(2.0)))))
    return g.op("Mul", g.op("Mul", x, g.op("Add", inner, g.const(np.float32(1.0)))),
                g.const(np.float32(0.5)))  # fmt: skip


def _linear(g: Graph, x: str, w: Any, b: Any) -> str:
    return g.op("Add", g.op("MatMul", x, g.const(np.ascontiguousarray(w.T))), g.const(b))


def weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def mat(n_in: int, n_out: int) -> np.ndarray:
        return (rng.normal(size=(n_out, n_in)) / math.sqrt(n_in)).astype(np.float32)

    def vec(n: int, scale: float = 0.1) -> np.ndarray:
        return (rng.normal(size=n) * scale).astype(np.float32)

    return {
        "ln1.w": 1 + vec(WIDTH), "ln1.b": vec(WIDTH), "qkv.w": mat(WIDTH, 3 * WIDTH),
        "qkv.b": vec(3 * WIDTH), "proj.w": mat(WIDTH, WIDTH), "proj.b": vec(WIDTH),
        "ln2.w": 1 + vec(WIDTH), "ln2.b": vec(WIDTH), "fc1.w": mat(WIDTH, 4 * WIDTH),
        "fc1.b": vec(4 * WIDTH), "fc2.w": mat(4 * WIDTH, WIDTH), "fc2.b": vec(WIDTH),
    }  # fmt: skip


def transformer_block(w: dict[str, np.ndarray]) -> onnx.ModelProto:
    g = Graph()
    x = "x"
    h = _layer_norm(g, x, w["ln1.w"], w["ln1.b"])
    qkv = _linear(g, h, w["qkv.w"], w["qkv.b"])
    q, k, v = g.op("Split", qkv, g.ints(WIDTH, WIDTH, WIDTH), axis=-1, outputs=3)
    heads = g.op("Concat", _dim(g, x, 0), _dim(g, x, 1), g.ints(HEADS), g.ints(-1), axis=0)
    q, k, v = (g.op("Transpose", g.op("Reshape", t, heads), perm=[0, 2, 1, 3]) for t in (q, k, v))
    depth = g.op("Cast", g.op("Gather", g.op("Shape", q), g.const(np.array(-1, np.int64))), to=1)
    scale = g.op("Sqrt", depth)
    scores = g.op("Div", g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2])), scale)
    seq = g.op("Gather", g.op("Shape", x), g.const(np.array(1, np.int64)), axis=0)
    pos = g.op("Range", g.const(np.array(0, np.int64)), seq, g.const(np.array(1, np.int64)))
    rows = g.op("Unsqueeze", pos, g.ints(1))
    cols = g.op("Unsqueeze", pos, g.ints(0))
    causal = g.op("LessOrEqual", cols, rows)
    scores = g.op("Where", causal, scores, g.const(np.float32(-1e9)))
    att = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
    merged = g.op("Concat", _dim(g, x, 0), _dim(g, x, 1), g.ints(WIDTH), axis=0)
    att = g.op("Reshape", g.op("Transpose", att, perm=[0, 2, 1, 3]), merged)
    x1 = g.op("Add", x, _linear(g, att, w["proj.w"], w["proj.b"]))
    h2 = _gelu(g, _linear(g, _layer_norm(g, x1, w["ln2.w"], w["ln2.b"]), w["fc1.w"], w["fc1.b"]))
    out = g.op("Add", x1, _linear(g, h2, w["fc2.w"], w["fc2.b"]))
    g.nodes.append(helper.make_node("Identity", [out], ["y"]))
    dims = ["batch", "sequence", WIDTH]
    return g.model(
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)],
    )


def numpy_block(x: np.ndarray, w: dict[str, np.ndarray]) -> np.ndarray:
    erf = np.vectorize(math.erf)

    def ln(t: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        m = t.mean(-1, keepdims=True)
        return (t - m) / np.sqrt(((t - m) ** 2).mean(-1, keepdims=True) + 1e-5) * a + b

    x = x.astype(np.float64)
    bsz, s, _ = x.shape
    q, k, v = np.split(ln(x, w["ln1.w"], w["ln1.b"]) @ w["qkv.w"].T + w["qkv.b"], 3, axis=-1)
    q, k, v = (t.reshape(bsz, s, HEADS, HEAD).transpose(0, 2, 1, 3) for t in (q, k, v))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(HEAD)
    scores = np.where(np.tril(np.ones((s, s), bool)), scores, -1e9)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    att = (e / e.sum(-1, keepdims=True)) @ v
    x1 = x + att.transpose(0, 2, 1, 3).reshape(bsz, s, WIDTH) @ w["proj.w"].T + w["proj.b"]
    h = ln(x1, w["ln2.w"], w["ln2.b"]) @ w["fc1.w"].T + w["fc1.b"]
    h = 0.5 * h * (1 + erf(h / math.sqrt(2.0)))
    return x1 + h @ w["fc2.w"].T + w["fc2.b"]
