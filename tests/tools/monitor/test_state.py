"""What the monitor shows, without a browser: the snapshot against `shapevm.vm`, the compile
queue's estimates, the call records behind the latency chart, and the JSON conversion."""

from __future__ import annotations

import json
import math
import threading
import time

import numpy as np
import pytest

import shapevm as sv
import shapevm.numpy as snp
import shapevm.vm as vm
from shapevm.runtime import bctrace
from shapevm.tools.monitor.state import LatencyLog, compile_queue, jsonable, snapshot


@pytest.fixture(autouse=True)
def no_trace():
    bctrace.enable(False)
    yield
    bctrace.enable(False)


def _jitted(name: str, **options):
    w = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)

    def fun(x):
        return snp.maximum(x @ w, 0.0)

    fun.__name__ = fun.__qualname__ = name
    return sv.jit(fun, shapes="b, 16", **options)


def test_snapshot_holds_jit_info_and_jit_stats_as_json():
    f = _jitted("snap_fn", hot_threshold=2, background=False)
    for b in (3, 3, 3, 5):
        f(np.ones((b, 16), np.float32))
    state = json.loads(json.dumps(snapshot()))  # plain JSON, as the page gets it
    rows = [r for r in state["variants"] if r["function"] == "snap_fn"]
    info = f.jit_info()
    assert [r["key_text"] for r in rows] == [r["key_text"] for r in info]
    for row, rec in zip(rows, info, strict=True):
        for field in ("status", "hits", "compile_ms", "planned_bytes", "naive_bytes", "reason"):
            assert row[field] == rec[field], field
        assert row["key"] == ["exact", [3]]
        assert 0 <= row["last_use_s_ago"] < 60  # monotonic last_use made relative
    (fn,) = [r for r in state["functions"] if r["function"] == "snap_fn"]
    stats = f.jit_stats()
    assert (fn["calls"], fn["compiled_calls"], fn["compiles"]) == (
        stats["calls"],
        stats["compiled_calls"],
        stats["compiles"],
    )
    assert fn["scd"] == 1.0 and fn["variants"] == 1 and fn["skip_reason"] is None
    assert fn["hit_rate"] == pytest.approx(stats["compiled_calls"] / stats["calls"])
    assert state["stats"]["calls"] >= 4 and "hit_rate" in state["stats"]
    assert state["memory"][-1]["pool"] == "process"


def test_a_function_that_stays_interpreted_says_why():
    def data_dependent(x):
        return snp.nonzero(x)[0] * 2

    data_dependent.__name__ = "dd_fn"
    f = sv.jit(data_dependent, shapes="b", hot_threshold=1, background=False)
    f(np.arange(5, dtype=np.float32))
    (fn,) = [r for r in vm.jit_functions() if r["function"] == "dd_fn"]
    assert fn["scd"] < 0.8
    assert fn["skip_reason"].startswith("function SCD ")


def test_compile_queue_estimates_from_finished_compiles():
    functions = [{"function": "a", "scd": 1.0}, {"function": "b", "scd": 0.5}]
    variants = [
        {"function": "a", "key_text": "k1", "status": "ready", "compile_ms": 10.0},
        {"function": "a", "key_text": "k2", "status": "ready", "compile_ms": 30.0},
        {"function": "a", "key_text": "k3", "status": "queued", "compile_ms": 0.0},
        {
            "function": "b",
            "key_text": "k4",
            "status": "compiling",
            "compile_ms": 0.0,
            "stage": "lowering 1 region",
            "compiling_for_ms": 4.5,
        },
        {"function": "b", "key_text": "k5", "status": "failed", "compile_ms": 0.0},
    ]
    queue = compile_queue(functions, variants)
    assert [(e["key_text"], e["status"]) for e in queue] == [
        ("k4", "compiling"),
        ("k3", "queued"),
    ]
    compiling, queued = queue
    assert (compiling["scd"], compiling["estimated_ms"]) == (0.5, 20.0)
    assert compiling["estimate_basis"] == "median of all 2 compiles"
    assert compiling["stage"] == "lowering 1 region" and compiling["compiling_for_ms"] == 4.5
    assert (queued["scd"], queued["estimated_ms"]) == (1.0, 20.0)
    assert queued["estimate_basis"] == "median of this function's 2"
    assert compile_queue(functions, variants[2:3])[0]["estimated_ms"] is None


