"""When to use numba's thread pool: big enough work, and cores that other processes leave free.

A parallel kernel is fork-join: it ends when the slowest thread ends. On a machine whose
cores are busy with other processes, a worker thread waits for a time slice, and a call of
0.3 ms took 8-16 ms (median) in our measurements on 2 shared cores, while the same kernel on
the calling thread alone was unaffected. So besides a size threshold per kernel, threads are
used only while the other processes on the machine leave at least half a core idle, measured
from ``/proc/stat`` minus this process's own CPU time, resampled at most every
`SAMPLE_SECONDS`. Elsewhere than Linux the check always allows threads.

OpenMP's workers wait for the next parallel region. GNU OpenMP's default (spinning for
about a millisecond) starved OpenBLAS's threads in the next NumPy matrix product: attention
at W3 (4, 128), which alternated BLAS and a parallel softmax, took 8 ms instead of 1.2 ms.
Sleeping at once (``OMP_WAIT_POLICY=PASSIVE``) avoids that, but waking a sleeping worker
costs 86 us on this virtual machine (median launch of an empty 2-thread region), which ate
the gain of every parallel kernel below ~1 ms: W1's three dense layers at 8 rows took
547 us on the pool against 527 us on one thread. So importing this module sets
``GOMP_SPINCOUNT`` to `SPIN_COUNT` unless the environment sets ``GOMP_SPINCOUNT`` or
``OMP_WAIT_POLICY``: a worker spins about 0.1 ms after a region (long enough for the next
kernel of the same call, measured 2-7 us per launch with 20-100 us between kernels) and
then sleeps, so it does not hold a core between calls. With it the same dense layers take
239 us on the pool. It takes effect if no OpenMP runtime was loaded before numba's.

`stats` counts the decisions, so that a slowdown from running serial is never silent.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Final

SPIN_COUNT: Final = 30000
"""Spins of an idle OpenMP worker before it sleeps (GNU OpenMP's ``GOMP_SPINCOUNT``)."""

if "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ:
    os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)

import numba  # noqa: E402  (loads OpenMP at its first parallel launch, after the line above)

SAMPLE_SECONDS: Final = 0.25
BUSY_OTHERS_MAX: Final = 0.5
"""Cores' worth of CPU that other processes may use while we still fork threads."""

_lock = threading.Lock()
_state = {"wall": 0.0, "busy": 0.0, "own": 0.0, "free": True}
_counts = {"parallel": 0, "serial_small": 0, "serial_busy_machine": 0}


def _machine_busy_seconds() -> float | None:
    """CPU seconds all processes have used since boot (None if unknown)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(v) for v in fields[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def cores_free() -> bool:
    """Whether other processes left enough cores idle lately for our threads (all but
    `BUSY_OTHERS_MAX` of a core)."""
    now = time.monotonic()
    with _lock:
        if now - _state["wall"] < SAMPLE_SECONDS:
            return bool(_state["free"])
        busy = _machine_busy_seconds()
        own = time.process_time()
        if busy is None:
            _state["free"] = True
        elif _state["wall"]:
            span = now - _state["wall"]
            others = (busy - _state["busy"]) - (own - _state["own"])
            idle = (os.cpu_count() or 1) - others / span
            _state["free"] = idle >= numba.get_num_threads() - BUSY_OTHERS_MAX
        _state.update(wall=now, busy=busy or 0.0, own=own)
        return bool(_state["free"])


def pool_available() -> bool:
    """Whether a kernel forking threads now would get them (no count is kept)."""
    return numba.get_num_threads() >= 2 and cores_free()


def use_threads(work: int, threshold: int) -> bool:
    """Whether a kernel with ``work`` units (its own measure) should run on the pool."""
    if work < threshold or numba.get_num_threads() < 2:
        _counts["serial_small"] += 1
        return False
    if not cores_free():
        _counts["serial_busy_machine"] += 1
        return False
    _counts["parallel"] += 1
    return True


def stats() -> dict[str, int]:
    """How often the kernels ran on the thread pool, and why they did not.

    >>> sorted(stats())
    ['parallel', 'serial_busy_machine', 'serial_small']
    """
    return dict(_counts)


__all__ = [
    "BUSY_OTHERS_MAX",
    "SAMPLE_SECONDS",
    "cores_free",
    "pool_available",
    "stats",
    "use_threads",
]
