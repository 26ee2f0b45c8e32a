"""ONNX files as benchmark workloads: ``shapevm bench --onnx model.onnx --shapes ...``.

Every system that can run an ONNX file (``System.build_onnx``: ONNX Runtime, and shapevm
through `shapevm.onnx.load`) runs the very same file on the same shapes. A file's workload
is named ``onnx:<file name>``; ``--shapes`` gives the shapes of its first graph input, whose
values are float ``N(0, 1)`` (ints ``0..9``), the same in every process. A model with more
inputs (a BERT's attention mask and token types) gets the others' shapes from their declared
dimensions: a named one (``batch``, ``seq``) takes the size the first input's dimension of
that name has, a fixed one its size; their values are float ``N(0, 1)`` and ints (and
booleans) ``0`` or ``1``. Accuracy is against ONNX Runtime on the file
(``max |y - ref| / max |ref|``), when it is installed.

>>> parse_shapes("1x3x224x224, 2x3x224x224")
[(1, 3, 224, 224), (2, 3, 224, 224)]
>>> label((2, 3, 224, 224))
'2×3×224×224'
>>> derived_shape("mask", ["batch", "seq"], {"batch": 2, "seq": 7})
(2, 7)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from shapevm.tools.bench.registry import Feeds, Settling

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


Dim = int | str | None


def graph_inputs(path: str) -> list[tuple[str, np.dtype[Any], list[Dim]]]:
    """The file's graph inputs that are not initializers: name, dtype and declared dimensions
    (an int, a name, or None where the file says nothing). A file that is not a model raises
    `shapevm.onnx.ModelFileError` (a ValueError) saying so."""
    from shapevm.onnx.model_io import ONNX_DTYPES, read_model

    graph = read_model(path)[0].graph
    init = {t.name for t in graph.initializer}
    out = []
    for v in graph.input:
        if v.name in init:
            continue
        tt = v.type.tensor_type
        if tt.elem_type not in ONNX_DTYPES:
            raise ValueError(f"{path}: input {v.name!r} is not a tensor of a supported dtype")
        dims: list[Dim] = [
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim
        ]
        out.append((v.name, ONNX_DTYPES[tt.elem_type].numpy.newbyteorder("="), dims))
    if not out:
        raise ValueError(f"{path}: the model has no graph input to feed")
    return out


def derived_shape(name: str, dims: list[Dim], sizes: dict[str, int]) -> Shape:
    """The shape of input ``name`` from its declared ``dims`` and the sizes the first input
    gave its named dimensions; ValueError for a dimension nothing sizes."""
    shape = []
    for i, d in enumerate(dims):
        if isinstance(d, int):
            shape.append(d)
        elif d is not None and d in sizes:
            shape.append(sizes[d])
        else:
            what = f"dimension {d!r}" if d else "an unnamed dimension"
            raise ValueError(
                f"input {name!r}: {what} (axis {i}) that the first input's shape does not "
                f"size; the benchmark sizes the other inputs from the first input's named "
                f"dimensions ({', '.join(sorted(sizes)) or 'none'}): give the file's inputs "
                "shared dimension names or fixed sizes"
            )
    return tuple(shape)


def _values(rng: np.random.Generator, shape: Shape, dtype: np.dtype[Any], first: bool) -> Any:
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(0, 10 if first else 2, shape).astype(dtype)


def input_shapes(inputs: list[tuple[str, np.dtype[Any], list[Dim]]], shape: Shape) -> list[Shape]:
    """Every graph input's shape when the first one has ``shape`` (ValueError if one
    cannot be sized)."""
    (name0, _, dims0), rest = inputs[0], inputs[1:]
    if not rest:
        return [shape]
    if len(dims0) != len(shape):
        raise ValueError(
            f"--shapes {label(shape)}: the first input {name0!r} has rank {len(dims0)} "
            f"({dims0}), the shape {len(shape)}"
        )
    sizes = {d: n for d, n in zip(dims0, shape, strict=True) if isinstance(d, str)}
    return [shape, *(derived_shape(n, d, sizes) for n, _, d in rest)]


def make_inputs(path: str, shapes: list[Shape]) -> dict[Shape, np.ndarray | Feeds]:
    """One input per distinct shape of the first graph input (with the other inputs, a
    `Feeds`), seeded by its position among the distinct shapes."""
    inputs = graph_inputs(path)
    out: dict[Shape, np.ndarray | Feeds] = {}
    for i, shape in enumerate(dict.fromkeys(shapes)):
        rng = np.random.default_rng(1000 + i)
        arrays = [
            _values(rng, s, dtype, k == 0)
            for k, (s, (_, dtype, _)) in enumerate(
                zip(input_shapes(inputs, shape), inputs, strict=True)
            )
        ]
        out[shape] = arrays[0] if len(arrays) == 1 else Feeds(arrays)
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
    names = [i.name for i in session.get_inputs()]

    def run(x: np.ndarray | Feeds) -> np.ndarray:
        feeds = dict(zip(names, x if isinstance(x, Feeds) else (x,), strict=True))
        y: np.ndarray = session.run(None, feeds)[0]
        return y

    return run


def build_shapevm(path: str, jit_options: dict[str, Any] | None) -> Callable[[np.ndarray], Any]:
    """The file imported with `shapevm.onnx.load`; interpreted, or jitted with the options."""
    from shapevm.onnx import load

    exp = load(path)
    if jit_options is not None:
        return Settling(exp.jit(**jit_options), 0)

    def run(x: np.ndarray | Feeds) -> np.ndarray:
        y: np.ndarray = exp.call(*x)[0] if isinstance(x, Feeds) else exp.call(x)[0]
        return y

    return run
