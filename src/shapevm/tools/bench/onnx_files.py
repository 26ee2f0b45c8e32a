"""ONNX files as benchmark workloads: ``shapevm bench --onnx model.onnx --shapes ...``.

Every system that can run an ONNX file (``System.build_onnx``: ONNX Runtime, and shapevm
through `shapevm.onnx.load`) runs the very same file on the same shapes. A file's workload
is named ``onnx:<file name>``; its inputs are float ``N(0, 1)`` (ints ``0..9``) for the
model's one graph input, the same in every process. Accuracy is against ONNX Runtime on the
file (``max |y - ref| / max |ref|``), when it is installed.

>>> parse_shapes("1x3x224x224, 2x3x224x224")
[(1, 3, 224, 224), (2, 3, 224, 224)]
>>> label((2, 3, 224, 224))
'2×3×224×224'
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from shapevm.tools.bench.registry import Settling

PREFIX = "onnx:"
Shape = tuple[int, ...]


def workload_id(path: str) -> str:
    return PREFIX + Path(path).name


def is_onnx(wid: str) -> bool:
    return wid.startswith(PREFIX)


def parse_shapes(text: str) -> list[Shape]:
    """``"1x3x224x224,2x3x224x224"``: shapes separated by commas, dimensions by ``x``."""
    shapes = []
    for part in text.replace(";", ",").split(","):
        if not part.strip():
            continue
        try:
            dims = tuple(int(d) for d in part.strip().lower().split("x"))
        except ValueError:
            raise ValueError(
                f"bad shape {part.strip()!r} in --shapes: expected dimensions separated by 'x', "
                "shapes by commas, e.g. 1x3x224x224,2x3x224x224"
            ) from None
        if any(d < 0 for d in dims):
            raise ValueError(f"bad shape {part.strip()!r} in --shapes: dimensions must be >= 0")
        shapes.append(dims)
    if not shapes:
        raise ValueError("--shapes gives no shape: e.g. --shapes 1x3x224x224,2x3x224x224")
    return shapes


def label(shape: Shape) -> str:
    return "×".join(str(d) for d in shape)


def _single_input(path: str) -> tuple[str, np.dtype[Any]]:
    import onnx

    from shapevm.onnx.model_io import ONNX_DTYPES

    graph = onnx.load(path, load_external_data=False).graph
    init = {t.name for t in graph.initializer}
    inputs = [v for v in graph.input if v.name not in init]
    if len(inputs) != 1:
        names = [v.name for v in inputs]
        raise ValueError(f"{path}: the benchmark feeds models of one input, this one has {names}")
    dtype = ONNX_DTYPES[inputs[0].type.tensor_type.elem_type].numpy.newbyteorder("=")
    return inputs[0].name, dtype


def make_inputs(path: str, shapes: list[Shape]) -> dict[Shape, np.ndarray]:
    """One input per distinct shape, seeded by its position among the distinct shapes."""
    _, dtype = _single_input(path)
    out = {}
    for i, shape in enumerate(dict.fromkeys(shapes)):
        rng = np.random.default_rng(1000 + i)
        if dtype.kind == "f":
            out[shape] = rng.standard_normal(shape).astype(dtype)
        else:
            out[shape] = rng.integers(0, 10, shape).astype(dtype)
    return out


def reference(path: str) -> Callable[[np.ndarray], np.ndarray] | None:
    """ONNX Runtime on the file, the yardstick of accuracy; ``None`` without it."""
    try:
        return build_ort(path)
    except ImportError:
        return None


def build_ort(path: str) -> Callable[[np.ndarray], np.ndarray]:
    import onnxruntime as ort

    from shapevm.tools.bench.env import bench_threads

    options = ort.SessionOptions()
    options.intra_op_num_threads = bench_threads()
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name

    def run(x: np.ndarray) -> np.ndarray:
        y: np.ndarray = session.run(None, {name: x})[0]
        return y

    return run


def build_shapevm(path: str, jit_options: dict[str, Any] | None) -> Callable[[np.ndarray], Any]:
    """The file imported with `shapevm.onnx.load`; interpreted, or jitted with the options."""
    from shapevm.onnx import load

    exp = load(path)
    if jit_options is not None:
        return Settling(exp.jit(**jit_options), 0)

    def run(x: np.ndarray) -> np.ndarray:
        y: np.ndarray = exp.call(x)[0]
        return y

    return run
