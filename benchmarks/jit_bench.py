"""The JIT's tiers, measured: what a call costs and what compiling costs.

1. overhead: a jitted function of one small elementwise op, against the executor called
   directly and against NumPy (the target: the executor's per-call overhead <= 10 us);
2. new shapes: the first call on each new shape once the function is native, against the
   same shape's steady time (target: <= 1.5x), in fresh processes, beside ONNX Runtime's
   (when installed) measured the same way: calls back to back as in a stream, and after a
   pause (which costs any call on a shared virtual machine, a shape seen before too);
3. tier 3: the compile time of generated chains in a fresh cache (target: median <= 200 ms),
   and a second process on the same cache (target: it compiles nothing);
4. GIL: interpreted calls of one function while another's chains compile in the background;
5. tiers: interpreter, native executor (tier 2) and generated code (tier 3) side by side on
   a function of elementwise chains.

Run: ``python benchmarks/jit_bench.py`` (``--quick`` for fewer repetitions,
``--only overhead,tier3`` for some sections). Each section interleaves what it compares,
round by round, and reports medians: the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
sys.path.insert(0, SRC)  # this checkout, even if another one is installed

import numpy as np  # noqa: E402

import shapevm as sv  # noqa: E402
import shapevm.numpy as snp  # noqa: E402

RNG = np.random.default_rng(0)
SECTIONS = ["overhead", "new-shapes", "tier3", "gil", "tiers"]


def timed(fn: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def median_us(fn: Callable[[], Any], n: int) -> float:
    return statistics.median(timed(fn, n))


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def hot(f: Any, x: np.ndarray) -> None:
    """Call ``f`` as a user's program would until it is hot (default options: three
    calls), then wait for its background compiles."""
    for _ in range(3):
        f(x)
    f.wait(120)


def overhead(quick: bool) -> None:
    x = np.ones((2, 8), np.float32)
    f = sv.jit(lambda v: v * 2.0, shapes="b, 8")  # default options
    hot(f, x)
    (engine,) = f.engines
    direct = engine.variant(("exact", (2,))).function.direct
    rows: dict[str, list[float]] = {"jitted call": [], "executor alone": [], "NumPy x * 2.0": []}
    n = 2000 if quick else 10000
    for _ in range(5):
        rows["jitted call"].append(median_us(lambda: f(x), n))
        rows["executor alone"].append(median_us(lambda: direct(x), n))
        rows["NumPy x * 2.0"].append(median_us(lambda: x * 2.0, n))
    print(f"| call of one tiny op ({load()}) | median of 5 rounds |")
    print("|---|---|")
    for name, us in rows.items():
        print(f"| {name} | {statistics.median(us):.2f} us |")


PAUSE_S = 0.01
NEW_SHAPE_SYSTEMS = ("shapevm-jit", "onnxruntime")


def new_shapes_child(system_name: str, workload: str, pause: bool) -> None:
    """In a fresh process: the system built and called until hot on the first shape; then
    for each further shape, ten calls of the shape before it, then (``pause``: after
    PAUSE_S of sleep) the first call of the new shape, and its steady time. With ``pause``
    also a shape already seen, called after the same sleep: what the pause alone costs.
    Prints one JSON line of ratios to the steady times, and the minor page faults of each
    first call."""
    from shapevm.models import workloads as wl
    from shapevm.tools.bench.registry import get_system

    system = get_system(system_name)
    weights = wl.make_weights(workload)
    shapes = wl.get_workload(workload).shapes
    xs = [wl.make_input(workload, shape, i) for i, shape in enumerate(shapes)]  # ahead
    if system.prepare is not None:
        system.prepare(workload, weights)
    fn = system.build(workload, weights)  # default options
    for _ in range(4):
        fn(xs[0])
    settle = getattr(fn, "settle", None)
    if settle is not None:
        settle()
    first, seen, faults = [], [], []
    for before, x in itertools.pairwise(xs):
        for _ in range(10):
            fn(before)
        if pause:
            time.sleep(PAUSE_S)
        minflt = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t = timed(lambda x=x: fn(x), 1)[0]
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - minflt)
        steady = median_us(lambda x=x: fn(x), 30)
        first.append(t / steady)
        if pause:
            time.sleep(PAUSE_S)
            seen.append(timed(lambda x=x: fn(x), 1)[0] / steady)
    print(json.dumps({"first": first, "seen": seen, "faults": faults}))


def new_shapes(quick: bool) -> None:
    """(b) in fresh processes, for the JIT and (when installed) ONNX Runtime: calls back to
    back as in a stream, and after a pause of PAUSE_S, which costs a call on this kind of
    machine (cores and caches gone cold) whatever its shape."""
    from shapevm.models import workloads as wl
    from shapevm.tools.bench.env import set_thread_env
    from shapevm.tools.bench.registry import get_system

    systems = [s for s in NEW_SHAPE_SYSTEMS if get_system(s).is_available()[0]]
    env = dict(os.environ)
    set_thread_env(env, 2)
    runs = 3 if quick else 5
    ms = PAUSE_S * 1e3
    print(f"first call on a new shape / its steady time, medians of {runs} fresh processes "
          f"({load()}); after a {ms:.0f} ms pause, also a shape seen before:")  # fmt: skip
    cols = [f"{s}: back to back" for s in systems]
    cols += [f"{s}: after a pause, new / seen" for s in systems]
    print("| workload | shape | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 2) + "|")
    for workload in ("W1", "W2", "W3"):
        found: dict[tuple[str, bool], list[dict[str, list[float]]]] = {}
        for _ in range(runs):  # interleaved: the machine's load changes
            for system in systems:
                for pause in (False, True):
                    out = subprocess.run(
                        [sys.executable, __file__, "--new-shapes-child",
                         f"{system},{workload},{int(pause)}"],
                        env=env, capture_output=True, text=True, check=True,
                    )  # fmt: skip
                    data = json.loads(out.stdout.strip().splitlines()[-1])
                    found.setdefault((system, pause), []).append(data)

        def med(system: str, pause: bool, what: str, i: int, found: Any = found) -> float:
            return float(statistics.median(d[what][i] for d in found[(system, pause)]))

        for i, shape in enumerate(wl.get_workload(workload).shapes[1:]):
            cells = [f"{med(s, False, 'first', i):.2f}" for s in systems]
            cells += [
                f"{med(s, True, 'first', i):.2f} / {med(s, True, 'seen', i):.2f}" for s in systems
            ]
            label = wl.get_workload(workload).label(shape)
            print(f"| {workload} | {label} | " + " | ".join(cells) + " |")
        # the page faults of each first call (back to back): a grown arena's new pages
        new = len(wl.get_workload(workload).shapes) - 1
        faults = "; ".join(
            f"{s}: " + ", ".join(f"{med(s, False, 'faults', i):.0f}" for i in range(new))
            for s in systems
        )
        print(f"\n{workload}, page faults of the first call of each new shape ({faults})\n")


def _chains(seed: int) -> Callable[[Any], Any]:
    scale = 1.0 + seed / 7.0  # a different constant: a different kernel

    def chains(z: Any) -> Any:
        a = snp.sqrt(snp.abs(z * scale)) - 1.0
        b = snp.sum(a, axis=1, keepdims=True)
        c = snp.maximum(a / b, 0.0) * scale + 2.0
        return snp.tanh(c) * snp.exp(-c * 0.1)

    return chains


def tier3_child(count: int) -> None:
    """In a fresh process: compile `count` functions' chains; print what tier 3 did."""
    # 1024 rows: chains large enough for generated code with the default options
    # (`tier3_min_elements`)
    x = RNG.normal(size=(1024, 64)).astype(np.float32)
    rows = []
    for seed in range(count):
        f = sv.jit(_chains(seed), shapes="b, 64")  # default options
        hot(f, x)
        rows += f.jit_info()
    from shapevm.jit import stats

    print(json.dumps({
        "tier3_ms": [r["tier3_ms"] for r in rows],
        "library_ms": [ms for r in rows for ms in r["tier3_build_ms"]],
        "builds": stats.COUNTERS.tier3_builds,
        "states": sorted({r["tier3"] for r in rows}),
    }))  # fmt: skip


