"""The stream benchmark of BENCHMARKS.md: every available system on W1-W3, as ratios.

Run with ``python benchmarks/stream_bench.py [options]`` (``--help`` lists them); the same as
``shapevm bench``. Peers are optional: ``pip install -e '.[bench]'``.
"""

from __future__ import annotations

import os
import sys

try:
    from shapevm.tools.bench import main
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    from shapevm.tools.bench import main

if __name__ == "__main__":
    sys.exit(main())
