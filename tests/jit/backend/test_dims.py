"""The dimension heap: every expression's cell holds its value, for random expressions and
values (hypothesis), computed the way the executor computes it."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import shapevm as sv
from shapevm import native
from shapevm.jit.backend.dims import DimHeap

A, B, C = sv.symbolic_shape("a, b, c")


@st.composite
def exprs(draw: st.DrawFn, depth: int = 3) -> object:
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from([A, B, C, 1, 2, 3, 7]))
    op = draw(st.sampled_from(["+", "-", "*", "//", "%", "max", "min"]))
    x, y = draw(exprs(depth - 1)), draw(exprs(depth - 1))
    if op in ("//", "%"):
        y = draw(st.sampled_from([A, B, 2, 3, A + 1]))
    if op == "max":
        return sv.max_dim(x, y)
    if op == "min":
        return sv.min_dim(x, y)
    return {
        "+": lambda: x + y,
        "-": lambda: x - y,
        "*": lambda: x * y,
        "//": lambda: x // y,
        "%": lambda: x % y,
    }[op]()


@given(e=exprs(), a=st.integers(1, 50), b=st.integers(1, 50), c=st.integers(1, 50))
def test_heap_cells_hold_the_expressions_values(e: object, a: int, b: int, c: int) -> None:
    heap = DimHeap(["a", "b", "c"])
    cell = heap.cell(e)  # type: ignore[arg-type]
    env = {"a": a, "b": b, "c": c}
    want = e if isinstance(e, int) else e.evaluate(env)  # type: ignore[attr-defined]
    assert heap.evaluate(env)[cell] == want


def test_the_executor_computes_the_same_heap() -> None:
    heap = DimHeap(["a", "b"])
    e1 = (A * B + 3) // (A + 1)
    e2 = sv.max_dim(A - B, 2) % 3
    c1, c2 = heap.cell(e1), heap.cell(e2)
    # a region of one copy whose input is [a, b]: the heap comes back from the executor
    from shapevm.jit.backend.nodes import OP_COPY, Kernel, Lowered, Tensor
    from shapevm.jit.backend.plan import build_spec, plan_memory

    f32 = np.dtype(np.float32)
    low = Lowered(
        [Tensor(0, "input", f32, (A, B), arg=0), Tensor(1, "temp", f32, (A, B))],
        [Kernel(OP_COPY, [0], [1])],
        [0],
        [],
        [0],
        [],
    )
    spec = build_spec(low, plan_memory(low), heap)
    ex = native.Executor(spec)
    h = ex.heap(np.zeros((5, 3), np.float32))
    assert (h[c1], h[c2]) == (e1.evaluate({"a": 5, "b": 3}), e2.evaluate({"a": 5, "b": 3}))
