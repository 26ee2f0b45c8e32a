"""A BERT-like encoder layer built as PyTorch's exporter writes one: embeddings and
positions by ``Gather`` (the positions cut to the sequence by ``Slice``), the head shapes by
``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``, an attention mask from an input
(``Unsqueeze``, ``Cast``, ``Sub``, ``Mul``), ``LayerNormalization``, GELU through ``Erf``
and a ``ReduceMean`` over the sequence. The JIT must agree with the interpreter (and with
ONNX Runtime when it is installed) at every shape, the first calls included.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np

from tests.tools.tooling import require

onnx = require("onnx")

import shapevm.onnx as so  # noqa: E402

V, D, HEADS, F = 100, 32, 4, 64


def encoder() -> Any:
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(9)

    def w(*s: int) -> np.ndarray[Any, Any]:
        return (rng.standard_normal(s) * 0.1).astype(np.float32)

    i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
    f32 = lambda v: np.array(v, np.float32)  # noqa: E731
    inits = dict(
        tok=w(V, D), pos=w(64, D), g1=1 + w(D), b1=w(D), wq=w(D, D), bq=w(D), wk=w(D, D),
        wv=w(D, D), wo=w(D, D), w1=w(D, F), bf=w(F), w2=w(F, D), g2=1 + w(D), b2=w(D),
        pos_ids=np.arange(64, dtype=np.int64)[None, :], c0=i64(0), axes1=i64(1),
        heads=i64(HEADS), hd=i64(D // HEADS), width=i64(D), i0=np.array(0, np.int64),
        i1=np.array(1, np.int64), one=f32(1.0), big=f32(-10000.0), sc=f32(0.5),
        sqrt2=f32(np.sqrt(2)), half=f32(0.5),
    )  # fmt: skip
    n = h.make_node
    nodes = [
        n("Shape", ["ids"], ["shp"]),
        n("Gather", ["shp", "i0"], ["B"], axis=0),
        n("Gather", ["shp", "i1"], ["S"], axis=0),
        n("Unsqueeze", ["B", "c0"], ["Bu"]),
        n("Unsqueeze", ["S", "c0"], ["Su"]),
        n("Gather", ["tok", "ids"], ["te"]),
        n("Slice", ["pos_ids", "c0", "Su", "axes1"], ["pid"]),
        n("Gather", ["pos", "pid"], ["pe"]),
        n("Add", ["te", "pe"], ["x0"]),
        n("LayerNormalization", ["x0", "g1", "b1"], ["x"], axis=-1, epsilon=1e-5),
        n("MatMul", ["x", "wq"], ["q0"]),
        n("Add", ["q0", "bq"], ["q1"]),
        n("MatMul", ["x", "wk"], ["k1"]),
        n("MatMul", ["x", "wv"], ["v1"]),
        n("Concat", ["Bu", "Su", "heads", "hd"], ["hs"], axis=0),
        n("Reshape", ["q1", "hs"], ["q2"]),
        n("Transpose", ["q2"], ["q"], perm=[0, 2, 1, 3]),
        n("Reshape", ["k1", "hs"], ["k2"]),
        n("Transpose", ["k2"], ["kT"], perm=[0, 2, 3, 1]),
        n("Reshape", ["v1", "hs"], ["v2"]),
        n("Transpose", ["v2"], ["v"], perm=[0, 2, 1, 3]),
        n("MatMul", ["q", "kT"], ["s0"]),
        n("Mul", ["s0", "sc"], ["s1"]),
        n("Unsqueeze", ["mask", "axes1"], ["m1"]),
        n("Unsqueeze", ["m1", "axes1"], ["m2"]),
        n("Cast", ["m2"], ["mf"], to=T.FLOAT),
        n("Sub", ["one", "mf"], ["mi"]),
        n("Mul", ["mi", "big"], ["madd"]),
        n("Add", ["s1", "madd"], ["s2"]),
        n("Softmax", ["s2"], ["p"], axis=-1),
        n("MatMul", ["p", "v"], ["o0"]),
        n("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
        n("Concat", ["Bu", "Su", "width"], ["ds"], axis=0),
        n("Reshape", ["o1", "ds"], ["o2"]),
        n("MatMul", ["o2", "wo"], ["o3"]),
        n("Add", ["x", "o3"], ["r1"]),
        n("MatMul", ["r1", "w1"], ["f0"]),
        n("Add", ["f0", "bf"], ["f1"]),
        n("Div", ["f1", "sqrt2"], ["e0"]),
        n("Erf", ["e0"], ["e1"]),
        n("Add", ["e1", "one"], ["e2"]),
        n("Mul", ["f1", "e2"], ["e3"]),
        n("Mul", ["e3", "half"], ["e4"]),
        n("MatMul", ["e4", "w2"], ["f2"]),
        n("Add", ["r1", "f2"], ["r2"]),
        n("LayerNormalization", ["r2", "g2", "b2"], ["y"], axis=-1, epsilon=1e-5),
        n("ReduceMean", ["y", "axes1"], ["pooled"], keepdims=0),
    ]
    ins = [h.make_tensor_value_info(k, T.INT64, ["batch", "seq"]) for k in ("ids", "mask")]
    outs = [
        h.make_tensor_value_info("y", T.FLOAT, ["batch", "seq", D]),
        h.make_tensor_value_info("pooled", T.FLOAT, ["batch", D]),
    ]
    graph = h.make_graph(
        nodes, "encoder", ins, outs, [nh.from_array(v, k) for k, v in inits.items()]
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])


def test_an_exported_encoder_runs_native_and_agrees_everywhere() -> None:
    model = encoder()
    exp = so.load(model, constraints=["seq <= 64"])  # the position table has 64 rows
    jitted = exp.jit(hot_threshold=1, background=False, tier3=False)
    session = None
    if importlib.util.find_spec("onnxruntime") is not None:
        import onnxruntime as ort

        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
    for b, s in [(1, 7), (3, 20), (2, 64), (1, 1), (3, 20)]:
        rng = np.random.default_rng(b * 100 + s)
        ids = rng.integers(0, V, (b, s)).astype(np.int64)
        mask = np.ones((b, s), np.int64)
        mask[:, s // 2 + 1 :] = 0
        got, want = jitted(ids, mask), exp.call(ids, mask)
        peer = session.run(None, {"ids": ids, "mask": mask}) if session else want
        for g, w, p in zip(got, want, peer, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(g, p, rtol=1e-4, atol=1e-5)
    (engine,) = jitted.engines
    (rec,) = [r for r in engine.records() if r.variant][:1]
    kernels = [k.label for r in rec.variant.regions for k in r.lowered.kernels]
    assert {"layer_norm", "attention", "dense+bias+gelu_erf", "mean"} <= set(kernels), kernels
    # the int64 mask's cast and comparisons and the embedding lookups (rows the ids pick)
    # run native too: the whole encoder is one executor call
    assert rec.variant.function.whole, rec.variant.describe()


def test_a_convolution_fuses_onnx_activations() -> None:
    """ONNX's HardSwish and LeakyRelu (imported as ``where(x < 0, x * alpha, x)``) after a
    Conv run in the convolution's epilogue, and agree with the interpreter."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(3)
    w = (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    for node, label in [
        (h.make_node("HardSwish", ["c"], ["y"]), "conv+bias+hard_swish"),
        (h.make_node("LeakyRelu", ["c"], ["y"], alpha=0.1), "conv+bias+leaky_relu(0.1)"),
    ]:
        graph = h.make_graph(
            [h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), node],
            "g",
            [h.make_tensor_value_info("x", T.FLOAT, ["n", 3, "h", "w"])],
            [h.make_tensor_value_info("y", T.FLOAT, None)],
            [nh.from_array(w, "w"), nh.from_array(b, "b")],
        )
        exp = so.load(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]))
        jitted = exp.jit(hot_threshold=1, background=False, tier3=False)
        for shape in [(2, 3, 9, 7), (1, 3, 16, 16)]:
            x = rng.standard_normal(shape).astype(np.float32)
            np.testing.assert_allclose(jitted(x)[0], exp.call(x)[0], rtol=1e-5, atol=1e-5)
        (engine,) = jitted.engines
        (rec,) = [r for r in engine.records() if r.variant][:1]
        assert [k.label for r in rec.variant.regions for k in r.lowered.kernels] == [label]


def test_the_bound_a_position_table_needs_is_assumed_and_said() -> None:
    """Without constraints, the encoder's 64 positions cut to the sequence and added to it
    are undefined past 64 (ONNX Runtime fails there too): the import assumes ``seq <=
    64``, warns saying so, and a longer call gets the constraint's ShapeError."""
    import pytest

    import shapevm as sv

    with pytest.warns(UserWarning, match=r"assuming seq <= 64"):
        exp = so.load(encoder())
    assert "where seq <= 64" in repr(exp)
    ids = np.ones((1, 65), np.int64)
    with pytest.raises(sv.shapes.ShapeError, match=r"seq <= 64"):
        exp.call(ids, ids)
