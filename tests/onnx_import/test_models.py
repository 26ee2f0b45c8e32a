"""The ``light`` models that ship with onnx, with their batch dimension made symbolic.

Each model is imported once with a symbolic batch ``N`` and run at several batch sizes;
every row of a batch must equal that image run alone (batch 1), and the outputs must match
ONNX Runtime on the same modified file (within 1e-4 relative) when it is installed. The
models exported with a fixed batch reshape to ``[1, -1]`` before their classifier: that 1
becomes 0 (ONNX's "copy this dimension"), as re-exporting with a dynamic batch would write.

The comparison is on the logits, the input of the final ``Softmax``: the light models'
weights are constants, so their logits are all equal and near 1e10, and the rounding noise
of any summation order (ONNX Runtime's as much as ours) decides their softmax.
"""

from __future__ import annotations

import copy
import glob
import os
from typing import Any

import numpy as np
import pytest

from tests.tools.tooling import require

onnx = require("onnx")

import shapevm.onnx as so  # noqa: E402

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
MODELS = sorted(os.path.basename(p)[6:-5] for p in glob.glob(os.path.join(LIGHT, "light_*.onnx")))
# The small ones run in the default suite; the rest (1 to 20 GFLOP an image) under -m slow.
QUICK = ("squeezenet", "shufflenet")


def with_symbolic_batch(model: Any) -> Any:
    """The model with axis 0 of its image input and of its outputs named ``N``, and the
    logits as its output."""
    model = copy.deepcopy(model)
    graph = model.graph
    last = graph.node[-1]
    if last.op_type == "Softmax":
        del graph.node[-1]
        graph.output[0].name = last.input[0]
    init = {t.name: t for t in graph.initializer}
    for v in (*[v for v in graph.input if v.name not in init], *graph.output):
        dims = v.type.tensor_type.shape.dim
        if len(dims) >= 2 and dims[0].dim_value == 1:
            dims[0].dim_param = "N"
    for node in graph.node:
        if node.op_type == "Reshape" and node.input[1] in init:
            target = onnx.numpy_helper.to_array(init[node.input[1]]).copy()
            if target[0] == 1:
                target[0] = 0
                init[node.input[1]].CopyFrom(onnx.numpy_helper.from_array(target, node.input[1]))
    return model


def _inputs(model: Any, batch: int) -> list[np.ndarray]:
    init = {t.name for t in model.graph.initializer}
    rng = np.random.default_rng(batch)
    out = []
    for v in model.graph.input:
        if v.name in init:
            continue
        dims = [batch if d.dim_param == "N" else d.dim_value for d in v.type.tensor_type.shape.dim]
        out.append(rng.random(dims, np.float32))
    return out


def _check(name: str, batches: tuple[int, ...]) -> None:
    model = with_symbolic_batch(onnx.load(os.path.join(LIGHT, f"light_{name}.onnx")))
    exp = so.load(model)
    assert str(exp.in_avals[-1 if name == "densenet121" else 0].shape[0]) in ("N", "1")
    assert str(exp.out_avals[0].shape[0]) == "N"
    ort = _ort_session(model)
    for batch in batches:
        xs = _inputs(model, batch)
        (y,) = exp.call(*xs)
        assert y.shape[0] == batch
        for i in range(batch):
            single = [x[i : i + 1] if x.ndim == 4 else x for x in xs]
            np.testing.assert_allclose(y[i : i + 1], exp.call(*single)[0], rtol=1e-4, atol=1e-6)
        if ort is not None:
            names = [i.name for i in ort.get_inputs()]
            (want,) = ort.run(None, dict(zip(names, xs, strict=True)))
            np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-6)


def _ort_session(model: Any) -> Any:
    try:
        import onnxruntime
    except ImportError:
        return None
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 2
    return onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def test_the_installed_onnx_ships_all_nine_light_models() -> None:
    assert MODELS == [
        "bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
        "shufflenet", "squeezenet", "vgg19", "zfnet512",
    ]  # fmt: skip


@pytest.mark.parametrize("name", QUICK)
def test_a_light_model_with_a_symbolic_batch_runs_every_batch_size(name: str) -> None:
    _check(name, (2, 3))


@pytest.mark.slow
@pytest.mark.parametrize("name", [m for m in MODELS if m not in QUICK])
def test_a_large_light_model_with_a_symbolic_batch_runs_every_batch_size(name: str) -> None:
    _check(name, (2, 3))
