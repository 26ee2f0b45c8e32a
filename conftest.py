"""Doctest collection imports every module under src/; the benchmark's model modules import
their optional peer at the top, so they are left out where that peer is not installed."""

import importlib.util

_OPTIONAL = {
    "src/shapevm/tools/bench/onnx_models.py": "onnx",
    "src/shapevm/tools/bench/jax_models.py": "jax",
    "src/shapevm/tools/bench/torch_models.py": "torch",
}

collect_ignore = [path for path, mod in _OPTIONAL.items() if not importlib.util.find_spec(mod)]
