"""``onnx.backend.base.Backend`` for shapevm, so ONNX's own conformance tests run against it.

``prepare`` imports the model with `shapevm.onnx.load` (every dimension of the graph inputs
as the model declares it) and returns a `ShapevmRep` whose ``run`` calls the interpreter.
A model whose sizes or axes come from the values of graph inputs (``Reshape(x, shape)``
with ``shape`` an input, as ONNX's node tests write them) is imported at the first ``run``,
with those inputs fixed to the values given (``load(..., constants=...)``), once per
distinct set of values.

>>> import numpy as np, onnx
>>> from onnx import helper, TensorProto as T
>>> import shapevm.onnx.backend as backend
>>> node = helper.make_node("Add", ["a", "b"], ["c"])
>>> backend.run_node(node, [np.ones(3, np.float32), np.ones(3, np.float32)])[0]
array([2., 2., 2.], dtype=float32)
>>> backend.supports_device("CPU"), backend.supports_device("CUDA")
(True, False)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from shapevm.onnx.errors import UnsupportedModelError
from shapevm.onnx.importer import load

try:
    import onnx
    from onnx.backend.base import Backend, BackendRep
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError(
        "shapevm.onnx.backend needs the onnx package: pip install 'shapevm[onnx]'"
    ) from exc


class ShapevmRep(BackendRep):  # type: ignore[misc,unused-ignore]
    """A prepared model: ``run(inputs)`` gives the outputs as a list of arrays."""

    def __init__(self, model: onnx.ModelProto, needs: Sequence[str] = ()) -> None:
        self.model = model
        init = {t.name for t in model.graph.initializer}
        self.input_names = [v.name for v in model.graph.input if v.name not in init]
        self.needs = tuple(needs)
        self.exported = None if self.needs else load(model)
        self._by_values: dict[bytes, Any] = {}

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        if isinstance(inputs, dict):
            inputs = [inputs[n] for n in self.input_names]
        elif isinstance(inputs, np.ndarray):
            inputs = [inputs]
        arrays = [np.asarray(a) for a in inputs]
        exported = self.exported
        if exported is None:
            exported, arrays = self._specialized(arrays)
        outs = exported.call(*arrays)
        return tuple(np.asarray(o) for o in outs)

    def _specialized(self, arrays: list[np.ndarray]) -> tuple[Any, list[np.ndarray]]:
        given = dict(zip(self.input_names, arrays, strict=True))
        fixed = {n: given[n] for n in self.needs}
        key = b"".join(
            repr((n, a.dtype.str, a.shape)).encode() + a.tobytes() for n, a in fixed.items()
        )
        exported = self._by_values.get(key)
        if exported is None:
            exported = load(self.model, constants=fixed)
            self._by_values[key] = exported
        rest = [a for n, a in given.items() if n not in fixed]
        return exported, rest


class ShapevmBackend(Backend):  # type: ignore[misc,unused-ignore]
    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> ShapevmRep:
        if not cls.supports_device(device):
            raise ValueError(f"shapevm runs on the CPU, not on {device!r}")
        if not isinstance(model, onnx.ModelProto):
            model = onnx.load_model_from_string(bytes(model))
        try:
            return ShapevmRep(model)
        except UnsupportedModelError as exc:
            if not exc.needs:
                raise
            return ShapevmRep(model, exc.needs)

    @classmethod
    def run_model(
        cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any
    ) -> tuple[Any, ...]:
        return cls.prepare(model, device).run(inputs)

    @classmethod
    def run_node(
        cls,
        node: onnx.NodeProto,
        inputs: Any,
        device: str = "CPU",
        outputs_info: Any = None,
        **kwargs: Any,
    ) -> tuple[Any, ...]:
        """Run one node on ``inputs``, as a one-node model of the newest opset (or
        ``opset_version=``)."""
        helper = onnx.helper
        arrays = [np.asarray(a) for a in inputs]
        names = [n for n in node.input]
        graph_in = [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in zip(names, arrays, strict=False)
            if n
        ]
        graph_out = [helper.make_empty_tensor_value_info(n) for n in node.output if n]
        graph = helper.make_graph([node], "node", graph_in, graph_out)
        opset = int(kwargs.get("opset_version", min(onnx.defs.onnx_opset_version(), 28)))
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        return cls.run_model(model, [a for n, a in zip(names, arrays, strict=False) if n], device)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.split(":")[0].upper() == "CPU"


prepare = ShapevmBackend.prepare
run_model = ShapevmBackend.run_model
run_node = ShapevmBackend.run_node
supports_device = ShapevmBackend.supports_device
