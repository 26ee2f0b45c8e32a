"""shapevm itself, as benchmark systems: the interpreter, and the JIT in each cache mode.

Each builds the workload by exporting the function of `shapevm.models.traced` once (for the
whole family of input shapes; the export is part of the build, so of (a) and (d)), then
calls either `Exported.call` (``shapevm-interp``: the interpreter only) or the jitted
`Exported.jit` (the others). The JIT compiles in the background and never blocks a call: a
key is compiled after its second call (``hot_threshold=2``), except the first key, at its
first call (``eager_first``); until its variant is ready, its calls run a ready variant of
another key (the variants of W1-W3 are shape-generic), or the interpreter while the
function has none.

- ``shapevm-jit-exact``: a variant per tuple of dimension values;
- ``shapevm-jit-bucket``: a variant per range of values (`BUCKETS`, per dimension variable);
- ``shapevm-jit-adaptive``: shared power-of-two buckets until a shape has been seen
  ``adaptive_exact_after`` times, then its own variant;
- ``shapevm-onnx``: the JIT (``exact``) on the workload's ONNX graph, the very graph ONNX
  Runtime runs, imported with `shapevm.onnx.load` (the import is part of the build).

With ``--onnx FILE`` every one of them imports the file instead (`onnx_files`).

Imported before the clock starts (``imports``, timed separately as for every system):
numba and `shapevm.jit.native.library`, which loads shapevm's precompiled kernels, as
importing ONNX Runtime loads its compiled library. What is model-specific (exporting,
packing weights, compiling variants and generated kernels) is timed; each process gets an
empty ``XDG_CACHE_HOME``, so the generated kernels of an earlier process are not reused.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np

from shapevm.tools.bench.registry import Compiled, Weights, register_system

BUCKETS: dict[str, dict[str, list[int]]] = {
    "W1": {"b": [1, 4, 16, 64, 256]},
    "W2": {"b": [1, 2, 4, 8, 16], "h": [1, 64, 128, 256, 512], "w": [1, 64, 128, 256, 512]},
    "W3": {"b": [1, 2, 4, 8, 16], "s": [1, 16, 32, 64, 128, 256, 512]},
}
"""Bucket boundaries per workload and dimension variable (see `shapevm.jit.JitOptions`)."""

JIT_OPTIONS: dict[str, Any] = {"hot_threshold": 2, "eager_first": True}
# An ONNX file's dimensions are not known in advance: powers of two bucket every one of them.
_FILE_BUCKETS: dict[str, dict[str, Any]] = {
    "bucket": {"bucket_boundaries": [2**i for i in range(13)]},
    "exact": {},
    "adaptive": {},
}


def _export(workload_id: str, weights: Weights) -> Any:
    from shapevm.models import traced

    return traced.export_workload(workload_id, weights)


def _build_interp(workload_id: str, weights: Weights) -> Compiled:
    exp = _export(workload_id, weights)

    def run(x: np.ndarray) -> np.ndarray:
        y: np.ndarray = exp.call(x)
        return y

    return run


def _build_jit(mode: str) -> Callable[[str, Weights], Compiled]:
    def build(workload_id: str, weights: Weights) -> Compiled:
        exp = _export(workload_id, weights)
        options = dict(JIT_OPTIONS, cache_mode=mode)
        if mode == "bucket":
            options["bucket_boundaries"] = BUCKETS[workload_id]
        fast = exp.jit(**options)

        def run(x: np.ndarray) -> np.ndarray:
            y: np.ndarray = fast(x)
            return y

        return run

    return build


def _build_from_onnx(workload_id: str, weights: Weights) -> Compiled:
    from shapevm.onnx import load
    from shapevm.tools.bench.onnx_models import build_onnx

    fast = load(build_onnx(workload_id, weights)).jit(**JIT_OPTIONS, cache_mode="exact")

    def run(x: np.ndarray) -> np.ndarray:
        y: np.ndarray = fast(x)[0]
        return y

    return run


def _file_builder(jit_options: dict[str, Any] | None) -> Callable[[str], Compiled]:
    def build(path: str) -> Compiled:
        from shapevm.tools.bench.onnx_files import build_shapevm

        return build_shapevm(path, jit_options)

    return build


def _version() -> str:
    try:
        numba = importlib.metadata.version("numba")
    except importlib.metadata.PackageNotFoundError:
        numba = "?"
    import shapevm

    return f"shapevm {shapevm.__version__}, numba {numba}"


def _jit_available() -> bool | str:
    from shapevm.jit import native_available

    return True if native_available() else "numba not installed (pip install numba)"


register_system(
    "shapevm-interp",
    lambda: True,
    _build_interp,
    version=_version,
    imports=("shapevm",),
    description="shapevm interpreter (Exported.call)",
    build_onnx=_file_builder(None),
)
for _mode in ("exact", "bucket", "adaptive"):
    register_system(
        f"shapevm-jit-{_mode}",
        _jit_available,
        _build_jit(_mode),
        version=_version,
        imports=("shapevm", "numba", "shapevm.jit.native.library"),
        description=f"shapevm JIT, cache_mode={_mode!r}, compiling in the background",
        build_onnx=_file_builder(dict(JIT_OPTIONS, cache_mode=_mode, **_FILE_BUCKETS[_mode])),
    )
register_system(
    "shapevm-onnx",
    lambda: _jit_available() if importlib.util.find_spec("onnx") else "onnx not installed",
    _build_from_onnx,
    version=_version,
    imports=("shapevm", "onnx", "numba", "shapevm.jit.native.library"),
    description="shapevm JIT on the ONNX graph ONNX Runtime runs, imported by shapevm.onnx",
    build_onnx=_file_builder(dict(JIT_OPTIONS, cache_mode="exact")),
)
