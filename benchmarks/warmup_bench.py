"""Where the JIT's stream time goes: the warm-up calls, the rest, and per shape.

One process per run, as the stream measure (d) of ``shapevm bench``: export the workload,
``Exported.jit`` with the bench's options, then the 200 calls of the BENCHMARKS.md stream,
each timed. Prints the build, the first ``--warmup`` calls (interpreted until the first
variant is ready, then borrowing or compiling), the rest, each variant's compile time, and
the median latency per shape over the rest. ``--trace`` prints every warm-up call: its
shape, whether it ran interpreted (I), compiled (C) or on a borrowed variant (B), and
whether a compile was running. ``--numpy-between N`` makes the program a mixed one: before
each (timed) call, an untimed NumPy product of two N x N float32 matrices, as a program
that does its own NumPy work between calls (NumPy's BLAS threads then compete with the
JIT's kernels for the cores).

Run: ``python benchmarks/warmup_bench.py [--workload W1] [--mode exact] [--runs 3]``.
Each run is a fresh subprocess; medians over runs are printed last.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np


def one_run(
    workload: str, mode: str, warmup: int, trace: bool, numpy_between: int, form: str = "user"
) -> dict[str, object]:
    from shapevm import vm
    from shapevm.jit import worker
    from shapevm.models import traced
    from shapevm.models import workloads as wl
    from shapevm.tools.bench.systems_shapevm import BUCKETS

    weights = wl.make_weights(workload)
    shapes = wl.stream_shapes(workload)
    inputs = {s: wl.make_input(workload, s, seed=0) for s in set(shapes)}
    t0 = time.perf_counter()
    options: dict[str, object] = {} if mode == "exact" else {"cache_mode": mode}
    if mode == "bucket":
        options["bucket_boundaries"] = BUCKETS[workload]
    fn = traced.export_workload(workload, weights, form=form).jit(**options)  # defaults
    build = time.perf_counter() - t0
    latencies = []
    side = np.ones((numpy_between, numpy_between), np.float32)
    for i, shape in enumerate(shapes):
        if numpy_between:
            np.matmul(side, side)  # the program's own NumPy work, untimed
        before = vm.jit_stats()
        busy = worker.busy()
        t = time.perf_counter()
        fn(inputs[shape])
        latencies.append(time.perf_counter() - t)
        if trace and i < warmup:
            after = vm.jit_stats()
            how = "I"
            if after["borrowed_calls"] > before["borrowed_calls"]:
                how = "B"
            elif after["compiled_calls"] > before["compiled_calls"]:
                how = "C"
            note = "  (compile running)" if busy else ""
            line = f"  call {i:3d} {shape} {how} {latencies[-1] * 1e3:7.2f} ms{note}"
            print(line, file=sys.stderr)
    rest: dict[str, list[float]] = {}
    for shape, dt in zip(shapes[warmup:], latencies[warmup:], strict=True):
        rest.setdefault(wl.get_workload(workload).label(shape), []).append(dt)
    return {
        "build_ms": build * 1e3,
        "warmup_ms": sum(latencies[:warmup]) * 1e3,
        "rest_ms": sum(latencies[warmup:]) * 1e3,
        "compile_ms": [round(v["compile_ms"], 1) for v in vm.jit_info()],
        "per_shape_ms": {k: statistics.median(v) * 1e3 for k, v in rest.items()},
    }


def _size(text: str) -> int:
    """A matrix side for ``--numpy-between``: a whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"expected a matrix side of 0 or more (0: no NumPy work), found {text!r}"
        )
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--workload", default="W1", choices=["W1", "W2", "W3"])
    parser.add_argument("--mode", default="exact", choices=["exact", "bucket", "adaptive"])
    parser.add_argument("--warmup", type=int, default=50, help="calls counted as warm-up")
    parser.add_argument("--runs", type=int, default=3, help="fresh processes")
    parser.add_argument("--trace", action="store_true", help="print every warm-up call")
    parser.add_argument(
        "--numpy-between",
        type=_size,
        default=0,
        metavar="N",
        help="an untimed N x N NumPy matrix product before each call (default 0: none)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(
            json.dumps(
                one_run(args.workload, args.mode, args.warmup, args.trace, args.numpy_between)
            )
        )
        return 0
    results = []
    for r in range(args.runs):
        cmd = [sys.executable, __file__, "--child", "--workload", args.workload]
        cmd += ["--mode", args.mode, "--warmup", str(args.warmup)]
        cmd += ["--numpy-between", str(args.numpy_between)]
        cmd += ["--trace"] if args.trace else []
        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
        sys.stdout.write(out.stderr)
        res = json.loads(out.stdout.strip().splitlines()[-1])
        results.append(res)
        print(
            f"run {r + 1}: build {res['build_ms']:.1f} ms, first {args.warmup} calls "
            f"{res['warmup_ms']:.0f} ms, other calls {res['rest_ms']:.0f} ms, "
            f"compiles (ms) {res['compile_ms']}"
        )
    print(f"\n{args.workload} {args.mode}, medians of {args.runs} runs:")
    for key in ("build_ms", "warmup_ms", "rest_ms"):
        print(f"  {key:10s} {statistics.median(r[key] for r in results):8.1f}")
    for label in results[0]["per_shape_ms"]:
        values = [r["per_shape_ms"][label] for r in results]
        print(f"  {label:12s} {statistics.median(values):8.3f} ms per call after the warm-up")
    return 0


if __name__ == "__main__":
    sys.exit(main())
