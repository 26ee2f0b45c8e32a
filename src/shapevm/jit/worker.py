"""The compile worker: one background thread that runs queued compiles one at a time.

Each compile runs in a short-lived thread of its own that the worker joins with the job's
timeout; a compile that outlives it is abandoned: the job is marked failed at once and the
worker moves on, while the abandoned thread stops at its next cancellation check (between
regions and between the chains of tier 3; a C compiler already started finishes). So at most one
compile is current, plus possibly one abandoned one finishing its last step.

While compile work runs in the background, `background_work` lowers the interpreter's
switch interval (``sys.setswitchinterval``) to `SWITCH_INTERVAL_S`. A compile is mostly
Python and holds the GIL; each time the calling thread releases the GIL (every NumPy
call, every native kernel), the compile thread takes it and keeps it until the switch
interval forces it to let go: 5 ms by default, so a call of a few kernels could wait tens
of milliseconds. At 0.2 ms the calling thread gets the GIL back within a fraction of a
millisecond. The previous interval is restored when the last background work ends (unless
someone changed it meanwhile).

`busy` says whether such work is running.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Protocol

SWITCH_INTERVAL_S = 2e-4

_switch_lock = threading.Lock()
_switch_users = 0
_switch_saved: float | None = None


def busy() -> bool:
    """Whether background compile work is running right now."""
    return _switch_users > 0


@contextmanager
def background_work() -> Iterator[None]:
    """Lower the switch interval while the body runs (nested and concurrent uses nest)."""
    global _switch_users, _switch_saved
    with _switch_lock:
        if _switch_users == 0:
            current = sys.getswitchinterval()
            if current > SWITCH_INTERVAL_S:
                _switch_saved = current
                sys.setswitchinterval(SWITCH_INTERVAL_S)
        _switch_users += 1
    try:
        yield
    finally:
        with _switch_lock:
            _switch_users -= 1
            if _switch_users == 0 and _switch_saved is not None:
                if abs(sys.getswitchinterval() - SWITCH_INTERVAL_S) < 1e-9:
                    sys.setswitchinterval(_switch_saved)
                _switch_saved = None


_prefetch_lock = threading.Lock()
_prefetch: threading.Thread | None = None


def prefetch_blas_libraries() -> None:
    """Find NumPy's BLAS libraries (see `blas`) in a daemon thread, once per process: called
    for a function whose calls will run interpreted steps beside native ones (it was not
    lowered whole, or not ahead), so that no call pays the scan (2-25 ms)."""
    global _prefetch
    with _prefetch_lock:
        if _prefetch is not None:
            return
        _prefetch = threading.Thread(target=_find_blas, name="shapevm-jit-prefetch", daemon=True)
        _prefetch.start()


def native_tier() -> ModuleType:
    """The native tier's package (it loads with ``import shapevm``; imported here again
    where that failed, so that the compile that needs it reports why)."""
    return importlib.import_module("shapevm.jit.backend")  # (shapevm.jit is the function)


def _find_blas() -> None:
    # Not under `background_work`: at a switch interval of 0.2 ms a Python thread beside
    # the caller's tracing handed the GIL back and forth so often that W3's export and
    # wrap took 90-110 ms against 60-75 ms at the default interval.
    try:
        from shapevm.jit.blas import find_blas_libraries

        find_blas_libraries()
    except Exception:  # the call that needs them finds them again (or runs without)
        pass


class Job(Protocol):
    timeout_s: float | None

    def execute(self) -> None: ...

    def abandon(self) -> None: ...


def run_with_timeout(job: Job) -> None:
    """Run ``job`` in its own thread; abandon it when it exceeds ``job.timeout_s``."""
    thread = threading.Thread(target=job.execute, name="shapevm-jit-compile", daemon=True)
    thread.start()
    thread.join(job.timeout_s)
    if thread.is_alive():
        job.abandon()


class CompileWorker:
    """A queue of compile jobs and the daemon thread that drains it."""

    def __init__(self) -> None:
        self._queue: deque[Job] = deque()
        self._cv = threading.Condition()
        self._pending = 0
        self._thread: threading.Thread | None = None

    def submit(self, job: Job) -> None:
        with self._cv:
            self._queue.append(job)
            self._pending += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="shapevm-jit-worker", daemon=True
                )
                self._thread.start()
            self._cv.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._queue:
                    self._cv.wait()
                job = self._queue.popleft()
            try:
                with background_work():
                    run_with_timeout(job)
            finally:
                with self._cv:
                    self._pending -= 1
                    self._cv.notify_all()

    @property
    def pending(self) -> int:
        """Jobs queued or running."""
        return self._pending

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the queue is drained; ``False`` if ``timeout`` passed first."""
        with self._cv:
            return self._cv.wait_for(lambda: self._pending == 0, timeout)


WORKER = CompileWorker()
