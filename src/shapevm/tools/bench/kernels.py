"""Kernel benchmark core: one computation (a `KernelCase`) timed in shapevm's C library,
ONNX Runtime and NumPy in the same process, interleaved round by round.

Method, per case and thread count: every system makes ``warmup`` untimed calls, then
``rounds`` rounds in which each system in turn (the order rotates) makes ``block``
back-to-back timed calls; a system's time is the median of its ``rounds * block`` calls.
Before each block the harness waits (at most `SETTLE_MAX_S`) until no other thread of this
process is running: pool workers that spin after a call (OpenBLAS's for ~0.1 s, ONNX
Runtime's, shapevm's) would otherwise take a core from the next system. One process with
interleaved rounds rather than a fresh process per system: on a shared machine the load
changes from second to second, and interleaving gives every system the same share of it.

Threads: shapevm's pool is resized (`shapevm.native.set_num_threads`), NumPy's BLAS is
limited with threadpoolctl, ONNX Runtime gets one session per thread count
(``intra_op_num_threads``, sequential execution, one inter-op thread) run through IO
binding into preallocated outputs.

>>> import numpy as np
>>> x = np.ones((4, 4), np.float32)
>>> case = KernelCase("demo", "x + x", "4x4", numpy=lambda: x + x)
>>> row = measure_case(case, threads=1, config=KernelConfig(rounds=2, block=2, warmup=1))
>>> sorted(row.median_us), row.calls
(['numpy'], 4)
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]
SYSTEMS = ("shapevm", "onnxruntime", "numpy")
SETTLE_MAX_S = 0.3
"""Longest wait for the process's other threads to stop running before a block of calls."""


@dataclass(frozen=True)
class OnnxGraph:
    """An ONNX model (``onnx.ModelProto``) and the inputs to feed it."""

    model: Any
    feeds: dict[str, Array]


@dataclass(frozen=True)
class KernelCase:
    """One row of the kernel table: the same computation in each system.

    ``shapevm`` and ``numpy`` are zero-argument calls returning the result; ``onnx`` builds
    the ONNX graph (called once per thread count, only when onnxruntime is installed).
    ``missing`` says why shapevm has no kernel for the row (e.g. ``"not built yet"``).
    """

    group: str
    name: str
    shape: str
    shapevm: Callable[[], Any] | None = None
    numpy: Callable[[], Any] | None = None
    onnx: Callable[[], OnnxGraph] | None = None
    missing: str = ""


@dataclass(frozen=True)
class KernelConfig:
    """How many calls: ``rounds * block`` timed calls per system, after ``warmup``."""

    rounds: int = 7
    block: int = 3
    warmup: int = 3
    systems: tuple[str, ...] = SYSTEMS
    retry_busy: float = 1.0
    retries: int = 1


@dataclass
class RowResult:
    """The measurement of one case at one thread count: wall-time medians, and with one
    thread the medians of the calling thread's CPU time too (every system computes on it
    then; CPU time leaves out the waits for a core that a busy machine adds)."""

    median_us: dict[str, float] = field(default_factory=dict)
    cpu_median_us: dict[str, float] = field(default_factory=dict)
    calls: int = 0
    busy: float = 0.0
    errors: dict[str, str] = field(default_factory=dict)
    max_rel_diff: dict[str, float] = field(default_factory=dict)


def _others_running() -> bool:
    """Whether a thread of this process other than the caller is running (Linux)."""
    me = str(threading.get_native_id())
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return False
    for tid in tasks:
        if tid == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat", encoding="ascii") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state == "R":
            return True
    return False


def settle(max_s: float = SETTLE_MAX_S) -> None:
    """Wait until the process's other threads (spinning pool workers) stop running."""
    end = time.perf_counter() + max_s
    while _others_running() and time.perf_counter() < end:
        time.sleep(0.0005)


class BusyMeter:
    """CPU cores used by other processes while a measurement runs (Linux's /proc/stat).

    >>> meter = BusyMeter()
    >>> meter.cores() >= 0.0
    True
    """

    def __init__(self) -> None:
        self._start = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float, float]:
        own = os.times()
        try:
            with open("/proc/stat", encoding="ascii") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
        except (OSError, ValueError):
            return time.perf_counter(), 0.0, own.user + own.system
        busy = sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)
        return time.perf_counter(), busy / os.sysconf("SC_CLK_TCK"), own.user + own.system

    def cores(self) -> float:
        """Average cores the rest of the machine used since this meter started."""
        wall0, busy0, own0 = self._start
        wall1, busy1, own1 = self._sample()
        if wall1 <= wall0 or busy1 == 0.0:
            return 0.0
        return max(0.0, (busy1 - busy0) - (own1 - own0)) / (wall1 - wall0)


