"""The thread pool: results do not depend on the thread count, calls from several Python
threads at once are safe, a forked child computes with a pool of its own, and a worker that
lost its core keeps the next jobs on the calling thread for a while."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from shapevm import _native, native


@pytest.fixture
def pool_of_two() -> Iterator[None]:
    native.set_num_threads(2)
    yield
    native.set_num_threads(0)


def _layer() -> tuple[np.ndarray, object]:  # type: ignore[type-arg]
    rng = np.random.default_rng(0)
    w = rng.standard_normal((512, 512)).astype(np.float32)
    x = rng.standard_normal((64, 512)).astype(np.float32)
    return x, native.pack_dense(w)


def test_thread_count_does_not_change_results(pool_of_two: None) -> None:
    x, packed = _layer()
    one = native.dense(x, packed, activation="gelu_tanh", threads=1)
    before = native.info()["pool"]["parallel_calls"]
    many = native.dense(x, packed, activation="gelu_tanh")
    np.testing.assert_array_equal(one, many)
    assert native.info()["pool"]["parallel_calls"] == before + 1


def test_concurrent_callers(pool_of_two: None) -> None:
    x, packed = _layer()
    expected = native.dense(x, packed, threads=1)
    errors: list[str] = []

    def work() -> None:
        for _ in range(30):
            if not np.array_equal(native.dense(x, packed), expected):
                errors.append("mismatch")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_forked_child_uses_its_own_pool(pool_of_two: None) -> None:
    x, packed = _layer()
    expected = native.dense(x, packed)  # the parent's workers exist now
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        ok = np.array_equal(native.dense(x, packed), expected)
        os.write(w, b"1" if ok else b"0")
        os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.waitpid(pid, 0)
    assert got == b"1"


def test_environment_picks_threads_and_level() -> None:
    code = "from shapevm import native; i = native.info(); print(i['num_threads'], i['isa'])"
    env = dict(os.environ, SHAPEVM_NUM_THREADS="3", SHAPEVM_ISA="generic")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["3", "generic"]


def test_unsupported_level_in_environment_warns_and_falls_back() -> None:
    code = "from shapevm import native; print(native.info()['isa'])"
    env = dict(os.environ, SHAPEVM_ISA="sse9")
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert proc.stdout.strip() == native.isa_levels()[-1]
    assert "SHAPEVM_ISA=sse9 is not a level" in proc.stderr


def _pool() -> dict[str, int]:
    return dict(native.info()["pool"])


def _late_job() -> None:
    """A job whose worker took a task and then slept 20 ms (a worker that lost its core)."""
    assert _native._pool_probe(2, 0, 20000) == (1, 1)


def test_a_late_worker_keeps_jobs_off_the_pool_for_a_while(pool_of_two: None) -> None:
    """After a late job, the next job and 2 ms run on the calling thread; then the pool."""
    _native._pool_probe(8, 50, 0)  # the worker exists
    before = _pool()
    _late_job()
    late = _pool()
    assert late["late_jobs"] == before["late_jobs"] + 1 and late["serial_jobs_left"] == 1
    assert _native._pool_probe(8, 50, 0) == (8, 0)
    assert _pool()["backed_off_calls"] == late["backed_off_calls"] + 1
    time.sleep(0.01)
    _native._pool_probe(8, 50, 0)
    assert _pool()["parallel_calls"] == late["parallel_calls"] + 1


def test_late_jobs_in_a_row_keep_the_pool_off_longer(pool_of_two: None) -> None:
    """Each late job in a row doubles the jobs kept off the pool (1, 2, 4), however far
    apart in time the calls come (a NumPy product before each); a job that was not late
    halves it."""
    _native._pool_probe(8, 50, 0)
    kept_off = []
    for _ in range(3):
        _late_job()
        kept_off.append(_pool()["serial_jobs_left"])
        for _ in range(kept_off[-1]):
            time.sleep(0.02)
            assert _native._pool_probe(8, 50, 0) == (8, 0)
        time.sleep(0.02)  # past the time part of the backoff (2, 4 ms)
    assert kept_off == [1, 2, 4]
    time.sleep(0.05)
    _native._pool_probe(4, 0, 0)  # on the pool, not late
    _late_job()
    assert _pool()["serial_jobs_left"] == 4


def test_short_waits_are_not_late() -> None:
    """Coming back from its sleep (or starting) takes a worker tens of microseconds, and a
    worker with cold caches is slower for a while: a wait is late only from 200 us (half a
    millisecond where the job woke the worker); judging shorter waits late kept the first
    calls of a process on one thread. And the caller must have waited at least half as
    long as it worked."""
    late = _native._pool_late
    assert late(10, 300, False) and not late(10, 300, True)
    assert not late(10, 150, False)
    assert late(10, 600, True) and late(1000, 600, True) and not late(1300, 600, True)
    assert not late(700, 300, False)


def test_setting_the_thread_count_tries_the_pool_again(pool_of_two: None) -> None:
    _native._pool_probe(8, 50, 0)
    _native._pool_probe(2, 0, 20000)
    native.set_num_threads(2)
    before = _pool()
    _native._pool_probe(8, 50, 0)
    assert _pool()["parallel_calls"] == before["parallel_calls"] + 1
    assert _pool()["backed_off_calls"] == before["backed_off_calls"]


def _ran_as_dealt(ran: list[int], lo: int, hi: int) -> bool:
    """A thread whose range is [lo, hi) runs a prefix of it in order, then tasks of the
    other ranges from their backs (descending within each)."""
    k = 0
    while k < len(ran) and ran[k] == lo + k and ran[k] < hi:
        k += 1
    stolen = ran[k:]
    return all(not lo <= t < hi for t in stolen) and all(
        a > b for a, b in itertools.pairwise(stolen) if (a < lo) == (b < lo)
    )


@pytest.mark.parametrize("ntasks", [2, 7, 16, 33])
def test_each_thread_runs_its_own_range_first(pool_of_two: None, ntasks: int) -> None:
    """Tasks are dealt in contiguous ranges, the caller's first: a thread gets the same
    tasks of a kernel call after call (a dense layer's panels of weights stay in its
    core's cache), and takes the others' from their backs only when its own are done."""
    _native._pool_probe(8, 50, 0)  # the worker exists and spins
    half = ntasks // 2
    for task_us in (0, 200):
        mine, theirs = _native._pool_trace(ntasks, task_us)
        assert sorted(mine + theirs) == list(range(ntasks))
        assert _ran_as_dealt(mine, 0, half), mine
        assert _ran_as_dealt(theirs, half, ntasks), theirs


def test_a_sleeping_worker_leaves_its_range_to_the_caller(pool_of_two: None) -> None:
    time.sleep(0.3)  # past the workers' spin: they sleep
    mine, theirs = _native._pool_trace(8, 0)
    assert sorted(mine + theirs) == list(range(8))
    assert _ran_as_dealt(mine, 0, 4) and _ran_as_dealt(theirs, 4, 8)
