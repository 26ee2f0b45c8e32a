"""The JIT's costs and gains, measured.

1. GIL: the latency of interpreted calls while a background compile runs (numba's front
   end is Python and competes for the interpreter's core), against the same calls idle.
2. Steady state: interpreted vs compiled calls of the W1-style MLP of BENCHMARKS.md
   (dense 256->1024 + relu, dense 1024->1024 + gelu, dense 1024->256, residual, layer norm)
   per batch size, with the planned and naive bytes of the compiled variant.
3. Cold kernels: the compile of a variant with a fresh kernel cache and with a warm one.

Run: ``python benchmarks/jit_bench.py`` (``--quick`` for fewer repetitions).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

os.environ.setdefault("SHAPEVM_CACHE_DIR", tempfile.mkdtemp(prefix="shapevm-bench-"))

import numpy as np

import shapevm as sv
import shapevm.numpy as snp

RNG = np.random.default_rng(0)


def small(x: Any) -> Any:
    """14 ops on a [b, 16] input: the interpreter's per-op overhead dominates."""
    y = x
    for i in range(7):
        y = snp.tanh(y * float(i + 1)) + 0.5
    return y


def gelu(x: Any) -> Any:
    return 0.5 * x * (1.0 + snp.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def make_mlp() -> tuple[Any, ...]:
    def dense(i: int, o: int) -> tuple[np.ndarray, np.ndarray]:
        w = (RNG.normal(size=(i, o)) / np.sqrt(i)).astype(np.float32)
        return w, (0.1 * RNG.normal(size=(o,))).astype(np.float32)

    w1, b1 = dense(256, 1024)
    w2, b2 = dense(1024, 1024)
    w3, b3 = dense(1024, 256)
    g = (1 + 0.1 * RNG.normal(size=(256,))).astype(np.float32)
    return w1, b1, w2, b2, w3, b3, g


def mlp(x: Any, w1: Any, b1: Any, w2: Any, b2: Any, w3: Any, b3: Any, g: Any) -> Any:
    h = snp.maximum(x @ w1 + b1, 0.0)
    h = gelu(h @ w2 + b2)
    y = h @ w3 + b3 + x
    mu = snp.sum(y, axis=1, keepdims=True) / 256.0
    d = y - mu
    var = snp.sum(d * d, axis=1, keepdims=True) / 256.0
    return d / snp.sqrt(var + 1e-5) * g


def timed(fn: Any, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def summary(ms: list[float]) -> str:
    ms = sorted(ms)
    p90 = ms[int(0.9 * (len(ms) - 1))]
    return f"median {statistics.median(ms):.3f} ms, p90 {p90:.3f} ms, max {ms[-1]:.3f} ms"


def gil(quick: bool, kernel_process: bool = True) -> None:
    """Run in a fresh process: the first compile also imports numba, as in a server."""
    x = RNG.normal(size=(8, 16)).astype(np.float32)
    interp = sv.jit(small, shapes="b, 16", jit=False)
    interp(x)
    idle = timed(lambda: interp(x), 200 if quick else 1000)
    print(f"  interpreted call, idle:            {summary(idle)}")
    for phase in ("first compile (imports numba)", "a later compile"):
        scale = float(RNG.uniform(1, 2))  # new constants: new kernels, nothing cached

        def chains(z: Any, scale: float = scale) -> Any:
            a = snp.sqrt(snp.abs(z * scale)) - 1.0
            b = snp.sum(a, axis=1, keepdims=True)
            c = snp.maximum(a / b, 0.0) * scale + 2.0
            d = snp.max(c, axis=1, keepdims=True)
            return snp.sqrt(snp.abs(c - d)) * 3.0 + scale

        target = sv.jit(chains, shapes="b, 16", hot_threshold=1, kernel_process=kernel_process)
        t0 = time.perf_counter()
        target(x)
        busy: list[float] = []
        while target.jit_info()[0]["status"] in ("queued", "compiling"):
            busy += timed(lambda: interp(x), 20)
        target.wait()
        took = (time.perf_counter() - t0) * 1e3
        row = target.jit_info()[0]
        print(f"  {phase}: {row['status']} in {took:.0f} ms, {len(row['patterns'])} patterns")
        print(f"    interpreted calls meanwhile:     {summary(busy)} ({len(busy)} calls)")


def steady(quick: bool) -> None:
    """Interleaved rounds (the machine is shared): the best of the per-round medians."""
    weights = make_mlp()
    specs = ["b, 256", "256, 1024", "1024", "1024, 1024", "1024", "1024, 256", "256", "256"]
    systems = {
        "interpreted": sv.jit(mlp, shapes=specs, jit=False),
        "compiled": sv.jit(mlp, shapes=specs, hot_threshold=1, background=False),
        "no fusion": sv.jit(mlp, shapes=specs, hot_threshold=1, background=False, lowerings=()),
    }
    rounds, n = (3, 10) if quick else (7, 20)
    print(f"{'b':>4}" + "".join(f"{name:>14}" for name in systems) + "  planned / naive bytes")
    for b in (1, 3, 8, 17, 32, 64):
        args = (RNG.normal(size=(b, 256)).astype(np.float32), *weights)
        for f in systems.values():
            f(*args)
            f(*args)
        ref = systems["interpreted"](*args)
        np.testing.assert_allclose(systems["compiled"](*args), ref, rtol=1e-4, atol=1e-5)
        best = {name: float("inf") for name in systems}
        for _ in range(rounds):
            for name, f in systems.items():
                ms = statistics.median(timed(lambda f=f, args=args: f(*args), n))
                best[name] = min(best[name], ms)
        row = next(r for r in systems["compiled"].jit_info() if r["key"] == ("exact", (b,)))
        print(
            f"{b:>4}"
            + "".join(f"{best[name]:>11.3f} ms" for name in systems)
            + f"  {row['planned_bytes']:>9,} / {row['naive_bytes']:,}"
        )


def cold(quick: bool) -> None:
    from shapevm.jit import fusion

    specs = ["b, 256", "256, 1024", "1024", "1024, 1024", "1024", "1024, 256", "256", "256"]
    args = (RNG.normal(size=(4, 256)).astype(np.float32), *make_mlp())
    for label in ("fresh kernel cache", "kernels on disk"):
        fusion.clear_memo()
        if label == "fresh kernel cache":
            os.environ["SHAPEVM_CACHE_DIR"] = tempfile.mkdtemp(prefix="shapevm-bench-")
        f = sv.jit(mlp, shapes=specs, hot_threshold=1, background=False)
        f(*args)
        print(f"compile of the MLP's variant, {label}: {f.jit_info()[0]['compile_ms']:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--gil", choices=["thread", "process"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.gil:
        gil(args.quick, args.gil == "process")
        return
    for mode in ("thread", "process"):
        print(f"== GIL: interpreted calls while a compile runs, kernels compiled in a {mode}")
        subprocess.run([sys.executable, __file__, "--gil", mode, *sys.argv[1:]], check=True)
    print("\n== steady state, W1-style MLP")
    steady(args.quick)
    print("\n== compiling")
    cold(args.quick)


if __name__ == "__main__":
    main()
