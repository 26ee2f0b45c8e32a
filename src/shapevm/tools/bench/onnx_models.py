"""The workloads as ONNX graphs (opset 17), built with ``onnx.helper`` directly.

The graphs are what an export with dynamic axes produces: the weights are initializers, the
input's ``b``/``h``/``w``/``s`` axes are symbolic, linear layers are ``Gemm`` (2-D) or
``MatMul`` with a pre-transposed weight plus ``Add`` (3-D), GELU is written out in its tanh
form (opset 17 has no ``Gelu``; ONNX Runtime fuses the pattern), layer norm is
``LayerNormalization``. Needs ``onnx``; imported only by the measuring process.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from shapevm.models.workloads import EPS, HEAD_DIM, HEADS, WIDTH, get_workload

OPSET = 17
Weights = dict[str, np.ndarray]


class _Graph:
    """Accumulates nodes and initializers, naming every intermediate uniquely."""

    def __init__(self, weights: Weights) -> None:
        self.weights = weights
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def const(self, value: np.ndarray | float, name: str | None = None) -> str:
        name = name or self._fresh("c")
        array = np.asarray(value, dtype=np.float32 if isinstance(value, float) else None)
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def param(self, name: str, transpose: bool = False) -> str:
        w = self.weights[name]
        return self.const(np.ascontiguousarray(w.T) if transpose else w, name + (".T" * transpose))

    def op(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        out = self._fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def _fresh(self, stem: str) -> str:
        self._n += 1
        return f"{stem}_{self._n}"

    def linear(self, x: str, name: str, rank: int) -> str:
        if rank == 2:
            return self.op(
                "Gemm", x, self.param(f"{name}.weight"), self.param(f"{name}.bias"), transB=1
            )
        y = self.op("MatMul", x, self.param(f"{name}.weight", transpose=True))
        return self.op("Add", y, self.param(f"{name}.bias"))

    def gelu(self, x: str) -> str:
        cube = self.op("Mul", self.op("Mul", x, x), x)
        inner = self.op("Add", x, self.op("Mul", cube, self.const(0.044715)))
        t = self.op("Tanh", self.op("Mul", inner, self.const(math.sqrt(2.0 / math.pi))))
        half = self.op("Mul", x, self.const(0.5))
        return self.op("Mul", half, self.op("Add", t, self.const(1.0)))

    def layer_norm(self, x: str, name: str) -> str:
        scale, bias = self.param(f"{name}.weight"), self.param(f"{name}.bias")
        return self.op("LayerNormalization", x, scale, bias, axis=-1, epsilon=EPS)

    def conv_relu(self, x: str, name: str, stride: int) -> str:
        w, b = self.param(f"{name}.weight"), self.param(f"{name}.bias")
        y = self.op("Conv", x, w, b, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[stride] * 2)
        return self.op("Relu", y)

    def model(
        self, name: str, x_dims: list[int | str], out: str, out_dims: list[int | str]
    ) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes,
            name,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_dims)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_dims)],
            initializer=self.inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8  # the newest that every onnxruntime with opset 17 reads
        onnx.checker.check_model(model)
        return model


def _mlp(g: _Graph) -> tuple[str, list[int | str]]:
    h = g.op("Relu", g.linear("x", "fc1", 2))
    h = g.gelu(g.linear(h, "fc2", 2))
    h = g.op("Add", g.linear(h, "fc3", 2), "x")
    return g.layer_norm(h, "ln"), ["b", 256]


def _cnn(g: _Graph) -> tuple[str, list[int | str]]:
    h = "x"
    for name, stride in (("conv1", 1), ("conv2", 2), ("conv3", 1)):
        h = g.conv_relu(h, name, stride)
    pooled = g.op("Flatten", g.op("GlobalAveragePool", h), axis=1)
    return g.linear(pooled, "fc", 2), ["b", 10]


def _block(g: _Graph) -> tuple[str, list[int | str]]:
    shape_qkv = g.const(np.array([0, 0, 3, HEADS, HEAD_DIM], dtype=np.int64))
    shape_out = g.const(np.array([0, 0, WIDTH], dtype=np.int64))
    qkv = g.linear(g.layer_norm("x", "ln1"), "attn.qkv", 3)
    qkv = g.op("Transpose", g.op("Reshape", qkv, shape_qkv), perm=[2, 0, 3, 1, 4])
    q, k, v = (g.op("Gather", qkv, g.const(np.array(i, dtype=np.int64)), axis=0) for i in range(3))
    scores = g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2]))
    att = g.op("Softmax", g.op("Mul", scores, g.const(1.0 / math.sqrt(HEAD_DIM))), axis=-1)
    o = g.op("Transpose", g.op("MatMul", att, v), perm=[0, 2, 1, 3])
    x1 = g.op("Add", "x", g.linear(g.op("Reshape", o, shape_out), "attn.proj", 3))
    h = g.gelu(g.linear(g.layer_norm(x1, "ln2"), "mlp.fc1", 3))
    return g.op("Add", x1, g.linear(h, "mlp.fc2", 3)), ["b", "s", WIDTH]


_BUILDERS: dict[str, Callable[[_Graph], tuple[str, list[int | str]]]] = {
    "W1": _mlp,
    "W2": _cnn,
    "W3": _block,
}


_FILES: dict[tuple[str, int], str] = {}


def model_file(workload_id: str, weights: Weights) -> str:
    """The workload's ONNX model as a file, as a user's program finds it: written once per
    process (into the temporary folder, the measuring process's own) and then reused. The
    measuring process calls this before the clock starts (`System.prepare`): building the
    model with `onnx.helper` and checking it (33 ms for W1) is not what loading a model
    costs a user, and it was counted in ONNX Runtime's build and stream."""
    key = (workload_id, id(weights))
    path = _FILES.get(key)
    if path is None or not os.path.exists(path):
        fd, path = tempfile.mkstemp(prefix=f"shapevm-{workload_id}-", suffix=".onnx")
        with os.fdopen(fd, "wb") as f:
            f.write(build_onnx(workload_id, weights).SerializeToString())
        _FILES[key] = path
        atexit.register(_remove, path)  # also when not in a measuring process's own folder
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)


def build_onnx(workload_id: str, weights: Weights) -> onnx.ModelProto:
    """The workload as a checked ONNX model with input ``x`` and dynamic axes."""
    w = get_workload(workload_id)
    g = _Graph(weights)
    out, out_dims = _BUILDERS[workload_id](g)
    x_dims: list[int | str] = [int(d) if d.isdigit() else d for d in w.dims]
    return g.model(f"shapevm_{workload_id}", x_dims, out, out_dims)
