"""Interpreted steps of jitted functions run with NumPy's BLAS on one thread (`jit.blas`)."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
import threadpoolctl

import shapevm as sv
from shapevm.jit import blas, engine
from tests.jit.programs import assert_same, jitted_mlp, mlp_inputs
from tests.jit.test_engine import injected, numpy_mlp, sleeping  # noqa: F401  (a fixture)


def test_one_blas_thread_sets_and_restores_the_thread_count():
    controller = threadpoolctl.ThreadpoolController().select(user_api="blas")
    before = [lib.num_threads for lib in controller.lib_controllers]
    with blas.one_blas_thread():
        assert all(lib.num_threads == 1 for lib in controller.lib_controllers)
        a = np.ones((64, 64), np.float32)
        assert float((a @ a)[0, 0]) == 64.0
    assert [lib.num_threads for lib in controller.lib_controllers] == before


@pytest.fixture
def entered(monkeypatch):
    count = [0]

    @contextmanager
    def counting():
        count[0] += 1
        with blas.one_blas_thread():
            yield

    monkeypatch.setattr(engine, "one_blas_thread", counting)
    return count


def test_calls_interpreted_while_a_compile_runs_use_one_blas_thread(entered, injected):  # noqa: F811
    def slowpoke(x):
        return sv.numpy.tanh(x) * 2.0

    compiler = injected("slowpoke", sleeping(0.4))
    j = sv.jit(slowpoke, shapes="b", hot_threshold=1, compiler=compiler, ahead=False)
    x = np.linspace(-1, 1, 4).astype(np.float32)
    for _ in range(3):
        assert_same(np.tanh(x) * 2.0, j(x))
    assert entered[0] >= 2  # the compile is queued or running from the first call on
    assert j.wait(10)
    before = entered[0]
    j(x)
    assert entered[0] == before  # a wholly compiled call runs no interpreted step


def test_a_function_with_nothing_compiled_keeps_numpy_threads(entered):
    j = jitted_mlp(hot_threshold=100)
    for _ in range(3):
        args = mlp_inputs(5)
        assert_same(numpy_mlp(*args), j(*args))
    assert entered[0] == 0


def test_a_function_that_nothing_lowers_keeps_numpy_threads(entered):
    """float64 layers have no native kernel: the compile fails once, with the reason, and
    the calls after it are the interpreter's with NumPy's threads (setting and restoring
    the count cost them 5 us, the JIT ran slower than the interpreter)."""
    w = np.random.default_rng(0).standard_normal((6, 3))  # float64, as np.random makes

    def dense64(x):
        return sv.numpy.maximum(x @ w, 0.0)

    j = sv.jit(dense64, shapes="b, 6", hot_threshold=1, background=False)
    x = np.ones((4, 6), np.float32)
    for _ in range(3):
        assert_same(np.maximum(x @ w, 0.0), j(x))
    (info,) = j.jit_info()
    assert info["status"] == "failed" and ".astype(np.float32)" in info["reason"], info
    assert entered[0] == 0
