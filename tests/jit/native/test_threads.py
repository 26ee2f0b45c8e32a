"""The decision to fork threads: size thresholds, busy machines, and the counts of both."""

from __future__ import annotations

import hashlib
import threading
import time

import pytest

pytest.importorskip("numba", exc_type=ImportError)

from shapevm.jit.native import _threads, thread_stats
from shapevm.jit.worker import WORKER


def test_small_work_runs_on_the_calling_thread() -> None:
    before = thread_stats()
    assert not _threads.use_threads(10, 1000)
    assert thread_stats()["serial_small"] == before["serial_small"] + 1


def test_busy_machine_runs_serial_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_threads, "cores_free", lambda: False)
    monkeypatch.setattr(_threads.numba, "get_num_threads", lambda: 2)
    before = thread_stats()
    assert not _threads.use_threads(10_000, 1000)
    assert thread_stats()["serial_busy_machine"] == before["serial_busy_machine"] + 1
    monkeypatch.setattr(_threads, "cores_free", lambda: True)
    assert _threads.use_threads(10_000, 1000)
    assert thread_stats()["parallel"] == before["parallel"] + 1


def test_cores_free_samples_the_machine() -> None:
    _threads._machine["wall"] = 0.0
    _threads._process["wall"] = 0.0
    assert _threads.cores_free() in (True, False)
    assert isinstance(_threads.cores_free(), bool)  # cached within SAMPLE_SECONDS


def _window(seconds: float) -> bool:
    """A fresh sampling window of ``seconds`` with this thread asleep; its verdict."""
    for state in (_threads._process, _threads._machine):
        state["wall"] = state["cores"] = 0.0
    _threads.cores_free()
    time.sleep(seconds)
    return _threads.cores_free()


def test_a_busy_thread_of_this_process_keeps_kernels_off_the_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Other processes are left out (the machine counts exactly this process's CPU time), so
    # only this process's other threads decide: OpenBLAS's spinning worker in real use, here
    # a thread hashing with the GIL released.
    monkeypatch.setattr(_threads, "_machine_busy_seconds", time.process_time)
    monkeypatch.setattr(_threads.numba, "get_num_threads", lambda: 2)
    monkeypatch.setattr(_threads.os, "cpu_count", lambda: 2)
    WORKER.wait(60)  # earlier tests' background compiles and pool workers come to rest
    time.sleep(0.2)
    stop = threading.Event()
    data = bytes(1 << 20)

    def spin() -> None:
        while not stop.is_set():
            hashlib.sha256(data).digest()

    worker = threading.Thread(target=spin, daemon=True)
    try:
        assert _window(0.1), "nothing else runs in this process: the pool is free"
        worker.start()
        assert not _window(0.1), "a thread of this process holds a core"
    finally:
        stop.set()
        if worker.is_alive():
            worker.join()
        _threads.forget_samples()  # later tests sample the real machine afresh


def test_timed_pool_calls_are_not_taken_for_another_thread() -> None:
    # 10 ms of pool kernels on 2 threads: the worker's 10 ms (and its spin) are the pool's.
    assert _threads.others_in_process(0.020, 0.010, 0.010, 2, threads=2) == 0.0
    # Untimed CPU beyond that is someone else's.
    assert _threads.others_in_process(0.051, 0.010, 0.010, 2, threads=2) == pytest.approx(0.0306)
