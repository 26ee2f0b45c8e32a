"""The compile worker: one background thread that runs queued compiles one at a time.

Each compile runs in a short-lived thread of its own that the worker joins with the job's
timeout; a compile that outlives it is abandoned: the job is marked failed at once and the
worker moves on, while the abandoned thread stops at its next cancellation check (between
regions and kernels; a numba compile in progress cannot be interrupted). So at most one
compile is current, plus possibly one abandoned one finishing its last step.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Protocol


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