@contextmanager
def thread_limit(threads: int) -> Iterator[None]:
    """shapevm's pool and NumPy's BLAS limited to ``threads`` for the block."""
    from threadpoolctl import threadpool_limits

    from shapevm import native

    native.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads, user_api="blas"):
            yield
    finally:
        native.set_num_threads(0)


def ort_call(graph: OnnxGraph, threads: int) -> Callable[[], Any]:
    """An ONNX Runtime session of ``graph`` with ``threads`` intra-op threads, as a call
    through IO binding into outputs allocated once."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    session = ort.InferenceSession(
        graph.model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    first = session.run(None, graph.feeds)
    binding = session.io_binding()
    for name, value in graph.feeds.items():
        binding.bind_cpu_input(name, value)
    outs = [np.empty_like(v) for v in first]
    for meta, out in zip(session.get_outputs(), outs, strict=True):
        binding.bind_output(meta.name, "cpu", 0, out.dtype, list(out.shape), out.ctypes.data)

    def call() -> Any:
        session.run_with_iobinding(binding)
        return outs[0]

    return call


def ort_available() -> str | None:
    """``None`` when onnx and onnxruntime import, else why not."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError as exc:
        return f"{exc.name or 'onnxruntime'} not installed (pip install -e '.[bench]')"
    return None


def _calls(case: KernelCase, threads: int, systems: Sequence[str]) -> dict[str, Callable[[], Any]]:
    calls: dict[str, Callable[[], Any]] = {}
    if "shapevm" in systems and case.shapevm is not None:
        calls["shapevm"] = case.shapevm
    if "onnxruntime" in systems and case.onnx is not None and ort_available() is None:
        calls["onnxruntime"] = ort_call(case.onnx(), threads)
    if "numpy" in systems and case.numpy is not None:
        calls["numpy"] = case.numpy
    return calls


def _rel_diff(y: Any, ref: Any) -> float:
    y64, r64 = np.asarray(y, np.float64), np.asarray(ref, np.float64)
    if y64.shape != r64.shape:
        return float("inf")
    scale = float(np.max(np.abs(r64))) if r64.size else 0.0
    return float(np.max(np.abs(y64 - r64))) / (scale or 1.0) if r64.size else 0.0


def _timed_block(
    call: Callable[[], Any], block: int, wall: list[int], cpu: list[int] | None
) -> None:
    clock, thread_clock = time.perf_counter_ns, time.thread_time_ns
    for _ in range(block):
        c0 = thread_clock() if cpu is not None else 0
        t0 = clock()
        call()
        t1 = clock()
        if cpu is not None:
            cpu.append(thread_clock() - c0)
        wall.append(t1 - t0)


def _one_attempt(
    calls: dict[str, Callable[[], Any]], config: KernelConfig, row: RowResult, threads: int
) -> None:
    names = list(calls)
    wall: dict[str, list[int]] = {name: [] for name in names}
    cpu: dict[str, list[int]] = {name: [] for name in names}
    meter = BusyMeter()
    for r in range(config.rounds):
        for i in range(len(names)):
            name = names[(r + i) % len(names)]
            settle()
            _timed_block(calls[name], config.block, wall[name], cpu[name] if threads == 1 else None)
    row.busy = meter.cores()
    row.calls = config.rounds * config.block
    row.median_us = {n: statistics.median(s) / 1e3 for n, s in wall.items()}
    row.cpu_median_us = {n: statistics.median(s) / 1e3 for n, s in cpu.items() if s}


def measure_case(case: KernelCase, threads: int, config: KernelConfig) -> RowResult:
    """Time ``case`` with ``threads`` threads in every system it has; retried (the attempt
    with the quieter machine kept) when other processes used more than ``retry_busy``
    cores."""
    row = RowResult()
    with thread_limit(threads):
        try:
            calls = _calls(case, threads, config.systems)
        except Exception as exc:  # a peer that cannot build this graph: report, go on
            row.errors["onnxruntime"] = f"{type(exc).__name__}: {exc}"
            calls = _calls(case, threads, [s for s in config.systems if s != "onnxruntime"])
        results = {}
        for name, call in list(calls.items()):
            try:
                for _ in range(max(1, config.warmup)):
                    results[name] = call()
            except Exception as exc:
                row.errors[name] = f"{type(exc).__name__}: {exc}"
                del calls[name]
        if "numpy" in results:
            for name in ("shapevm", "onnxruntime"):
                if name in results:
                    row.max_rel_diff[name] = _rel_diff(results[name], results["numpy"])
        if not calls:
            return row
        best: RowResult | None = None
        for _ in range(1 + max(0, config.retries)):
            attempt = RowResult(errors=row.errors, max_rel_diff=row.max_rel_diff)
            _one_attempt(calls, config, attempt, threads)
            if best is None or attempt.busy < best.busy:
                best = attempt
            if attempt.busy <= config.retry_busy:
                break
        assert best is not None
        return best