def tier3(quick: bool) -> None:
    count = 4 if quick else 8
    cache = tempfile.mkdtemp(prefix="shapevm-bench-cache-")
    env = dict(os.environ, SHAPEVM_CACHE_DIR=cache)
    print(f"tier 3 ({load()}): {count} functions, each a few chains, in fresh processes")
    for label in ("empty cache", "the same cache, a second process"):
        out = subprocess.run(
            [sys.executable, __file__, "--tier3-child", str(count)],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        data = json.loads(out.stdout.strip().splitlines()[-1])
        ms = [m for m in data["tier3_ms"] if m > 0]
        builds = data["builds"]
        print(
            f"- {label}: {builds} libraries compiled"
            + (f", {statistics.median(ms):.0f} ms per function (median)" if ms else "")
            + (f", {sum(ms) / builds:.0f} ms per library (mean)" if ms and builds else "")
            + (
                f", {statistics.median(data['library_ms']):.0f} ms per library (median)"
                if data["library_ms"]
                else ""
            )
            + f"; states {data['states']}"
        )


def gil(quick: bool) -> None:
    x = RNG.normal(size=(8, 16)).astype(np.float32)
    interp = sv.jit(lambda v: snp.tanh(v * 1.5) + 0.5, shapes="b, 16", jit=False)
    interp(x)
    idle = timed(lambda: interp(x), 500 if quick else 2000)
    target = sv.jit(_chains(99), shapes="b, 16")  # default options: hot at the third call
    big = RNG.normal(size=(4096, 16)).astype(np.float32)  # past tier3_min_elements
    for _ in range(3):
        target(big)
    busy: list[float] = []
    while any(r["tier3"] in ("", "compiling") for r in target.jit_info()):
        busy += timed(lambda: interp(x), 20)
        if len(busy) > 200_000:
            break
    target.wait()

    def summary(us: list[float]) -> str:
        us = sorted(us)
        return f"median {statistics.median(us):.1f} us, p99 {us[int(0.99 * (len(us) - 1))]:.1f}"

    print(f"interpreted call while tier 3 compiles in the background ({load()}):")
    print(f"- idle: {summary(idle)}")
    print(f"- during the compile: {summary(busy)} ({len(busy)} calls)")


def tiers(quick: bool) -> None:
    fn = _chains(3)
    systems = {
        "interpreter": sv.jit(fn, shapes="b, 1024", jit=False),
        # tier 2 alone needs tier 3 off; otherwise the options a user gets
        "tier 2 (tile interpreter)": sv.jit(fn, shapes="b, 1024", tier3=False),
        "tier 3 (generated C)": sv.jit(fn, shapes="b, 1024"),
    }
    print(f"| rows x 1024 ({load()}) | " + " | ".join(systems) + " |")
    print("|---" * (len(systems) + 1) + "|")
    for b in (1, 16, 256):
        x = RNG.normal(size=(b, 1024)).astype(np.float32)
        for f in systems.values():
            hot(f, x)
        rounds: dict[str, list[float]] = {name: [] for name in systems}
        for _ in range(3 if quick else 7):
            for name, f in systems.items():
                rounds[name].append(median_us(lambda f=f, x=x: f(x), 20))
        cells = " | ".join(f"{statistics.median(v):.1f} us" for v in rounds.values())
        print(f"| {b} | {cells} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default=",".join(SECTIONS))
    parser.add_argument("--tier3-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--new-shapes-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tier3_child:
        tier3_child(args.tier3_child)
        return
    if args.new_shapes_child:
        system, workload, pause = args.new_shapes_child.split(",")
        new_shapes_child(system, workload, pause == "1")
        return
    run = {"overhead": overhead, "new-shapes": new_shapes, "tier3": tier3, "gil": gil,
           "tiers": tiers}  # fmt: skip
    for name in args.only.split(","):
        print(f"\n== {name}")
        run[name](args.quick)


if __name__ == "__main__":
    main()
