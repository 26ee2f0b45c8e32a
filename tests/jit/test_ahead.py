"""Lowering ahead (the default): a function is lowered to the native executor as it is
wrapped or traced, so its first call already runs native; ``hot_threshold`` then gates
generated C (tier 3) and the keys' own variants."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import shapevm as sv
import shapevm.numpy as snp
from tests.jit.programs import (
    assert_same,
    exported_mlp,
    interpreted,
    jitted_mlp,
    mlp_inputs,
)
from tests.jit.test_engine import injected, sleeping  # noqa: F401  (a fixture)


def test_the_first_call_runs_native_and_other_shapes_borrow_it():
    j = jitted_mlp()
    args = mlp_inputs(5)
    got = j(*args)
    assert_same(interpreted(j, *args), got)
    stats = j.jit_stats()
    assert (stats["calls"], stats["compiled_calls"], stats["compiles"]) == (1, 1, 1)
    (row,) = j.jit_info()
    assert (row["key"], row["status"], row["tier"]) == (("exact", (5,)), "ready", 2)
    assert row["compile_ms"] > 0  # the lowering done ahead is the variant's compile time
    other = mlp_inputs(9)
    got = j(*other)
    assert_same(interpreted(j, *other), got)
    stats = j.jit_stats()
    assert (stats["compiled_calls"], stats["borrowed_calls"]) == (2, 1)


def test_a_new_shapes_borrowed_calls_skip_the_engines_decision(monkeypatch):
    """A new shape's calls before its key is hot run in the function's shape-generic
    executor straight from the call (`JitEngine._borrow_fast`): the engine's full decision
    is not taken, the counters say what it would have said, and the call that makes the
    key hot takes the full path and gives the key its own variant (the shared code)."""
    from shapevm.jit.engine import JitEngine

    decided = []
    full = JitEngine._decide

    def counting(self, values):
        decided.append(values)
        return full(self, values)

    monkeypatch.setattr(JitEngine, "_decide", counting)
    j = jitted_mlp()  # hot_threshold=3
    j(*mlp_inputs(5))  # the first call: the full path makes 5's variant
    assert decided == [(5,)]
    for _ in range(2):
        args = mlp_inputs(9)
        assert_same(interpreted(j, *args), j(*args))
    assert decided == [(5,)]
    stats = j.jit_stats()
    assert (stats["calls"], stats["compiled_calls"], stats["borrowed_calls"]) == (3, 3, 2)
    assert [r["key"] for r in j.jit_info()] == [("exact", (5,))]
    assert j.jit_info()[0]["hits"] == 3
    for _ in range(2):  # hot: 9's own variant; then its known shape's fast path
        args = mlp_inputs(9)
        assert_same(interpreted(j, *args), j(*args))
    assert decided == [(5,), (9,)]
    assert [r["key"] for r in j.jit_info()] == [("exact", (5,)), ("exact", (9,))]
    assert j.jit_info()[-1]["shares_code_with"] == "exact (5,)"
    with pytest.raises(sv.ShapeError, match=r"Dimension x\.shape\[1\] must be 8, found 7"):
        j(mlp_inputs(4)[0][:, :7], *mlp_inputs(4)[1:])  # a mismatch: the binder explains it
    assert j.jit_stats()["calls"] == 5


def test_a_borrowed_call_the_executor_refuses_is_counted_once_by_the_full_path():
    from shapevm import native

    j = jitted_mlp()
    j(*mlp_inputs(5))
    (engine,) = j.engines
    fn = engine.variant(("exact", (5,))).function
    real, refused = fn.direct, []

    class RefusingOnce:  # the executor's own checks saying no after its binder said yes
        bind = real.bind

        def __call__(self, *args):
            if not refused:
                refused.append(True)
                raise native.ExecMismatch("refused once")
            return real(*args)

    fn.direct = RefusingOnce()
    try:
        args = mlp_inputs(9)
        assert_same(interpreted(j, *args), j(*args))
    finally:
        fn.direct = real
    assert refused == [True]
    stats = j.jit_stats()
    assert (stats["calls"], stats["compiled_calls"], stats["borrowed_calls"]) == (2, 2, 1)
    assert engine._counts[("exact", (9,))] == 1 and j.jit_info()[0]["hits"] == 2


def test_a_borrowed_call_that_fails_names_the_instruction():
    table = np.arange(36, dtype=np.float32).reshape(9, 4)

    @sv.jit(shapes="b, s")
    def lookup(ids):
        return snp.asarray(table)[ids] * 2.0

    ok = np.array([[0, 8, 3]], np.int64)
    assert_same(table[ok] * 2.0, lookup(ok))
    bad = np.array([[0, 9]], np.int64)  # a new shape: a borrowed call
    named = r"OP_CALL take\(.* failed .*index 9 is out of bounds for axis 0 with size 9"
    with pytest.raises(sv.RuntimeOpError, match=named):
        lookup(bad)
    assert lookup.jit_stats()["borrowed_calls"] == 1


def test_an_exported_program_is_lowered_by_jit_before_any_call():
    exp = exported_mlp()
    fast = exp.jit()
    assert fast.engine.ahead_ms > 0 and fast.jit_info() == []
    for batch in (1, 7, 300):
        args = mlp_inputs(batch)
        assert_same(exp.call(*args), fast(*args))
    assert fast.jit_stats()["compiled_calls"] == 3


def test_generated_c_waits_for_hot_threshold_calls_of_the_key(monkeypatch):
    from shapevm.jit.backend import tier3

    built = []
    done = threading.Event()

    def recording_build(variant, *args, **kwargs):
        built.append(variant.key)
        done.set()
        raise RuntimeError("not built in this test")

    monkeypatch.setattr(tier3, "available", lambda: None)
    monkeypatch.setattr(tier3, "generate", recording_build)

    @sv.jit(shapes="b, 16", hot_threshold=3, tier3_min_elements=0)
    def chain(x):
        return snp.tanh(x * 1.5 + 0.25) * x

    x = np.linspace(-2, 2, 48, dtype=np.float32).reshape(3, 16)
    for _ in range(2):
        assert_same(np.tanh(x * 1.5 + 0.25) * x, chain(x))
    chain.wait(30)
    assert built == [] and chain.jit_info()[0]["tier3"] == ""
    chain(x)  # the key's third call: its chains go to the C compiler, in the background
    assert done.wait(30) and chain.wait(30)
    assert built == [("exact", (3,))]
    for _ in range(3):
        chain(x)
    chain.wait(30)
    assert built == [("exact", (3,))]  # once
    (row,) = chain.jit_info()
    assert row["tier3"].startswith("failed: RuntimeError") and row["tier"] == 2


def test_a_lowering_past_the_timeout_leaves_the_function_interpreted(injected):  # noqa: F811
    def sluggish(x):
        return x + 1.0

    j = sv.jit(
        sluggish,
        shapes="b",
        compile_timeout_s=0.2,
        compiler=injected("sluggish", sleeping(3.0)),
    )
    x = np.arange(3, dtype=np.float32)
    t0 = time.perf_counter()
    assert_same(x + 1.0, j(x))  # traced, lowered ahead until the timeout, interpreted
    assert time.perf_counter() - t0 < 2.0
    assert j.jit_stats()["compiled_calls"] == 0


@pytest.mark.parametrize("ahead", [True, False])
def test_a_stream_of_shapes_gives_the_interpreters_results(ahead):
    j = jitted_mlp(ahead=ahead)
    for batch in (3, 1, 64, 3, 17, 1, 3, 3, 256, 17):
        args = mlp_inputs(batch)
        got = j(*args)
        assert_same(interpreted(j, *args), got)
    j.wait(30)
    args = mlp_inputs(5)
    got = j(*args)
    assert_same(interpreted(j, *args), got)
    assert j.jit_stats()["compiled_calls"] >= (11 if ahead else 1)


def test_a_capability_patch_lowers_the_function_again_at_its_next_call():
    import shapevm.vm as vm
    from shapevm.runtime import UnsupportedKernelError

    f = sv.jit(lambda x: snp.exp(x) + 1.0, shapes="b")
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    try:
        assert_same(np.exp(x) + 1.0, f(x), exp_chains=True)
        assert f.jit_stats()["compiled_calls"] == 1
        vm.load_capability_patch({"cpu": {"exp": None}})  # no exp anywhere: the call fails
        with pytest.raises(UnsupportedKernelError):
            f(x)
    finally:
        vm.reset_capability_db()
    assert_same(np.exp(x) + 1.0, f(x), exp_chains=True)  # lowered again under the full table
    stats = f.jit_stats()
    assert stats["evictions"] >= 1 and stats["failures"] == 0
    assert [r["status"] for r in f.jit_info() if r["status"] != "evicted"] == ["ready"]
    assert f.jit_info()[-1]["hits"] == 1


def test_generated_c_past_the_timeout_is_recorded_as_failed(monkeypatch):
    from shapevm.jit.backend import tier3

    def slow_build(variant, env, specialize, check):
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            time.sleep(0.01)
            check()  # cooperative: stops once the job is abandoned
        raise AssertionError("not abandoned")

    monkeypatch.setattr(tier3, "available", lambda: None)
    monkeypatch.setattr(tier3, "generate", slow_build)
    f = sv.jit(
        lambda z: snp.tanh(z * 1.5) + z,
        shapes="b, 16",
        hot_threshold=1,
        background=False,
        compile_timeout_s=0.3,
        ahead=False,
        tier3_min_elements=0,
    )
    x = np.ones((2, 16), np.float32)
    f(x)  # lowered in time, then its generated C runs past the timeout
    (row,) = f.jit_info()
    assert row["status"] == "ready"
    assert row["tier3"] == "failed: timeout: compile exceeded 0.3 s"
    assert f.jit_stats()["tier3_failures"] == 1
    assert_same(np.tanh(x * 1.5) + x, f(x))  # tier 2 runs on
