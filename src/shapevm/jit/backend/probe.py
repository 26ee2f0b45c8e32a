"""What a subgraph computes, found by running it: its ops evaluated in float64 on probe
inputs with the op table's reference kernels, then compared with a known function.

The activations fused into a matrix product (`lower.match_activation`, a function of one
value) and the row operations (`rowpatterns`, a function of one row) are both recognised
this way, so how a user spelled them does not matter, only what they compute.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from shapevm.jit.graph import RegionGraph


def ancestors(graph: RegionGraph, members: Iterable[int], end: int) -> list[int]:
    """The positions among ``members`` that ``end`` depends on (``end`` included), in
    order."""
    inside = set(members)
    need = {end}
    todo = [end]
    while todo:
        for vid in graph.ops[todo.pop()].ins:
            producer = graph.value(vid).producer
            if producer in inside and producer not in need:
                need.add(producer)
                todo.append(producer)
    return sorted(need)


def evaluate(
    low: Any,
    inputs: Mapping[int, Any],
    positions: Iterable[int],
    dims: Mapping[str, int] | None = None,
) -> Any:
    """The value of the last of ``positions`` (ops of ``low``'s graph, in order) with
    ``inputs`` (value id to array) and the region's constants, in float64; ``dims`` gives
    the dimension variables their values where an op's attributes hold dimensions
    (``iota``'s size, a reshape's shape). An op that does not evaluate raises (the caller
    reads that as "not this pattern")."""
    env: dict[int, Any] = dict(inputs)
    out = None
    for pos in positions:
        op = low.graph.ops[pos]
        attrs = op.attrs
        if op.dims_attrs:
            if dims is None:
                raise ValueError(f"{op.info.name} needs the dimensions' values")
            attrs = dict(attrs)
            for key in op.dims_attrs:
                attrs[key] = tuple(
                    d if isinstance(d, int) else d.evaluate(dims) for d in attrs[key]
                )
        args = []
        for kind, val in low.literals(op):
            if kind == "c":
                args.append(val)
            elif val in env:
                args.append(env[val])
            else:
                args.append(np.asarray(low.const_array(val), np.float64))
        assert op.info is not None
        (res,) = op.info.kernel(args, attrs)
        out = env[op.outs[0]] = np.asarray(res, np.float64)
    return out


def spread(shape: tuple[int, ...], seed: int) -> Any:
    """Values in (-1.7, 1.7) with unit variance, irregular along every axis, the same on
    every call: a golden-ratio sequence (numpy.random would cost its import, 10-20 ms, on
    the first lowering of a process)."""
    n = int(np.prod(shape)) if shape else 1
    k = np.arange(1, n + 1, dtype=np.float64) + 0.7548776662466927 * seed
    u = (k * 0.6180339887498949 + k * k * 0.5698402909980532e-3) % 1.0
    return ((u * 2.0 - 1.0) * np.sqrt(3.0)).reshape(shape)


def close(got: Any, want: Any) -> bool:
    """Equal shapes, and values within 1e-6 (relative above 1)."""
    return bool(
        got.shape == want.shape
        and np.all(np.abs(got - want) <= 1e-6 * np.maximum(1.0, np.abs(want)))
    )
