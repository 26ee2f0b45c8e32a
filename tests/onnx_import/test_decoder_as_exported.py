"""A LLaMA-like decoder block built as an exporter writes one: RMS norm written out
(``Pow``, ``ReduceMean``, ``Add``, ``Sqrt``, ``Reciprocal``, ``Mul``), q, k and v as
separate ``MatMul``s on ``[in, out]`` weights, the head shapes by ``Shape -> Gather ->
Unsqueeze -> Concat -> Reshape``, a causal mask cut from a constant table by ``Slice`` to
the sequence, ``Div`` by sqrt(d), ``Softmax``, and a SwiGLU MLP (``Sigmoid``, ``Mul``). The
JIT must agree with the interpreter (and with ONNX Runtime when it is installed) at every
shape, and find the block's kernels: RMS norm, attention with its mask, the gate's SiLU in
its dense layer's epilogue, SwiGLU's product in the up projection's, the residuals in the
projections'.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np

from tests.tools.tooling import require

onnx = require("onnx")

import shapevm.onnx as so  # noqa: E402

D, HEADS, F, SMAX = 48, 3, 80, 40


def decoder() -> Any:
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(21)
    inits: dict[str, np.ndarray[Any, Any]] = {}
    nodes: list[Any] = []

    def const(name: str, value: Any, dtype: Any = np.float32) -> str:
        inits[name] = np.asarray(value, dtype)
        return name

    def node(op: str, ins: list[str], **attrs: Any) -> str:
        out = f"{op.lower()}{len(nodes)}"
        nodes.append(h.make_node(op, ins, [out], **attrs))
        return out

    def rms_norm(x: str, tag: str) -> str:
        ms = node("ReduceMean", [node("Pow", [x, const("two", 2.0)])], axes=[-1], keepdims=1)
        r = node("Reciprocal", [node("Sqrt", [node("Add", [ms, const("eps", 1e-6)])])])
        g = const(f"g{tag}", 1 + 0.1 * rng.standard_normal(D))
        return node("Mul", [node("Mul", [x, r]), g])

    def linear(x: str, name: str, k: int, n: int) -> str:
        return node("MatMul", [x, const(name, rng.standard_normal((k, n)) / np.sqrt(k))])

    shape = node("Shape", ["x"])
    b = node("Unsqueeze", [node("Gather", [shape, const("i0", 0, np.int64)], axis=0),
                           const("a0", [0], np.int64)])  # fmt: skip
    s = node("Unsqueeze", [node("Gather", [shape, const("i1", 1, np.int64)], axis=0), "a0"])
    heads = node("Concat", [b, s, const("hd", [HEADS, D // HEADS], np.int64)], axis=0)
    width = node("Concat", [b, s, const("dd", [D], np.int64)], axis=0)

    def split_heads(v: str) -> str:
        return node("Transpose", [node("Reshape", [v, heads])], perm=[0, 2, 1, 3])

    n1 = rms_norm("x", "1")
    q, k, v = (split_heads(linear(n1, f"w{c}", D, D)) for c in "qkv")
    scores = node("MatMul", [q, node("Transpose", [k], perm=[0, 1, 3, 2])])
    scores = node("Div", [scores, const("sd", np.sqrt(D // HEADS))])
    table = np.triu(np.full((SMAX, SMAX), -1e9, np.float32), 1)
    ends = node("Concat", [s, s], axis=0)
    mask = node("Slice", [const("causal", table), const("z", [0, 0], np.int64), ends,
                          const("ax", [0, 1], np.int64)])  # fmt: skip
    p = node("Softmax", [node("Add", [scores, mask])], axis=-1)
    att = node("Transpose", [node("MatMul", [p, v])], perm=[0, 2, 1, 3])
    x1 = node("Add", ["x", linear(node("Reshape", [att, width]), "wo", D, D)])
    n2 = rms_norm(x1, "2")
    gate = linear(n2, "wg", D, F)
    silu = node("Mul", [gate, node("Sigmoid", [gate])])
    up = linear(n2, "wu", D, F)
    nodes.append(h.make_node("Add", [x1, linear(node("Mul", [silu, up]), "wd", F, D)], ["y"]))
    graph = h.make_graph(
        nodes,
        "decoder",
        [h.make_tensor_value_info("x", T.FLOAT, ["b", "s", D])],
        [h.make_tensor_value_info("y", T.FLOAT, ["b", "s", D])],
        [nh.from_array(v, k) for k, v in inits.items()],
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def test_an_exported_decoder_runs_native_and_agrees_everywhere() -> None:
    model = decoder()
    exp = so.load(model, constraints=[f"s <= {SMAX}"])  # the mask table has SMAX rows
    jitted = exp.jit(hot_threshold=1, background=False, tier3=False)
    session = None
    if importlib.util.find_spec("onnxruntime") is not None:
        import onnxruntime as ort

        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
    for b, s in [(1, 5), (2, 17), (3, 40), (1, 1), (4, 33), (2, 17)]:
        x = np.random.default_rng(b * 100 + s).standard_normal((b, s, D)).astype(np.float32)
        (got,), (want,) = jitted(x), exp.call(x)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        if session is not None:
            np.testing.assert_allclose(got, session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
        # causal: the first token sees only itself, so a change after it leaves it alone
        later = x.copy()
        later[:, 1:] += 1.0
        np.testing.assert_allclose(jitted(later)[0][:, 0], got[:, 0], rtol=1e-5, atol=1e-6)
    (engine,) = jitted.engines
    (rec,) = [r for r in engine.records() if r.variant][:1]
    kernels = [k.label for r in rec.variant.regions for k in r.lowered.kernels]
    assert kernels.count("rms_norm") == 2, kernels
    assert {"attention", "dense+silu", "dense*gate", "dense+residual"} <= set(kernels), kernels
    assert len(kernels) == 10, kernels  # nothing left over: SwiGLU's product has no pass
    assert rec.variant.function.whole, rec.variant.describe()
