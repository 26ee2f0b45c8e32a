"""The engine: trigger, hot-patching, budgets, failures and timeouts, threads."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import shapevm as sv
import shapevm.numpy as snp
from shapevm.jit import Compiler, lowering_names
from tests.jit.programs import (
    assert_same,
    exported_mlp,
    interpreted,
    jitted_mlp,
    mlp_inputs,
    softmax_mlp,
)


def statuses(j):
    return {row["key"]: row["status"] for row in j.jit_info()}


def numpy_mlp(x, w, b):
    y = np.maximum(x @ w + b, 0.0)
    z = np.exp(y - y.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


@pytest.fixture
def injected():
    """A compiler whose first lowering runs ``hook`` on the ops of one function (by name)
    and then leaves them to the usual lowerings."""

    def inject(function, hook):
        def lowering(low, op):
            if low.graph.function.name == function:
                hook(low)
            return False

        return Compiler([("injected", lowering), *lowering_names()])

    return inject


def sleeping(seconds):
    def hook(low):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(0.01)
            low.check()  # cooperative: an abandoned compile stops here

    return hook


def failing(low):
    raise RuntimeError("no kernel for this op")


def test_a_key_compiles_after_hot_threshold_calls_and_serves_the_next_call():
    j = jitted_mlp(hot_threshold=3, background=False, ahead=False)
    args = mlp_inputs(5)
    for _ in range(2):
        j(*args)
    assert j.jit_info() == []
    j(*args)  # the third call triggers the compile and is still interpreted
    assert statuses(j) == {("exact", (5,)): "ready"}
    assert j.jit_stats()["compiled_calls"] == 0
    assert_same(numpy_mlp(*args), j(*args))
    stats = j.jit_stats()
    assert (stats["calls"], stats["compiled_calls"], stats["compiles"]) == (4, 1, 1)
    (row,) = j.jit_info()
    assert row["hits"] == 1 and row["compile_ms"] > 0
    assert row["planned_bytes"] > 0 and row["naive_bytes"] > 0


def test_the_first_variant_counts_every_shape_and_later_keys_their_own():
    """The first lowering serves every shape, so it waits for the function's calls, not
    for one shape to come back (in a stream of six shapes that took 15-25 calls, all
    interpreted); after it, each key counts its own calls for a variant of its own."""
    j = jitted_mlp(hot_threshold=2, background=False, ahead=False)
    j(*mlp_inputs(1))
    assert statuses(j) == {}
    j(*mlp_inputs(2))  # the function's second call: hot, whatever the shape
    assert statuses(j) == {("exact", (2,)): "ready"}
    j(*mlp_inputs(3))  # borrows (2,)'s native code, counted once for (3,)
    assert statuses(j) == {("exact", (2,)): "ready"}
    j(*mlp_inputs(1))  # (1,)'s second call: its own variant
    assert statuses(j) == {("exact", (2,)): "ready", ("exact", (1,)): "ready"}


def test_calls_during_a_background_compile_run_in_the_interpreter(injected):
    def slowpoke(x):
        return snp.tanh(x) * 2.0

    compiler = injected("slowpoke", sleeping(0.4))
    j = sv.jit(slowpoke, shapes="b, 3", hot_threshold=1, compiler=compiler, ahead=False)
    x = np.ones((4, 3), np.float32)
    t0 = time.perf_counter()
    j(x)
    assert time.perf_counter() - t0 < 0.3  # the triggering call did not wait for the compile
    assert set(statuses(j).values()) <= {"queued", "compiling"}
    for _ in range(5):
        assert_same(np.tanh(x) * 2.0, j(x))
    assert j.jit_stats()["compiled_calls"] == 0
    assert j.wait(10)
    assert statuses(j) == {("exact", (4,)): "ready"}
    j(x)
    assert j.jit_stats()["compiled_calls"] == 1
    assert j.jit_info()[0]["patterns"] == ("elementwise",)


def test_a_compile_over_the_timeout_is_abandoned_and_never_retried(injected):
    def sluggish(x):
        return x + 1.0

    compiler = injected("sluggish", sleeping(3.0))
    j = sv.jit(
        sluggish,
        shapes="b",
        hot_threshold=1,
        background=False,
        compile_timeout_s=0.2,
        compiler=compiler,
        ahead=False,
    )
    x = np.arange(3, dtype=np.float32)
    t0 = time.perf_counter()
    j(x)
    assert time.perf_counter() - t0 < 2.0
    (row,) = j.jit_info()
    assert row["status"] == "failed"
    assert row["reason"] == "timeout: compile exceeded 0.2 s"
    for _ in range(5):
        assert_same(x + 1.0, j(x))
    stats = j.jit_stats()
    assert (stats["compiles"], stats["failures"], stats["timeouts"]) == (0, 1, 1)
    assert len(j.jit_info()) == 1  # the key is not queued again


def test_a_failed_compile_with_fallback_interprets_and_keeps_the_reason(injected):
    def broken(x):
        return x * 3.0

    compiler = injected("broken", failing)
    j = sv.jit(broken, shapes="b", hot_threshold=1, background=False, compiler=compiler)
    x = np.arange(4, dtype=np.float32)
    for _ in range(3):
        assert_same(x * 3.0, j(x))
    (row,) = j.jit_info()
    assert (row["status"], row["reason"]) == ("failed", "RuntimeError: no kernel for this op")
    assert j.jit_stats()["failures"] == 1


def test_a_lowering_that_failed_is_not_tried_again_for_other_keys(injected):
    """Lowering does not depend on the shape: once it failed (ahead, or for a key), every
    other key gets its reason at once."""
    tries = []

    def counting(low):
        tries.append(1)
        raise RuntimeError("no kernel for this op")

    def broken2(x):
        return x * 3.0

    j = sv.jit(
        broken2,
        shapes="b",
        hot_threshold=1,
        background=False,
        compiler=injected("broken2", counting),
    )
    for n in (2, 3, 4, 2):
        x = np.arange(n, dtype=np.float32)
        assert_same(x * 3.0, j(x))
    assert len(tries) == 1
    reasons = {r["key"]: r["reason"] for r in j.jit_info()}
    assert set(reasons) == {("exact", (2,)), ("exact", (3,)), ("exact", (4,))}
    assert set(reasons.values()) == {"RuntimeError: no kernel for this op"}


def test_a_failed_compile_without_fallback_raises_at_once(injected):
    def strict(x):
        return x - 1.0

    compiler = injected("strict", failing)
    j = sv.jit(
        strict, shapes="b", hot_threshold=1, background=False, fallback=False, compiler=compiler
    )
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(sv.JitCompileError):
        j(x)  # the call whose compile failed (in the call, background=False)
    assert j.jit_stats()["failures"] == 1
    with pytest.raises(sv.JitCompileError) as info:
        j(x)  # and every later call of that key
    err = info.value
    assert (err.function, err.key, err.reason) == (
        "strict",
        ("exact", (4,)),
        "RuntimeError: no kernel for this op",
    )
    text = str(err)
    assert "JIT compile of @strict for exact (4,) failed: RuntimeError: no kernel" in text
    assert "fix: pass fallback=True" in text
    with pytest.raises(sv.JitCompileError, match=r"exact \(2,\)"):
        j(x[:2])  # another key is compiled (and fails) on its own
    assert [r["status"] for r in j.jit_info()] == ["failed", "failed"]


def test_the_scd_gate_keeps_low_convergence_functions_interpreted():
    def f(x):
        return snp.sum(snp.argwhere(x > 0.0)), x * 2.0  # function SCD 0.88

    x = np.array([[1.0, -1.0, 2.0]], np.float32)
    strict = sv.jit(f, shapes="b, 3", hot_threshold=1, background=False, scd_threshold=0.95)
    for _ in range(3):
        strict(x)
    assert strict.jit_info() == []
    assert strict.jit_stats()["scd_refusals"] == 3
    loose = sv.jit(f, shapes="b, 3", hot_threshold=1, background=False)
    for _ in range(2):
        total, doubled = loose(x)
    assert int(total) == 2 and loose.jit_stats()["compiled_calls"] == 2  # lowered ahead
    assert_same(x * 2.0, doubled)


def test_the_least_recently_used_variant_is_evicted_and_counted():
    j = jitted_mlp(hot_threshold=1, background=False, max_variants=2)
    for batch in (1, 2, 1, 3):  # 2 is the least recently used when 3 needs room
        j(*mlp_inputs(batch))
    got = statuses(j)
    assert got == {("exact", (2,)): "evicted", ("exact", (1,)): "ready", ("exact", (3,)): "ready"}
    evicted = next(r for r in j.jit_info() if r["status"] == "evicted")
    assert evicted["reason"] == "evicted: budget of 2 variants"
    assert j.jit_stats()["evictions"] == 1
    args = mlp_inputs(2)
    assert_same(numpy_mlp(*args), j(*args))  # recompiled on demand
    assert j.jit_stats()["evictions"] == 2


def test_an_evicted_variant_that_ran_shared_code_still_reports_its_memory():
    j = jitted_mlp(hot_threshold=1, background=False, max_variants=2)
    j(*mlp_inputs(2))
    j(*mlp_inputs(5))  # shares the code of (2,)
    before = {r["key"]: (r["planned_bytes"], r["naive_bytes"]) for r in j.jit_info()}
    assert next(r for r in j.jit_info() if r["key"] == ("exact", (5,)))["shares_code_with"]
    j(*mlp_inputs(2))
    j(*mlp_inputs(7))  # evicts (5,), the least recently used
    (evicted,) = [r for r in j.jit_info() if r["status"] == "evicted"]
    assert evicted["key"] == ("exact", (5,))
    assert (evicted["planned_bytes"], evicted["naive_bytes"]) == before[("exact", (5,))]
    assert evicted["planned_bytes"] > before[("exact", (2,))][0]  # its own values, not (2,)'s


def test_a_full_budget_of_compiling_variants_refuses_and_counts(injected):
    def busy(x):
        return x * 5.0

    compiler = injected("busy", sleeping(0.5))
    j = sv.jit(busy, shapes="b", hot_threshold=1, max_variants=1, compiler=compiler, ahead=False)
    j(np.ones(2, np.float32))
    j(np.ones(3, np.float32))  # no room: the only variant is still compiling
    assert j.jit_stats()["budget_refusals"] == 1
    assert j.wait(10)
    assert statuses(j) == {("exact", (2,)): "ready"}


def test_bucket_mode_serves_a_range_and_counts_values_below_it():
    j = jitted_mlp(
        hot_threshold=2,
        background=False,
        cache_mode="bucket",
        bucket_boundaries=[4, 16],
        ahead=False,
    )
    for batch in (2, 5, 9, 15, 16, 40):
        args = mlp_inputs(batch)
        assert_same(numpy_mlp(*args), j(*args))
    assert statuses(j) == {("bucket", ((4, 16),)): "ready", ("bucket", ((16, None),)): "ready"}
    stats = j.jit_stats()
    # 9 compiles the first variant and runs interpreted; 15 runs it; 16 borrows it while its
    # own bucket is not hot; 40 makes it hot and gets its variant in the call (the shared
    # shape-generic code, no compile)
    assert (stats["out_of_range"], stats["compiled_calls"], stats["borrowed_calls"]) == (1, 3, 1)
    assert sorted(r["key_text"] for r in j.jit_info()) == ["bucket ([16, inf))", "bucket ([4, 16))"]


def test_a_new_shape_borrows_a_shape_generic_variant_until_its_own_is_ready():
    j = jitted_mlp(hot_threshold=3, background=False, ahead=False)
    for batch in (2, 2, 2, 2):
        j(*mlp_inputs(batch))
    assert j.jit_stats()["borrowed_calls"] == 0
    (engine,) = j.engines
    assert engine.variant(("exact", (2,))).generic
    for batch in (7, 7, 7, 7):  # the third call makes 7's own variant from the shared code
        args = mlp_inputs(batch)
        assert_same(numpy_mlp(*args), j(*args))
    stats = j.jit_stats()
    assert (stats["compiled_calls"], stats["borrowed_calls"]) == (5, 2)
    assert j.jit_info()[-1]["shares_code_with"] == "exact (2,)"
    assert statuses(j) == {("exact", (2,)): "ready", ("exact", (7,)): "ready"}


def test_adaptive_mode_gives_a_frequent_shape_its_own_variant():
    j = jitted_mlp(
        hot_threshold=1,
        background=False,
        cache_mode="adaptive",
        adaptive_exact_after=3,
        ahead=False,
    )
    for n, batch in enumerate((5, 6, 5, 5, 5)):
        args = mlp_inputs(batch)
        assert_same(numpy_mlp(*args), j(*args))
        if n == 2:  # b=5 seen twice: each call counts once (it was counted twice per call)
            assert j.engines[0].policy.seen[(5,)] == 2
    assert statuses(j) == {("pow2", ((4, 8),)): "ready", ("exact", (5,)): "ready"}
    rows = {r["key"][0]: r["hits"] for r in j.jit_info()}
    # b=5 used the bucket's variant until its third sighting, which made its own variant
    assert rows == {"pow2": 2, "exact": 2}


def test_threads_hammering_a_function_while_its_variants_compile():
    j = jitted_mlp(hot_threshold=2)
    w = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    b = np.ones(4, np.float32)
    errors = []

    def hammer(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(60):
                x = rng.normal(size=(int(rng.integers(1, 7)), 8)).astype(np.float32)
                assert_same(numpy_mlp(x, w, b), j(x, w, b), rtol=1e-5)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert j.wait(60)
    assert j.jit_stats()["calls"] == 480
    assert set(statuses(j).values()) == {"ready"} and len(statuses(j)) == 6
    assert j.jit_stats()["compiled_calls"] > 0


def test_the_jit_can_be_turned_off():
    for options in ({"jit": False}, {"interpret_only": True}):
        j = jitted_mlp(hot_threshold=1, background=False, **options)
        for _ in range(3):
            args = mlp_inputs(2)
            assert_same(numpy_mlp(*args), j(*args))
        assert j.engines == [] and j.jit_info() == []


def test_exported_call_interprets_and_exported_jit_compiles():
    exp = exported_mlp()
    args = mlp_inputs(3)
    for _ in range(4):
        exp.call(*args)
    fast = exp.jit(hot_threshold=2, background=False, ahead=False)
    for _ in range(3):
        assert_same(numpy_mlp(*args), fast(*args))
    assert [r["status"] for r in fast.jit_info()] == ["ready"]
    assert fast.engine.counters.compiled_calls == 1
    assert "jit of Exported(softmax_mlp" in repr(fast)


def test_unknown_options_are_refused_when_wrapping():
    with pytest.raises(TypeError, match="unknown JIT option 'hot_treshold'"):
        sv.jit(softmax_mlp, hot_treshold=3)


def test_results_match_the_interpreter_in_a_stream_of_shapes():
    j = jitted_mlp(hot_threshold=2)
    rng = np.random.default_rng(7)
    for i in range(40):
        args = mlp_inputs(int(rng.choice([1, 3, 8])))
        got = j(*args)
        assert_same(interpreted(j, *args), got)
        if i == 10:
            j.wait(30)
    assert j.jit_stats()["compiled_calls"] > 20


def test_unknown_lowering_names_fail_the_compile_with_the_registered_ones():
    j = jitted_mlp(hot_threshold=1, background=False, lowerings=["no_such_pattern"])
    j(*mlp_inputs(2))
    (row,) = j.jit_info()
    assert row["status"] == "failed"
    assert "unknown lowering(s) ['no_such_pattern']; the lowerings are dense, " in row["reason"]
    assert "elementwise" in row["reason"]


def test_eager_first_compiles_the_first_key_at_once_then_waits_for_hot_keys():
    j = jitted_mlp(hot_threshold=3, background=False, eager_first=True, ahead=False)
    j(*mlp_inputs(2))
    assert statuses(j) == {("exact", (2,)): "ready"}
    for _ in range(2):
        j(*mlp_inputs(5))  # not hot yet: borrows the variant of 2
    assert statuses(j) == {("exact", (2,)): "ready"}
    assert j.jit_stats()["borrowed_calls"] == 2
    j(*mlp_inputs(5))
    assert statuses(j) == {("exact", (2,)): "ready", ("exact", (5,)): "ready"}


def test_a_new_key_reuses_the_code_of_a_shape_generic_variant():
    j = jitted_mlp(hot_threshold=1, background=False)
    small, large = mlp_inputs(2), mlp_inputs(300)
    for args in (small, large, small, large):
        got = j(*args)
        assert_same(interpreted(j, *args), got)
    rows = {row["key"]: row for row in j.jit_info()}
    first, second = rows[("exact", (2,))], rows[("exact", (300,))]
    assert first["shares_code_with"] is None
    assert second["status"] == "ready" and second["shares_code_with"] == first["key_text"]
    assert second["planned_bytes"] > first["planned_bytes"]  # its own plan, for b = 300
    (engine,) = j.engines
    a, b = engine.variant(("exact", (2,))), engine.variant(("exact", (300,)))
    assert a.function is b.function  # the same native code, lowered once


def test_import_shapevm_loads_the_native_tier_but_not_the_c_toolchain() -> None:
    """The C library and the lowerings load with the package (a jitted function is lowered
    as it is wrapped, so every one needs them at once); the C toolchain (tier 3's compiles,
    `subprocess`) loads with the first generated code (here: tier 3 off), which a program
    that never gets a hot chain does not pay for."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np, shapevm as sv\n"
        "names = ('shapevm.jit.backend', 'shapevm.native', 'shapevm.jit.backend.toolchain', "
        "'subprocess')\n"
        "loaded = lambda: sorted(m for m in names if m in sys.modules)\n"
        "print(loaded())\n"
        "f = sv.jit(lambda x: x * 2.0, shapes=['b'], hot_threshold=1, background=False, "
        "tier3=False)\n"
        "f(np.ones(3, np.float32))\n"
        "print(loaded(), f.jit_info()[0]['status'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    first, second = out.stdout.splitlines()
    assert first == "['shapevm.jit.backend', 'shapevm.native']"
    assert second == "['shapevm.jit.backend', 'shapevm.native'] ready"


def test_blas_libraries_are_looked_for_only_beside_interpreted_steps() -> None:
    """NumPy's BLAS libraries are found (a background scan holding the GIL for 2-25 ms)
    only for a function whose calls run interpreted steps beside native ones: a function
    that is one native call never needs them, and the scan slowed its build."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np, shapevm as sv, shapevm.numpy as snp\n"
        "wk = sys.modules['shapevm.jit.worker']\n"
        "f = sv.jit(lambda x: x * 2.0, shapes=['b'])\n"
        "f(np.ones(3, np.float32))\n"
        "print(wk._prefetch is None)\n"
        "g = sv.jit(lambda x: snp.sort(x) * 2.0, shapes=['b'])\n"
        "g(np.ones(3, np.float32))\n"
        "print(wk._prefetch is None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]
