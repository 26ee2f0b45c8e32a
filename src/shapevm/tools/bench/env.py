"""The environment of a measuring process: how many threads, on which CPUs.

Thread pools read their size when a library loads (OpenBLAS when NumPy is imported, OpenMP
at its first parallel region), so the parent puts the limits into the child's environment
before the child starts. XLA:CPU has no thread-count flag; its pool is as large as the set of
CPUs the process may run on, so the parent also pins the child to ``threads`` CPUs, which
bounds every library the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable, MutableMapping

THREADS_ENV = "SHAPEVM_BENCH_THREADS"
THREAD_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "SHAPEVM_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


def bench_threads() -> int:
    """The thread budget of this measuring process (2 unless the parent said otherwise)."""
    return int(os.environ.get(THREADS_ENV, "2"))


def set_thread_env(env: MutableMapping[str, str], threads: int) -> None:
    """Put the thread limits for every peer's runtime into ``env``."""
    for var in THREAD_VARS:
        env[var] = str(threads)
    env[THREADS_ENV] = str(threads)


def pinned_cpus(threads: int) -> list[int] | None:
    """The first ``threads`` CPUs this process may use, or ``None`` where pinning is absent."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    return allowed[:threads]


def pinning(cpus: list[int] | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` that pins the child before it executes anything, threads included."""
    if cpus is None or not hasattr(os, "sched_setaffinity"):
        return None
    chosen = set(cpus)

    def pin() -> None:
        os.sched_setaffinity(0, chosen)

    return pin
