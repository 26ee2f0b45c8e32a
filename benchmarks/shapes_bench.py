"""Symbolic shape engine: shapevm against ``jax.export``, cold and warm.

Run with ``python benchmarks/shapes_bench.py``. JAX is optional; without it only shapevm is
measured. Each row reports the median time of one operation in microseconds.

* cold: every repetition starts from a new scope with new dimension variables (made before
  the clock starts), so no cache of either engine helps; the clock covers building the
  expression and answering the query, as a first query on a new function would;
* warm / cached: the same expressions are queried again and again in one scope.

shapevm analyses a scope's constraints when the scope is made (contradictions are found
there, and each constrained variable's range is computed once); JAX does its work at the
first query. The last row times the scope's creation with the query, for both engines.

The target is at least 2x faster than JAX on every cold row, JAX measured in the same run on
the same machine.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

try:
    import shapevm as sv
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    import shapevm as sv

BOUNDS_SPEC = "max(a, c) + floordiv(a + 4, 2) + mod(b, 3) + 3*a*b - 7"
CONSTRAINTS = ["a >= 16", "b >= 8", "c <= a + b", "d >= c + 2"]
TARGET = 2.0


@dataclass(frozen=True)
class Engine:
    """The operations of one engine that the rows need."""

    name: str
    symbolic_shape: Callable[..., tuple[Any, ...]]
    scope: Callable[[list[str]], Any]
    bounds: Callable[[Any], tuple[Any, Any]]
    max_dim: Callable[[Any, Any], Any]


def shapevm_engine() -> Engine:
    return Engine("shapevm", sv.symbolic_shape, sv.SymbolicScope, sv.bounds, sv.max_dim)


def jax_engine() -> Engine | None:
    try:
        from jax import export
        from jax._src import core
        from jax._src.export import shape_poly
    except ImportError:
        return None

    def bounds(e: Any) -> tuple[Any, Any]:
        # JAX has no public bounds API; this is what its comparisons use, at full precision.
        lo, hi = shape_poly._bounds_decision(e, shape_poly.BoundsPrecision.BEST)
        return lo, hi

    return Engine("JAX", export.symbolic_shape, export.SymbolicScope, bounds, core.max_dim)


# -------------------------------------------------------------------------------------
# Timing


def median_us(
    op: Callable[[Any], object], setup: Callable[[], Any], budget_s: float, batch: int = 1
) -> float:
    """Median time of ``op(state)`` in µs; ``setup()`` (not timed) makes a fresh state.

    ``batch`` > 1 times that many calls on one state together, for operations so fast that
    the clock itself would dominate a single call.
    """
    samples: list[float] = []
    deadline = time.perf_counter() + budget_s
    gc.collect()
    gc.disable()
    try:
        while len(samples) < 20 or (time.perf_counter() < deadline and len(samples) < 20000):
            state = setup()
            start = time.perf_counter_ns()
            for _ in range(batch):
                op(state)
            samples.append((time.perf_counter_ns() - start) / batch / 1000)
    finally:
        gc.enable()
    return statistics.median(samples)


# -------------------------------------------------------------------------------------
# Rows: (label, cold?, measure(engine, budget) -> µs)


def parse_cold(eng: Engine, budget: float) -> float:
    return median_us(lambda _: eng.symbolic_shape("a, b, c"), lambda: None, budget)


def _dims(eng: Engine, spec: str, constraints: Sequence[str] = ()) -> tuple[Any, ...]:
    return eng.symbolic_shape(spec, scope=eng.scope(list(constraints)))


def _expect(answer: bool) -> None:
    if answer is not True:
        raise AssertionError("the engine answered the benchmark query differently")


def compare_cold(eng: Engine, budget: float) -> float:
    def query(dims: tuple[Any, ...]) -> None:
        a, b = dims
        _expect(a * 2 + b >= 3)

    return median_us(query, lambda: _dims(eng, "a, b"), budget)


def compare_warm(eng: Engine, budget: float) -> float:
    a, b = _dims(eng, "a, b")
    e = a * 2 + b
    _expect(e >= 3)
    return median_us(lambda _: e >= 3, lambda: None, budget, batch=100)


def _bounds_expr(eng: Engine, a: Any, b: Any, c: Any) -> Any:
    return eng.max_dim(a, c) + (a + 4) // 2 + b % 3 + 3 * a * b - 7


def bounds_cold(eng: Engine, budget: float) -> float:
    def query(dims: tuple[Any, ...]) -> None:
        eng.bounds(_bounds_expr(eng, *dims))

    return median_us(query, lambda: _dims(eng, "a, b, c"), budget)


def bounds_cached(eng: Engine, budget: float) -> float:
    e = _bounds_expr(eng, *_dims(eng, "a, b, c"))
    eng.bounds(e)
    return median_us(lambda _: eng.bounds(e), lambda: None, budget, batch=100)


def constrained_cold(eng: Engine, budget: float) -> float:
    def query(dims: tuple[Any, ...]) -> None:
        a, _, _, d = dims
        _expect(d + a >= 19)  # needs d >= c + 2 >= 3 and a >= 16

    return median_us(query, lambda: _dims(eng, "a, b, c, d", CONSTRAINTS), budget)


def constrained_with_scope(eng: Engine, budget: float) -> float:
    def query(_: None) -> None:
        a, _, _, d = _dims(eng, "a, b, c, d", CONSTRAINTS)
        _expect(d + a >= 19)

    return median_us(query, lambda: None, budget)


ROWS: list[tuple[str, bool, Callable[[Engine, float], float]]] = [
    ('`symbolic_shape("a, b, c")`', True, parse_cold),
    ("`a*2 + b >= 3` cold", True, compare_cold),
    ("`a*2 + b >= 3` warm", False, compare_warm),
    (f"`bounds({BOUNDS_SPEC})` cold", True, bounds_cold),
    (f"`bounds({BOUNDS_SPEC})` cached", False, bounds_cached),
    ("`d + a >= 19` under 4 linear constraints, cold", True, constrained_cold),
    ("the same, the scope's creation timed too", False, constrained_with_scope),
]


def check_same_answers(engines: list[Engine]) -> None:
    """Both engines must give the same bounds for the benchmarked expression."""
    answers = {eng.name: eng.bounds(_bounds_expr(eng, *_dims(eng, "a, b, c"))) for eng in engines}
    if len(set(answers.values())) > 1:
        print(f"note: the engines' bounds differ: {answers}")


def fmt_us(us: float) -> str:
    return f"{us:,.1f}" if us < 1000 else f"{us:,.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="shapevm vs jax.export symbolic shapes")
    parser.add_argument(
        "--budget", type=float, default=1.0, help="seconds of measuring per row and engine"
    )
    parser.add_argument("--no-jax", action="store_true", help="measure shapevm only")
    args = parser.parse_args(argv)

    ours = shapevm_engine()
    theirs = None if args.no_jax else jax_engine()
    engines = [ours] if theirs is None else [ours, theirs]
    check_same_answers(engines)

    jax_mod: ModuleType | None = sys.modules.get("jax")
    versions = f"shapevm {getattr(sv, '__version__', '?')}"
    if theirs is not None and jax_mod is not None:
        versions += f", JAX {jax_mod.__version__}"
    else:
        versions += ", JAX not installed (pip install 'shapevm[bench]')"
    print(
        f"# symbolic shapes: {versions}; Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; medians in µs\n"
    )
    print(f"| row | shapevm | JAX | JAX/shapevm | target (cold: ≥{TARGET:g}×) |")
    print("|---|---:|---:|---:|---|")
    misses = 0
    for label, cold, measure in ROWS:
        us = measure(ours, args.budget)
        if theirs is None:
            print(f"| {label} | {fmt_us(us)} | — | — | {'not measured' if cold else '—'} |")
            continue
        jax_us = measure(theirs, args.budget)
        ratio = jax_us / us if us > 0 else math.inf
        verdict = "—"
        if cold:
            met = ratio >= TARGET
            misses += not met
            verdict = "met" if met else "**missed**"
        print(f"| {label} | {fmt_us(us)} | {fmt_us(jax_us)} | {ratio:.2f}× | {verdict} |")
    if theirs is not None:
        print(f"\ncold rows under the {TARGET:g}× target: {misses}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
