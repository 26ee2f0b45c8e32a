"""``shapevm.onnx``: import ONNX models with dynamic axes as verified bytecode.

`load` takes a path, bytes or an ``onnx.ModelProto`` and returns a `shapevm.Exported`:
``dim_param`` s become symbolic dimensions, shape subgraphs fold into dimension arithmetic,
and the result runs any shape of its family. Needs the ``onnx`` package
(``pip install 'shapevm[onnx]'``); importing this module does not. ``shapevm.onnx.backend``
implements ``onnx.backend.base.Backend`` for ONNX's conformance tests.
"""

from shapevm.onnx.errors import ModelFileError, Problem, UnsupportedModelError
from shapevm.onnx.importer import load

__all__ = ["ModelFileError", "Problem", "UnsupportedModelError", "load"]
