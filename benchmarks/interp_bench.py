"""Interpreter benchmark: cost per instruction, cold start, steady state against NumPy.

    python benchmarks/interp_bench.py [--quick] [--workloads W1,W2,W3]

1. Cost per instruction: a 200-instruction program of elementwise ops on 4-element
   tensors, interpreted, minus the same kernels called directly from a Python list (µs).
2. Cold start in a fresh process: load an exported W1 and make the first call, excluding
   the import of Python, NumPy and shapevm (median of 5 processes; target < 5 ms).
3. Steady state at every BENCHMARKS.md shape: interpreter vs the plain NumPy eager
   implementation, measured side by side in alternation (medians; target <= 1.15x).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import shapevm as sv
from shapevm.models import traced
from shapevm.models import workloads as wl


def per_instruction(n_ops: int = 200, reps: int = 200) -> tuple[float, float]:
    """(µs per interpreted instruction, µs per direct kernel call) on tiny tensors."""

    def chain(x: Any) -> Any:
        for i in range(n_ops):
            x = x * 1.0001 if i % 2 else x + 0.5
        return x

    exp = sv.export(sv.jit(chain))(sv.ShapeDtypeStruct((4,), np.float32))
    x = np.ones(4, np.float32)
    exp.call(x)
    run = exp.executable
    best = min(_time(lambda: run(x), reps) for _ in range(5))
    ops = [np.multiply if i % 2 else np.add for i in range(n_ops)]
    consts = [1.0001 if i % 2 else 0.5 for i in range(n_ops)]

    def direct() -> None:
        y = x
        for f, c in zip(ops, consts, strict=True):
            y = f(y, c)

    base = min(_time(direct, reps) for _ in range(5))
    return best / n_ops * 1e6, base / n_ops * 1e6


def _time(fn: Callable[[], Any], reps: int) -> float:
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps


_COLD = """
import sys, time
import numpy as np
import shapevm as sv
x = np.ones((3, 256), np.float32)
t0 = time.perf_counter()
exp = sv.load(sys.argv[1])
t1 = time.perf_counter()
exp.call(x)
t2 = time.perf_counter()
print((t1 - t0) * 1e3, (t2 - t1) * 1e3)
"""


def cold_start(processes: int = 5) -> tuple[float, float, float]:
    """Median (load ms, first call ms, total ms) over fresh processes, imports excluded."""
    exp = traced.export_workload("W1", wl.make_weights("W1"))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "w1.svbc")
        exp.save(path)
        loads, calls = [], []
        for _ in range(processes):
            out = subprocess.run(
                [sys.executable, "-c", _COLD, path], capture_output=True, text=True, check=True
            ).stdout.split()
            loads.append(float(out[0]))
            calls.append(float(out[1]))
    totals = [a + b for a, b in zip(loads, calls, strict=True)]
    return statistics.median(loads), statistics.median(calls), statistics.median(totals)


def steady(workload_id: str, calls: int) -> list[tuple[str, float, float]]:
    """(shape label, interpreter ms, NumPy ms) at every shape, alternating the two."""
    weights = wl.make_weights(workload_id)
    exp = traced.export_workload(workload_id, weights)
    eager = wl.numpy_eager(workload_id, weights)
    w = wl.get_workload(workload_id)
    rows = []
    for shape in w.shapes:
        x = wl.make_input(workload_id, shape, seed=0)
        for _ in range(3):
            exp.call(x)
            eager(x)
        ti, tn = [], []
        for _ in range(calls):
            t = time.perf_counter()
            exp.call(x)
            ti.append(time.perf_counter() - t)
            t = time.perf_counter()
            eager(x)
            tn.append(time.perf_counter() - t)
        rows.append((w.label(shape), statistics.median(ti) * 1e3, statistics.median(tn) * 1e3))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and processes")
    parser.add_argument("--workloads", default="W1,W2,W3")
    args = parser.parse_args(argv)
    calls = 5 if args.quick else 30
    per, base = per_instruction(reps=20 if args.quick else 200)
    print("## Interpreter cost per instruction (200 elementwise ops on f32[4], best of 5)\n")
    print("| interpreted | direct NumPy call | overhead |")
    print("|---:|---:|---:|")
    print(f"| {per:.2f} µs | {base:.2f} µs | {per - base:.2f} µs |\n")
    load, first, total = cold_start(2 if args.quick else 5)
    print("## Cold start in a fresh process: load W1, first call at b=3 (imports excluded)\n")
    print("| load | first call | total | target |")
    print("|---:|---:|---:|---:|")
    print(f"| {load:.2f} ms | {first:.2f} ms | {total:.2f} ms | < 5 ms |\n")
    print(f"## Steady state, interpreter vs NumPy eager (median of {calls} alternating calls)\n")
    print("| workload | shape | interpreter | NumPy | ratio (target <= 1.15) |")
    print("|---|---|---:|---:|---:|")
    for wid in args.workloads.split(","):
        for label, ti, tn in steady(wid, calls):
            print(f"| {wid} | {label} | {ti:.3f} ms | {tn:.3f} ms | {ti / tn:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