def test_a_tier_3_build_in_the_background_is_in_the_queue_with_its_own_estimate():
    variants = [
        {"function": "a", "key_text": "k1", "status": "ready", "compile_ms": 2.0},
        {"function": "a", "key_text": "k2", "status": "ready", "tier3": "ready", "tier3_ms": 900},
        {
            "function": "a",
            "key_text": "k3",
            "status": "ready",
            "compile_ms": 4.0,
            "tier3": "compiling",
            "stage": "tier 3: generating and compiling C for the chains",
            "compiling_for_ms": 12.0,
        },
        {"function": "a", "key_text": "k4", "status": "ready", "tier3": "failed: cc"},
    ]
    (entry,) = compile_queue([{"function": "a", "scd": 1.0}], variants)
    assert (entry["key_text"], entry["status"], entry["tier"]) == ("k3", "compiling", 3)
    assert entry["stage"].startswith("tier 3") and entry["compiling_for_ms"] == 12.0
    assert (entry["estimated_ms"], entry["estimate_basis"]) == (900, "median of this function's 1")


def _chain_fn(name: str):
    def fun(x):
        return snp.tanh(x * 1.5 + 0.25) * x

    fun.__name__ = fun.__qualname__ = name
    return sv.jit(fun, shapes="b, 16", hot_threshold=1, tier3_min_elements=0)


def test_generated_c_compiling_shows_in_the_queue_and_a_failed_build_leaves_no_stage(
    monkeypatch,
):
    from shapevm.jit.backend import tier3

    started, release = threading.Event(), threading.Event()

    def slow_failing_build(*args, **kwargs):
        started.set()
        release.wait(30)
        raise RuntimeError("the C compiler crashed")

    monkeypatch.setattr(tier3, "available", lambda: None)
    monkeypatch.setattr(tier3, "generate", slow_failing_build)
    f = _chain_fn("tier3_fn")
    try:
        f(np.ones((3, 16), np.float32))
        assert started.wait(30)
        time.sleep(0.01)
        state = snapshot()
        (row,) = [v for v in state["variants"] if v["function"] == "tier3_fn"]
        assert (row["status"], row["tier3"]) == ("ready", "compiling")
        (entry,) = [e for e in state["queue"] if e["function"] == "tier3_fn"]
        assert (entry["status"], entry["tier"], entry["stage"]) == ("compiling", 3, row["stage"])
        assert entry["stage"].startswith("tier 3") and entry["compiling_for_ms"] > 0
    finally:
        release.set()
        f.wait(30)
    state = snapshot()
    (row,) = [v for v in state["variants"] if v["function"] == "tier3_fn"]
    assert row["tier3"] == "failed: RuntimeError: the C compiler crashed"
    assert row["stage"] == "" and row["tier"] == 2  # it runs on, without generated C
    assert not [e for e in state["queue"] if e["function"] == "tier3_fn"]


def test_call_records_say_how_each_call_ran():
    f = _jitted("calls_fn", hot_threshold=2, background=False, ahead=False)
    bctrace.enable(True, steps=False)
    for b in (2, 2, 2):
        f(np.ones((b, 16), np.float32))
    calls = [c for c in bctrace.ACTIVE.calls if c.function == "calls_fn"]
    assert [c.mode for c in calls] == ["interpreted", "interpreted", "compiled"]
    assert all(c.shapes == "2x16" and c.duration_ms > 0 for c in calls)
    assert bctrace.ACTIVE.records == []  # calls only: the steps are left alone


