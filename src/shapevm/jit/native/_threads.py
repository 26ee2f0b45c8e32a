"""When to use numba's thread pool: big enough work, and cores that other processes leave free.

A parallel kernel is fork-join: it ends when the slowest thread ends. On a machine whose
cores are busy with other processes, a worker thread waits for a time slice, and a call of
0.3 ms took 8-16 ms (median) in our measurements on 2 shared cores, while the same kernel on
the calling thread alone was unaffected. So besides a size threshold per kernel, threads are
used only while everything else on the machine leaves all but half a core idle, resampled
at most every `SAMPLE_SECONDS` (other processes) and `PROCESS_SAMPLE_SECONDS` (this one):

- other processes: CPU time from ``/proc/stat`` minus this process's own;
- other threads of this process: its CPU time minus the sampling thread's and minus what
  numba's workers spent in the pool kernels timed meanwhile (`note_pool`). This is mostly
  OpenBLAS: after a NumPy matrix product on two threads, its worker spins on the second
  core for about 0.1 s, and a parallel kernel that waits for a share on that core took
  2-5x its time. W2's jitted model, called on new shapes each right after the same shape
  through the interpreter (which uses NumPy's two BLAS threads), took 5.4-11.8 ms a call
  against 2.0-5.0 ms interpreted, and 1.0-2.8 ms with ``OPENBLAS_NUM_THREADS=1``. With
  this check, ``python benchmarks/warmup_bench.py --numpy-between 256`` (a NumPy product
  before each call) runs the streams of W1-W3 1.4-1.8x faster (docs/native.md, Threads).
  A window in which a pool kernel ran untimed (the low-level `use_threads`) skips this.

Elsewhere than Linux the check always allows threads.

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
"""Least wall time between two readings of ``/proc/stat`` (its clock ticks at 100 Hz)."""
PROCESS_SAMPLE_SECONDS: Final = 0.02
"""Least wall time between two readings of this process's and thread's CPU clocks."""
BUSY_OTHERS_MAX: Final = 0.5
"""Cores' worth of CPU that others (other processes, and this process's threads other than
the caller and numba's workers) may use while we still fork threads."""

SPIN_SECONDS: Final = 2e-4
"""CPU seconds a numba worker may spend after a parallel region before it sleeps (measured
about 0.1 ms for `SPIN_COUNT`), allowed per timed pool call."""

_lock = threading.Lock()
_machine = {"wall": 0.0, "busy": 0.0, "own": 0.0, "cores": 0.0}
_process = {"wall": 0.0, "own": 0.0, "thread": 0.0, "tid": 0.0, "cores": 0.0}
_free = [True]
_pool = [0.0, 0, 0]
"""Seconds of wall time of timed pool calls, their count, untimed pool calls (all since
the process started)."""
_seen = [0.0, 0, 0]
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


def note_pool(seconds: float) -> None:
    """Record a pool kernel call of ``seconds`` wall time (its workers' CPU is ours)."""
    _pool[0] += seconds
    _pool[1] += 1


def others_in_process(
    own: float, thread: float, pool_wall: float, pool_calls: int, threads: int
) -> float:
    """CPU seconds that threads of this process other than the sampling thread and numba's
    workers used in a window: ``own`` process CPU seconds, ``thread`` the sampling thread's,
    ``pool_wall`` and ``pool_calls`` the timed pool calls, for a pool of ``threads``.

    >>> others_in_process(own=0.30, thread=0.10, pool_wall=0.05, pool_calls=10, threads=2)
    0.148
    """
    workers = (threads - 1) * (pool_wall + SPIN_SECONDS * pool_calls)
    return round(max(0.0, own - thread - workers), 9)


def _sample_machine(now: float, own: float) -> None:
    """Other processes' cores over the last `SAMPLE_SECONDS` or more (under ``_lock``)."""
    m = _machine
    busy = _machine_busy_seconds()
    if busy is None:
        m["cores"] = 0.0
    elif m["wall"]:
        m["cores"] = ((busy - m["busy"]) - (own - m["own"])) / (now - m["wall"])
    m.update(wall=now, busy=busy or 0.0, own=own)


def _sample_process(now: float, own: float, threads: int) -> None:
    """This process's other threads' cores over the last `PROCESS_SAMPLE_SECONDS` or more,
    seen from one thread (a sample from another thread starts a new window)."""
    p = _process
    thread = time.thread_time()
    tid = threading.get_ident()
    if p["wall"] and tid == p["tid"] and _pool[2] == _seen[2]:
        cpu = others_in_process(
            own - p["own"],
            thread - p["thread"],
            _pool[0] - _seen[0],
            int(_pool[1] - _seen[1]),
            threads,
        )
        p["cores"] = cpu / (now - p["wall"])
    elif tid != p["tid"] or _pool[2] != _seen[2]:
        p["cores"] = 0.0
    p.update(wall=now, own=own, thread=thread, tid=tid)
    _seen[:] = _pool


def cores_free() -> bool:
    """Whether everything else, in other processes and in this one, left enough cores idle
    lately for our threads (all but `BUSY_OTHERS_MAX` of a core)."""
    now = time.monotonic()
    m, p = _machine, _process
    if now - p["wall"] < PROCESS_SAMPLE_SECONDS and now - m["wall"] < SAMPLE_SECONDS:
        return _free[0]
    with _lock:
        own = time.process_time()
        threads = numba.get_num_threads()
        if now - m["wall"] >= SAMPLE_SECONDS:
            _sample_machine(now, own)
        if now - p["wall"] >= PROCESS_SAMPLE_SECONDS:
            _sample_process(now, own, threads)
        idle = (os.cpu_count() or 1) - m["cores"] - p["cores"]
        _free[0] = idle >= threads - BUSY_OTHERS_MAX
        return _free[0]


def forget_samples() -> None:
    """Start fresh sampling windows: the next decision judges only what runs from now on.
    For measurements that alternate with another thread pool (NumPy's BLAS) on purpose and
    let it go idle before timing the kernels."""
    with _lock:
        for state in (_machine, _process):
            state["wall"] = state["cores"] = 0.0
        _free[0] = True


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
    _pool[2] += 1
    return True


def stats() -> dict[str, int]:
    """How often the kernels ran on the thread pool, and why they did not.

    >>> sorted(stats())
    ['parallel', 'serial_busy_machine', 'serial_small']
    """
    return dict(_counts)


__all__ = [
    "BUSY_OTHERS_MAX",
    "PROCESS_SAMPLE_SECONDS",
    "SAMPLE_SECONDS",
    "cores_free",
    "forget_samples",
    "note_pool",
    "others_in_process",
    "pool_available",
    "stats",
    "use_threads",
]
