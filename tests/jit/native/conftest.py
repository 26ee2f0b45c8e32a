"""Fixtures for the native kernel tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def threads_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run every kernel on the thread pool: size thresholds down to small test shapes, and
    no backing off while other processes keep a shared machine's cores busy."""
    numba = pytest.importorskip("numba", exc_type=ImportError)
    if numba.get_num_threads() < 2:
        pytest.skip("numba has a single thread here")
    from shapevm.jit.native import _threads, conv, gemm, rowops

    monkeypatch.setattr(_threads, "cores_free", lambda: True)
    for module, name in [
        (gemm, "PARALLEL_MIN_MACS"),
        (conv, "PARALLEL_MIN_MACS"),
        (rowops, "PARALLEL_MIN_ELEMENTS"),
        (rowops, "ATTENTION_PARALLEL_MIN"),
    ]:
        monkeypatch.setattr(module, name, 1)