def test_a_trace_of_steps_replaces_one_of_calls_and_records_calls_too():
    calls_only = bctrace.enable(True, steps=False)
    steps = bctrace.enable(True)
    assert steps is not calls_only and steps.steps
    assert bctrace.enable(True, steps=False) is steps  # the monitor keeps the user's trace
    f = _jitted("steps_fn", background=False, ahead=False)
    f(np.ones((2, 16), np.float32))
    assert [c.function for c in steps.calls] == ["steps_fn"]
    assert len(steps.records) >= 2


def test_latency_log_records_only_while_watched_and_leaves_a_users_trace_alone():
    f = _jitted("watch_fn", hot_threshold=100, ahead=False)
    log = LatencyLog()
    f(np.ones((1, 16), np.float32))
    log.watch(True)
    assert log.recording
    log.poll()  # starts at the recorder's present
    for b in (1, 2):
        f(np.ones((b, 16), np.float32))
    log.poll()
    points, seq = log.since(0)
    assert [(p[2], p[3]) for p in points["watch_fn"]] == [
        ("interpreted", "1x16"),
        ("interpreted", "2x16"),
    ]
    assert log.since(seq) == ({}, seq)
    log.watch(False)
    assert bctrace.ACTIVE is None  # nobody watches: the program runs untraced
    users = bctrace.enable(True)
    log.watch(True)
    log.watch(False)
    assert bctrace.ACTIVE is users


def test_jsonable_makes_strict_json():
    value = {1: (np.float32(1.5), np.int64(2)), "x": [math.nan, math.inf, {3}], "o": object}
    out = jsonable(value)
    assert out["1"] == [1.5, 2] and out["x"] == [None, None, [3]]
    assert out["o"] == "<class 'object'>"
    json.dumps(out, allow_nan=False)


def test_variant_code_marks_the_compiled_region_and_lists_its_steps():
    f = _jitted("code_fn", hot_threshold=1, background=False)
    f(np.ones((4, 16), np.float32))
    code = vm.variant_code("code_fn", "exact (4,)")
    lines = code["bytecode"].splitlines()
    assert lines[0].strip() == "func @code_fn(t0: f32[b, 16]) -> f32[b, 8]"
    assert any(line.startswith("R0") and "OP_CALL matmul" in line for line in lines)
    assert not any(line.startswith("R0") and "RETURN" in line for line in lines)
    assert code["listing"].startswith("R0 #")
    with pytest.raises(KeyError, match="no variant 'exact \\(9,\\)' of function 'code_fn'"):
        vm.variant_code("code_fn", "exact (9,)")


def test_variant_code_of_a_failed_variant_says_so():
    f = _jitted("failing_fn", hot_threshold=1, background=False, lowerings=["no_such_pattern"])
    f(np.ones((2, 16), np.float32))
    code = vm.variant_code("failing_fn", ("exact", (2,)))
    assert code["listing"].startswith("(no compiled code: failed: ")
    assert "no_such_pattern" in code["listing"]


def test_memory_pools_report_the_arena_of_a_thread_that_ran_compiled_code():
    w = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)

    def pool_fn(x):
        return snp.maximum(x @ w, 0.0) @ w  # the hidden layer lives in the arena

    f = sv.jit(pool_fn, shapes="b, 16", hot_threshold=1, background=False)
    for _ in range(2):
        f(np.ones((64, 16), np.float32))
    pools = vm.memory_pools()
    arenas = [p for p in pools if p["pool"].startswith("arena of thread ")]
    mine = [p for p in arenas if p["pool"] == "arena of thread MainThread"]
    assert mine and mine[0]["capacity_bytes"] >= mine[0]["used_bytes"] > 0
    process = pools[-1]
    assert process["pool"] == "process" and process["rss_bytes"] > 0


def test_a_failing_source_is_reported_in_the_state_and_the_rest_still_shows(monkeypatch):
    def broken() -> list[dict[str, object]]:
        raise RuntimeError("pools are being rebuilt")

    monkeypatch.setattr(vm, "memory_pools", broken)
    state = snapshot()
    assert state["memory"] == []
    assert state["errors"] == ["memory: RuntimeError: pools are being rebuilt"]
    assert isinstance(state["variants"], list) and "calls" in state["stats"]
