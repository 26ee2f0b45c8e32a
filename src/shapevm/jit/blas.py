"""NumPy's BLAS on one thread while a jitted function runs interpreted steps.

Compiled regions never call NumPy's BLAS, but a jitted function's interpreted steps do: its
calls before the first variant is ready, and the spans between compiled regions. After a
multi-threaded OpenBLAS call, OpenBLAS's worker threads spin waiting for more work (about
2^28 cycles, ~0.1 s) before they sleep, and on a 2-core machine they then hold the cores
that the native kernels and the calling thread need. Measured on W1's 200-call stream
(`benchmarks/warmup_bench.py`, OpenBLAS with 2 threads): the first 50 calls took 118 ms,
83 ms with the interpreted steps on one BLAS thread, 55 ms with the whole process on one
(`OPENBLAS_NUM_THREADS=1`); W3's: 338, 253 and 219 ms.

So `JitEngine` runs a call's interpreted steps inside `one_blas_thread` once the function
has something compiled or compiling; a function that is never compiled keeps NumPy's
threads. The BLAS libraries are found with `threadpoolctl` (once per process, 2-25 ms by how many
libraries are loaded, in a background thread started for the first function that will need
them, see `worker.prefetch_blas_libraries`; a function that is one native call never does);
setting and restoring the count costs about 5 us per interpreted call. The count is
process-wide: a NumPy product that another thread runs at the same moment also runs on one
thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_libs: list[Any] | None = None


def find_blas_libraries() -> list[Any]:
    """NumPy's BLAS libraries, found once per process (the first call scans every loaded
    library: 2-25 ms, by how many are loaded)."""
    global _libs
    if _libs is None:
        with _lock:
            if _libs is None:
                try:
                    from threadpoolctl import ThreadpoolController
                except ImportError:  # an install without it: NumPy's threads are left alone
                    _libs = []
                else:
                    _libs = list(ThreadpoolController().select(user_api="blas").lib_controllers)
    return _libs


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with every loaded BLAS library on one thread, then restore the counts."""
    saved = []
    for lib in find_blas_libraries():
        n = lib.num_threads
        if n > 1:
            lib.set_num_threads(1)
            saved.append((lib, n))
    try:
        yield
    finally:
        for lib, n in saved:
            lib.set_num_threads(n)


__all__ = ["find_blas_libraries", "one_blas_thread"]
