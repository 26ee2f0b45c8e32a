"""shapevm's thread pool on this machine: where it pays, what a launch costs, how long its
workers spin, and what NumPy's OpenBLAS does to it.

Run with ``python benchmarks/pool_bench.py [--quick]``. Prints markdown tables; every
comparison is measured in one process, interleaved round by round, medians, with the load
average printed beside it (on a shared machine the second core is often not free, and
then the pool cannot pay: read the ``late_jobs`` and ``backed_off_calls`` counters).

- **sizes**: a dense layer on the calling thread against the pool (workers spinning: the
  call follows another), from 2^16 to 2^24 multiply-adds: where the pool starts paying;
- **launch**: a job of two 20 us tasks (a worker that joins halves it) on the calling
  thread, on the pool with spinning workers, and with sleeping ones (1 ms pause);
- **spin**: the process's CPU time while it sleeps after a call: how long pool workers spin,
  shapevm's and OpenBLAS's (after a 256 x 256 NumPy product);
- **numpy**: a dense layer right after a 256 x 256 NumPy product (OpenBLAS's worker spins
  on the other core for ~0.1 s) and after a quiet pause, on the pool and on one thread.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

try:
    from shapevm import _native, native
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    from shapevm import _native, native

Array = np.ndarray[Any, Any]
SIZES = ((1, 256, 256), (1, 256, 1024), (4, 256, 256), (1, 1024, 1024), (3, 256, 1024),
         (16, 256, 256), (8, 256, 1024), (16, 256, 768), (64, 256, 1024))  # fmt: skip


def _layer(m: int, k: int, n: int) -> tuple[Array, Any, Array]:
    rng = np.random.default_rng(0)
    packed = native.pack_dense(rng.standard_normal((k, n)).astype(np.float32))
    return rng.standard_normal((m, k)).astype(np.float32), packed, np.empty((m, n), np.float32)


def _dense(x: Array, packed: Any, out: Array, threads: int) -> Callable[[], object]:
    return lambda: native.dense(x, packed, out=out, threads=threads)


def _median_us(samples: list[int]) -> float:
    return statistics.median(samples) / 1e3


def _timed(call: Callable[[], object]) -> int:
    t0 = time.perf_counter_ns()
    call()
    return time.perf_counter_ns() - t0


def sizes(rounds: int, shapes: tuple[tuple[int, int, int], ...] = SIZES) -> list[str]:
    """Rows: a dense layer on the calling thread and on the pool, right after another call."""
    rows = ["| m x k x n | multiply-adds | calling thread µs | pool µs | pool / thread |",
            "|---|--:|--:|--:|--:|"]  # fmt: skip
    for m, k, n in shapes:
        x, packed, out = _layer(m, k, n)
        got: dict[int, list[int]] = {1: [], 2: []}
        for _ in range(rounds):
            for t in (1, 2):
                call = _dense(x, packed, out, t)
                call()  # the workers are awake
                got[t].append(_timed(call))
        one, two = _median_us(got[1]), _median_us(got[2])
        rows.append(f"| {m}x{k}x{n} | {m * k * n:,} | {one:.1f} | {two:.1f} | {two / one:.2f} |")
    return rows


def launch(rounds: int) -> list[str]:
    """Rows: a job of two 20 us tasks, serial, with spinning workers, with sleeping ones."""
    rows = ["| pool | median µs | p90 µs | jobs a worker joined |", "|---|--:|--:|--:|"]
    for name, threads, pause in (("calling thread", 1, 0.0), ("workers spinning", 2, 0.0),
                                 ("workers asleep (1 ms pause)", 2, 0.001)):  # fmt: skip
        native.set_num_threads(threads)
        times, joined = [], 0
        for _ in range(rounds):
            if pause:
                time.sleep(pause)
            else:
                _native._pool_probe(2, 20, 0)
            t0 = time.perf_counter_ns()
            _, by_workers = _native._pool_probe(2, 20, 0)
            times.append(time.perf_counter_ns() - t0)
            joined += by_workers > 0
        times.sort()
        rows.append(f"| {name} | {_median_us(times):.1f} | {times[len(times) * 9 // 10] / 1e3:.1f} "
                    f"| {joined / rounds:.0%} |")  # fmt: skip
    native.set_num_threads(0)
    return rows


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def spin(rounds: int) -> list[str]:
    """Rows: CPU time of the process during a sleep right after a call (the spinning)."""
    x, packed, out = _layer(64, 512, 512)
    a = np.random.default_rng(1).standard_normal((256, 256)).astype(np.float32)
    rows = ["| after | sleep | CPU time of the process while it slept (median) |", "|---|--:|--:|"]
    for name, call in (("shapevm dense on the pool", lambda: native.dense(x, packed, out=out)),
                       ("NumPy 256 x 256 product", lambda: a @ a)):  # fmt: skip
        for sleep in (0.001, 0.05):
            spent = []
            for _ in range(rounds):
                time.sleep(0.3)  # everything asleep
                call()
                c0 = _cpu_s()
                time.sleep(sleep)
                spent.append(_cpu_s() - c0)
            rows.append(
                f"| {name} | {sleep * 1e3:g} ms | {statistics.median(spent) * 1e3:.2f} ms |"
            )
    return rows


def after_numpy(rounds: int) -> list[str]:
    """Rows: a dense layer right after a NumPy product, and after a quiet pause."""
    a = np.random.default_rng(1).standard_normal((256, 256)).astype(np.float32)
    rows = ["| m x k x n | after NumPy, pool | after NumPy, 1 thread | quiet, pool | "
            "quiet, 1 thread |", "|---|--:|--:|--:|--:|"]  # fmt: skip
    for m, k, n in ((1, 1024, 1024), (8, 256, 1024), (17, 1024, 1024), (64, 256, 1024)):
        x, packed, out = _layer(m, k, n)
        got: dict[tuple[bool, int], list[int]] = {}
        for _ in range(rounds):
            for quiet in (False, True):
                for t in (2, 1):
                    call = _dense(x, packed, out, t)
                    if quiet:
                        time.sleep(0.15)  # OpenBLAS's worker sleeps again
                        call()
                    else:
                        a @ a
                    got.setdefault((quiet, t), []).append(_timed(call))
        cells = [f"{_median_us(got[(q, t)]):.0f}" for q in (False, True) for t in (2, 1)]
        rows.append(f"| {m}x{k}x{n} | " + " | ".join(cells) + " |")
    return rows


SECTIONS = {"sizes": sizes, "launch": launch, "spin": spin, "numpy": after_numpy}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few rounds: a smoke run")
    parser.add_argument("--only", default=",".join(SECTIONS), help="default: %(default)s")
    args = parser.parse_args(argv)
    native.set_num_threads(0)
    print(f"load average {os.getloadavg()[0]:.2f}; {native.info()['num_threads']} threads")
    for name in args.only.split(","):
        rounds = {"sizes": 30, "launch": 200, "spin": 9, "numpy": 25}[name]
        rounds = max(2, rounds // 10) if args.quick else rounds
        print(f"\n### {name}\n\n" + "\n".join(SECTIONS[name](rounds)))
    print(f"\nload average {os.getloadavg()[0]:.2f}; pool counters {native.info()['pool']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
