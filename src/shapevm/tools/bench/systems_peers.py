"""The peers every shapevm claim is measured against (``BENCHMARKS.md``): NumPy eager, ONNX
Runtime, JAX ``jit``, PyTorch eager and ``torch.compile``. Each imports its library only when
built, in the measuring process; ``available()`` only looks for the installed package."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
from collections.abc import Callable

import numpy as np

from shapevm.models.workloads import numpy_eager
from shapevm.tools.bench.env import bench_threads
from shapevm.tools.bench.onnx_files import build_ort
from shapevm.tools.bench.registry import Compiled, Weights, register_system


def _installed(*packages: str) -> bool | str:
    missing = [p for p in packages if importlib.util.find_spec(p) is None]
    if missing:
        return f"{' and '.join(missing)} not installed (pip install -e '.[bench]')"
    return True


def _version(*distributions: str) -> Callable[[], str]:
    def version() -> str:
        parts = []
        for dist in distributions:
            try:
                parts.append(f"{dist} {importlib.metadata.version(dist)}")
            except importlib.metadata.PackageNotFoundError:
                parts.append(f"{dist} ?")
        return ", ".join(parts)

    return version


def _numpy_version() -> str:
    blas = "?"
    try:
        deps = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        blas = f"{deps['name']} {deps['version']}"
    except Exception:  # the config layout differs between NumPy versions
        pass
    return f"numpy {np.__version__} ({blas})"


def _build_ort(workload_id: str, weights: Weights) -> Compiled:
    import onnxruntime as ort

    from shapevm.tools.bench.onnx_models import model_file

    options = ort.SessionOptions()
    options.intra_op_num_threads = bench_threads()
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    path = model_file(workload_id, weights)  # written before the clock (`prepare`)
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    def run(x: np.ndarray) -> np.ndarray:
        y: np.ndarray = session.run(None, {"x": x})[0]
        return y

    return run


def onnx_model_file(workload_id: str, weights: Weights) -> str:
    """`onnx_models.model_file`, importing onnx only when a system that needs it runs."""
    from shapevm.tools.bench.onnx_models import model_file

    return model_file(workload_id, weights)


def _build_jax(workload_id: str, weights: Weights) -> Compiled:
    from shapevm.tools.bench.jax_models import build_jax

    return build_jax(workload_id, weights)


def _torch_compile_available() -> bool | str:
    found = _installed("torch")
    if found is not True:
        return found
    if not any(shutil.which(cxx) for cxx in ("g++", "c++", "clang++")):
        return "torch.compile (inductor) needs a C++ compiler; none on PATH"
    return True


def _build_torch(compile: bool) -> Callable[[str, Weights], Compiled]:
    def build(workload_id: str, weights: Weights) -> Compiled:
        from shapevm.tools.bench.torch_models import build_torch

        return build_torch(workload_id, weights, bench_threads(), compile)

    return build


register_system(
    "numpy",
    lambda: True,
    numpy_eager,
    version=_numpy_version,
    description="NumPy eager (im2col convolutions)",
)
register_system(
    "onnxruntime",
    lambda: _installed("onnx", "onnxruntime"),
    _build_ort,
    version=_version("onnxruntime", "onnx"),
    imports=("onnx", "onnxruntime"),
    description="ONNX Runtime, opset 17 graph with dynamic axes",
    prepare=onnx_model_file,
    build_onnx=build_ort,
)
register_system(
    "jax",
    lambda: _installed("jax", "jaxlib"),
    _build_jax,
    version=_version("jax", "jaxlib"),
    imports=("jax",),
    description="jax.jit (compiles once per shape)",
)
register_system(
    "torch-eager",
    lambda: _installed("torch"),
    _build_torch(compile=False),
    version=_version("torch"),
    imports=("torch",),
    description="PyTorch eager",
)
register_system(
    "torch-compile",
    _torch_compile_available,
    _build_torch(compile=True),
    version=_version("torch"),
    imports=("torch",),
    description="torch.compile(dynamic=True)",
)
