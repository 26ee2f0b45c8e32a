"""1-D convolutions (ONNX's ``Conv`` on ``[b, c, t]``, as audio and sequence models use
them): the importer makes each a 2-D one on ``[b, c, 1, t]`` between reshapes, and what
follows the reshape back (a batch norm, GELU through ``Erf``, a residual ``Add``) fuses into
the convolution's kernel as it does after a 2-D one. The JIT agrees with the interpreter
(and ONNX Runtime when it is installed) at every length, one position included.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np

from tests.tools.tooling import require

onnx = require("onnx")

import shapevm.onnx as so  # noqa: E402

C, F = 24, 32


def model() -> Any:
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(5)
    inits: dict[str, Any] = {}
    nodes: list[Any] = []

    def const(name: str, value: Any) -> str:
        inits[name] = np.asarray(value, np.float32)
        return name

    def node(op: str, ins: list[str], **attrs: Any) -> str:
        out = f"{op.lower()}{len(nodes)}"
        nodes.append(h.make_node(op, ins, [out], **attrs))
        return out

    def gelu(x: str) -> str:
        erf = node("Erf", [node("Div", [x, const("r2", np.sqrt(2.0))])])
        half = node("Mul", [x, node("Add", [erf, const("one", 1.0)])])
        return node("Mul", [half, const("half", 0.5)])

    w1 = const("w1", rng.standard_normal((F, C, 3)) / np.sqrt(3 * C))
    c1 = node("Conv", ["x", w1, const("b1", 0.1 * rng.standard_normal(F))], pads=[1, 1])
    bn = node("BatchNormalization", [c1, const("g", 1 + 0.1 * rng.standard_normal(F)),
                                     const("beta", 0.1 * rng.standard_normal(F)),
                                     const("mu", 0.1 * rng.standard_normal(F)),
                                     const("var", 1 + rng.random(F))])  # fmt: skip
    g1 = gelu(bn)
    w2 = const("w2", rng.standard_normal((F, F, 3)) / np.sqrt(3 * F))
    c2 = node("Conv", [g1, w2], pads=[1, 1])
    nodes.append(h.make_node("Add", [c2, g1], ["y"]))
    graph = h.make_graph(
        nodes,
        "conv1d",
        [h.make_tensor_value_info("x", T.FLOAT, ["b", C, "t"])],
        [h.make_tensor_value_info("y", T.FLOAT, ["b", F, "t"])],
        [nh.from_array(v, k) for k, v in inits.items()],
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def test_a_1d_convolution_fuses_what_follows_its_reshape() -> None:
    m = model()
    exp = so.load(m)
    jitted = exp.jit(hot_threshold=1, background=False, tier3=False)
    session = None
    if importlib.util.find_spec("onnxruntime") is not None:
        import onnxruntime as ort

        session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for b, t in [(1, 700), (2, 37), (1, 1), (3, 200)]:
        x = np.random.default_rng(t).standard_normal((b, C, t)).astype(np.float32)
        (got,), (want,) = jitted(x), exp.call(x)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        if session is not None:
            np.testing.assert_allclose(got, session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
    (engine,) = jitted.engines
    (rec,) = [r for r in engine.records() if r.variant][:1]
    kernels = [k.label for r in rec.variant.regions for k in r.lowered.kernels]
    assert kernels == ["conv+bias+gelu_erf", "conv+residual"], kernels
