"""Each kernel of shapevm's C library against ONNX Runtime and NumPy, as ratios measured in
the same run, with one and two threads: the same as ``shapevm bench --kernels``.

Run with ``python benchmarks/kernel_bench.py [--quick] [--groups dense,matmul]``
(``--help`` lists the options). ONNX Runtime is optional: ``pip install -e '.[bench]'``.
The method is in ``shapevm.tools.bench.kernels``; the rows of dense layers and matrix
products in ``shapevm.tools.bench.kernel_cases``, the other families' rows in
``conv_bench.py`` and ``rowops_bench.py`` beside this file (``kernel_cases(quick)``).
"""

from __future__ import annotations

import os
import sys

try:
    from shapevm.tools.bench.kernel_run import main
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    from shapevm.tools.bench.kernel_run import main

if __name__ == "__main__":
    sys.exit(main())
