"""Row operations, attention and the tile interpreter against ONNX Runtime and NumPy, as
ratios measured in the same run, with one and two threads: the rows ``layer_norm``,
``softmax``, ``attention``, ``gelu`` and ``chain`` of ``shapevm bench --kernels``.

Run with ``python benchmarks/rowops_bench.py [--quick]`` (the options of
``benchmarks/kernel_bench.py``; ``--groups`` picks rows). The rows are built by
`shapevm.tools.bench.kernels_rowops.kernel_cases`, which the shared kernel benchmark imports
from here; the method (interleaving, medians, the machine's load) is
`shapevm.tools.bench.kernels`. ONNX Runtime is optional: ``pip install -e '.[bench]'``.
"""

from __future__ import annotations

import os
import sys

try:
    from shapevm.tools.bench.kernel_run import main
    from shapevm.tools.bench.kernels_rowops import kernel_cases
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    from shapevm.tools.bench.kernel_run import main
    from shapevm.tools.bench.kernels_rowops import kernel_cases

GROUPS = "layer_norm,softmax,attention,gelu,chain"

__all__ = ["kernel_cases"]

if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main(args if "--groups" in args else ["--groups", GROUPS, *args]))
