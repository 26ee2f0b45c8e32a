"""Fixtures for the native kernel tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def threads_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let big kernels use the thread pool even while other processes keep the cores busy,
    so that the parallel variants are tested on a shared machine too."""
    numba = pytest.importorskip("numba")
    if numba.get_num_threads() < 2:
        pytest.skip("numba has a single thread here")
    from shapevm.jit.native import _threads

    monkeypatch.setattr(_threads, "cores_free", lambda: True)
