"""The dynamic batcher: one worker thread per model runs its requests, joining them.

Requests wait in a bounded queue (``max_queue``; a full queue refuses at once, and the
server answers 503). The worker takes the oldest request and, when the model may be
batched (`shapevm.serve.batching`), every queued request with the same non-batch shapes,
in arrival order, up to ``max_rows`` rows; it waits at most ``max_delay_s`` after the
oldest request arrived for more to come. One call runs the joined rows; each request gets
its own rows back. A joined call is used only when it took the path the invariance check
tested, and failed joined calls are re-run request by request, so a join never changes a
result nor turns one request's error into its neighbours'.

Results go back to the asyncio loop of each request (``Pending.deliver``). A request whose
client went away before its turn is skipped.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from shapevm.serve.batching import BatchPlan, InvarianceCheck, Key
from shapevm.serve.runners import Arrays, Outputs, Runner

# After a joined call that left the checked path (the JIT still warming up, or a key whose
# compile failed), this many calls run unjoined before joining is tried again.
_COOLDOWN_CALLS = 32


class Overloaded(Exception):
    """The model's queue is full."""


@dataclass(eq=False)
class Pending:
    """One request waiting for the worker."""

    arrays: Arrays
    rows: int
    key: Key | None  # None: never joined
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Outputs]
    enqueued: float = 0.0
    started: float = 0.0
    cancelled: bool = False

    def deliver(self, result: Outputs | BaseException) -> None:
        self.loop.call_soon_threadsafe(_settle, self.future, result)


def _settle(future: asyncio.Future[Outputs], result: Outputs | BaseException) -> None:
    if future.done():  # the request was cancelled (client gone, server stopping)
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)


@dataclass(frozen=True)
class BatcherStats:
    """What the worker reports after each call (the metrics hook's argument)."""

    requests: int
    rows: int
    seconds: float
    joined: bool
    fallback: str = ""  # why a joined call's result was not used


class Batcher:
    """Queue and worker thread of one model (see the module docstring)."""

    def __init__(
        self,
        runner: Runner,
        plan: BatchPlan,
        check: InvarianceCheck | None,
        *,
        max_delay_s: float = 0.002,
        max_queue: int = 256,
        on_call: Callable[[BatcherStats], None] | None = None,
        name: str = "model",
    ) -> None:
        self.runner = runner
        self.plan = plan
        self.check = check
        self.max_delay_s = max_delay_s
        self.max_queue = max_queue
        self.on_call = on_call
        self._queue: deque[Pending] = deque()
        self._cond = threading.Condition()
        self._closing = False
        self._cooldown = 0
        self._thread = threading.Thread(
            target=self._loop, name=f"shapevm-serve-{name}", daemon=True
        )
        self._thread.start()

    @property
    def depth(self) -> int:
        return len(self._queue)

    def submit(self, pending: Pending) -> None:
        """Queue a request; `Overloaded` when ``max_queue`` requests already wait."""
        with self._cond:
            if self._closing:
                raise Overloaded("the server is shutting down")
            if len(self._queue) >= self.max_queue:
                raise Overloaded(f"{len(self._queue)} requests are queued (the limit)")
            pending.enqueued = time.monotonic()
            self._queue.append(pending)
            self._cond.notify()

    def close(self, timeout: float | None = None) -> None:
        """Run what is queued, then stop the worker."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join(timeout)

    # -- the worker --------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            group = self._next_group()
            if group is None:
                return
            try:
                self._execute(group)
            except Exception as exc:  # never leave a request waiting, nor the worker dead
                for p in group:
                    p.deliver(exc)

    def _next_group(self) -> list[Pending] | None:
        with self._cond:
            while True:
                while self._queue and self._queue[0].cancelled:
                    self._queue.popleft()
                if self._queue:
                    break
                if self._closing:
                    return None
                self._cond.wait()
            first = self._queue.popleft()
            group = [first]
            if self._joinable(first):
                self._gather(group)
        now = time.monotonic()
        for p in group:
            p.started = now
        return group

    def _joinable(self, first: Pending) -> bool:
        if first.key is None or self.check is None or not self.plan.enabled:
            return False
        if self._cooldown > 0:
            self._cooldown -= 1
            return False
        known = self.check.known(first.key)
        return known is None or not known[0]

    def _gather(self, group: list[Pending]) -> None:
        """Add compatible queued requests to ``group`` (called holding the lock)."""
        first = group[0]
        rows = first.rows
        deadline = first.enqueued + self.max_delay_s
        while rows < self.plan.max_rows:
            taken: list[Pending] = []
            for p in self._queue:
                if not p.cancelled and p.key == first.key and rows + p.rows <= self.plan.max_rows:
                    taken.append(p)
                    rows += p.rows
            for p in taken:
                self._queue.remove(p)
            group.extend(taken)
            remaining = deadline - time.monotonic()
            if rows >= self.plan.max_rows or remaining <= 0 or self._closing:
                return
            self._cond.wait(remaining)

    def _execute(self, group: list[Pending]) -> None:
        group = [p for p in group if not p.cancelled]
        if len(group) > 1 and self._run_joined(group):
            return
        for p in group:
            t0 = time.perf_counter()
            try:
                result: Outputs | BaseException = self.runner.run(p.arrays)
            except Exception as exc:
                result = exc
            p.deliver(result)
            self._report(1, p.rows, t0, joined=False)

    def _run_joined(self, group: list[Pending]) -> bool:
        """Run the group as one call; False when its requests must run alone instead."""
        assert self.check is not None and group[0].key is not None
        reason, path = self.check.result(group[0].key)
        if reason:
            return False
        t0 = time.perf_counter()
        rows = sum(p.rows for p in group)
        try:
            outs, took = self.runner.run_on_path(_join([p.arrays for p in group], self.runner))
        except Exception:  # re-run alone: each error goes to its own request only
            self._report(len(group), rows, t0, joined=True, fallback="error")
            return False
        if took != path:
            self._cooldown = _COOLDOWN_CALLS
            self._report(len(group), rows, t0, joined=True, fallback=f"{took} path")
            return False
        offset = 0
        for p in group:
            p.deliver([o[offset : offset + p.rows] for o in outs])
            offset += p.rows
        self._report(len(group), rows, t0, joined=True)
        return True

    def _report(
        self, requests: int, rows: int, t0: float, *, joined: bool, fallback: str = ""
    ) -> None:
        if self.on_call is not None:
            self.on_call(BatcherStats(requests, rows, time.perf_counter() - t0, joined, fallback))


def _join(parts: Sequence[Arrays], runner: Runner) -> list[np.ndarray[Any, Any]]:
    """The inputs of several requests joined along their first dimension (dimension
    arguments, equal in every part, are passed once)."""
    out: list[np.ndarray[Any, Any]] = []
    for i, info in enumerate(runner.inputs):
        if info.dim_argument:
            out.append(parts[0][i])
        else:
            out.append(np.concatenate([p[i] for p in parts], axis=0))
    return out
