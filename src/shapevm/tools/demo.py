"""``shapevm demo``: export W1-W3 once, ship the bytes, run a stream of changing shapes.

For each built-in model (the MLP, CNN and transformer block of ``BENCHMARKS.md``, with
fixed-seed random weights) the demo exports the function once with symbolic input shapes,
serializes it, loads the bytes back (no Python source needed from then on) and calls it on
a stream of changing shapes through the JIT. The loaded program is lowered to native code
as the JIT wraps it (milliseconds, no compiler), so every call runs native, a new shape
too, with no compile stall. For every call it prints the latency, whether it ran
interpreted or compiled, the interpreter's steady latency and the max relative error
against NumPy in float64. C for the hot shapes' chains is compiled in the background; the
summary shows the steady latency of each shape once that is done. Steady latencies are
measured after the stream (the JIT's first, then the interpreter's), so that no other work
runs between its calls.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

import numpy as np

from shapevm.frontend.export import deserialize
from shapevm.models import traced
from shapevm.models import workloads as wl

STEADY_CALLS = 10
WARMUP_CALLS = 3


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.3f}"


def demo_workload(workload_id: str, passes: int = 2, seed: int = 0) -> float:
    """Run one workload's demo; returns the worst relative error."""
    w = wl.get_workload(workload_id)
    weights = wl.make_weights(workload_id)
    t0 = time.perf_counter()
    exp = traced.export_workload(workload_id, weights)
    t1 = time.perf_counter()
    blob = exp.serialize()
    t2 = time.perf_counter()
    loaded = deserialize(blob)
    t3 = time.perf_counter()
    print(f"\n== {workload_id}: {w.description} ==")
    print(f"exported once in {_ms(t1 - t0).strip()} ms: {loaded!r}")
    print(
        f"serialized to {len(blob) / 2**20:.2f} MiB in {_ms(t2 - t1).strip()} ms, "
        f"loaded back in {_ms(t3 - t2).strip()} ms"
    )
    ref = wl.reference_f64(workload_id, weights)
    fast = loaded.jit(hot_threshold=2)
    rng = np.random.default_rng(seed)
    order: list[tuple[int, ...]] = []
    for _ in range(passes):
        order += [w.shapes[i] for i in rng.permutation(len(w.shapes))]
    seen: set[tuple[int, ...]] = set()
    worst = 0.0
    rows = []
    for n, shape in enumerate(order, 1):
        x = wl.make_input(workload_id, shape, seed=n)
        compiled_before = fast.engine.counters.compiled_calls
        t = time.perf_counter()
        y = fast(x)
        latency = time.perf_counter() - t
        how = "jit" if fast.engine.counters.compiled_calls > compiled_before else "int"
        rows.append((n, shape, latency, how, shape not in seen, wl.accuracy(y, ref(x))))
        seen.add(shape)
    fast.wait(60)
    # Steady latencies are measured after the stream, so that the stream's calls are not
    # interleaved with another system's; each shape's JIT first, after a pause, then the
    # interpreter: OpenBLAS's workers spin for about 0.1 s after the interpreter's products
    # and would slow the native kernels measured right after them (see shapevm.jit.blas).
    steady = {}
    for shape in w.shapes:
        x = wl.make_input(workload_id, shape, seed=0)
        time.sleep(0.2)
        jit = _steady(fast, x)
        steady[shape] = (_steady(loaded.call, x), jit, wl.accuracy(fast(x), ref(x)))
    head = (
        f"{'shape':<14}{'call':>5}  {'latency ms':>18}  {'interp steady':>13}  {'max rel err':>11}"
    )
    print("  " + head)
    for n, shape, latency, how, new, err in rows:
        worst = max(worst, err)
        tag = f"{_ms(latency)} {how}" + (" (new)" if new else "      ")
        interp = steady[shape][0]
        print(f"  {w.label(shape):<14}{n:>5}  {tag:>18}  {_ms(interp):>13}  {err:>11.1e}")
    print("  after the background compiles, steady latency per shape:")
    for shape in w.shapes:
        interp, jit, err = steady[shape]
        worst = max(worst, err)
        print(
            f"    {w.label(shape):<14} interpreter {_ms(interp)} ms   jit {_ms(jit)} ms   "
            f"({interp / jit:4.1f}x)   err {err:.1e}"
        )
    return worst


def _steady(fn: object, x: np.ndarray) -> float:
    for _ in range(WARMUP_CALLS):
        fn(x)  # type: ignore[operator]
    times = []
    for _ in range(STEADY_CALLS):
        t = time.perf_counter()
        fn(x)  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def run_demo(workloads: Sequence[str] = ("W1", "W2", "W3")) -> int:
    print(
        "shapevm demo: each model is traced once with symbolic shapes, serialized, loaded "
        "back and run\non a stream of changing shapes: the program is lowered to native code "
        "as it is wrapped,\nso every call, a new shape too, runs native (jit); C for hot "
        "shapes is compiled in the background."
    )
    worst = max(demo_workload(wid) for wid in workloads)
    print(f"\nworst relative error against NumPy float64 over all calls: {worst:.1e}")
    return 0 if worst < 1e-4 else 1
