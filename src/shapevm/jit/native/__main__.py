"""``python -m shapevm.jit.native``: compile shapevm's own kernels once, ahead of use.

The JIT's compiled regions call a fixed set of kernels (`entries.library`). numba compiles
each the first time a process needs it and keeps the machine code beside the source
(`shapevm.jit.numba_cache`); running this after installing shapevm does it up front, so that
no process ever spends the compile. A second run only loads them.
"""

from __future__ import annotations

import sys
import time


def main() -> int:
    from shapevm.jit.native import entries

    start = time.perf_counter()
    n = entries.build_library()
    print(f"shapevm native kernels: {n} entry points ready in {time.perf_counter() - start:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
