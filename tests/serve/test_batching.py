"""Which requests may be joined, the bit-level check, and the batcher's worker."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import shapevm as sv
from shapevm.serve.batcher import Batcher, BatcherStats, Overloaded, Pending
from shapevm.serve.batching import BatchPlan, InvarianceCheck, plan_batching
from shapevm.serve.runners import Runner, ShapevmRunner, TensorInfo
from tests.serve import helpers

F32 = np.dtype(np.float32)


def _plan(exp: sv.Exported, max_batch_size: int = 32) -> BatchPlan:
    return plan_batching(ShapevmRunner(exp, jit=False), max_batch_size)


def test_plan_finds_the_batch_dimension_and_its_bound() -> None:
    assert _plan(helpers.mlp()) == BatchPlan("b", 32)
    assert _plan(helpers.mlp(), 1000) == BatchPlan("b", 512)  # the constraint b <= 512
    assert _plan(helpers.sequence()) == BatchPlan("b", 32)
    assert _plan(helpers.scaled()) == BatchPlan("b", 32)  # n is an argument, not a row count


def _export(fun: Any, *specs: Any) -> sv.Exported:
    return sv.export(sv.jit(fun))(*specs)


def test_plan_refuses_what_cannot_be_split_by_rows() -> None:
    b, k = sv.symbolic_shape("b, k", constraints=["b <= 1"])
    x = sv.ShapeDtypeStruct((b, 4), np.float32)
    assert _plan(_export(lambda x: x.sum(axis=0), x)).reason == (
        "output 'output_0' does not start with a dimension variable (4)"
    )
    square = _export(lambda x: x @ x.T, sv.ShapeDtypeStruct((k, 4), np.float32))
    assert _plan(square).reason == "'k' also appears in output_0.shape[1] (k)"
    fixed = _export(lambda x: x * 2.0, sv.ShapeDtypeStruct((3, 4), np.float32))
    assert _plan(fixed).reason == "input 'x' does not start with a dimension variable (3, 4)"
    assert _plan(_export(lambda x: x, x)).reason == "the constraints allow at most 1 rows"
    assert _plan(helpers.mlp(), 1).reason == "dynamic batching is off (max batch size 1)"


class FakeRunner(Runner):
    """x[b, 2] -> x * 10 (+ a row-count dependent error when ``skew``); counts its calls."""

    platform = "fake"

    def __init__(self, *, skew: float = 0.0, path: str = "fake", fail_on: float | None = None):
        self.inputs = (TensorInfo("x", F32, ("b", 2)),)
        self.outputs = (TensorInfo("y", F32, ("b", 2)),)
        self.skew = skew
        self.path = path
        self.fail_on = fail_on
        self.calls: list[int] = []
        self.gate = threading.Event()
        self.gate.set()
        self.gate_waiters = 0

    def bind(self, arrays: Sequence[np.ndarray]) -> dict[str, int]:
        return {"b": arrays[0].shape[0]}

    def run(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        self.gate_waiters += 1
        self.gate.wait(10)
        self.gate_waiters -= 1
        (x,) = arrays
        self.calls.append(x.shape[0])
        if self.fail_on is not None and (x == self.fail_on).any():
            raise ValueError(f"refusing {self.fail_on}")
        scale = np.float32(10.0) * (np.float32(1.0) + np.float32(self.skew) * (len(x) > 1))
        return [x * scale]

    def run_on_path(self, arrays: Sequence[np.ndarray]) -> tuple[list[np.ndarray], str]:
        return self.run(arrays), self.path

    def prober(self):
        return lambda arrays: (self.run(arrays), "fake")


def test_check_passes_an_elementwise_model_on_the_interpreter() -> None:
    runner = ShapevmRunner(helpers.elementwise(), jit=False)
    check = InvarianceCheck(runner, plan_batching(runner, 8))
    assert check.result(((4,),)) == ("", "interpreted")


def test_check_catches_a_last_bit_difference() -> None:
    runner = FakeRunner(skew=1e-7)
    check = InvarianceCheck(runner, plan_batching(runner, 4))
    reason, path = check.result(((2,),))
    assert path == "fake"
    assert reason.startswith(
        "a joined call is not bit-identical to single calls: row 0 of a 2-row call, output 0 "
        "(max |difference| "
    )
    assert max(runner.calls) == 2  # it stops at the first difference


def test_a_passing_check_runs_every_row_count_twice() -> None:
    runner = FakeRunner()
    check = InvarianceCheck(runner, plan_batching(runner, 4))
    assert check.result(((2,),)) == ("", "fake")
    assert [runner.calls.count(n) for n in (2, 3, 4)] == [2, 2, 2]
    assert runner.calls.count(1) == 3 + 2 * 4  # warm-up, then every row alone (twice)


def test_check_reports_a_model_that_fails_on_random_inputs() -> None:
    runner = FakeRunner()
    runner.run = lambda arrays: (_ for _ in ()).throw(IndexError("index 12 is out of bounds"))
    check = InvarianceCheck(runner, plan_batching(runner, 4))
    assert check.result(((2,),))[0] == (
        "the check could not run the model: IndexError: index 12 is out of bounds"
    )


def _serve(runner: FakeRunner, requests: list[np.ndarray], **options: Any) -> tuple[list, list]:
    """Submit ``requests`` (the worker held until all are queued); their results and the
    worker's reports."""
    plan = plan_batching(runner, options.pop("max_rows", 8))
    check = InvarianceCheck(runner, plan) if plan.enabled else None
    if check is not None:
        check.result(((2,),))
        runner.calls.clear()
    reports: list[BatcherStats] = []
    batcher = Batcher(runner, plan, check, on_call=reports.append, **options)

    async def main() -> list:
        loop = asyncio.get_running_loop()
        runner.gate.clear()
        blocker = Pending([np.zeros((1, 2), F32)], 1, None, loop, loop.create_future())
        batcher.submit(blocker)  # occupies the worker while the others queue up
        await asyncio.sleep(0.05)
        pendings = [
            Pending([x], len(x), check.key_of([x]) if check else None, loop, loop.create_future())
            for x in requests
        ]
        for p in pendings:
            batcher.submit(p)
        runner.gate.set()
        await blocker.future
        return await asyncio.gather(*(p.future for p in pendings), return_exceptions=True)

    try:
        results = asyncio.run(main())
    finally:
        batcher.close(10)
    return results, reports[1:]


