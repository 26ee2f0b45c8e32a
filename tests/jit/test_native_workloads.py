"""The native tiers against the interpreter on the benchmark workloads, both forms (the
library's and the way users write models), every shape of BENCHMARKS.md and random ones,
with and without generated code; and threads calling while generated code is patched in."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from shapevm.jit.backend import toolchain
from shapevm.models import traced
from shapevm.models import workloads as wl


def _exported(workload: str, form: str) -> Any:
    return traced.export_workload(workload, wl.make_weights(workload), form=form)


@pytest.mark.parametrize("form", traced.FORMS)
@pytest.mark.parametrize("workload", ["W1", "W2", "W3"])
def test_every_shape_runs_natively_and_agrees_with_the_interpreter(
    workload: str, form: str
) -> None:
    exp = _exported(workload, form)
    fast = exp.jit(hot_threshold=1, background=False, tier3=False)
    shapes = list(wl.get_workload(workload).shapes)
    shapes += wl.random_shapes(workload, 2, seed=11)
    for i, shape in enumerate(shapes):
        x = wl.make_input(workload, shape, seed=i)
        want = exp.call(x)
        got = fast(x)
        assert got.shape == want.shape
        assert wl.accuracy(got, want.astype(np.float64)) < 2e-6, shape
    (row,) = [r for r in fast.jit_info() if r["shares_code_with"] is None]
    assert row["tier"] == 2
    (engine,) = fast.engines
    variant = engine.variant(row["key"])
    assert variant.whole, variant.describe()  # one executor call: nothing interpreted
    stats = fast.jit_stats()
    assert stats["compiled_calls"] >= len(shapes) - 1


needs_cc = pytest.mark.skipif(toolchain.compiler() is None, reason="no C compiler here")


@needs_cc
def test_threads_call_while_generated_code_is_patched_in() -> None:
    import shapevm as sv
    import shapevm.numpy as snp

    def chain(x: Any) -> Any:
        return snp.tanh(x) * snp.exp(-x * x) + snp.sqrt(snp.abs(x) + 1.0)

    f = sv.jit(chain, shapes="b, 64", hot_threshold=1, tier3_min_elements=0)
    errors: list[str] = []
    ready = threading.Event()

    def call(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for i in range(300):
            x = rng.standard_normal((int(rng.integers(1, 9)), 64)).astype(np.float32)
            want = np.tanh(x) * np.exp(-x * x) + np.sqrt(np.abs(x) + 1.0)
            got = f(x)
            if not np.allclose(got, want, rtol=1e-5, atol=1e-6):
                errors.append(f"call {i}: wrong result")
            if i == 20:
                ready.set()

    threads = [threading.Thread(target=call, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ready.is_set() and errors == []
    assert f.wait(60)
    rows = f.jit_info()
    assert any(r["tier"] == 3 for r in rows), [(r["key"], r["tier3"]) for r in rows]
