"""The decision to fork threads: size thresholds, busy machines, and the counts of both."""

from __future__ import annotations

import pytest

pytest.importorskip("numba", exc_type=ImportError)

from shapevm.jit.native import _threads, thread_stats


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
    _threads._state["wall"] = 0.0
    assert _threads.cores_free() in (True, False)
    assert isinstance(_threads.cores_free(), bool)  # cached within SAMPLE_SECONDS
