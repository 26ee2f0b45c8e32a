"""Convolution and pooling kernels against ONNX Runtime and NumPy at W2's shapes.

Each of W2's layers (``BENCHMARKS.md``) at each of its five input shapes: conv3x3 3→32
pad 1, conv3x3 32→32 stride 2 pad 1, conv3x3 32→64 pad 1 (each with its bias, on the
workload's own weights, inputs of the shape the layer sees) and the global average pool of
the last one. shapevm runs `shapevm.native.conv2d` on NCHW into an output allocated once
(the weights packed once); ONNX Runtime a one-node ``Conv`` (``GlobalAveragePool``) model
through IO binding; NumPy the op table's reference kernel (im2col and one BLAS product;
``x.mean((2, 3), keepdims=True)``).

Rows are measured by the kernel benchmark's harness (``shapevm bench --kernels``, which
imports `kernel_cases` from this file): systems interleaved round by round in one process,
medians, one and two threads, the other processes' load beside each row. Run it alone with

    python benchmarks/conv_bench.py [--quick] [--kernel-threads 1,2] [--rounds 7]

which is ``shapevm bench --kernels --groups conv,pool`` with the same options.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from shapevm.models import WORKLOADS, make_weights
from shapevm.ops import get_op
from shapevm.tools.bench.kernels import KernelCase, OnnxGraph

Array = np.ndarray[Any, Any]

LAYERS = (("conv1", 1, 1), ("conv2", 2, 1), ("conv3", 1, 2))
"""W2's convolutions: weight name, stride, and how much smaller than the image its input is."""


def _onnx(node: Any, x: Array, out_shape: tuple[int, ...], weights: dict[str, Array]) -> OnnxGraph:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [node],
        "kernel",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))],
        initializer=[numpy_helper.from_array(a, n) for n, a in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return OnnxGraph(model, {"x": x})


def conv_case(name: str, shape: str, x: Array, w: Array, b: Array, stride: int) -> KernelCase:
    """``conv(x, w) + b``, 3x3 with padding 1, NCHW in and out."""
    from shapevm import native

    packed = native.pack_conv2d(w, b, stride=stride, padding=1)
    out = native.conv2d(x, packed)
    op = get_op("conv2d")
    assert op is not None
    attrs = op.filled_attrs({"stride": (stride, stride), "padding": (1, 1, 1, 1)})

    def graph() -> OnnxGraph:
        from onnx import helper

        node = helper.make_node(
            "Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], pads=[1] * 4,
            strides=[stride] * 2,
        )  # fmt: skip
        return _onnx(node, x, out.shape, {"w": w, "b": b})

    return KernelCase(
        "conv",
        name,
        shape,
        lambda: native.conv2d(x, packed, out=out),
        lambda: op.kernel([x, w, b], attrs)[0],
        graph,
    )


def pool_case(shape: str, x: Array) -> KernelCase:
    """The global average pool that ends W2's convolutions."""
    from shapevm import native

    out = np.empty((*x.shape[:2], 1, 1), np.float32)

    def graph() -> OnnxGraph:
        from onnx import helper

        node = helper.make_node("GlobalAveragePool", ["x"], ["y"])
        return _onnx(node, x, (*x.shape[:2], 1, 1), {})

    return KernelCase(
        "pool",
        f"global avg pool {x.shape[1]}ch",
        shape,
        lambda: native.global_avg_pool(x, keepdims=True, out=out),
        lambda: x.mean((2, 3), keepdims=True),
        graph,
    )


def kernel_cases(quick: bool = False) -> list[KernelCase]:
    """Every convolution and pooling row at W2's shapes (the first shape only if
    ``quick``)."""
    params = make_weights("W2")
    shapes = WORKLOADS["W2"].shapes[: 1 if quick else None]
    rng = np.random.default_rng(2)
    cases = []
    for b, _, h, w in shapes:
        shape = f"{b}×{h}×{w}"
        for layer, stride, shrink in LAYERS:
            wt, bias = params[f"{layer}.weight"], params[f"{layer}.bias"]
            cout, cin = wt.shape[:2]
            x = rng.standard_normal((b, cin, h // shrink, w // shrink)).astype(np.float32)
            name = f"conv3×3 {cin}→{cout}" + (f" stride {stride}" if stride > 1 else "")
            cases.append(conv_case(name, shape, x, wt, bias, stride))
        x = rng.standard_normal((b, 64, h // 2, w // 2)).astype(np.float32)
        cases.append(pool_case(shape, x))
    return cases


def main(argv: Sequence[str] | None = None) -> int:
    from shapevm.tools.bench.kernel_run import main as run_kernels

    return run_kernels(["--groups", "conv,pool", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