def _requests(*rows: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal((n, 2)).astype(F32) for n in rows]


def test_batcher_joins_queued_requests_and_splits_the_rows_back() -> None:
    runner = FakeRunner()
    reqs = _requests(1, 3, 2, 4)
    results, reports = _serve(runner, reqs, max_rows=8)
    assert runner.calls == [1, 6, 4]  # the blocker, then 1+3+2 rows, then 4 (would be 10)
    assert [(r.requests, r.rows, r.joined) for r in reports] == [(3, 6, True), (1, 4, False)]
    for x, (y,) in zip(reqs, results, strict=True):
        assert y.tobytes() == (x * np.float32(10)).tobytes()


def test_batcher_without_a_plan_runs_requests_alone() -> None:
    runner = FakeRunner()
    _, reports = _serve(runner, _requests(2, 2, 2), max_rows=1)
    assert runner.calls == [1, 2, 2, 2]
    assert all(not r.joined for r in reports)


def test_a_model_that_fails_the_check_is_never_joined() -> None:
    runner = FakeRunner(skew=1e-7)
    reqs = _requests(2, 2, 1)
    results, _ = _serve(runner, reqs)
    assert runner.calls == [1, 2, 2, 1]
    for x, (y,) in zip(reqs, results, strict=True):  # each row as a single call computes it
        scale = np.float32(10) * (np.float32(1) + np.float32(1e-7) * (len(x) > 1))
        assert y.tobytes() == (x * scale).tobytes()


def test_a_joined_call_off_the_checked_path_is_rerun_alone() -> None:
    runner = FakeRunner(path="interpreted")  # the check ran on "fake"
    reqs = _requests(1, 2)
    results, reports = _serve(runner, reqs)
    assert runner.calls == [1, 3, 1, 2]
    assert reports[0].fallback == "interpreted path"
    assert [(r.requests, r.joined) for r in reports[1:]] == [(1, False), (1, False)]
    assert all(
        y.tobytes() == (x * np.float32(10)).tobytes() for x, (y,) in zip(reqs, results, strict=True)
    )


def test_an_error_in_a_joined_call_reaches_only_its_request() -> None:
    runner = FakeRunner(fail_on=7.0)
    reqs = _requests(1, 2, 1)
    reqs[1][0, 0] = 7.0
    results, reports = _serve(runner, reqs)
    assert reports[0].fallback == "error"
    assert isinstance(results[1], ValueError) and str(results[1]) == "refusing 7.0"
    assert results[0][0].tobytes() == (reqs[0] * np.float32(10)).tobytes()
    assert results[2][0].tobytes() == (reqs[2] * np.float32(10)).tobytes()


def test_full_queue_is_refused_at_once_and_close_drains_it() -> None:
    runner = FakeRunner()
    runner.gate.clear()
    plan = plan_batching(runner, 1)
    batcher = Batcher(runner, plan, None, max_queue=2)
    loop = asyncio.new_event_loop()
    try:
        pendings = [
            Pending([np.ones((1, 2), F32)], 1, None, loop, loop.create_future()) for _ in range(4)
        ]
        batcher.submit(pendings[0])
        helpers.wait_for(lambda: batcher.depth == 0, 10)  # the worker holds it, waiting
        batcher.submit(pendings[1])
        batcher.submit(pendings[2])
        with pytest.raises(Overloaded, match="2 requests are queued"):
            batcher.submit(pendings[3])
        pendings[2].cancelled = True  # its client went away: skipped
        runner.gate.set()
        batcher.close(10)
        assert runner.calls == [1, 1]
        with pytest.raises(Overloaded, match="shutting down"):
            batcher.submit(pendings[3])
    finally:
        loop.close()


def test_a_failure_outside_the_model_leaves_results_and_the_worker_alone() -> None:
    runner = FakeRunner()
    calls: list[int] = []

    def hook(stats: BatcherStats) -> None:
        calls.append(stats.rows)
        if len(calls) == 1:
            raise RuntimeError("metrics are broken")

    batcher = Batcher(runner, plan_batching(runner, 1), None, on_call=hook)

    async def main() -> list:
        loop = asyncio.get_running_loop()
        out = []
        for _ in range(2):
            p = Pending([np.ones((1, 2), F32)], 1, None, loop, loop.create_future())
            batcher.submit(p)
            out.append(await asyncio.wait_for(asyncio.gather(p.future), 10))
        return out

    try:
        (first,), (second,) = asyncio.run(main())
    finally:
        batcher.close(10)
    assert first[0].tolist() == second[0].tolist() == [[10.0, 10.0]]
    assert calls == [1, 1]
