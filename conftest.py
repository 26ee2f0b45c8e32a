"""Collection rules for the whole repository (doctests in src/ included).

Doctest collection imports every module under src/; modules that import an optional
library at the top are left out where that library is not installed.
"""

import importlib.util

_OPTIONAL = {
    "src/shapevm/tools/bench/onnx_models.py": "onnx",
    "src/shapevm/tools/bench/jax_models.py": "jax",
    "src/shapevm/tools/bench/torch_models.py": "torch",
    "src/shapevm/onnx/backend.py": "onnx",
    "src/shapevm/onnx/importer.py": "onnx",  # its doctest builds a model with onnx.helper
    "docs/onnx.md": "onnx",
}

collect_ignore = [path for path, mod in _OPTIONAL.items() if not importlib.util.find_spec(mod)]
